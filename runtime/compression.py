"""The built-in compression codecs (zstd, zlib, deflate, lz4), with hard output caps.

Each codec is one well-defined stream format and nothing else: ``zstd`` one zstd frame,
``zlib`` one zlib-wrapped (RFC 1950) stream, ``deflate`` one raw deflate (RFC 1951)
stream, ``lz4`` one lz4 frame. A format that accepts variants (sniffing zlib vs raw
deflate, a size-prefixed lz4 block) registers its own codec from its runtime.
:func:`register` adds these to :mod:`bytewright.runtime.registry` exactly as a user's
plug-in would; :func:`decompress`/:func:`compress` work for any registered codec.

Resource bounds: decompression never trusts a size declared inside the compressed bytes.
Output is bounded while decoding by the caller's ``max_size`` and by :data:`MAX_OUTPUT`;
no codec reserves its cap up front (lz4 frames stream in :data:`CHUNK` pieces after their
declared content size is checked against the cap, zstd frames are fed one block at a
time); and output beyond :data:`BOMB_FLOOR` bytes that exceeds :data:`MAX_RATIO` times the
input is refused as a decompression bomb. Every failure is a :class:`DecodeError` naming
the algorithm, the offset and the field path, never a ``MemoryError``: a
:class:`TruncatedError` when the stream just ends early, an :class:`UnsupportedError` for an
unknown algorithm, else a :class:`ConstraintError` (damaged stream, output of another
length than declared, over a limit), on both codec paths alike.
"""

from __future__ import annotations

import zlib

import lz4.frame
import zstandard

from .errors import ConstraintError, DecodeError, EncodeError, TruncatedError, UnsupportedError

Buffer = bytes | bytearray | memoryview

ALGORITHMS = ("zstd", "zlib", "deflate", "lz4")

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
_ZSTD_LEVEL = 3
_ZLIB_LEVEL = 6

MAX_OUTPUT = 1 << 30
"""Hard cap on any one decompressed section, whatever size a file declares (1 GiB)."""
BOMB_FLOOR = 64 << 20
"""Output below this many bytes is never called a bomb."""
MAX_RATIO = 1000
"""Beyond BOMB_FLOOR, output over this many times the input is refused as a bomb
(deflate's own ceiling is about 1032:1)."""
CHUNK = 1 << 20
"""Streaming step: the most output any codec asks its library for at once."""


# --- compression ----------------------------------------------------------------------


def _zstd_compress(raw: bytes, level: int | None = None) -> bytes:
    cctx = zstandard.ZstdCompressor(level=_ZSTD_LEVEL if level is None else level,
                                    write_content_size=True)
    return cctx.compress(raw)


def _zlib_compress(raw: bytes, level: int | None = None) -> bytes:
    return zlib.compress(raw, _ZLIB_LEVEL if level is None else level)


def _deflate_compress(raw: bytes, level: int | None = None) -> bytes:
    co = zlib.compressobj(_ZLIB_LEVEL if level is None else level, zlib.DEFLATED,
                          -zlib.MAX_WBITS)
    return co.compress(raw) + co.flush()


def _lz4_compress(raw: bytes, level: int | None = None) -> bytes:
    if level is None:
        return lz4.frame.compress(raw)
    return lz4.frame.compress(raw, compression_level=level)


_COMPRESSORS = {"zstd": _zstd_compress, "zlib": _zlib_compress,
                "deflate": _deflate_compress, "lz4": _lz4_compress}


def compress(name: str, data: Buffer, *, level: int | None = None, path: str = "") -> bytes:
    """Compress ``data`` as one stream of the registered codec ``name``.

    ``level`` applies to the built-in codecs only (plug-ins choose their own).
    """
    raw = bytes(data)
    try:
        spec = _registry().codec(name, path=path)
    except UnsupportedError as exc:
        raise EncodeError(exc.message, path=path) from None
    try:
        if level is not None and name in _COMPRESSORS:
            return _COMPRESSORS[name](raw, level)
        return spec.compress(raw)
    except (zstandard.ZstdError, zlib.error, RuntimeError, ValueError, OverflowError) as exc:
        raise EncodeError(f"{name} compression failed: {exc}", path=path) from exc


# --- decompression --------------------------------------------------------------------


def _over(limit: int) -> CodecFailure:
    return CodecFailure(f"output exceeds the limit of {limit} bytes")


def _guard(produced: int, consumed: int, limit: int) -> None:
    """Refuse output over the cap, or a bomb's ratio, as soon as it appears."""
    if produced > limit:
        raise _over(limit)
    if produced > BOMB_FLOOR and produced > MAX_RATIO * max(consumed, 1):
        raise CodecFailure(f"decompression bomb refused: {produced} bytes from {consumed} "
                           f"(over {MAX_RATIO}:1)")


def _zstd_pieces(data: bytes, trailing: bool = False) -> tuple[list[bytes], int]:
    """Split one zstd frame into header, blocks and checksum; return them and its length.

    Feeding the decoder one block at a time bounds each step's output to one block
    (at most 128 KiB), so the cap is checked long before a bomb can grow. Trailing bytes
    are an error unless ``trailing`` (a stream whose end is found by decoding it).
    """
    if not data.startswith(ZSTD_MAGIC):
        if len(data) < 4 and ZSTD_MAGIC.startswith(data):
            raise CodecFailure("frame header is truncated", truncated=True)
        raise CodecFailure(f"bad frame magic {data[:4].hex() or 'empty'}, expected 28b52ffd")
    try:
        pos = zstandard.frame_header_size(data)
    except zstandard.ZstdError as exc:
        raise CodecFailure(f"bad frame header: {exc}", truncated=len(data) < 18) from exc
    if pos > len(data):
        raise CodecFailure("frame header is truncated", truncated=True)
    has_checksum = bool(data[4] & 0x04)
    pieces = [data[:pos]]
    while True:
        if pos + 3 > len(data):
            raise CodecFailure("frame ends inside a block header", truncated=True)
        header = int.from_bytes(data[pos : pos + 3], "little")
        last, kind, size = header & 1, (header >> 1) & 3, header >> 3
        if kind == 3:
            raise CodecFailure("reserved block type")
        end = pos + 3 + (1 if kind == 1 else size)
        if end > len(data):
            raise CodecFailure("frame ends inside a block", truncated=True)
        pieces.append(data[pos:end])
        pos = end
        if last:
            break
    if has_checksum:
        if pos + 4 > len(data):
            raise CodecFailure("frame ends inside the content checksum", truncated=True)
        pieces.append(data[pos : pos + 4])
        pos += 4
    if pos != len(data) and not trailing:
        raise CodecFailure(f"{len(data) - pos} trailing byte(s) after the frame")
    return pieces, pos


def _zstd_prefix(data: bytes, limit: int) -> tuple[bytes, int]:
    pieces, used = _zstd_pieces(data, trailing=True)
    # The decoder allocates the frame's declared window up front; refuse windows much
    # larger than the output could ever need (but allow common 8 MiB defaults).
    window = min(1 << 27, max(1 << 23, 1 << max(limit - 1, 1).bit_length()))
    dobj = zstandard.ZstdDecompressor(max_window_size=window).decompressobj()
    out = bytearray()
    consumed = 0
    try:
        for piece in pieces:
            consumed += len(piece)
            out += dobj.decompress(piece)
            _guard(len(out), consumed, limit)
    except zstandard.ZstdError as exc:
        raise CodecFailure(str(exc)) from exc
    if not dobj.eof:
        raise CodecFailure("frame did not finish", truncated=True)
    return bytes(out), used


def _zstd(data: bytes, limit: int) -> bytes:
    out, used = _zstd_prefix(data, limit)
    if used != len(data):
        raise CodecFailure(f"{len(data) - used} trailing byte(s) after the frame")
    return out


def _inflate_prefix(data: bytes, limit: int, wbits: int) -> tuple[bytes, int]:
    """Inflate one stream from the start of ``data`` in CHUNK steps; (output, consumed)."""
    dobj = zlib.decompressobj(wbits)
    out = bytearray()
    pending = data
    try:
        while True:
            piece = dobj.decompress(pending, min(CHUNK, limit + 1 - len(out)))
            out += piece
            pending = dobj.unconsumed_tail
            _guard(len(out), len(data) - len(pending), limit)
            if dobj.eof or (not pending and not piece):
                break
        if not dobj.eof:
            out += dobj.flush()
            _guard(len(out), len(data), limit)
    except zlib.error as exc:
        raise CodecFailure(str(exc)) from exc
    if not dobj.eof:
        raise CodecFailure("stream is incomplete", truncated=True)
    return bytes(out), len(data) - len(dobj.unused_data)


def _whole(prefix_fn):  # noqa: ANN001, ANN202 - a decoder that must consume everything
    def whole(data: bytes, limit: int) -> bytes:
        out, used = prefix_fn(data, limit)
        if used != len(data):
            raise CodecFailure(f"{len(data) - used} trailing byte(s) after the stream")
        return out
    return whole


def _zlib_prefix(data: bytes, limit: int) -> tuple[bytes, int]:
    return _inflate_prefix(data, limit, zlib.MAX_WBITS)


def _deflate_prefix(data: bytes, limit: int) -> tuple[bytes, int]:
    return _inflate_prefix(data, limit, -zlib.MAX_WBITS)


def _lz4_prefix(data: bytes, limit: int) -> tuple[bytes, int]:
    if not data.startswith(LZ4_FRAME_MAGIC):
        if len(data) < 4 and LZ4_FRAME_MAGIC.startswith(data):
            raise CodecFailure("frame header is truncated", truncated=True)
        raise CodecFailure(f"bad frame magic {data[:4].hex() or 'empty'}, expected 04224d18")
    try:
        info = lz4.frame.get_frame_info(data)
    except RuntimeError as exc:
        raise CodecFailure(f"frame header: {exc}", truncated="incomplete" in str(exc)) from exc
    declared = int(info.get("content_size") or 0)
    if declared > limit:  # refused before a byte is decoded: no up-front cap
        raise CodecFailure(f"frame declares {declared} bytes, over the {limit}-byte limit")
    dobj = lz4.frame.LZ4FrameDecompressor()
    out = bytearray()
    # The library reserves max_length up front: ask for no more than the frame declares.
    step = min(CHUNK, limit + 1, declared + 1) if declared else min(CHUNK, limit + 1)
    try:
        piece = dobj.decompress(data, max_length=step)
        while True:
            out += piece
            _guard(len(out), len(data), limit)
            if dobj.eof or dobj.needs_input:
                break
            piece = dobj.decompress(b"", max_length=min(CHUNK, limit + 1 - len(out)))
    except RuntimeError as exc:
        raise CodecFailure(f"frame: {exc}") from exc
    if not dobj.eof:
        raise CodecFailure("frame is incomplete", truncated=True)
    return bytes(out), len(data) - len(dobj.unused_data or b"")


def register(reg) -> None:  # noqa: ANN001 - a Registry (not imported here: avoids a cycle)
    """Plug-in entry point ``bytewright.runtime.compression:register``."""
    reg.add_codec("zstd", compress=_zstd_compress, decompress=_zstd, self_terminating=True,
                  decompress_prefix=_zstd_prefix, doc="one zstd frame (RFC 8878)")
    reg.add_codec("zlib", compress=_zlib_compress, decompress=_whole(_zlib_prefix),
                  self_terminating=True, decompress_prefix=_zlib_prefix,
                  doc="one zlib-wrapped deflate stream (RFC 1950)")
    reg.add_codec("deflate", compress=_deflate_compress, decompress=_whole(_deflate_prefix),
                  self_terminating=True, decompress_prefix=_deflate_prefix,
                  doc="one raw deflate stream (RFC 1951)")
    reg.add_codec("lz4", compress=_lz4_compress, decompress=_whole(_lz4_prefix),
                  self_terminating=True, decompress_prefix=_lz4_prefix,
                  doc="one lz4 frame")


def _fail(name: str, exc: BaseException, offset: int | None, path: str) -> DecodeError:
    if isinstance(exc, CodecFailure):
        cls = TruncatedError if exc.truncated else ConstraintError
        return cls(f"{name} decompression failed: {exc.why}", offset=offset, path=path)
    if isinstance(exc, MemoryError):
        return ConstraintError(f"{name} decompression failed: out of memory", offset=offset,
                           path=path)
    # A plug-in's own exception type: still the project's error, never an escape.
    return ConstraintError(f"{name} decompression failed: {type(exc).__name__}: {exc}",
                       offset=offset, path=path)


def _limit(name: str, max_size: int, expected_size: int | None, offset: int | None,
           path: str) -> int:
    if max_size < 0 or (expected_size is not None and expected_size < 0):
        raise ConstraintError(f"{name}: negative size", offset=offset, path=path,
                          expected=">= 0", found=min(max_size, expected_size or 0))
    # Decoding past the expected size is pointless: cap at whichever is smaller.
    limit = max_size if expected_size is None else min(max_size, expected_size)
    if limit > MAX_OUTPUT:
        if expected_size is not None and expected_size > MAX_OUTPUT:
            raise ConstraintError(f"{name}: declared size is over the {MAX_OUTPUT}-byte limit",
                              offset=offset, path=path, expected=f"<= {MAX_OUTPUT}",
                              found=expected_size)
        limit = MAX_OUTPUT
    return limit


def decompress(
    name: str,
    data: Buffer,
    max_size: int,
    *,
    offset: int | None = None,
    path: str = "",
    expected_size: int | None = None,
) -> bytes:
    """Decompress exactly one stream of the registered codec ``name``, producing at most
    ``max_size`` bytes (and never more than :data:`MAX_OUTPUT`).

    With ``expected_size`` the output must be exactly that long. Failures raise
    :class:`DecodeError` (``TruncatedError`` when the input just ends early,
    ``UnsupportedError`` for an unknown algorithm, else ``ConstraintError``), carrying ``offset`` and ``path``.
    """
    spec = _registry().codec(name, offset=offset, path=path)
    limit = _limit(name, max_size, expected_size, offset, path)
    try:
        out = spec.decompress(bytes(data), limit)
    except Exception as exc:  # noqa: BLE001 - every codec failure becomes a DecodeError
        raise _fail(name, exc, offset, path) from None
    _check_out(name, out, limit, expected_size, offset, path)
    return bytes(out)


def decompress_prefix(
    name: str,
    data: Buffer,
    max_size: int,
    *,
    offset: int | None = None,
    path: str = "",
    expected_size: int | None = None,
) -> tuple[bytes, int]:
    """Decompress the one stream at the start of ``data`` (a region with no length
    prefix); return ``(plain, bytes consumed)``. The codec must be self-terminating."""
    spec = _registry().codec(name, offset=offset, path=path)
    if not spec.self_terminating or spec.decompress_prefix is None:
        raise UnsupportedError(f"{name} streams are not self-terminating: the region needs "
                               "a length", offset=offset, path=path, found=name)
    limit = _limit(name, max_size, expected_size, offset, path)
    try:
        out, used = spec.decompress_prefix(bytes(data), limit)
    except Exception as exc:  # noqa: BLE001 - every codec failure becomes a DecodeError
        raise _fail(name, exc, offset, path) from None
    _check_out(name, out, limit, expected_size, offset, path)
    if not 0 < used <= len(data):
        raise ConstraintError(f"{name} codec reported {used} bytes consumed of {len(data)}",
                          offset=offset, path=path)
    return bytes(out), used


def _check_out(name: str, out: bytes, limit: int, expected_size: int | None,
               offset: int | None, path: str) -> None:
    if len(out) > limit:  # a plug-in that ignored its cap
        raise ConstraintError(f"{name} decompression failed: output exceeds the limit of {limit} "
                          "bytes", offset=offset, path=path)
    if expected_size is not None and len(out) != expected_size:
        raise ConstraintError(f"{name} output has the wrong length", offset=offset, path=path,
                          expected=expected_size, found=len(out))


def _registry():  # noqa: ANN202 - imported late: the registry loads this module as a plug-in
    from .registry import REGISTRY  # noqa: PLC0415
    return REGISTRY


from .registry import CodecFailure  # noqa: E402 - after register(): see _registry()
