"""Benchmark: decoding HTT WAL INSERT entries, four ways, side by side in one run.

The corpus is deterministic (seeded): N INSERT entries with a path key, a payload and
two metadata pairs. Every decoder returns the same object model and verifies each CRC;
the run asserts they agree before timing anything.
"""

from __future__ import annotations

import gc
import io
import random
import time

from bytewright.generated import htt as h

from . import baseline_htt


def corpus(n: int, seed: int = 1) -> bytes:
    rng = random.Random(seed)
    out = bytearray()
    for seq in range(1, n + 1):
        key = f"/store/{rng.randrange(1000):03d}/node_{seq:07d}"
        data = rng.randbytes(rng.randrange(16, 128))
        meta = [h.MetaPair("_child_index", str(seq % 977)),
                h.MetaPair("kind", rng.choice(["leaf", "note", "blob"]))]
        out += h.encode_wal_entry(h.WalEntry(seq, h.WalOp.INSERT, key,
                                             h.InsertBody(data, meta, None)),
                                  semantic_dims=0, tail_layout=0)
    return bytes(out)


def run_fast(buf: bytes) -> list:
    return [v for v, _ in h.iter_wal_entry(buf, semantic_dims=0, tail_layout=0)]


def run_fast_single(buf: bytes) -> list:
    """One public ``decode_wal_entry`` call per entry (includes per-call argument handling)."""
    mv = memoryview(buf)
    end, pos, out = len(mv), 0, []
    layout = h.SemTailLayout.full
    dec = h.decode_wal_entry
    while pos < end:
        v, pos = dec(mv, pos, semantic_dims=0, tail_layout=layout)
        out.append(v)
    return out


def run_baseline(buf: bytes) -> list:
    mv = memoryview(buf)
    end, pos, out = len(mv), 0, []
    dec = baseline_htt.decode_wal_entry
    while pos < end:
        v, pos = dec(mv, pos, 0)
        out.append(v)
    return out


def run_construct(buf: bytes, compiled: bool) -> list:
    con = h._compiled("wal_entry") if compiled else h.C_wal_entry
    stream = io.BytesIO(buf)
    end, out = len(buf), []
    conv = h._c2m_wal_entry
    layout = h.SemTailLayout.full
    while stream.tell() < end:
        c = con.parse_stream(stream, semantic_dims=0, tail_layout=layout)
        out.append(conv(c, 0, layout))
    return out


def timed(fn, *args, repeat: int = 3) -> float:
    """Best of ``repeat`` runs with the cyclic GC paused, as ``timeit`` does.

    Every contender allocates the same object model, so collector pauses would only add
    the same absolute cost to each and blur the codec ratios.
    """
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            fn(*args)
            best = min(best, time.perf_counter() - t0)
        finally:
            gc.enable()
    return best


def bench(n: int = 100_000, construct_n: int | None = None) -> dict:
    buf = corpus(n)
    cn = construct_n or min(n, 20_000)
    small = corpus(cn)
    ref = run_fast(buf)
    assert run_baseline(buf) == ref, "baseline disagrees with the fast path"
    assert run_construct(small, False) == ref[:cn], "Construct disagrees with the fast path"
    assert run_construct(small, True) == ref[:cn], "compiled Construct disagrees"
    assert run_fast_single(buf) == ref
    t_fast = timed(run_fast, buf)
    t_single = timed(run_fast_single, buf)
    t_base = timed(run_baseline, buf)
    t_con = timed(run_construct, small, False, repeat=1) * n / cn
    t_comp = timed(run_construct, small, True, repeat=2) * n / cn
    rate = {k: n / t for k, t in (("fast", t_fast), ("fast_single", t_single),
                                  ("baseline", t_base),
                                  ("construct", t_con), ("compiled", t_comp))}
    return {
        "entries": n, "bytes": len(buf), "rates_per_s": rate,
        "mb_per_s_fast": len(buf) / t_fast / 1e6,
        "ratio_fast_vs_baseline": t_base / t_fast,
        "ratio_fast_single_vs_baseline": t_base / t_single,
        "ratio_fast_vs_construct": t_con / t_fast,
        "ratio_fast_vs_compiled": t_comp / t_fast,
        "construct_sampled_entries": cn,
    }
