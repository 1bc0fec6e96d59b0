"""Support every generated module imports: error helpers, text, varints, compression,
checksums, and the few custom Construct classes the Construct path needs.

Generated code stays short and uniform by calling these; they are the narrow surface
between ``generated/`` and the rest of the runtime.
"""

from __future__ import annotations

import enum
from typing import Any

import construct as cs
import numpy as np

from . import checksums, compression, varint
from .errors import ConstraintError, DecodeError, EncodeError, TruncatedError

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


def uleb128(mv: memoryview, pos: int, end: int, path: str) -> tuple[int, int]:
    return varint.decode_uleb128(mv[:end], pos, path=path)


uleb128_encode = varint.encode_uleb128


def algorithm_name(alg: Any) -> str:
    """Compression algorithm from a schema value: an enum member or a plain name."""
    if isinstance(alg, enum.Enum):
        return alg.name.lower()
    if isinstance(alg, str):
        return alg
    raise EncodeError(f"cannot tell a compression algorithm from {alg!r}")


def decompress(alg: Any, data: Any, cap: int, *, expected_size: int | None, offset: int,
               path: str) -> bytes:
    return compression.decompress(algorithm_name(alg), data, cap, offset=offset, path=path,
                                  expected_size=expected_size)


def compress(alg: Any, data: bytes, *, path: str) -> bytes:
    return compression.compress(algorithm_name(alg), data)


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
    """A length-prefixed compressed frame whose plain bytes are ``subcon``."""

    def __init__(self, subcon, algorithm, length, *, expected_size=None, limit=None,
                 name: str = "") -> None:
        super().__init__(subcon)
        self.algorithm = algorithm
        self.length = length
        self.expected_size = expected_size
        self.limit = limit
        self.fieldname = name

    def _parse(self, stream, context, path):
        n = self.length._parsereport(stream, context, path)
        frame = cs.stream_read(stream, n, path)
        expected = self.expected_size(context) if self.expected_size else None
        cap = self.limit(context) if self.limit else (expected or DEFAULT_LIMIT)
        plain = decompress(self.algorithm(context), frame, cap, expected_size=expected,
                           offset=0, path=self.fieldname)
        _save_plain(context, self.fieldname, plain)
        return self.subcon._parsereport(cs.io.BytesIO(plain), context, path)

    def _build(self, obj, stream, context, path):
        sub = cs.io.BytesIO()
        value = self.subcon._build(obj, sub, context, path)
        plain = sub.getvalue()
        _save_plain(context, self.fieldname, plain)
        frame = compress(self.algorithm(context), plain, path=self.fieldname)
        self.length._build(len(frame), stream, context, path)
        cs.stream_write(stream, frame, len(frame), path)
        return value

    def _sizeof(self, context, path):
        raise cs.SizeofError("compressed sections have no fixed size", path=path)


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
