"""Benchmark: pile refresh throughput, and refresh cost against blob payload size.

Run: ``.venv/bin/python -m bytewright.bench.pile [--small 100000] [--large 1000] [--json]``.

- ``small``: refresh of a fresh ``Pile`` over N small blobs (8..64 bytes, one or two
  blocks each): records per second;
- ``payload_size``: refresh time of 1,000 blobs of 1 MiB against 1,000 blobs of 1 KiB.
  Refresh reads only each record's first block through ``frame_head`` (payloads are
  neither read nor hashed), so the two times should be close although the files differ
  1000x in size.

Files are written to a temporary folder with the generated encoder (``encode_blob``) and
removed afterwards; each figure is the best of ``repeat`` refreshes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

from bytewright.runtime.pile import Pile, encode_blob


def _write(path: str, payloads) -> int:
    n = 0
    with open(path, "wb") as f:
        for i, payload in enumerate(payloads):
            f.write(encode_blob(payload, 1_700_000_000_000 + i))
            n += 1
    return n


def _refresh_time(path: str, repeat: int) -> tuple[float, int]:
    best, records = float("inf"), 0
    for _ in range(repeat):
        with Pile.open(path, writable=False, refresh=False) as p:
            t0 = time.perf_counter()
            p.refresh()
            best = min(best, time.perf_counter() - t0)
            records = p.records
    return best, records


def bench(small: int = 100_000, large: int = 1_000, repeat: int = 3) -> dict:
    tmp = tempfile.mkdtemp(prefix="bw-pile-bench-")
    try:
        small_path = os.path.join(tmp, "small.pile")
        _write(small_path, (i.to_bytes(8, "little") * (1 + i % 8) for i in range(small)))
        t_small, n_small = _refresh_time(small_path, repeat)
        base = os.urandom(1 << 20)
        out: dict = {"small": {"blobs": n_small, "bytes": os.path.getsize(small_path),
                               "refresh_s": t_small, "records_per_s": n_small / t_small}}
        os.remove(small_path)
        sizes = {}
        for label, size in (("1KiB", 1024), ("1MiB", 1 << 20)):
            path = os.path.join(tmp, f"{label}.pile")
            _write(path, (i.to_bytes(8, "little") + base[8:size] for i in range(large)))
            t, n = _refresh_time(path, repeat)
            sizes[label] = {"blobs": n, "bytes": os.path.getsize(path), "refresh_s": t,
                            "records_per_s": n / t}
            os.remove(path)
        sizes["ratio_1MiB_over_1KiB"] = sizes["1MiB"]["refresh_s"] / sizes["1KiB"]["refresh_s"]
        out["payload_size"] = sizes
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def report(r: dict) -> str:
    s, p = r["small"], r["payload_size"]
    return "\n".join([
        f"pile refresh, {s['blobs']:,} small blobs ({s['bytes'] / 2**20:.1f} MiB): "
        f"{s['refresh_s']:.3f} s = {s['records_per_s']:,.0f} records/s",
        f"pile refresh, {p['1KiB']['blobs']:,} blobs of 1 KiB ({p['1KiB']['bytes'] / 2**20:.1f} MiB): "
        f"{p['1KiB']['refresh_s'] * 1000:.1f} ms",
        f"pile refresh, {p['1MiB']['blobs']:,} blobs of 1 MiB ({p['1MiB']['bytes'] / 2**30:.2f} GiB): "
        f"{p['1MiB']['refresh_s'] * 1000:.1f} ms (x{p['ratio_1MiB_over_1KiB']:.2f} of 1 KiB)",
    ])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bytewright.bench.pile")
    ap.add_argument("--small", type=int, default=100_000)
    ap.add_argument("--large", type=int, default=1_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    r = bench(args.small, args.large, args.repeat)
    print(json.dumps(r, indent=2) if args.json else report(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
