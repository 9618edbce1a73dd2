"""Kafka message entities (kio dataclasses) built from plain dicts.

Handlers, the group coordinator and tools write responses as plain dicts and
turn them into kio entities with ``construct(cls, data)``: fields a version
lacks are dropped, fields it has but the dict omits take the schema default,
so one handler serves every version. Sans-IO and stateless; ``_plan`` is
cached per entity class.
"""

from __future__ import annotations

import dataclasses
from functools import cache

_MISSING = dataclasses.MISSING


@cache
def _plan(cls):
    plan = []
    for f in dataclasses.fields(cls):
        nested = None
        for ftype in (f.type, *getattr(f.type, "__args__", ())):  # X or Optional[X]
            if getattr(ftype, "__origin__", None) is tuple:
                inner = ftype.__args__[0]
                if dataclasses.is_dataclass(inner):
                    nested = ("many", inner)
                    break
            elif dataclasses.is_dataclass(ftype):
                nested = ("one", ftype)
                break
        if f.default is not _MISSING:
            default = (False, f.default)
        elif f.default_factory is not _MISSING:
            default = (True, f.default_factory)
        else:
            default = None
        plan.append((f.name, nested, default))
    return plan


def construct(cls, data: dict):
    """Build a kio entity of ``cls`` from a (possibly nested) plain dict."""
    kwargs = {}
    for name, nested, default in _plan(cls):
        if name in data:
            value = data[name]
            if nested is not None and value is not None:
                kind, inner = nested
                if kind == "many":
                    value = tuple(v if type(v) is inner else construct(inner, v) for v in value)
                elif type(value) is not inner:
                    value = construct(inner, value)
            kwargs[name] = value
        elif default is not None:
            factory, value = default
            kwargs[name] = value() if factory else value
        elif nested is not None and nested[0] == "many":
            kwargs[name] = ()
        else:
            raise KeyError(f"{cls.__qualname__}.{name} has no value and no default")
    return cls(**kwargs)
