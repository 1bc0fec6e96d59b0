"""A plain, hand-written ``struct`` decoder of the HTT WAL entry layout.

This is what a careful engineer would write without bytewright: the same object model
(the generated dataclasses), the same CRC verification, the same bounds checks and
errors. The benchmark compares the generated fast path against it.
"""

from __future__ import annotations

import struct
import zlib

from bytewright.generated import htt as h
from bytewright.runtime.errors import ChecksumError, ConstraintError, TruncatedError

_HEAD = struct.Struct("<IBH")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_EPOCH = struct.Struct("<QB")


def _str(mv: memoryview, pos: int, end: int) -> tuple[str, int]:
    if pos + 2 > end:
        raise TruncatedError("length truncated", offset=pos)
    (n,) = _U16.unpack_from(mv, pos)
    pos += 2
    if pos + n > end:
        raise TruncatedError("string truncated", offset=pos)
    try:
        return str(mv[pos:pos + n], "utf-8"), pos + n
    except UnicodeDecodeError:
        raise ConstraintError("bad utf-8", offset=pos) from None


def _data_meta(mv: memoryview, pos: int, end: int):
    if pos + 4 > end:
        raise TruncatedError("data length truncated", offset=pos)
    (n,) = _U32.unpack_from(mv, pos)
    pos += 4
    if pos + n > end:
        raise TruncatedError("data truncated", offset=pos)
    data = bytes(mv[pos:pos + n])
    pos += n
    if pos + 2 > end:
        raise TruncatedError("meta count truncated", offset=pos)
    (count,) = _U16.unpack_from(mv, pos)
    pos += 2
    meta = []
    for _ in range(count):
        k, pos = _str(mv, pos, end)
        v, pos = _str(mv, pos, end)
        meta.append(h.MetaPair(k, v))
    return data, meta, pos


def decode_wal_entry(mv: memoryview, pos: int, semantic_dims: int = 0):
    """Decode one entry (INSERT/UPDATE/DELETE/SET_META/EPOCH; tails when semantic_dims)."""
    end = len(mv)
    start = pos
    if pos + 7 > end:
        raise TruncatedError("entry header truncated", offset=pos)
    seq, op, klen = _HEAD.unpack_from(mv, pos)
    pos += 7
    if pos + klen > end:
        raise TruncatedError("key truncated", offset=pos)
    try:
        key = str(mv[pos:pos + klen], "utf-8")
    except UnicodeDecodeError:
        raise ConstraintError("bad utf-8", offset=pos) from None
    pos += klen
    if op == 1:
        data, meta, pos = _data_meta(mv, pos, end)
        tail = None
        if semantic_dims:
            n = semantic_dims * 16
            if pos + n > end:
                raise TruncatedError("tail truncated", offset=pos)
            tail = h.TailFull([int.from_bytes(mv[p:p + 16], "little", signed=True)
                               for p in range(pos, pos + n, 16)])
            pos += n
        body = h.InsertBody(data, meta, tail)
    elif op == 2:
        data, meta, pos = _data_meta(mv, pos, end)
        body = h.UpdateBody(data, meta)
    elif op == 3:
        body = None
    elif op == 4:
        k, pos = _str(mv, pos, end)
        v, pos = _str(mv, pos, end)
        body = h.MetaPair(k, v)
    elif op == 6:
        if pos + 9 > end:
            raise TruncatedError("epoch truncated", offset=pos)
        epoch_id, fl = _EPOCH.unpack_from(mv, pos)
        pos += 9
        body = h.EpochBody(epoch_id, h.EpochFlags.from_int(fl))
    else:
        raise ConstraintError("unknown op", offset=start + 4, found=op)
    if pos + 4 > end:
        raise TruncatedError("crc truncated", offset=pos)
    (crc,) = _U32.unpack_from(mv, pos)
    if crc != zlib.crc32(mv[start:pos]):
        raise ChecksumError("entry crc mismatch", offset=pos)
    return h.WalEntry(seq, h.WalOp(op), key, body), pos + 4
