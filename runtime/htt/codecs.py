"""HTT's own compression codecs (spec §2 flag bits 1-2, §5), registered as a plug-in.

HTT readers accept variants the generic codecs do not: algorithm 1 is a zlib-wrapped
stream *or* raw deflate (readers sniff the two-byte zlib header), and algorithm 2 is an
lz4 frame *or* a raw lz4 block behind a 4-byte little-endian uncompressed size. Those
rules belong to HTT, so they live here and schemas/htt.yaml names this plug-in
(``plugins: ["bytewright.runtime.htt.codecs:register"]``) and maps its enum onto
``htt_zlib``/``htt_lz4``. Writers emit the canonical forms (zlib-wrapped, lz4 frame).
"""

from __future__ import annotations

import struct

import lz4.block

from .. import compression
from ..registry import REGISTRY, CodecFailure, Registry

LZ4_BLOCK_MAX = (1 << 31) - 1  # lz4's block API takes a C int: larger sizes are refused
LZ4_MAX_RATIO = 255  # an lz4 block cannot expand more than ~255:1 (one literal run byte)


def _wrapped(data: bytes) -> bool:
    # A zlib wrapper is CMF (deflate, CM=8) + FLG with a valid check; else raw deflate.
    return len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] * 256 + data[1]) % 31 == 0


def zlib_or_deflate(data: bytes, limit: int) -> bytes:
    """Algorithm 1: sniff the zlib header, else raw deflate (§2)."""
    name = "zlib" if _wrapped(data) else "deflate"
    return REGISTRY.codec(name).decompress(data, limit)


def lz4_frame_or_block(data: bytes, limit: int) -> bytes:
    """Algorithm 2: an lz4 frame, else a raw block behind a 4-byte LE size (§2)."""
    if data.startswith(compression.LZ4_FRAME_MAGIC):
        return REGISTRY.codec("lz4").decompress(data, limit)
    if len(data) < 4:
        raise CodecFailure("block is shorter than its 4-byte size prefix", truncated=True)
    (size,) = struct.unpack_from("<I", data)
    if size > limit:
        raise CodecFailure(f"block declares {size} bytes, over the {limit}-byte limit")
    if size > LZ4_BLOCK_MAX:
        raise CodecFailure(f"block declares {size} bytes, over lz4's {LZ4_BLOCK_MAX}")
    # The library allocates the declared size up front: bound it by what the block's
    # bytes could possibly expand to before believing it.
    if size > LZ4_MAX_RATIO * (len(data) - 4) + 64:
        raise CodecFailure(f"block declares {size} bytes, more than {len(data) - 4} "
                           "compressed bytes can hold")
    if size == 0:
        if data[4:] != b"\x00":
            raise CodecFailure("empty block must be the single byte 00")
        return b""
    try:
        out = lz4.block.decompress(data[4:], uncompressed_size=size)
    except (lz4.block.LZ4BlockError, ValueError, OverflowError) as exc:
        raise CodecFailure(f"block: {exc}") from exc
    if len(out) != size:
        raise CodecFailure(f"block decoded to {len(out)} bytes, its prefix says {size}")
    return out


def register(reg: Registry) -> None:
    """Plug-in entry point named by schemas/htt.yaml."""
    zlib_codec, lz4_codec = reg.codec("zlib"), reg.codec("lz4")
    reg.add_codec("htt_zlib", compress=zlib_codec.compress, decompress=zlib_or_deflate,
                  doc="HTT algorithm 1: zlib-wrapped or raw deflate (sniffed); writes zlib")
    reg.add_codec("htt_lz4", compress=lz4_codec.compress, decompress=lz4_frame_or_block,
                  doc="HTT algorithm 2: lz4 frame or 4-byte-size-prefixed block; writes frames")
