"""``bytewright inspect FILE``: find the format, then show every record and field with its
offset, size, path, decoded value and checksum status.

The engine knows no format. Each family declares in its schema how its files are
recognised (``detect:`` magic bytes at an offset select the top-level record); the
inspector walks the family's generated Construct definition (the readable reference
path) with every named field wrapped in a tracer that notes where the field starts and
ends in the file. That gives, for free, everything decoded before a failure: the tree
built so far plus the error with its offset and path. Checksums are checked without
stopping (status ok / expected vs found), so a damaged file still shows the rest.

Offsets are absolute file offsets. Bytes that only exist after decompression are shown
relative to their decompressed region (``+12 in snapshot.entries``). Files declared as a
sequence of records (``repeat: true``) are read one record at a time from the open file,
so memory stays bounded by the largest record; ``limit`` stops after N records.
"""

from __future__ import annotations

import dataclasses
import enum
import io
import mmap
import os
from collections.abc import Callable, Iterator
from decimal import Decimal, localcontext
from typing import Any, BinaryIO

import construct as cs

from ..generator import byteorder, emit_index, ir
from ..runtime import registry
from ..runtime.construct_support import construct_error
from ..runtime.cover import LateChecksum
from ..runtime.errors import BytewrightError, ChecksumError, DecodeError
from ..runtime.fastpath import LogList
from ..runtime.mapped import RELEASE_EVERY, releaser
from . import inspect_located

REPEATS = {"Array", "GreedyRange", "RepeatUntil", "RepeatToEnd", "Terminated",
           "ChainedRepeat", "PrefixedArray", "LogList"}
OPAQUE = {"Restreamed", "Transformed", "BitStruct", "Bitwise", "Bytewise", "NumpyArray"}


class InspectError(BytewrightError):
    """The input cannot be inspected at all (no family recognises it, unknown record)."""


@dataclasses.dataclass(slots=True)  # slots: a listing builds one per field
class Node:
    """One record, field or list item as found in the bytes."""

    name: str
    path: str
    offset: int | None = None  # absolute file offset (None: unknown)
    end: int | None = None
    region: str | None = None  # set when the bytes are decompressed: the region's path
    rel: int | None = None  # offset inside the region
    value: Any = None
    text: str = ""  # the value as shown (enums by name, fixed point as decimal, hex)
    kind: str = "field"  # record | field | item | list
    checksum: str | None = None  # "ok" | "expected X, found Y"
    error: str | None = None
    children: list[Node] = dataclasses.field(default_factory=list)
    fld: ir.Field | None = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def size(self) -> int | None:
        if self.end is None:
            return None
        if self.region is not None:
            return self.end - (self.rel or 0)
        return None if self.offset is None else self.end - self.offset

    def as_dict(self) -> dict:
        d: dict[str, Any] = {"name": self.name, "path": self.path, "kind": self.kind,
                             "offset": self.offset, "size": self.size}
        if self.region is not None:
            d["region"] = self.region
            d["region_offset"] = self.rel
        if not self.children:
            d["value"] = self.text
        if self.checksum is not None:
            d["checksum"] = self.checksum
        if self.error is not None:
            d["error"] = self.error
        if self.children:
            d["children"] = [c.as_dict() for c in self.children]
        return d

    def walk(self) -> Iterator[Node]:
        yield self
        for c in self.children:
            yield from c.walk()


@dataclasses.dataclass
class Failure:
    message: str
    offset: int | None
    path: str

    def __str__(self) -> str:
        where = [f"offset {self.offset}"] if self.offset is not None else []
        if self.path:
            where.append(self.path)
        return ": ".join([*where, self.message])


@dataclasses.dataclass
class Result:
    family: str
    record: str
    how: str  # how the record was chosen (detect rule, fixture header, options)
    size: int
    records: list[Node]
    failure: Failure | None = None
    bad_checksums: list[Node] = dataclasses.field(default_factory=list)
    truncated: bool = False  # stopped at --limit
    count: int = 0  # records decoded (also when streamed away with on_record)
    notes: list[str] = dataclasses.field(default_factory=list)
    verified: int = 0  # checksums found to match
    stops: list[str] = dataclasses.field(default_factory=list)  # logs that ended early

    @property
    def ok(self) -> bool:
        return self.failure is None and not self.bad_checksums

    def cover(self, offset: int) -> list[Node]:
        """The chain of nodes (outermost first) whose bytes include ``offset``."""
        chain: list[Node] = []
        nodes = self.records
        while True:
            hit = next((n for n in nodes if n.region is None and n.offset is not None
                        and n.end is not None and n.offset <= offset < n.end), None)
            if hit is None:
                return chain
            chain.append(hit)
            nodes = hit.children

    def as_dict(self) -> dict:
        return {"family": self.family, "record": self.record, "detected_by": self.how,
                "size": self.size, "ok": self.ok, "truncated": self.truncated,
                "notes": list(self.notes),
                "records": [r.as_dict() for r in self.records],
                "bad_checksums": [{"path": n.path, "offset": n.offset, "status": n.checksum}
                                  for n in self.bad_checksums],
                "error": None if self.failure is None else {
                    "message": self.failure.message, "offset": self.failure.offset,
                    "path": self.failure.path}}


# -- detection ----------------------------------------------------------------------------

# the (offset, bytes) pairs a rule accepts: the same reading the generated index records
magics = emit_index.magics


def detect(head: bytes, families: dict[str, ir.Family]) -> tuple[ir.Family, ir.Detect] | None:
    """The family and rule whose magic matches ``head`` (longest magic wins)."""
    best: tuple[int, ir.Family, ir.Detect, bytes, int] | None = None
    for fam in families.values():
        for rule in fam.detect:
            for at, magic in magics(fam, rule):
                if head[at:at + len(magic)] == magic and (best is None or len(magic) > best[0]):
                    best = (len(magic), fam, rule, magic, at)
    return None if best is None else (best[1], dataclasses.replace(
        best[2], magic=best[3], at=best[4]))


# -- the tracer ---------------------------------------------------------------------------

class _Tracer:
    def __init__(self, root_stream: BinaryIO, base_path: str) -> None:
        self.root = self.file = root_stream
        self.format: Callable[[Node, ir.Field | None, Any], str] = lambda n, f, v: repr(v)
        self.reset(base_path)

    def reset(self, base_path: str, root: BinaryIO | None = None, base: int = 0) -> None:
        """Forget the previous record (the traced definitions are built once per run);
        ``root``, when given, holds the record's bytes alone, the first at ``base``."""
        self.root = root if root is not None else self.file
        self.base = base if root is not None else 0
        self.stack: list[Node] = []
        self.top: list[Node] = []
        self.bases: dict[int, tuple[int | None, str | None]] = {
            id(self.root): (self.base, None)}
        self.alive: list[BinaryIO] = []  # sub-streams located: their ids stay theirs
        self.items: dict[int, int] = {}
        self.base_path = base_path
        self.bad: list[Node] = []
        self.verified = 0
        self.stops: list[str] = []
        # inside an item of a stop_on_error log a mismatch ends the log, as on decode
        self.strict = 0

    def _locate(self, stream: BinaryIO, pos: int) -> tuple[int | None, str | None, int]:
        """(absolute offset or None, region path or None, offset in region)."""
        key = id(stream)
        if key not in self.bases:
            self.bases[key] = self._find_base(stream)
            self.alive.append(stream)
        base, region = self.bases[key]
        if region is not None:
            return None, region, pos
        return (None if base is None else base + pos), None, pos

    def _find_base(self, stream: BinaryIO) -> tuple[int | None, str | None]:
        """Where a sub-stream's bytes sit in the stream of the enclosing field: sized
        fields are slices of it; decompressed bytes are found nowhere (a region)."""
        parent = self.stack[-1] if self.stack else None
        if getattr(stream, "absolute_positions", False):  # a window telling outer offsets
            return 0, None
        try:
            data = stream.getvalue()  # type: ignore[attr-defined]
        except AttributeError:
            return None, parent.path if parent else None
        if parent is not None and parent.region is None and parent.offset is not None:
            here = self.root.tell()
            try:
                self.root.seek(parent.offset - self.base)
                window = self.root.read(len(data) + 64)
            finally:
                self.root.seek(here)
            at = window.find(data) if data else 0
            if at >= 0:
                return parent.offset + at, None
        if parent is not None and parent.region is not None:
            return None, parent.region
        return None, parent.path if parent else "?"

    def enter(self, name: str, stream: BinaryIO, kind: str) -> Node:
        parent = self.stack[-1] if self.stack else None
        if kind == "item" and parent is not None:
            idx = self.items.get(id(parent), 0)
            self.items[id(parent)] = idx + 1
            name = f"[{idx}]"
            path = f"{parent.path}{name}"
        else:
            path = f"{parent.path}.{name}" if parent else f"{self.base_path}"
        pos = stream.tell()
        off, region, rel = self._locate(stream, pos)
        node = Node(name, path, off, None, region, rel if region else None, kind=kind)
        if kind == "item" and parent is not None:
            node.fld = parent.fld  # items of a list have the list's type
        (parent.children if parent else self.top).append(node)
        self.stack.append(node)
        return node

    def leave(self, node: Node, stream: BinaryIO, value: Any, fld: ir.Field | None) -> None:
        fld = fld or node.fld
        pos = stream.tell()
        off, region, rel = self._locate(stream, pos)
        node.end = rel if region is not None else off
        node.value = value
        if node.children and node.kind == "field" and isinstance(value, list):
            node.kind = "list"
        if not node.children:
            node.text = self.format(node, fld, value)
        self.stack.pop()

    def fail(self, node: Node, exc: BaseException) -> None:
        node.error = f"{type(exc).__name__}"
        self.stack.pop()


class _Traced(cs.Subconstruct):
    """A named field (or list item) that reports where it starts and ends."""

    def __init__(self, subcon: cs.Construct, tracer: _Tracer, kind: str,
                 fld: ir.Field | None, strict: bool = False) -> None:
        super().__init__(subcon)
        self.name = subcon.name  # Struct stores the value under this name
        self.tracer, self.kind, self.fld = tracer, kind, fld
        self.strict = strict  # an item of a stop_on_error log

    def _parse(self, stream, context, path):
        node = self.tracer.enter(self.name or "", stream, self.kind)
        if self.fld is not None:
            node.fld = self.fld
        self.tracer.strict += self.strict
        try:
            obj = self.subcon._parsereport(stream, context, path)
        except BaseException as exc:
            self.tracer.fail(node, exc)
            raise
        finally:
            self.tracer.strict -= self.strict
        self.tracer.leave(node, stream, obj, self.fld)
        stop = getattr(obj, "stop", None) if isinstance(obj, LogList) else None
        if stop is not None:
            failed = next((c for c in reversed(node.children) if c.error is not None), None)
            at = failed.offset if failed is not None and failed.offset is not None \
                else stop.offset
            self.tracer.stops.append(f"{node.path}: the log ends at offset {at} "
                                     f"({stop.reason}: {stop.detail}); the bytes after it "
                                     "are not read")
        return obj


class _LenientChecksum(cs.Checksum):
    """Checks and records the status instead of stopping at the first mismatch."""

    def __init__(self, orig: cs.Checksum, tracer: _Tracer) -> None:
        cs.Construct.__init__(self)
        self.flagbuildnone = True
        self.checksumfield, self.hashfunc, self.bytesfunc = (
            orig.checksumfield, orig.hashfunc, orig.bytesfunc)
        self.name = orig.name
        self.tracer = tracer

    def _parse(self, stream, context, path):
        found = self.checksumfield._parsereport(stream, context, path)
        data = self.bytesfunc(context) if callable(self.bytesfunc) else self.bytesfunc
        want = self.hashfunc(data)
        node = self.tracer.stack[-1] if self.tracer.stack else None
        if node is not None:
            _record_check(self.tracer, node, found, want)
        return found


class _LenientLate(LateChecksum):
    """A checksum checked after the fields it covers (see ``runtime.cover``): records the
    status on the checksum's own node instead of stopping."""

    def __init__(self, orig: LateChecksum, tracer: _Tracer) -> None:
        cs.Construct.__init__(self)
        self.__dict__.update(orig.__dict__)
        self.tracer = tracer

    def _parse(self, stream, context, path):
        found = context.get(self.field_name) if self.check else None
        if found is None:
            return None
        want = self.value(context)
        parent = self.tracer.stack[-1] if self.tracer.stack else None
        siblings = parent.children if parent is not None else self.tracer.top
        node = next((n for n in reversed(siblings) if n.name == self.field_name), None)
        if node is not None:
            _record_check(self.tracer, node, found, want)
        return None


def _record_check(tracer: _Tracer, node: Node, found: Any, want: Any) -> None:
    """A checksum's status on its node; inside an item of a stop_on_error log a mismatch
    ends the log there, as the decoders do (nothing after it is read)."""
    if found == want:
        node.checksum = "ok"
        tracer.verified += 1
        return
    node.checksum = f"expected {_hexval(want)}, found {_hexval(found)}"
    if tracer.strict:
        node.text = _hexval(found)
        raise ChecksumError("checksum mismatch", path=node.path, expected=want, found=found)
    tracer.bad.append(node)


def _hexval(v: Any) -> str:
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    if isinstance(v, int):
        return f"0x{v:x}"
    return repr(v)


def traced(con: cs.Construct, tracer: _Tracer, fields_of: dict[int, dict[str, ir.Field]]
           ) -> cs.Construct:
    """A copy of ``con`` with every named field and list item traced (shared sub-records
    stay shared; bit-level and array-view constructs are leaves)."""
    memo: dict[int, cs.Construct] = {}

    def walk(c: Any, owner: dict[str, ir.Field] | None) -> Any:
        if not isinstance(c, cs.Construct):
            return c
        if id(c) in memo:
            return memo[id(c)]
        if type(c).__name__ in OPAQUE:
            return c
        if isinstance(c, cs.Checksum):
            new = _LenientChecksum(c, tracer)
            memo[id(c)] = new
            return new
        if isinstance(c, LateChecksum):
            new = _LenientLate(c, tracer)
            memo[id(c)] = new
            return new
        new = c.__class__.__new__(c.__class__)
        new.__dict__.update(c.__dict__)
        memo[id(c)] = new
        own = fields_of.get(id(c), owner)
        for key, val in list(new.__dict__.items()):
            if isinstance(val, cs.Construct):
                setattr(new, key, walk(val, own))
            elif isinstance(val, list) and any(isinstance(v, cs.Construct) for v in val):
                setattr(new, key, [walk(v, own) for v in val])
            elif isinstance(val, dict) and any(isinstance(v, cs.Construct)
                                               for v in val.values()):
                setattr(new, key, type(val)((k, walk(v, own)) for k, v in val.items())
                        if not isinstance(val, cs.Container) else
                        cs.Container({k: walk(v, own) for k, v in val.items()}))
        if type(c).__name__ in REPEATS and isinstance(getattr(new, "subcon", None),
                                                       cs.Construct):
            new.subcon = _Traced(new.subcon, tracer, "item", None,
                                 bool(getattr(c, "stop_on_error", False)))
        if isinstance(c, cs.Renamed) and c.name and not c.name.startswith("_"):
            fld = own.get(c.name) if own else None
            wrapped = _Traced(new, tracer, "field", fld)
            memo[id(c)] = wrapped
            return wrapped
        return new

    return walk(con, None)


# -- values as a reviewer reads them -------------------------------------------------------

def _fixed(fam: ir.Family, fld: ir.Field | None, value: Any) -> str | None:
    if fld is None or not isinstance(fld.type, ir.RefT) or fld.type.kind != "alias":
        return None
    alias = fam.aliases.get(fld.type.target)
    if alias is None or not alias.fixed_point or not isinstance(value, int):
        return None
    try:
        frac = registry.numeric(alias.fixed_point).decode(value)
    except Exception:  # noqa: BLE001 - out of the kind's domain: show the raw value
        return f"{value} (raw {alias.fixed_point}, outside its range)"
    with localcontext() as ctx:
        ctx.prec = 40
        dec = Decimal(frac.numerator) / Decimal(frac.denominator)
    text = format(dec.normalize(), "f") if dec == dec.to_integral_value() else str(
        dec.quantize(Decimal(1).scaleb(-20)).normalize())
    return f"{text} ({alias.fixed_point}, raw {value})"


def _flags(fam: ir.Family, fld: ir.Field | None, value: Any) -> str | None:
    """Set flag bits by name; multi-bit ranges with an enum by member name."""
    if fld is None or not isinstance(fld.type, ir.RefT) or fld.type.kind != "flags" \
            or not isinstance(value, dict):
        return None
    fd = fam.flags.get(fld.type.target)
    if fd is None:
        return None
    parts = []
    for bit in fd.bits:
        v = value.get(bit.name)
        if bit.width == 1 and bit.enum is None:
            if v:
                parts.append(bit.name)
            continue
        if bit.enum and bit.enum in fam.enums and isinstance(v, int):
            names = {m.value: m.name for m in fam.enums[bit.enum].members}
            v = names.get(int(v), v)
        parts.append(f"{bit.name}={v}")
    return "{" + ", ".join(parts) + "}" if parts else "{} (no flag set)"


def formatter(fam: ir.Family, full: bool = False) -> Callable[[Node, ir.Field | None, Any], str]:
    typed: dict[int, bool] = {}  # per field: its type reads as an alias, flags or enum

    def fmt(node: Node, fld: ir.Field | None, value: Any) -> str:
        if fld is None:
            return _hexval(value) if node.checksum is not None else show_value(value, full)
        if value is None and fld.has_default and node.size == 0:
            # not in this version's bytes: the decoders give the field its default
            return f"{fmt(node, fld, fld.default)} (default; not in this version)"
        named = typed.get(id(fld))
        if named is None:
            named = typed[id(fld)] = isinstance(fld.type, ir.RefT) and fld.type.kind in (
                "alias", "flags", "enum")
        if not named:
            return _hexval(value) if node.checksum is not None else show_value(value, full)
        fixed = _fixed(fam, fld, value)
        if fixed is not None:
            return fixed
        flags = _flags(fam, fld, value)
        if flags is not None:
            return flags
        if fld is not None and isinstance(fld.type, ir.RefT) and fld.type.kind == "enum" \
                and isinstance(value, int) and fld.type.target in fam.enums:
            names = {m.value: m.name for m in fam.enums[fld.type.target].members}
            name = names.get(int(value))
            return f"{name} ({int(value)})" if name else \
                f"{int(value)} (no name in {fld.type.target})"
        if node.checksum is not None:
            return _hexval(value)
        return show_value(value, full)
    return fmt


def show_value(value: Any, full: bool = False) -> str:
    if isinstance(value, enum.Flag):
        return str(value.name or int(value))
    if isinstance(value, enum.Enum):
        return f"{value.name} ({value.value})"
    if type(value).__name__ == "EnumIntegerString":
        return f"{value} ({int(value)})"
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        if not full and len(raw) > 32:
            return f"{len(raw)} bytes {raw[:32].hex()}…"
        return f"{len(raw)} bytes {raw.hex()}" if raw else "0 bytes"
    if isinstance(value, cs.Container):
        parts = []
        for k, v in value.items():
            if k.startswith("_"):
                continue
            if v is True:
                parts.append(k)
            elif v is False:
                continue
            else:
                parts.append(f"{k}={show_value(v, full)}")
        return "{" + ", ".join(parts) + "}"
    if isinstance(value, list):
        return f"[{len(value)} items]" if len(value) > 8 and not full else repr(
            [show_value(v, full) for v in value])
    if hasattr(value, "tolist"):
        return show_value(value.tolist(), full)
    if isinstance(value, str):
        return repr(value)
    return repr(value)


# -- decoding -----------------------------------------------------------------------------

def _fields_of(mod: Any, fam: ir.Family) -> dict[int, dict[str, ir.Field]]:
    """The IR fields of each record's Construct struct, keyed by the struct's id."""
    out: dict[int, dict[str, ir.Field]] = {}
    for name, rec in fam.records.items():
        con = getattr(mod, f"C_{name}", None)
        if con is None:
            continue
        out[id(con)] = {f.name: f for f in rec.fields}
        for lay in rec.layouts:  # byte order as data: each order's definition
            sub = getattr(mod, f"C_{name}_{lay.order}", None) if lay.order else None
            if sub is not None:
                out[id(sub)] = {f.name: f for f in lay.fields}
    return out


def coerce_params(mod: Any, fam: ir.Family, record: str, params: dict[str, Any]) -> dict:
    """Parameter values as the generated decoders take them (enum names or ints)."""
    rec = fam.records[record]
    unknown = sorted(set(params) - set(rec.params))
    if unknown:
        raise InspectError(f"{fam.name}.{record} takes no param(s) {', '.join(unknown)}; "
                           f"params: {', '.join(rec.params) or '(none)'}")
    out = dict(params)
    for name, p in rec.params.items():
        if name not in out and p.default is not None:
            out[name] = p.default
        if name in out and p.type in fam.enums:
            cls = getattr(mod, "".join(x.capitalize() for x in p.type.split("_")), None)
            if cls is not None and not isinstance(out[name], cls):
                v = out[name]
                out[name] = cls[v] if isinstance(v, str) else cls(v)
    missing = [n for n in rec.params if n not in out]
    if missing:
        raise InspectError(f"{fam.name}.{record} needs params: {', '.join(missing)}")
    return out


def inspect_stream(stream: BinaryIO, size: int, mod: Any, fam: ir.Family, record: str,
                   params: dict[str, Any], *, how: str = "", repeat: bool = False,
                   then: str | None = None, limit: int | None = None, full: bool = False,
                   offset: int = 0, progress: Callable[[int], None] | None = None,
                   on_record: Callable[[Node], None] | None = None,
                   prefix: str | None = None) -> Result:
    """Decode ``record`` from ``stream``; with ``repeat`` records of that kind until the
    end, with ``then`` one ``record`` and then ``then`` records until the end. One record
    is held at a time: with ``on_record`` each finished record is handed over and not
    kept (bounded memory); ``limit`` stops after that many records; ``prefix`` names
    the records of a run (``prefix[i]``, default the record's name)."""
    buf, mm = mapped(stream) if repeat or then is not None else (None, None)
    try:
        return _inspect_stream(stream, size, mod, fam, record, params, how, repeat, then,
                               limit, full, offset, progress, on_record, prefix, buf, mm)
    finally:
        buf = None
        if mm is not None:
            try:
                mm.close()
            except BufferError:
                pass  # a value still holds a view of the map: the collector unmaps it


def mapped(stream: BinaryIO) -> tuple[Any, mmap.mmap | None]:
    """A file stream's bytes without reading them (a read-only map and a view of it), or
    (None, None) for a stream that is no file."""
    try:
        fd = stream.fileno()
        if os.fstat(fd).st_size > 0:
            mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
            return memoryview(mm), mm
    except (OSError, ValueError, io.UnsupportedOperation, AttributeError):
        pass
    return None, None


def _inspect_stream(stream: BinaryIO, size: int, mod: Any, fam: ir.Family, record: str,
                    params: dict[str, Any], how: str, repeat: bool, then: str | None,
                    limit: int | None, full: bool, offset: int,
                    progress: Callable[[int], None] | None,
                    on_record: Callable[[Node], None] | None, prefix: str | None,
                    buf: Any, mm: mmap.mmap | None) -> Result:

    def keep(nodes: list[Node]) -> None:
        result.count += len(nodes)
        if on_record is None:
            result.records.extend(nodes)
        else:
            for n in nodes:
                on_record(n)

    for name in (record, then):
        if name is not None and (name not in fam.records
                                 or getattr(mod, f"C_{name}", None) is None):
            raise InspectError(f"{fam.name} has no record {name!r}; records: "
                               f"{', '.join(fam.records)}")
    params = coerce_params(mod, fam, record, params)
    result = Result(fam.name, record, how, size, [])
    order = byteorder.record_text(fam.records[record], fam)
    if order is not None:  # the values above were read in the order the data chose
        result.notes.append(f"{record}: byte order {order}")
    fields_of = _fields_of(mod, fam)
    tracer = _Tracer(stream, record)
    tracer.format = formatter(fam, full)
    cons: dict[str, cs.Construct] = {}

    def con_of(name: str) -> cs.Construct:
        con = cons.get(name)
        if con is None:  # copying the definition is the costly part: once per record kind
            con = _Traced(traced(getattr(mod, f"C_{name}"), tracer, fields_of), tracer,
                          "record", None)
            con.name = name
            cons[name] = con
        return con

    stream.seek(offset)
    index = 0
    current = record
    release = releaser(mm) if mm is not None else None
    mark = offset + RELEASE_EVERY
    while True:
        at = stream.tell()
        if index > 0 and at >= size:
            break
        if limit is not None and index >= limit:
            result.truncated = at < size
            break
        if index == 1 and then is not None:
            current, params = then, coerce_params(mod, fam, then, {})
        seq = repeat or then is not None
        con = con_of(current)
        here = f"{prefix or current}[{index}]" if seq else current
        if buf is not None and _traced_alone(buf, at, mod, current, params, con, tracer,
                                             here):
            stream.seek(tracer.end)
            if release is not None and tracer.end >= mark:
                release(tracer.end)
                mark = tracer.end + RELEASE_EVERY
        else:
            tracer.reset(here)
        try:
            if tracer.root is stream:
                con.parse_stream(stream, **params)
        except BaseException as exc:
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            result.failure = _failure(exc, tracer, tracer.base_path)
            keep(tracer.top)
            _collect(result, tracer)
            return result
        if not seq and fam.records[current].located:  # then what the record locates
            root = tracer.top[0]
            bad = tracer.bad
            result.failure = inspect_located.trace(
                stream, size, mod, fam, current, root, at, tracer, con_of, _failure)
            bad += tracer.bad
            tracer.top, tracer.bad = [root], bad
            keep(tracer.top)
            result.bad_checksums.extend(tracer.bad)
            return result
        keep(tracer.top)
        _collect(result, tracer)
        index += 1
        if progress is not None:
            progress(stream.tell())
        if not seq:
            if stream.tell() < size:
                result.notes.append(f"bytes {stream.tell()}..{size} follow {record} and are "
                                    "not part of it (not decoded)")
            break
        if stream.tell() == at:
            result.failure = Failure("record consumes no bytes", at,
                                     f"{prefix or current}[{index}]")
            break
    return result


def _traced_alone(buf: Any, at: int, mod: Any, record: str, params: dict[str, Any],
                  con: cs.Construct, tracer: _Tracer, path: str) -> bool:
    """Trace the record at ``at`` from a copy of its own bytes, its end found by the fast
    path first (in-memory reads cost a fraction of a file's): False, with nothing kept,
    when the fast path refuses it or the trace ends elsewhere; the caller then traces it
    from the file, which gives the failure its words."""
    try:
        end = getattr(mod, f"decode_{record}")(buf, at, **params)[1]
    except Exception:  # noqa: BLE001 - refused: traced from the file instead
        return False
    item = io.BytesIO(bytes(buf[at:end]))
    tracer.reset(path, item, at)
    try:
        con.parse_stream(item, **params)
    except Exception:  # noqa: BLE001 - the file's trace is the authority
        return False
    if item.tell() != end - at:
        return False
    tracer.end = end
    return True


def _collect(result: Result, tracer: _Tracer) -> None:
    result.bad_checksums.extend(tracer.bad)
    result.verified += tracer.verified
    result.stops.extend(tracer.stops)


def _failure(exc: BaseException, tracer: _Tracer, record: str) -> Failure:
    """The error as the project reports it, located at the innermost unfinished node."""
    failed = [n for top in tracer.top for n in top.walk() if n.error is not None]
    inner = failed[-1] if failed else None
    if isinstance(exc, DecodeError):
        err = exc
    elif isinstance(exc, Exception):
        err = construct_error(exc, record)
    else:
        err = DecodeError(f"{type(exc).__name__}: {exc}")
    offset = err.offset
    where = ""
    if inner is not None and inner.region is not None:
        # inside decompressed bytes: name the region and the offset within it
        where = f" (at +{inner.rel} of the decompressed bytes of {inner.region})"
        region = next((n for top in tracer.top for n in top.walk()
                       if n.path == inner.region), None)
        offset = region.offset if region is not None else offset
    elif offset is None and inner is not None:
        offset = inner.offset
    path = inner.path if inner is not None else (err.path or record)
    message = err.message
    if message.startswith("construct: Error in path") and "\n" in message:
        message = "construct: " + message.split("\n", 1)[1]  # the path is reported apart
    err.message = " ".join(message.split())
    for n in failed:
        n.error = err.message
    return Failure(err.message + (f" (expected {err.expected}, found {err.found})"
                                  if err.expected is not None or err.found is not None
                                  else "") + where, offset, path)


def inspect_bytes(data: bytes, mod: Any, fam: ir.Family, record: str,
                  params: dict[str, Any], **kw: Any) -> Result:
    return inspect_stream(io.BytesIO(data), len(data), mod, fam, record, params, **kw)


# -- rendering ----------------------------------------------------------------------------

def where(n: Node) -> str:
    """The offset column of a node's line (or its place in a decompressed region)."""
    if n.region is not None:
        return f"+{n.rel:<7} in {n.region}" if n.rel is not None else "?"
    return f"{n.offset:>8}" if n.offset is not None else "       ?"


def render_head(family: str, record: str, how: str, size: int) -> str:
    return (f"{family}.{record} ({how}); {size} bytes\n"
            f"{'offset':>8} {'size':>7}  path = value\n")


def render_record(top: Node, read: Callable[[int, int], bytes] | None = None,
                  depth: int = 0) -> str:
    """One decoded record (and everything under it) as lines of text; ``depth`` > 0
    renders a part of an enclosing record, indented under it."""
    lines: list[str] = []

    def emit(n: Node, depth: int) -> None:
        size = "" if n.size is None else str(n.size)
        pad = "  " * depth
        label = n.path if depth == 0 else n.name
        status = ""
        if n.checksum is not None:
            status = "  [checksum ok]" if n.checksum == "ok" else f"  [CHECKSUM BAD: {n.checksum}]"
        if n.error is not None:
            status += f"  [FAILED: {n.error}]"
        if n.children:
            lines.append(f"{where(n)} {size:>7}  {pad}{label}{status}")
        else:
            lines.append(f"{where(n)} {size:>7}  {pad}{label} = {n.text}{status}")
        if read is not None and not n.children and n.region is None and n.offset is not None \
                and n.end is not None and n.end > n.offset:
            raw = read(n.offset, min(n.end - n.offset, 64))
            for i in range(0, len(raw), 16):
                more = "…" if i + 16 >= len(raw) and n.end - n.offset > 64 else ""
                lines.append(f"{'':>8} {'':>7}  {pad}  | {raw[i:i + 16].hex(' ')}{more}")
        for c in n.children:
            emit(c, depth + 1)

    emit(top, depth)
    return "\n".join(lines) + "\n"


def render_tail(res: Result) -> str:
    lines = []
    if res.truncated:
        lines.append(f"... (stopped after {res.count} records: --limit)")
    lines.extend(f"note: {n}" for n in res.notes + res.stops)
    for n in res.bad_checksums:
        lines.append(f"checksum mismatch: {n.path} at offset {n.offset}: {n.checksum}")
    if res.failure is not None:
        lines.append(f"error: {res.failure}")
    elif res.ok and not res.verified:
        lines.append(f"ok: {res.count} record(s), no checksum to verify")
    elif res.ok and res.stops:
        lines.append(f"ok: {res.count} record(s), {res.verified} checksum(s) verified "
                     "before the end of a log (see the note)")
    elif res.ok:
        lines.append(f"ok: {res.count} record(s), every checksum verified")
    return "\n".join(lines) + "\n"


def render_text(res: Result, read: Callable[[int, int], bytes] | None = None) -> str:
    return (render_head(res.family, res.record, res.how, res.size)
            + "".join(render_record(r, read) for r in res.records) + render_tail(res))


def render_at(res: Result, offset: int) -> str:
    chain = res.cover(offset)
    if not chain:
        return f"offset {offset}: not covered by any decoded field\n"
    leaf = chain[-1]
    lines = [f"offset {offset} is in {leaf.path} (bytes {leaf.offset}..{leaf.end}, "
             f"+{offset - (leaf.offset or 0)} into it)"]
    for n in chain:
        lines.append(f"  {n.path}: offset {n.offset}, size {n.size}"
                     + (f" = {n.text}" if not n.children else ""))
    return "\n".join(lines) + "\n"


# -- a whole input: fixture or raw file ----------------------------------------------------

@dataclasses.dataclass
class Target:
    """What to decode and how it was chosen."""

    family: ir.Family
    record: str
    params: dict[str, Any]
    how: str
    repeat: bool = False
    then: str | None = None


def choose(head: bytes, families: dict[str, ir.Family], *, family: str | None = None,
           record: str | None = None, fixture: Any = None, hint: str = "") -> Target:
    """The family and record for an input: ``--format/--record`` when given, the fixture's
    own header for a ``.hex`` fixture, else the families' ``detect`` rules on the bytes."""
    if family is not None and family not in families:
        raise InspectError(f"no family {family!r}; families: {', '.join(sorted(families))}")
    if fixture is not None and record is None:
        record = fixture.record
        owners = [f for f in families.values() if record in f.records
                  and (family is None or f.name == family)]
        if hint in {f.name for f in owners}:  # the fixture folder names its family
            owners = [families[hint]]
        if len(owners) == 1:
            return Target(owners[0], record, dict(fixture.params), "fixture header")
        if not owners:
            raise InspectError(f"the fixture's record {record!r} is in no family")
        raise InspectError(f"record {record!r} is in several families "
                           f"({', '.join(f.name for f in owners)}): pass --format")
    if record is not None:
        owners = [f for f in families.values() if record in f.records
                  and (family is None or f.name == family)]
        if len(owners) != 1:
            where = f"family {family!r}" if family else "any family"
            raise InspectError(f"no record {record!r} in {where}" if not owners else
                               f"record {record!r} is in several families: pass --format")
        params = dict(fixture.params) if fixture is not None else {}
        return Target(owners[0], record, params, "--record")
    pool = {family: families[family]} if family else families
    found = detect(head, pool)
    if found is None:
        known = ", ".join(f"{f.name}: {r.record} ({m[:16].hex()} at {at})"
                          for f in pool.values() for r in f.detect
                          for at, m in magics(f, r)[:2])
        raise InspectError("no family recognises these bytes (first "
                           f"{min(len(head), 16)}: {head[:16].hex() or 'empty file'}); "
                           f"known magics: {known or 'none declared'}; pass --format and "
                           "--record")
    fam, rule = found
    return Target(fam, rule.record, dict(rule.params), f"detected: {fam.name} magic "
                  f"{rule.magic.hex()} at {rule.at}", rule.repeat, rule.then)


def run_target(stream: BinaryIO, size: int, target: Target, modules: Callable[[str], Any],
               params: dict[str, Any] | None = None, **kw: Any) -> Result:
    mod = modules(target.family.name)
    return inspect_stream(stream, size, mod, target.family, target.record,
                          {**target.params, **(params or {})}, how=target.how,
                          repeat=target.repeat, then=target.then, **kw)
