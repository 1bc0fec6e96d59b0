"""Careful hand-written ``struct`` codecs of the benchmarked layouts, written for speed.

What an engineer would write without bytewright: precompiled ``struct.Struct`` objects,
one ``unpack_from`` per fixed run (a 20-dim Q64.64 tail is one ``unpack_from`` of 40
``Q/q`` halves; a 768-dim vector one ``unpack_from`` of ``768f``), no per-field calls,
the same checks (bounds, CRC, UTF-8). Two flavours per layout: building the generated
dataclasses (``*_dc``, the same object model as the fast path) and plain tuples (``*_raw``).
"""

from __future__ import annotations

import struct
import zlib

from bytewright.generated import htt as h
from bytewright.generated import kladde as k
from bytewright.generated import pile as p
from bytewright.generated import ze as z
from bytewright.runtime.errors import ChecksumError, ConstraintError, TruncatedError
from bytewright.runtime.pile.kinds import KIND_BLOB as _BLOB_KIND

_HEAD = struct.Struct("<IBH")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_TAILS: dict[int, struct.Struct] = {}


def _tail(dims: int) -> struct.Struct:
    st = _TAILS.get(dims)
    if st is None:
        st = _TAILS[dims] = struct.Struct("<" + "Qq" * dims)
    return st


def htt_wal(buf, dims: int, raw: bool = False) -> list:
    """INSERT entries (the benchmark corpus) of an HTT WAL, CRC checked."""
    mv = memoryview(buf)
    end, pos, out = len(mv), 0, []
    head, u16, u32, crc32 = _HEAD.unpack_from, _U16.unpack_from, _U32.unpack_from, zlib.crc32
    tail_st = _tail(dims) if dims else None
    tail_n = dims * 16
    MetaPair, InsertBody, WalEntry, TailFull, INSERT = (h.MetaPair, h.InsertBody, h.WalEntry,
                                                        h.TailFull, h.WalOp.INSERT)
    append = out.append
    while pos < end:
        start = pos
        if pos + 7 > end:
            raise TruncatedError("entry header truncated", offset=pos)
        seq, op, klen = head(mv, pos)
        if op != 1:
            raise ConstraintError("only INSERT in this corpus", offset=pos + 4, found=op)
        pos += 7
        key = str(mv[pos:pos + klen], "utf-8")
        pos += klen
        (n,) = u32(mv, pos)
        pos += 4
        data = bytes(mv[pos:pos + n])
        pos += n
        (count,) = u16(mv, pos)
        pos += 2
        meta = []
        for _ in range(count):
            (kl,) = u16(mv, pos)
            k = str(mv[pos + 2:pos + 2 + kl], "utf-8")
            pos += 2 + kl
            (vl,) = u16(mv, pos)
            v = str(mv[pos + 2:pos + 2 + vl], "utf-8")
            pos += 2 + vl
            meta.append((k, v) if raw else MetaPair(k, v))
        tail = None
        if tail_st is not None:
            halves = tail_st.unpack_from(mv, pos)
            vals = [lo | (hi << 64) for lo, hi in zip(halves[0::2], halves[1::2], strict=True)]
            pos += tail_n
            tail = vals if raw else TailFull(vals)
        if pos + 4 > end:
            raise TruncatedError("crc truncated", offset=pos)
        (crc,) = u32(mv, pos)
        if crc != crc32(mv[start:pos]):
            raise ChecksumError("entry crc mismatch", offset=pos)
        pos += 4
        append((seq, 1, key, data, meta, tail) if raw else
               WalEntry(seq, INSERT, key, InsertBody(data, meta, tail)))
    return out


def htt_wal_encode(entries: list, dims: int) -> bytes:
    """Encode INSERT entries (dataclasses in, bytes out) with one CRC per entry."""
    out = bytearray()
    head, u16, u32, crc32 = _HEAD.pack, _U16.pack, _U32.pack, zlib.crc32
    tail_st = _tail(dims) if dims else None
    mask = (1 << 64) - 1
    for e in entries:
        start = len(out)
        kb = e.key.encode()
        out += head(e.seq, 1, len(kb))
        out += kb
        b = e.body
        out += u32(len(b.data))
        out += b.data
        out += u16(len(b.meta))
        for m in b.meta:
            kk, vv = m.key.encode(), m.value.encode()
            out += u16(len(kk))
            out += kk
            out += u16(len(vv))
            out += vv
        if tail_st is not None:
            flat = []
            for v in b.tail.dims:
                flat.append(v & mask)
                flat.append(v >> 64)
            out += tail_st.pack(*flat)
        out += u32(crc32(memoryview(out)[start:]))
    return bytes(out)


_OP7 = struct.Struct("<IQQQI")
_VECS: dict[int, struct.Struct] = {}


def ze_op7(buf, raw: bool = False) -> list:
    """op-7 upserts with only the vector bit set: bitmap, doc id, revision, dims, f32s."""
    mv = memoryview(buf)
    end, pos, out = len(mv), 0, []
    fixed = _OP7.unpack_from
    F32Vector, OpUpsertV2, fields = z.F32Vector, z.OpUpsertV2, z.UpsertFields(vector=True)
    while pos < end:
        bits, lo, hi, rev, dims = fixed(mv, pos)
        if bits != 1:
            raise ConstraintError("only vector upserts in this corpus", offset=pos, found=bits)
        if dims < 1:
            raise ConstraintError("vector has zero dims", offset=pos + 28, found=dims)
        pos += 32
        st = _VECS.get(dims)
        if st is None:
            st = _VECS[dims] = struct.Struct(f"<{dims}f")
        if pos + st.size > end:
            raise TruncatedError("vector truncated", offset=pos)
        vals = list(st.unpack_from(mv, pos))
        pos += st.size
        doc = lo | (hi << 64)
        out.append((doc, rev, vals) if raw else
                   OpUpsertV2(fields, doc, rev, F32Vector(vals), None, None, None, None))
    return out


def ze_op7_encode(values: list) -> bytes:
    out = bytearray()
    pack = _OP7.pack
    mask = (1 << 64) - 1
    for v in values:
        vals = v.vector.values
        st = _VECS.get(len(vals))
        if st is None:
            st = _VECS[len(vals)] = struct.Struct(f"<{len(vals)}f")
        out += pack(1, v.doc_id & mask, v.doc_id >> 64, v.revision, len(vals))
        out += st.pack(*vals)
    return bytes(out)


_NODE = struct.Struct("<64s3fBBH44I")


def ze_nodes(buf, raw: bool = False) -> list:
    """Graph node blocks of 64 code bytes and 44 neighbour slots (256-byte stride)."""
    mv = memoryview(buf)
    n = len(mv) // _NODE.size
    if n * _NODE.size != len(mv):
        raise TruncatedError("partial node block", offset=n * _NODE.size)
    it = _NODE.iter_unpack(mv)
    if raw:
        return [(r[0], r[1:4], r[4], r[5], list(r[7:])) for r in it]
    Node, F, Flags = z.GraphNodeBlock, z.Bit4Factors, z.GraphBlockFlags.from_int
    out = []
    for r in it:
        if r[6]:
            raise ConstraintError("reserved bytes not zero", offset=len(out) * _NODE.size + 78)
        out.append(Node(r[0], F(r[1], r[2], r[3]), r[4], Flags(r[5]), list(r[7:])))
    return out


_FRAME = struct.Struct("<16s12sI32sQQ16s32s128s")  # the whole 256-byte first block
_MAGIC_TAIL = bytes.fromhex("9D9656A5EA5A497320351F3B")
_Z16, _Z128 = bytes(16), bytes(128)


def pile_blobs(buf, raw: bool = False) -> list:
    """Current-format blob frames: 128 bytes of head (marker, magic tail, span, kind,
    timestamp, length, scalar pad, hash), 128 reserved bytes, then the payload padded
    to 256-byte blocks. The checks facts.md requires of a reader: magic, blob kind,
    span, the scalar pad and the reserved bytes zero (the post-payload padding is not
    checked, as in the reference reader)."""
    mv = memoryview(buf)
    end, pos, out = len(mv), 0, []
    head = _FRAME.unpack_from
    Rec, Rest, Body, Head, Data = p.PileRecord, p.FrameRest, p.BlobBody, p.BlobHead, p.BlobData
    while pos < end:
        if pos + 256 > end:
            raise TruncatedError("frame truncated", offset=pos)
        marker, tail, span, kind, ts, length, pad, handle, reserved = head(mv, pos)
        if tail != _MAGIC_TAIL:
            raise ConstraintError("bad frame magic", offset=pos + 16)
        if kind != _BLOB_KIND:
            raise ConstraintError("not a blob frame", offset=pos + 32)
        if pad != _Z16 or reserved != _Z128:
            raise ConstraintError("reserved bytes must be zero", offset=pos + 80)
        if span != 1 + (length + 255) // 256:
            raise ConstraintError("blob span mismatch", offset=pos + 28, found=span)
        if pos + span * 256 > end:
            raise TruncatedError("record truncated", offset=pos)
        data = bytes(mv[pos + 256:pos + 256 + length])
        pos += span * 256
        out.append((ts, length, handle, data) if raw else
                   Rec(marker, Rest(span, kind, Body(Head(ts, length, handle), Data(data)))))
    return out


def pile_blobs_floor(buf) -> list:
    """Not a baseline but a floor: the least any decoder of these frames does to give the
    same values. One ``unpack_from`` per frame and the same five objects built the
    cheapest way (``object.__new__`` and slot stores, as the generated code builds them),
    with no check at all: a corrupt frame is not noticed. Only the report's account of a
    missed decode target times it (bench/harness.py::floor_ratios)."""
    data = buf if buf.__class__ is bytes else bytes(buf)
    end, pos, out = len(data), 0, []
    append, head, new = out.append, _FRAME.unpack_from, object.__new__
    Rec, Rest, Body, Head, Data = p.PileRecord, p.FrameRest, p.BlobBody, p.BlobHead, p.BlobData
    while pos < end:
        marker, _, span, kind, ts, length, _, handle, _ = head(data, pos)
        hd = new(Head)
        hd.timestamp = ts
        hd.length = length
        hd.hash = handle
        dt = new(Data)
        dt.payload = data[pos + 256:pos + 256 + length]
        body = new(Body)
        body.head = hd
        body.data = dt
        rest = new(Rest)
        rest.span = span
        rest.kind = kind
        rest.body = body
        rec = new(Rec)
        rec.marker = marker
        rec.record = rest
        append(rec)
        pos += span * 256
    return out


def kladde_table(buf, raw: bool = False) -> list:
    """An address-table page's content: LEB128 child deltas up to 0, then statements
    (id_delta, tag, tag-specific LEB128 fields, Inline payload) to the end."""
    data = buf if isinstance(buf, bytes) else bytes(buf)
    end, pos = len(data), 0
    Stmt, Ref, Zero, Shrink, Grow, Inline = (k.Statement, k.RefBody, k.ZeroBody, k.ShrinkBody,
                                             k.GrowBody, k.InlineBody)
    try:
        while True:  # children until the 0 delimiter (the benchmark has none)
            b = data[pos]
            pos += 1
            if b == 0:
                break
            while b & 0x80:
                b = data[pos]
                pos += 1
        out = []
        while pos < end:
            vals = []
            # id_delta, then the tag, then 0..3 more LEB128 fields depending on the tag
            b = data[pos]
            pos += 1
            if b < 0x80:
                idd = b
            else:
                idd, shift = b & 0x7F, 7
                while True:
                    b = data[pos]
                    pos += 1
                    idd |= (b & 0x7F) << shift
                    if b < 0x80:
                        break
                    shift += 7
            tag = data[pos]
            pos += 1
            nf = 3 if tag == 0 else 2 if tag == 1 else 0 if tag == 4 else 1
            for _ in range(nf):
                b = data[pos]
                pos += 1
                if b < 0x80:
                    vals.append(b)
                    continue
                v, shift = b & 0x7F, 7
                while True:
                    b = data[pos]
                    pos += 1
                    v |= (b & 0x7F) << shift
                    if b < 0x80:
                        break
                    shift += 7
                vals.append(v)
            if tag >= 5:
                n = tag - 4
                if pos + n > end:
                    raise TruncatedError("inline payload truncated", offset=pos)
                payload = data[pos:pos + n]
                pos += n
                if raw:
                    out.append((idd, tag, vals[0], payload))
                else:
                    out.append(Stmt(idd, tag, Inline(vals[0], payload)))
                continue
            if raw:
                out.append((idd, tag, *vals))
                continue
            body = (Ref(*vals) if tag == 0 else Zero(*vals) if tag == 1 else
                    Shrink(*vals) if tag == 2 else Grow(*vals) if tag == 3 else None)
            out.append(Stmt(idd, tag, body))
    except IndexError:
        raise TruncatedError("statement truncated", offset=end) from None
    return out


# one-byte LEB128 values, prebuilt (written here as an engineer without bytewright would,
# rather than borrowed from runtime/varint.py, which the generated side uses)
_LEB1 = tuple(bytes((i,)) for i in range(128))


def _leb(v: int) -> bytes:
    """LEB128 of a value of 128 or more (the encoders take smaller ones from ``_LEB1``)."""
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def kladde_table_encode(statements: list) -> bytes:
    """An address-table content with no children (its 0 delimiter) and ``statements``:
    LEB128 fields (one-byte values from a table), the tag byte, Inline payloads."""
    out = [b"\x00"]
    append, one, leb = out.append, _LEB1, _leb
    for st in statements:
        v = st.id_delta
        append(one[v] if 0 <= v < 128 else leb(v))
        tag = st.tag
        append(one[tag] if tag < 128 else bytes([tag]))
        b = st.body
        if b is None:
            if tag != 4:
                raise ValueError(f"statement tag {tag} needs a body")
            continue
        if tag >= 5:
            if len(b.payload) != tag - 4:
                raise ValueError("inline payload length does not match its tag")
            v = b.offset_delta
            append(one[v] if 0 <= v < 128 else leb(v))
            append(b.payload)
            continue
        for v in ((b.offset_delta, b.size, b.address) if tag == 0 else
                  (b.offset_delta, b.size) if tag == 1 else (b.offset_delta,)):
            append(one[v] if 0 <= v < 128 else leb(v))
    return b"".join(out)


def ze_nodes_encode(nodes: list) -> bytes:
    """Graph node blocks: one ``pack`` of the whole 256-byte block per node."""
    pack = _NODE.pack
    out = []
    append = out.append
    for nd in nodes:
        f, fl = nd.factors, nd.flags
        append(pack(nd.codes, f.scale, f.normalized_norm, f.normalized_correction, nd.degree,
                    int(fl.entry_seed) | int(fl.hub) << 1, 0, *nd.neighbours))
    return b"".join(out)


_PADS = tuple(bytes(i) for i in range(256))


def pile_blobs_encode(records: list) -> bytes:
    """Current-format blob frames: the 256-byte first block in one ``pack``, the payload,
    zeros to the next 256-byte boundary."""
    pack = _FRAME.pack
    out = []
    append = out.append
    for r in records:
        rest = r.record
        body = rest.body
        hd = body.head
        payload = body.data.payload
        if len(payload) != hd.length or rest.span != 1 + (hd.length + 255) // 256:
            raise ValueError("blob length and span disagree")
        append(pack(r.marker, _MAGIC_TAIL, rest.span, rest.kind, hd.timestamp, hd.length,
                    _Z16, hd.hash, _Z128))
        append(payload)
        append(_PADS[-len(payload) % 256])
    return b"".join(out)


__all__ = ["htt_wal", "htt_wal_encode", "ze_op7", "ze_op7_encode", "ze_nodes", "ze_nodes_encode",
           "pile_blobs", "pile_blobs_encode", "kladde_table", "kladde_table_encode", "p"]
