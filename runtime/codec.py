"""Support every generated module imports: error helpers, text, varints, compression,
checksums, and the few custom Construct classes the Construct path needs.

Generated code stays short and uniform by calling these; they are the narrow surface
between ``generated/`` and the rest of the runtime.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field
from typing import Any

import construct as cs
import numpy as np

from . import checksums, compression, varint
from .errors import (
    ChecksumError,
    ConstraintError,
    DecodeError,
    EncodeError,
    TruncatedError,
    UnsupportedError,
)

# Decompressed sections without a declared size (WAL blocks) are capped here.
DEFAULT_LIMIT = 64 << 20

_ck_crc32 = checksums.crc32
_ck_crc32c = checksums.crc32c
_ck_xxh3_64 = checksums.xxh3_64
_ck_blake3 = checksums.blake3_256


def short(pos: int, end: int, table: tuple[tuple[str, int, int], ...]) -> TruncatedError:
    """The error for a fixed run that does not fit: names the first field cut off."""
    have = end - pos
    for name, off, size in table:
        if off + size > have:
            return TruncatedError("field truncated", offset=pos + off, path=name,
                                  expected=size, found=max(have - off, 0))
    return TruncatedError("record truncated", offset=pos, path=table[0][0])


def text(mv: memoryview, a: int, b: int, encoding: str, path: str) -> str:
    try:
        return str(mv[a:b], encoding)
    except UnicodeDecodeError as exc:
        raise ConstraintError(f"invalid {encoding}: {exc.reason}", offset=a + exc.start,
                              path=path, found=bytes(mv[a + exc.start:a + exc.end])) from None


def text_error(exc: UnicodeDecodeError, base: int, encoding: str, path: str) -> ConstraintError:
    """The error for text that does not decode (offset of the first bad byte)."""
    return ConstraintError(f"invalid {encoding}: {exc.reason}", offset=base + exc.start,
                           path=path, found=exc.object[exc.start:exc.end])


def _upto(mv: Any, end: int) -> Any:
    """``mv`` cut at ``end`` without copying (the fast path may hand over plain bytes)."""
    if end == len(mv):
        return mv
    return (mv if isinstance(mv, memoryview) else memoryview(mv))[:end]


def uleb128(mv: memoryview, pos: int, end: int, path: str) -> tuple[int, int]:
    # the common case in one loop; anything unusual (truncated, over 10 bytes, over 64
    # bits) goes to the strict decoder, which raises the error with offset and path
    value = shift = 0
    p = pos
    stop = min(end, pos + 10)
    while p < stop:
        b = mv[p]
        p += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            if value <= 0xFFFF_FFFF_FFFF_FFFF:
                return value, p
            break
        shift += 7
    return varint.decode_uleb128(_upto(mv, end), pos, path=path)


uleb128_encode = varint.encode_uleb128


def algorithm_name(alg: Any, codecs: dict | None = None, *, offset: int | None = None,
                   path: str = "", encoding: bool = False) -> str:
    """The registered codec a schema value names: an enum member or a string, mapped
    through the field's ``codecs:`` table when it has one (else used as the name)."""
    key = alg.name if isinstance(alg, enum.Enum) else alg
    if codecs is not None:
        name = codecs.get(key)
        if name is None:
            if encoding:
                raise EncodeError(f"no codec is mapped for algorithm {key!r}", path=path)
            raise UnsupportedError("no codec is mapped for this algorithm", offset=offset,
                                   path=path, expected=sorted(map(str, codecs)), found=key)
        return name
    if isinstance(key, str):
        return key
    if encoding:
        raise EncodeError(f"cannot tell a compression algorithm from {alg!r}", path=path)
    raise UnsupportedError("cannot tell a compression algorithm from this value",
                           offset=offset, path=path, found=alg)


def decompress(alg: Any, data: Any, cap: int, *, expected_size: int | None, offset: int,
               path: str, codecs: dict | None = None) -> bytes:
    name = algorithm_name(alg, codecs, offset=offset, path=path)
    return compression.decompress(name, data, cap, offset=offset, path=path,
                                  expected_size=expected_size)


def decompress_prefix(alg: Any, data: Any, cap: int, *, expected_size: int | None,
                      offset: int, path: str, codecs: dict | None = None) -> tuple[bytes, int]:
    """A compressed region with no length prefix: its end is found by decompressing."""
    name = algorithm_name(alg, codecs, offset=offset, path=path)
    return compression.decompress_prefix(name, data, cap, offset=offset, path=path,
                                         expected_size=expected_size)


def compress(alg: Any, data: bytes, *, path: str, codecs: dict | None = None) -> bytes:
    return compression.compress(algorithm_name(alg, codecs, path=path, encoding=True), data,
                                path=path)


def convert_error(exc: Exception, kind: str, offset: int, path: str) -> DecodeError:
    """A numeric conversion that refused a stored value, as the project's error."""
    if isinstance(exc, DecodeError):
        exc.offset = offset if exc.offset is None else exc.offset
        return exc.prefixed(path) if not exc.path else exc
    return ConstraintError(f"{kind} conversion failed: {exc}", offset=offset, path=path)


def enum_value(cls: type[enum.IntEnum], raw: int, open_: bool, retired: tuple = ()) -> Any:
    try:
        return cls(raw)
    except ValueError:
        if open_:
            return raw
        if raw in retired:
            raise ConstraintError(f"retired {cls.__name__} value (permanently retired, never "
                                  "reused)", found=raw) from None
        raise ConstraintError(f"unknown {cls.__name__} value", found=raw) from None


# -- numpy views -----------------------------------------------------------------------

def same(a: Any, b: Any) -> bool:
    """Equality that treats numpy arrays by content (dtype and values)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
                and a.dtype == b.dtype and a.shape == b.shape
                and a.tobytes() == b.tobytes())
    return a == b


def rows_to_array(rows: Any, dtype: Any) -> np.ndarray:
    """Construct's list of values/Containers as the fast path's numpy array."""
    dt = np.dtype(dtype)
    if isinstance(rows, np.ndarray) and rows.dtype == dt:
        return rows  # already bit-exact (NumpyArray)
    if dt.names is None:
        return np.array(list(rows), dtype=dt)
    return np.array([tuple(row[n] for n in dt.names) for row in rows], dtype=dt)


def array_to_rows(arr: np.ndarray) -> list:
    """A numpy array back to what Construct builds from (values or dicts)."""
    if arr.dtype.names is None:
        return arr.tolist()
    names = arr.dtype.names
    return [{n: (bytes(v) if isinstance(v, (np.void, memoryview)) else v)
             for n, v in zip(names, row.tolist(), strict=True)} for row in arr]


# -- Construct support ---------------------------------------------------------------

class Code(cs.ExprMixin):
    """A context expression that both evaluates (interpreted path) and compiles.

    Construct's compiler inlines ``repr()`` of an expression; a lambda's repr is not code,
    so generated definitions wrap each expression's Python source in ``Code``.
    """

    def __init__(self, source: str, func) -> None:
        self.source = source
        self.func = func

    def __call__(self, obj, *args):
        return self.func(obj)

    def __repr__(self) -> str:
        return self.source

    def __str__(self) -> str:
        return self.source


class WithParams(cs.Subconstruct):
    """Parse/build ``subcon`` with some ``_params`` replaced by expressions of the caller."""

    def __init__(self, subcon: cs.Construct, args: dict[str, Any]) -> None:
        super().__init__(subcon)
        self.args = args

    def _ctx(self, context: cs.Container) -> cs.Container:
        params = cs.Container(context._params)
        for key, fn in self.args.items():
            params[key] = fn(context)
        ctx = cs.Container(context)
        ctx._params = params
        return ctx

    def _parse(self, stream, context, path):
        return self.subcon._parsereport(stream, self._ctx(context), path)

    def _build(self, obj, stream, context, path):
        return self.subcon._build(obj, stream, self._ctx(context), path)

    def _sizeof(self, context, path):
        return self.subcon._sizeof(self._ctx(context), path)


def _save_plain(context: cs.Container, name: str, plain: bytes) -> None:
    context[f"_plain_{name}"] = plain


class Compressed(cs.Subconstruct):
    """A compressed frame whose plain bytes are ``subcon``: behind a ``length`` prefix, or
    (``length=None``) a self-terminating stream whose end is found by decompressing it."""

    def __init__(self, subcon, algorithm, length, *, expected_size=None, limit=None,
                 name: str = "", codecs: dict | None = None) -> None:
        super().__init__(subcon)
        self.algorithm = algorithm
        self.length = length
        self.expected_size = expected_size
        self.limit = limit
        self.fieldname = name
        self.codecs = codecs

    def _parse(self, stream, context, path):
        expected = self.expected_size(context) if self.expected_size else None
        cap = self.limit(context) if self.limit else (expected or DEFAULT_LIMIT)
        at = cs.stream_tell(stream, path)
        if self.length is None:
            rest = stream.read()
            plain, used = decompress_prefix(self.algorithm(context), rest, cap,
                                            expected_size=expected, offset=at,
                                            path=self.fieldname, codecs=self.codecs)
            cs.stream_seek(stream, at + used, 0, path)
        else:
            n = self.length._parsereport(stream, context, path)
            frame = cs.stream_read(stream, n, path)
            plain = decompress(self.algorithm(context), frame, cap, expected_size=expected,
                               offset=at, path=self.fieldname, codecs=self.codecs)
        _save_plain(context, self.fieldname, plain)
        sub = cs.io.BytesIO(plain)
        try:
            value = self.subcon._parsereport(sub, context, path)
            if sub.tell() != len(plain):  # as the fast path: the plain bytes are all used
                raise ConstraintError("decompressed section has trailing bytes",
                                      offset=sub.tell(), path=_cpath(path),
                                      expected=len(plain), found=sub.tell())
        except DecodeError as exc:
            # As the fast path: an offset inside the plain bytes is not an offset of the
            # input, so report the compressed field's start and keep the inner one in text.
            if exc.offset is not None:
                exc.message += f" (at +{exc.offset} in the section decompressed from offset {at})"
            exc.offset = at
            raise
        return value

    def _build(self, obj, stream, context, path):
        sub = cs.io.BytesIO()
        value = self.subcon._build(obj, sub, context, path)
        plain = sub.getvalue()
        _save_plain(context, self.fieldname, plain)
        frame = compress(self.algorithm(context), plain, path=self.fieldname,
                         codecs=self.codecs)
        if self.length is not None:
            self.length._build(len(frame), stream, context, path)
        cs.stream_write(stream, frame, len(frame), path)
        return value

    def _sizeof(self, context, path):
        raise cs.SizeofError("compressed sections have no fixed size", path=path)


class Converted(cs.Adapter):
    """A numeric conversion (``convert:``) on the Construct path: the object model holds
    ``spec.decode(raw)``; building stores ``spec.encode(value)``."""

    def __init__(self, subcon, spec, *, name: str = "") -> None:
        super().__init__(subcon)
        self.spec = spec
        self.fieldname = name

    def _decode(self, obj, context, path):
        try:
            return self.spec.decode(obj)
        except Exception as exc:  # noqa: BLE001 - a plug-in's failure is a decode error
            raise convert_error(exc, self.spec.name, None, self.fieldname) from None

    def _encode(self, obj, context, path):
        try:
            return self.spec.encode(obj)
        except EncodeError:
            raise
        except Exception as exc:  # noqa: BLE001 - a plug-in's failure is an encode error
            raise EncodeError(f"{self.spec.name} conversion failed: {exc}",
                              path=self.fieldname) from None


def convert_decode(spec: Any, raw: int, offset: int, path: str) -> Any:
    """Fast-path twin of :class:`Converted` (decode)."""
    try:
        return spec.decode(raw)
    except Exception as exc:  # noqa: BLE001 - a plug-in's failure is a decode error
        raise convert_error(exc, spec.name, offset, path) from None


def convert_encode(spec: Any, value: Any, path: str) -> int:
    """Fast-path twin of :class:`Converted` (encode)."""
    try:
        return spec.encode(value)
    except EncodeError:
        raise
    except Exception as exc:  # noqa: BLE001 - a plug-in's failure is an encode error
        raise EncodeError(f"{spec.name} conversion failed: {exc}", path=path) from None


class ChainedRepeat(cs.Subconstruct):
    """Items of ``subcon`` (``count`` of them, or to the end of the region), each parsed
    or built with ``this._chain`` = ``first`` for the first item and then the previous
    item's stored value: the integer (``fmt``) ``at`` bytes after its start, or before
    its end when ``from_end`` -- the Construct twin of a ``chain:`` repeat."""

    def __init__(self, subcon, count, first, fmt: str, at: int, from_end: bool,
                 stop_on_error: bool = False) -> None:
        super().__init__(subcon)
        self.count = count
        self.first = first
        self.fmt = struct.Struct(fmt)
        self.at = at
        self.from_end = from_end
        self.stop_on_error = stop_on_error  # as RepeatToEnd: the log ends at a bad item

    def _stored(self, stream, start: int, stop: int, path):
        cs.stream_seek(stream, stop - self.at if self.from_end else start + self.at, 0, path)
        value = self.fmt.unpack(cs.stream_read(stream, self.fmt.size, path))[0]
        cs.stream_seek(stream, stop, 0, path)
        return value

    def _parse(self, stream, context, path):
        n = self.count(context) if self.count is not None else None
        here = cs.stream_tell(stream, path)
        end = stream.seek(0, 2)
        stream.seek(here)
        items = LogList() if self.stop_on_error else cs.ListContainer()
        context._chain = self.first(context)
        while (len(items) < n) if n is not None else (cs.stream_tell(stream, path) < end):
            start = cs.stream_tell(stream, path)
            try:
                item = self.subcon._parsereport(stream, context, path)
                stop = cs.stream_tell(stream, path)
                if stop <= start:
                    raise ConstraintError("repeated item consumes no bytes", offset=start,
                                          path=_cpath(path))
            except Exception as exc:  # noqa: BLE001 -- with stop_on_error the log ends here
                if not self.stop_on_error:
                    raise
                items.stop = stop_reason(construct_error(exc, ""), start)
                stream.seek(end)
                return items
            items.append(item)
            context._chain = self._stored(stream, start, stop, path)
        return items

    def _build(self, obj, stream, context, path):
        n = self.count(context) if self.count is not None else None
        if n is not None and len(obj) != n:
            raise cs.RangeError(f"expected {n} items, found {len(obj)}", path=path)
        context._chain = self.first(context)
        for item in obj:
            start = cs.stream_tell(stream, path)
            self.subcon._build(item, stream, context, path)
            context._chain = self._stored(stream, start, cs.stream_tell(stream, path), path)
        return obj

    def _sizeof(self, context, path):
        raise cs.SizeofError("chained repeats have no fixed size", path=path)


class Plain(cs.Subconstruct):
    """The uncompressed twin of :class:`Compressed`: records its bytes for checksums."""

    def __init__(self, subcon, *, name: str = "") -> None:
        super().__init__(subcon)
        self.fieldname = name

    def _parse(self, stream, context, path):
        start = cs.stream_tell(stream, path)
        value = self.subcon._parsereport(stream, context, path)
        end = cs.stream_tell(stream, path)
        cs.stream_seek(stream, start, 0, path)
        _save_plain(context, self.fieldname, cs.stream_read(stream, end - start, path))
        return value

    def _build(self, obj, stream, context, path):
        start = cs.stream_tell(stream, path)
        value = self.subcon._build(obj, stream, context, path)
        end = cs.stream_tell(stream, path)
        cs.stream_seek(stream, start, 0, path)
        _save_plain(context, self.fieldname, cs.stream_read(stream, end - start, path))
        return value


def span(this: cs.Container, pieces: list[tuple[str, str]]) -> bytes:
    """The bytes a checksum covers, from Tell markers (or saved plain sections)."""
    io = this._io
    here = io.tell()
    out = []
    for kind, name in pieces:
        if kind == "plain":
            out.append(this.get(f"_plain_{name}", b""))
            continue
        if kind == "range":  # record-relative [a, b) from the record's start marker
            a, b = (this._o_start + int(x) for x in name.split(":"))
            io.seek(a)
            out.append(io.read(b - a))
            continue
        a, b = this.get(f"_s_{name}"), this.get(f"_e_{name}")
        if a is None or b is None or b <= a:
            continue
        io.seek(a)
        out.append(io.read(b - a))
    io.seek(here)
    return b"".join(out)


def construct_error(exc: Exception, record: str) -> DecodeError:
    """Map whatever the Construct path raised onto the project's error type."""
    if isinstance(exc, DecodeError):
        return exc.prefixed(record)
    path = getattr(exc, "path", None) or ""
    path = path.replace("(parsing) -> ", "").replace(" -> ", ".") if path else ""
    full = f"{record}.{path}" if path else record
    if isinstance(exc, (cs.StreamError, cs.core.StreamError)):
        return TruncatedError(f"construct: {exc}", path=full)
    if isinstance(exc, cs.ChecksumError):
        return ChecksumError(f"construct: {exc}", path=full)
    return ConstraintError(f"construct: {type(exc).__name__}: {exc}", path=full)


class Terminated(cs.Subconstruct):
    """Items of ``subcon`` up to one equal to ``terminator`` (consumed, not returned).

    The Construct twin of ``repeat: {until: N}``; on build the terminator is appended
    and an item equal to it is refused (it would end the list early).
    """

    def __init__(self, subcon, terminator) -> None:
        super().__init__(subcon)
        self.terminator = terminator

    def _parse(self, stream, context, path):
        items = cs.ListContainer()
        while True:
            item = self.subcon._parsereport(stream, context, path)
            if item == self.terminator:
                return items
            items.append(item)

    def _build(self, obj, stream, context, path):
        for item in obj:
            if item == self.terminator:
                raise cs.ValidationError(f"an item equals the terminator {self.terminator!r}",
                                         path=path)
            self.subcon._build(item, stream, context, path)
        self.subcon._build(self.terminator, stream, context, path)
        return obj

    def _sizeof(self, context, path):
        raise cs.SizeofError("terminated lists have no fixed size", path=path)


# -- strict Construct twins (both paths must agree: no silent stop, no skipped rule) ----

def _cpath(path: str | None) -> str:
    """A Construct path ("(parsing) -> a -> b") as a field path ("a.b")."""
    return (path or "").replace("(parsing) -> ", "").replace("(building) -> ", "") \
        .replace(" -> ", ".")


def _stream_end(stream) -> int:
    here = stream.tell()
    end = stream.seek(0, 2)
    stream.seek(here)
    return end


class RepeatToEnd(cs.Subconstruct):
    """Items of ``subcon`` until the enclosing region ends (``repeat: eos``).

    Unlike ``GreedyRange`` a partial or corrupt last item is an error, as on the fast
    path, instead of a silent stop; an item that consumes no bytes is refused.
    """

    def __init__(self, subcon, stop_on_error: bool = False) -> None:
        super().__init__(subcon)
        self.stop_on_error = stop_on_error

    def _parse(self, stream, context, path):
        end = _stream_end(stream)
        items = LogList() if self.stop_on_error else cs.ListContainer()
        pos = cs.stream_tell(stream, path)
        while pos < end:
            try:
                item = self.subcon._parsereport(stream, context, path)
                nxt = cs.stream_tell(stream, path)
                if nxt <= pos:
                    raise ConstraintError("repeated item consumes no bytes", offset=pos,
                                          path=_cpath(path))
            except Exception as exc:  # noqa: BLE001 -- every failure ends the log here
                if not self.stop_on_error:
                    raise
                items.stop = stop_reason(construct_error(exc, ""), pos)
                stream.seek(end)
                return items
            items.append(item)
            pos = nxt
        return items

    def _build(self, obj, stream, context, path):
        for item in obj:
            self.subcon._build(item, stream, context, path)
        return obj

    def _sizeof(self, context, path):
        raise cs.SizeofError("repeat to end has no fixed size", path=path)

    def _emitparse(self, code):
        # compiled, the item loop runs the compiled item parser (an interpreted loop here
        # would run every item interpreted, which defeats compile()); the log variant,
        # which catches any failure, stays interpreted
        if self.stop_on_error:
            raise NotImplementedError
        fname = f"parse_repeattoend_{code.allocateId()}"
        code.append(f"""
            def {fname}(io, this):
                pos = io.tell()
                end = io.seek(0, 2)
                io.seek(pos)
                items = ListContainer()
                while pos < end:
                    item = {self.subcon._compileparse(code)}
                    nxt = io.tell()
                    if nxt <= pos:
                        raise ConstraintError("repeated item consumes no bytes", offset=pos,
                                              path="")
                    items.append(item)
                    pos = nxt
                return items
        """)
        return f"{fname}(io, this)"


class RepeatUntil(cs.Subconstruct):
    """Items of ``subcon`` up to and including the first for which ``predicate`` holds
    (``repeat: {until_expr: ...}``); the region ending first is a truncation error."""

    def __init__(self, subcon, predicate) -> None:
        super().__init__(subcon)
        self.predicate = predicate

    def _parse(self, stream, context, path):
        items = cs.ListContainer()
        while True:
            item = self.subcon._parsereport(stream, context, path)
            items.append(item)
            context._last = item
            if self.predicate(context):
                return items

    def _build(self, obj, stream, context, path):
        for i, item in enumerate(obj):
            built = self.subcon._build(item, stream, context, path)
            context._last = built if built is not None else item
            if self.predicate(context) != (i == len(obj) - 1):
                raise cs.ValidationError("repeat-until condition must hold on the last item "
                                         "and only there", path=path)
        return obj

    def _sizeof(self, context, path):
        raise cs.SizeofError("repeat-until lists have no fixed size", path=path)


class ZeroPadding(cs.Construct):
    """Padding of a computed length whose bytes must be zero (unless ``arbitrary``)."""

    def __init__(self, length, arbitrary: bool = False) -> None:
        super().__init__()
        self.length = length
        self.arbitrary = arbitrary
        self.flagbuildnone = True  # built from nothing, like Construct's Padding

    def _parse(self, stream, context, path):
        n = self.length(context)
        at = cs.stream_tell(stream, path)
        data = cs.stream_read(stream, n, path)
        if not self.arbitrary and any(data):
            raise ConstraintError("padding must be zero", offset=at, path=_cpath(path))
        return None

    def _build(self, obj, stream, context, path):
        n = self.length(context)
        cs.stream_write(stream, bytes(n), n, path)
        return None

    def _sizeof(self, context, path):
        return self.length(context)


class NumpyArray(cs.Construct):
    """``count`` fixed-size items as a numpy array (``view: numpy``), bit-exact.

    Going through Python floats would turn signalling NaNs into quiet ones; reading the
    bytes straight into the dtype keeps every payload bit, as the fast path does.
    """

    def __init__(self, count, dtype) -> None:
        super().__init__()
        self.count = count
        self.dtype = np.dtype(dtype)

    def _parse(self, stream, context, path):
        n = self.count(context) if callable(self.count) else self.count
        if n < 0:
            raise ConstraintError("negative count", path=_cpath(path), found=n)
        data = cs.stream_read(stream, n * self.dtype.itemsize, path)
        return np.frombuffer(data, self.dtype, n)

    def _build(self, obj, stream, context, path):
        arr = np.ascontiguousarray(obj, dtype=self.dtype) if isinstance(obj, np.ndarray) \
            else rows_to_array(obj, self.dtype)
        data = arr.tobytes()
        cs.stream_write(stream, data, len(data), path)
        return obj

    def _sizeof(self, context, path):
        raise cs.SizeofError("numpy arrays have a computed size", path=path)


def attr(obj: Any, name: str, offset: int, path: str) -> Any:
    """``obj.name`` in a decode-time expression; a missing attribute (a switch that took
    another case, an absent sub-record) is a decode error, not an AttributeError."""
    try:
        return getattr(obj, name)
    except AttributeError:
        raise ConstraintError(f"expression needs .{name}, which this value lacks",
                              offset=offset, path=path,
                              found=type(obj).__name__) from None


# -- varint kinds, terminated strings, region-relative names ----------------------------

def sleb128(mv: memoryview, pos: int, end: int, path: str) -> tuple[int, int]:
    return varint.decode_sleb128(_upto(mv, end), pos, path=path)


def zigzag(mv: memoryview, pos: int, end: int, path: str) -> tuple[int, int]:
    return varint.decode_zigzag(_upto(mv, end), pos, path=path)


sleb128_encode = varint.encode_sleb128
zigzag_encode = varint.encode_zigzag


class Leb128(cs.Construct):
    """A varint on the Construct path with the fast path's exact rules (``kind`` is
    uleb128, sleb128 or zigzag): at most 10 bytes, 64-bit range, minimal on build."""

    def __init__(self, kind: str = "uleb128") -> None:
        super().__init__()
        self.kind = kind
        self._decode = varint.DECODERS[kind]
        self._encode = varint.ENCODERS[kind]

    def _parse(self, stream, context, path):
        at = cs.stream_tell(stream, path)
        data = bytearray()
        while True:
            chunk = stream.read(1)
            if not chunk:
                break
            data += chunk
            if not chunk[0] & 0x80 or len(data) > 10:
                break
        try:
            value, n = self._decode(bytes(data), 0, path=_cpath(path))
        except DecodeError as exc:
            exc.offset = at
            raise
        stream.seek(at + n)
        return value

    def _build(self, obj, stream, context, path):
        data = self._encode(obj)
        cs.stream_write(stream, data, len(data), path)
        return obj

    def _sizeof(self, context, path):
        raise cs.SizeofError("varints have no fixed size", path=path)


def find_term(mv: memoryview, term: bytes, pos: int, end: int, path: str) -> int:
    """Offset of ``term`` in ``mv[pos:end]`` (any alignment); missing is a truncation."""
    obj = mv if isinstance(mv, bytes) else mv.obj  # the fast path may pass bytes itself
    if isinstance(obj, (bytes, bytearray)) and len(obj) == (len(mv) if obj is mv else mv.nbytes):
        at = obj.find(term, pos, end)
    else:
        at = bytes(mv[pos:end]).find(term)
        at = at + pos if at >= 0 else -1
    if at < 0:
        raise TruncatedError("terminator not found", offset=pos, path=path,
                             expected=term, found=f"{end - pos} byte(s) without it")
    return at


class TerminatedBytes(cs.Construct):
    """Bytes (or text in ``encoding``) up to ``term`` (consumed, not part of the value);
    the fast path's rule exactly: the first occurrence at any offset."""

    def __init__(self, term: bytes, encoding: str | None = None) -> None:
        super().__init__()
        self.term = term
        self.encoding = encoding

    def _parse(self, stream, context, path):
        at = cs.stream_tell(stream, path)
        end = _stream_end(stream)
        data = stream.read(end - at)
        i = data.find(self.term)
        if i < 0:
            raise TruncatedError("terminator not found", offset=at, path=_cpath(path),
                                 expected=self.term)
        stream.seek(at + i + len(self.term))
        raw = data[:i]
        if self.encoding is None:
            return raw
        try:
            return raw.decode(self.encoding)
        except UnicodeDecodeError as exc:
            raise text_error(exc, at, self.encoding, _cpath(path)) from None

    def _build(self, obj, stream, context, path):
        raw = obj.encode(self.encoding) if self.encoding else bytes(obj)
        if self.term in raw:
            raise EncodeError(f"value contains the terminator {self.term.hex()}",
                              path=_cpath(path))
        data = raw + self.term
        cs.stream_write(stream, data, len(data), path)
        return obj

    def _sizeof(self, context, path):
        raise cs.SizeofError("terminated bytes have no fixed size", path=path)


def remaining(this: cs.Container) -> int:
    """``_remaining`` on the Construct path: bytes left in the enclosing region."""
    io = this._io
    return _stream_end(io) - io.tell()


def no_remaining() -> int:
    raise EncodeError("_remaining is only known while decoding; give the value instead")


# -- "the log ends here": repeats that stop at the first item failing validation --------

_STOP_KINDS = (("truncated", TruncatedError), ("checksum", ChecksumError),
               ("unsupported", UnsupportedError), ("constraint", DecodeError))


@dataclass(frozen=True)
class StopReason:
    """Why a ``stop_on_error`` repeat ended early: the failing item's start ``offset``,
    ``reason`` (truncated | checksum | constraint | unsupported) and the error text."""

    offset: int
    reason: str
    detail: str = field(default="", compare=False)
    error: DecodeError | None = field(default=None, compare=False, repr=False)


def stop_reason(exc: DecodeError, offset: int) -> StopReason:
    reason = next(name for name, cls in _STOP_KINDS if isinstance(exc, cls))
    return StopReason(offset, reason, str(exc), exc)


class LogList(list):
    """The items of a ``stop_on_error`` repeat; ``stop`` is ``None`` when the region
    ended cleanly, else the :class:`StopReason` (the bytes from there on are not items)."""

    __slots__ = ("stop",)

    def __init__(self, items=(), stop: StopReason | None = None) -> None:
        super().__init__(items)
        self.stop = stop

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LogList):
            return list.__eq__(self, other) and self.stop == other.stop
        return list.__eq__(self, other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"LogList({list.__repr__(self)}, stop={self.stop!r})"


def build_bytes(con: cs.Construct, value: Any, this: cs.Container) -> bytes:
    """``con`` built alone (in the caller's context), to measure it before writing."""
    stream = cs.io.BytesIO()
    con._build(value, stream, this, "(building)")
    return stream.getvalue()


class ClosedEnum(cs.Subconstruct):
    """A closed enum's integer, refused while parsing when unknown or retired (the fast
    path's messages), so a bad value stops the Construct path where it stops the fast one."""

    def __init__(self, subcon, cls_name: str, values, retired=()) -> None:
        super().__init__(subcon)
        self.cls_name = cls_name
        self.values = frozenset(values)
        self.retired = tuple(retired)

    def _parse(self, stream, context, path):
        at = cs.stream_tell(stream, path)
        raw = self.subcon._parsereport(stream, context, path)
        if raw not in self.values:
            what = "retired" if raw in self.retired else "unknown"
            tail = " (permanently retired, never reused)" if what == "retired" else ""
            raise ConstraintError(f"{what} {self.cls_name} value{tail}", offset=at,
                                  path=_cpath(path), expected=sorted(self.values), found=raw)
        return raw

    def _build(self, obj, stream, context, path):
        return self.subcon._build(obj, stream, context, path)

    def _emitparse(self, code):
        # the happy path compiled; a bad value goes back to _parse's rule for its error
        fname = f"parse_closedenum_{code.allocateId()}"
        self._compileinstance(code)  # registers linkedinstances/parsers/builders
        code.append(f"""
            def {fname}(io, this):
                at = io.tell()
                raw = {self.subcon._compileparse(code)}
                if raw not in {set(self.values)!r}:
                    io.seek(at)
                    return linkedinstances[{id(self)}]._parse(io, this, "")
                return raw
        """)
        return f"{fname}(io, this)"


# -- compiled parsing that checks every read -------------------------------------------
# Construct's compiler emits a bare ``io.read(n)`` for these classes: a short read then
# yields short bytes instead of an error (a truncated input "decodes"). The subclasses
# below emit a checked read; generated modules import them over Construct's names.

_READ_EXACT = '''
def read_exact(io, n):
    if n < 0:
        raise StreamError("length must be non-negative, found %r" % (n,))
    data = io.read(n)
    if len(data) != n:
        raise StreamError("stream read less than specified amount, expected %d, found %d"
                          % (n, len(data)))
    return data


def restream_exact(data, func):
    io = BytesIO(data)
    obj = func(io)
    if io.tell() != len(data):
        raise StreamError("section size mismatch: %d of %d bytes used" % (io.tell(), len(data)))
    return obj
'''


def _read_exact(code) -> str:
    if not getattr(code, "_bytewright_read_exact", False):
        code.append(_READ_EXACT)
        code._bytewright_read_exact = True
    return "read_exact"


class Bytes(cs.Bytes):
    def _emitparse(self, code):
        return f"{_read_exact(code)}(io, {self.length})"


class BytesInteger(cs.BytesInteger):
    def _emitparse(self, code):
        r = _read_exact(code)
        return (f"bytes2integer(swapbytes({r}(io, {self.length})) if {self.swapped} else "
                f"{r}(io, {self.length}), {self.signed})")


class FixedSized(cs.FixedSized):
    """A section of exactly ``length`` bytes that its content must fill (the fast path's
    rule: a sized field consumes all of its bytes)."""

    def _parse(self, stream, context, path):
        length = cs.evaluate(self.length, context)
        at = cs.stream_tell(stream, path)
        data = cs.stream_read(stream, length, path)
        sub = cs.io.BytesIO(data)
        obj = self.subcon._parsereport(sub, context, path)
        if sub.tell() != length:
            raise ConstraintError("section size mismatch", offset=at, path=_cpath(path),
                                  expected=length, found=sub.tell())
        return obj

    def _emitparse(self, code):
        _read_exact(code)
        return (f"restream_exact(read_exact(io, {self.length}), lambda io: "
                f"({self.subcon._compileparse(code)}))")


class Prefixed(cs.Prefixed):
    def _emitparse(self, code):
        sub = self.lengthfield.sizeof() if self.includelength else 0
        return (f"restream({_read_exact(code)}(io, ({self.lengthfield._compileparse(code)})"
                f"-({sub})), lambda io: ({self.subcon._compileparse(code)}))")


def PascalString(lengthfield, encoding: str):  # noqa: N802 -- Construct's name
    """Construct's ``PascalString`` with a checked read when compiled."""
    macro = cs.StringEncoded(Prefixed(lengthfield, cs.GreedyBytes), encoding)

    def _emitparse(code):
        return (f"{_read_exact(code)}(io, {lengthfield._compileparse(code)})"
                f".decode({encoding!r})")
    macro._emitparse = _emitparse
    return macro


def decode_many(dec: Any, name: str, buf: Any, offset: int, end: int | None,
                params: tuple) -> list:
    """Consecutive records decoded by the generated ``dec`` into a list (``decode_many_*``):
    the records and errors of ``iter_*``, without a generator or an end offset per record."""
    mv = buf if buf.__class__ is bytes or isinstance(buf, memoryview) else memoryview(buf)
    end = len(mv) if end is None else end
    out: list = []
    append = out.append
    pos = offset
    try:
        while pos < end:
            value, nxt = dec(mv, pos, end, *params)
            if nxt <= pos:  # a zero-size record would repeat forever
                raise ConstraintError("record consumes no bytes", offset=pos, path="",
                                      expected="> 0 bytes", found=0)
            pos = nxt
            append(value)
    except DecodeError as exc:
        raise exc.prefixed(name + "[" + str(len(out)) + "]") from None
    return out


def encode_many(enc: Any, name: str, values: Any, params: tuple) -> bytes:
    """Consecutive records encoded by the generated ``enc`` into one buffer
    (``encode_many_*``): one bytearray for the whole log, no copy per record."""
    out = bytearray()
    i = 0
    try:
        for i, value in enumerate(values):  # noqa: B007 (the index names the failing item)
            enc(out, value, *params)
    except EncodeError as exc:
        raise EncodeError(exc.message, path=name + "[" + str(i) + "]"
                          + ("." + exc.path if exc.path else "")) from None
    except (struct.error, OverflowError, UnicodeEncodeError, AttributeError, TypeError) as exc:
        raise EncodeError(f"cannot encode: {exc}", path=name + "[" + str(i) + "]") from None
    return bytes(out)
