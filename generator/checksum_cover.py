"""Which bytes a checksum covers, and when both codec paths can check or patch it.

A checksum covers the fields before it (``preceding``), the fields after it
(``following``), the whole record, itself included (``all``), named fields anywhere in
the record (spans are expanded to names by the resolve pass), or absolute byte ranges of
the user's buffer (``{file: [start, end]}``). One that covers nothing after it and not
itself is checked where it is read and computed where it is written, as it always was.
Any other ("late") checksum is read as a plain value, checked once its last covered
field has been read, and on encode written as a placeholder (its filler) and patched in
place once its last covered byte has been written.
"""

from __future__ import annotations

from . import ir


def covered(fields: list[ir.Field], index: int) -> list[str]:
    """The names of the fields the checksum of ``fields[index]`` covers, in record order."""
    ck = fields[index].checksum
    out = []
    for i, f in enumerate(fields):
        if ck.files or ck.ranges:
            break
        if ck.covers is not None:
            take = f.name in ck.covers
        elif ck.scope == "following":
            take = i > index
        elif ck.scope == "all":
            take = True
        else:
            take = i < index
        if take and f.name not in ck.excluded:
            out.append(f.name)
    return out


def any_late(family: ir.Family) -> bool:
    """Whether any layout of ``family`` has a late checksum (its module then imports the
    runtime support for them)."""
    return any(f.checksum is not None and anchor(lay.fields, i) is not None
               for rec in family.records.values() for lay in rec.layouts
               for i, f in enumerate(lay.fields))


def anchor(fields: list[ir.Field], index: int, encode: bool = False) -> int | None:
    """The index of the field after which a late checksum is checked (decode) or patched
    (encode); ``None`` for a checksum checked in place. On encode a covered size that is
    patched once its sized field is written moves the anchor to that field."""
    f = fields[index]
    ck = f.checksum
    if ck.files:
        return len(fields) - 1  # absolute ranges: checked once the whole record is read
    names = [x.name for x in fields]
    cov = covered(fields, index)
    if not cov or max(names.index(n) for n in cov) < index:
        return None
    last = max(names.index(n) for n in cov)
    # a seed or parameter naming a field read later waits for it too
    exprs = ([ck.seed] if ck.seed is not None else []) + [e for _, e in ck.params]
    for e in exprs:
        last = max([last] + [names.index(n) for n in e.names if n in names])
    if encode:
        for n in cov:
            d = fields[names.index(n)].derived_from
            if d and d[0] == "size" and d[1] in names:
                last = max(last, names.index(d[1]))
    return last


def filler_bytes(ck: ir.Checksum, width: int) -> bytes:
    """The bytes a self-covering checksum's own field reads as while it is computed."""
    if isinstance(ck.filler, bytes):
        return ck.filler
    return bytes([ck.filler]) * width
