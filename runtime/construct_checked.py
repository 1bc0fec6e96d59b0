"""Construct's reading classes with checked reads: a short or oversized read is the
project's error with the field path, on the interpreted and the compiled path alike; and
the batch readers (packed numbers, item lists) compiled records call.
"""


from __future__ import annotations

import struct
from typing import Any

import construct as cs

from . import varint
from .construct_support import (
    ClosedEnum,
    CompileState,
    _bind,
    _built_aside,
    _bw,
    _cpath,
    _read_exact,
    _stream_end,
    short_read,
)
from .errors import (
    ConstraintError,
    DecodeError,
    EncodeError,
    TruncatedError,
)
from .fastpath import rows_to_array, text_error
from .field_names import FIELD_NAMES
from .packed import PackedArray
from .truth import note_index, shift


# Decompressed sections without a declared size (WAL blocks) are capped here.
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
    import numpy as np

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
_FIELD_NAMES = FIELD_NAMES
for _name, _fmt in _FIELD_NAMES.items():
    globals()[_name] = FormatField(_fmt[0], _fmt[1])
del _name, _fmt


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
        pending = CompileState.pending
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


