"""Store benchmark: replay throughput against decode-only throughput, and compaction.

``bench_htt_store(n_replay, n_compact)`` builds deterministic files in a temp dir
(one ``/bench`` directory INSERT, then INSERTs of ``/bench/NNNNNNN`` with a 32-byte
payload and two metadata pairs), then times:

* ``decode_only``: ``iter_wal_entry`` over the WAL bytes (the codec alone);
* ``decode_single``: a ``decode_wal_entry`` call per entry;
* ``replay``: ``Store.open(readonly=True)`` of the same file (read, decode, recover,
  apply to the in-memory tree);
* ``compact``: ``Store.compact()`` of an ``n_compact``-node WAL-only file.
"""

from __future__ import annotations

import os
import tempfile
import time

from ...generated.htt import (
    InsertBody,
    MetaPair,
    WalEntry,
    WalHeader,
    WalOp,
    decode_wal_entry,
    encode_wal_entry,
    encode_wal_header,
    iter_wal_entry,
)
from .store import Store


def _build(path: str, n: int) -> tuple[int, int]:
    """A WAL-only file of ``n`` INSERTs; returns (WAL entries offset, file size)."""
    Store.create(path).close()
    with open(path, "rb") as fh:
        head = fh.read()
    wal_offset = len(head) - 8
    params = {"semantic_dims": 0, "tail_layout": 0}
    parts = [encode_wal_entry(WalEntry(1, WalOp.INSERT, "/bench", InsertBody(
        b"", [MetaPair("_child_index", "0"), MetaPair("content_type",
                                                      "application/x-directory")], None)),
        **params)]
    for i in range(1, n):
        body = InsertBody(i.to_bytes(4, "little") * 8,
                          [MetaPair("_child_index", str(i - 1)), MetaPair("kind", "bench")],
                          None)
        parts.append(encode_wal_entry(WalEntry(i + 1, WalOp.INSERT, f"/bench/{i:07d}", body),
                                      **params))
    data = head[:wal_offset] + encode_wal_header(WalHeader(n, 1)) + b"".join(parts)
    with open(path, "wb") as fh:
        fh.write(data)
    return wal_offset + 8, len(data)


def bench_htt_store(n_replay: int = 1_000_000, n_compact: int = 100_000) -> dict:
    with tempfile.TemporaryDirectory(prefix="htt-bench-") as tmp:
        path = os.path.join(tmp, "replay.htt")
        start, size = _build(path, n_replay)
        with open(path, "rb") as fh:
            buf = fh.read()
        params = {"semantic_dims": 0, "tail_layout": 0}

        t0 = time.perf_counter()
        count = sum(1 for _ in iter_wal_entry(buf, start, **params))
        t_decode = time.perf_counter() - t0
        assert count == n_replay

        t0 = time.perf_counter()
        pos, mv = start, memoryview(buf)
        for _ in range(n_replay):
            _, pos = decode_wal_entry(mv, pos, **params)
        t_single = time.perf_counter() - t0

        t0 = time.perf_counter()
        store = Store.open(path, readonly=True)
        t_replay = time.perf_counter() - t0
        assert len(store) == n_replay and store.scan.problem is None
        del store

        cpath = os.path.join(tmp, "compact.htt")
        _build(cpath, n_compact)
        store = Store.open(cpath)
        t0 = time.perf_counter()
        result = store.compact()
        t_compact = time.perf_counter() - t0
        store.close()
        t0 = time.perf_counter()
        reopened = Store.open(cpath, readonly=True)
        t_snapshot = time.perf_counter() - t0
        assert len(reopened) == n_compact

    return {
        "replay_entries": n_replay,
        "wal_bytes": size - start,
        "decode_only_entries_per_s": n_replay / t_decode,
        "decode_single_entries_per_s": n_replay / t_single,
        "replay_entries_per_s": n_replay / t_replay,
        "replay_vs_decode_only": t_decode / t_replay,
        "replay_seconds": t_replay,
        "compact_nodes": n_compact,
        "compact_seconds": t_compact,
        "compact_nodes_per_s": n_compact / t_compact,
        "compacted_file_bytes": result["file_bytes"],
        "snapshot_load_seconds": t_snapshot,
        "snapshot_load_nodes_per_s": n_compact / t_snapshot,
    }
