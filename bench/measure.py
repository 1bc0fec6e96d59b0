"""Scaling and memory measurements of issue 16 (each case in a fresh process).

``python -m bytewright.bench.measure [--quick] [--json FILE]`` prints, as JSON:

- ``htt_replay``: HTT replay (``Store.open(readonly=True)``) against decode-only
  (``iter_wal_entry`` over the same WAL bytes) at 10k and 100k entries, entries/s, the
  ratio, peak RSS against the file size;
- ``htt_tail20``: replay and ``htt verify`` peak RSS on the larger size with a 20-dim
  Q64.64 placement per entry;
- ``ze_replay``: ZE WAL ``replay(decode=True)`` + ``commit`` at 10k and 100k op-1 records,
  records/s and peak RSS against the file size;
- ``large_file``: peak RSS of decode (``decode_htt_file`` of the whole file), iterate
  (``iter_wal_entry`` over the mapped WAL, values dropped) and ``verify`` of one ~200 MB
  HTT file (190k INSERTs with 1 KiB payloads; the issue's target is stated for 1 GB);
- ``kladde``: bytes of memory per statement held by ``runtime.kladde.load``.

Peak RSS is ``VmHWM`` of the child that ran one case; a baseline child that only
imports the same modules gives the interpreter's own share (``baseline_rss_mb``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

PY = sys.executable


def _child(code: str) -> dict:
    """Run ``code`` in a fresh interpreter; it prints one JSON object; add peak RSS."""
    pre = ("import json, resource, time, mmap, os, gc\n")
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the forking parent, while
    # the high-water mark belongs to the address space exec created
    post = ("\n_out['peak_rss_mb'] = [int(l.split()[1]) for l in open('/proc/self/status')"
            " if l.startswith('VmHWM')][0] / 1024\n"
            # at exit: anonymous memory (heap) vs file-backed pages (an mmap'd input)
            "_out['rss_anon_end_mb'] = [int(l.split()[1]) for l in open('/proc/self/status')"
            " if l.startswith('RssAnon')][0] / 1024\n"
            "print(json.dumps(_out))\n")
    proc = subprocess.run([PY, "-c", pre + code + post], capture_output=True, text=True,
                          check=True, timeout=600)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _build_htt(path: str, n: int, payload: int = 32) -> int:
    from bytewright.generated import htt as h
    from bytewright.runtime.htt.bench import _build

    if payload == 32:
        return _build(path, n)[1]
    # bigger payloads: the same file shape as runtime/htt/bench.py, 1 KiB per entry
    from bytewright.runtime.htt.store import Store

    Store.create(path).close()
    with open(path, "rb") as fh:
        head = fh.read()
    wal_offset = len(head) - 8
    params = {"semantic_dims": 0, "tail_layout": 0}
    with open(path, "wb") as fh:
        fh.write(head[:wal_offset] + h.encode_wal_header(h.WalHeader(n, 1)))
        fh.write(h.encode_wal_entry(h.WalEntry(1, h.WalOp.INSERT, "/bench", h.InsertBody(
            b"", [h.MetaPair("_child_index", "0"),
                  h.MetaPair("content_type", "application/x-directory")], None)), **params))
        blob = os.urandom(payload)
        for i in range(1, n):
            body = h.InsertBody(i.to_bytes(8, "little") + blob[8:],
                                [h.MetaPair("_child_index", str(i - 1))], None)
            fh.write(h.encode_wal_entry(h.WalEntry(i + 1, h.WalOp.INSERT, f"/bench/{i:07d}",
                                                   body), **params))
    return os.path.getsize(path)


def _build_htt_tail20(path: str, n: int) -> int:
    """``n`` INSERTs each with a 20-dim Q64.64 placement (the issue's replay corpus)."""
    import random

    from bytewright.generated import htt as h
    from bytewright.runtime.htt.store import Store

    Store.create(path, semantic_dims=20).close()
    with open(path, "rb") as fh:
        head = fh.read()
    wal_offset = len(head) - 8
    params = {"semantic_dims": 20, "tail_layout": 0}
    rnd = random.Random(1)
    with open(path, "wb") as fh:
        fh.write(head[:wal_offset] + h.encode_wal_header(h.WalHeader(n, 1)))
        fh.write(h.encode_wal_entry(h.WalEntry(1, h.WalOp.INSERT, "/bench", h.InsertBody(
            b"", [h.MetaPair("_child_index", "0"),
                  h.MetaPair("content_type", "application/x-directory")],
            h.TailFull([0] * 20))), **params))
        for i in range(1, n):
            tail = h.TailFull([rnd.randrange(-2**80, 2**80) for _ in range(20)])
            body = h.InsertBody(i.to_bytes(4, "little") * 8,
                                [h.MetaPair("_child_index", str(i - 1)),
                                 h.MetaPair("kind", "bench")], tail)
            fh.write(h.encode_wal_entry(h.WalEntry(i + 1, h.WalOp.INSERT, f"/bench/{i:07d}",
                                                   body), **params))
    return os.path.getsize(path)


BASE = "from bytewright.generated import htt as h\nfrom bytewright.runtime.htt.store import Store\n_out = {}\n"

REPLAY = BASE + """
t = time.perf_counter(); s = Store.open(PATH, readonly=True); dt = time.perf_counter() - t
_out['replay_s'] = dt
"""
DECODE_ONLY = BASE + """
data = open(PATH, 'rb').read(); start = WAL
t = time.perf_counter(); n = sum(1 for _ in h.iter_wal_entry(data, start, semantic_dims=0, tail_layout=0))
_out['decode_s'] = time.perf_counter() - t; _out['n'] = n
"""
DECODE_FILE = BASE + """
f = open(PATH, 'rb'); mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
t = time.perf_counter(); v, _ = h.decode_htt_file(memoryview(mm)); _out['s'] = time.perf_counter() - t
"""
ITERATE = BASE + """
f = open(PATH, 'rb'); mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
t = time.perf_counter(); n = 0
for _v, _e in h.iter_wal_entry(memoryview(mm), WAL, semantic_dims=0, tail_layout=0): n += 1
_out['s'] = time.perf_counter() - t; _out['n'] = n
"""
ZE_REPLAY = """
from bytewright.runtime.ze import wal
_out = {}
data = open(PATH, 'rb').read()
t = time.perf_counter(); r = wal.replay(data, decode=True); done, _ = wal.commit(r.records)
_out['s'] = time.perf_counter() - t; _out['n'] = len(done)
"""
KLADDE = """
from bytewright.runtime.kladde import load
_out = {}
data = open(PATH, 'rb').read()
import tracemalloc; tracemalloc.start()
f = load(data); n = len(f.statements)
cur, peak = tracemalloc.get_traced_memory()
_out['n'] = n; _out['held_bytes'] = cur; _out['peak_traced_bytes'] = peak
"""
HTT_VERIFY = BASE + """
import contextlib, io
from bytewright.cli.main import main
with contextlib.redirect_stdout(io.StringIO()):
    t = time.perf_counter(); _out['code'] = main(['htt', 'verify', PATH])
_out['s'] = time.perf_counter() - t
"""
BASELINE = BASE


def _sub(code: str, **kw) -> str:
    for k, v in kw.items():
        code = code.replace(k, repr(v))
    return code


def measure(quick: bool = False) -> dict:
    out: dict = {"note": "shared 2-core machine, 6 engineers: noisy; single runs"}
    tmp = tempfile.mkdtemp(prefix="bw-measure-")
    out["baseline_rss_mb"] = _child(BASELINE)["peak_rss_mb"]
    # the same imports without the work: what each kind of child costs before any data
    ze_base = _child("from bytewright.runtime.ze import wal\n_out = {}\n")["peak_rss_mb"]
    out["baseline_ze_rss_mb"] = ze_base
    sizes = (2_000, 10_000) if quick else (10_000, 100_000)
    out["htt_replay"] = {}
    for n in sizes:
        path = os.path.join(tmp, f"r{n}.htt")
        size = _build_htt(path, n)
        wal = _first_entry(path)
        r = _child(_sub(REPLAY, PATH=path))
        d = _child(_sub(DECODE_ONLY, PATH=path, WAL=wal))
        out["htt_replay"][n] = {
            "file_mb": size / 2**20, "replay_entries_per_s": n / r["replay_s"],
            "decode_only_entries_per_s": n / d["decode_s"],
            "replay_vs_decode_only": d["decode_s"] / r["replay_s"],
            "replay_peak_rss_mb": r["peak_rss_mb"],
            "replay_rss_over_file": (r["peak_rss_mb"] - out["baseline_rss_mb"]) / (size / 2**20)}
        os.remove(path)
    # replay and `htt verify` with 20-dim placements (what the state holds per node)
    n = sizes[-1]
    path = os.path.join(tmp, f"t{n}.htt")
    size = _build_htt_tail20(path, n)
    r = _child(_sub(REPLAY, PATH=path))
    v = _child(_sub(HTT_VERIFY, PATH=path))
    out["htt_tail20"] = {
        "entries": n, "file_mb": size / 2**20, "replay_s": r["replay_s"],
        "replay_peak_rss_mb": r["peak_rss_mb"],
        "replay_rss_over_file": (r["peak_rss_mb"] - out["baseline_rss_mb"]) / (size / 2**20),
        "htt_verify_ok": v["code"] == 0, "htt_verify_s": v["s"],
        "htt_verify_peak_rss_mb": v["peak_rss_mb"]}
    os.remove(path)
    from bytewright.bench import ze as ze_bench
    out["ze_replay"] = {}
    for n in sizes:
        path = os.path.join(tmp, f"z{n}.wal")
        with open(path, "wb") as fh:
            fh.write(ze_bench._wal(n))
        size = os.path.getsize(path)
        r = _child(_sub(ZE_REPLAY, PATH=path))
        out["ze_replay"][n] = {"file_mb": size / 2**20, "records_per_s": n / r["s"],
                               "peak_rss_mb": r["peak_rss_mb"],
                               "rss_over_file": (r["peak_rss_mb"] - ze_base) / (size / 2**20)}
        os.remove(path)
    n_big = 19_000 if quick else 190_000
    path = os.path.join(tmp, "big.htt")
    size = _build_htt(path, n_big, payload=1024)
    wal = _first_entry(path)
    big = {"file_mb": size / 2**20, "entries": n_big}
    big["decode_peak_rss_mb"] = _child(_sub(DECODE_FILE, PATH=path))["peak_rss_mb"]
    it = _child(_sub(ITERATE, PATH=path, WAL=wal))
    big["iterate_peak_rss_mb"] = it["peak_rss_mb"]
    big["iterate_anon_rss_at_end_mb"] = it["rss_anon_end_mb"]  # the rest is the mapped file
    verify = ("from bytewright.cli import verify\nfrom bytewright.generator import project as pm\n"
              "_out = {}\nt = verify._table_of(pm.resolve(None))\n"
              "r = verify.verify_many([PATH], t)\n_out['ok'] = r[0]['ok']\n")
    v = _child(_sub(verify, PATH=path))
    big["verify_baseline_rss_mb"] = _child(_sub(verify.replace(
        "r = verify.verify_many([PATH], t)\n_out['ok'] = r[0]['ok']\n", ""), PATH=path))[
        "peak_rss_mb"]
    big["verify_peak_rss_mb"], big["verify_ok"] = v["peak_rss_mb"], v["ok"]
    out["large_file"] = big
    os.remove(path)
    out["verify_jobs"] = verify_jobs(tmp, 20_000 if quick else 600_000)
    from bytewright.bench import kladde as kladde_bench
    n_k = 20_000 if quick else 200_000
    path = os.path.join(tmp, "k.kladde")
    with open(path, "wb") as fh:
        fh.write(kladde_bench.corpus(n_k))
    k = _child(_sub(KLADDE, PATH=path))
    out["kladde"] = {"statements": k["n"], "file_mb": os.path.getsize(path) / 2**20,
                     "bytes_per_statement": k["held_bytes"] / k["n"],
                     "projected_1M_mb": k["held_bytes"] / k["n"] * 1e6 / 2**20}
    os.remove(path)
    os.rmdir(tmp)
    return out


def verify_jobs(tmp: str, records: int) -> dict:
    """``verify --jobs N`` over N equal ZE WAL files against ``--jobs 1``, N = 1, 2 (the
    machine's cores); wall time of ``verify_many`` including the pool's start-up."""
    from bytewright.bench import ze as ze_bench
    from bytewright.cli import verify
    from bytewright.generator import project as pm

    data = ze_bench._wal(records)
    files = []
    for i in range(2):
        files.append(os.path.join(tmp, f"j{i}.wal"))
        with open(files[-1], "wb") as fh:
            fh.write(data)
    table = verify._table_of(pm.resolve(None))
    res: dict = {"file_mb": len(data) / 2**20, "records_per_file": records,
                 "cores": os.cpu_count()}

    def wall(fs: list[str], jobs: int) -> float:
        t = time.perf_counter()
        rs = verify.verify_many(fs, table, jobs)
        assert all(r["ok"] for r in rs)
        return time.perf_counter() - t

    one = min(wall(files[:1], 1) for _ in range(2))
    res["jobs1_1file_s"] = one
    for n in (1, 2):
        t1 = wall(files[:n], 1)
        tn = wall(files[:n], n)
        res[f"N{n}"] = {"jobs1_s": t1, "jobsN_s": tn, "speedup": t1 / tn,
                        "target_speedup": 0.8 * n, "met": t1 / tn >= 0.8 * n}
    for f in files:
        os.remove(f)
    return res


def _first_entry(path: str) -> int:
    """Offset of the first WAL entry (seq 1, key ``/bench``) in a file built above."""
    import bytewright.generated.htt as h

    with open(path, "rb") as fh:
        data = fh.read(4096)

    for off in range(0, min(len(data), 4096)):
        try:
            e, _ = h.decode_wal_entry(data, off, semantic_dims=0, tail_layout=0)
        except Exception:  # noqa: BLE001 - probing for the first entry
            continue
        if e.seq == 1 and e.key == "/bench":
            return off
    raise ValueError("no first entry")


def profile(n_wal: int = 20_000, n_replay: int = 100_000, top: int = 10) -> str:
    """cProfile, top functions by own time: the fast path on the tailed HTT corpus, the
    hand decoder on the same bytes, and an HTT replay (``Store.open``)."""
    import cProfile
    import io
    import pstats

    from bytewright.bench import hand, harness
    from bytewright.generated import htt as h
    from bytewright.runtime.htt.store import Store

    case = harness.htt_case("htt_wal_tail20", n_wal, 20)
    params = {"semantic_dims": 20, "tail_layout": h.SemTailLayout.full}
    texts = []

    def prof(label: str, fn) -> None:
        pr = cProfile.Profile()
        pr.enable()
        fn()
        pr.disable()
        buf = io.StringIO()
        pstats.Stats(pr, stream=buf).sort_stats("tottime").print_stats(top)
        body = buf.getvalue()
        texts.append(f"== {label}\n" + body[body.find("   ncalls"):].rstrip())

    prof(f"fast path, iter_wal_entry, {n_wal:,} entries with a 20-dim tail",
         lambda: list(h.iter_wal_entry(case.data, **params)))
    prof(f"hand decoder, same {n_wal:,} entries", lambda: hand.htt_wal(case.data, 20))
    tmp = tempfile.mkdtemp(prefix="bw-prof-")
    path = os.path.join(tmp, "p.htt")
    _build_htt(path, n_replay)
    prof(f"HTT replay, Store.open(readonly=True), {n_replay:,} entries",
         lambda: Store.open(path, readonly=True))
    os.remove(path)
    os.rmdir(tmp)
    return "\n\n".join(texts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bytewright.bench.measure")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--profile", action="store_true", help="print cProfile top 10 instead")
    args = ap.parse_args(argv)
    if args.profile:
        print(profile(*((2_000, 10_000) if args.quick else ())))
        return 0
    t0 = time.perf_counter()
    r = measure(args.quick)
    r["seconds"] = round(time.perf_counter() - t0, 1)
    text = json.dumps(r, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as fh:
            fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
