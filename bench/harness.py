"""Side-by-side benchmark of every decode/encode case against independent baselines.

For each case, in one run and on one corpus, every contender decodes (or encodes) the
same bytes: the generated fast path (``fast``), a careful hand-written ``struct`` codec
building the same dataclasses (``hand``, the baseline every ratio is computed against)
and building tuples (``hand_raw``), the project's generated Construct definitions
interpreted and compiled (``construct_gen``, ``construct_gen_compiled``), a plain
hand-written Construct description of the same layout (``construct_plain``,
``construct_plain_compiled``, HTT only) and the Kaitai-generated parser of the exported
``.ksy`` (``kaitai``: skipped with a message; see ``kaitai_status``).

Method: every contender's output is checked against the fast path's before timing
(``agree``); each timing is the median of ``repeat`` runs after one warm-up run; the
cyclic GC is collected before and disabled during every run of every contender alike.
Slow contenders (Construct) run on a prefix of the corpus and are scaled per item.
Ratios are ``time(hand) / time(contender)``: above 1 the contender is faster than hand.

``python -m bytewright.bench.harness [--quick] [--json FILE]`` or ``bytewright bench --all``.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import io
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import construct as cs

from bytewright.generated import htt as h
from bytewright.generated import pile as gp
from bytewright.generated import ze as z

from . import hand

SIZES = {  # items per case: default (< 5 min in all), quick (CI, < 60 s)
    "htt_wal": (100_000, 3_000), "htt_wal_tail20": (30_000, 1_000),
    "ze_op7_768": (5_000, 200), "ze_graph_nodes": (50_000, 2_000),
    "kladde_statements": (200_000, 5_000), "pile_frames": (50_000, 2_000),
}
CONSTRUCT_SHARE = 10  # Construct contenders time 1/10 of the corpus (and at most 5,000)


@dataclass
class Case:
    name: str
    unit: str
    n: int
    data: bytes
    decoders: dict[str, Callable[[Any], list]]
    raw_of: Callable[[Any], Any] | None = None  # dataclass -> the hand_raw tuple form
    encoders: dict[str, Callable[[list], bytes]] = field(default_factory=dict)
    sampled: dict[str, int] = field(default_factory=dict)  # contender -> prefix items
    prefix: Callable[[int], bytes] | None = None
    skipped: dict[str, str] = field(default_factory=dict)


def _time(fn: Callable, arg: Any, repeat: int) -> float:
    fn(arg)  # warm-up (also compiles caches: struct formats, compiled Construct)
    times = []
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            fn(arg)
            times.append(time.perf_counter() - t0)
        finally:
            gc.enable()
    return statistics.median(times)


def _stream_loop(con: Any, conv: Callable, params: dict) -> Callable[[bytes], list]:
    def run(buf: bytes) -> list:
        stream, end, out = io.BytesIO(buf), len(buf), []
        while stream.tell() < end:
            out.append(conv(con.parse_stream(stream, **params)))
        return out
    return run


# -- HTT WAL -------------------------------------------------------------------------------

def _htt_corpus(n: int, dims: int) -> tuple[bytes, list]:
    rng = random.Random(1)
    out, values = bytearray(), []
    layout = h.SemTailLayout.full
    for seq in range(1, n + 1):
        key = f"/store/{rng.randrange(1000):03d}/node_{seq:07d}"
        tail = (h.TailFull([rng.randrange(-(1 << 80), 1 << 80) for _ in range(dims)])
                if dims else None)
        meta = [h.MetaPair("_child_index", str(seq % 977)),
                h.MetaPair("kind", rng.choice(["leaf", "note", "blob"]))]
        v = h.WalEntry(seq, h.WalOp.INSERT, key,
                       h.InsertBody(rng.randbytes(rng.randrange(16, 128)), meta, tail))
        values.append(v)
        out += h.encode_wal_entry(v, semantic_dims=dims, tail_layout=layout)
    return bytes(out), values


def plain_construct_wal(dims: int) -> cs.Construct:
    """What a Construct user writes by hand for an INSERT entry (CRC checked after)."""
    s16 = cs.PascalString(cs.Int16ul, "utf8")
    fields = [
        "seq" / cs.Int32ul, "op" / cs.Const(1, cs.Int8ul), "key" / s16,
        "data" / cs.Prefixed(cs.Int32ul, cs.GreedyBytes),
        "meta" / cs.PrefixedArray(cs.Int16ul, cs.Struct("key" / s16, "value" / s16)),
    ]
    if dims:
        fields.append("tail" / cs.Array(dims, cs.BytesInteger(16, signed=True, swapped=True)))
    fields += ["end" / cs.Tell, "crc" / cs.Int32ul]
    return cs.Struct(*fields)


def _plain_wal_runner(con: cs.Construct, dims: int) -> Callable[[bytes], list]:
    import zlib

    def run(buf: bytes) -> list:
        stream, end, out, start = io.BytesIO(buf), len(buf), [], 0
        while start < end:
            c = con.parse_stream(stream)
            if zlib.crc32(buf[start:c.end]) != c.crc:
                raise ValueError(f"crc mismatch at {c.end}")
            start = c.end + 4
            out.append((c.seq, 1, c.key, c.data, [(m.key, m.value) for m in c.meta],
                        list(c.tail) if dims else None))
        return out
    return run


def _htt_raw(v: Any) -> tuple:
    b = v.body
    return (v.seq, 1, v.key, b.data, [(m.key, m.value) for m in b.meta],
            list(b.tail.dims) if b.tail is not None else None)


def htt_case(name: str, n: int, dims: int) -> Case:
    data, values = _htt_corpus(n, dims)
    layout = h.SemTailLayout.full
    params = {"semantic_dims": dims, "tail_layout": layout}
    plain = plain_construct_wal(dims)
    case = Case(name, "entries", n, data, {
        "fast": lambda b: [v for v, _ in h.iter_wal_entry(b, **params)],
        "hand": lambda b: hand.htt_wal(b, dims),
        "hand_raw": lambda b: hand.htt_wal(b, dims, raw=True),
        "construct_gen": _stream_loop(h.C_wal_entry, lambda c: h._c2m_wal_entry(c, dims, layout),
                                      params),
        "construct_gen_compiled": _stream_loop(h._compiled("wal_entry"),
                                               lambda c: h._c2m_wal_entry(c, dims, layout),
                                               params),
        "construct_plain": _plain_wal_runner(plain, dims),
        "construct_plain_compiled": _plain_wal_runner(plain.compile(), dims),
    }, raw_of=_htt_raw)
    case.encoders = {
        "fast": lambda vs: b"".join([h.encode_wal_entry(v, **params) for v in vs]),
        "hand": lambda vs: hand.htt_wal_encode(vs, dims),
    }
    case.values = values  # type: ignore[attr-defined]
    case.prefix = lambda k: _htt_corpus(k, dims)[0]
    return case


# -- ZE ------------------------------------------------------------------------------------

def ze_op7_case(n: int, dims: int = 768) -> Case:
    rng = random.Random(7)
    fields = z.UpsertFields(vector=True)
    values = []
    for i in range(n):
        vec = list(struct_f32([rng.uniform(-1, 1) for _ in range(dims)]))
        values.append(z.OpUpsertV2(fields, (i + 1) * 0x1_0000_0001_0000_0001, i + 1,
                                   z.F32Vector(vec), None, None, None, None))
    data = b"".join(z.encode_op_upsert_v2(v) for v in values)
    case = Case("ze_op7_768", "records", n, data, {
        "fast": lambda b: [v for v, _ in z.iter_op_upsert_v2(b)],
        "hand": hand.ze_op7,
        "hand_raw": lambda b: hand.ze_op7(b, raw=True),
        "construct_gen": _stream_loop(z.C_op_upsert_v2, z._c2m_op_upsert_v2, {}),
        "construct_gen_compiled": _stream_loop(z._compiled("op_upsert_v2"),
                                               z._c2m_op_upsert_v2, {}),
    }, raw_of=lambda v: (v.doc_id, v.revision, list(v.vector.values)))
    case.encoders = {"fast": lambda vs: b"".join([z.encode_op_upsert_v2(v) for v in vs]),
                     "hand": hand.ze_op7_encode}
    case.values = values  # type: ignore[attr-defined]
    case.prefix = lambda k: data[:k * len(data) // n]
    return case


def struct_f32(vals: list[float]) -> tuple:
    """Round to f32 so the corpus values survive the round trip exactly."""
    import struct
    return struct.unpack(f"<{len(vals)}f", struct.pack(f"<{len(vals)}f", *vals))


def ze_nodes_case(n: int) -> Case:
    from bytewright.runtime.ze import graph

    nodes = [z.GraphNodeBlock(bytes([i % 256]) * 64, z.Bit4Factors(1.0, 0.5, 2.0), 2,
                              z.GraphBlockFlags(), [(i + 1) % n, (i + 2) % n] + [0xFFFFFFFF] * 42)
             for i in range(n)]
    blocks = graph.build_blocks(128, 128, 44, nodes)
    data = blocks[:256 * n]
    p = {"code_bytes": 64, "max_degree": 44}
    conv = lambda c: z._c2m_graph_node_block(c, 64, 44)  # noqa: E731
    return Case("ze_graph_nodes", "nodes", n, data, {
        "fast": lambda b: [v for v, _ in z.iter_graph_node_block(b, **p)],
        "hand": hand.ze_nodes,
        "hand_raw": lambda b: hand.ze_nodes(b, raw=True),
        "construct_gen": _stream_loop(z.C_graph_node_block, conv, p),
        "construct_gen_compiled": _stream_loop(z._compiled("graph_node_block"), conv, p),
    }, raw_of=lambda v: (v.codes, dataclasses.astuple(v.factors), v.degree, v.flags.to_int(),
                         v.neighbours), prefix=lambda k: data[:256 * k])


# -- pile, kladde --------------------------------------------------------------------------

def pile_case(n: int) -> Case:
    from bytewright.runtime.pile import encode_blob

    data = b"".join(encode_blob(i.to_bytes(8, "little") * (1 + i % 40), 1_700_000_000_000 + i)
                    for i in range(n))
    offsets = []

    def prefix(k: int) -> bytes:
        pos = 0
        for _ in range(k):
            pos += 256 * int.from_bytes(data[pos + 28:pos + 32], "little")
        return data[:pos]

    del offsets
    return Case("pile_frames", "frames", n, data, {
        "fast": lambda b: [v for v, _ in gp.iter_pile_record(b)],
        "hand": hand.pile_blobs,
        "hand_raw": lambda b: hand.pile_blobs(b, raw=True),
        "construct_gen": _stream_loop(gp.C_pile_record, gp._c2m_pile_record, {}),
        "construct_gen_compiled": _stream_loop(gp._compiled("pile_record"),
                                               gp._c2m_pile_record, {}),
    }, raw_of=lambda v: (v.record.body.head.timestamp, v.record.body.head.length,
                         v.record.body.head.hash, v.record.body.data.payload), prefix=prefix)


def kladde_case(n: int) -> Case:
    from . import kladde as kb

    data = kb.corpus(n)
    case = Case("kladde_statements", "statements", n, data, {
        "fast": lambda b: [kb.run_decode_only(b)],
    })
    case.skipped["hand"] = ("no hand-written LEB128 statement decoder yet: ratios for this "
                            "case are not computed (decode-only rate only)")
    return case


# -- running -------------------------------------------------------------------------------

def kaitai_status() -> str | None:
    """None when a Kaitai compiler and runtime are usable, else why not."""
    import shutil
    from pathlib import Path

    try:
        import kaitaistruct  # noqa: F401
    except ImportError:
        return "kaitaistruct is not installed (pip install kaitaistruct)"
    root = Path(__file__).resolve().parent.parent
    ksc = root / ".ci-cache/kaitai/node_modules/kaitai-struct-compiler"
    if not ksc.exists() and not shutil.which("kaitai-struct-compiler"):
        return "no Kaitai compiler (run ci/install-kaitai.sh)"
    return ("Kaitai compiler present, but the harness does not yet drive the exported .ksy "
            "parsers (record types with parameters); not measured this run")


def run_case(case: Case, repeat: int) -> dict:
    ref = case.decoders["fast"](case.data)
    res: dict[str, Any] = {"items": case.n, "unit": case.unit, "bytes": len(case.data),
                           "decode": {}, "encode": {}, "agree": {}, "skipped": dict(case.skipped)}
    small_n = max(1, min(case.n // CONSTRUCT_SHARE, 5_000))
    small = case.prefix(small_n) if case.prefix else None
    for name, fn in case.decoders.items():
        sampled = name.startswith("construct") and small is not None
        buf, k = (small, small_n) if sampled else (case.data, case.n)
        try:
            got = fn(buf)
        except Exception as exc:  # a contender that cannot decode is reported, not fatal
            res["skipped"][name] = f"{type(exc).__name__}: {exc}"
            continue
        want = ref[:len(got)] if sampled else ref
        if name == "hand_raw" or name == "construct_plain" or name == "construct_plain_compiled":
            want = [case.raw_of(v) for v in want] if case.raw_of else want
        res["agree"][name] = bool(got == want)
        t = _time(fn, buf, 1 if sampled and repeat > 1 and "compiled" not in name else repeat)
        res["decode"][name] = {"seconds_per_item": t / k, "items_timed": k,
                               "items_per_s": k / t, "mb_per_s": len(buf) / t / 1e6}
    base = res["decode"].get("hand")
    if base:
        res["decode_ratio_vs_hand"] = {k: base["seconds_per_item"] / v["seconds_per_item"]
                                       for k, v in res["decode"].items()}
    values = getattr(case, "values", None)
    if case.encoders and values is not None:
        outs = {k: fn(values) for k, fn in case.encoders.items()}
        res["encode_agree"] = {k: o == case.data for k, o in outs.items()}
        for k, fn in case.encoders.items():
            t = _time(fn, values, repeat)
            res["encode"][k] = {"seconds_per_item": t / case.n, "items_per_s": case.n / t}
        res["encode_ratio_vs_hand"] = {k: res["encode"]["hand"]["seconds_per_item"] /
                                       v["seconds_per_item"] for k, v in res["encode"].items()}
    ks = kaitai_status()
    if ks:
        res["skipped"]["kaitai"] = ks
    return res


BUILDERS: dict[str, Callable[[int], Case]] = {
    "htt_wal": lambda n: htt_case("htt_wal", n, 0),
    "htt_wal_tail20": lambda n: htt_case("htt_wal_tail20", n, 20),
    "ze_op7_768": ze_op7_case,
    "ze_graph_nodes": ze_nodes_case,
    "pile_frames": pile_case,
    "kladde_statements": kladde_case,
}


def run(quick: bool = False, repeat: int | None = None, only: list[str] | None = None,
        log: Callable[[str], None] | None = None) -> dict:
    """Every case (or ``only``), one after the other; the JSON-able report."""
    repeat = repeat or (3 if quick else 5)
    t0 = time.perf_counter()
    report: dict[str, Any] = {"quick": quick, "repeat": repeat, "python": sys.version.split()[0],
                              "method": "median of repeat runs after one warm-up; gc collected "
                                        "then disabled in every run of every contender; ratio = "
                                        "time(hand) / time(contender)", "cases": {}}
    for name, build in BUILDERS.items():
        if only and name not in only:
            continue
        n = SIZES[name][1 if quick else 0]
        case = build(n)
        report["cases"][name] = run_case(case, repeat)
        if log:
            log(format_case(name, report["cases"][name]))
    report["seconds"] = round(time.perf_counter() - t0, 1)
    return report


def format_case(name: str, r: dict) -> str:
    lines = [f"{name}: {r['items']:,} {r['unit']}, {r['bytes']:,} bytes"]
    ratios = r.get("decode_ratio_vs_hand", {})
    for k, v in r["decode"].items():
        ratio = f"{ratios[k]:6.2f}x hand" if k in ratios else ""
        ok = "" if r["agree"].get(k, True) else "  DISAGREES"
        lines.append(f"  decode {k:<25} {v['items_per_s']:>12,.0f} {r['unit']}/s {ratio}{ok}")
    for k, v in r.get("encode", {}).items():
        lines.append(f"  encode {k:<25} {v['items_per_s']:>12,.0f} {r['unit']}/s "
                     f"{r['encode_ratio_vs_hand'][k]:6.2f}x hand")
    for k, why in r["skipped"].items():
        lines.append(f"  skipped {k}: {why}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bytewright.bench.harness")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int)
    ap.add_argument("--case", action="append", choices=sorted(BUILDERS))
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    rep = run(args.quick, args.repeat, args.case, log=print)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rep, f, indent=2)
    print(f"total {rep['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
