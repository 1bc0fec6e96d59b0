"""Pass 3: layout math — one concrete layout per record version, fixed sizes and offsets.

A record's versions come from ``versions.range``; fields outside ``since``/``until`` are
dropped, and versions with identical field lists share one layout (and one generated
decoder). Fixed sizes propagate through records so documentation can show offsets and
the fast path can coalesce fixed runs.
"""

from __future__ import annotations

from . import byteorder, ir
from .problems import Problems
from .sizes import (  # re-exported: the emitters and checks read sizes from the layout
    field_size as field_size,
)
from .sizes import (
    fixed_size as fixed_size,
)
from .sizes import (
    numpy_code as numpy_code,
)
from .sizes import (
    record_dtype as record_dtype,
)
from .sizes import (
    record_size as record_size,
)
from .sizes import (
    type_size as type_size,
)


def run(family: ir.Family, problems: Problems) -> None:
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
