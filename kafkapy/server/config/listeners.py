"""Listeners (Kafka's ``EndPoint`` and its ``listeners`` parsing): an
``Endpoint`` per ``NAME://host:port`` entry of ``listeners`` /
``advertised.listeners``, its security protocol looked up in
``listener.security.protocol.map``.
"""

from __future__ import annotations

import re
from collections import namedtuple
from typing import Mapping

from kafkapy.server.config.types import _LIST_SPLIT_RE, ConfigException

# ---------------------------------------------------------------------------
# Listeners
# ---------------------------------------------------------------------------

class Endpoint(namedtuple("Endpoint", ("listener_name", "host", "port", "security_protocol"),
                          defaults=("PLAINTEXT",))):
    """One listener: name (upper-case), host ("" = all interfaces), port, and
    its security protocol (from listener.security.protocol.map)."""

    __slots__ = ()

    @property
    def name(self) -> str:
        """Alias of ``listener_name`` (Kafka's ``EndPoint.listenerName``)."""
        return self.listener_name

# NAME://host:port, with an IPv6 host in brackets (Kafka's EndPoint regex).
_LISTENER_RE = re.compile(r"\A(?P<name>[^:/]+)://(?:\[(?P<ip6>[0-9a-fA-F:.%]*)\]|(?P<host>[0-9A-Za-z\-%._]*)):(?P<port>-?[0-9]+)\Z")
_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _parse_security_protocol_map(raw: str) -> dict[str, str]:
    key = "listener.security.protocol.map"
    mapping: dict[str, str] = {}
    for entry in _LIST_SPLIT_RE.split(raw.strip()) if raw.strip() else []:
        name, sep, protocol = entry.partition(":")
        if not sep or not name.strip() or not protocol.strip():
            raise ConfigException(key, raw, f"Entry {entry!r} is not of the form NAME:PROTOCOL")
        protocol = protocol.strip().upper()
        if protocol not in _SECURITY_PROTOCOLS:
            raise ConfigException(key, raw, f"Invalid security protocol `{protocol}`")
        mapping[name.strip().upper()] = protocol
    return mapping


def _parse_listeners(key: str, raw: str, protocol_map: Mapping[str, str],
                     require_distinct_ports: bool) -> list[Endpoint]:
    endpoints: list[Endpoint] = []
    for entry in _LIST_SPLIT_RE.split(raw.strip()) if raw.strip() else []:
        if not entry:
            continue
        match = _LISTENER_RE.match(entry)
        if match is None:
            raise ConfigException(key, raw, f"Unable to parse {entry} to a broker endpoint")
        name = match["name"].upper()
        host = match["ip6"] if match["ip6"] is not None else match["host"]
        port = int(match["port"])
        if not 0 <= port <= 65535:
            raise ConfigException(key, raw, f"Port {port} of listener {name} is out of range [0,65535]")
        protocol = protocol_map.get(name)
        if protocol is None:
            raise ConfigException(key, raw, f"No security protocol defined for listener {name}")
        endpoints.append(Endpoint(name, host, port, protocol))
    names = [ep.listener_name for ep in endpoints]
    if len(set(names)) != len(names):
        raise ConfigException(key, raw, "Each listener must have a different name")
    if require_distinct_ports:
        ports = [ep.port for ep in endpoints if ep.port != 0]
        if len(set(ports)) != len(ports):
            raise ConfigException(key, raw, "Each listener must have a different port")
    return endpoints
