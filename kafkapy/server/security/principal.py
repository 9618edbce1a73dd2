"""Principals from client certificates: Kafka's ``ssl.principal.mapping.rules``.

The distinguished name is formatted as Java's ``X500Principal.getName()``
(RFC 2253: the last RDN first, ``CN=...,OU=...,O=...``), then the rules are
tried in order (Kafka's SslPrincipalMapper): ``DEFAULT`` keeps the name as it
is; ``RULE:pattern/replacement/[LU]`` applies when ``pattern`` matches the
whole name, replacing every match (Java's ``$1`` group references) and
optionally lower- or upper-casing the result. No rule matching is an error
(the connection is closed, as Kafka's NoMatchingRule).
"""

from __future__ import annotations

import re

# Python's getpeercert() attribute names -> RFC 2253 keywords; others as OIDs.
_KEYWORDS = {"commonName": "CN", "localityName": "L", "stateOrProvinceName": "ST",
             "organizationName": "O", "organizationalUnitName": "OU", "countryName": "C",
             "streetAddress": "STREET", "domainComponent": "DC", "userId": "UID"}
_OIDS = {"emailAddress": "1.2.840.113549.1.9.1", "serialNumber": "2.5.4.5", "surname": "2.5.4.4",
         "givenName": "2.5.4.42", "title": "2.5.4.12"}
# Kafka's RULE_PARSER: RULE:pattern/replacement/[LU], DEFAULT, comma- or space-separated.
_RULE_RE = re.compile(r"\s*((DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?)\s*(?:,|$)")


class NoMatchingRule(ValueError):
    pass


def _escape(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (i == 0 and ch in "# ") or (i == len(value) - 1 and ch == " "):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _der_ia5(value: str) -> str:
    data = value.encode("ascii", "replace")
    return "#16" + format(len(data), "02x") + data.hex()


def distinguished_name(cert: dict) -> str:
    """RFC 2253 name of ``ssl.SSLSocket.getpeercert()``'s subject."""
    rdns = []
    for rdn in reversed(cert.get("subject", ())):
        parts = []
        for attr, value in rdn:
            if attr in _KEYWORDS:
                parts.append(f"{_KEYWORDS[attr]}={_escape(value)}")
            elif attr in _OIDS:
                parts.append(f"{_OIDS[attr]}={_der_ia5(value)}")
            else:
                parts.append(f"{attr}={_escape(value)}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


def _java_replacement(text: str) -> str:
    # Java's $n group references to Python's \g<n>; \x escapes stay literal.
    return re.sub(r"\$(\d+)", r"\\g<\1>", text.replace("\\/", "/"))


class SslPrincipalMapper:
    """Immutable; built from ``ssl.principal.mapping.rules``."""

    def __init__(self, rules: str):
        self.rules = []
        text = (rules or "DEFAULT").strip()
        pos = 0
        while pos < len(text):
            m = _RULE_RE.match(text, pos)
            if m is None or m.end() == pos:
                raise ValueError(f"Invalid rule: {text[pos:]}")
            if m.group(2):
                self.rules.append(None)
            else:
                self.rules.append((re.compile(m.group(3).replace("\\/", "/")),
                                   _java_replacement(m.group(4)), m.group(5)))
            pos = m.end()

    def principal_name(self, dn: str) -> str:
        for rule in self.rules:
            if rule is None:
                return dn
            pattern, replacement, case = rule
            if pattern.fullmatch(dn):
                result = pattern.sub(replacement, dn)
                return result.lower() if case == "L" else result.upper() if case == "U" else result
        raise NoMatchingRule(f"No rules apply to {dn}, rules {self.rules}")
