"""Covering checksums verified before the fields they cover are read.

A flipped bit is damage, and the checksum over it is what says so: were a field rule
checked first, the same flip would be reported as a retired scheme, a non-zero reserved
byte or an unknown frame kind. Each function here locates one checksum from bytes outside
what it covers where it can (a structure's end, its length prefix), verifies it, and
returns; a structure too short to hold its checksum is left to the decoder, whose
truncation error then names the missing bytes. The generated decoders verify the same
checksums again while decoding.
"""

from __future__ import annotations

import struct

from ...generated import ze
from ..checksums import xxh3_64
from ..errors import ChecksumError

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


def _layout(record: str) -> dict[str, dict]:
    return {f["name"]: f for f in ze.LAYOUT[record]["layouts"][0]["fields"]}


_ZGW_FRAME = _layout("zgw_frame_header")
ZGW_HEADER = ze.LAYOUT["zgw_frame_header"]["layouts"][0]["fixed_size"]  # 64
ZGW_HEADER_SUM = _ZGW_FRAME["header_checksum"]["offset"]  # 56
ZGW_PAYLOAD_LEN = _ZGW_FRAME["payload_len"]["offset"]
ZGW_FILE_SUM = _layout("zgw_file_header")["checksum"]["offset"]  # 56
WAL_RECORD_HEADER = ze.LAYOUT["wal_record_header"]["layouts"][0]["fixed_size"]  # 14
GRAPH_TRAILER = 128
GRAPH_TRAILER_SUM = 32  # trailer offset of the xxh3-64 over every region byte before it
ZGR3 = b"ZGR3"
GRAPH_MAGIC = b"ZEGRNB01"


def check(buf, start: int, end: int, at: int, path: str) -> None:
    """The u64 at ``at`` must be xxh3-64 of ``buf[start:end]``."""
    stored = _U64.unpack_from(buf, at)[0]
    got = xxh3_64(buf[start:end])
    if got != stored:
        raise ChecksumError("xxh3_64 mismatch", offset=at, path=path, expected=got,
                            found=stored)


def framed_block(buf, path: str) -> None:
    """A single-block framed artifact (facts §2.2), its whole-file checksum already
    verified: the block checksum over the payload, before the payload is parsed."""
    n = len(buf)
    if n < 56:
        return
    block_len = _U64.unpack_from(buf, 32)[0]
    if 40 + block_len + 16 != n:
        return  # the decoder reports the block length
    check(buf, 40, 40 + block_len, 40 + block_len, f"{path}.block.block_checksum")


def zgr3_section(buf, path: str = "manifest_file.block.payload") -> None:
    """The ZGR3 section of a v3 manifest, its block checksum already verified: the
    section's own checksum (over ``ZGR3``, section_len and body) before the body is
    parsed. The section ends the payload, so it is found from the payload's end: the
    last ``ZGR3`` tag whose section_len reaches exactly there."""
    n = len(buf)
    if n < 56:
        return
    block_len = _U64.unpack_from(buf, 32)[0]
    lo, end = 40, 40 + block_len
    if end + 16 != n:
        return
    mv = bytes(buf[lo:end])
    at = len(mv)
    while True:
        at = mv.rfind(ZGR3, 0, at)
        if at < 0:
            return  # no section to verify: the decoder reports the missing ZGR3
        if at + 16 <= len(mv) and at + 16 + _U32.unpack_from(mv, at + 4)[0] == len(mv):
            check(buf, lo + at, end - 8, end - 8, f"{path}.extensions.body.checksum")
            return


def segment_header(buf) -> None:
    """The segment header checksum (at header_length - 8) before the fields it covers.
    ``header_length`` and ``region_count`` locate it; when they disagree, or the header
    does not fit the file, the decoder reports that first, as upstream does (facts §5
    "Reader validation": header_length bounds and formula, then the header checksum)."""
    n = len(buf)
    if n < 72:
        return
    header_length = _U64.unpack_from(buf, 16)[0]
    region_count = struct.unpack_from("<H", buf, 52)[0]
    if header_length != 72 + 32 * region_count or header_length > n - 8:
        return
    check(buf, 0, header_length - 8, header_length - 8, "segment_header.header_checksum")


def graph_trailer(buf) -> None:
    """Graph node blocks: the trailer checksum (over every region byte before trailer byte
    32) before the trailer and block fields are checked. The trailer is found from the
    region's end; when its magic is not there (a region of the wrong length) nothing
    locates the checksum, and the decoder reports the length."""
    n = len(buf)
    if n < GRAPH_TRAILER or bytes(buf[n - GRAPH_TRAILER:n - GRAPH_TRAILER + 8]) != GRAPH_MAGIC:
        return
    at = n - GRAPH_TRAILER + GRAPH_TRAILER_SUM
    check(buf, 0, at, at, "graph_node_blocks_region.checksum")


def zgw_file_header(buf) -> None:
    """The family-19 file header checksum (bytes 0..56) before its fields."""
    if len(buf) >= ZGW_FILE_SUM + 8:
        check(buf, 0, ZGW_FILE_SUM, ZGW_FILE_SUM, "zgw_file_header.checksum")


def zgw_frame(buf, pos: int, path: str = "frame") -> int | None:
    """One family-19 frame at ``pos``: its header checksum, then (when the whole frame is
    present) the frame checksum over header and payload, before any field is read.
    Returns the frame's end, or None when the bytes stop first."""
    n = len(buf)
    if n - pos < ZGW_HEADER:
        return None
    check(buf, pos, pos + ZGW_HEADER_SUM, pos + ZGW_HEADER_SUM, f"{path}.header_checksum")
    end = pos + ZGW_HEADER + _U32.unpack_from(buf, pos + ZGW_PAYLOAD_LEN)[0]
    if end + 8 > n:
        return None
    check(buf, pos, end, end, f"{path}.checksum")
    return end + 8


def zgw_frames(buf) -> None:
    """Every frame of an envelope occupying ``buf``, in order, until the bytes stop."""
    pos, i = 0, 0
    while pos < len(buf):
        nxt = zgw_frame(buf, pos, f"frames[{i}]")
        if nxt is None:
            return
        pos, i = nxt, i + 1


def wal_record(buf, pos: int = 0) -> None:
    """A WAL record's checksum (over its 14-byte header and payload) before its payload."""
    n = len(buf)
    if n - pos < WAL_RECORD_HEADER:
        return
    end = pos + WAL_RECORD_HEADER + _U32.unpack_from(buf, pos)[0]
    if end + 8 <= n:
        check(buf, pos, end, end, "wal_record.checksum")
