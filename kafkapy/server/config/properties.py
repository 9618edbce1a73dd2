"""Java ``.properties`` files: reading ``server.properties`` as
``java.util.Properties.load`` does (``load_properties``, ``parse_properties``),
``--override key=value`` arguments (``parse_overrides``), and writing a
``server.properties`` rendered from the broker keys table
(``render_properties``, used by ``kafkapy-install-service``).
"""

from __future__ import annotations

import textwrap
from typing import Any, Iterable, Mapping, Optional

from kafkapy.server.config.broker_keys import _BROKER_KEYS, BROKER_CONFIGS, GROUP_ORDER
from kafkapy.server.config.types import ConfigException, format_value

# ---------------------------------------------------------------------------
# Java .properties
# ---------------------------------------------------------------------------

_PROPS_WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def load_properties(path: str) -> dict[str, str]:
    """Read a Java ``.properties`` file (as ``java.util.Properties.load``).

    UTF-8 is tried first; a file that is not valid UTF-8 is read as
    ISO-8859-1, the encoding ``Properties.load(InputStream)`` assumes.
    """
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return parse_properties(text, source=path)


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    natural = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    i = 0
    while i < len(natural):
        start = i
        line = natural[i].lstrip(_PROPS_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue  # blank or comment: never continued
        while _ends_with_escape(line) and i <= len(natural):
            line = line[:-1]
            if i == len(natural):
                break
            line += natural[i].lstrip(_PROPS_WHITESPACE)
            i += 1
        yield start + 1, line


def _ends_with_escape(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def _unescape(s: str, source: str, lineno: int) -> str:
    out = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        i += 1
        if i >= len(s):
            break
        c = s[i]
        if c == "u":
            digits = s[i + 1:i + 5]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ConfigException(f"{source}:{lineno}: Malformed \\uxxxx encoding.")
            out.append(chr(int(digits, 16)))
            i += 5
            continue
        out.append(_ESCAPES.get(c, c))
        i += 1
    return "".join(out)


def parse_properties(text: str, source: str = "<string>") -> dict[str, str]:
    """Parse ``.properties`` text: ``#``/``!`` comments, ``key=value``,
    ``key: value`` and ``key value``, backslash line continuation (leading
    whitespace of the continuation dropped), escapes ``\\t \\n \\r \\f
    \\uXXXX`` and ``\\<any>`` for that character.  Later keys win."""
    props: dict[str, str] = {}
    for lineno, line in _logical_lines(text):
        # The key ends at the first unescaped '=', ':' or whitespace.
        i = 0
        key_end = len(line)
        value_start = len(line)
        while i < len(line):
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c in "=:":
                key_end, value_start = i, i + 1
                break
            if c in _PROPS_WHITESPACE:
                key_end = i
                j = i
                while j < len(line) and line[j] in _PROPS_WHITESPACE:
                    j += 1
                if j < len(line) and line[j] in "=:":
                    j += 1
                value_start = j
                break
            i += 1
        while value_start < len(line) and line[value_start] in _PROPS_WHITESPACE:
            value_start += 1
        key = _unescape(line[:key_end], source, lineno)
        value = _unescape(line[value_start:], source, lineno)
        props[key] = value
    return props


def parse_overrides(args: Iterable[str]) -> dict[str, str]:
    """``--override key=value`` arguments (as kafka-server-start.sh) to a dict; later wins."""
    overrides: dict[str, str] = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        if not sep or not key.strip():
            raise ConfigException(f"Invalid command line properties: {arg!r} (expected key=value)")
        overrides[key.strip()] = value
    return overrides


# ---------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------


def _escape_properties(text: str, is_key: bool) -> str:
    out = []
    for i, c in enumerate(text):
        if c == "\\":
            out.append("\\\\")
        elif c in "=:#!" and is_key:
            out.append("\\" + c)
        elif c == " " and (is_key or i == 0):
            out.append("\\ ")
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif c == "\r":
            out.append("\\r")
        elif c == "\f":
            out.append("\\f")
        else:
            out.append(c)
    return "".join(out)


def render_properties(values: Optional[Mapping[str, Any]] = None) -> str:
    """Render a ``server.properties`` from the table, in Kafka's file style.

    Every key gets its doc, type, default, valid values and importance as
    comments.  Keys in ``values`` are written as settings; every other key is
    written commented out with its default, so the file documents defaults
    without pinning them.
    """
    values = dict(values or {})
    unknown = sorted(set(values) - set(BROKER_CONFIGS))
    if unknown:
        raise ConfigException(f"Cannot render unknown configuration(s): {', '.join(unknown)}")
    lines = ["# kafkapy broker configuration, rendered from kafkapy.server.config.BROKER_CONFIGS.",
             "# Names, types and defaults follow Apache Kafka's broker configs.", ""]
    for group in GROUP_ORDER:
        keys = [k for k in _BROKER_KEYS if k.group == group]
        if not keys:
            continue
        lines.append(f"############################# {group} #############################")
        lines.append("")
        for key in keys:
            for doc_line in textwrap.wrap(key.doc, width=76):
                lines.append(f"# {doc_line}")
            if not key.has_default:
                shown = "(required)"
            else:
                shown = key.default_string()
                shown = "null" if shown is None else shown
            facts = [f"Type: {key.type}", f"Default: {shown}"]
            if key.validator is not None:
                facts.append(f"Valid values: {key.validator}")
            facts.append(f"Importance: {key.importance}")
            lines.append("# " + ", ".join(facts))
            if key.name in values:
                raw = values[key.name]
                text = raw if isinstance(raw, str) else format_value(key.type, key.parse(raw))
                lines.append(f"{_escape_properties(key.name, True)}={_escape_properties(text or '', False)}")
            else:
                default = key.default_string() if key.has_default else None
                lines.append(f"#{key.name}={_escape_properties(default or '', False)}")
            lines.append("")
    return "\n".join(lines)
