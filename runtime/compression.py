"""Compression codecs (zstd, zlib, lz4) with hard output caps.

Decompression never trusts a size declared inside the compressed bytes: output is
bounded by the caller's ``max_size`` while decoding, so a bomb or a corrupt frame is a
:class:`DecodeError`, never a ``MemoryError``. Every library failure is translated into
a ``DecodeError`` naming the algorithm, the offset and the field path.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

import lz4.block
import lz4.frame
import zstandard

from .errors import DecodeError, EncodeError, TruncatedError, UnsupportedError

Buffer = bytes | bytearray | memoryview

ALGORITHMS = ("zstd", "zlib", "lz4")

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
_ZSTD_LEVEL = 3
_ZLIB_LEVEL = 6


# --- compression ----------------------------------------------------------------------


def compress(name: str, data: Buffer, *, level: int | None = None) -> bytes:
    """Compress ``data``: one zstd frame, one zlib-wrapped stream, or one lz4 frame."""
    raw = bytes(data)
    try:
        if name == "zstd":
            cctx = zstandard.ZstdCompressor(
                level=_ZSTD_LEVEL if level is None else level, write_content_size=True
            )
            return cctx.compress(raw)
        if name == "zlib":
            return zlib.compress(raw, _ZLIB_LEVEL if level is None else level)
        if name == "lz4":
            if level is None:
                return lz4.frame.compress(raw)
            return lz4.frame.compress(raw, compression_level=level)
    except (zstandard.ZstdError, zlib.error, RuntimeError, ValueError) as exc:
        raise EncodeError(f"{name} compression failed: {exc}") from exc
    raise EncodeError(f"unknown compression algorithm {name!r}")


# --- decompression --------------------------------------------------------------------


class _Fail(Exception):
    """Internal: a decoder-specific failure, turned into a DecodeError by the caller."""

    def __init__(self, why: str, *, truncated: bool = False) -> None:
        super().__init__(why)
        self.why = why
        self.truncated = truncated


def _over(limit: int) -> _Fail:
    return _Fail(f"output exceeds the limit of {limit} bytes")


def _zstd_pieces(data: bytes) -> list[bytes]:
    """Split one zstd frame into header, blocks and checksum; reject trailing bytes.

    Feeding the decoder one block at a time bounds each step's output to one block
    (at most 128 KiB), so the cap is checked long before a bomb can grow.
    """
    if not data.startswith(ZSTD_MAGIC):
        if len(data) < 4 and ZSTD_MAGIC.startswith(data):
            raise _Fail("frame header is truncated", truncated=True)
        raise _Fail(f"bad frame magic {data[:4].hex() or 'empty'}, expected 28b52ffd")
    try:
        pos = zstandard.frame_header_size(data)
    except zstandard.ZstdError as exc:
        raise _Fail(f"bad frame header: {exc}", truncated=len(data) < 18) from exc
    if pos > len(data):
        raise _Fail("frame header is truncated", truncated=True)
    has_checksum = bool(data[4] & 0x04)
    pieces = [data[:pos]]
    while True:
        if pos + 3 > len(data):
            raise _Fail("frame ends inside a block header", truncated=True)
        header = int.from_bytes(data[pos : pos + 3], "little")
        last, kind, size = header & 1, (header >> 1) & 3, header >> 3
        if kind == 3:
            raise _Fail("reserved block type")
        end = pos + 3 + (1 if kind == 1 else size)
        if end > len(data):
            raise _Fail("frame ends inside a block", truncated=True)
        pieces.append(data[pos:end])
        pos = end
        if last:
            break
    if has_checksum:
        if pos + 4 > len(data):
            raise _Fail("frame ends inside the content checksum", truncated=True)
        pieces.append(data[pos : pos + 4])
        pos += 4
    if pos != len(data):
        raise _Fail(f"{len(data) - pos} trailing byte(s) after the frame")
    return pieces


def _zstd(data: bytes, limit: int) -> bytes:
    pieces = _zstd_pieces(data)
    # The decoder allocates the frame's declared window up front; refuse windows much
    # larger than the output could ever need (but allow common 8 MiB defaults).
    window = min(1 << 27, max(1 << 23, 1 << max(limit - 1, 1).bit_length()))
    dobj = zstandard.ZstdDecompressor(max_window_size=window).decompressobj()
    out = bytearray()
    try:
        for piece in pieces:
            out += dobj.decompress(piece)
            if len(out) > limit:
                raise _over(limit)
    except zstandard.ZstdError as exc:
        raise _Fail(str(exc)) from exc
    if not dobj.eof:
        raise _Fail("frame did not finish", truncated=True)
    return bytes(out)


def _zlib(data: bytes, limit: int) -> bytes:
    # A zlib wrapper is CMF (deflate, CM=8) + FLG with a valid check; else raw deflate.
    wrapped = len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] * 256 + data[1]) % 31 == 0
    dobj = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
    try:
        out = dobj.decompress(data, limit + 1)
    except zlib.error as exc:
        raise _Fail(str(exc)) from exc
    if len(out) > limit:
        raise _over(limit)
    if not dobj.eof:
        raise _Fail("stream is incomplete", truncated=True)
    if dobj.unused_data:
        raise _Fail(f"{len(dobj.unused_data)} trailing byte(s) after the stream")
    return out


def _lz4(data: bytes, limit: int) -> bytes:
    if data.startswith(LZ4_FRAME_MAGIC):
        dobj = lz4.frame.LZ4FrameDecompressor()
        try:
            out = dobj.decompress(data, max_length=limit + 1)
        except RuntimeError as exc:
            raise _Fail(f"frame: {exc}") from exc
        if len(out) > limit:
            raise _over(limit)
        if not dobj.eof:
            raise _Fail("frame is incomplete", truncated=True)
        if dobj.unused_data:
            raise _Fail(f"{len(dobj.unused_data)} trailing byte(s) after the frame")
        return out
    # Otherwise a raw block behind a 4-byte little-endian uncompressed size.
    if len(data) < 4:
        raise _Fail("block is shorter than its 4-byte size prefix", truncated=True)
    (size,) = struct.unpack_from("<I", data)
    if size > limit:
        raise _Fail(f"block declares {size} bytes, over the {limit}-byte limit")
    if size == 0:
        if data[4:] != b"\x00":
            raise _Fail("empty block must be the single byte 00")
        return b""
    try:
        out = lz4.block.decompress(data[4:], uncompressed_size=size)
    except (lz4.block.LZ4BlockError, ValueError) as exc:
        raise _Fail(f"block: {exc}") from exc
    if len(out) != size:
        raise _Fail(f"block decoded to {len(out)} bytes, its prefix says {size}")
    return out


_DECODERS: dict[str, Callable[[bytes, int], bytes]] = {
    "zstd": _zstd,
    "zlib": _zlib,
    "lz4": _lz4,
}


def decompress(
    name: str,
    data: Buffer,
    max_size: int,
    *,
    offset: int | None = None,
    path: str = "",
    expected_size: int | None = None,
) -> bytes:
    """Decompress exactly one ``name`` stream, producing at most ``max_size`` bytes.

    With ``expected_size`` the output must be exactly that long. Failures raise
    :class:`DecodeError` (``TruncatedError`` when the input just ends early, and
    ``UnsupportedError`` for an unknown algorithm), carrying ``offset`` and ``path``.
    """
    decoder = _DECODERS.get(name)
    if decoder is None:
        raise UnsupportedError(
            f"unknown compression algorithm {name!r}",
            offset=offset,
            path=path,
            expected=list(ALGORITHMS),
            found=name,
        )
    if max_size < 0 or (expected_size is not None and expected_size < 0):
        raise ValueError(f"sizes must be >= 0, got {max_size=} {expected_size=}")
    # Decoding past the expected size is pointless: cap at whichever is smaller.
    limit = max_size if expected_size is None else min(max_size, expected_size)
    try:
        out = decoder(bytes(data), limit)
    except _Fail as fail:
        cls = TruncatedError if fail.truncated else DecodeError
        raise cls(f"{name} decompression failed: {fail.why}", offset=offset, path=path) from None
    except MemoryError:
        raise DecodeError(
            f"{name} decompression failed: out of memory", offset=offset, path=path
        ) from None
    if expected_size is not None and len(out) != expected_size:
        raise DecodeError(
            f"{name} output has the wrong length",
            offset=offset,
            path=path,
            expected=expected_size,
            found=len(out),
        )
    return out
