"""What every tool shares: option parsing, property parsing, error handling.

Kafka's tools print one line on stderr and exit 1 for operator mistakes
(CommandLineUtils.printUsageAndExit, TerseException); we do the same for every
error, including ones from the broker, and never show a traceback.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import Callable, Iterable, Optional, Sequence


class ToolError(Exception):
    """An error to show as one line on stderr; ``exit_code`` is the exit status."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


class ArgumentParser(argparse.ArgumentParser):
    """argparse that raises ToolError instead of printing usage and exiting 2."""

    def error(self, message):  # noqa: D401 - argparse's hook
        raise ToolError(f"{self.prog}: {message}")


def parser(prog: str, description: str) -> ArgumentParser:
    return ArgumentParser(prog=prog, description=description, allow_abbrev=False)


def parse_properties(items: Optional[Iterable[str]], what: str = "property") -> dict[str, str]:
    """``["a=b", "c=d,e=f"]`` -> ``{"a": "b", ...}``; Kafka splits on the first '='.

    Kafka's --property/--producer-property take one k=v per flag; commas are
    kept inside values (a key.separator may be ","), so we do not split on them.
    """
    props: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ToolError(f"Invalid {what} '{item}': expected key=value")
        props[key.strip()] = value
    return props


def parse_config_list(text: str) -> dict[str, str]:
    """kafka-configs' ``--add-config 'a=1,b=[x,y]'``: commas split entries, except inside [ ]."""
    entries: dict[str, str] = {}
    depth = 0
    current = []
    parts = []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(depth - 1, 0)
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    for part in parts:
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise ToolError(f"Invalid entity config: all configs to be added must be in the format \"key=val\". Got '{part}'")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        entries[key.strip()] = value
    return entries


def load_properties_file(path: Optional[str]) -> dict[str, str]:
    """A Java .properties file (``k=v`` or ``k: v`` lines, # and ! comments)."""
    if not path:
        return {}
    props: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as f:
            for raw in f:
                line = raw.strip()
                if not line or line[0] in "#!":
                    continue
                for i, ch in enumerate(line):
                    if ch in "=:":
                        props[line[:i].strip()] = line[i + 1:].strip()
                        break
                else:
                    props[line] = ""
    except OSError as exc:
        raise ToolError(f"Cannot read {path}: {exc.strerror}") from None
    return props


def run(body: Callable[[Sequence[str]], int], argv: Optional[Sequence[str]]) -> int:
    """Run a tool's body, mapping every failure to one stderr line and an exit code."""
    if argv is None:
        argv = sys.argv[1:]
    previous = _unwind_on_sigterm()
    try:
        return body(list(argv))
    except ToolError as exc:
        _err(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `tool | head`: the reader went away; stop quietly like a shell tool.
        # Point stdout at /dev/null so the interpreter's final flush cannot fail.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
        return 1
    except SystemExit as exc:  # argparse --help
        return exc.code if isinstance(exc.code, int) else 0
    except Exception as exc:  # noqa: BLE001 - the contract is "never a traceback"
        name = getattr(exc, "name", None) or type(exc).__name__
        text = str(exc)
        _err(f"Error: {text}" if text and name in text else f"Error: {name}: {text}" if text else f"Error: {name}")
        return 1
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _terminated(_signum, _frame) -> None:
    raise SystemExit(143)


def _unwind_on_sigterm():
    """SIGTERM unwinds the tool as an error would (its ``finally`` blocks
    stop what it started: kafkapy-chaos's brokers and ZooKeeper nodes were
    left running when it was told to stop), where the default would end it
    at once. Only from the main thread and over the default handler; the
    handler it replaced is returned (None: nothing set)."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return None
    return signal.signal(signal.SIGTERM, _terminated)


def _err(line: str) -> None:
    try:
        sys.stderr.write(line.rstrip("\n") + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
