"""Size math over the IR: the fixed byte size of a field, type or record (None where it
depends on the data), numpy dtypes of fixed records, and the base integer of an
enum/flags/alias reference. The byte-order and layout passes both build on it.
"""

from __future__ import annotations

import dataclasses

from . import ir


def base_of(family: ir.Family, t: ir.RefT) -> ir.IntT:
    """The base integer of an enum/flags/alias reference, in the reference's order."""
    table = {"enum": family.enums, "flags": family.flags, "alias": family.aliases}[t.kind]
    base = table[t.target].base
    if t.order is not None and base.governed:
        return dataclasses.replace(base, endian=t.order)
    return base


def fixed_size(f: ir.Field, aliases: dict, enums: dict, flags: dict) -> int | None:
    """Byte size of an unconditional fixed-size scalar field, else None."""
    if f.cond is not None or f.since is not None or f.until is not None or f.repeat \
            or f.compressed is not None or f.size is not None or f.peek:
        return None
    t = f.type
    if isinstance(t, ir.RefT):
        table = {"alias": aliases, "enum": enums, "flags": flags}.get(t.kind)
        t = table[t.target].base if table is not None else None
    if isinstance(t, (ir.IntT, ir.FloatT)):
        return t.size
    if isinstance(t, ir.VarintT) and t.fixed is not None:
        return t.fixed
    if isinstance(t, ir.BytesT) and t.size is not None and t.prefix is None:
        n = t.size.constant()
        return n if isinstance(n, int) and not isinstance(n, bool) else None
    return None


def numpy_code(t: ir.Type, family: ir.Family) -> str | None:
    """numpy dtype string of a scalar type, or None when numpy cannot hold it."""
    if isinstance(t, ir.RefT) and t.kind in ("enum", "alias", "flags"):
        t = base_of(family, t)
    order = "<" if getattr(t, "endian", "le") == "le" else ">"
    if isinstance(t, ir.IntT) and t.bits in (8, 16, 32, 64):
        return f"{order}{'i' if t.signed else 'u'}{t.size}"
    if isinstance(t, ir.FloatT):
        return f"{order}f{t.size}"
    if isinstance(t, ir.BytesT) and not t.text and t.size is not None:
        c = t.size.constant()
        if isinstance(c, int) and not isinstance(c, bool):
            return f"V{c}"
    return None


def record_dtype(rec: ir.Record, family: ir.Family) -> list[tuple[str, str]] | None:
    """A structured dtype for a fixed-size record of scalars (for zero-copy views)."""
    if rec.params or rec.version_from:
        return None
    out = []
    for f in rec.fields:
        if f.cond is not None or f.repeat is not None or f.compressed is not None:
            return None
        code = numpy_code(f.type, family)
        if code is None:
            return None
        out.append((f.name, code))
    return out


def type_size(t: ir.Type, family: ir.Family, memo: dict[str, int | None]) -> int | None:
    if isinstance(t, (ir.IntT, ir.FloatT)):
        return t.size
    if isinstance(t, ir.VarintT) and t.fixed is not None:
        return t.fixed
    if isinstance(t, ir.BytesT):
        c = t.size.constant() if t.size is not None else None
        return c if isinstance(c, int) and not isinstance(c, bool) else None
    if isinstance(t, ir.RefT):
        if t.kind == "enum":
            return family.enums[t.target].base.size
        if t.kind == "flags":
            return family.flags[t.target].base.size
        if t.kind == "alias":
            return family.aliases[t.target].base.size
        return record_size(family.records[t.target], family, memo)
    return None


def field_size(f: ir.Field, family: ir.Family, memo: dict[str, int | None]) -> int | None:
    if f.cond is not None or f.compressed is not None or f.peek:  # a lookahead: no run
        return None
    size = type_size(f.type, family, memo)
    if size is None:
        return None
    if f.repeat is not None:
        count = f.repeat.count.constant() if f.repeat.count is not None else None
        if not isinstance(count, int) or isinstance(count, bool):
            return None
        size *= count
    return size


def record_size(rec: ir.Record, family: ir.Family, memo: dict[str, int | None]) -> int | None:
    if rec.name in memo:
        return memo[rec.name]
    memo[rec.name] = None  # cycle guard
    if rec.version_from is not None:
        return None
    total = 0
    for f in rec.fields:
        s = field_size(f, family, memo)
        if s is None:
            return None
        total += s
    memo[rec.name] = total
    return total
