"""The authorizer's decisions (Kafka's AclAuthorizer rules) and the ACL store's formats,
without a broker: an in-memory store stands for the file (the same interface)."""

from __future__ import annotations

import json

import pytest

from kafkapy.metadata import acl_store
from kafkapy.protocol import acls as A
from kafkapy.server.security.authorizer import Authorizer, parse_super_users

ALICE, BOB, HOST = "User:alice", "User:bob", "10.0.0.1"


class MemoryStore:
    """``acl_store``'s interface over a dict; ``generation`` moves on each change."""

    def __init__(self):
        self.acls, self.generation, self.seen = {}, 0, -1

    def changed(self):
        return self.seen != self.generation

    def current(self):
        self.seen = self.generation
        return self.acls

    def update(self, resource, change):
        old = self.acls.get(resource, frozenset())
        new = frozenset(change(old))
        self.acls = {**self.acls, resource: new} if new else {k: v for k, v in self.acls.items() if k != resource}
        self.generation += 1
        return old, new


def entry(principal, op, perm=A.ALLOW, host="*"):
    return A.AccessControlEntry(principal, host, op, perm)


def make(*bindings, super_users=(), allow_if_none=False):
    store = MemoryStore()
    auth = Authorizer(store, frozenset(super_users), allow_if_none)
    for (rtype, name, pattern), e in bindings:
        auth.create(A.ResourcePattern(rtype, name, pattern), [e])
    return auth


def ok(auth, principal, op, rtype, name, host=HOST):
    return auth.authorize(principal, host, op, rtype, name)


def test_literal_allow_and_implied_describe():
    auth = make(((A.TOPIC, "t", A.LITERAL), entry(ALICE, A.WRITE)))
    assert ok(auth, ALICE, A.WRITE, A.TOPIC, "t")
    assert ok(auth, ALICE, A.DESCRIBE, A.TOPIC, "t")  # Write implies Describe
    assert not ok(auth, ALICE, A.READ, A.TOPIC, "t")
    assert not ok(auth, BOB, A.WRITE, A.TOPIC, "t")
    assert not ok(auth, ALICE, A.WRITE, A.TOPIC, "other")  # no ACLs there: denied by default


def test_alter_configs_implies_describe_configs_and_all_covers_everything():
    auth = make(((A.TOPIC, "t", A.LITERAL), entry(ALICE, A.ALTER_CONFIGS)),
                ((A.GROUP, "g", A.LITERAL), entry(ALICE, A.ALL)))
    assert ok(auth, ALICE, A.DESCRIBE_CONFIGS, A.TOPIC, "t")
    assert not ok(auth, ALICE, A.DESCRIBE, A.TOPIC, "t")
    assert all(ok(auth, ALICE, op, A.GROUP, "g") for op in (A.READ, A.DESCRIBE, A.DELETE))


def test_deny_wins_but_implied_operations_are_allow_only():
    auth = make(((A.TOPIC, "t", A.LITERAL), entry("User:*", A.READ)),
                ((A.TOPIC, "t", A.LITERAL), entry(ALICE, A.READ, A.DENY)))
    assert not ok(auth, ALICE, A.READ, A.TOPIC, "t")
    assert ok(auth, BOB, A.READ, A.TOPIC, "t")
    assert ok(auth, ALICE, A.DESCRIBE, A.TOPIC, "t")  # Deny Read does not deny Describe
    auth.create(A.ResourcePattern(A.TOPIC, "*", A.LITERAL), [entry(ALICE, A.ALL, A.DENY)])
    assert not ok(auth, ALICE, A.DESCRIBE, A.TOPIC, "t")  # Deny All does


def test_prefixed_patterns_and_hosts():
    auth = make(((A.TOPIC, "pay", A.PREFIXED), entry(ALICE, A.READ, host=HOST)),
                ((A.TOPIC, "payroll", A.LITERAL), entry(ALICE, A.READ, A.DENY)))
    assert ok(auth, ALICE, A.READ, A.TOPIC, "payments")
    assert not ok(auth, ALICE, A.READ, A.TOPIC, "payments", host="10.0.0.2")  # another host
    assert not ok(auth, ALICE, A.READ, A.TOPIC, "payroll")
    assert not ok(auth, ALICE, A.READ, A.TOPIC, "pa")  # shorter than the prefix
    assert not ok(auth, ALICE, A.READ, A.GROUP, "payments")  # another resource type


def test_super_users_and_allow_everyone_if_no_acl_found():
    assert parse_super_users(" User:admin ;User:broker;") == {"User:admin", "User:broker"}
    with pytest.raises(ValueError):
        parse_super_users("admin")
    auth = make(((A.TOPIC, "t", A.LITERAL), entry(BOB, A.READ)), super_users={"User:admin"}, allow_if_none=True)
    assert ok(auth, "User:admin", A.DELETE, A.TOPIC, "t")
    assert ok(auth, ALICE, A.READ, A.TOPIC, "no-acls")  # nothing on it at all
    assert not ok(auth, ALICE, A.READ, A.TOPIC, "t")  # ACLs exist, none for alice


def test_decisions_follow_changes():
    auth = make()
    assert not ok(auth, ALICE, A.READ, A.TOPIC, "t")
    auth.create(A.ResourcePattern(A.TOPIC, "t", A.LITERAL), [entry(ALICE, A.READ)])
    assert ok(auth, ALICE, A.READ, A.TOPIC, "t")  # the memo was dropped with the generation
    removed = auth.delete(A.ResourcePattern(A.TOPIC, "t", A.LITERAL), lambda e: e.principal == ALICE)
    assert removed == {entry(ALICE, A.READ)}
    assert not ok(auth, ALICE, A.READ, A.TOPIC, "t")


def test_authorize_by_resource_type():
    """Kafka's authorizeByResourceType (InitProducerId without a transactional id)."""
    auth = make(((A.TOPIC, "a", A.PREFIXED), entry(ALICE, A.WRITE)))
    assert auth.allowed_by_resource_type(ALICE, HOST, A.WRITE, A.TOPIC)
    assert not auth.allowed_by_resource_type(BOB, HOST, A.WRITE, A.TOPIC)
    auth.create(A.ResourcePattern(A.TOPIC, "a", A.PREFIXED), [entry(ALICE, A.WRITE, A.DENY)])
    assert not auth.allowed_by_resource_type(ALICE, HOST, A.WRITE, A.TOPIC)  # a dominating prefix deny
    auth = make(((A.TOPIC, "x", A.LITERAL), entry(ALICE, A.WRITE)),
                ((A.TOPIC, "*", A.LITERAL), entry(ALICE, A.WRITE, A.DENY)))
    assert not auth.allowed_by_resource_type(ALICE, HOST, A.WRITE, A.TOPIC)  # a literal * deny


def test_filters_match_as_kafkas():
    literal, star, prefix = (A.ResourcePattern(A.TOPIC, "foo", A.LITERAL), A.ResourcePattern(A.TOPIC, "*", A.LITERAL),
                             A.ResourcePattern(A.TOPIC, "fo", A.PREFIXED))
    match = A.ResourcePatternFilter(A.TOPIC, "foo", A.MATCH)
    assert match.matches(literal) and match.matches(star) and match.matches(prefix)
    assert not A.ResourcePatternFilter(A.TOPIC, "foo", A.PT_ANY).matches(star)
    assert A.ResourcePatternFilter(A.RT_ANY, None, A.PT_ANY).matches(prefix)
    assert not A.ResourcePatternFilter(A.GROUP, None, A.PT_ANY).matches(literal)
    assert str(literal) == "ResourcePattern(resourceType=TOPIC, name=foo, patternType=LITERAL)"
    assert str(entry(ALICE, A.DESCRIBE_CONFIGS)) == \
        "(principal=User:alice, host=*, operation=DESCRIBE_CONFIGS, permissionType=ALLOW)"


def test_zookeeper_formats_are_kafkas():
    r = A.ResourcePattern(A.TRANSACTIONAL_ID, "tx", A.PREFIXED)
    assert acl_store.resource_path(r) == "/kafka-acl-extended/prefixed/TransactionalId/tx"
    assert acl_store.resource_path(A.ResourcePattern(A.TOPIC, "t", A.LITERAL)) == "/kafka-acl/Topic/t"
    data = acl_store.encode_acls({entry(ALICE, A.DESCRIBE_CONFIGS, A.DENY)})
    assert json.loads(data) == {"version": 1, "acls": [{"principal": "User:alice", "permissionType": "Deny",
                                                        "operation": "DescribeConfigs", "host": "*"}]}
    assert acl_store.decode_acls(data) == {entry(ALICE, A.DESCRIBE_CONFIGS, A.DENY)}
    assert acl_store.encode_change(A.ResourcePattern(A.TOPIC, "t:x", A.LITERAL)) == b"TOPIC:t:x"
    assert acl_store.decode_change(b"TOPIC:t:x", False) == A.ResourcePattern(A.TOPIC, "t:x", A.LITERAL)
    assert json.loads(acl_store.encode_change(r)) == {"version": 1, "resourceType": "TRANSACTIONAL_ID",
                                                      "name": "tx", "patternType": "PREFIXED"}
    assert acl_store.decode_change(acl_store.encode_change(r), True) == r
    assert acl_store.resource_from_path("/kafka-acl/Group/g") == A.ResourcePattern(A.GROUP, "g", A.LITERAL)


def test_embedded_store_persists_and_publishes(tmp_path):
    from kafkapy.storage.shared import SharedPartitionTable

    table = SharedPartitionTable(16, str(tmp_path / "table.lock"))
    writer, reader = acl_store.EmbeddedAclStore(str(tmp_path), table), acl_store.EmbeddedAclStore(str(tmp_path), table)
    r = A.ResourcePattern(A.TOPIC, "t", A.LITERAL)
    assert reader.current() == {}
    writer.update(r, lambda old: old | {entry(ALICE, A.READ)})
    assert reader.changed() and reader.current() == {r: {entry(ALICE, A.READ)}}
    assert not reader.changed()
    writer.update(r, lambda old: frozenset())
    assert reader.current() == {}


def test_a_repeated_check_is_a_memo_lookup():
    """What docs/architecture.md says of the cost: a decision is made once
    (``_decide`` scans the ACLs) and later checks of the same principal, host,
    operation and resource only look it up, until the ACLs change. Counted,
    not timed: the machine is shared."""
    auth = make(*[((A.TOPIC, f"t{i}", A.LITERAL), entry(ALICE, A.WRITE)) for i in range(200)],
                ((A.TOPIC, "p", A.PREFIXED), entry(ALICE, A.READ)))
    decided = []
    decide = auth._decide
    auth._decide = lambda *args: decided.append(args) or decide(*args)
    for _ in range(1000):
        assert auth.authorize(ALICE, HOST, A.WRITE, A.TOPIC, "t7")
    assert len(decided) == 1


def test_a_bad_super_users_value_stops_start_up(tmp_path):
    from kafkapy.server.config import BrokerConfig, ConfigException
    from kafkapy.server.security.authorizer import authorizer_for

    config = BrokerConfig.from_props({"log.dirs": str(tmp_path), "super.users": "User:a;admin",
                                      "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
    with pytest.raises(ConfigException, match="super.users"):
        authorizer_for(config, None)
    assert authorizer_for(BrokerConfig.from_props({"log.dirs": str(tmp_path)}), None) is None
    with pytest.raises(ConfigException, match="authorizer.class.name"):
        BrokerConfig.from_props({"log.dirs": str(tmp_path), "authorizer.class.name": "com.example.MyAuthorizer"})
