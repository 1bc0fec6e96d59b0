"""Field defaults: ``default:`` gives the object model a value for an absent field.

A field absent from some versions (``since``/``until``) or under a false ``if:`` decodes
as its default instead of ``None``, and the generated dataclass makes it a keyword
argument with that default, so constructors need not name it. Only immutable scalars
are defaults (a dataclass default is shared by every instance).
"""

from __future__ import annotations

from typing import Any

from . import ir
from .model import enum_class
from .problems import Checker
from .yamlsource import Source, join


def resolve_default(res: Checker, src: Source, path: str, f: ir.Field, raw: Any) -> None:
    """Check ``raw`` against ``f``'s type and store it on the field."""
    at = join(path, "default")
    t = f.type
    if f.repeat is not None or not f.in_model:
        res.err(src, at, "default: needs a single stored field of the object model "
                         "(not a repeat, const, reserved, checksum, derived or value field)")
        return
    value: Any = raw
    if raw is None:
        pass
    elif isinstance(t, ir.BytesT):
        if t.text:
            if not isinstance(raw, str):
                res.err(src, at, f"default of a str field must be text, not {raw!r}")
                return
        elif isinstance(raw, str) and raw.startswith("hex:"):
            try:
                value = bytes.fromhex(raw[4:])
            except ValueError:
                res.err(src, at, f"default {raw!r} is not valid hex")
                return
        else:
            res.err(src, at, 'default of a bytes field is written "hex:..."')
            return
    elif isinstance(t, ir.RefT) and t.kind == "enum":
        e = res.enums[t.target]
        if isinstance(raw, str):
            member = raw.partition(".")[2] if "." in raw else raw
            value = e.value_of(member)
            if value is None:
                res.err(src, at, f"default {raw!r} is not a member of enum {t.target!r}")
                return
        elif isinstance(raw, int) and not isinstance(raw, bool) and \
                (e.open or any(m.value == raw for m in e.members)):
            value = raw
        else:
            res.err(src, at, f"default {raw!r} is not a member of enum {t.target!r}")
            return
    elif isinstance(t, ir.FloatT):
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            res.err(src, at, f"default of a float field must be a number, not {raw!r}")
            return
        value = float(raw)
    elif isinstance(t, ir.IntT | ir.VarintT) or (isinstance(t, ir.RefT) and t.kind == "alias"
                                                  and f.convert is None):
        if isinstance(raw, bool) or not isinstance(raw, int):
            res.err(src, at, f"default of an integer field must be an integer, not {raw!r}")
            return
        base = t if isinstance(t, ir.IntT) else (
            res.aliases[t.target].base if isinstance(t, ir.RefT) else None)
        if base is not None and not base.lo <= raw <= base.hi:
            res.err(src, at, f"default {raw} does not fit {base.name}")
            return
    else:
        res.err(src, at, "default: needs an integer, float, bytes, str or enum field "
                         "(a record, flags or switch value has no shared default)")
        return
    f.has_default = True
    f.default = value


def code(f: ir.Field, family: ir.Family) -> str:
    """Python source of ``f``'s default in the generated module."""
    t = f.type
    if isinstance(t, ir.RefT) and t.kind == "enum" and f.default is not None \
            and not family.enums[t.target].open:
        member = next(m.name for m in family.enums[t.target].members if m.value == f.default)
        return f"{enum_class(t.target)}.{member}"
    return repr(f.default)


def absent(f: ir.Field, family: ir.Family) -> str:
    """What an absent field decodes as: its default, else ``None``."""
    return code(f, family) if f.has_default else "None"
