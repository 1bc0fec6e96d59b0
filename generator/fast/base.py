"""Shared state and small queries of the fast-path emitter.

The family's constants (``struct.Struct`` objects, tables) are named once here and
shared by every pass, so the same format is one constant however many records use it;
the scalar, size and varint helpers are what the decoders, encoders and their passes
ask of a field's type.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Self

from .. import byteorder, ir
from .. import checksum_cover as cover
from ..expr import parse
from ..model import call_args, camel
from ..runtime_names import (
    chain_anchor,
    intkind_binding,
)
from . import bulk

_START = re.compile(r"\bstart\b")
_STRUCT_CONST = re.compile(r"(_S\d+) = struct\.Struct\('([^']*)'\)")

@dataclass
class Spans:
    """Field names whose start/end offsets (or plain bytes) a checksum needs."""

    s: set = None
    e: set = None
    plain: set = None

    def __post_init__(self) -> None:
        self.s, self.e, self.plain = set(), set(), set()

    def __contains__(self, name: str) -> bool:
        return name in self.s or name in self.e or name in self.plain

@dataclass
class Item:
    """One slot of a fixed run: a field value, a length prefix or a repeat count."""

    field: ir.Field
    role: str  # value | prefix | count
    code: str
    size: int
    local: str

def _encode_call(encoding: str) -> str:
    """``.encode()`` for UTF-8 (the default: no argument to parse), else with the name."""
    return ".encode()" if encoding.lower().replace("_", "-") in ("utf-8", "utf8") \
        else f".encode({encoding!r})"

class EmitterBase:
    """The constants table, the per-record state and the type queries every pass uses."""

    def __init__(self, family: ir.Family) -> None:
        self.family = family
        self.consts: list[str] = []
        self._const_ids: dict[str, str] = {}
        self.min_sizes: dict[str, int] = {}
        self.deferred: dict[str, list[ir.Field]] = {}
        self.lay_name = ""
        self._inline_stack: frozenset[str] = frozenset()  # records being inlined (no recursion)
        self._inline_src: dict[tuple, tuple | None] = {}  # callee template per context
        self._reach: dict[str, frozenset[str]] = {}
        self._twins: dict[str, bool] = {}  # record -> has an optimistic twin
        # (kind, record, layout suffix, enclosing inlines it can reach) -> its checked
        # decoder or encoder (see ``built_once``)
        self._checked: dict[tuple, list[str]] = {}
        self._formats: dict[str, str] = {}  # struct constant -> format, of consts[:_fmt_pos]
        self._fmt_pos = 0
        self._no_twin = False
        self.all_twins = False  # one-loop twins for every record, not only those read in runs
        self._runs: frozenset[str] | None = None
        self._wanted: frozenset[str] | None = None  # records whose twins are built
        # (record, message) for a schema asking what the emitter cannot give (``rows``)
        self.problems: list[tuple[ir.Record, str]] = []

    def sub_emitter(self, share_checked: bool = True) -> Self:
        """A fresh emitter (its own per-record state) sharing the family's constants and
        caches; ``share_checked=False`` for one that builds checked code of another kind
        than ``built_once`` stores."""
        sub = type(self)(self.family)
        for attr in ("consts", "_const_ids", "min_sizes", "_inline_src", "_reach", "_twins",
                     "_wanted", "_runs", "all_twins"):
            setattr(sub, attr, getattr(self, attr))
        if share_checked:
            sub._checked = self._checked
        return sub

    def read_in_runs(self, name: str) -> bool:
        """Whether record ``name`` gets one-loop twins (``_m_``, ``_em_``; see ``bulk``)."""
        if self.all_twins:
            return True
        if self._runs is None:
            self._runs = bulk.read_in_runs(self.family)
        return name in self._runs

    def const(self, prefix: str, source: str, line: str | None = None) -> str:
        """The module constant holding ``source`` (one per distinct source); ``line``
        is the statement that binds it when not ``NAME = source``."""
        if source in self._const_ids:
            return self._const_ids[source]
        name = f"_{prefix}{len(self._const_ids)}"
        self._const_ids[source] = name
        self.consts.append(line.format(name=name) if line else f"{name} = {source}")
        return name

    def dtype_const(self, spec: str) -> str:
        """A module constant holding ``numpy.dtype(spec)``, bound when numpy is first used
        (the module imports numpy lazily): read it only after a ``numpy.`` attribute in
        the same expression, as in ``numpy.frombuffer(mv, _DT3, n, pos)``."""
        return self.const("DT", f"numpy.dtype({spec!r})",
                          "_NUMPY.dtype_later({name!r}, " + repr(spec).replace("{", "{{")
                          .replace("}", "}}") + ")")

    def built_once(self, kind: str, rec: ir.Record, lay: ir.Layout, build) -> list[str]:
        """``build(rec, lay)`` (the checked decoder or encoder, ``kind`` "d"/"e"), built
        once per context: it is the same text for the record itself, for the callers'
        inline templates and for deciding a caller's twin, unless a record it can reach
        is being inlined around it (recursion stops there). A copy, for the caller to
        extend."""
        ctx = self._inline_stack & self._reachable(rec.name)
        key = (kind, rec.name, lay.suffix, ctx)
        got = self._checked.get(key)
        if got is None:
            got = self._checked[key] = build(rec, lay)
        else:  # the per-record state the build leaves
            self.cur_rec, self.lay = rec, lay
            if kind == "d":
                self.lay_name = rec.name + lay.suffix
        return list(got)

    def struct_formats(self) -> dict[str, str]:
        """Each ``struct.Struct`` constant's name -> its format, of the constants so far
        (a copy, for a pass that adds the structs it fuses). The list is read on from
        where the last call stopped: each constant is looked at once per emitter."""
        for c in self.consts[self._fmt_pos:]:
            m = _STRUCT_CONST.fullmatch(c)
            if m:
                self._formats[m.group(1)] = m.group(2)
        self._fmt_pos = len(self.consts)
        return dict(self._formats)

    def ck_width(self, t: ir.Type) -> int:
        """The width of a checksum's field: a fixed-size scalar or a fixed-width kind."""
        if isinstance(t, ir.VarintT):
            return t.fixed
        return self.scalar_code(t)[1]

    def ck_packers(self, t: ir.Type):
        """(pack(value), pack_into(at, value)) sources writing a checksum's field."""
        if isinstance(t, ir.VarintT):  # a fixed-width kind (ASCII digits)
            b, w = intkind_binding(t), t.fixed
            return (lambda v: f"{b}.encode({v})",
                    lambda at, v: f"out[{at}:{at} + {w}] = {b}.encode({v})")
        sc = self.scalar_code(t)
        st = self.const("S", f"struct.Struct({('<' if sc[2] == 'le' else '>') + sc[0]!r})")
        return (lambda v: f"{st}.pack({v})", lambda at, v: f"{st}.pack_into(out, {at}, {v})")

    def base_int(self, t: ir.Type) -> ir.IntT | None:
        if isinstance(t, ir.IntT):
            return t
        if isinstance(t, ir.RefT) and t.kind in ("enum", "flags", "alias"):
            return byteorder.base_of(self.family, t)  # in the layout's byte order
        return None

    def scalar_code(self, t: ir.Type) -> tuple[str, int, str] | None:
        """(struct code, size, endian) for a runnable scalar type, else None."""
        it = self.base_int(t)
        if it is not None:
            return (it.code or f"{it.size}s", it.size, it.endian)
        if isinstance(t, ir.FloatT):
            return (t.code, t.size, t.endian)
        if isinstance(t, ir.BytesT) and not t.text and t.size is not None:
            c = t.size.constant()
            if isinstance(c, int) and not isinstance(c, bool):
                return (f"{c}s", c, "le")
        return None

    def min_size(self, rec_name: str) -> int:
        """A lower bound on a record's encoded size (for allocation checks)."""
        if rec_name in self.min_sizes:
            return self.min_sizes[rec_name]
        self.min_sizes[rec_name] = 0
        rec = self.family.records[rec_name]
        sizes = []
        for lay in rec.layouts:
            total = 0
            for f in lay.fields:
                if f.cond is not None or f.compressed is not None or f.peek:
                    continue
                total += self.field_min(f)
            sizes.append(total)
        self.min_sizes[rec_name] = min(sizes) if sizes else 0
        return self.min_sizes[rec_name]

    def field_min(self, f: ir.Field) -> int:
        if f.repeat is not None:
            return f.repeat.prefix.size if f.repeat.prefix else 0
        return self.type_min(f.type)

    def type_min(self, t: ir.Type) -> int:
        sc = self.scalar_code(t)
        if sc:
            return sc[1]
        if isinstance(t, ir.BytesT):
            return t.prefix.size if t.prefix else 0
        if isinstance(t, ir.VarintT):
            return 1
        if isinstance(t, ir.RefT) and t.kind == "record":
            return self.min_size(t.target)
        if isinstance(t, ir.SwitchT):
            mins = [self.min_size(r) for _, _, r in t.cases if r]
            return min(mins) if mins and all(r for _, _, r in t.cases) else 0
        return 0

    def runnable(self, f: ir.Field) -> bool:
        if f.cond is not None or f.compressed is not None or f.size is not None or f.peek:
            return False
        if self.uses_position(f):
            return False  # _offset/_remaining are taken at this field, not at a run's start
        if f.convert is not None:  # converted after the read (decode_field)
            return False
        if f.repeat is not None:
            return False
        return self.scalar_code(f.type) is not None

    @staticmethod
    def uses_position(f: ir.Field) -> bool:
        exprs = [f.value] + [a.check for a in f.asserts]
        return any(e is not None and e.names & {"_offset", "_remaining"} for e in exprs)

    def call_args(self, callee: ir.Record, args: tuple, caller: ir.Record, res) -> str:
        return call_args(callee, args, caller, res)

    def model_names(self, rec: ir.Record) -> list[str]:
        return [f.name for f in rec.model_fields]

    @staticmethod
    def construct(rec: ir.Record, vals: list[str], target: str) -> list[str]:
        """Build the record's object into ``target``: a new instance with its slots stored
        directly (no ``__init__`` call: measured ~25% cheaper per object, and objects are
        a large share of decode time)."""
        cls = camel(rec.name)
        if not vals:
            return [f"{target} = {cls}()"]
        names = [f.name for f in rec.model_fields]
        return [f"{target} = _new({cls})"] + [
            f"{target}.{n} = {v}" for n, v in zip(names, vals, strict=True)]

    @staticmethod
    def drop_unused_start(lines: list[str]) -> list[str]:
        """Leave out ``start = ...`` (line 2) when no other line reads ``start``: one
        operation less per record on the hot path."""
        if _START.search("\n".join(lines[2:])):  # (one search: a name spans no line)
            return lines
        return lines[:1] + lines[2:]

    @staticmethod
    def plain(f: ir.Field) -> bool:
        return f.cond is None and f.compressed is None and f.size is None

    @staticmethod
    def text_lines(target: str, n: str, encoding: str, label: str) -> list[str]:
        """Inline text decoding (no helper call on the happy path)."""
        return ["try:",
                f"    {target} = str(mv[pos:pos + {n}], {encoding!r})",
                "except UnicodeDecodeError as _u:",
                f"    raise _text_error(_u, pos, {encoding!r}, {label!r}) from None"]

    def needs_post(self, f: ir.Field) -> bool:
        if f.valid is not None:
            return True  # every item is range-checked, as on the Construct path
        t = f.type
        if isinstance(t, ir.RefT) and t.kind in ("enum", "flags"):
            return True
        it = self.base_int(t)
        return bool(it and it.code is None)

    def packed_kind(self, f: ir.Field) -> str:
        """The module constant naming the element kind of a ``view: packed`` field."""
        it = self.base_int(f.type)
        if it is not None:
            order, code, size, signed = it.endian, it.code or "", it.size, it.signed
        else:
            order, code, size, signed = f.type.endian, f.type.code, f.type.size, True
        order = "<" if order == "le" else ">"
        return self.const("PK", f"_packed_kind({order!r}, {code!r}, {size}, {signed})")

    @staticmethod
    def np_code(code: str) -> str:
        return {"B": "u1", "b": "i1", "H": "u2", "h": "i2", "I": "u4", "i": "i4",
                "Q": "u8", "q": "i8", "f": "f4", "d": "f8"}[code]

    @staticmethod
    def negative_length(prefix: ir.VarintT | ir.IntT, label: str, n: str = "_n") -> list[str]:
        """A signed length prefix that decodes negative is a rule broken where the data
        starts (as the Construct path reports it), never a backwards read."""
        if not prefix.signed:
            return []
        return [f"if {n} < 0:",
                f"    raise ConstraintError('negative size', offset=pos, path={label!r}, "
                f"expected='>= 0', found={n})"]

    @staticmethod
    def varint_decode(t: ir.VarintT, target: str, label: str) -> list[str]:
        """Decode one varint into ``target``; short uleb128 values skip the call."""
        if not t.legacy:  # a registered integer kind, bound at import
            return [f"{target}, pos = {intkind_binding(t)}.decode(mv, pos, end, {label!r})"]
        if t.kind == "uleb128":
            # one- and two-byte values (below 16384) decode inline, the rest in one call
            return ["if pos < end and mv[pos] < 128:",
                    f"    {target} = mv[pos]",
                    "    pos += 1",
                    "elif pos + 1 < end and mv[pos + 1] < 128:",
                    f"    {target} = mv[pos] & 127 | mv[pos + 1] << 7",
                    "    pos += 2",
                    "else:",
                    f"    {target}, pos = _uleb128(mv, pos, end, {label!r})"]
        return [f"{target}, pos = _{t.kind}(mv, pos, end, {label!r})"]

    @staticmethod
    def varint_encode(t: ir.VarintT, val: str) -> str:
        """One varint's bytes. A uleb128 value that is an exact int (not a bool, which
        the function refuses) below 16384 is written without a call: one byte from a
        prebuilt table, two built in place; anything else goes to the function."""
        if not t.legacy:
            return f"{intkind_binding(t)}.encode({val})"
        if t.kind == "uleb128":
            return (f"(_uleb128_encode(_w) if (_w := {val}).__class__ is not int "
                    f"or not -1 < _w < 16384 else _uleb128_one[_w] if _w < 128 "
                    f"else bytes((_w & 127 | 128, _w >> 7)))")
        return f"_{t.kind}_encode({val})"

    def is_late(self, f: ir.Field, encode: bool = False) -> bool:
        """Whether checksum field ``f`` covers bytes at or after its own place."""
        i = next(i for i, x in enumerate(self.lay.fields) if x is f)
        return cover.anchor(self.lay.fields, i, encode) is not None

    def chained_type(self, f: ir.Field) -> ir.Type:
        """The element type of a chained repeat: its chain param reads ``_chain``."""
        if f.chain is None:
            return f.type
        args = tuple(a for a in f.type.args if a[0] != f.chain.param)
        return dataclasses.replace(f.type, args=args + ((f.chain.param, parse("_chain")),))

    def chain_read(self, f: ir.Field, buf: str, start: str, stop: str) -> str:
        """Source reading the stored chain value of the item at ``start``..``stop``."""
        if f.chain.decoded:  # the item just decoded (or encoded) is ``_x``
            return f"_x.{f.chain.source}"
        side, k, it = chain_anchor(self.family, f, f.type.order)
        st = self.const("S", f"struct.Struct({('<' if it.endian == 'le' else '>') + it.code!r})")
        at = f"{start} + {k}" if side == "start" else f"{stop} - {k}"
        return f"{st}.unpack_from({buf}, {at})[0]"
