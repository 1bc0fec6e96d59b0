"""What a generated module carries as plain data for the tools that read it without the
schemas: its detection rows, its record names and its IR.

``bytewright inspect`` and ``verify`` pick a file's family from the ``DETECT`` rows of
each generated module, read from the module's text without importing it (one line each,
near the top), and then load the IR of that family alone from the module's ``_IR``
(a pickle of the family, made deterministic here so that ``bytewright check`` sees any
drift in it as it does in code). Neither runs the schema pipeline.
"""

from __future__ import annotations

import ast
import base64
import dataclasses
import io
import pickle
import sys
from typing import Any

from . import ir
from .plan import stream_plan

PICKLE_PROTOCOL = 4  # fixed: the same IR gives the same bytes on every Python it runs on
# characters per line of the encoded IR (a blob: long lines keep the module's line count
# to its code). Not compressed: zlib builds (zlib-ng, vendor forks) deflate the same bytes
# differently, and `bytewright check` must see the same text on every machine.
WIDTH = 400


def magics(fam: ir.Family, rule: ir.Detect) -> list[tuple[int, bytes]]:
    """(offset, bytes) pairs a rule accepts: its magic, or with ``tags`` every byte-string
    case label of that switch, at the fixed offset of the field the switch reads."""
    if rule.tags is None:
        return [(rule.at, rule.magic)]
    rec = fam.records[rule.record]
    sw = next(f for f in rec.fields if f.name == rule.tags)
    assert isinstance(sw.type, ir.SwitchT)
    names = sorted(sw.type.on.names)
    offsets = rec.layouts[0].offsets if rec.layouts else {}
    if len(names) != 1 or names[0] not in offsets:
        return []
    at = offsets[names[0]]
    return [(at, key) for key, _, _ in sw.type.cases if isinstance(key, bytes)]


def detect_rows(fam: ir.Family) -> list[tuple]:
    """Every ``detect`` rule as plain tuples ``(at, magic, record, params, repeat, then,
    plan)``, one per magic it accepts; ``plan`` is the record's streaming plan."""
    rows = []
    for rule in fam.detect:
        plan = stream_plan(fam, rule.record)
        for at, magic in magics(fam, rule):
            rows.append((at, bytes(magic), rule.record, dict(rule.params), bool(rule.repeat),
                         rule.then, plan))
    return rows


class _Sorted(frozenset):
    """A set that pickles its members in sorted order (a frozenset's own order follows
    the string hashes, which change from one interpreter run to the next)."""

    kind: type = frozenset

    def __reduce__(self) -> tuple:
        return self.kind, (sorted(self, key=repr),)


def _canon(obj: Any, memo: dict[int, Any]) -> Any:
    """A copy of ``obj`` whose pickle does not depend on the run that built it: equal
    strings are one object (pickle shares by identity), sets are sorted, and the YAML
    each record was read from (``_src``: absolute paths, every line) is left out."""
    t = type(obj)
    if t is str:
        return sys.intern(obj)
    if obj is None or t in (int, float, bool, bytes):
        return obj
    key = id(obj)
    if key in memo:
        return memo[key]
    if t in (set, frozenset):
        out: Any = _Sorted(_canon(x, memo) for x in obj)
        if t is set:
            out.kind = set
    elif t is list:
        out = [_canon(x, memo) for x in obj]
    elif t is tuple:
        out = tuple(_canon(x, memo) for x in obj)
    elif t is dict:
        out = {_canon(k, memo): _canon(v, memo) for k, v in obj.items()}
    elif isinstance(obj, ast.AST):
        out = t()
        known = (*obj._fields, *obj._attributes)
        # its fields, positions, then what the generator noted on it (``bw_enum``)
        for name in (*known, *sorted(set(vars(obj)) - set(known))):
            if hasattr(obj, name):
                setattr(out, name, _canon(getattr(obj, name), memo))
    elif dataclasses.is_dataclass(obj):
        out = object.__new__(t)
        out.__dict__.update({_canon(k, memo): _canon(v, memo)
                             for k, v in vars(obj).items() if k != "_src"})
    else:
        raise TypeError(f"no plain form for {t.__name__} in the IR")
    memo[key] = out
    return out


def ir_text(fam: ir.Family) -> str:
    """The family's IR, pickled deterministically, as base64 lines of a parenthesised
    string literal (the value of ``_IR`` in the generated module)."""
    buf = io.BytesIO()
    memo: dict[int, Any] = {}
    pickle.Pickler(buf, protocol=PICKLE_PROTOCOL).dump(_canon(fam, memo))
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return "\n".join(f"    {data[i:i + WIDTH]!r}" for i in range(0, len(data), WIDTH))


def load_ir(text: str) -> ir.Family:
    """The family from its ``_IR`` text (the inverse of ``ir_text``)."""
    return pickle.loads(base64.b64decode(text))


def context(fam: ir.Family) -> dict[str, str]:
    """The template's values: ``DETECT`` and ``RECORD_NAMES`` on one line each (read
    without importing the module), and the encoded IR."""
    return {"detect_rows": repr(detect_rows(fam)),
            "record_names": repr(tuple(fam.records)),
            "ir_text": ir_text(fam)}
