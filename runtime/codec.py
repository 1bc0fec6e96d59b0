"""Support every generated module imports: error helpers, text, varints, compression,
checksums, and the few custom Construct classes the Construct path needs.

Generated code stays short and uniform by calling these; they are the narrow surface
between ``generated/`` and the rest of the runtime.
"""

from __future__ import annotations

import enum
import re
import struct
import threading
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
from .packed import PackedArray
from .truth import encode_failure, note, note_index, noted_path, pin, shift

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
    stop = pos + 10
    if stop > end:  # (a comparison, not a min() call: this runs per long varint)
        stop = end
    while p < stop:
        b = mv[p]
        p += 1
        if b < 0x80:
            value |= b << shift
            if value <= 0xFFFF_FFFF_FFFF_FFFF:
                return value, p
            break
        value |= (b & 0x7F) << shift
        shift += 7
    return varint.decode_uleb128(_upto(mv, end), pos, path=path)


uleb128_encode = varint.encode_uleb128
uleb128_one = varint.ONE_BYTE  # generated encoders index it for one-byte values


def algorithm_name(alg: Any, codecs: dict | None = None, *, offset: int | None = None,
                   path: str = "", encoding: bool = False) -> str:
    """The registered codec a schema value names: an enum member or a string, mapped
    through the field's ``codecs:`` table when it has one (else used as the name)."""
    key = alg.name if isinstance(alg, enum.Enum) else alg
    if isinstance(key, bytes | bytearray):  # a name stored as bytes (a looked-up value)
        key = bytes(key).decode("latin-1")
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

    def _emitparse(self, code):
        fname = f"parse_withparams_{code.allocateId()}"
        sets = "".join(f"\n                _p[{k!r}] = {v!r}" for k, v in self.args.items())
        # a compiled record reads only ``_params`` of its caller's context (it makes its
        # own): hand it that instead of a copy of the whole context
        light = isinstance(self.subcon, Struct)
        ctx = "{'_params': _p}" if light else "Container(this, _params=_p)"
        sub = self.subcon._compileparse(code)
        params = _params_for(self.subcon, self.args) if light else "dict(this['_params'])"
        code.append(f"""
            def {fname}(io, this):
                _p = {params}{sets}
                this = {ctx}
                return {sub}
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        fname = f"build_withparams_{code.allocateId()}"
        sets = "".join(f"\n                _p[{k!r}] = {v!r}" for k, v in self.args.items())
        code.append(f"""
            def {fname}(obj, io, this):
                _p = Container(this['_params']){sets}
                this = Container(this)
                this['_params'] = _p
                return {self.subcon._compilebuild(code)}
        """)
        return f"{fname}(obj, io, this)"



def _built_aside(code, subcon: cs.Construct, var: str, indent: int = 16) -> str:
    """Compiled-build statements (for an ``_emitbuild`` template indented ``indent``)
    building ``obj`` with ``subcon`` into a BytesIO of its own: its result in ``value``,
    its bytes in ``var``, ``io`` the outer stream again -- for wrappers that write a
    length or a compressed frame ahead of the bytes."""
    lines = ["outer = io", "io = BytesIO()", f"value = {subcon._compilebuild(code)}",
             f"{var} = io.getvalue()", "io = outer"]
    return ("\n" + " " * indent).join(lines)


def _save_plain(context: cs.Container, name: str, plain: bytes) -> None:
    context[f"_plain_{name}"] = plain


class Compressed(cs.Subconstruct):
    """A compressed frame whose plain bytes are ``subcon``: behind a ``length`` prefix, or
    (``length=None``) a self-terminating stream whose end is found by decompressing it."""

    def __init__(self, subcon, algorithm, length, *, expected_size=None, limit=None,
                 name: str = "", codecs: dict | None = None, stored=None) -> None:
        super().__init__(subcon)
        self.algorithm = algorithm
        self.length = length
        self.stored = stored  # the compressed byte count, held by an earlier field
        self.expected_size = expected_size
        self.limit = limit
        self.fieldname = name
        self.codecs = codecs

    def _parse(self, stream, context, path):
        expected = self.expected_size(context) if self.expected_size else None
        cap = self.limit(context) if self.limit else (expected or DEFAULT_LIMIT)
        at = cs.stream_tell(stream, path)
        if self.stored is not None:
            n = self.stored(context)
            if n < 0 or n > _stream_end(stream) - at:
                raise TruncatedError("compressed frame truncated", offset=at,
                                     expected=n, found=_stream_end(stream) - at)
            frame = cs.stream_read(stream, n, path)
            plain = decompress(self.algorithm(context), frame, cap, expected_size=expected,
                               offset=at, path=self.fieldname, codecs=self.codecs)
        elif self.length is None:
            rest = stream.read()
            plain, used = decompress_prefix(self.algorithm(context), rest, cap,
                                            expected_size=expected, offset=at,
                                            path=self.fieldname, codecs=self.codecs)
            cs.stream_seek(stream, at + used, 0, path)
        else:
            try:
                n = self.length._parsereport(stream, context, path)
            except Exception as exc:  # the fast path's name for the frame's length
                exc.__dict__.setdefault("_bw_segs", []).insert(0, "compressed_len")
                raise
            at = stream.tell()  # errors are reported where the frame's bytes start
            if n < 0:  # a signed length prefix (an integer kind such as zigzag)
                raise ConstraintError("negative compressed length", offset=at,
                                      expected=">= 0", found=n)
            if n > _stream_end(stream) - at:
                raise TruncatedError("compressed frame truncated", offset=at,
                                     expected=n, found=_stream_end(stream) - at)
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
            pin(exc, at)
            raise
        except Exception as exc:
            pin(exc, at)
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
        context[f"_stored_{self.fieldname}"] = len(frame)
        cs.stream_write(stream, frame, len(frame), path)
        return value

    def _sizeof(self, context, path):
        raise cs.SizeofError("compressed sections have no fixed size", path=path)

    def _emitparse(self, code):
        fid = code.allocateId()
        fname = f"parse_compressed_{fid}"
        _bw(code)
        _read_exact(code)
        expected = repr(self.expected_size) if self.expected_size else "None"
        cap = repr(self.limit) if self.limit else "(expected or _bw.DEFAULT_LIMIT)"
        if self.stored is not None:
            frame = f"""n = {self.stored!r}
                if n < 0 or n > _bw._stream_end(io) - at:
                    raise _bw.TruncatedError("compressed frame truncated", offset=at,
                                             expected=n, found=_bw._stream_end(io) - at)
                plain = _bw.decompress({self.algorithm!r}, read_exact(io, n), cap,
                                       expected_size=expected, offset=at,
                                       path={self.fieldname!r}, codecs={self.codecs!r})"""
        elif self.length is None:
            frame = f"""plain, used = _bw.decompress_prefix({self.algorithm!r}, io.read(), cap,
                                                    expected_size=expected, offset=at,
                                                    path={self.fieldname!r}, codecs={self.codecs!r})
                io.seek(at + used)"""
        else:
            frame = f"""n = {self.length._compileparse(code)}
                plain = _bw.decompress({self.algorithm!r}, read_exact(io, n), cap,
                                       expected_size=expected, offset=at,
                                       path={self.fieldname!r}, codecs={self.codecs!r})"""
        code.append(f"""
            def {fname}_sub(io, this):
                return {self.subcon._compileparse(code)}
            def {fname}(io, this):
                expected = {expected}
                cap = {cap}
                at = io.tell()
                {frame}
                this[{"_plain_" + self.fieldname!r}] = plain
                return _bw.parse_plain_section({fname}_sub, plain, this, at)
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        fname = f"build_compressed_{code.allocateId()}"
        _bw(code)
        length = "" if self.length is None else f"""
                obj = len(frame)
                {self.length._compilebuild(code)}"""
        code.append(f"""
            def {fname}(obj, io, this):
                {_built_aside(code, self.subcon, "plain")}
                this[{"_plain_" + self.fieldname!r}] = plain
                frame = _bw.compress({self.algorithm!r}, plain, path={self.fieldname!r},
                                     codecs={self.codecs!r}){length}
                this[{"_stored_" + self.fieldname!r}] = len(frame)
                io.write(frame)
                return value
        """)
        return f"{fname}(obj, io, this)"



def parse_plain_section(func, plain: bytes, this: cs.Container, at: int) -> Any:
    """The compiled twin of the tail of :meth:`Compressed._parse`: ``func`` parses the
    decompressed bytes, which it must use up; errors are reported at the section start."""
    sub = cs.io.BytesIO(plain)
    try:
        value = func(sub, this)
        if sub.tell() != len(plain):
            raise ConstraintError("decompressed section has trailing bytes",
                                  offset=sub.tell(), path="", expected=len(plain),
                                  found=sub.tell())
    except DecodeError as exc:
        if exc.offset is not None:
            exc.message += f" (at +{exc.offset} in the section decompressed from offset {at})"
        exc.offset = at
        raise
    return value


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

    def _emitparse(self, code):
        _bw(code)
        return (f"_bw.convert_decode({_link(code, self)}.spec, {self.subcon._compileparse(code)}, "
                f"None, {self.fieldname!r})")

    def _emitbuild(self, code):
        fname = f"build_converted_{code.allocateId()}"
        _bw(code)
        code.append(f"""
            def {fname}(obj, io, this):
                given = obj
                obj = _bw.convert_encode({_link(code, self)}.spec, obj, {self.fieldname!r})
                {self.subcon._compilebuild(code)}
                return given
        """)
        return f"{fname}(obj, io, this)"



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


def log_loop(stop_on_error: bool, start: str) -> tuple[str, str]:
    """The compiled item loop's list and its ``try`` tail: a log (``stop_on_error``) ends
    at a bad item with its stop reason at ``start`` (a local of the loop), as ``_parse``
    does; otherwise the error propagates."""
    if stop_on_error:
        return "items = _bw.LogList()", f"""except Exception as exc:
                        items.stop = _bw.stop_reason(_bw.construct_error(exc, ""), {start})
                        io.seek(end)
                        return items"""
    return "items = ListContainer()", "finally:\n                        pass"


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
                item = _item(self.subcon, stream, context, path, len(items))
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
            context._chain = self._next(item, stream, context, start, stop, path)
        return items

    def _build(self, obj, stream, context, path):
        n = self.count(context) if self.count is not None else None
        if n is not None and len(obj) != n:
            raise cs.RangeError(f"expected {n} items, found {len(obj)}", path=path)
        context._chain = self.first(context)
        for item in obj:
            start = cs.stream_tell(stream, path)
            built = self.subcon._build(item, stream, context, path)
            context._chain = self._next(built if built is not None else item, stream, context,
                                        start, cs.stream_tell(stream, path), path)
        return obj

    def _next(self, item, stream, context, start: int, stop: int, path):
        """The value the next item's chain param gets (here: the stored integer)."""
        return self._stored(stream, start, stop, path)

    def _sizeof(self, context, path):
        raise cs.SizeofError("chained repeats have no fixed size", path=path)

    def _emitparse(self, code):
        fid = code.allocateId()
        fname = f"parse_chainedrepeat_{fid}"
        _bw(code)
        _read_exact(code)
        code.append(f"chained_{fid} = struct.Struct({self.fmt.format!r})")
        count = repr(self.count) if self.count is not None else "None"
        where = f"stop - {self.at}" if self.from_end else f"start + {self.at}"
        head, fail = log_loop(self.stop_on_error, 'start')
        code.append(f"""
            def {fname}(io, this):
                n = {count}
                here = io.tell()
                end = io.seek(0, 2)
                io.seek(here)
                {head}
                this['_chain'] = {self.first!r}
                while (len(items) < n) if n is not None else (io.tell() < end):
                    start = io.tell()
                    try:
                        item = {self.subcon._compileparse(code)}
                        stop = io.tell()
                        if stop <= start:
                            raise _bw.ConstraintError("repeated item consumes no bytes",
                                                      offset=start, path="")
                    {fail}
                    items.append(item)
                    io.seek({where})
                    this['_chain'] = chained_{fid}.unpack(read_exact(io, {self.fmt.size}))[0]
                    io.seek(stop)
                return items
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        fid = code.allocateId()
        fname = f"build_chainedrepeat_{fid}"
        _bw(code)
        code.append(f"chainedb_{fid} = struct.Struct({self.fmt.format!r})")
        count = repr(self.count) if self.count is not None else "None"
        where = f"stop - {self.at}" if self.from_end else f"start + {self.at}"
        code.append(f"""
            def {fname}(obj, io, this):
                n = {count}
                if n is not None and len(obj) != n:
                    raise RangeError("expected %d items, found %d" % (n, len(obj)))
                this['_chain'] = {self.first!r}
                items = obj
                for obj in items:
                    start = io.tell()
                    {self.subcon._compilebuild(code)}
                    stop = io.tell()
                    io.seek({where})
                    this['_chain'] = chainedb_{fid}.unpack(io.read({self.fmt.size}))[0]
                    io.seek(stop)
                return items
        """)
        return f"{fname}(obj, io, this)"



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

    def _emitparse(self, code):
        fname = f"parse_plain_{code.allocateId()}"
        _read_exact(code)
        code.append(f"""
            def {fname}(io, this):
                start = io.tell()
                value = {self.subcon._compileparse(code)}
                end = io.tell()
                io.seek(start)
                this[{"_plain_" + self.fieldname!r}] = read_exact(io, end - start)
                return value
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        fname = f"build_plain_{code.allocateId()}"
        code.append(f"""
            def {fname}(obj, io, this):
                start = io.tell()
                value = {self.subcon._compilebuild(code)}
                end = io.tell()
                io.seek(start)
                this[{"_plain_" + self.fieldname!r}] = io.read(end - start)
                return value
        """)
        return f"{fname}(obj, io, this)"



def span(this: cs.Container, pieces: list[tuple[str, str]]) -> bytes:
    """The bytes a checksum covers, from Tell markers (or saved plain sections)."""
    io = this["_io"]  # by item: compiled records hand plain dicts as contexts
    here = io.tell()
    out = []
    for kind, name in pieces:
        if kind == "plain":
            out.append(this.get(f"_plain_{name}", b""))
            continue
        if kind == "range":  # record-relative [a, b) from the record's start marker
            a, b = (this["_o_start"] + int(x) for x in name.split(":"))
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


def span_range(this: cs.Container, first: str, last: str) -> bytes:
    """:func:`span` of consecutive fields: the bytes from marker ``first`` to ``last``
    (one read instead of one per field; absent fields between them hold no bytes)."""
    io = this["_io"]
    here = io.tell()
    a = this[first]
    io.seek(a)
    data = io.read(this[last] - a)
    io.seek(here)
    return data


def construct_error(exc: Exception, record: str) -> DecodeError:
    """Map whatever the Construct path raised onto the project's error type, at the
    field and offset the members it left through noted (``truth.note``)."""
    noted = noted_path(exc, record) if record else None
    off = exc.__dict__.get("_bw_off")
    if isinstance(exc, DecodeError):
        if noted is None:
            return exc.prefixed(record)
        exc.path, exc.offset = noted, off
        return exc
    path = getattr(exc, "path", None) or ""
    path = path.replace("(parsing) -> ", "").replace(" -> ", ".") if path else ""
    full = noted or (f"{record}.{path}" if path else record)
    text = str(exc).split("\n")[0]
    if isinstance(exc, (cs.StreamError, cs.core.StreamError)):
        return TruncatedError(f"truncated: {text}", path=full, offset=off)
    if isinstance(exc, cs.ChecksumError):
        return ChecksumError(f"checksum mismatch: {text}", path=full, offset=off)
    return ConstraintError(f"{type(exc).__name__}: {text}", path=full, offset=off)


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
            item = _item(self.subcon, stream, context, path, len(items))
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

    def _emitparse(self, code):
        fname = f"parse_terminated_{code.allocateId()}"
        code.append(f"""
            def {fname}(io, this):
                items = ListContainer()
                while True:
                    item = {self.subcon._compileparse(code)}
                    if item == {self.terminator!r}:
                        return items
                    items.append(item)
        """)
        return f"{fname}(io, this)"


# -- strict Construct twins (both paths must agree: no silent stop, no skipped rule) ----

    def _emitbuild(self, code):
        fname = f"build_terminated_{code.allocateId()}"
        sub = self.subcon._compilebuild(code)
        code.append(f"""
            def {fname}(obj, io, this):
                items = obj
                for obj in items:
                    if obj == {self.terminator!r}:
                        raise ValidationError("an item equals the terminator %r"
                                              % ({self.terminator!r},))
                    {sub}
                obj = {self.terminator!r}
                {sub}
                return items
        """)
        return f"{fname}(obj, io, this)"


def _item(subcon, stream, context, path, index: int) -> Any:
    """Item ``index`` of a list: a failure names it (``items[2].x``) and where it starts."""
    start = stream.tell()
    try:
        return subcon._parsereport(stream, context, path)
    except Exception as exc:
        note_index(exc, index, start)
        raise


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
                try:
                    item = self.subcon._parsereport(stream, context, path)
                except Exception as exc:
                    note_index(exc, len(items), pos)
                    raise
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
        for i, item in enumerate(obj):
            try:
                self.subcon._build(item, stream, context, path)
            except Exception as exc:
                note_index(exc, i, 0)
                raise
        return obj

    def _sizeof(self, context, path):
        raise cs.SizeofError("repeat to end has no fixed size", path=path)

    def _emitparse(self, code):
        # compiled, the item loop runs the compiled item parser (an interpreted loop here
        # would run every item interpreted, which defeats compile()); the log variant maps
        # a failure to its stop reason as _parse does (reads are checked when compiled, so
        # a short item is "truncated" on both)
        fname = f"parse_repeattoend_{code.allocateId()}"
        _bw(code)
        head, fail = log_loop(self.stop_on_error, 'pos')
        code.append(f"""
            def {fname}(io, this):
                pos = io.tell()
                end = io.seek(0, 2)
                io.seek(pos)
                {head}
                while pos < end:
                    try:
                        item = {self.subcon._compileparse(code)}
                        nxt = io.tell()
                        if nxt <= pos:
                            raise _bw.ConstraintError("repeated item consumes no bytes",
                                                      offset=pos, path="")
                    {fail}
                    items.append(item)
                    pos = nxt
                return items
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        fname = f"build_repeattoend_{code.allocateId()}"
        code.append(f"""
            def {fname}(obj, io, this):
                items = obj
                for obj in items:
                    {self.subcon._compilebuild(code)}
                return items
        """)
        return f"{fname}(obj, io, this)"



class RepeatUntil(cs.Subconstruct):
    """Items of ``subcon`` up to and including the first for which ``predicate`` holds
    (``repeat: {until_expr: ...}``); the region ending first is a truncation error."""

    def __init__(self, subcon, predicate) -> None:
        super().__init__(subcon)
        self.predicate = predicate

    def _parse(self, stream, context, path):
        items = cs.ListContainer()
        while True:
            item = _item(self.subcon, stream, context, path, len(items))
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

    def _emitparse(self, code):
        fname = f"parse_repeatuntil_{code.allocateId()}"
        code.append(f"""
            def {fname}(io, this):
                items = ListContainer()
                while True:
                    item = {self.subcon._compileparse(code)}
                    items.append(item)
                    this['_last'] = item
                    if {self.predicate!r}:
                        return items
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        fname = f"build_repeatuntil_{code.allocateId()}"
        code.append(f"""
            def {fname}(obj, io, this):
                items = obj
                last = len(items) - 1
                for i, obj in enumerate(items):
                    built = {self.subcon._compilebuild(code)}
                    this['_last'] = built if built is not None else obj
                    if ({self.predicate!r}) != (i == last):
                        raise ValidationError("repeat-until condition must hold on the last "
                                              "item and only there")
                return items
        """)
        return f"{fname}(obj, io, this)"



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

    def _emitparse(self, code):
        fname = f"parse_zeropadding_{code.allocateId()}"
        _bw(code)
        _read_exact(code)
        check = "" if self.arbitrary else """
                if data.count(0) != len(data):
                    raise _bw.ConstraintError("padding must be zero", offset=at, path="")"""
        code.append(f"""
            def {fname}(io, this):
                at = io.tell()
                data = read_exact(io, {self.length!r}){check}
                return None
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        return f"(io.write(bytes({self.length!r})), None)[1]"



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
        n = self.count(context) if callable(self.count) else self.count
        if len(arr) != n:  # written, another count would be read back
            raise EncodeError(f"expected {n} items, found {len(arr)}")
        data = arr.tobytes()
        cs.stream_write(stream, data, len(data), path)
        return obj

    def _sizeof(self, context, path):
        raise cs.SizeofError("numpy arrays have a computed size", path=path)

    def _emitparse(self, code):
        fname = f"parse_numpyarray_{code.allocateId()}"
        _bw(code)
        _read_exact(code)
        code.append(f"""
            def {fname}(io, this):
                n = {self.count!r}
                if n < 0:
                    raise _bw.ConstraintError("negative count", path="", found=n)
                dtype = {_link(code, self)}.dtype
                return _bw.np.frombuffer(read_exact(io, n * dtype.itemsize), dtype, n)
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        _bw(code)
        dtype = f"{_link(code, self)}.dtype"  # data only (see _link)
        return f"_bw.numpy_build(obj, io, {dtype}, {self.count!r})"



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

    def _emitparse(self, code):
        fname = f"parse_{self.kind}_{code.allocateId()}"
        _bw(code)
        # one byte below 0x80 is the whole uleb128 (the common case, inline); anything
        # else goes through the same decoder as _parse, on the same (at most 11) bytes
        quick = """
                if data and data[0] < 0x80:
                    io.seek(at + 1)
                    return data[0]""" if self.kind == "uleb128" else ""
        code.append(f"""
            def {fname}(io, this):
                at = io.tell()
                data = io.read(11){quick}
                try:
                    value, n = _bw.varint.DECODERS[{self.kind!r}](data, 0, path="")
                except _bw.DecodeError as exc:
                    exc.offset = at
                    raise
                io.seek(at + n)
                return value
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        _bw(code)
        return f"(io.write(_bw.varint.ENCODERS[{self.kind!r}](obj)), obj)[1]"



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

    def _emitparse(self, code):
        fname = f"parse_terminatedbytes_{code.allocateId()}"
        _bw(code)
        decode = "return raw" if self.encoding is None else f"""try:
                    return raw.decode({self.encoding!r})
                except UnicodeDecodeError as exc:
                    raise _bw.text_error(exc, at, {self.encoding!r}, "") from None"""
        code.append(f"""
            def {fname}(io, this):
                at = io.tell()
                data = io.read()
                i = data.find({self.term!r})
                if i < 0:
                    raise _bw.TruncatedError("terminator not found", offset=at, path="",
                                             expected={self.term!r})
                io.seek(at + i + {len(self.term)})
                raw = data[:i]
                {decode}
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        _bw(code)
        return f"_bw.terminated_build(obj, io, {self.term!r}, {self.encoding!r})"



def remaining(this: cs.Container) -> int:
    """``_remaining`` on the Construct path: bytes left in the enclosing region."""
    io = this["_io"]  # by item: compiled records hand plain dicts as contexts
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
            raise self.refuse(raw, at, _cpath(path))
        return raw

    def _build(self, obj, stream, context, path):
        if obj not in self.values:  # written, it would not decode
            raise EncodeError(f"{obj!r} is not a {self.cls_name} value", path=_cpath(path))
        return self.subcon._build(obj, stream, context, path)

    def refuse(self, raw: int, at: int, path: str) -> ConstraintError:
        """The error for a value outside the enum (both paths raise it)."""
        what = "retired" if raw in self.retired else "unknown"
        tail = " (permanently retired, never reused)" if what == "retired" else ""
        return ConstraintError(f"{what} {self.cls_name} value{tail}", offset=at, path=path,
                               expected=sorted(self.values), found=raw)

    def _emitparse(self, code):
        fname = f"parse_closedenum_{code.allocateId()}"
        code.append(f"""
            def {fname}(io, this):
                at = io.tell()
                raw = {self.subcon._compileparse(code)}
                if raw not in {set(self.values)!r}:
                    raise {_link(code, self)}.refuse(raw, at, "")
                return raw
        """)
        return f"{fname}(io, this)"


# -- compiled parsing that checks every read -------------------------------------------
# Construct's compiler emits a bare ``io.read(n)`` for these classes: a short read then
# yields short bytes instead of an error (a truncated input "decodes"). The subclasses
# below emit a checked read; generated modules import them over Construct's names.

    def _emitbuild(self, code):
        return (f"({self.subcon._compilebuild(code)} if obj in {set(self.values)!r} else "
                f"{_link(code, self)}.refuse_build(obj))")

    def refuse_build(self, obj: Any) -> Any:
        raise EncodeError(f"{obj!r} is not a {self.cls_name} value")


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


def _bw(code) -> str:
    """Make this module reachable as ``_bw`` in the compiled source (errors, decoders)."""
    code.append("from bytewright.runtime import codec as _bw")
    return "_bw"


def _link(code, obj: Any) -> str:
    """Source naming ``obj`` in the compiled module, for its data (a dtype, a conversion
    spec, an error builder), never for an interpreted ``_parse``."""
    obj._compileinstance(code)  # all three tables: a build may still fall back to it
    return f"linkedinstances[{id(obj)}]"


class Bytes(cs.Bytes):
    def _parse(self, stream, context, path):
        n = cs.evaluate(self.length, context)
        if isinstance(n, int) and n < 0:  # as the fast path: a rule, not a truncation
            raise ConstraintError("negative size", offset=stream.tell(), expected=">= 0",
                                  found=n)
        return cs.stream_read(stream, n, path)

    def _emitparse(self, code):
        return f"{_read_exact(code)}(io, {self.length})"

    def _emitbuild(self, code):  # Construct's writes without its checks
        _bw(code)
        return f"_bw.build_fixed_bytes(obj, io, {self.length!r})"


class BytesInteger(cs.BytesInteger):
    def _emitparse(self, code):
        r = _read_exact(code)
        return (f"bytes2integer(swapbytes({r}(io, {self.length})) if {self.swapped} else "
                f"{r}(io, {self.length}), {self.signed})")

    def _emitbuild(self, code):  # Construct's writes without its checks
        _bw(code)
        return (f"_bw.build_bigint(obj, io, {self.length!r}, {self.signed!r}, "
                f"{self.swapped!r})")


class _GreedyBytes(type(cs.GreedyBytes)):
    """Construct's ``GreedyBytes`` whose compiled build checks the value as ``_build``
    does (Construct's writes whatever it is given)."""

    def _emitbuild(self, code):
        _bw(code)
        return "_bw.build_greedy(obj, io)"


GreedyBytes = _GreedyBytes()


def build_greedy(obj: Any, io: Any) -> Any:
    cs.stream_write(io, obj, len(obj), None)
    return obj


# Compiled builds of the fields above: ``_build``'s checks and errors, as interpreted.

def build_fixed_bytes(obj: Any, io: Any, length: int) -> Any:
    data = cs.integer2bytes(obj, length) if isinstance(obj, int) else obj
    data = bytes(data) if type(data) is bytearray else data
    cs.stream_write(io, data, length, None)
    return data


def build_bigint(obj: Any, io: Any, length: int, signed: bool, swapped: bool) -> Any:
    if not isinstance(obj, int):
        raise cs.IntegerError(f"value {obj} is not an integer")
    if length <= 0:
        raise cs.IntegerError(f"length {length} must be positive")
    try:
        data = cs.integer2bytes(obj, length, signed)
    except ValueError as e:
        raise cs.IntegerError(str(e)) from None
    if swapped:
        data = cs.swapbytes(data)
    cs.stream_write(io, data, length, None)
    return obj


def build_field(st: struct.Struct, fmtstr: str, obj: Any, io: Any) -> Any:
    try:
        data = st.pack(obj)
    except Exception:  # noqa: BLE001 -- Construct's own rule: any failure, this error
        raise cs.FormatFieldError(f"struct {fmtstr!r} error during building, "
                                  f"given value {obj!r}") from None
    io.write(data)
    return obj


class FixedSized(cs.FixedSized):
    """A section of exactly ``length`` bytes that its content must fill (the fast path's
    rule: a sized field consumes all of its bytes)."""

    def _parse(self, stream, context, path):
        length = cs.evaluate(self.length, context)
        at = cs.stream_tell(stream, path)
        data = cs.stream_read(stream, length, path)
        sub = cs.io.BytesIO(data)
        try:
            obj = self.subcon._parsereport(sub, context, path)
        except Exception as exc:
            shift(exc, at)
            raise
        if sub.tell() != length:
            raise ConstraintError("section size mismatch", offset=at, path=_cpath(path),
                                  expected=length, found=sub.tell())
        return obj

    def _build(self, obj, stream, context, path):
        # exactly ``length`` bytes: zeros padded on would decode as more content
        length = cs.evaluate(self.length, context)
        if length < 0:
            raise cs.PaddingError("length cannot be negative", path=path)
        sub = cs.io.BytesIO()
        value = self.subcon._build(obj, sub, context, path)
        data = sub.getvalue()
        if len(data) != length:
            raise EncodeError(f"encoded size {len(data)} differs from the section size "
                              f"{length}", path=_cpath(path))
        cs.stream_write(stream, data, length, path)
        return value

    def _emitparse(self, code):
        _read_exact(code)
        return (f"restream_exact(read_exact(io, {self.length}), lambda io: "
                f"({self.subcon._compileparse(code)}))")

    def _emitbuild(self, code):
        fname = f"build_fixedsized_{code.allocateId()}"
        _bw(code)
        code.append(f"""
            def {fname}(obj, io, this):
                length = {self.length!r}
                if length < 0:
                    raise PaddingError("length cannot be negative")
                {_built_aside(code, self.subcon, "data")}
                if len(data) != length:
                    raise _bw.EncodeError("encoded size %d differs from the section size %d"
                                          % (len(data), length))
                io.write(data)
                return value
        """)
        return f"{fname}(obj, io, this)"



class Prefixed(cs.Prefixed):
    def _parse(self, stream, context, path):
        # as the fast path: a cut prefix is the field's ``length``, a cut body is reported
        # where the body starts
        try:
            n = self.lengthfield._parsereport(stream, context, path)
        except Exception as exc:
            exc.__dict__.setdefault("_bw_segs", []).insert(0, "length")
            raise
        n -= self.lengthfield.sizeof() if self.includelength else 0
        at = stream.tell()
        if n < 0:  # a signed prefix (sleb128, zigzag, iN): a rule, as on the fast path
            raise ConstraintError("negative size", offset=at, expected=">= 0", found=n)
        if n > _stream_end(stream) - at:
            raise TruncatedError("prefixed data truncated", offset=at, expected=n,
                                 found=_stream_end(stream) - at)
        data = cs.stream_read(stream, n, path)
        try:
            return self.subcon._parsereport(cs.io.BytesIO(data), context, path)
        except Exception as exc:
            shift(exc, at)
            raise

    def _emitparse(self, code):
        sub = self.lengthfield.sizeof() if self.includelength else 0
        _bw(code)
        return (f"restream({_read_exact(code)}(io, _bw.prefixed_size(io, "
                f"({self.lengthfield._compileparse(code)})-({sub}))), "
                f"lambda io: ({self.subcon._compileparse(code)}))")

    def _emitbuild(self, code):
        fname = f"build_prefixed_{code.allocateId()}"
        extra = f" + {self.lengthfield.sizeof()}" if self.includelength else ""
        code.append(f"""
            def {fname}(obj, io, this):
                {_built_aside(code, self.subcon, "data")}
                obj = len(data){extra}
                {self.lengthfield._compilebuild(code)}
                io.write(data)
                return value
        """)
        return f"{fname}(obj, io, this)"



def prefixed_size(io, n: int) -> int:
    """A length prefix as compiled code reads it: negative is refused where the data
    starts, as the interpreted parser and the fast path do (not a stream error)."""
    if n < 0:
        raise ConstraintError("negative size", offset=io.tell(), expected=">= 0", found=n)
    return n


class StringEncoded(cs.StringEncoded):
    """Construct's ``StringEncoded`` whose build compiles (the text encoded, then built
    by the compiled subcon; Construct's own has no ``_emitbuild``)."""

    def _parse(self, stream, context, path):
        data = self.subcon._parsereport(stream, context, path)
        try:
            return data.decode(self.encoding)
        except UnicodeDecodeError as exc:  # at the first bad byte, as the fast path
            raise text_error(exc, stream.tell() - len(data), self.encoding, "") from None

    def _emitparse(self, code):
        fname = f"parse_stringencoded_{code.allocateId()}"
        _bw(code)
        code.append(f"""
            def {fname}(io, this):
                data = {self.subcon._compileparse(code)}
                try:
                    return data.decode({self.encoding!r})
                except UnicodeDecodeError as exc:
                    raise _bw.text_error(exc, io.tell() - len(data), {self.encoding!r}, "") from None
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        fname = f"build_stringencoded_{code.allocateId()}"
        _bw(code)
        code.append(f"""
            def {fname}(obj, io, this):
                given = obj
                obj = _bw.encode_text(obj, {self.encoding!r})
                {self.subcon._compilebuild(code)}
                return given
        """)
        return f"{fname}(obj, io, this)"


def encode_text(obj: Any, encoding: str) -> bytes:
    """``StringEncoded._encode``'s rules and errors, for compiled builds."""
    if not isinstance(obj, str):
        raise cs.StringError("string encoding failed, expected unicode string")
    if obj == "":
        return b""
    try:
        return obj.encode(encoding)
    except Exception:  # noqa: BLE001 -- Construct's own bare except, same error
        raise cs.StringError(f"cannot use encoding {encoding!r} to encode {obj!r}") from None


def numpy_build(obj: Any, io: Any, dtype: Any, count: int | None = None) -> Any:
    """``NumpyArray._build`` for compiled builds."""
    arr = np.ascontiguousarray(obj, dtype=dtype) if isinstance(obj, np.ndarray) \
        else rows_to_array(obj, dtype)
    if count is not None and len(arr) != count:
        raise EncodeError(f"expected {count} items, found {len(arr)}")
    data = arr.tobytes()
    cs.stream_write(io, data, len(data), None)
    return obj


def terminated_build(obj: Any, io: Any, term: bytes, encoding: str | None) -> Any:
    """``TerminatedBytes._build`` for compiled builds."""
    raw = obj.encode(encoding) if encoding else bytes(obj)
    if term in raw:
        raise EncodeError(f"value contains the terminator {term.hex()}", path="")
    data = raw + term
    cs.stream_write(io, data, len(data), None)
    return obj


def PascalString(lengthfield, encoding: str):  # noqa: N802 -- Construct's name
    """Construct's ``PascalString`` with a checked read when compiled."""
    macro = StringEncoded(Prefixed(lengthfield, GreedyBytes), encoding)

    def _emitparse(code):
        return (f"{_read_exact(code)}(io, {lengthfield._compileparse(code)})"
                f".decode({encoding!r})")
    macro._emitparse = _emitparse
    macro._bw_prefix = lengthfield  # a compiled Struct reads it in its fixed run
    macro._bw_encoding = encoding
    return macro


def GreedyString(encoding: str):  # noqa: N802 -- Construct's name
    """Construct's ``GreedyString`` (text to the end of the region), compiled."""
    macro = StringEncoded(GreedyBytes, encoding)  # cs.GreedyString, building compiled

    def _emitparse(code):
        return f"io.read().decode({encoding!r})"
    macro._emitparse = _emitparse
    return macro


class Labelled(cs.Subconstruct):
    """``subcon`` whose failure is reported as the field's part ``label``."""

    def __init__(self, subcon, label: str) -> None:
        super().__init__(subcon)
        self.label = label

    def _parse(self, stream, context, path):
        try:
            return self.subcon._parsereport(stream, context, path)
        except Exception as exc:
            exc.__dict__.setdefault("_bw_segs", []).insert(0, self.label)
            raise

    def _emitparse(self, code):
        return self.subcon._compileparse(code)

    def _emitbuild(self, code):
        return self.subcon._compilebuild(code)


def PrefixedArray(countfield, subcon, min_size: int = 1):  # noqa: N802 -- Construct's name
    """Construct's ``PrefixedArray``, tagged so a compiled :class:`Struct` reads its count
    in the fixed run before it."""
    macro = cs.PrefixedArray(countfield, subcon)
    items = next(sc for sc in macro.subcons if sc.name == "items")
    # ours: the count bounded by the bytes left, a failing item names its index
    items.subcon = Array(cs.this.count, subcon, min_size=min_size)
    count = next(sc for sc in macro.subcons if sc.name == "count")
    count.subcon = Labelled(count.subcon, "count")  # a cut count is the field's ``count``
    macro._bw_count = countfield
    macro._bw_item = subcon

    def _emitparse(code):  # Construct's would read a negative count as no items
        _bw(code)
        return (f"ListContainer(({subcon._compileparse(code)}) for i in "
                f"range(_bw.item_count({countfield._compileparse(code)})))")
    macro._emitparse = _emitparse
    return macro


def item_count(n: int) -> int:
    """A list's count as compiled code reads it: a negative count is refused, as the
    interpreted parser and the fast path do (``range`` would yield no items)."""
    if n < 0:
        raise ConstraintError(f"negative count {n}", expected=">= 0", found=n)
    return n


_MANY: dict = {}


class _Items(cs.ListContainer):
    """A ListContainer whose two extra attributes live in slots (no per-list dict)."""

    __slots__ = ("raw", "key")


def _items(values, raw: bytes, key: tuple) -> cs.ListContainer:
    """The numbers of a compiled fixed-size array, with the bytes they were read from
    (``raw``; ``key``: byte order, number class, element size): a ``view: packed`` field
    keeps those bytes (:func:`packed_from`) instead of packing the numbers again."""
    out = _Items(values)
    out.raw = raw
    out.key = key
    return out


_NUMBER_CLASS = {c: ("u", struct.calcsize("<" + c)) for c in "BHILQ"}
_NUMBER_CLASS.update({c: ("s", struct.calcsize("<" + c)) for c in "bhilq"})
_NUMBER_CLASS.update({c: ("f", struct.calcsize("<" + c)) for c in "efd"})


_KIND_KEYS: dict = {}


def packed_from(values: Any, kind: Any) -> Any:
    """``PackedArray.from_values(values, kind)``, reusing the wire bytes when ``values``
    were read compiled with the same element encoding (no second pack)."""
    key = getattr(values, "key", None)
    if key is not None:
        # by id (hashing a kind costs a Python call); the entry keeps the kind alive
        got = _KIND_KEYS.get(id(kind))
        if got is None or got[0] is not kind:
            got = _KIND_KEYS[id(kind)] = (kind, (kind.order, *(
                _NUMBER_CLASS.get(kind.code) if kind.code else
                ("s" if kind.signed else "u", kind.size))))
        if key == got[1]:
            return PackedArray(values.raw, kind)
    elif values.__class__ is PackedArray and values.kind is kind:  # read packed already
        return values
    return PackedArray.from_values(values, kind)


def PackedView(array, kind: Any):  # noqa: N802 -- named as the Construct classes it wraps
    """``array`` (an ``Array`` or ``PrefixedArray`` of numbers) tagged as a ``view: packed``
    field of element ``kind``: interpreted it parses to the numbers as before; compiled,
    when the wire encoding is ``kind``'s, it is one read kept as the
    :class:`PackedArray` of those bytes (no numbers unpacked only to be packed again)."""
    array._bw_packed = kind
    return array


def _kind_key(kind: Any) -> tuple:
    """What :func:`packed_from` compares with an array's ``key``: byte order, number
    class, element size."""
    return (kind.order, *(_NUMBER_CLASS.get(kind.code) if kind.code else
                          ("s" if kind.signed else "u", kind.size)))


def _read_count(io, size: int, n: int) -> bytes:
    """``n`` elements of ``size`` bytes in one read: a negative count or a short read
    raise Construct's errors, as the interpreted array would."""
    if n < 0:
        raise cs.RangeError(f"invalid count {n}")
    total = n * size
    data = io.read(total)
    if len(data) != total:
        raise short_read(total, data)
    return data


def read_packed(io, size: int, n: int, kind: Any) -> PackedArray:
    """``n`` elements of ``size`` bytes as the packed array of their bytes: one checked
    read (:func:`_read_count`)."""
    return PackedArray(_read_count(io, size, n), kind)


def read_items(io, fmt: str, size: int, n: int) -> cs.ListContainer:
    """``n`` items of the one-item struct format ``fmt`` (``size`` bytes each) in one
    checked read and one unpack: the compiled form of an array of a fixed-size number."""
    data = _read_count(io, size, n)
    got = _MANY.get((fmt, n))
    if got is None:
        if len(_MANY) > 512:  # counts vary per record: keep the cache bounded
            _MANY.clear()
        got = _MANY[(fmt, n)] = (struct.Struct(f"{fmt[0]}{n}{fmt[1:]}"),
                                 (fmt[0], *_NUMBER_CLASS[fmt[1:]]))
    out = _Items(got[0].unpack(data))
    out.raw = data
    out.key = got[1]
    return out


def read_bigints(io, size: int, n: int, order: str, signed: bool) -> cs.ListContainer:
    """``n`` integers of ``size`` bytes (``BytesInteger``) in one checked read."""
    data = _read_count(io, size, n)
    total = len(data)
    frm = int.from_bytes
    return _items([frm(data[i:i + size], order, signed=signed)
                     for i in range(0, total, size)], data,
                    ("<" if order == "little" else ">", "s" if signed else "u", size))


def _items_source(item: cs.Construct, count: str, code: Any = None,
                  packed: Any = None) -> str | None:
    """Source reading ``count`` items of ``item`` at once, when it is a fixed number:
    as the packed array of their bytes when ``packed`` (a :class:`PackedView`'s kind)
    reads the same encoding."""
    item = _inner(item)
    if packed is not None and code is not None:
        key = None
        if isinstance(item, cs.FormatField) and item.fmtstr[1:] in _NUMBER_CLASS:
            key = (item.fmtstr[0], *_NUMBER_CLASS[item.fmtstr[1:]])
        elif isinstance(item, cs.BytesInteger) and isinstance(item.length, int) \
                and isinstance(item.swapped, bool) and isinstance(item.signed, bool):
            key = ("<" if item.swapped else ">", "s" if item.signed else "u", item.length)
        if key is not None and key == _kind_key(packed):
            kname = f"packedkind_{code.allocateId()}"
            _bw(code)
            code.append("from bytewright.runtime.packed import packed_kind")
            code.append(f"{kname} = packed_kind({packed.order!r}, {packed.code!r}, "
                        f"{packed.size!r}, {packed.signed!r})")
            return f"_bw.read_packed(io, {key[2]}, {count}, {kname})"
    if isinstance(item, cs.FormatField):
        return f"_bw.read_items(io, {item.fmtstr!r}, {item.length}, {count})"
    if isinstance(item, cs.BytesInteger) and isinstance(item.length, int) \
            and isinstance(item.swapped, bool) and isinstance(item.signed, bool):
        order = "little" if item.swapped else "big"
        return f"_bw.read_bigints(io, {item.length}, {count}, {order!r}, {item.signed})"
    return None


class Array(cs.Array):
    """Construct's ``Array``; compiled, an array of a fixed-size number is one read and
    one unpack, and a negative count is refused as interpreted (Construct's compiled
    ``range(count)`` would yield an empty list)."""

    def _build(self, obj, stream, context, path):
        count = cs.evaluate(self.count, context)
        if count < 0 or len(obj) != count:
            raise EncodeError(f"expected {count} items, found {len(obj)}")
        out = cs.ListContainer()
        for i, e in enumerate(obj):
            context._index = i
            try:
                out.append(self.subcon._build(e, stream, context, path))
            except Exception as exc:
                note_index(exc, i, 0)
                raise
        return out

    def __init__(self, count, subcon, discard=False, min_size: int = 1) -> None:
        super().__init__(count, subcon, discard)
        self.min_size = min_size  # the least bytes an item takes (the fast path's bound)

    def _parse(self, stream, context, path):
        count = cs.evaluate(self.count, context)
        at = stream.tell()
        if count < 0:
            raise ConstraintError(f"negative count {count}", offset=at, expected=">= 0",
                                  found=count)
        if count * self.min_size > _stream_end(stream) - at:
            raise TruncatedError(f"count {count} needs at least {count * self.min_size} bytes",
                                 offset=at, expected=count * self.min_size,
                                 found=_stream_end(stream) - at)
        obj = cs.ListContainer()
        for i in range(count):
            context._index = i
            start = stream.tell()  # (see _build for the other direction)
            try:
                obj.append(self.subcon._parsereport(stream, context, path))
            except Exception as exc:
                note_index(exc, i, start)
                raise
        return obj

    def _emitparse(self, code):
        _bw(code)
        many = _items_source(self.subcon, "n", code, getattr(self, "_bw_packed", None))
        fname = f"parse_array_{code.allocateId()}"
        body = many if many is not None else \
            f"ListContainer([{self.subcon._compileparse(code)} for i in range(n)])"
        code.append(f"""
            def {fname}(io, this):
                n = {self.count!r}
                if n < 0:
                    raise RangeError("invalid count %r" % (n,))
                return {body}
        """)
        return f"{fname}(io, this)"


class FormatField(cs.FormatField):
    """Construct's ``FormatField`` compiled with a checked read: a short input raises
    ``StreamError`` (a truncation), as interpreted, instead of ``struct.error``."""

    def _emitparse(self, code):
        fname = f"formatfield_{code.allocateId()}"
        code.append(f"{fname} = struct.Struct({self.fmtstr!r})")
        return f"{fname}.unpack({_read_exact(code)}(io, {self.length}))[0]"

    def _emitbuild(self, code):  # Construct's raises struct.error for a bad value
        fname = f"formatfield_{code.allocateId()}"
        _bw(code)
        code.append(f"{fname} = struct.Struct({self.fmtstr!r})")
        return f"_bw.build_field({fname}, {self.fmtstr!r}, obj, io)"


# The names generated modules use, as checked FormatFields (imported over Construct's).
_FIELD_NAMES: dict[str, str] = {}
for _bits, _code in ((8, "b"), (16, "h"), (32, "l"), (64, "q")):
    for _sign, _c in (("u", _code.upper()), ("s", _code)):
        for _end, _order in (("b", ">"), ("l", "<")):
            _FIELD_NAMES[f"Int{_bits}{_sign}{_end}"] = _order + _c
for _bits, _c in ((32, "f"), (64, "d")):
    for _end, _order in (("b", ">"), ("l", "<")):
        _FIELD_NAMES[f"Float{_bits}{_end}"] = _order + _c
for _name, _fmt in _FIELD_NAMES.items():
    globals()[_name] = FormatField(_fmt[0], _fmt[1])
del _bits, _code, _sign, _c, _end, _order, _name, _fmt


def checksum_mismatch(hash1: Any, hash2: Any) -> cs.ChecksumError:
    """Construct's own checksum error (both paths raise the same)."""
    def show(h: Any) -> Any:
        return h if not isinstance(h, (bytes, bytearray)) else h.hex().encode()
    return cs.ChecksumError(f"wrong checksum, read {show(hash1)!r}, computed {show(hash2)!r}")


class Checksum(cs.Checksum):
    """Construct's ``Checksum`` that compiles: ``hashfunc`` and ``bytesfunc`` are
    :class:`Code` (``hashfunc=None``: ``bytesfunc`` computes the checksum itself, for
    seeded or parametrised algorithms)."""

    def _hash(self, context: cs.Container) -> Any:
        data = self.bytesfunc(context)
        return data if self.hashfunc is None else self.hashfunc(data)

    def _parse(self, stream, context, path):
        hash1 = self.checksumfield._parsereport(stream, context, path)
        hash2 = self._hash(context)
        if hash1 != hash2:
            exc = checksum_mismatch(hash1, hash2)
            exc.path = path
            raise exc
        return hash1

    def _build(self, obj, stream, context, path):
        hash2 = self._hash(context)
        self.checksumfield._build(hash2, stream, context, path)
        return hash2

    def _emitparse(self, code):
        fname = f"parse_checksum_{code.allocateId()}"
        _bw(code)
        hash2 = (f"{self.bytesfunc!r}" if self.hashfunc is None
                 else f"{self.hashfunc!r}({self.bytesfunc!r})")
        code.append(f"""
            def {fname}(io, this):
                hash1 = {self.checksumfield._compileparse(code)}
                hash2 = {hash2}
                if hash1 != hash2:
                    raise _bw.checksum_mismatch(hash1, hash2)
                return hash1
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        fname = f"build_checksum_{code.allocateId()}"
        _bw(code)
        hash2 = (f"{self.bytesfunc!r}" if self.hashfunc is None
                 else f"{self.hashfunc!r}({self.bytesfunc!r})")
        code.append(f"""
            def {fname}(obj, io, this):
                obj = {hash2}
                {self.checksumfield._compilebuild(code)}
                return obj
        """)
        return f"{fname}(obj, io, this)"



def identity(value: Any) -> Any:
    """The hash function of a checksum whose bytes function computes it whole."""
    return value


class BitFlags(cs.Subconstruct):
    """Named bits and bit ranges of an integer (a ``flags:`` type), numbered from the
    least significant bit; bits no field names must be zero. Parses to the Container the
    equivalent ``BitStruct`` gives (``Flag`` -> bool, ranges -> int), but compiles: one
    integer read and shifts instead of a bit stream parsed interpreted."""

    def __init__(self, subcon, fields, model: Any = None) -> None:
        super().__init__(subcon)
        self.fields = tuple(fields)  # (name, lo, width, is_flag)
        # the flags' model class, built compiled instead of the Container when nothing
        # reads the Container (the generated module sets ``model._bw_opaque``)
        self.model = model
        used = 0
        for _, lo, width, _ in self.fields:
            used |= ((1 << width) - 1) << lo
        self.reserved = ((1 << (8 * subcon.sizeof())) - 1) & ~used

    def _parse(self, stream, context, path):
        value = self.subcon._parsereport(stream, context, path)
        if value & self.reserved:
            raise cs.ConstError(f"parsing expected 0 but parsed {value & self.reserved} "
                                "in the reserved bits", path=path)
        return cs.Container({name: bool(value >> lo & 1) if flag else
                             value >> lo & ((1 << width) - 1)
                             for name, lo, width, flag in self.fields})

    def _build(self, obj, stream, context, path):
        value = 0
        for name, lo, width, flag in self.fields:
            x = obj[name]
            if flag:
                x = 1 if x else 0
            elif not isinstance(x, int) or not 0 <= x < 1 << width:
                raise cs.IntegerError(f"{name}: {x!r} does not fit in {width} bits",
                                      path=path)
            value |= x << lo
        self.subcon._build(value, stream, context, path)
        return cs.Container(obj)  # later expressions read it by attribute, as parsed

    def split_source(self, v: str) -> tuple[str, str]:
        """(check, value): source refusing reserved bits of the integer ``v``, and source
        of the parsed Container (or model, see ``model``)."""
        values = [(name, f"bool({v} >> {lo} & 1)" if flag else
                   f"{v} >> {lo} & {(1 << width) - 1}")
                  for name, lo, width, flag in self.fields]
        check = (f"if {v} & {self.reserved}:\n"
                 f"    raise ConstError('parsing expected 0 but parsed %d in the reserved "
                 f"bits' % ({v} & {self.reserved},))")
        pending = Struct._bw_pending
        if self.model is not None and getattr(self.model, "_bw_opaque", False) \
                and pending is not None:
            name = _bind(pending, "bwflags", self.model)
            return check, f"{name}({', '.join(f'{k}={x}' for k, x in values)})"
        return check, f"Container({{{', '.join(f'{k!r}: {x}' for k, x in values)}}})"

    def _emitparse(self, code):
        fname = f"parse_bitflags_{code.allocateId()}"
        check, value = self.split_source("v")
        check = check.replace("\n", "\n                ")
        code.append(f"""
            def {fname}(io, this):
                v = {self.subcon._compileparse(code)}
                {check}
                return {value}
        """)
        return f"{fname}(io, this)"


# -- compiled records: one context per record, fixed runs read with one unpack ---------

    def _emitbuild(self, code):
        fname = f"build_bitflags_{code.allocateId()}"
        lines = []
        for name, lo, width, flag in self.fields:
            lines.append(f"x = obj[{name!r}]")
            if flag:
                lines.append("x = 1 if x else 0")
            else:
                lines += [f"if not isinstance(x, int) or not 0 <= x < {1 << width}:",
                          f"    raise IntegerError('%s: %r does not fit in %d bits' % "
                          f"({name!r}, x, {width}))"]
            lines.append(f"value |= x << {lo}")
        body = "".join("\n                " + x for x in lines)
        code.append(f"""
            def {fname}(obj, io, this):
                given = obj
                value = 0{body}
                obj = value
                {self.subcon._compilebuild(code)}
                return Container(given)
        """)
        return f"{fname}(obj, io, this)"


def _inner(sc: cs.Construct) -> cs.Construct:
    while isinstance(sc, (cs.Renamed, cs.Rebuild)):
        sc = sc.subcon
    return sc


def _fixed_part(sc: cs.Construct) -> tuple[str, str, int] | None:
    """(kind, struct code, size) of a member a run can read in its one unpack, or None.

    kind: ``tell`` (no bytes), ``int`` (a FormatField), ``bytes`` (fixed-length bytes),
    ``bigint`` (a 16-byte BytesInteger), ``const``, ``enum`` (a closed enum's integer),
    or the run's last member: ``pascal`` / ``prefixed`` / ``parray`` (their length)."""
    sc = _inner(sc)
    if isinstance(sc, type(cs.Tell)):
        return ("tell", "", 0)
    if isinstance(sc, cs.FormatField):
        return ("int", sc.fmtstr, sc.length)
    if isinstance(sc, cs.Bytes) and isinstance(sc.length, int):
        return ("bytes", f"={sc.length}s", sc.length)
    if isinstance(sc, cs.BytesInteger) and isinstance(sc.length, int) \
            and isinstance(sc.swapped, bool) and isinstance(sc.signed, bool):
        return ("bigint", f"={sc.length}s", sc.length)
    if isinstance(sc, cs.Const):
        sub = _fixed_part(sc.subcon)
        if sub is not None and sub[0] in ("int", "bytes"):
            return ("const", sub[1], sub[2])
    if isinstance(sc, ClosedEnum) and isinstance(_inner(sc.subcon), cs.FormatField):
        f = _inner(sc.subcon)
        return ("enum", f.fmtstr, f.length)
    if isinstance(sc, BitFlags) and isinstance(_inner(sc.subcon), cs.FormatField):
        f = _inner(sc.subcon)
        return ("flags", f.fmtstr, f.length)
    prefix = getattr(sc, "_bw_prefix", None) or getattr(sc, "_bw_count", None)
    if prefix is None and isinstance(sc, Prefixed) and not sc.includelength \
            and isinstance(sc.subcon, type(cs.GreedyBytes)):
        prefix = sc.lengthfield
    if prefix is not None and isinstance(_inner(prefix), cs.FormatField):
        f = _inner(prefix)
        kind = "pascal" if hasattr(sc, "_bw_prefix") else \
            "parray" if hasattr(sc, "_bw_count") else "prefixed"
        return (kind, f.fmtstr, f.length)
    return None


def _joined(codes: list[str]) -> str | None:
    """One struct format for the members' codes, or None if their byte orders differ."""
    order = None
    out = []
    for c in codes:
        o, body = c[0], c[1:]
        if o in "<>" and not (body in ("B", "b", "?", "x") or body.endswith("s")):
            if order is not None and order != o:
                return None
            order = o
        out.append(body)
    return (order or "<") + "".join(out)


def leb128_rest(io, first: bytes, kind: str) -> int:
    """A varint whose first byte (``first``, maybe empty) is already read: the compiled
    :class:`Leb128`'s rules and errors, from its start."""
    if kind == "uleb128" and first:  # two bytes, the next most common case
        second = io.read(1)
        if second and second[0] < 0x80:
            return (first[0] & 0x7F) | second[0] << 7
        first += second
    at = io.tell() - len(first)
    data = first + io.read(11 - len(first))
    try:
        value, n = varint.DECODERS[kind](data, 0, path="")
    except DecodeError as exc:
        exc.offset = at
        raise
    io.seek(at + n)
    return value


class Switch(cs.Switch):
    """Construct's ``Switch``; compiled, a case that is one parser call is stored as that
    parser (Construct wraps every case in a lambda: one more call per item)."""

    def _emitparse(self, code):
        fname = f"switch_cases_{code.allocateId()}"
        code.append(f"{fname} = {{}}")
        for key, sc in self.cases.items():
            expr = sc._compileparse(code)
            m = re.fullmatch(r"(\w+)\(io, this\)", expr)
            code.append(f"{fname}[{key!r}] = " + (m.group(1) if m else
                                                  f"lambda io,this: {expr}"))
        default = self.default._compileparse(code)
        m = re.fullmatch(r"(\w+)\(io, this\)", default)
        dname = f"switch_defaultcase_{code.allocateId()}"
        code.append(f"{dname} = " + (m.group(1) if m else f"lambda io,this: {default}"))
        return f"{fname}.get({self.keyfunc!r}, {dname})(io, this)"


_PARAMS_ONLY = re.compile(r"this\['_params'\]")


def _reads_only_params(sc: Any) -> bool:
    """``sc`` parses in its caller's context without reading or writing the caller's
    fields: its expressions read only ``this['_params']`` (records below make their
    own context). Unknown classes are assumed to need the context."""
    if isinstance(sc, Code):
        return "this" not in _PARAMS_ONLY.sub("", sc.source)
    if isinstance(sc, (int, bytes, str, type(None))):
        return True
    if isinstance(sc, Struct):
        return True
    if isinstance(sc, (cs.Renamed, ClosedEnum, BitFlags, cs.Const, Prefixed, cs.StringEncoded)):
        return _reads_only_params(sc.subcon)
    if isinstance(sc, (cs.FormatField, Leb128, type(cs.GreedyBytes), type(cs.Pass))) \
            or sc is cs.Error:
        return True
    if isinstance(sc, (cs.Bytes, cs.BytesInteger)):
        return _reads_only_params(sc.length)
    if isinstance(sc, WithParams):
        return all(_reads_only_params(v) for v in sc.args.values())
    if isinstance(sc, cs.Switch):
        return _reads_only_params(sc.keyfunc) and _reads_only_params(sc.default) and \
            all(_reads_only_params(c) for c in sc.cases.values())
    if isinstance(sc, cs.IfThenElse):
        return all(_reads_only_params(x) for x in (sc.condfunc, sc.thensubcon,
                                                   sc.elsesubcon))
    if isinstance(sc, cs.Array):
        return _reads_only_params(sc.count) and _reads_only_params(sc.subcon)
    return False


# What a record's own context holds besides its fields, as a local expression.
_CTX_LOCALS = {"_io": "io", "_parsing": "True", "_building": "False", "_sizing": "False"}


def _localize(src: str, local: dict[str, str]) -> tuple[str, bool] | None:
    """``src`` (compiled source) with reads ``this['k']`` of the record's fields replaced
    by their locals; (source, needs the record's context), or None when ``src`` binds
    its own ``this`` (a lambda's parameter: its reads are not the record's)."""
    import ast
    import io
    import tokenize

    lead = src[:len(src) - len(src.lstrip())]
    body = src.lstrip()
    if "this" not in body:
        return src, False
    try:
        toks = [t for t in tokenize.generate_tokens(io.StringIO(body).readline)
                if t.type not in (tokenize.NL, tokenize.COMMENT)]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    if "\n" in body.rstrip("\n"):
        return None  # one logical line only (columns index the text below)
    edits: list[tuple[int, int, str]] = []
    needs = False
    for i, t in enumerate(toks):
        if t.type == tokenize.NAME and t.string == "lambda":
            j = i + 1
            while j < len(toks) and toks[j].string != ":":
                if toks[j].string == "this":
                    return None
                j += 1
        if t.type != tokenize.NAME or t.string != "this":
            continue
        key = None
        if i + 3 < len(toks) and toks[i + 1].string == "[" and \
                toks[i + 2].type == tokenize.STRING and toks[i + 3].string == "]":
            try:
                key = ast.literal_eval(toks[i + 2].string)
            except (ValueError, SyntaxError):
                key = None
        if key in local or key in _CTX_LOCALS:
            edits.append((t.start[1], toks[i + 3].end[1],
                          local.get(key) or _CTX_LOCALS[key]))
        elif key == "_params":
            continue  # the caller's context holds the same parameters
        else:
            needs = True
            edits.append((t.start[1], t.end[1], "_ctx"))
    for a, b, new in sorted(edits, reverse=True):
        body = body[:a] + new + body[b:]
    return lead + body, needs


def _rename(src: str, old: str, new: str) -> str | None:
    """``src`` with every name ``old`` (not inside strings) spelled ``new``; None if
    ``src`` already uses ``new``."""
    import io
    import tokenize

    try:
        toks = list(tokenize.generate_tokens(io.StringIO(src).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    if "\n" in src.rstrip("\n") or any(t.string == new for t in toks):
        return None
    for t in reversed(toks):
        if t.type == tokenize.NAME and t.string == old:
            src = src[:t.start[1]] + new + src[t.end[1]:]
    return src


def _retoken(src: str, fn) -> str | None:
    """``src`` (one line) with each name ``n`` (not inside strings) for which ``fn(n)``
    is a string spelled so; None if ``src`` cannot be tokenized."""
    import io
    import tokenize

    lead = src[:len(src) - len(src.lstrip())]
    body = src.lstrip()
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(body).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    if "\n" in body.rstrip("\n"):
        return None
    for t in reversed(toks):
        if t.type == tokenize.NAME:
            new = fn(t.string)
            if new is not None:
                body = body[:t.start[1]] + new + body[t.end[1]:]
    return lead + body


_PARAM_READ = re.compile(r"this\['_params'\]\['(\w+)'\]")


def _params_read(lines: list[str]) -> frozenset | None:
    """The parameters a record's compiled statements read by name, or None if they hand
    their context (or its parameters) on, or read them otherwise."""
    text = "\n".join(lines)
    keys = frozenset(_PARAM_READ.findall(text))
    return None if re.search(r"\bthis\b", _PARAM_READ.sub("", text)) else keys


def _params_for(callee: Any, args: dict) -> str:
    """Source of the parameters a call of ``callee`` with ``args`` replaced gets: a copy
    of the caller's, or (when the callee reads only those) a fresh dict."""
    read = getattr(callee, "_bw_params_read", None)
    return "{}" if read is not None and read <= set(args) else "dict(this['_params'])"


# The record's caller's context in statements (``this`` once emitted): calls that read
# only parameters get it as it is, not a context of the record's fields.
_CALLER = "_bw_caller_"


def _switch_lines(sw: Any, code: Any, io_name: str, target: str) -> list[str] | None:
    """A switch in the statements of its record, when its cases are records: those
    without parameters of their own called with the caller's context (which holds the
    same parameters), those with the same parameter replacements (and the default) with
    the replacements set once -- no helper per case, no context built for them."""
    if not isinstance(sw, cs.Switch):
        return None
    args = None
    plain, withp = [], []
    for key, case in sw.cases.items():
        if case is cs.Pass:
            plain.append((key, "lambda io, this: None"))
        elif isinstance(case, Struct):
            plain.append((key, case))
        elif isinstance(case, WithParams) and isinstance(case.subcon, Struct):
            src = {k: repr(v) for k, v in case.args.items()}
            if args is not None and src != args:
                return None
            args = src
            withp.append((key, case.subcon))
        else:
            return None
    dflt = sw.default
    if isinstance(dflt, WithParams) and isinstance(dflt.subcon, Struct):
        src = {k: repr(v) for k, v in dflt.args.items()}
        if args is not None and src != args:
            return None
        args = src
    elif not _reads_only_params(dflt):
        return None
    if args is None and not plain:
        return None

    def parser(case: Any) -> str | None:
        if isinstance(case, str):
            return case
        m = re.fullmatch(r"(\w+)\(io, this\)", case._compileparse(code))
        return m.group(1) if m else None

    tid = code.allocateId()
    tables = {}
    for name, rows in (("plain", plain), ("params", withp)):
        tname = f"switch_{name}_{tid}"
        code.append(f"{tname} = {{}}")
        for key, case in rows:
            fn = parser(case)
            if fn is None:
                return None
            code.append(f"{tname}[{key!r}] = {fn}")
        tables[name] = tname
    callees = [c for _, c in withp]
    if isinstance(dflt, WithParams):
        fn = parser(dflt.subcon)
        if fn is None:
            return None
        callees.append(dflt.subcon)
        dcall = f"{fn}({io_name}, {{'_params': _q}})"
    else:
        dname = f"switch_default_{tid}"
        code.append(f"{dname} = lambda io, this: {dflt._compileparse(code)}")
        dcall = f"{dname}({io_name}, {_CALLER})"
    fresh = all(_params_for(c, args or {}) == "{}" for c in callees)
    sets = (["_q = {}" if fresh else "_q = dict(this['_params'])"]
            + [f"_q[{k!r}] = {v}" for k, v in (args or {}).items()])
    out = [f"_k = {sw.keyfunc!r}",
           f"_c = {tables['plain']}.get(_k)",
           "if _c is not None:",
           f"    {target}_c({io_name}, {_CALLER})",
           "else:",
           f"    _c = {tables['params']}.get(_k)"]
    out += ["    " + x for x in sets]
    out += ["    if _c is not None:",
            f"        {target}_c({io_name}, {{'_params': _q}})" if withp else
            f"        {target}None",
            "    else:",
            f"        {target}{dcall}"]
    return out


def _pure(sc: Any) -> bool:
    """``sc``'s compiled parse may read its context but never writes into it (records
    below make their own), so a dict of the record's fields so far can stand in for it.
    Unknown classes are assumed to write."""
    if isinstance(sc, (Code, int, bytes, str, type(None))):
        return True
    if isinstance(sc, Struct):
        return True
    if isinstance(sc, (cs.Renamed, ClosedEnum, BitFlags, cs.Const, Prefixed,
                       cs.StringEncoded, Converted, cs.Rebuild)):
        return _pure(sc.subcon)
    if isinstance(sc, cs.FixedSized):
        return _pure(sc.length) and _pure(sc.subcon)
    if isinstance(sc, (cs.FormatField, Leb128, TerminatedBytes, type(cs.GreedyBytes),
                       type(cs.Pass))) or sc is cs.Error:
        return True
    if isinstance(sc, (cs.Bytes, cs.BytesInteger)):
        return _pure(sc.length)
    if isinstance(sc, NumpyArray):
        return _pure(sc.count)
    if isinstance(sc, WithParams):
        return all(_pure(v) for v in sc.args.values()) and _pure(sc.subcon)
    if isinstance(sc, cs.Switch):
        return _pure(sc.keyfunc) and _pure(sc.default) and \
            all(_pure(c) for c in sc.cases.values())
    if isinstance(sc, cs.IfThenElse):
        return all(_pure(x) for x in (sc.condfunc, sc.thensubcon, sc.elsesubcon))
    if isinstance(sc, cs.Array):
        return _pure(sc.count) and _pure(sc.subcon)
    if isinstance(sc, Checksum):
        return _pure(sc.checksumfield) and _pure(sc.hashfunc) and _pure(sc.bytesfunc)
    return False


def short_read(n: int, data: bytes) -> cs.StreamError:
    """``read_exact``'s error, for reads the compiled records inline."""
    if n < 0:
        return cs.StreamError(f"length must be non-negative, found {n!r}")
    return cs.StreamError(f"stream read less than specified amount, expected {n}, "
                          f"found {len(data)}")


class Compiled(cs.Compiled):
    """What ``compile()`` returns for a record: Construct's ``Compiled`` whose
    ``parse_stream`` calls the compiled parser directly (the same root context, without
    the per-call attribute hooks of the generic entry)."""

    def parse_stream(self, stream, **contextkw):
        # a fresh plain dict: compiled code reads contexts by item only
        context = contextkw
        context["_parsing"] = True
        context["_building"] = False
        context["_sizing"] = False
        context["_params"] = context
        try:
            return self.parsefunc(stream, context)
        except cs.CancelParsing:
            return None


_COMPILING = threading.RLock()  # Struct.compile's state is per compile


def _bind(pending: dict, prefix: str, obj: Any) -> str:
    """The name ``obj`` has in the compiled module being emitted (bound after exec)."""
    for name, other in pending.items():
        if other is obj:
            return name
    stem = re.sub(r"\W", "_", getattr(obj, "__name__", ""))
    name = f"{prefix}_{stem}_{len(pending)}"
    pending[name] = obj
    return name


class VersionCheck(cs.Check):
    """A record's version range: outside it the bytes are unsupported, not malformed
    (the fast path's dispatcher raises the same)."""

    def __init__(self, func, record: str, field: str, accepted: str,
                 message: str | None = None) -> None:
        super().__init__(func)
        self.record, self._bw_field, self.accepted = record, field, accepted
        self.message = message or f"unsupported {record} version"
        self.dispatch = message is None  # the record's range, not a field's own rule

    def error(self) -> UnsupportedError:
        return UnsupportedError(self.message, path=self._bw_field, expected=self.accepted)

    def _parse(self, stream, context, path):
        if not cs.evaluate(self.func, context):
            raise self.error()

    def _emitparse(self, code):
        return f"(None if {self.func!r} else {_check_raise(self, code, expr=True)})"


class FieldCheck(cs.Check):
    """A check that belongs to ``field`` (reported there, wherever it sits)."""

    def __init__(self, func, field: str) -> None:
        super().__init__(func)
        self._bw_field = field


class RuleCheck(FieldCheck):
    """A field's ``assert`` rule: a failure is the fast path's error (the rule's message,
    the rule as expected, the field's value as found), not Construct's bare CheckError.
    Compiled parsers raise CheckError; their failures are re-read interpreted."""

    def __init__(self, func, field: str, rule: str, message: str) -> None:
        super().__init__(func, field)
        self.rule, self.message = rule, message

    def _parse(self, stream, context, path):
        if not cs.evaluate(self.func, context):
            raise ConstraintError(self.message, path=self._bw_field, expected=self.rule,
                                  found=context.get(self._bw_field))

    def _build(self, obj, stream, context, path):
        if not cs.evaluate(self.func, context):
            raise EncodeError(self.message, path=self._bw_field)


def _check_raise(sc: cs.Check, code, expr: bool = False) -> str:
    """Compiled source raising a failed check's error (a version check's own)."""
    if isinstance(sc, VersionCheck):
        _bw(code)
        return f"{'_bw.throw(' if expr else 'raise '}{_link(code, sc)}.error(){')' if expr else ''}"
    return "raise CheckError('check failed during parsing')"


def throw(exc: BaseException) -> Any:
    raise exc


class Struct(cs.Struct):
    """Construct's ``Struct``; compiled, it is tighter than Construct's own emission.

    Parsed it is the same Struct. Compiled: one context per record that is also the
    result (no parent link: generated expressions read only ``_params``, ``_parsing``,
    ``_io`` and this record's fields), and each run of fixed-size members -- integers,
    fixed bytes, constants, closed enums, Tell markers, and the length prefix of a string,
    byte string or array that ends the run -- read with one checked ``unpack``. Checks
    keep their place (a run never crosses a ``Check``), constants and enums raise the
    same errors as interpreted, at the member's offset.

    A record whose generated module gives it a model builder (``_bw_model``: the
    converter's conversions as a function of the field values, set only where they cannot
    fail) returns the model object itself where no compiled code reads its value as a
    Container -- as the compiled root, as an opaque record, or as a nested record whose
    members its parent reads as the locals they are -- so ``_c2m_`` has nothing left to do.
    """

    # While a compile runs: the record compiled (its value is the caller's alone) and the
    # model builders its source names (bound into the compiled module afterwards).
    _bw_root: Any = None
    _bw_pending: dict | None = None

    def _parse(self, stream, context, path):
        # Construct's own loop, noting the member (and its offset) a failure leaves
        # through; an unnamed check belongs to the named member before it
        obj = cs.Container()
        obj._io = stream
        context = cs.Container(_=context, _params=context._params, _root=None,
                               _parsing=context._parsing, _building=context._building,
                               _sizing=context._sizing, _subcons=self._subcons, _io=stream,
                               _index=context.get("_index", None))
        context._root = context._.get("_root", context)
        last, last_at = None, 0
        fast = getattr(self, "_bw_fast_runs", None)  # set by the generated module
        runs = self.__dict__.get("_bw_runs")
        if runs is None:
            runs = self._bw_runs = self._runs() if fast is None else {
                i: fast[sc.name] for i, sc in enumerate(self.subcons) if sc.name in fast}
        version = getattr(self, "_bw_version_at", None)  # read first by the fast path
        if version is not None:
            self._check_version(version, stream, context)
        for i, sc in enumerate(self.subcons):
            start = stream.tell()
            name = sc.name if sc.name and not sc.name.startswith("_") else None
            if i in runs:  # a fixed run is read whole, as on the fast path
                self._check_run(runs[i], stream, start)
            try:
                subobj = sc._parsereport(stream, context, path)
            except cs.StopFieldError:
                break
            except Exception as exc:
                if isinstance(sc, VersionCheck) and sc.dispatch:
                    # the fast path's dispatcher: at the record's start
                    name, start = sc._bw_field, context.get("_o_start", start)
                elif isinstance(sc, VersionCheck):  # an ``unsupported`` assert of a field
                    name = sc._bw_field
                    start = last_at if name == last else start
                elif isinstance(sc, FieldCheck) and last is not None:
                    # a rule reported on another name (a bit field): at the member it follows
                    name, start = sc._bw_field, last_at
                elif name is None and sc.name is None and last is not None:
                    name, start = last, last_at
                note(exc, start, name)
                raise
            if sc.name:
                obj[sc.name] = subobj
                context[sc.name] = subobj
            if name is not None:
                last, last_at = name, start
        return obj

    def _build(self, obj, stream, context, path):
        # Construct's own loop, noting the member a failure leaves through (an unnamed
        # check belongs to the named member before it), as ``_parse`` does
        if obj is None:
            obj = cs.Container()
        context = cs.Container(_=context, _params=context._params, _root=None,
                               _parsing=context._parsing, _building=context._building,
                               _sizing=context._sizing, _subcons=self._subcons, _io=stream,
                               _index=context.get("_index", None))
        context._root = context._.get("_root", context)
        context.update(obj)
        last = None
        for sc in self.subcons:
            name = sc.name if sc.name and not sc.name.startswith("_") else None
            try:
                subobj = obj.get(sc.name, None) if sc.flagbuildnone else obj[sc.name]
                if sc.name:
                    context[sc.name] = subobj
                buildret = sc._build(subobj, stream, context, path)
                if sc.name:
                    context[sc.name] = buildret
            except cs.StopFieldError:
                break
            except Exception as exc:
                field = getattr(sc, "_bw_field", None)
                note(exc, 0, field or (name if name is not None or sc.name else last))
                raise
            if name is not None:
                last = name
        return context

    def _runs(self) -> dict[int, tuple[int, list]]:
        """The fixed runs the compiled parse reads in one unpack: first member -> (size,
        [(field path, offset, size)]); a length prefix that ends a run is ``name.length``."""
        out: dict[int, tuple[int, list]] = {}
        subs = list(self.subcons)
        i = 0
        while i < len(subs):
            first, parts, codes, off = i, [], [], 0
            while i < len(subs):
                part = _fixed_part(subs[i])
                if part is None or (part[2] and _joined(codes + [part[1]]) is None):
                    break
                if part[2]:
                    codes.append(part[1])
                    name = subs[i].name or ""
                    if part[0] in ("pascal", "prefixed", "parray"):
                        name += ".length"
                    parts.append((name, off, part[2]))
                    off += part[2]
                i += 1
                if part[0] in ("pascal", "prefixed", "parray"):
                    break
            if parts:
                out[first] = (off, parts)
            if i == first:
                i += 1
        return out

    def _check_version(self, version: tuple, stream, context) -> None:
        """The version field, read and checked before the rest as the fast path's
        dispatcher does: (field, offset, size, struct code, known versions, range,
        record)."""
        name, off, size, code, known, accepted, record = version
        at = stream.tell()
        if _stream_end(stream) - at < off + size:
            exc = TruncatedError("version truncated", offset=at)
        else:
            stream.seek(at + off)
            ver = struct.unpack(code, stream.read(size))[0]
            stream.seek(at)
            if ver in known:
                return
            exc = UnsupportedError(f"unsupported {record} version", offset=at,
                                   expected=accepted, found=ver)
        note(exc, at, name)
        raise exc

    @staticmethod
    def _check_run(run: tuple[int, list], stream, start: int) -> None:
        size, parts = run
        have = _stream_end(stream) - start
        if have >= size:
            return
        for name, off, n in parts:
            if off + n > have:
                exc = TruncatedError("field truncated", offset=start + off, expected=n,
                                     found=max(have - off, 0))
                note(exc, start + off, name)
                raise exc

    def compile(self, filename=None):
        """Construct's ``compile()``; records with a model builder (``_bw_model``, set by
        the generated module) build the model objects in the compiled parse."""
        with _COMPILING:
            Struct._bw_root, Struct._bw_pending = self, {}
            try:
                compiled = super().compile(filename)
            finally:
                pending = Struct._bw_pending
                Struct._bw_root, Struct._bw_pending = None, None
        compiled.module.__dict__.update(pending)
        return compiled

    def _model_expr(self, code, local: dict[str, str], root: bool) -> str | None:
        """Source building this record's model from its field locals (and parameters),
        when it has a builder and nothing reads its value as a Container: as the root of
        the compile (or a member its parent keeps to itself, see :meth:`_flat_body`), or
        as an opaque record (no expression reads its members)."""
        model = getattr(self, "_bw_model", None)
        pending = Struct._bw_pending
        if model is None or pending is None:
            return None
        fn, names, params, opaque = model
        if not (root or opaque) or any(n not in local for n in names):
            return None
        name = _bind(pending, "bwmodel", fn)
        args = [local[n] for n in names] + [f"this['_params'][{p!r}]" for p in params]
        return f"{name}({', '.join(args)})"

    def _emitparse(self, code):
        fid = code.allocateId()
        fname = f"parse_record_{fid}"
        _read_exact(code)
        _bw(code)
        code.append("from bytewright.runtime.codec import Compiled")  # see Compiled
        root = Struct._bw_root is self
        if root:
            Struct._bw_root = None
        subs = list(self.subcons)
        if self._context_free(subs):
            flat = self._emit_flat(code, fid, subs, root)
            if flat is not None:
                return flat
        body: list[str] = [
            "this = Container(_params=this['_params'], _parsing=True, _building=False, "
            "_sizing=False, _io=io)"]
        i = 0
        while i < len(subs):
            run = []
            while i < len(subs):
                part = _fixed_part(subs[i])
                if part is None:
                    break
                trial = [p for _, p in run] + [part]
                if _joined([p[1] for p in trial if p[2]]) is None:
                    break
                run.append((subs[i], part))
                i += 1
                if part[0] in ("pascal", "prefixed", "parray"):
                    break
            if any(p[2] for _, p in run):
                body += self._emit_run(code, fid, run)
            elif run:  # Tell markers alone
                body += [f"this[{sc.name!r}] = io.tell()" for sc, _ in run if sc.name]
            if i < len(subs) and (not run or _fixed_part(subs[i]) is None):
                sc = subs[i]
                inline = self._inline(sc, code)
                if isinstance(sc, cs.Check):  # inline: Check's own error, no call
                    body += [f"if not ({sc.func!r}):", "    " + _check_raise(sc, code)]
                elif inline is not None:
                    body += [x.replace(_CALLER, "this") for x in inline]
                else:
                    expr = sc._compileparse(code)
                    body.append(f"this[{sc.name!r}] = {expr}" if sc.name else expr)
                i += 1
        body.append("return this")
        code.append(f"def {fname}(io, this):\n" + "\n".join("    " + b for b in body))
        return f"{fname}(io, this)"

    @staticmethod
    def _inline(sc: cs.Construct, code: Any = None) -> list[str] | None:
        """Statements parsing ``sc`` in the record's function, for the members common
        enough to be worth it (their helpers' checks and errors, without the call).
        Without ``code``, only whether it would (an empty list for members whose
        statements need ``code``)."""
        inner = sc.subcon if isinstance(sc, cs.Renamed) else sc
        target = f"this[{sc.name!r}] = " if sc.name else ""
        if isinstance(inner, WithParams) and isinstance(inner.subcon, Struct):
            # the callee's parameters set here: no helper call, no context for it
            if code is None:
                return []
            m = re.fullmatch(r"(\w+)\(io, this\)", inner.subcon._compileparse(code))
            if m is None:
                return None
            return ([f"_q = {_params_for(inner.subcon, inner.args)}"]
                    + [f"_q[{k!r}] = {v!r}" for k, v in inner.args.items()]
                    + [f"{target}{m.group(1)}(io, {{'_params': _q}})"])
        if isinstance(inner, cs.Switch) and code is not None:
            return _switch_lines(inner, code, "io", target)
        if isinstance(inner, FixedSized):
            # the section read once, parsed from its own stream, which it must fill
            if code is None:
                return []
            sub = _switch_lines(inner.subcon, code, "_fs", target)
            if sub is None:
                sub = _rename(inner.subcon._compileparse(code), "io", "_fs")
                if sub is None:
                    return None
                sub = [target + sub]
            return [f"_n = {inner.length!r}",
                    "_b = io.read(_n)",
                    "if len(_b) != _n:",
                    "    raise _bw.short_read(_n, _b)",
                    "_fs = BytesIO(_b)",
                    *sub,
                    "if _fs.tell() != _n:",
                    "    raise StreamError('section size mismatch: %d of %d bytes used' "
                    "% (_fs.tell(), _n))"]
        if isinstance(inner, Array):
            many = _items_source(inner.subcon, f"({inner.count!r})", code,
                                 getattr(inner, "_bw_packed", None))
            return None if many is None else [target + many]
        if isinstance(inner, cs.Bytes) and not isinstance(inner.length, int):
            return [f"_n = {inner.length!r}",
                    "_b = io.read(_n)",
                    "if len(_b) != _n:",
                    "    raise _bw.short_read(_n, _b)",
                    target + "_b"]
        if isinstance(inner, Leb128) and inner.kind == "uleb128":
            # one byte below 0x80 is the whole varint; else Leb128's own decoding
            return ["_b = io.read(1)",
                    "if _b and _b[0] < 0x80:",
                    f"    {target}_b[0]",
                    "else:",
                    f"    {target}_bw.leb128_rest(io, _b, 'uleb128')"]
        if isinstance(inner, ZeroPadding):
            out = [f"_n = {inner.length!r}",
                   "_p = io.tell()",
                   "_b = io.read(_n)",
                   "if len(_b) != _n:",
                   "    raise _bw.short_read(_n, _b)"]
            if not inner.arbitrary:
                out += ["if _b.count(0) != _n:",
                        "    raise _bw.ConstraintError('padding must be zero', offset=_p, "
                        "path='')"]
            return out + ([target + "None"] if target else [])
        return None

    @classmethod
    def _context_free(cls, subs: list) -> bool:
        """The record needs no context of its own: its fields become locals of its
        parser (expressions inlined in it read them), members parsed by a call read only
        ``_params`` (they get the caller's context, which holds the same) or write nothing
        into the context (they get a dict of the fields so far), and its result is built
        once at the end."""
        for sc in subs:
            part = _fixed_part(sc)
            if part is None:
                if isinstance(sc, cs.Check) or cls._inline(sc):  # [] needs the checks below
                    continue
                if not (_reads_only_params(sc) or _pure(sc)):
                    return False
                continue
            if part[0] == "parray":
                item = _inner(sc)._bw_item
                if not isinstance(item, (Struct, cs.FormatField)):
                    return False
        return True

    def _emit_flat(self, code, fid: int, subs: list, root: bool = False) -> str | None:
        """The record's parser with its fields in locals (see :meth:`_context_free`), or
        None if some member's source cannot be rewritten so."""
        got = self._flat_body(code, fid, subs, 0, root)
        if got is None:
            return None
        body, fields, model, _ = got
        body.append(f"return {model}" if model else
                    f"return Container({{{', '.join(fields)}}})")
        self._bw_params_read = _params_read(body)
        fname = f"parse_record_{fid}"
        code.append(f"def {fname}(io, this):\n" + "\n".join("    " + b for b in body))
        return f"{fname}(io, this)"

    # nested records are flattened into their parent this deep at most (code size)
    _FLATTEN_DEPTH = 4
    _FLATTEN_LINES = 400

    def _flat_child(self, code, sc: cs.Construct, depth: int) -> tuple | None:
        """A member that is a nested record (maybe with parameters of its own), flattened:
        (statements preparing its context, its statements, its result), or None."""
        inner = sc.subcon if isinstance(sc, cs.Renamed) else sc
        args = None
        if isinstance(inner, WithParams):
            args, inner = inner.args, inner.subcon
        if not isinstance(inner, Struct) or depth >= self._FLATTEN_DEPTH:
            return None
        subs = list(inner.subcons)
        if not inner._context_free(subs):
            return None
        cid = code.allocateId()
        got = inner._flat_body(code, cid, subs, depth + 1)
        if got is None or len(got[0]) > self._FLATTEN_LINES:
            return None
        cbody, cfields, model, clocal = got
        result = [model] if model else [f"Container({{{', '.join(cfields)}}})"]
        # not opaque: still a model if its parent reads none of its members (see
        # _flat_body), which the parent knows once it is emitted
        late = None if model else inner._model_expr(code, clocal, True)
        keys = list(clocal)
        result += [late or "None"] + [clocal[k] for k in keys]
        ctx = "this"
        pre: list[str] = []
        if args is not None:  # its parameters: the caller's with these replaced
            ctx = f"_t{cid}"
            pre = (["_q = dict(this['_params'])"]
                   + [f"_q[{k!r}] = {v!r}" for k, v in args.items()]
                   + [f"{ctx} = {{'_params': _q}}"])

        def own(name: str) -> str | None:  # its locals renamed apart from the parent's
            if name == "this":
                return ctx
            return f"{name}_{cid}" if re.fullmatch(r"_f\d+", name) else None

        out = [_retoken(x, own) for x in cbody + result]
        if any(x is None for x in out):
            return None
        if args is not None:
            # parameters it reads by name become locals; the copied parameters are
            # needed only if something still reads its context
            names = {k: f"_a{cid}_{n}" for n, k in enumerate(args)}
            param = re.compile(re.escape(ctx) + r"\['_params'\]\[('\w+')\]")

            def sub(m: re.Match) -> str:
                return names.get(m.group(1)[1:-1], m.group(0))

            out = [param.sub(sub, x) for x in out]
            binds = [f"{names[k]} = {v!r}" for k, v in args.items()]
            if any(re.search(rf"\b{ctx}\b", x) for x in out):
                pre = binds + pre
            else:
                pre = binds + ["pass"]  # the last statement is not taken: see caller
        n = len(cbody)
        fieldmap = dict(zip(keys, out[n + 2:], strict=True))
        late = out[n + 1] if late else None
        return pre, out[:n], out[n], late, fieldmap

    def _flat_body(self, code, fid: int, subs: list, depth: int,
                   root: bool = False) -> tuple | None:
        """(statements, ``'name': local`` of each field, source of the model built from
        them or None, the field locals) of the record's parse with its fields in locals."""
        import ast

        body: list[str] = []
        fields: list[str] = []
        local: dict[str, str] = {}
        nested: list[tuple] = []  # (its local, result, model or None, its field locals)
        assign = re.compile(r"(\s*)this\[('(?:[^'\\]|\\.)*')\] = (.*)$", re.S)

        def take(lines: list[str], params_only: bool = False) -> bool:
            for line in lines:
                m = assign.match(line)
                if m:
                    indent, key, rhs = m.groups()
                    line = indent + rhs
                # a call reading only parameters gets the caller's context as it is
                got = (line, False) if params_only else _localize(line, local)
                if got is None:
                    return False
                line, needs = got
                line = line.replace(_CALLER, "this")
                if needs:  # a call that reads fields: hand it them in a context
                    items = "".join(f", {k!r}: {v}" for k, v in local.items())
                    lead = line[:len(line) - len(line.lstrip())]
                    # a plain dict: compiled code reads contexts by item only
                    body.append(f"{lead}_ctx = {{'_params': this['_params'], "
                                f"'_parsing': True, '_building': False, '_sizing': False, "
                                f"'_io': io{items}}}")
                if m:
                    name = ast.literal_eval(key)
                    var = local.get(name)
                    if var is None:
                        var = local[name] = f"_f{len(fields)}"
                        fields.append(f"{key}: {var}")
                    rhs = line.lstrip()
                    line = line[:len(line) - len(rhs)] + f"{var} = {rhs}"
                body.append(line)
            return True

        i = 0
        while i < len(subs):
            if _fixed_part(subs[i]) is None:
                sc = subs[i]
                if isinstance(sc, cs.Check):
                    lines = [f"if not ({sc.func!r}):", "    " + _check_raise(sc, code)]
                else:
                    child = self._flat_child(code, sc, depth)
                    if child is not None:
                        pre, cbody, result, late, fieldmap = child
                        # the preparation reads this record's fields; the child's own
                        # statements read only its context and locals
                        if not take(pre[:-1]):
                            return None
                        body.extend([x for x in pre[-1:] if x != "pass"] + cbody)
                        if not take([f"this[{sc.name!r}] = {result}" if sc.name else result],
                                    params_only=True):
                            return None
                        if sc.name:
                            nested.append((local[sc.name], result, late, fieldmap))
                        i += 1
                        continue
                    lines = self._inline(sc, code)
                    if lines is None:
                        expr = sc._compileparse(code)
                        lines = [f"this[{sc.name!r}] = {expr}" if sc.name else expr]
                        if _reads_only_params(sc):
                            if not take(lines, params_only=True):
                                return None
                            i += 1
                            continue
                if not take(lines):
                    return None
                i += 1
                continue
            run = []
            while i < len(subs):
                part = _fixed_part(subs[i])
                if part is None:
                    break
                trial = [p for _, p in run] + [part]
                if _joined([p[1] for p in trial if p[2]]) is None:
                    break
                run.append((subs[i], part))
                i += 1
                if part[0] in ("pascal", "prefixed", "parray"):
                    break
            lines = self._emit_run(code, fid, run) if any(p[2] for _, p in run) else \
                [f"this[{sc.name!r}] = io.tell()" for sc, _ in run if sc.name]
            if not take(lines):
                return None
        model = self._model_expr(code, local, root)
        for var, result, late, fieldmap in nested:
            # a member of a nested record read here is that record's local
            item = re.compile(rf"\b{var}\[('(?:[^'\\]|\\.)*')\]")

            def member(m: re.Match, fieldmap: dict = fieldmap) -> str:
                return fieldmap.get(ast.literal_eval(m.group(1)), m.group(0))

            made = f"{var} = {result}"
            body = [x if x.strip() == made else item.sub(member, x) for x in body]
            if model is not None and late is not None and not any(
                    re.search(rf"\b{var}\b", x) for x in body if x.strip() != made):
                # only this record's model holds it: the nested record's model too
                body = [x.replace(made, f"{var} = {late}") if x.strip() == made else x
                        for x in body]
        return body, fields, model, local

    def _emit_run(self, code, fid: int, run: list) -> list[str]:
        sized = [(sc, p) for sc, p in run if p[2]]
        fmt = _joined([p[1] for _, p in sized])
        sname = f"run_{fid}_{code.allocateId()}"
        code.append(f"{sname} = struct.Struct({fmt!r})")
        size = sum(p[2] for _, p in sized)
        names = [f"_v{k}" for k in range(len(sized))]
        need_p = any(p[0] in ("tell", "enum") for _, p in run)
        out = ["_p = io.tell()"] if need_p else []
        out += [f"_b = io.read({size})",
               f"if len(_b) != {size}:",
               f"    raise _bw.short_read({size}, _b)",
               # one unsigned byte is read by index, one byte string is the read itself
               # (no unpack call)
               f"{names[0]} = _b[0]" if fmt[1:] == "B" else
               f"{names[0]} = _b" if re.fullmatch(r"\d*s", fmt[1:]) else
               f"{', '.join(names)}, = {sname}.unpack(_b)"]
        off = 0
        k = 0
        for sc, (kind, _, n) in run:
            name = sc.name
            if kind == "tell":
                if name:
                    out.append(f"this[{name!r}] = _p + {off}")
                continue
            v = names[k]
            k += 1
            inner = _inner(sc)
            if kind == "bigint":
                order = "little" if inner.swapped else "big"
                v = f"int.from_bytes({v}, {order!r}, signed={inner.signed})"
            elif kind == "const":
                out.append(f"if {v} != {inner.value!r}:")
                out.append(f"    raise ConstError('parsing expected %r but parsed %r' % "
                           f"({inner.value!r}, {v}))")
            elif kind == "flags":
                check, v = inner.split_source(v)
                out += check.split("\n")
            elif kind == "enum":
                out.append(f"if {v} not in {set(inner.values)!r}:")
                out.append(f"    raise {_link(code, inner)}.refuse({v}, _p + {off}, {name or ''!r})")
            elif kind in ("pascal", "prefixed"):
                out += [f"_b = io.read({v})",
                        f"if len(_b) != {v}:",
                        f"    raise _bw.short_read({v}, _b)"]
                v = "_b" if kind == "prefixed" else f"_b.decode({inner._bw_encoding!r})"
            elif kind == "parray":
                v = _items_source(inner._bw_item, v, code,
                                  getattr(inner, "_bw_packed", None)) or (
                    f"ListContainer([{inner._bw_item._compileparse(code)} "
                    f"for i in range({v})])")
            off += n
            if name:
                out.append(f"this[{name!r}] = {v}")
            elif kind in ("pascal", "prefixed", "parray"):
                out.append(v)
        return out


def _walk(dec: Any, name: str, buf: Any, offset: int, end: int | None, params: tuple,
          out: list | None, stop: bool) -> tuple[list, int]:
    """Records decoded by ``dec`` from ``offset`` into ``out`` up to ``end``: (records,
    where the walk ended). The first record that fails raises its error, prefixed with
    its index (:func:`decode_many`), or with ``stop`` ends the walk where it starts
    (:func:`decode_prefix`). Errors are never returned as values: a caller's local
    holding one would tie it to the frames of its traceback, a cycle that keeps each
    decoded window alive while a bulk load has the collector paused."""
    mv = buf if buf.__class__ is bytes or isinstance(buf, memoryview) else memoryview(buf)
    end = len(mv) if end is None else end
    if out is None:
        out = []
    append = out.append
    pos = offset
    try:
        while pos < end:
            try:
                value, nxt = dec(mv, pos, end, *params)
            except DecodeError:
                if stop:
                    return out, pos
                raise
            if nxt <= pos:  # a zero-size record would repeat forever
                if stop:
                    return out, pos
                raise ConstraintError("record consumes no bytes", offset=pos, path="",
                                      expected="> 0 bytes", found=0)
            pos = nxt
            append(value)
    except DecodeError as exc:
        raise exc.prefixed(name + "[" + str(len(out)) + "]") from None
    return out, pos


def decode_many(dec: Any, name: str, buf: Any, offset: int, end: int | None,
                params: tuple, out: list | None = None) -> list:
    """Consecutive records decoded by the generated ``dec`` into a list (``decode_many_*``):
    the records and errors of ``iter_*``, without a generator or an end offset per record.

    ``out`` holds the records already decoded before ``offset`` (the optimistic
    ``_m_*`` loop hands over here at the first record it could not decode): they are
    kept, and an error's index counts them."""
    return _walk(dec, name, buf, offset, end, params, out, False)[0]


def decode_prefix(dec: Any, name: str, buf: Any, offset: int, end: int | None,
                  params: tuple, out: list | None = None) -> tuple[list, int]:
    """The whole records from ``offset`` up to the first that does not decode within
    ``end`` (``decode_prefix_*``), and where that one starts: ``(records, stop)``, with
    ``stop == end`` when every record decoded. Never raises for the bytes: a record
    cut by ``end`` (the end of a window of a larger buffer) and a damaged one both stop
    the prefix, and the caller reads on from ``stop`` (the checked decoder there gives
    the record, with more bytes, or its error). ``out`` as in :func:`decode_many`."""
    out, pos = _walk(dec, name, buf, offset, end, params, out, True)
    return out, max(pos, offset)


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
    except Exception as exc:  # a value of the wrong type, range or shape
        raise encode_failure(exc, name + "[" + str(i) + "]") from None
    return bytes(out)
