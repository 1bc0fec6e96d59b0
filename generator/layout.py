"""Pass 3: layout math — one concrete layout per record version, fixed sizes and offsets.

A record's versions come from ``versions.range``; fields outside ``since``/``until`` are
dropped, and versions with identical field lists share one layout (and one generated
decoder). Fixed sizes propagate through records so documentation can show offsets and
the fast path can coalesce fixed runs.
"""

from __future__ import annotations

from . import ir
from .problems import Problems


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
        from .byteorder import base_of
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


def run(family: ir.Family, problems: Problems) -> None:
    from . import byteorder
    byteorder.plan(family, problems)
    memo: dict[str, int | None] = {}
    for rec in family.records.values():
        if rec.version_range is None:
            groups = [(None, rec.fields)]
        else:
            lo, hi = rec.version_range
            groups = []
            for v in range(lo, hi + 1):
                fields = [f for f in rec.fields if f.in_version(v)]
                for i, (vs, fs) in enumerate(groups):
                    if [id(x) for x in fs] == [id(x) for x in fields]:
                        groups[i] = ((*vs, v), fs)
                        break
                else:
                    groups.append(((v,), fields))
        rec.layouts = []
        if rec.orders:  # byte order as data: one layout per (versions, order)
            groups = [(vs, byteorder.layout_fields(rec, fs, o), o)
                      for vs, fs in groups for o in rec.orders]
        else:
            groups = [(vs, fs, None) for vs, fs in groups]
        for versions, fields, order in groups:
            lay = ir.Layout(versions=versions, fields=fields, order=order)
            pos: int | None = 0
            for f in fields:
                size = field_size(f, family, memo)
                if size is not None:
                    lay.sizes[f.name] = size
                if pos is not None:
                    lay.offsets[f.name] = pos
                    pos = pos + size if size is not None else None
            lay.fixed_size = pos
            rec.layouts.append(lay)
        if rec.version_from and rec.version_from not in rec.params:
            for lay in rec.layouts:
                if rec.version_from not in lay.offsets:
                    problems.add(rec.file, rec.line, f"records.{rec.name}.versions",
                                 f"version field {rec.version_from!r} must sit at a fixed offset")
