"""Where ACLs live: Kafka's ZooKeeper layout, and the same documents in a
file for a standalone broker and as each cluster broker's local image.

Kafka's AclAuthorizer keeps one znode per resource pattern:
``/kafka-acl/<ResourceType>/<name>`` for literal patterns and
``/kafka-acl-extended/prefixed/<ResourceType>/<name>`` for prefixed ones,
each holding ``{"version":1,"acls":[{"principal":"User:alice",
"permissionType":"Allow","operation":"Read","host":"*"}]}``; a resource
left without ACLs loses its znode. Every change is written conditional on
the znode version read and then announced with a persistent sequential
``/kafka-acl-changes/acl_changes_<seq>`` (literal: ``TOPIC:name``) or
``/kafka-acl-extended-changes/acl_changes_<seq>`` (JSON ``{"version":1,
"resourceType":"TOPIC","name":..,"patternType":"PREFIXED"}``), which every
broker follows to re-read that one resource.

* ``EmbeddedAclStore`` (standalone): ``kafkapy-acls.json`` in the first log
  dir, a map from those znode paths to those documents, replaced atomically
  under the shared table's lock; every change bumps the shared table counter
  ``acl_generation``.
* ``ZkAclStore`` (cluster mode): reads are the local image
  (``kafkapy-acls-image.json``, the same file format and counter, so every
  process of the broker re-reads it only when the counter moved); writes go
  to ZooKeeper (the conditional update and the notification above), then
  into the local image at once; ``AclFollower`` (run by the controller child)
  loads every ACL at start and applies each notification, so the other
  brokers' images follow.

Ownership: one store object per process (each handler worker, the
coordinator process, the controller child's follower); the file and the
counter are shared.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time

from kafkapy.storage.checkpoints import write_atomic
from kafkapy.protocol.acls import (
    LITERAL, PATTERN_TYPE_ENUM, PREFIXED, RESOURCE_TYPE_ENUM, RESOURCE_TYPE_NAME, OPERATION_NAME,
    PERMISSION_NAME, AccessControlEntry, ResourcePattern, CONCRETE_RESOURCE_TYPES, operation_from_name,
    parse_principal, pattern_type_from_name, permission_from_name, resource_type_from_name,
)

log = logging.getLogger("kafkapy.acls")

# The shared table counter that moves whenever the ACLs did.
ACL_GENERATION = "acl_generation"
ACL_FILE = "kafkapy-acls.json"
ACL_IMAGE_FILE = "kafkapy-acls-image.json"

LITERAL_ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended"
LITERAL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_CHANGES_PATH = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
# AclAuthorizer.maxUpdateRetries
UPDATE_RETRIES = 10
# ZkNodeChangeNotificationListener's changeExpirationMs (15 minutes)
CHANGE_EXPIRATION_MS = 15 * 60 * 1000


# ------------------------------------------------------------------------- Kafka's formats

def store_path(pattern_type: int) -> str:
    return LITERAL_ACL_PATH if pattern_type == LITERAL else f"{EXTENDED_ACL_PATH}/{PATTERN_TYPE_ENUM[pattern_type].lower()}"


def resource_path(resource: ResourcePattern) -> str:
    """``/kafka-acl/Topic/t`` or ``/kafka-acl-extended/prefixed/Topic/t`` (ResourceZNode.path)."""
    return f"{store_path(resource.pattern_type)}/{RESOURCE_TYPE_NAME[resource.resource_type]}/{resource.name}"


def resource_from_path(path: str) -> ResourcePattern | None:
    for pattern_type in (LITERAL, PREFIXED):
        root = store_path(pattern_type) + "/"
        if path.startswith(root):
            type_name, _, name = path[len(root):].partition("/")
            rtype = resource_type_from_name(type_name)
            if rtype in CONCRETE_RESOURCE_TYPES and name:
                return ResourcePattern(rtype, name, pattern_type)
    return None


def all_acl_paths() -> list:
    """What Kafka's createAclPaths makes: each store's root and one child per resource type."""
    paths = []
    for pattern_type in (LITERAL, PREFIXED):
        root = store_path(pattern_type)
        paths.append(root)
        paths.extend(f"{root}/{RESOURCE_TYPE_NAME[t]}" for t in CONCRETE_RESOURCE_TYPES)
    return paths + [LITERAL_CHANGES_PATH, EXTENDED_CHANGES_PATH]


def encode_acls(entries) -> bytes:
    """ResourceZNode.encode: Kafka's ACL JSON."""
    acls = [{"principal": e.principal, "permissionType": PERMISSION_NAME[e.permission_type],
             "operation": OPERATION_NAME[e.operation], "host": e.host}
            for e in sorted(entries)]
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_acls(data) -> frozenset:
    """AclEntry.fromBytes: empty data is no ACLs; a bad document raises ValueError."""
    if not data:
        return frozenset()
    return acls_of(json.loads(data))


# Kafka writes the names in one spelling: looked up exactly first (a reload of
# 10,000 resources took 0.45 s through the case-insensitive parsers, 0.3 s so).
_OPERATION_EXACT = {name: code for code, name in OPERATION_NAME.items() if code > 1}
_PERMISSION_EXACT = {name: code for code, name in PERMISSION_NAME.items() if code > 1}


def acls_of(doc) -> frozenset:
    """The entries of one resource's parsed ACL document."""
    if doc is None:
        return frozenset()
    if not isinstance(doc, dict) or doc.get("version") != 1:
        raise ValueError(f"unsupported ACL document: {doc!r}")
    out = []
    for item in doc.get("acls", ()):
        principal = item["principal"]
        if ":" not in principal:
            parse_principal(principal)  # raises Kafka's message
        operation = _OPERATION_EXACT.get(item["operation"]) or operation_from_name(item["operation"])
        permission = _PERMISSION_EXACT.get(item["permissionType"]) or permission_from_name(item["permissionType"])
        if operation in (0, 1) or permission in (0, 1):
            raise ValueError(f"bad ACL entry {item!r}")
        out.append(AccessControlEntry(principal, item["host"], operation, permission))
    return frozenset(out)


def encode_change(resource: ResourcePattern) -> bytes:
    """The notification's data: literal ``TOPIC:name``; others Kafka's ExtendedAclChangeEvent JSON."""
    if resource.pattern_type == LITERAL:
        return f"{RESOURCE_TYPE_ENUM[resource.resource_type]}:{resource.name}".encode()
    return json.dumps({"version": 1, "resourceType": RESOURCE_TYPE_ENUM[resource.resource_type],
                       "name": resource.name, "patternType": PATTERN_TYPE_ENUM[resource.pattern_type]},
                      separators=(",", ":")).encode()


def decode_change(data: bytes, extended: bool) -> ResourcePattern:
    text = data.decode()
    if not extended:
        type_name, sep, name = text.partition(":")
        if not sep:
            raise ValueError(f"expected a string in format ResourceType:ResourceName but got {text}")
        return ResourcePattern(resource_type_from_name(type_name), name, LITERAL)
    doc = json.loads(text)
    if doc.get("version", 0) > 1:
        raise ValueError(f"Acl change event received for unsupported version: {doc.get('version')}")
    return ResourcePattern(resource_type_from_name(doc["resourceType"]), doc["name"],
                           pattern_type_from_name(doc["patternType"]))


def change_path(resource: ResourcePattern) -> str:
    root = LITERAL_CHANGES_PATH if resource.pattern_type == LITERAL else EXTENDED_CHANGES_PATH
    return f"{root}/{ACL_CHANGE_PREFIX}"


# ------------------------------------------------------------------------- the local file

class EmbeddedAclStore:
    """ACLs in a file beside the metadata (standalone), or a cluster broker's image of them."""

    FILE = ACL_FILE

    def __init__(self, log_dir: str, table):
        self.path = os.path.join(log_dir, self.FILE)
        self.table = table
        self._cached: dict | None = None
        self._cached_generation = -1

    @property
    def generation(self) -> int:
        return self._cached_generation

    def changed(self) -> bool:
        """Whether ``current()`` would read again: one shared-memory read."""
        return self.table.counter(ACL_GENERATION) != self._cached_generation

    def current(self) -> dict:
        """``{ResourcePattern: frozenset(AccessControlEntry)}``, re-read only when
        ``acl_generation`` moved; shared by the process's callers: read-only."""
        generation = self.table.counter(ACL_GENERATION)
        if self._cached is None or generation != self._cached_generation:
            self._cached = self._read()
            self._cached_generation = generation
        return self._cached

    def update(self, resource: ResourcePattern, change) -> tuple:
        """Apply ``change(acls) -> acls`` to one resource atomically across
        processes; returns (old, new)."""
        return self._apply({resource: change})[resource]

    def _apply(self, changes: dict) -> dict:
        out = {}
        with self.table.lock_all():
            acls = self._read()
            for resource, change in changes.items():
                old = acls.get(resource, frozenset())
                new = frozenset(change(old))
                if new:
                    acls[resource] = new
                else:
                    acls.pop(resource, None)
                out[resource] = (old, new)
            if any(old != new for old, new in out.values()):
                self._write(acls)
                self._cached_generation = self.table.increment(ACL_GENERATION)
                self._cached = acls
        return out

    def _read(self) -> dict:
        try:
            with open(self.path, encoding="utf-8") as f:
                doc = json.load(f)
        except FileNotFoundError:
            return {}
        out = {}
        for path, body in doc.get("resources", {}).items():
            resource = resource_from_path(path)
            if resource is None:
                log.warning("%s: ignoring ACLs of unknown resource %s", self.path, path)
                continue
            acls = acls_of(body)
            if acls:
                out[resource] = acls
        return out

    def _write(self, acls: dict) -> None:
        doc = {"version": 1, "resources": {resource_path(r): json.loads(encode_acls(e))
                                           for r, e in sorted(acls.items())}}
        write_atomic(self.path, json.dumps(doc, separators=(",", ":"), sort_keys=True).encode())


class AclImage(EmbeddedAclStore):
    """A cluster broker's image of ZooKeeper's ACLs (written by the follower and
    by this broker's own writes)."""

    FILE = ACL_IMAGE_FILE

    def apply(self, changes: dict) -> None:
        """Set resources to the ACLs given (``{resource: acls}``; empty removes)."""
        self._apply({r: (lambda _old, a=acls: a) for r, acls in changes.items()})

    def replace_all(self, acls: dict) -> None:
        """Make ``acls`` the whole image (the follower's load at start)."""
        with self.table.lock_all():
            if self._read() == acls:
                return
            self._write(acls)
            self._cached_generation = self.table.increment(ACL_GENERATION)
            self._cached = dict(acls)


# ------------------------------------------------------------------------- ZooKeeper

class ZkAclStore(AclImage):
    """Cluster mode: reads from the image, writes to ZooKeeper (then the image).

    ``zk`` is a callable returning the process's ``ZkClient`` (opened lazily:
    a worker that never changes ACLs never connects)."""

    def __init__(self, log_dir: str, table, zk):
        super().__init__(log_dir, table)
        self._zk = zk

    def update(self, resource: ResourcePattern, change) -> tuple:
        """AclAuthorizer.updateResourceAcls: read the znode, write ``change``'s result
        conditional on its version (create if absent, delete if empty), again on a
        lost race (at most ``UPDATE_RETRIES`` times); a real change is announced
        with a change notification and applied to this broker's image at once."""
        from kazoo.exceptions import BadVersionError, NoNodeError, NodeExistsError

        kz = self._zk().zk
        path = resource_path(resource)
        for _ in range(UPDATE_RETRIES + 1):
            try:
                data, stat = kz.get(path)
                old, version = decode_acls(data), stat.version
            except NoNodeError:
                old, version = frozenset(), -1
            new = frozenset(change(old))
            if new == old:
                self.apply({resource: new})
                return old, new
            try:
                if new:
                    if version >= 0:
                        kz.set(path, encode_acls(new), version=version)
                    else:
                        kz.create(path, encode_acls(new), makepath=True)
                elif version >= 0:
                    kz.delete(path, version=version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                time.sleep(0.1)
                continue
            if new != old:
                kz.create(change_path(resource), encode_change(resource), sequence=True, makepath=True)
            self.apply({resource: new})
            return old, new
        raise RuntimeError(f"Failed to update ACLs for {resource} after trying a maximum of "
                           f"{UPDATE_RETRIES} times")


def read_all_acls(kz) -> dict:
    """Every resource's ACLs in ZooKeeper (AclAuthorizer.loadAllAcls); unknown
    resource types are skipped with a warning, as Kafka does."""
    from kazoo.exceptions import NoNodeError

    out = {}
    for pattern_type in (LITERAL, PREFIXED):
        root = store_path(pattern_type)
        try:
            type_names = kz.get_children(root)
        except NoNodeError:
            continue
        for type_name in type_names:
            rtype = resource_type_from_name(type_name)
            if rtype not in CONCRETE_RESOURCE_TYPES:
                log.warning("Ignoring unknown ResourceType: %s", type_name)
                continue
            for name in kz.get_children(f"{root}/{type_name}"):
                resource = ResourcePattern(rtype, name, pattern_type)
                try:
                    acls = decode_acls(kz.get(resource_path(resource))[0])
                except NoNodeError:
                    continue
                if acls:
                    out[resource] = acls
    return out


class AclFollower:
    """Keeps an ``AclImage`` equal to ZooKeeper's ACLs (Kafka's ACL change listeners).

    Watches ``/kafka-acl-changes`` and ``/kafka-acl-extended-changes`` first,
    then loads every ACL (as AclAuthorizer.configure does, so no change falls
    between the two); each new notification re-reads the one resource it
    names, from kazoo's callback thread. Processed notifications older than
    15 minutes are deleted, as every Kafka broker does.
    """

    def __init__(self, zk_client, image: AclImage, clock_ms=None):
        self.client = zk_client
        self.image = image
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self.last = {LITERAL_CHANGES_PATH: None, EXTENDED_CHANGES_PATH: None}
        self._lock = threading.Lock()

    def start(self) -> "AclFollower":
        kz = self.client.zk
        for path in all_acl_paths():
            kz.ensure_path(path)
        for root in self.last:
            self.client.watch_children(root, lambda children, r=root: self._guarded(r, children))
        with self._lock:
            self.image.replace_all(read_all_acls(kz))
        return self

    def stop(self) -> None:
        pass  # the watches end with the client's session

    def _guarded(self, root: str, children) -> None:
        try:
            self._on_changes(root, children)
        except Exception:
            log.exception("following ACL changes under %s failed", root)

    def _on_changes(self, root: str, children) -> None:
        from kafkapy.metadata.zk.data import sequence_number

        seqs = {}
        for child in children:
            try:
                seqs[sequence_number(child, ACL_CHANGE_PREFIX)] = child
            except ValueError:
                continue
        last = self.last[root]
        if last is None:  # the first call: start() loads everything
            self.last[root] = max(seqs, default=-1)
            self._purge(root, list(seqs.values()))
            return
        new = sorted(s for s in seqs if s > last)
        if not new:
            return
        paths = [f"{root}/{seqs[s]}" for s in new]
        found = self.client.get_with_stat(paths)
        resources = set()
        for path in paths:
            if path in found:
                try:
                    resources.add(decode_change(found[path][0], root == EXTENDED_CHANGES_PATH))
                except (ValueError, KeyError) as exc:
                    log.warning("ignoring ACL change notification %s: %s", path, exc)
        changes = {}
        for resource in resources:
            if resource.is_unknown:
                continue
            found_acls = self.client.get_with_stat([resource_path(resource)])
            data = found_acls.get(resource_path(resource), (b"", None))[0]
            changes[resource] = decode_acls(data)
        with self._lock:
            if changes:
                self.image.apply(changes)
        self.last[root] = new[-1]
        log.info("applied %d ACL change notification(s): %s", len(new), ", ".join(map(str, changes)) or "-")
        self._purge(root, [seqs[s] for s in new], found)

    def _purge(self, root: str, children, found=None) -> None:
        paths = [f"{root}/{c}" for c in children]
        if found is None:
            found = self.client.get_with_stat(paths)
        cutoff = self.clock_ms() - CHANGE_EXPIRATION_MS
        old = [p for p in paths if p in found and found[p][1].ctime < cutoff]
        if old:
            self.client.delete_quietly(old)


def follow_acl_changes(zk_client, log_dir: str, table) -> AclFollower:
    """The controller child's call (cluster mode with an authorizer): load every
    ACL into this broker's image and keep it current."""
    return AclFollower(zk_client, AclImage(log_dir, table)).start()


def acl_store(config, table, zk=None):
    """The process's ACL store: standalone the file beside the metadata; in
    cluster mode the image, writing through ``zk()`` (the process's ZkClient)."""
    if config["zookeeper.connect"]:
        return ZkAclStore(config.log_dirs[0], table, zk)
    return EmbeddedAclStore(config.log_dirs[0], table)
