"""Probe: the generated fast path against careful hand-written ``struct`` code.

Cases: HTT WAL INSERT entries with 20 Q64.64 semantic dims (the "tailed" case) and
the same entries without a tail. The hand decoder is what a careful engineer writes:
precompiled ``struct.Struct`` objects, one ``unpack_from`` per fixed run (the whole
tail in one call), bytes slicing, everything in one function, building the same
dataclasses and verifying every CRC. The hand encoder is written the same way.

Timing: one warm-up, then ``--runs`` (7) rounds in which the contenders alternate (the
machine is shared and noisy); each figure is the median, with the collector paused
during a run as ``timeit`` does. Run: ``.venv/bin/python -m bench.fastpath_probe``.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import struct
import sys
import time
import zlib

from bytewright.generated import htt as h
from bytewright.runtime.errors import ChecksumError, ConstraintError, TruncatedError

DIMS = 20
_HEAD = struct.Struct("<IBH")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_OPS = {m.value: m for m in h.WalOp}
_FULL = h.SemTailLayout.full  # passed as a caller would (an int is converted per call)


def corpus(n: int, dims: int, seed: int = 7) -> tuple[bytes, list]:
    """``n`` INSERT entries (path key, payload, two metadata pairs, ``dims`` Q64.64)."""
    rng = random.Random(seed)
    entries = []
    for seq in range(1, n + 1):
        key = f"/store/{rng.randrange(1000):03d}/node_{seq:07d}"
        data = rng.randbytes(rng.randrange(16, 128))
        meta = [h.MetaPair("_child_index", str(seq % 977)),
                h.MetaPair("kind", rng.choice(["leaf", "note", "blob"]))]
        tail = h.TailFull([rng.randrange(-(1 << 127), 1 << 127) for _ in range(dims)]) \
            if dims else None
        entries.append(h.WalEntry(seq, h.WalOp.INSERT, key, h.InsertBody(data, meta, tail)))
    buf = b"".join(h.encode_wal_entry(e, semantic_dims=dims, tail_layout=0) for e in entries)
    return buf, entries


# -- careful hand-written code ---------------------------------------------------------

def hand_decode(buf: bytes, dims: int) -> list:
    """Decode every INSERT entry of ``buf`` (other ops are refused: not in the corpus)."""
    tail_len = 16 * dims
    # Q64.64 is i128: struct has no such code, so each is a (low u64, high i64) pair
    tail_st = struct.Struct("<" + "Qq" * dims)
    crc32 = zlib.crc32
    MetaPair, InsertBody, TailFull, WalEntry = h.MetaPair, h.InsertBody, h.TailFull, h.WalEntry
    out = []
    append = out.append
    pos, end = 0, len(buf)
    while pos < end:
        start = pos
        if pos + 7 > end:
            raise TruncatedError("entry header truncated", offset=pos)
        seq, op, kn = _HEAD.unpack_from(buf, pos)
        pos += 7
        if pos + kn > end:
            raise TruncatedError("key truncated", offset=pos)
        key = str(buf[pos:pos + kn], "utf-8")
        pos += kn
        opm = _OPS.get(op)
        if opm is not h.WalOp.INSERT:
            raise ConstraintError("only INSERT in this probe", offset=start + 4)
        if pos + 4 > end:
            raise TruncatedError("data length truncated", offset=pos)
        (dn,) = _U32.unpack_from(buf, pos)
        pos += 4
        if pos + dn > end:
            raise TruncatedError("data truncated", offset=pos)
        data = buf[pos:pos + dn]
        pos += dn
        if pos + 2 > end:
            raise TruncatedError("meta count truncated", offset=pos)
        (mc,) = _U16.unpack_from(buf, pos)
        pos += 2
        meta = []
        for _ in range(mc):
            if pos + 2 > end:
                raise TruncatedError("meta key truncated", offset=pos)
            (n,) = _U16.unpack_from(buf, pos)
            pos += 2
            k = str(buf[pos:pos + n], "utf-8")
            pos += n
            if pos + 2 > end:
                raise TruncatedError("meta value truncated", offset=pos)
            (n,) = _U16.unpack_from(buf, pos)
            pos += 2
            v = str(buf[pos:pos + n], "utf-8")
            pos += n
            meta.append(MetaPair(k, v))
        if dims:
            if pos + tail_len > end:
                raise TruncatedError("tail truncated", offset=pos)
            it = iter(tail_st.unpack_from(buf, pos))
            pos += tail_len
            tail = TailFull([hi << 64 | lo for lo, hi in zip(it, it, strict=True)])
        else:
            tail = None
        if pos + 4 > end:
            raise TruncatedError("crc truncated", offset=pos)
        (crc,) = _U32.unpack_from(buf, pos)
        if crc != crc32(buf[start:pos]):
            raise ChecksumError("crc32 mismatch", offset=pos)
        pos += 4
        append(WalEntry(seq, opm, key, InsertBody(data, meta, tail)))
    return out


def hand_encode(entries: list, dims: int) -> list:
    """Encode each entry to its own ``bytes`` (the generated API's shape)."""
    crc32 = zlib.crc32
    res = []
    for e in entries:
        b = e.body
        kb = e.key.encode("utf-8")
        out = bytearray(_HEAD.pack(e.seq, e.op, len(kb)))
        out += kb
        out += _U32.pack(len(b.data))
        out += b.data
        out += _U16.pack(len(b.meta))
        for m in b.meta:
            k = m.key.encode("utf-8")
            v = m.value.encode("utf-8")
            out += _U16.pack(len(k))
            out += k
            out += _U16.pack(len(v))
            out += v
        if dims:
            if len(b.tail.dims) != dims:
                raise ValueError("wrong dims")
            out += b"".join([x.to_bytes(16, "little", signed=True) for x in b.tail.dims])
        out += _U32.pack(crc32(out))
        res.append(bytes(out))
    return res


# -- the generated fast path -------------------------------------------------------------

def gen_decode(buf: bytes, dims: int) -> list:
    return [v for v, _ in h.iter_wal_entry(buf, semantic_dims=dims, tail_layout=_FULL)]


def gen_encode(entries: list, dims: int) -> list:
    enc = h.encode_wal_entry
    return [enc(e, semantic_dims=dims, tail_layout=_FULL) for e in entries]


def _once(fn, *args) -> float:
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        fn(*args)
        return time.perf_counter() - t0
    finally:
        gc.enable()


def _paired(hand: list[float], gen: list[float]) -> float:
    return round(statistics.median(a / b for a, b in zip(hand, gen, strict=True)), 3)


def measure(n: int, runs: int) -> dict:
    report = {"entries": n, "runs": runs}
    for dims in (DIMS, 0):
        buf, entries = corpus(n, dims)
        # same values both ways before any timing
        assert gen_decode(buf, dims) == hand_decode(buf, dims) == entries
        assert b"".join(gen_encode(entries, dims)) == b"".join(hand_encode(entries, dims)) == buf
        times: dict[str, list[float]] = {"gen_decode": [], "hand_decode": [],
                                         "gen_encode": [], "hand_encode": []}
        for fn, args in ((gen_decode, (buf, dims)), (hand_decode, (buf, dims)),
                         (gen_encode, (entries, dims)), (hand_encode, (entries, dims))):
            fn(*args)  # warm-up
        for i in range(runs):
            pairs = [("gen_decode", gen_decode, buf), ("hand_decode", hand_decode, buf),
                     ("gen_encode", gen_encode, entries), ("hand_encode", hand_encode, entries)]
            if i % 2:  # alternate who goes first
                pairs = [pairs[1], pairs[0], pairs[3], pairs[2]]
            for name, fn, arg in pairs:
                times[name].append(_once(fn, arg, dims))
        med = {k: statistics.median(v) for k, v in times.items()}
        case = "tail20" if dims else "notail"
        report[case] = {
            "bytes": len(buf),
            "median_s": {k: round(v, 4) for k, v in med.items()},
            "decode_ratio": round(med["hand_decode"] / med["gen_decode"], 3),
            "encode_ratio": round(med["hand_encode"] / med["gen_encode"], 3),
            # the median of per-round ratios: each round times both contenders back to
            # back, so load that drifts between rounds cancels out
            "decode_ratio_paired": _paired(times["hand_decode"], times["gen_decode"]),
            "encode_ratio_paired": _paired(times["hand_encode"], times["gen_encode"]),
        }
    return report


def _use_module(path: str) -> None:
    """Time another generated htt module; the corpus and the hand code use its classes."""
    global h, _OPS, _FULL
    import importlib.util
    spec = importlib.util.spec_from_file_location("_probe_htt", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while building
    spec.loader.exec_module(mod)
    h = mod
    _OPS = {m.value: m for m in h.WalOp}
    _FULL = h.SemTailLayout.full


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--module", help="an alternative generated htt module file (e.g. one "
                    "generated before a generator change) to time as the generated path")
    a = ap.parse_args()
    if a.module:
        _use_module(a.module)
    print(json.dumps(measure(a.entries, a.runs), indent=2))


if __name__ == "__main__":
    main()
