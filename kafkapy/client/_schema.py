"""Build kio request entities of any version from one plain-dict description.

The client speaks several versions of each API (whatever the broker and we
both support, see ``conn.CLIENT_APIS``).  Rather than one builder per version,
each request is described once as a dict holding the union of the fields of
every version; ``build(cls, values)`` keeps the fields ``cls`` has, fills
defaults for the rest, and recurses into nested structs and arrays of them.
A required field missing from ``values`` raises ``KeyError`` naming it, so a
version we did not describe fully fails loudly in tests rather than on the
wire.

Thread-safety: the per-class plan cache is filled idempotently.
"""

from __future__ import annotations

import dataclasses
import typing

_MISSING = dataclasses.MISSING
_PLANS: dict = {}


def _nested_class(hint):
    """The dataclass inside ``X``, ``X | None`` or ``tuple[X, ...]``, else None."""
    if dataclasses.is_dataclass(hint):
        return hint
    for arg in typing.get_args(hint):
        found = _nested_class(arg)
        if found is not None:
            return found
    return None


def _plan(cls):
    plan = _PLANS.get(cls)
    if plan is None:
        hints = typing.get_type_hints(cls)
        plan = []
        for field in dataclasses.fields(cls):
            hint = hints[field.name]
            nested = _nested_class(hint)
            is_array = typing.get_origin(hint) is tuple or any(
                typing.get_origin(a) is tuple for a in typing.get_args(hint)
            )
            if field.default is not _MISSING:
                default = field.default
            elif field.default_factory is not _MISSING:
                default = field.default_factory
            else:
                default = _MISSING
            plan.append((field.name, nested, is_array, default, field.default_factory is not _MISSING))
        _PLANS[cls] = plan
    return plan


def build(cls, values: dict):
    """A ``cls`` instance from ``values`` (extra keys are ignored)."""
    kwargs = {}
    for name, nested, is_array, default, is_factory in _plan(cls):
        if name in values:
            value = values[name]
            if nested is not None and value is not None:
                if is_array:
                    value = tuple(v if dataclasses.is_dataclass(v) else build(nested, v) for v in value)
                elif not dataclasses.is_dataclass(value):
                    value = build(nested, value)
            elif is_array and value is not None and not isinstance(value, tuple):
                value = tuple(value)
            kwargs[name] = value
        elif default is _MISSING:
            raise KeyError(f"{cls.__module__}.{cls.__name__} needs field {name!r}")
        elif not is_factory:
            kwargs[name] = default
    return cls(**kwargs)
