"""Schema rules for ``peek: true`` fields: an integer read at the current position
without consuming it (a lookahead), held by no model and written by no encoder.

Because the encoder never has a peeked value, only decode-side expressions may read one:
the ``if:`` of a later field of the model (on encode, that field's presence is its value's,
``None`` = absent), a value with no type, or an ``assert``.
"""

from __future__ import annotations

from . import ir
from .problems import Checker
from .yamlsource import Source, join

# keys that give a field bytes, a place or a value of its own: none fits a lookahead
_EXCLUSIVE = ("repeat", "if", "const", "value", "checksum", "size", "bits", "compressed",
              "convert", "absent", "at", "reserved", "default", "since", "until", "length",
              "terminator", "chain", "framing", "view", "endian", "valid", "assert")


def _integer(res: Checker, t: ir.Type) -> bool:
    if isinstance(t, ir.RefT) and t.kind == "alias":
        t = res.aliases[t.target].base
    elif isinstance(t, ir.RefT) and t.kind == "enum":
        t = res.enums[t.target].base
    return isinstance(t, ir.IntT) and t.code is not None


def field(res: Checker, src: Source, path: str, fb: dict, f: ir.Field) -> None:
    """Mark ``f`` as a lookahead, or report why it cannot be one."""
    bad = [k for k in _EXCLUSIVE if k in fb]
    if bad:
        res.err(src, join(path, "peek"),
                f"a peek field has no bytes of its own: drop {', '.join(bad)}")
    elif not _integer(res, f.type):
        res.err(src, join(path, "peek"), "peek reads a fixed-width integer (u8, u16be, an enum)")
    else:
        f.peek = True


def peeked(rec: ir.Record) -> frozenset[str]:
    """Names of the record's lookahead fields."""
    return frozenset(f.name for f in rec.fields if f.peek)


def uses(res: Checker, src: Source, rec: ir.Record, f: ir.Field) -> None:
    """Expressions the encoder evaluates must not read a lookahead (it has none)."""
    names = peeked(rec)
    if not names:
        return
    for label, e in res.exprs_of(f):
        hit = sorted(e.names & names)
        if not hit or label == "assert" or (label == "if" and f.in_model and not f.peek):
            continue
        where = ("the condition of a field outside the model" if label == "if"
                 else label)
        res.err(src, join(f.path, label),
                f"{where} reads peek field {hit[0]!r}, which the encoder does not have "
                f"(a peek value may be read by the if: of a model field, a value with no "
                f"type or an assert)")
