"""Side-by-side benchmark of every decode/encode case against independent baselines.

For each case, in one run and on one corpus, every contender decodes (or encodes) the
same bytes: the generated fast path (``fast``), a careful hand-written ``struct`` codec
building the same dataclasses (``hand``, the baseline every ratio is computed against)
and building tuples (``hand_raw``), the project's generated Construct definitions
interpreted and compiled (``construct_gen``, ``construct_gen_compiled``), a plain
hand-written Construct description of the same layout (``construct_plain``,
``construct_plain_compiled``, HTT only) and the Kaitai-generated parser of the exported
``.ksy`` (``kaitai``, bench/kaitai.py: skipped with the reason when no compiler).

Method: every contender's output is checked against the fast path's before timing
(``agree``; that run is also the warm-up) and called WARM_CALLS times on a short prefix, so
that CPython has specialized its bytecode. Timing runs in ``repeat`` interleaved rounds,
each running every contender once (so a slow spell of a shared machine lands on a whole
round, not on one contender); outside ``--quick`` a contender's run repeats its call back
to back until it lasts MIN_RUN_S and counts the mean per call (``_loops``: runs of a few
tens of milliseconds swung by a fifth between rounds); a timing is the median of its rounds; the cyclic GC is
collected before and disabled during every run of every contender alike. Slow
contenders (Construct) run on a prefix of the corpus and are scaled per item.
Ratios are the median over rounds of ``time(hand) / time(contender)`` within a round
(hand on the same prefix for prefix contenders): above 1 the contender is faster.

``python -m bytewright.bench.harness [--quick] [--json FILE]`` runs these alone;
``bytewright bench --baselines --report FILE`` runs them with bench/measure.py and
evaluates the targets (bench/targets.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import io
import json
import math
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import construct as cs

from bytewright.generated import htt as h
from bytewright.generated import kladde as kl
from bytewright.generated import pile as gp
from bytewright.generated import ze as z

from . import hand

# items per case: default, quick (CI). One call of the fast path or hand takes 9-165 ms at
# the default sizes (each timed run is stretched to MIN_RUN_S by back-to-back calls), and
# the whole `bench --baselines` run (with bench/measure.py) stays under 5 minutes on 2 cores
SIZES = {
    "htt_wal": (30_000, 3_000), "htt_wal_tail20": (20_000, 1_000),
    "ze_op7_768": (3_000, 200), "ze_graph_nodes": (20_000, 2_000),
    "kladde_statements": (50_000, 5_000), "pile_frames": (20_000, 2_000),
}
CONSTRUCT_SHARE = 10  # Construct contenders time 1/10 of the corpus (and at most 5,000)
# CPython 3.11 specializes a function's bytecode only after 8 calls or unconditional
# back-jumps: a decoder whose loop is `while pos < end:` (hand-written ones included)
# otherwise runs unspecialized through its first 7 calls, i.e. through every timed run.
# Each contender is called this many times on a short prefix before it is timed, so every
# one is measured in the state a long-running program sees.
WARM_CALLS = 10
WARM_ITEMS = 20
# a timed run of the fast path, hand or the floor lasts at least this long (back-to-back
# calls on the same corpus, see ``_loops``); slow contenders run once per round anyway
MIN_RUN_S = 0.1
MAX_LOOPS = 20


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
    notes: dict[str, str] = field(default_factory=dict)
    # the least a decoder of these values can do (same objects, no checks): not timed in
    # the rounds, only when a report explains a missed decode target (``floor_ratios``)
    floor: Callable[[Any], list] | None = None


def _specialize(fn: Callable, arg: Any) -> None:
    """Run ``fn`` WARM_CALLS times on a short input (see WARM_CALLS)."""
    for _ in range(WARM_CALLS):
        fn(arg)


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
        "fast": lambda b: h.decode_many_wal_entry(b, **params),
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
        "fast": lambda vs: h.encode_many_wal_entry(vs, **params),
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
        "fast": lambda b: z.decode_many_op_upsert_v2(b),
        "hand": hand.ze_op7,
        "hand_raw": lambda b: hand.ze_op7(b, raw=True),
        "construct_gen": _stream_loop(z.C_op_upsert_v2, z._c2m_op_upsert_v2, {}),
        "construct_gen_compiled": _stream_loop(z._compiled("op_upsert_v2"),
                                               z._c2m_op_upsert_v2, {}),
    }, raw_of=lambda v: (v.doc_id, v.revision, list(v.vector.values)))
    case.encoders = {"fast": lambda vs: z.encode_many_op_upsert_v2(vs),
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
    case = Case("ze_graph_nodes", "nodes", n, data, {
        "fast": lambda b: z.decode_many_graph_node_block(b, **p),
        "hand": hand.ze_nodes,
        "hand_raw": lambda b: hand.ze_nodes(b, raw=True),
        "construct_gen": _stream_loop(z.C_graph_node_block, conv, p),
        "construct_gen_compiled": _stream_loop(z._compiled("graph_node_block"), conv, p),
    }, raw_of=lambda v: (v.codes, dataclasses.astuple(v.factors), v.degree, v.flags.to_int(),
                         v.neighbours), prefix=lambda k: data[:256 * k])
    case.encoders = {"fast": lambda vs: z.encode_many_graph_node_block(vs, **p),
                     "hand": hand.ze_nodes_encode}
    case.values = nodes  # type: ignore[attr-defined]
    return case


# -- pile, kladde --------------------------------------------------------------------------

def pile_case(n: int) -> Case:
    from bytewright.runtime.pile import encode_blob

    data = b"".join(encode_blob(i.to_bytes(8, "little") * (1 + i % 40), 1_700_000_000_000 + i)
                    for i in range(n))

    def prefix(k: int) -> bytes:
        pos = 0
        for _ in range(k):
            pos += 256 * int.from_bytes(data[pos + 28:pos + 32], "little")
        return data[:pos]

    case = Case("pile_frames", "frames", n, data, {
        "fast": lambda b: gp.decode_many_pile_record(b),
        "hand": hand.pile_blobs,
        "hand_raw": lambda b: hand.pile_blobs(b, raw=True),
        "construct_gen": _stream_loop(gp.C_pile_record, gp._c2m_pile_record, {}),
        "construct_gen_compiled": _stream_loop(gp._compiled("pile_record"),
                                               gp._c2m_pile_record, {}),
    }, raw_of=lambda v: (v.record.body.head.timestamp, v.record.body.head.length,
                         v.record.body.head.hash, v.record.body.data.payload), prefix=prefix,
        floor=hand.pile_blobs_floor)
    case.encoders = {"fast": gp.encode_many_pile_record, "hand": hand.pile_blobs_encode}
    case.values = gp.decode_many_pile_record(data)  # type: ignore[attr-defined]
    return case


def _kladde_statements(n: int) -> list:
    rng = random.Random(3)
    out = []
    for i in range(n):
        r = i % 7
        od = rng.randrange(0, 300)
        if r == 0:
            st = kl.Statement(1, kl.StatementTag.Ref, kl.RefBody(od, rng.randrange(1, 4000),
                                                               rng.randrange(8192, 1 << 30)))
        elif r == 1:
            st = kl.Statement(1, kl.StatementTag.Zero, kl.ZeroBody(od, rng.randrange(1, 200)))
        elif r == 2:
            st = kl.Statement(1, kl.StatementTag.Shrink, kl.ShrinkBody(od))
        elif r == 3:
            st = kl.Statement(1, kl.StatementTag.Grow, kl.GrowBody(od))
        elif r == 4:
            st = kl.Statement(rng.randrange(1, 100), kl.StatementTag.Tombstone, None)
        else:
            size = rng.randrange(1, 24)
            st = kl.Statement(1, size + 4, kl.InlineBody(od, rng.randbytes(size)))
        out.append(st)
    return out


def _kladde_raw(s: Any) -> tuple:
    b = s.body
    if b is None:
        return (s.id_delta, int(s.tag))
    if isinstance(b, kl.InlineBody):
        return (s.id_delta, int(s.tag), b.offset_delta, b.payload)
    return (s.id_delta, int(s.tag), *dataclasses.astuple(b))


def kladde_case(n: int) -> Case:
    """One address-table content holding ``n`` statements (every form), decoded whole.

    Real pages hold at most ~4 KiB of content; one long content measures the statement
    decoder itself rather than page framing (``bench/kladde.py`` measures whole files)."""
    stmts = _kladde_statements(n)
    data = kl.encode_table_content(kl.TableContent([], stmts))
    share = max(1, min(n // CONSTRUCT_SHARE, 5_000))
    small = kl.encode_table_content(kl.TableContent([], stmts[:share]))
    conv = kl._c2m_table_content
    case = Case("kladde_statements", "statements", n, data, {
        "fast": lambda b: kl.decode_table_content(b, 0)[0].statements,
        "hand": hand.kladde_table,
        "hand_raw": lambda b: hand.kladde_table(b, raw=True),
        "construct_gen": lambda b: conv(kl.C_table_content.parse(b)).statements,
        "construct_gen_compiled": lambda b: conv(kl._compiled("table_content").parse(b)).statements,
    }, raw_of=_kladde_raw, prefix=lambda m: small if m == share else
        kl.encode_table_content(kl.TableContent([], stmts[:m])))
    case.encoders = {"fast": lambda vs: kl.encode_table_content(kl.TableContent([], vs)),
                     "hand": hand.kladde_table_encode}
    case.values = stmts  # type: ignore[attr-defined]
    return _with_kaitai(case, _k("kladde_table"))


# -- running -------------------------------------------------------------------------------

def _once(fn: Callable, arg: Any, loops: int = 1) -> float:
    """CPU time of one call (the mean of ``loops`` back-to-back calls), the cyclic GC
    collected before and paused during them."""
    gc.collect()
    gc.disable()
    try:
        # CPU time of this process: every contender is single-threaded and CPU-bound, and
        # on a shared machine wall time mostly measures the other programs
        t0 = time.process_time()
        for _ in range(loops):
            fn(arg)
        return (time.process_time() - t0) / loops
    finally:
        gc.enable()


def _loops(one_call_s: float, min_s: float) -> int:
    """How many back-to-back calls make one timed run last at least ``min_s`` (at most
    MAX_LOOPS): a run of a few tens of milliseconds on a shared machine swings by a fifth
    from one round to the next, and a median of five such rounds is not a measurement."""
    if min_s <= 0 or one_call_s >= min_s:
        return 1
    return min(MAX_LOOPS, math.ceil(min_s / max(one_call_s, 1e-9)))


def _rounds(timers: dict[str, tuple[Callable, Any, int]], repeat: int,
            min_s: float = 0.0) -> dict[str, list]:
    """Every timer's CPU time per call, interleaved: round r runs each contender once
    (those with fewer runs than r are skipped), so a slow spell of the machine lands on
    every contender of a round rather than on whichever was being timed alone. With
    ``min_s``, a contender timed in every round is first called once more to size its
    runs (``_loops``), so that each of its timed runs lasts at least ``min_s``."""
    loops = {k: _loops(_once(fn, arg), min_s) if min_s > 0 and runs > 1 else 1
             for k, (fn, arg, runs) in timers.items()}
    times: dict[str, list] = {k: [] for k in timers}
    for r in range(repeat):
        for k, (fn, arg, runs) in timers.items():
            if r < runs:
                times[k].append(_once(fn, arg, loops[k]))
    return times


def _ratio(base: list, times: list) -> float:
    """Median over rounds of time(base) / time(contender), each pair from one round."""
    return statistics.median(_per_round(base, times))


def _per_round(base: list, times: list) -> list[float]:
    """time(base) / time(contender) of each round: the spread ``_ratio`` is the median of,
    kept in the report so that a reader can tell a miss from the machine's noise."""
    return [round(b / t, 4) for b, t in zip(base, times, strict=False)]


def _encode_input(case: Case, name: str) -> Any:
    """What encoder ``name`` is given: its own decoder's output, or the corpus's values."""
    dec = case.decoders.get(name)
    return dec(case.data) if dec is not None else case.values  # type: ignore[attr-defined]


def floor_ratios(case: Case, repeat: int, min_s: float = 0.0) -> dict:
    """The fast path, hand and the case's floor decoder (``Case.floor``) timed side by side
    as ``run_case`` times contenders (checked against the fast path, specialized, then
    interleaved rounds): how far the fast path is from the least any decoder of the same
    values does, and how far a 1.2x target is from that floor."""
    if case.floor is None:
        raise ValueError(f"{case.name} has no floor decoder")
    ref = case.decoders["fast"](case.data)
    warm_in = case.prefix(min(WARM_ITEMS, case.n)) if case.prefix else case.data
    fns = {"fast": case.decoders["fast"], "hand": case.decoders["hand"], "floor": case.floor}
    agree = {}
    for name, fn in fns.items():
        agree[name] = bool(fn(case.data) == ref)
        _specialize(fn, warm_in)
    times = _rounds({k: (fn, case.data, repeat) for k, fn in fns.items()}, repeat, min_s)
    return {"items": case.n, "rounds": repeat, "agree": agree,
            "ratio_vs_hand": {k: _ratio(times["hand"], times[k]) for k in fns},
            "fast_vs_floor": _ratio(times["floor"], times["fast"])}


def run_case(case: Case, repeat: int, min_s: float = 0.0) -> dict:
    ref = case.decoders["fast"](case.data)
    res: dict[str, Any] = {"items": case.n, "unit": case.unit, "bytes": len(case.data),
                           "decode": {}, "encode": {}, "agree": {}, "skipped": dict(case.skipped),
                           "notes": dict(case.notes)}
    small_n = max(1, min(case.n // CONSTRUCT_SHARE, 5_000))
    small = case.prefix(small_n) if case.prefix else None
    warm_in = case.prefix(min(WARM_ITEMS, case.n)) if case.prefix else case.data
    timers: dict[str, tuple[Callable, Any, int]] = {}
    items: dict[str, int] = {}
    for name, fn in case.decoders.items():
        sampled = name.startswith(("construct", "kaitai")) and small is not None
        buf, k = (small, small_n) if sampled else (case.data, case.n)
        try:
            got = fn(buf)  # also the warm-up on the corpus
        except Exception as exc:  # a contender that cannot decode is reported, not fatal
            res["skipped"][name] = f"{type(exc).__name__}: {exc}"
            continue
        want = ref[:len(got)] if sampled else ref
        if name in RAW:
            want = [case.raw_of(v) for v in want] if case.raw_of else want
        res["agree"][name] = bool(got == want)
        _specialize(fn, warm_in)
        slow = sampled and "compiled" not in name and name != "kaitai"
        timers[name] = (fn, buf, 1 if slow else repeat)
        items[name] = k
    # contenders timed on the prefix are compared with hand timed on that same prefix, in
    # the same rounds: per-item cost depends on the corpus size (allocation, caches), so
    # mixing sizes lies
    on_prefix = small is not None and small_n != case.n and "hand" in timers and \
        any(items[k] == small_n for k in items if k != "hand")
    if on_prefix:
        timers["hand@prefix"] = (timers["hand"][0], small, repeat)
    times = _rounds(timers, repeat, min_s)
    for name, k in items.items():
        t = statistics.median(times[name])
        res["decode"][name] = {"seconds_per_item": t / k, "items_timed": k,
                               "items_per_s": k / t,
                               "mb_per_s": len(timers[name][1]) / t / 1e6}
    if "hand" in timers:
        if on_prefix:
            res["decode"]["hand"]["seconds_per_item_on_prefix"] = \
                statistics.median(times["hand@prefix"]) / small_n
        base = {k: times["hand@prefix" if on_prefix and items[k] == small_n else "hand"]
                for k in items}
        res["decode_ratio_vs_hand"] = {k: _ratio(base[k], times[k]) for k in items}
        res["decode_round_ratios"] = {k: _per_round(base[k], times[k]) for k in items
                                      if len(times[k]) > 1}
    values = getattr(case, "values", None)
    if case.encoders and values is not None:
        # Each encoder gets what its own decoder gives (the fast path's packed arrays, the
        # hand decoder's lists): encoding what one reads is the round trip users run. Where
        # a decoded input sits in the heap changes how fast it is walked: the same decoder's
        # output decoded a second time encoded 4-9 % faster than the first. So each encoder
        # is timed on two copies of its input, one decoded before the other encoders' inputs
        # and one after, and neither side gets the better place.
        gc.collect()
        order = list(case.encoders)
        first = {k: _encode_input(case, k) for k in order}
        last = {k: _encode_input(case, k) for k in reversed(order)}
        ins = {k: (first[k], last[k]) for k in order}
        # the first outputs stay alive through the rounds: with them freed, the allocator
        # gave the heap's top back to the system and every timed call of a large log
        # faulted its output's pages in afresh (~4,500 faults per 9 MB, either encoder),
        # a cost of the allocator's state rather than of the encoder
        outs = {k: fn(ins[k][0]) for k, fn in case.encoders.items()}
        res["encode_agree"] = {k: outs[k] == case.data and fn(ins[k][1]) == case.data
                               for k, fn in case.encoders.items()}
        for k, fn in case.encoders.items():
            _specialize(fn, ins[k][0][:WARM_ITEMS])
        copies = {f"{k}@{i}": (fn, ins[k][i], repeat)
                  for i in (0, 1) for k, fn in case.encoders.items()}
        t2 = _rounds(copies, repeat, min_s)
        # a round's time for an encoder: its two copies, each timed as one call
        times = {k: [a + b for a, b in zip(t2[f"{k}@0"], t2[f"{k}@1"], strict=True)]
                 for k in case.encoders}
        for k in case.encoders:
            t = statistics.median(times[k]) / 2
            res["encode"][k] = {"seconds_per_item": t / case.n, "items_per_s": case.n / t}
        res["encode_ratio_vs_hand"] = {k: _ratio(times["hand"], times[k])
                                       for k in case.encoders}
        res["encode_round_ratios"] = {k: _per_round(times["hand"], times[k])
                                      for k in case.encoders if repeat > 1}
        del outs
    return res


RAW = {"hand_raw", "construct_plain", "construct_plain_compiled", "kaitai"}


def _with_kaitai(case: Case, fn: Callable[[], Callable[[Any], list]]) -> Case:
    """Add the Kaitai contender, or say why it is skipped."""
    from . import kaitai

    why = kaitai.status()
    if why is None:
        case.decoders["kaitai"] = fn()
        case.notes["kaitai"] = kaitai.NOTE
    else:
        case.skipped["kaitai"] = why
    return case


def _k(attr: str, *args: Any) -> Callable[[], Callable[[Any], list]]:
    def get() -> Callable[[Any], list]:
        from . import kaitai
        fn = getattr(kaitai, attr)
        return fn(*args) if args else fn
    return get


BUILDERS: dict[str, Callable[[int], Case]] = {
    "htt_wal": lambda n: _with_kaitai(htt_case("htt_wal", n, 0), _k("htt_wal", 0)),
    "htt_wal_tail20": lambda n: _with_kaitai(htt_case("htt_wal_tail20", n, 20),
                                             _k("htt_wal", 20)),
    "ze_op7_768": lambda n: _with_kaitai(ze_op7_case(n), _k("ze_op7")),
    "ze_graph_nodes": lambda n: _with_kaitai(ze_nodes_case(n), _k("ze_nodes")),
    "pile_frames": lambda n: _with_kaitai(pile_case(n), _k("pile_blobs")),
    "kladde_statements": kladde_case,
}


def run(quick: bool = False, repeat: int | None = None, only: list[str] | None = None,
        log: Callable[[str], None] | None = None) -> dict:
    """Every case (or ``only``), one after the other; the JSON-able report."""
    repeat = repeat or (3 if quick else 5)
    min_s = 0.0 if quick else MIN_RUN_S  # --quick checks the machinery, not the figures
    t0 = time.perf_counter()
    report: dict[str, Any] = {"quick": quick, "repeat": repeat, "python": sys.version.split()[0],
                              "method": "median CPU time (time.process_time) of repeat "
                                        "interleaved rounds (each runs every contender once; "
                                        f"a run lasts >= {min_s} s: back-to-back calls, "
                                        "their mean per call) after one warm-up on the corpus and "
                                        f"{WARM_CALLS} calls on a {WARM_ITEMS}-item prefix "
                                        "(bytecode specialized); gc collected then disabled "
                                        "in every run of every contender; ratio = median "
                                        "over rounds of time(hand) / time(contender) in the "
                                        "same round", "cases": {}}
    for name, build in BUILDERS.items():
        if only and name not in only:
            continue
        n = SIZES[name][1 if quick else 0]
        case = build(n)
        report["cases"][name] = run_case(case, repeat, min_s)
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
    for k, why in r.get("notes", {}).items():
        lines.append(f"  note {k}: {why}")
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
