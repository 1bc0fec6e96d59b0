"""ZE benchmarks: WAL replay (records/s) and graph-node-block decoding (MB/s), each beside a
plain hand-written ``struct`` baseline of the same layout, in one run."""

from __future__ import annotations

import gc
import struct
import time

import numpy as np
import xxhash

from ..generated import ze
from ..runtime.ze import graph, wal


def _best(fn, repeat: int = 3) -> float:
    gc.disable()
    try:
        best = float("inf")
        for _ in range(repeat):
            t = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t)
        return best
    finally:
        gc.enable()


def _wal(n: int) -> bytes:
    recs = []
    for i in range(n):
        body = ze.OpUpsertV1(ze.PayloadV1Header(), i + 1, 1, ze.F32Vector([0.5] * 8))
        recs.append((1, wal.encode_payload(1, body)))
    return wal.wal_bytes(1, recs)


_REC = struct.Struct("<IQH")


def _baseline_replay(data: bytes) -> int:
    """Hand-written framing + op-1 decode: header, then (len, seq, op), payload, xxh3."""
    mv = memoryview(data)
    pos, n, expected, count = 40, len(data), struct.unpack_from("<Q", data, 32)[0], 0
    h = xxhash.xxh3_64_intdigest
    while pos < n:
        plen, seq, op = _REC.unpack_from(mv, pos)
        end = pos + 14 + plen
        if h(mv[pos:end]) != struct.unpack_from("<Q", mv, end)[0] or seq != expected:
            break
        ver, flags = struct.unpack_from("<HH", mv, pos + 14)
        doc = int.from_bytes(mv[pos + 18:pos + 34], "little")
        rev, dims = struct.unpack_from("<QI", mv, pos + 34)
        vec = struct.unpack_from(f"<{dims}f", mv, pos + 46)
        count += 1 + (doc, rev, vec, ver, flags)[0] * 0
        expected += 1
        pos = end + 8
    return count


def _runtime_replay(data: bytes) -> int:
    r = wal.replay(data, decode=True)
    done, _ = wal.commit(r.records)
    return len(done)


def _blocks(n: int) -> bytes:
    nodes = [ze.GraphNodeBlock(bytes(64), ze.Bit4Factors(1.0, 1.0, 1.0), 2,
                               ze.GraphBlockFlags(), [(i + 1) % n, (i + 2) % n] + [0xFFFFFFFF] * 42)
             for i in range(n)]
    return graph.build_blocks(128, 128, 44, nodes)


def _baseline_blocks(data: bytes) -> int:
    """Hand-written per-block struct decode (codes, factors, degree, flags, neighbours)."""
    mv = memoryview(data)
    stride, count = struct.unpack_from("<II", mv, len(data) - 128 + 24)
    total = 0
    st = struct.Struct("<64s3fBBH44I")
    for i in range(count):
        row = st.unpack_from(mv, i * stride)
        total += row[4]
    return total


def bench(wal_records: int = 20_000, nodes: int = 20_000) -> dict:
    data = _wal(wal_records)
    fast = _best(lambda: _runtime_replay(data))
    base = _best(lambda: _baseline_replay(data))
    blocks = _blocks(nodes)
    mb = len(blocks) / 1e6
    view_t = _best(lambda: graph.open_blocks(blocks))
    base_t = _best(lambda: _baseline_blocks(blocks))
    g = graph.open_blocks(blocks)
    assert int(g.view["degree"].sum()) == _baseline_blocks(blocks)
    assert np.shares_memory(g.view, np.frombuffer(blocks, np.uint8))
    return {
        "wal_replay": {"records": wal_records,
                       "runtime_records_per_s": round(wal_records / fast),
                       "struct_baseline_records_per_s": round(wal_records / base),
                       "ratio_vs_baseline": round(base / fast, 2)},
        "graph_node_blocks": {"nodes": nodes, "bytes": len(blocks),
                              "numpy_view_validated_MB_per_s": round(mb / view_t, 1),
                              "struct_baseline_MB_per_s": round(mb / base_t, 1),
                              "ratio_vs_baseline": round(base_t / view_t, 2)},
    }


def report(r: dict) -> str:
    w, g = r["wal_replay"], r["graph_node_blocks"]
    return "\n".join([
        f"ZE WAL replay: {w['records']:,} op-1 records (framing + typed decode + commit)",
        f"  runtime         {w['runtime_records_per_s']:>12,} records/s",
        f"  struct baseline {w['struct_baseline_records_per_s']:>12,} records/s",
        f"  runtime vs struct: {w['ratio_vs_baseline']:.2f}x",
        f"ZE graph node blocks: {g['nodes']:,} nodes, {g['bytes']:,} bytes",
        f"  numpy view + validation {g['numpy_view_validated_MB_per_s']:>10,.1f} MB/s",
        f"  struct baseline         {g['struct_baseline_MB_per_s']:>10,.1f} MB/s",
        f"  view vs struct: {g['ratio_vs_baseline']:.2f}x",
    ])


if __name__ == "__main__":
    print(report(bench()))
