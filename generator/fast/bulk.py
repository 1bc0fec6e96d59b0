"""Which records are read many at a time, and which twins the module keeps.

The one-loop twins (``_m_<record>`` for ``decode_many_``/``decode_prefix_``,
``_em_<record>`` for ``encode_many_``) pay where records of one kind lie back to back and
are read or written as a run: a loop with the record's body in line runs 1.2-2.5x the
speed of a loop calling the record's decoder or encoder (``bench/twins.py`` measures it
on every record of the shipped schemas). Elsewhere they are code that is never run, and
a module's import and compile time grow with its size. So they are emitted for records
read in runs:

- a record no other record holds: a file, a frame, a log entry, read on its own or in
  sequence by whatever reads the format;
- an item of a list (``repeat``, a located run of records, a framed repeat);
- a record a ``detect`` rule reads in sequence (``repeat: true``, ``then:``);
- a ``rows: true`` record (its rows loop is built from the one-loop decoder);
- a record the schema marks ``many: true``.

``many: false`` refuses them on any record. The optimistic single-record twin
``_u_<record>`` follows: it is kept for the records above and wherever a kept twin calls
it (a sub-record that is not inlined); :func:`drop_unreferenced` removes the rest.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .. import ir


def _targets(t: ir.Type) -> Iterator[str]:
    """The records a field's type decodes."""
    if isinstance(t, ir.RefT) and t.kind == "record":
        yield t.target
    elif isinstance(t, ir.SwitchT):
        for _key, _label, rec in t.cases:
            if rec:
                yield rec
        if t.default not in ("error", "bytes"):
            yield t.default


def read_in_runs(family: ir.Family) -> frozenset[str]:
    """The records of ``family`` that get one-loop twins (see the module's docstring)."""
    held: set[str] = set()
    listed: set[str] = set()
    for rec in family.records.values():
        for f in rec.fields:
            for target in _targets(f.type):
                held.add(target)
                if f.repeat is not None or f.framing is not None:
                    listed.add(target)
        for loc in rec.located:
            held.add(loc.target)
            if loc.many or loc.how == "each":
                listed.add(loc.target)
    runs = (set(family.records) - held) | listed
    for d in family.detect:
        if d.repeat:
            runs.add(d.record)
        if d.then:
            runs.add(d.then)
    for rec in family.records.values():
        if rec.rows or rec.many:
            runs.add(rec.name)
        elif rec.many is False:
            runs.discard(rec.name)
    return frozenset(runs)


_DEF = re.compile(r"^def (_[a-z]+_\w+)\(", re.MULTILINE)


def drop_unreferenced(blocks: list[str], keep: frozenset[str]) -> list[str]:
    """``blocks`` without the ``_u_`` twins nothing calls: a ``_u_<name>`` stays when
    ``name`` (a record, or one byte order's layout ``<record>_<order>``) is in ``keep``,
    or when a function that stays names it. Blocks are split at their top-level
    ``def``s; what is left of each is joined again."""
    funcs: list[list[tuple[str, str]]] = []  # per block: (function name, its text)
    for block in blocks:
        starts = [m.start() for m in _DEF.finditer(block)]
        if not starts:
            funcs.append([("", block)])  # no function: kept whole
            continue
        parts = [block[a:b] for a, b in zip(starts, starts[1:] + [len(block)], strict=True)]
        funcs.append([("", block[:starts[0]])] if block[:starts[0]].strip() else [])
        funcs[-1] += [(_DEF.match(p).group(1), p) for p in parts]

    def kept_by_name(name: str) -> bool:
        if not name.startswith("_u_"):
            return True
        rec = name[3:]
        base, _, order = rec.rpartition("_")
        return rec in keep or (order in ("le", "be") and base in keep)

    alive = {name for fs in funcs for name, _ in fs if name and kept_by_name(name)}
    texts = {name: text for fs in funcs for name, text in fs if name}
    called = re.compile(r"\b(_u_\w+)\b")
    todo = [texts[n] for n in alive] + [t for fs in funcs for n, t in fs if not n]
    while todo:  # the twins the kept functions call, and those they call
        for callee in called.findall(todo.pop()):
            if callee not in alive and callee in texts:
                alive.add(callee)
                todo.append(texts[callee])
    out = []
    for fs in funcs:
        text = "".join(t for n, t in fs if not n or n in alive)
        if text.strip():
            out.append(text.rstrip("\n"))
    return out
