"""SCRAM credentials of a standalone broker, stored salted as Kafka stores them.

Kafka keeps ``/config/users/<user>`` in ZooKeeper (``{"version":1,"config":
{"SCRAM-SHA-256":"salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>"}}``,
ScramCredentialUtils' format). A standalone kafkapy broker keeps the same
entity documents in ``kafkapy-scram-credentials.json`` beside the embedded
metadata store's file in the first log dir, written the same way (temporary
file, fsync, rename, fsync of the directory). Only the salt, StoredKey,
ServerKey and iteration count are stored, never a password.

Writers: ``add_scram_credentials`` (``python -m kafkapy.server.security.scram_store``,
Kafka's ``kafka-storage format --add-scram`` syntax), run while the broker
is stopped or running. Readers: the processors, which re-read the file when
its modification time or size changed (a credential lookup per SCRAM
authentication costs one ``stat``).
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

CREDENTIALS_FILE = "kafkapy-scram-credentials.json"
DEFAULT_ITERATIONS = 4096
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


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


def make_credential(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    """RFC 5802: SaltedPassword = Hi(password, salt, i); StoredKey = H(HMAC(SaltedPassword,
    "Client Key")); ServerKey = HMAC(SaltedPassword, "Server Key")."""
    name = _HASHES[mechanism]
    salt = salt if salt is not None else os.urandom(32)
    salted = hashlib.pbkdf2_hmac(name, password.encode("utf-8"), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", name).digest()
    server_key = hmac.new(salted, b"Server Key", name).digest()
    return ScramCredential(salt, hashlib.new(name, client_key).digest(), server_key, iterations)


class ScramCredentialStore:
    """Read side; owned per process (a processor's cache of the file)."""

    def __init__(self, log_dir: str):
        self.path = os.path.join(log_dir, CREDENTIALS_FILE)
        self._stamp = None
        self._users: dict = {}

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
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


def _read(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f).get("users", {})
    except FileNotFoundError:
        return {}


def add_scram_credentials(log_dir: str, user: str, mechanism: str, password: str,
                          iterations: int = DEFAULT_ITERATIONS) -> None:
    """Create or replace ``user``'s credential for ``mechanism`` (atomic file replace)."""
    if mechanism not in _HASHES:
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
