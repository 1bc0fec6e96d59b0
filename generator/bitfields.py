"""Code for bit fields (``bits:`` on an integer field), shared by both codec paths: the
model's bit ranges taken from the decoded integer, and the encoder's checks of the
values it packs (one runtime helper, so both paths raise the same ``EncodeError``)."""

from __future__ import annotations

from typing import Any

from . import ir
from .model import enum_class


def _members(family: ir.Family, p: ir.BitPart) -> tuple[int, ...] | None:
    if p.enum is None or family.enums[p.enum].open:
        return None
    return tuple(sorted(m.value for m in family.enums[p.enum].members))


def extract(em: Any, fields: list[ir.Field], px: str) -> list[str]:
    """Statements setting ``<px><range>`` from the decoded integer ``<px><field>`` for
    every model bit range of ``fields`` (checked already by the field's rules)."""
    out: list[str] = []
    for f in fields:
        parts = [p for p in f.bits if p.const is None]  # in the model or derived
        if not parts:
            continue
        inner = []
        for p in parts:
            raw = f"{px}{f.name} >> {p.lo} & {(1 << p.width) - 1}" if p.lo else \
                f"{px}{f.name} & {(1 << p.width) - 1}"
            if p.boolean:
                val = f"bool({raw})"
            elif p.enum is not None:
                table = f"_{enum_class(p.enum).upper()}_BY_VALUE"
                val = f"{table}.get(_bx, _bx)" if em.family.enums[p.enum].open \
                    else f"{table}[_bx]"
                inner.append(f"_bx = {raw}")
            else:
                val = raw
            inner.append(f"{px}{p.name} = {val}")
        if f.cond is not None or f.since is not None or f.until is not None:
            out += [f"{px}{p.name} = None" for p in parts]
            out.append(f"if {px}{f.name} is not None:")
            out += ["    " + x for x in inner]
        else:
            out += inner
    return out


def call(family: ir.Family, p: ir.BitPart, val: str) -> str:
    """The checked integer of bit range ``p`` whose model value is ``val``."""
    args = [val, str(p.width), repr(p.name)]
    if p.valid is not None:
        args += [f"lo={p.valid[0]!r}", f"hi={p.valid[1]!r}"]
    members = _members(family, p)
    if members is not None:
        args.append(f"members={members!r}")
    return f"_bit_part({', '.join(args)})"


def checks(em: Any, fields: list[ir.Field], res: Any) -> list[str]:
    """Fast encoder: ``_bp_<range>`` for each bit range with a value (the model's, or its
    ``value:`` computed from the model), checked before anything is written (the field's
    own ``value`` packs these)."""
    out: list[str] = []
    for f in fields:
        for p in f.bits:
            if p.const is not None:
                continue
            if p.field is None:  # derived from the model by its expression
                out.append(f"_bp_{p.name} = {call(em.family, p, p.value.render(res))}")
                continue
            c = call(em.family, p, f"v.{p.name}")
            optional = f.cond is not None or f.since is not None or f.until is not None
            out.append(f"_bp_{p.name} = None if v.{p.name} is None else {c}" if optional
                       else f"_bp_{p.name} = {c}")
    return out


def virtuals(rec: ir.Record, res: Any, px: str) -> list[str]:
    """Decoders: the record's values with no bytes, from the fields just read."""
    return [f"{px}{v.name} = {v.value.render(res)}" for v in rec.virtuals]


def uses(family: ir.Family) -> bool:
    return any(f.bits for r in family.records.values() for f in r.fields)
