"""What the generated fast path calls: bounds and text errors, varints, compression,
enums, the ``stop_on_error`` result types, and the loops of ``decode_many``/``encode_many``.

Plain functions over ``memoryview``s; nothing here imports Construct.
"""


from __future__ import annotations

import enum
import sys
from dataclasses import dataclass, field
from typing import Any

from . import checksums, compression, varint
from .errors import (
    ChecksumError,
    ConstraintError,
    DecodeError,
    EncodeError,
    TruncatedError,
    UnsupportedError,
)
from .truth import encode_failure

# Decompressed sections without a declared size (WAL blocks) are capped here.
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
    np = sys.modules.get("numpy")  # not imported yet: no value can be an array
    if np is not None and (isinstance(a, np.ndarray) or isinstance(b, np.ndarray)):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
                and a.dtype == b.dtype and a.shape == b.shape
                and a.tobytes() == b.tobytes())
    return a == b


def rows_to_array(rows: Any, dtype: Any) -> Any:
    """Construct's list of values/Containers as the fast path's numpy array."""
    import numpy as np  # only records with numpy views need it: the CLI starts without

    dt = np.dtype(dtype)
    if isinstance(rows, np.ndarray) and rows.dtype == dt:
        return rows  # already bit-exact (NumpyArray)
    if dt.names is None:
        return np.array(list(rows), dtype=dt)
    return np.array([tuple(row[n] for n in dt.names) for row in rows], dtype=dt)


def array_to_rows(arr: Any) -> list:
    """A numpy array back to what Construct builds from (values or dicts)."""
    import numpy as np

    if arr.dtype.names is None:
        return arr.tolist()
    names = arr.dtype.names
    return [{n: (bytes(v) if isinstance(v, (np.void, memoryview)) else v)
             for n, v in zip(names, row.tolist(), strict=True)} for row in arr]


# -- Construct support ---------------------------------------------------------------

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
