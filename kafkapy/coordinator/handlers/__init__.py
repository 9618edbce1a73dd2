"""Group API handlers, run by the group-coordinator process (one module per API).

A handler takes ``(ctx, request)`` — the decoded kio request — and answers
by calling ``ctx.reply(dict)`` exactly once, at once or later: JoinGroup and
SyncGroup hand ``ctx.reply`` to the coordinator, which calls it when the
rebalance completes. The dict is turned into the response entity of the
request's version with ``construct`` (fields a version lacks are dropped).
"""

from __future__ import annotations

import functools
import importlib
import ipaddress
import pkgutil
import time

from kafkapy.protocol import acls
from kafkapy.protocol.api import API_TABLE
from kafkapy.protocol.entities import construct

# A request that came without its peer address (in-process callers).
UNKNOWN_CLIENT_HOST = "/127.0.0.1"


@functools.lru_cache(maxsize=4096)  # a handful of client addresses, asked on every coordinator request
def client_host(peer_host: str) -> str:
    """A member's client host as Kafka reports it (``InetAddress.toString``
    of an unresolved address): "/" and the address, an IPv4-mapped IPv6
    address as IPv4, IPv6 in Java's uncompressed form ("/0:0:0:0:0:0:0:1")."""
    if not peer_host:
        return UNKNOWN_CLIENT_HOST
    try:
        address = ipaddress.ip_address(peer_host.split("%", 1)[0])
    except ValueError:
        return "/" + peer_host
    if address.version == 6:
        if address.ipv4_mapped is not None:
            return f"/{address.ipv4_mapped}"
        return "/" + ":".join(f"{int(group, 16):x}" for group in address.exploded.split(":"))
    return f"/{address}"


class CoordinatorContext:
    """One request's context; owned by the coordinator thread."""

    __slots__ = ("coordinator", "txn", "store", "api_key", "api_version", "correlation_id", "client_id",
                 "client_host", "now_ms", "replied", "_send", "authorizer", "principal", "peer_host",
                 "verification")

    def __init__(self, coordinator, store, api_key, api_version, correlation_id, client_id, send):
        self.coordinator = coordinator
        self.txn = None  # the process's TransactionCoordinator (set by the process)
        # TxnOffsetCommit's KIP-890 questions: the process's
        # server.txn_verification.OffsetCommitVerification (None: none asked).
        self.verification = None
        self.store = store
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.client_host = UNKNOWN_CLIENT_HOST
        self.now_ms = int(time.time() * 1000)
        self.replied = False
        self._send = send
        # ACLs: the process's authorizer (None: no checks), the connection's
        # principal and the client's address (set by the process).
        self.authorizer = None
        self.principal = "User:ANONYMOUS"
        self.peer_host = ""

    def response_class(self):
        return API_TABLE[self.api_key].response_class(self.api_version)

    def reply(self, data: dict) -> None:
        if self.replied:
            raise AssertionError(f"api {self.api_key} answered twice")
        self.replied = True
        self._send(construct(self.response_class(), data))


def group_denied(ctx, operation: int, group_id: str) -> bool:
    """True when an authorizer refuses ``operation`` on the group (Kafka's ACLs;
    ``kafkapy.protocol.acls`` codes)."""
    auth = getattr(ctx, "authorizer", None)
    return auth is not None and not auth.allowed(ctx, operation, acls.GROUP, group_id)


def denied_topics(ctx, operation: int, names) -> set:
    """The topics of ``names`` an authorizer refuses ``operation`` (empty without one)."""
    auth = getattr(ctx, "authorizer", None)
    return set() if auth is None else auth.denied(ctx, operation, acls.TOPIC, names)


def authorized_operations(ctx, resource_type: int, name: str) -> int:
    """Kafka's authorizedOperations: the bit set of operations allowed on the resource."""
    auth = getattr(ctx, "authorizer", None)
    return acls.all_operations(resource_type) if auth is None else auth.authorized_operations(ctx, resource_type,
                                                                                                name)


HANDLERS: dict = {}


def _register():
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        key = getattr(module, "API_KEY", None)
        if key is not None:
            HANDLERS[key] = module.handle
    # The transaction APIs (coordinator.transaction.handlers) take the
    # process's transaction coordinator as well.
    from kafkapy.coordinator.transaction.handlers import TXN_HANDLERS

    for key, txn_handler in TXN_HANDLERS.items():
        HANDLERS[key] = lambda ctx, request, txn_handler=txn_handler: txn_handler(ctx.txn, ctx, request)
    wanted = {k for k, spec in API_TABLE.items() if spec.owner == "coordinator"}
    missing = wanted - set(HANDLERS)
    assert not missing, f"API table routes keys to the coordinator without handlers: {missing}"


_register()
