"""kafkapy-configs' SCRAM credential part (``--entity-type users``), as
Kafka's ConfigCommand with ``--bootstrap-server``:

* ``--alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'``
  and/or ``--delete-config 'SCRAM-SHA-512'``: one AlterUserScramCredentials
  v0 request to the controller (Metadata names it; standalone the broker
  itself) with a random 32-byte salt and the salted password computed here,
  so the password never travels. Iterations default to 4096 and may not be
  below the mechanism's minimum (4096).
* ``--describe``: DescribeUserScramCredentials v0 for the named users (all
  users with credentials when none is named), printing Kafka's line per user
  "SCRAM credential configs for user-principal 'alice' are
  SCRAM-SHA-256=iterations=8192" (mechanisms and iterations only).

Requests go over ``_secure_conn.SecureConnection`` (``--command-config``'s
security settings). Errors are ``ClientError`` with Kafka's error name.
"""

from __future__ import annotations

import os
import re

from kafkapy.protocol.errors import ErrorCode
from kafkapy.client.security import (
    DEFAULT_ITERATIONS,
    MECHANISM_TYPES,
    TYPE_OF_MECHANISM,
    salted_password,
)
from kafkapy.tools._client import ClientError

DESCRIBE_USER_SCRAM, ALTER_USER_SCRAM, METADATA = 50, 51, 3
_CREDENTIAL = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)\Z", re.S)


def is_scram(key: str) -> bool:
    return key in TYPE_OF_MECHANISM


def _connect(bootstrap: str, props: dict):
    from kafkapy.tools._secure_conn import SecureConnection

    return SecureConnection(bootstrap, props, "kafkapy-configs")


def _raise(code: int, message) -> None:
    if code:
        raise ClientError.from_code(code, message)


def parse_upsertions(user: str, to_add: dict) -> list:
    """``{"SCRAM-SHA-256": "[iterations=8192,password=x]" or "iterations=...,password=x"}``
    -> AlterUserScramCredentials upsertions (salted here)."""
    out = []
    for mechanism, value in to_add.items():
        value = value[1:-1] if value.startswith("[") and value.endswith("]") else value
        m = _CREDENTIAL.match(value)
        if m is None:
            raise ValueError(f"Invalid credential property {mechanism}={value}")
        iterations = int(m[1]) if m[1] and m[1] != "-1" else DEFAULT_ITERATIONS
        if iterations < DEFAULT_ITERATIONS:
            raise ValueError(f"Iterations {iterations} is less than the minimum {DEFAULT_ITERATIONS} required "
                             f"for {mechanism}")
        salt = os.urandom(32)
        out.append({"name": user, "mechanism": TYPE_OF_MECHANISM[mechanism], "iterations": iterations,
                    "salt": salt, "salted_password": salted_password(mechanism, m[2], salt, iterations)})
    return out


def alter(bootstrap: str, props: dict, user: str, to_add: dict, to_delete: list) -> None:
    request = {"deletions": [{"name": user, "mechanism": TYPE_OF_MECHANISM[m]} for m in to_delete],
               "upsertions": parse_upsertions(user, to_add)}
    with _connect(bootstrap, props) as conn:
        metadata = conn.request(METADATA, 1, {"topics": []})
        controller = next((b for b in metadata.brokers if b.node_id == metadata.controller_id), None)
        if controller is None:
            raise ClientError("NOT_CONTROLLER", ErrorCode.NOT_CONTROLLER, "no controller is known")
    # The controller's endpoint on the listener asked (standalone: this broker).
    with _connect(f"{controller.host}:{controller.port}", props) as ctl:
        response = ctl.request(ALTER_USER_SCRAM, 0, request)
    for result in response.results:
        _raise(result.error_code, result.error_message)


def describe(bootstrap: str, props: dict, users: list) -> list:
    """Kafka's ConfigCommand lines for ``users`` (all users with credentials
    when empty); users without credentials print nothing."""
    with _connect(bootstrap, props) as conn:
        response = conn.request(DESCRIBE_USER_SCRAM, 0, {"users": [{"name": u} for u in users]})
    _raise(response.error_code, response.error_message)
    lines = []
    for result in response.results:
        if result.error_code == ErrorCode.RESOURCE_NOT_FOUND:
            continue
        if result.error_code:
            name = ErrorCode(result.error_code).name
            lines.append(f"Error retrieving SCRAM credential configs for user-principal '{result.user}': "
                         f"{name}: {result.error_message}")
            continue
        text = ", ".join(f"{MECHANISM_TYPES.get(i.mechanism, 'UNKNOWN')}=iterations={i.iterations}"
                         for i in result.credential_infos)
        lines.append(f"SCRAM credential configs for user-principal '{result.user}' are {text}")
    return lines
