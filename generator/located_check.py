"""Resolve and check located fields (``at:``): where they are, what the encoder fills.

A located field is kept apart from the record's sequential fields (``Record.located``):
the sequential emitters never see it, and ``emit_located`` adds it to both codec paths.
"""

from __future__ import annotations

import ast
from typing import Any

from . import ir
from .expr import Expr
from .yamlsource import join

_KEYS = {"name", "type", "doc", "spec", "at", "repeat", "size", "lazy", "if"}


def resolve(rv: Any, src: Any, path: str, fb: dict) -> ir.Located | None:
    """The located field described by ``fb`` (a field with ``at:``), or None after
    reporting a problem."""
    name = fb.get("name", "")
    other = sorted(set(fb) - _KEYS)
    if other:
        rv.err(src, path, f"a located field (at:) takes only {sorted(_KEYS)}; not "
                          f"{other}")
        return None
    tname = fb.get("type")
    if not isinstance(tname, str) or "switch" in fb:
        rv.err(src, join(path, "type"), "a located field (at:) is a record or bytes")
        return None
    loc = ir.Located(name=name, target=tname, how="at", lazy=bool(fb.get("lazy", True)),
                     doc=fb.get("doc", ""), line=src.line(path), path=path)
    at = fb["at"]
    apath = join(path, "at")
    if isinstance(at, dict) and "find_last" in at:
        loc.how = "find_last"
        loc.signature = _signature(at["find_last"])
        loc.within = int(at["within"])
        if len(loc.signature) == 0 or loc.within < len(loc.signature):
            rv.err(src, apath, "find_last: an empty signature, or one longer than `within`")
            return None
    elif isinstance(at, dict) and "from_end" in at:
        loc.how = "from_end"
        loc.where = rv.expr(src, join(apath, "from_end"), at["from_end"])
    elif isinstance(at, dict) and "each" in at:
        loc.how = "each"
        loc.each, loc.each_offset = at["each"], at["offset"]
        loc.where = rv.expr(src, join(apath, "offset"), at["offset"])
    elif isinstance(at, dict):
        loc.where = rv.expr(src, join(apath, "offset"), at["offset"])
        loc.base = at.get("base")
    else:
        loc.where = rv.expr(src, apath, at)
    rep = fb.get("repeat")
    if rep is not None:
        if loc.how == "each":
            rv.err(src, join(path, "repeat"), "at: {each} already gives one record per item")
            return None
        if rep == "eos":
            loc.eos = True
        elif isinstance(rep, dict) and set(rep) == {"count"}:
            loc.count = rv.expr(src, join(join(path, "repeat"), "count"), rep["count"])
        else:
            rv.err(src, join(path, "repeat"), "a located run of records takes "
                                              "repeat: {count: EXPR} or repeat: eos")
            return None
    if "size" in fb:
        loc.size = rv.expr(src, join(path, "size"), fb["size"])
    if "if" in fb:
        loc.cond = rv.expr(src, join(path, "if"), fb["if"])
    if loc.eos and loc.size is None:
        rv.err(src, join(path, "repeat"), "repeat: eos on a located field needs its size:")
        return None
    if loc.how == "each" and loc.size is not None:
        rv.err(src, join(path, "size"), "size: is not taken with at: {each}")
        return None
    if tname == "bytes" and (loc.size is None or loc.many or loc.how == "each"):
        rv.err(src, join(path, "size"), "located bytes take a size: (and no repeat or "
                                        "each:)")
        return None
    return loc


def check(rv: Any, records: dict[str, ir.Record]) -> None:
    """Targets are records, names are known and read before use, and the integer fields
    the encoder fills are found (and marked ``filled``)."""
    referenced = set()
    for rec in records.values():
        for f in rec.fields:
            referenced |= set(ir.referenced_records(f.type))
    for rec in records.values():
        if not rec.located:
            continue
        src = rec._src  # type: ignore[attr-defined]
        rpath = join("records", rec.name)
        if rec.name in referenced:
            rv.err(src, rpath, "a record with located fields (at:) is read where the "
                               "buffer is the caller's: as the record decoded, or itself "
                               "located; not as a field of another record")
        if rec.params:
            rv.err(src, join(rpath, "params"), "a record with located fields (at:) takes "
                                               "no params")
        seq = {f.name: f for f in rec.fields}
        known: dict[str, ir.Located] = {}
        for loc in rec.located:
            tgt = records.get(loc.target)
            if loc.target == "bytes":  # raw bytes: nothing to resolve in a record
                _names(rv, src, rec, loc, seq, known, records)
                loc.fills = tuple(_fills(rv, src, rec, loc, seq, known, records))
                known[loc.name] = loc
                continue
            if tgt is None:
                rv.err(src, join(loc.path, "type"), f"a located field is a record; "
                                                    f"{loc.target!r} is not one")
                continue
            if tgt.params:
                rv.err(src, join(loc.path, "type"), f"a located record takes no params "
                                                    f"({loc.target!r} has some)")
            if loc.name in seq or loc.name in known:
                rv.err(src, join(loc.path, "name"), f"duplicate field {loc.name!r}")
            _names(rv, src, rec, loc, seq, known, records)
            loc.fills = tuple(_fills(rv, src, rec, loc, seq, known, records))
            known[loc.name] = loc


def _fixed_offset(rv: Any, rec: ir.Record, name: str) -> int | None:
    """The offset of sequential field ``name`` when every field before it has a fixed
    size and is always present."""
    at = 0
    for f in rec.fields:
        if f.name == name:
            return at
        size = rv._fixed_size(f, rv.aliases, rv.enums, rv.flagdefs)
        if size is None or f.cond is not None or f.since is not None or f.until is not None:
            return None
        at += size
    return None


def _names(rv: Any, src: Any, rec: ir.Record, loc: ir.Located, seq: dict,
           known: dict, records: dict) -> None:
    """Every name of a location, count or size is a field read before it: sequential, or
    located earlier."""
    exprs = [("at", loc.where), ("repeat.count", loc.count), ("size", loc.size),
             ("if", loc.cond)]
    if loc.how == "each":
        exprs = [("if", loc.cond)]
        if loc.each not in seq and loc.each not in known:
            rv.err(src, join(loc.path, "at"), f"each: {loc.each!r} is no earlier field")
            return
    if loc.base in seq:  # a field at a fixed offset: the record's start plus that offset
        shift = _fixed_offset(rv, rec, loc.base)
        if shift is None:
            rv.err(src, join(loc.path, "at"), f"base: {loc.base!r} is not at a fixed offset "
                                              f"in {rec.name!r}")
        else:
            loc.base_shift = shift
    elif loc.base is not None and loc.base != "_start" and loc.base not in known:
        rv.err(src, join(loc.path, "at"), f"base: {loc.base!r} is neither _start, a field "
                                          f"at a fixed offset nor an earlier located field")
    for key, e in exprs:
        if e is None:
            continue
        for n in e.names:
            if n not in seq and n not in known:
                rv.err(src, join(loc.path, key), f"{n!r} is no field of {rec.name!r} read "
                                                 f"before {loc.name!r}")


def _fills(rv: Any, src: Any, rec: ir.Record, loc: ir.Located, seq: dict, known: dict,
           records: dict) -> list[tuple[str, tuple[str, ...]]]:
    out = []
    if loc.how == "each":
        lst = seq.get(loc.each)
        item_rec = (records.get(known[loc.each].target) if loc.each in known else
                    records.get(lst.type.target) if lst is not None and isinstance(
                        lst.type, ir.RefT) and lst.repeat is not None else None)
        f = _int_field(item_rec, loc.each_offset) if item_rec else None
        if f is None:
            rv.err(src, join(loc.path, "at"), f"each: {loc.each!r} is no list of records "
                                              f"with an integer field {loc.each_offset!r}")
            return out
        f.filled = f"offset of {rec.name}.{loc.name}"
        return [("offset", (loc.each, "*", loc.each_offset))]
    kinds = [("offset" if loc.how == "at" else "distance", loc.where), ("count", loc.count),
             ("size", loc.size)]
    for kind, e in kinds:
        chain = _chain(e) if e is not None else None
        if chain is None:
            continue  # an expression the encoder checks instead of filling
        f = _resolve_chain(rec, chain, seq, known, records)
        if f is None:
            continue
        f.filled = f"{kind} of {rec.name}.{loc.name}"
        out.append((kind, chain))
    return out


def _chain(e: Expr) -> tuple[str, ...] | None:
    """``('eocd', 'cd_offset')`` for ``eocd.cd_offset``; None for anything else."""
    names: list[str] = []
    tree = e.tree
    while isinstance(tree, ast.Attribute):
        names.insert(0, tree.attr)
        tree = tree.value
    if not isinstance(tree, ast.Name):
        return None
    return (tree.id, *names)


def _resolve_chain(rec: ir.Record, chain: tuple[str, ...], seq: dict, known: dict,
                   records: dict) -> ir.Field | None:
    """The stored plain integer field a chain of names ends at, else None."""
    head = chain[0]
    if len(chain) == 1:
        f = seq.get(head)
        return f if f is not None and _plain_int(f) else None
    if head in known:
        cur = records.get(known[head].target)
    elif head in seq and isinstance(seq[head].type, ir.RefT) and seq[head].repeat is None:
        cur = records.get(seq[head].type.target)
    else:
        return None
    for name in chain[1:-1]:
        f = next((x for x in cur.fields if x.name == name), None) if cur else None
        if f is None or not isinstance(f.type, ir.RefT) or f.repeat is not None:
            return None
        cur = records.get(f.type.target)
    return _int_field(cur, chain[-1]) if cur else None


def _int_field(rec: ir.Record | None, name: str) -> ir.Field | None:
    if rec is None:
        return None
    f = next((x for x in rec.fields if x.name == name), None)
    return f if f is not None and _plain_int(f) else None


def _plain_int(f: ir.Field) -> bool:
    return (isinstance(f.type, (ir.IntT, ir.VarintT)) and f.in_model and f.repeat is None
            and f.cond is None and f.convert is None)


def _signature(text: str) -> bytes:
    if text.startswith("hex:"):
        return bytes.fromhex(text[4:])
    return text.encode("latin-1")

