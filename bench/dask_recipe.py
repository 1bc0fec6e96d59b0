"""The Dask recipe of docs/performance.md: generated decoders over a corpus with ``dask.bag``.

The generated decoders are pure functions over bytes, so a corpus is an embarrassingly
parallel map: one task per file, each returning a small summary (never the decoded
objects, which would have to be pickled back to the client). ``decode_file`` is the
function the workers run; it imports only the generated module of the family it needs.
"""

from __future__ import annotations

import importlib
import mmap
import os
from typing import Any

from ..runtime.errors import DecodeError

# magic at offset 0 -> (generated module, top-level record, a run of records?)
MAGICS: dict[bytes, tuple[str, str, bool]] = {
    b"HTT\x00": ("htt", "htt_file", False),
    b"ZEPEMBED\x01\x00": ("ze", "frame_file", False),
    b"ZEPEMBED\x0b\x00": ("ze", "wal_file", False),
}


def decode_file(path: str) -> dict[str, Any]:
    """Decode one file completely; a picklable summary (path, ok, records, error)."""
    out: dict[str, Any] = {"path": path, "ok": False, "records": 0,
                           "bytes": os.path.getsize(path)}
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        head = mm[:16]
        rule = next((v for k, v in MAGICS.items() if head.startswith(k)), None)
        if rule is None:
            out["error"] = "unknown format"
            return out
        name, record, repeat = rule
        mod = importlib.import_module(f"bytewright.generated.{name}")
        dec = getattr(mod, f"decode_{record}")
        mv = memoryview(mm)
        try:
            pos, n = 0, 0
            while True:
                _, pos = dec(mv, pos)
                n += 1
                if not repeat or pos >= len(mv):
                    break
            out.update(ok=True, records=n, family=name)
        except DecodeError as exc:
            out.update(error=exc.message, offset=exc.offset, field=exc.path)
        finally:
            mv.release()
    return out


def verify_corpus(paths: list[str], n_workers: int = 2) -> list[dict[str, Any]]:
    """Run ``decode_file`` over ``paths`` on a local cluster of ``n_workers`` processes."""
    import dask.bag as db
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        bag = db.from_sequence(paths, npartitions=max(1, min(len(paths), 4 * n_workers)))
        return bag.map(decode_file).compute(scheduler=client.get)
