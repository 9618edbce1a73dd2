"""SCRAM credentials, stored salted as Kafka stores them, in the metadata store.

Kafka keeps them in the user entity's config, ``/config/users/<user>`` in
ZooKeeper (``{"version":1,"config":{"SCRAM-SHA-256":"salt=<b64>,stored_key=
<b64>,server_key=<b64>,iterations=<n>"}}``, ScramCredentialUtils' format).
kafkapy does the same through the metadata model's user entity configs
(``Metadata.entity_configs``, keys ``SCRAM-SHA-256`` / ``SCRAM-SHA-512``):
in cluster mode ZooKeeper's ``/config/users/<user>`` (every broker follows
``/config/changes`` into its image), standalone the embedded store's file.
Only the salt, StoredKey, ServerKey and iteration count are stored, never a
password. Writers: AlterUserScramCredentials (``kafkapy-configs --alter
--entity-type users --add-config 'SCRAM-SHA-256=[password=...]'``).

Readers: each processor's ``ScramCredentialStore`` reads the metadata of its
broker (the embedded store or the image) through the generation contract:
a lookup (one per SCRAM authentication) costs one shared-memory compare
unless the metadata changed since the last one.

Before a standalone broker's first start credentials can also be written
offline, Kafka's ``kafka-storage format --add-scram`` way: ``python -m
kafkapy.server.security.scram_store --log-dir DIR --add-scram
'SCRAM-SHA-256=[name=alice,password=...]'`` writes
``kafkapy-scram-credentials.json`` in the first log dir (the format of
kafkapy's earlier releases, which kept credentials there); at start-up the
supervisor moves its credentials into the embedded store
(``migrate_credentials_file``; a credential the store already has wins) and
renames the file ``*.migrated``. A cluster-mode broker ignores the file.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import os
import re
import sys
from typing import NamedTuple

from kafkapy.client.security import DEFAULT_ITERATIONS, SCRAM_HASHES, salted_password

CREDENTIALS_FILE = "kafkapy-scram-credentials.json"
MAX_ITERATIONS = 16384  # Kafka's AlterUserScramCredentials bound (ZkAdminManager)


class ScramCredential(NamedTuple):
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_string(self) -> str:
        b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
        return (f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},"
                f"server_key={b64(self.server_key)},iterations={self.iterations}")

    @classmethod
    def from_string(cls, text: str) -> "ScramCredential":
        fields = dict(kv.split("=", 1) for kv in text.split(","))
        return cls(base64.b64decode(fields["salt"]), base64.b64decode(fields["stored_key"]),
                   base64.b64decode(fields["server_key"]), int(fields["iterations"]))


def credential_from_salted(mechanism: str, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
    """Kafka's ScramFormatter.generateCredential: StoredKey = H(HMAC(SaltedPassword,
    "Client Key")), ServerKey = HMAC(SaltedPassword, "Server Key")."""
    name = SCRAM_HASHES[mechanism]
    client_key = hmac.new(salted, b"Client Key", name).digest()
    server_key = hmac.new(salted, b"Server Key", name).digest()
    return ScramCredential(salt, hashlib.new(name, client_key).digest(), server_key, iterations)


def make_credential(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    salt = salt if salt is not None else os.urandom(32)
    return credential_from_salted(mechanism, salt, salted_password(mechanism, password, salt, iterations),
                                  iterations)


class ScramCredentialStore:
    """Read side; owned per process. With the broker's shared ``table``: the
    user entity configs of its metadata (the image in cluster mode), followed
    through the generation counter. Without one (a bare config, unit tests):
    the offline credentials file, re-read when its ``stat`` changes."""

    def __init__(self, log_dir: str, table=None, cluster_mode: bool = False):
        self.path = os.path.join(log_dir, CREDENTIALS_FILE)
        self._stamp = None
        self._users: dict = {}
        self._metadata = None
        if table is not None:
            from kafkapy.metadata.embedded import EmbeddedMetadataStore
            from kafkapy.metadata.image import MetadataImage

            self._metadata = (MetadataImage if cluster_mode else EmbeddedMetadataStore)(log_dir, table)

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        if self._metadata is not None:
            from kafkapy.metadata.model import user_entity

            text = (self._metadata.current().entity_configs.get(user_entity(user)) or {}).get(mechanism)
            return ScramCredential.from_string(text) if text else None
        try:
            st = os.stat(self.path)
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        except FileNotFoundError:
            return None
        if stamp != self._stamp:
            self._users = _read(self.path)
            self._stamp = stamp
        text = self._users.get(user, {}).get("config", {}).get(mechanism)
        return ScramCredential.from_string(text) if text else None


def migrate_credentials_file(log_dir: str, store) -> int:
    """Move the offline credentials file's credentials into ``store`` (a
    standalone broker's embedded metadata store) and rename the file
    ``*.migrated``; a credential the store already has is kept. Returns how
    many credentials moved."""
    from kafkapy.metadata.model import user_entity

    path = os.path.join(log_dir, CREDENTIALS_FILE)
    users = _read(path)
    if not users and not os.path.exists(path):
        return 0
    current = store.current().entity_configs
    alterations = {}
    for user, entity in users.items():
        have = current.get(user_entity(user)) or {}
        new = {m: text for m, text in entity.get("config", {}).items() if m in SCRAM_HASHES and m not in have}
        if new:
            alterations[user_entity(user)] = (new, ())
    if alterations:
        store.alter_entity_configs_batch(alterations)
    os.replace(path, path + ".migrated")
    return sum(len(new) for new, _ in alterations.values())


def _read(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f).get("users", {})
    except FileNotFoundError:
        return {}


def add_scram_credentials(log_dir: str, user: str, mechanism: str, password: str,
                          iterations: int = DEFAULT_ITERATIONS) -> None:
    """Create or replace ``user``'s credential for ``mechanism`` (atomic file replace)."""
    if mechanism not in SCRAM_HASHES:
        raise ValueError(f"unknown SCRAM mechanism {mechanism}")
    if iterations < DEFAULT_ITERATIONS:
        raise ValueError(f"iterations must be at least {DEFAULT_ITERATIONS}")
    path = os.path.join(log_dir, CREDENTIALS_FILE)
    users = _read(path)
    entity = users.setdefault(user, {"version": 1, "config": {}})
    entity["config"][mechanism] = make_credential(mechanism, password, iterations).to_string()
    os.makedirs(log_dir, exist_ok=True)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"version": 1, "users": users}, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(log_dir, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


# 'SCRAM-SHA-256=[name=alice,password=alice-secret]' (kafka-storage --add-scram)
_ADD_SCRAM = re.compile(r"(?P<mech>SCRAM-SHA-(?:256|512))=\[(?P<body>.*)\]\Z")


def parse_add_scram(text: str) -> tuple[str, str, str, int]:
    m = _ADD_SCRAM.match(text.strip())
    if m is None:
        raise ValueError("expected SCRAM-SHA-256=[name=<user>,password=<password>[,iterations=<n>]]")
    fields = {}
    for item in re.findall(r'(\w+)=("(?:[^"\\]|\\.)*"|[^,]*)', m["body"]):
        key, value = item
        fields[key] = value[1:-1] if value.startswith('"') else value
    if "name" not in fields or "password" not in fields:
        raise ValueError("name and password are required")
    return m["mech"], fields["name"], fields["password"], int(fields.get("iterations", DEFAULT_ITERATIONS))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Add SCRAM credentials to a standalone kafkapy broker's "
                                                 "log dir (the first of log.dirs).")
    parser.add_argument("--log-dir", required=True)
    parser.add_argument("--add-scram", action="append", required=True,
                        help="SCRAM-SHA-256=[name=alice,password=alice-secret] (Kafka's syntax)")
    args = parser.parse_args(argv)
    for spec in args.add_scram:
        try:
            mechanism, user, password, iterations = parse_add_scram(spec)
            add_scram_credentials(args.log_dir, user, mechanism, password, iterations)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"added {mechanism} credential for {user}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
