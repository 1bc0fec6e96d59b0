"""Pass 3: layout math — one concrete layout per record version, fixed sizes and offsets.

A record's versions come from ``versions.range``; fields outside ``since``/``until`` are
dropped, and versions with identical field lists share one layout (and one generated
decoder). Fixed sizes propagate through records so documentation can show offsets and
the fast path can coalesce fixed runs.
"""

from __future__ import annotations

from . import ir
from .problems import Problems


def type_size(t: ir.Type, family: ir.Family, memo: dict[str, int | None]) -> int | None:
    if isinstance(t, (ir.IntT, ir.FloatT)):
        return t.size
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
    if f.cond is not None or f.compressed is not None:
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
        for versions, fields in groups:
            lay = ir.Layout(versions=versions, fields=fields)
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
