"""The benchmark targets, evaluated from one benchmark run.

``run()`` is what ``bytewright bench --baselines --report FILE`` does: the side-by-side
speed ratios (bench/harness.py), the scaling / memory / ``--jobs`` measurements
(bench/measure.py), then every target of ``TARGETS`` evaluated on their reports. A target
yields its measured value(s), ``met`` (true, false, or null when the run could not
measure it), the scale it was measured at, and when not met a ``why`` with the profile
that explains it (cProfile top lines for time, tracemalloc top lines for memory), run
only for the targets that missed.

Which benchmark cases are variable-length is read from the schemas (the generated
modules' ``LAYOUT``): a record is fixed-size when every field's size follows from
constants and the record's parameters alone (a ZE graph node block: ``bytes[code_bytes]``,
``repeat: max_degree``, padding); a length prefix, a switch, a varint, a count read
from the data or a field present only on a flag makes it variable-length.
"""

from __future__ import annotations

import datetime
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import generator_time, measure, startup

# harness case -> (generated module, the record one benchmark item is)
CASE_RECORDS: dict[str, tuple[str, str]] = {
    "htt_wal": ("htt", "wal_entry"),
    "htt_wal_tail20": ("htt", "wal_entry"),
    "ze_op7_768": ("ze", "op_upsert_v2"),
    "ze_graph_nodes": ("ze", "graph_node_block"),
    "pile_frames": ("pile", "pile_record"),
    "kladde_statements": ("kladde", "statement"),
}
# the record the Construct contenders parse per item (kladde parses one whole content)
CONSTRUCT_RECORDS = dict(CASE_RECORDS, kladde_statements=("kladde", "table_content"))

FULL_REPLAY = 1_000_000  # the scaling target's size
TARGET_REPLAY = 100_000  # the replay targets' size
FULL_FILE_MB = 900  # "a 1 GB file": ~1 GiB; anything below this is a reduced scale


# -- variable-length or fixed, from the schemas --------------------------------------------

_NAME = re.compile(r"[A-Za-z_]\w*")


def _only_params(expr: str, params: set[str]) -> bool:
    return set(_NAME.findall(str(expr))) <= params


def _type_kind(t: str, layout: dict, params: set[str], seen: set[str]) -> str | None:
    """None when a value of type ``t`` has a size fixed by ``params``; else the reason."""
    if t.startswith("str[") or "length]" in t:
        return f"length-prefixed {t}"
    if t.startswith("switch("):
        return f"{t}: a switch picks the layout"
    if "leb128" in t or "varint" in t:
        return f"{t}: a varint"
    m = re.fullmatch(r"bytes\[(.+)\]", t)
    if m:
        return None if m.group(1).isdigit() or _only_params(m.group(1), params) else \
            f"{t}: size from the data"
    if t in layout:
        return _record_kind(t, layout, seen)
    return None


def _record_kind(name: str, layout: dict, seen: set[str] | None = None) -> str | None:
    seen = set() if seen is None else seen
    if name in seen:
        return f"{name} is recursive"
    seen = seen | {name}
    rec = layout[name]
    params = set(rec.get("params") or [])
    for lay in rec["layouts"]:
        for f in lay["fields"]:
            where = f"{name}.{f['name']}"
            if f.get("if") and not _only_params(f["if"], params):
                return f"{where} present only if {f['if']}"
            rep = f.get("repeat")
            if rep is not None and not (str(rep).isdigit() or _only_params(rep, params)):
                return f"{where}: repeat {rep}"
            if f.get("size") is not None or f["type"] == "padding":
                continue
            why = _type_kind(f["type"], layout, params, seen)
            if why:
                return f"{where}: {why}"
    return None


def case_kind(case: str) -> dict:
    """``{"kind": "fixed"|"variable", "record": ..., "why": ...}`` of a harness case."""
    import importlib

    mod_name, record = CASE_RECORDS[case]
    mod = importlib.import_module(f"bytewright.generated.{mod_name}")
    why = _record_kind(record, mod.LAYOUT)
    params = mod.LAYOUT[record].get("params") or []
    return {"record": f"{mod_name}.{record}",
            "kind": "variable" if why else "fixed",
            "why": why or ("every field's size follows from constants"
                           + (f" and the parameters {', '.join(params)}" if params else ""))}


def construct_fallbacks(case: str) -> list[str]:
    """Parts of the compiled Construct definition that ``compile()`` left interpreted
    (Construct links them in as ``linkedparsers``), by class name."""
    import importlib

    mod_name, record = CONSTRUCT_RECORDS[case]
    mod = importlib.import_module(f"bytewright.generated.{mod_name}")
    con = mod._compiled(record)
    ids = {int(i) for i in re.findall(r"linkedparsers\[(\d+)\]", con.source or "")}
    linked = con.module.__dict__.get("linkedinstances", {})
    return sorted(type(linked[i]).__name__ if i in linked else "?" for i in ids)


# -- the targets ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    id: str
    statement: str  # the target, in words
    how: str  # how the run measures it
    threshold: str
    check: Callable[[dict], dict]  # the whole report -> values, met, scale, why, profiles


def _v(subject: str, value: float | None, threshold: float | None, *, higher: bool = True,
       unit: str = "x", note: str = "", judged: bool = True) -> dict:
    """One measured value; ``met`` None when not judged (not measured, or out of scope)."""
    met = None
    if judged and value is not None and threshold is not None:
        met = value >= threshold if higher else value <= threshold
    return {"subject": subject, "value": value, "threshold": threshold, "unit": unit,
            "higher_is_better": higher, "met": met, "note": note}


def _all_met(values: list[dict]) -> bool | None:
    judged = [v["met"] for v in values if v["met"] is not None]
    return all(judged) if judged else None


def _cases(rep: dict) -> dict:
    return (rep.get("harness") or {}).get("cases", {})


def _fmt(v: dict) -> str:
    if v["value"] is None:
        return f"{v['subject']} -"
    unit = v["unit"]
    num = (f"{v['value']:.2f}{unit}" if unit == "x" else f"{v['value']:.2f} {unit}"
           if unit == "s" else f"{v['value']:,.0f} {unit}")
    return f"{v['subject']} {num}"


def _spread(r: dict, what: str) -> str:
    """``; rounds 1.09-1.21x`` from the per-round ratios of the fast path, if recorded."""
    rounds = r.get(f"{what}_round_ratios", {}).get("fast")
    if not rounds:
        return ""
    return f"; {len(rounds)} rounds {min(rounds):.2f}-{max(rounds):.2f}x"


def _decode_vs_hand(rep: dict) -> dict:
    values, keys, extra = [], [], []
    for case, r in _cases(rep).items():
        kind = case_kind(case)
        ratio = r.get("decode_ratio_vs_hand", {}).get("fast")
        if kind["kind"] == "fixed":
            values.append(_v(case, ratio, 1.2, judged=False,
                             note=f"fixed-size ({kind['why']}): not a variable-length case"
                                  + _spread(r, "decode")))
            continue
        values.append(_v(case, ratio, 1.2, note=f"variable-length: {kind['why']}"
                                                + _spread(r, "decode")))
        if values[-1]["met"] is False:
            keys.append(f"decode:{case}")
            raw = r.get("decode_ratio_vs_hand", {}).get("hand_raw")
            if raw:
                # what the values themselves cost: a share no decoder of them avoids
                extra.append(f"{case}: the hand decoder building tuples instead of the "
                             f"objects runs at {raw:.2f}x, so building the objects is "
                             f"{1 - 1 / raw:.0%} of its time")
    return {"values": values, "profile_keys": keys,
            "why_extra": "; ".join(extra) if extra else None}


def _encode_vs_hand(rep: dict) -> dict:
    values, keys = [], []
    for case, r in _cases(rep).items():
        ratio = r.get("encode_ratio_vs_hand", {}).get("fast")
        if ratio is None:
            continue
        values.append(_v(case, ratio, 1.0, note=("identical bytes" if all(
            r.get("encode_agree", {}).values()) else "ENCODERS DISAGREE")
            + _spread(r, "encode")))
        if values[-1]["met"] is False:
            keys.append(f"encode:{case}")
    return {"values": values, "profile_keys": keys}


def _over(rep: dict, contender: str, threshold: float, label: str) -> dict:
    """fast / contender, both as ratios to hand on the same run."""
    values, keys = [], []
    for case, r in _cases(rep).items():
        ratios = r.get("decode_ratio_vs_hand", {})
        if contender in r.get("skipped", {}):
            values.append(_v(case, None, threshold, note=f"{label} skipped: "
                             f"{r['skipped'][contender]}"))
            continue
        if contender not in ratios or "fast" not in ratios:
            continue
        ok = r.get("agree", {}).get(contender, True)
        values.append(_v(case, ratios["fast"] / ratios[contender], threshold,
                         note="" if ok else f"{label} DISAGREES with the fast path"))
        if values[-1]["met"] is False:
            keys.append(f"decode:{case}")
    return {"values": values, "profile_keys": keys}


def _vs_kaitai(rep: dict) -> dict:
    return _over(rep, "kaitai", 2.5, "Kaitai")


def _vs_plain_construct(rep: dict) -> dict:
    return _over(rep, "construct_plain_compiled", 3.0, "plain compiled Construct")


def _construct_compiles(rep: dict) -> dict:
    values, keys = [], []
    for case, r in _cases(rep).items():
        name = "construct_gen_compiled"
        if name in r.get("skipped", {}):
            values.append({**_v(case, None, 0.3), "met": False,
                           "note": f"does not compile/run: {r['skipped'][name]}"})
            continue
        ratio = r.get("decode_ratio_vs_hand", {}).get(name)
        if ratio is None:
            continue
        try:
            left = construct_fallbacks(case)
            note = (f"compile() ok; {len(left)} part(s) left interpreted: "
                    f"{', '.join(sorted(set(left)))}" if left else "compile() ok, fully compiled")
        except Exception as exc:  # noqa: BLE001 - a failed compile is the finding
            values.append({**_v(case, ratio, 0.3), "met": False,
                           "note": f"compile() fails: {type(exc).__name__}: {exc}"})
            continue
        if not r.get("agree", {}).get(name, True):
            note += "; DISAGREES with the fast path"
        values.append(_v(case, ratio, 0.3, note=note))
        if values[-1]["met"] is False:
            keys.append(f"construct:{case}")
    return {"values": values, "profile_keys": keys}


def _replay_rows(rep: dict) -> dict[int, dict]:
    rows = ((rep.get("measure") or {}).get("htt_replay") or {}).get("by_size", {})
    return {int(k): v for k, v in rows.items()}


def _judged_sizes(rows: dict[int, Any]) -> set[int]:
    """Replay targets are judged at the target's size and above (``--large``: 1M too);
    smaller sizes are shown. A run that stopped below 100k is judged at its largest."""
    big = {n for n in rows if n >= TARGET_REPLAY}
    return big or {max(rows)}


def _replay_rate(r: dict) -> tuple[float, str]:
    """Replay entries per second as judged: per CPU second of the child where the report
    has it (the harness times its contenders the same way), else per wall second
    (reports before CPU times were recorded)."""
    if "replay_entries_per_cpu_s" in r:
        return r["replay_entries_per_cpu_s"], "CPU"
    return r["replay_entries_per_s"], "wall"


def _replay_vs_decode(rep: dict) -> dict:
    rows = _replay_rows(rep)
    if not rows:
        return {"values": [], "note": "HTT replay not measured in this run"}
    judged = _judged_sizes(rows)
    values = []
    for n, r in sorted(rows.items()):
        cpu = "replay_vs_decode_only_cpu" in r
        ratio = r["replay_vs_decode_only_cpu"] if cpu else r["replay_vs_decode_only"]
        rounds = r.get("replay_vs_decode_only_cpu_rounds")
        how = (f"median of {len(rounds)} interleaved rounds "
               f"({', '.join(f'{x:.2f}' for x in rounds)}), " if rounds and len(rounds) > 1
               else "")
        gc_note = (f"{how}{'CPU' if cpu else 'wall'} time; replay "
                   f"{r['replay_entries_per_s']:,.0f} "
                   f"vs decode-only {r['decode_only_entries_per_s']:,.0f} entries per wall "
                   f"second ({r['replay_vs_decode_only']:.2f}x); cyclic GC "
                   f"{r['replay_gc_s']:.2f} s of {r['replay_s']:.2f} s")
        if r.get("replay_fault_cpu_s") is not None and r.get("replay_cpu_s"):
            # the live state is fresh memory (decode-only reuses what it frees): its
            # first-touch page faults, at what one costs this machine
            gc_note += (f"; {r['replay_minor_faults']:,} minor page faults, "
                        f"~{r['replay_fault_cpu_s']:.2f} s of {r['replay_cpu_s']:.2f} CPU s "
                        f"at this machine's "
                        f"{r['replay_fault_cpu_s'] / r['replay_minor_faults'] * 1e6:.1f} us "
                        f"per fault")
        values.append(_v(f"{n:,} entries", ratio, 0.8,
                         judged=n in judged,
                         note=gc_note if n in judged else gc_note + " (shown, not judged)"))
    out: dict = {"values": values, "profile_keys": []}
    if max(judged) < TARGET_REPLAY:
        out["scale"] = "reduced"
        out["note"] = f"judged at {max(judged):,} entries, not the target's {TARGET_REPLAY:,}"
    if _all_met(values) is False:
        out["profile_keys"] = ["replay"]
        # where replay's cost beyond decode-only grows: the smallest size against the
        # largest missed one (user / system time, page faults)
        missed = [int(v["subject"].split()[0].replace(",", "")) for v in values
                  if v["met"] is False]
        if missed and len(rows) > 1 and min(rows) < max(missed):
            split = _replay_split(rows[min(rows)], rows[max(missed)])
            if split:
                out["why_extra"] = split
    return out


def _replay_scaling(rep: dict) -> dict:
    rows = _replay_rows(rep)
    if len(rows) < 2:
        return {"values": [], "note": "needs two replay sizes"}
    small, big = min(rows), max(rows)
    (lo, clock), (hi, _) = _replay_rate(rows[small]), _replay_rate(rows[big])
    ratio = hi / lo
    note = (f"{lo:,.0f} entries per {clock} second at {small:,} -> {hi:,.0f} at {big:,} "
            f"(wall: {rows[small]['replay_entries_per_s']:,.0f} -> "
            f"{rows[big]['replay_entries_per_s']:,.0f}); cyclic GC "
            f"{rows[small]['replay_gc_s']:.2f} s -> {rows[big]['replay_gc_s']:.2f} s")
    out: dict = {"values": [_v(f"{big:,} vs {small:,} entries", ratio, 0.9, note=note)],
                 "profile_keys": []}
    if big < FULL_REPLAY:
        out["scale"] = "reduced"
        out["note"] = f"measured at {big:,}, not 1M: run --large"
    floor = rep.get("measure", {}).get("htt_replay", {}).get("state_floor")
    if floor is not None:
        out["values"][0]["note"] += (
            f"; a bare loop building the same nodes scales {floor['dict']:.2f}x into a dict "
            f"keyed by path, {floor['list']:.2f}x into a list, nothing decoded")
    if out["values"][0]["met"] is False:
        out["profile_keys"] = ["replay"]
        parts = []
        split = _replay_split(rows[small], rows[big])
        if split:
            parts.append(split)
        if floor is not None:
            rates = floor.get("dict_entries_per_cpu_s"), floor.get("list_entries_per_cpu_s")
            at_big = (f"; at {big:,} the dict loop runs at {rates[0][1] / rates[1][1]:.2f}x "
                      "the list loop" if None not in rates else "")
            loop = (f"a bare loop that only builds the replay's node shapes into a dict, "
                    f"{small:,} and {big:,} of them each in a fresh process, keeps "
                    f"{floor['dict']:.2f}x of its rate (into a list: {floor['list']:.2f}x)"
                    f"{at_big}")
            if floor["dict"] >= 0.9:
                # the hash table alone met the target on this run: it cannot be the reason
                parts.append(f"{loop}, which meets 0.9x by itself: the dict of "
                             f"{big:,} paths is not what is missing here")
            else:
                # the loop's nodes are fresh memory too: its loss is not the hash table's
                # alone (see the user / system split above where the report has it)
                parts.append(f"the state is a dict of {big:,} paths: on this machine {loop}"
                             ", so holding that many nodes in a dict loses that much "
                             "without any decoding")
        if parts:
            out["why_extra"] = "; ".join(parts)
    return out


def _replay_split(lo: dict, hi: dict) -> str:
    """What replay costs beyond decode-only per entry at two sizes (CPU time), and what
    of it the live state's first-touch page faults are: where a scaling miss grows."""
    need = ("replay_cpu_s", "decode_only_cpu_s", "entries")
    if not all(r.get(k) for r in (lo, hi) for k in need):
        return ""

    def per(r: dict, key: str) -> float:
        return r[key] / r["entries"] * 1e6

    text = (f"per entry, replay beyond decode-only (the apply and the live state) costs "
            f"{per(lo, 'replay_cpu_s') - per(lo, 'decode_only_cpu_s'):.2f} us at "
            f"{lo['entries']:,} and {per(hi, 'replay_cpu_s') - per(hi, 'decode_only_cpu_s'):.2f}"
            f" us at {hi['entries']:,}; decode-only {per(lo, 'decode_only_cpu_s'):.2f} -> "
            f"{per(hi, 'decode_only_cpu_s'):.2f} us")
    if lo.get("replay_fault_cpu_s") is not None and hi.get("replay_fault_cpu_s") is not None:
        text += (f"; the state's page faults at the probe's rate {per(lo, 'replay_fault_cpu_s'):.2f}"
                 f" -> {per(hi, 'replay_fault_cpu_s'):.2f} us")
    if all(r.get(k) is not None for r in (lo, hi) for k in ("replay_user_s", "replay_sys_s")):
        # the replay child's own user / system split: where the loss is, CPU or kernel
        user = per(lo, "replay_user_s") / per(hi, "replay_user_s")  # user-time scaling
        text += (f"; replay's user time {per(lo, 'replay_user_s'):.2f} -> "
                 f"{per(hi, 'replay_user_s'):.2f} us per entry (alone it scales {user:.2f}x)"
                 f", system time {per(lo, 'replay_sys_s'):.2f} -> {per(hi, 'replay_sys_s'):.2f} us")
        faults = lo.get("replay_minor_faults"), hi.get("replay_minor_faults")
        if all(faults):
            text += (f" ({lo['replay_sys_s'] / faults[0] * 1e6:.1f} -> "
                     f"{hi['replay_sys_s'] / faults[1] * 1e6:.1f} us of system time per "
                     f"first-touch page fault: {faults[0]:,} -> {faults[1]:,} faults)")
        if user >= 0.9 and per(hi, "replay_sys_s") > per(lo, "replay_sys_s"):
            text += (f". In user time replay scales {user:.2f}x: the loss is the kernel's, "
                     "the live state's fresh pages costing more each as the process grows "
                     "on this machine")
    return text


def _large_file(rep: dict) -> dict:
    big = (rep.get("measure") or {}).get("large_file")
    if not big:
        return {"values": [], "note": "large file not measured in this run"}
    values, keys = [], []
    labels = {"inspect": "decode (inspect --json: every field decoded and written)",
              "iterate": "iterate (iter_mapped)", "verify": "verify",
              "decode": "decode_htt_file (one object tree of the whole file)"}
    for path in ("inspect", "iterate", "verify", "decode"):
        if path not in big:
            continue
        mem = big[path]["memory"]
        note = (f"net {mem['net_mb']:.0f} MB over the {mem['baseline_rss_mb']:.0f} MB "
                f"import baseline")
        judged = True
        if path == "iterate":
            note += (f"; {big['iterate']['anon_rss_at_end_mb']:.0f} MB anonymous at the end "
                     "(the rest is the mapped file's clean pages)")
        if path == "inspect":
            note += f"; on a {big['inspect']['file_mb']:.0f} MB file"
        if path == "decode":
            # the API that returns the whole file as objects holds them by design: shown
            judged = False
            note += ("; holds every decoded entry by design (not a streaming path: "
                     "iter_mapped, inspect and verify are)")
        values.append(_v(labels[path], mem["peak_rss_mb"], 200.0, higher=False, unit="MB",
                         note=note, judged=judged))
        if values[-1]["met"] is False and path not in ("iterate", "inspect"):
            keys.append(f"memory:large_{path}")
    for name, r in (big.get("verbs") or {}).items():
        # each format's own reading verb (pile verify, ze verify, kladde resolve)
        mem = r["memory"]
        ok = "" if r["code"] == 0 else f"; exit {r['code']} (not a clean run)"
        values.append(_v(f"{name} (the format's own verb)", mem["peak_rss_mb"], 200.0,
                         higher=False, unit="MB", judged=r["code"] == 0,
                         note=f"net {mem['net_mb']:.0f} MB over the "
                              f"{mem['baseline_rss_mb']:.0f} MB import baseline; on a "
                              f"{r['file_mb']:.0f} MB file ({r['shape']}), {r['s']:.1f} s{ok}"))
    out: dict = {"values": values, "profile_keys": keys}
    it = next(v for v in values if v["subject"].startswith("iterate"))
    if it["met"] is False:
        # iterate holds no objects (tracemalloc shows ~0): its RSS is the mapped file
        out["why_extra"] = (
            f"iterate holds no decoded objects: of its {it['value']:.0f} MB peak, "
            f"{big['iterate']['anon_rss_at_end_mb']:.0f} MB is anonymous memory and "
            + (f"{big['iterate']['file_rss_at_end_mb']:.0f} MB " if "file_rss_at_end_mb"
               in big["iterate"] else "the rest ")
            + "the mapped file's clean pages, which grow with the file unless the walked "
            "pages are released (madvise), as verify does")
    if big["file_mb"] < FULL_FILE_MB:
        out["scale"] = "reduced"
        out["note"] = (f"measured on a {big['file_mb']:.0f} MB file ({big['entries']:,} "
                       f"entries), not 1 GB: run --large")
    return out


def _rss_value(subject: str, mem: dict, judged: bool) -> dict:
    note = (f"peak {mem['peak_rss_mb']:.0f} MB - baseline {mem['baseline_rss_mb']:.0f} MB = "
            f"{mem['net_mb']:.0f} MB net, file {mem['file_mb']:.1f} MB")
    slack = mem.get("import_peak_rss_mb", 0.0) - mem["baseline_rss_mb"]
    if slack > 1:
        # RSS the imports touched and freed is reused before the process grows again
        note += f"; up to {slack:.0f} MB more can hide in memory the imports freed"
    return _v(subject, mem["net_over_file"], 2.0, higher=False, judged=judged,
              note=note if judged else note + " (shown, not judged)")


def _replay_rss(rep: dict) -> dict:
    m = rep.get("measure") or {}
    values, keys, notes = [], [], []
    rows = _replay_rows(rep)
    if rows:
        judged = _judged_sizes(rows)
        for n, row in sorted(rows.items()):
            values.append(_rss_value(f"HTT replay, {n:,} entries", row["replay_memory"],
                                     n in judged))
        if any(v["met"] is False for v in values):
            keys.append("memory:htt_replay")
        if max(judged) < TARGET_REPLAY:
            notes.append(f"HTT at {max(judged):,} entries, not {TARGET_REPLAY:,}")
    ze = {int(k): v for k, v in (m.get("ze_replay") or {}).get("by_size", {}).items()}
    if ze:
        judged = _judged_sizes(ze)
        start = len(values)
        for n, row in sorted(ze.items()):
            values.append(_rss_value(f"ZE replay, {n:,} records", row["memory"], n in judged))
        if any(v["met"] is False for v in values[start:]):
            keys.append("memory:ze_replay")
    out: dict = {"values": values, "profile_keys": keys}
    if notes:
        out["scale"], out["note"] = "reduced", "; ".join(notes)
    return out


def _kladde(rep: dict) -> dict:
    k = (rep.get("measure") or {}).get("kladde")
    if not k:
        return {"values": [], "note": "kladde not measured in this run"}
    n = k["statements"]
    measured = n >= 1_000_000
    # at 1M the RSS is the direct measurement, unless tracemalloc's sample says more
    mb = max(k["held_mb"], k["projected_1M_mb"] * n / 1e6) if measured else k["projected_1M_mb"]
    note = (f"{k['bytes_per_statement']:.0f} B per statement held by load(): "
            + k.get("method", "net of the interpreter and the file bytes"))
    out: dict = {"values": [_v("1M statements" if measured else
                               f"1M statements, projected from {n:,}", mb, 150.0,
                               higher=False, unit="MB", note=note)], "profile_keys": []}
    if not measured:
        out["scale"] = "reduced"
        out["note"] = f"measured at {n:,} statements, not 1M (projected): run --large"
    if out["values"][0]["met"] is False:
        out["profile_keys"] = ["memory:kladde"]
    return out


def _jobs(rep: dict) -> dict:
    j = (rep.get("measure") or {}).get("verify_jobs")
    if not j:
        return {"values": [], "note": "--jobs not measured in this run"}
    ns = j.get("n_measured") or [int(k[1:]) for k in j if re.fullmatch(r"N\d+", k)]
    values = []
    for n in ns:
        r = j[f"N{n}"]
        # N=1 compares --jobs 1 with itself: shown (the noise floor), not judged
        ceiling = r.get("machine_ceiling")
        values.append(_v(f"N={n}", r["speedup"], 0.8 * n, judged=n > 1,
                         note=f"{n} file(s) of {j['file_mb']:.0f} MB: --jobs 1 "
                              f"{r['jobs1_s']:.2f} s, --jobs {n} {r['jobsN_s']:.2f} s"
                              + (" (the noise floor: not judged)" if n == 1 else "")
                              + (f"; this machine runs {n} CPU-bound processes at "
                                 f"{ceiling:.2f}x one (its ceiling)" if ceiling else "")))
    out = {"values": values, "profile_keys": [],
           "note": f"N = {', '.join(map(str, ns))} (the machine has {j['cores']} cores)"}
    if _all_met(values) is False:
        capped = [f"N={n}: {j[f'N{n}']['machine_ceiling']:.2f}x" for n in ns
                  if j[f"N{n}"].get("machine_ceiling", n) < 0.8 * n]
        parts = [_jobs_split(n, j[f"N{n}"]) for n in ns
                 if n > 1 and values[ns.index(n)]["met"] is False]
        out["why_extra"] = ("; ".join(p for p in parts if p) or
                            f"one file alone takes {j['jobs1_1file_s']:.2f} s") \
            + " (no cProfile: wall time across processes)" \
            + (f". This machine's own ceiling (N pure-Python loops in N processes against "
               f"one after another) is below the target: {', '.join(capped)}: no --jobs "
               f"can reach it here" if capped else "")
    return out


def _jobs_split(n: int, r: dict) -> str | None:
    """Where a missed --jobs N run's time went: the files in their workers (against one
    process alone) and the pool itself (start-up, hand-off, shutdown: the rest)."""
    fs = r.get("file_s")
    if not fs or not fs.get("jobs1") or not fs.get("jobsN"):
        return None
    alone = sum(fs["jobs1"]) / len(fs["jobs1"])
    worker = sum(fs["jobsN"]) / len(fs["jobsN"])
    pool = r["jobsN_s"] - max(fs["jobsN"])
    slower = worker / alone if alone else 0.0
    return (f"N={n}: in the best --jobs {n} run a file took {worker:.2f} s in its worker "
            f"against {alone:.2f} s in one process alone ({slower:.2f}x"
            + (": the machine gave the workers less than a core each" if slower > 1.1
               else "") + f"), and the pool itself (start-up, hand-off, shutdown) "
            f"{max(pool, 0.0):.2f} s of the run's {r['jobsN_s']:.2f} s")


TARGETS: list[Target] = [
    Target("decode_vs_hand", "Decode >= 1.2x the careful hand-written baseline on every "
           "variable-length case",
           "harness: time(hand) / time(fast path), same corpus, median of runs; each case's "
           "kind read from the schema (fixed-size cases listed, not judged)", ">= 1.2x",
           _decode_vs_hand),
    Target("encode_vs_hand", "Encode >= 1.0x the hand-written encoder",
           "harness: time(hand encoder) / time(generated encoder), identical bytes checked",
           ">= 1.0x", _encode_vs_hand),
    Target("vs_kaitai", ">= 2.5x the fastest Kaitai variant (raw tail + struct)",
           "harness: ratio(fast) / ratio(kaitai), both against hand in the same run "
           "(Kaitai timed on a prefix, against hand on that prefix)", ">= 2.5x", _vs_kaitai),
    Target("vs_plain_construct", ">= 3x a plain compiled Construct description of the "
           "same layout", "harness: ratio(fast) / ratio(construct_plain_compiled) (HTT)",
           ">= 3x", _vs_plain_construct),
    Target("construct_compiles", "The project's own Construct path compiles and reaches "
           ">= 0.3x hand", "harness: construct_gen_compiled ratio to hand; compile() "
           "result inspected for parts Construct left interpreted", "compiles, >= 0.3x",
           _construct_compiles),
    Target("replay_vs_decode_only", "HTT replay >= 0.8x the decode-only throughput of the "
           "same WAL", "measure: Store.open(readonly=True) vs iter_wal_entry over the same "
           "file, each in a fresh process, on the replay corpus", ">= 0.8x",
           _replay_vs_decode),
    Target("replay_scaling", "HTT replay throughput at 1M entries >= 0.9x that at 10k "
           "(linear scaling)", "measure: replay entries/s at the largest size run over the "
           "smallest (10k)", ">= 0.9x", _replay_scaling),
    Target("large_file_rss", "Peak RSS of decode / iterate / verify of a 1 GB file "
           "<= 200 MB", "measure: VmHWM of a fresh process: bytewright inspect --json (every "
           "field decoded and written), iter_mapped(iter_wal_entry) over the WAL, "
           "verify_many, and each format's own reading verb (pile verify, ze verify, "
           "kladde resolve) on a file of its own; decode_htt_file (the whole file as "
           "objects) shown, not judged",
           "<= 200 MB each",
           _large_file),
    Target("replay_rss", "HTT and ZE replay peak RSS <= 2x the file size",
           "measure: (VmHWM - import baseline) / file size, fresh process", "<= 2x",
           _replay_rss),
    Target("kladde_1m", "kladde: 1M statements held in <= 150 MB",
           "measure: tracemalloc bytes held by runtime.kladde.load, per statement x 1M",
           "<= 150 MB", _kladde),
    Target("jobs_scaling", "--jobs N over N equal files >= 0.8*N x --jobs 1, for N up to "
           "the machine's core count", "measure: verify_many wall time (pool start-up "
           "included) over N equal ZE WAL files", ">= 0.8*N", _jobs),
    Target("startup", startup.STATEMENT, startup.HOW, "<= 5x", startup.check),
    Target("generator_time", generator_time.STATEMENT, generator_time.HOW, "<= 2 s / 5 s",
           generator_time.check),
]


def evaluate(rep: dict) -> list[dict]:
    """Every target on a report holding ``harness`` and/or ``measure``; no profiles yet."""
    out = []
    for t in TARGETS:
        try:
            r = t.check(rep)
        except Exception as exc:  # noqa: BLE001 - a broken report section is reported
            r = {"values": [], "note": f"could not evaluate: {type(exc).__name__}: {exc}"}
        met = _all_met(r["values"])
        res = {"id": t.id, "statement": t.statement, "how": t.how, "threshold": t.threshold,
               "values": r["values"], "met": met,
               "measured": "; ".join(_fmt(v) for v in r["values"]) or "not measured",
               "scale": r.get("scale", "full" if r["values"] else None),
               "note": r.get("note", ""), "why": None,
               "profile_keys": r.get("profile_keys", []) if met is False else [],
               "profiles": []}
        if met is False:
            res["why"] = _why(res, r.get("why_extra"))
        out.append(res)
    return out


def _why(res: dict, extra: str | None) -> str:
    missed = [f"{_fmt(v)} (needs {'>=' if v['higher_is_better'] else '<='} "
              f"{v['threshold']:g}{'x' if v['unit'] == 'x' else ' ' + v['unit']})"
              for v in res["values"] if v["met"] is False]
    return "missed on " + "; ".join(missed) + (f". {extra}" if extra else "")


# -- profiles of the targets that missed ---------------------------------------------------

def _explain(res: dict) -> None:
    """Add what the attached profiles say to ``why``: the top own-time function of each
    and, for cProfile, the function calls made per item (fast path vs hand)."""
    bits = []
    for p in res["profiles"]:
        if p.get("kind") == "floor":
            bits.append(floor_text(p))
            continue
        if not p.get("rows"):
            continue
        r = p["rows"][0]
        if p.get("kind") == "tracemalloc":
            bits.append(f"{p['label']}: {p['traced_mb']:.1f} MB held, most at {r['where']}:"
                        f"{r['line']} ({r['mb']:.1f} MB in {r['blocks']:,} blocks)")
        else:
            bits.append(f"{p['label']}: {r['function']} {r['share']:.0%} of own time"
                        + (f", {p['calls_per_item']:.1f} calls/item"
                           if p.get("calls_per_item") else ""))
    if bits:
        res["why"] = (res["why"] or "") + ". Profiles: " + "; ".join(bits)


def floor_text(p: dict) -> str:
    """One line on a ``floor`` profile (``Profiler._floor``)."""
    r = p["ratio_vs_hand"]
    bad = [k for k, ok in p["agree"].items() if not ok]
    return (f"{p['label']}, {p['rounds']} interleaved rounds: a loop that builds the same "
            f"values with no checks at all ({p['floor_fn']}) runs at {r['floor']:.2f}x "
            f"the hand decoder, the fast path at {r['fast']:.2f}x in the same rounds, "
            f"{p['fast_vs_floor']:.0%} of the floor's speed"
            + (f" (DISAGREE with the fast path: {', '.join(bad)})" if bad else ""))


class Profiler:
    """Builds each profile at most once per run (several targets share one)."""

    def __init__(self, quick: bool) -> None:
        self.quick = quick
        self.done: dict[str, list[dict]] = {}
        self.tmp = tempfile.mkdtemp(prefix="bw-targets-")
        self._cases: dict[str, Any] = {}

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def get(self, key: str) -> list[dict]:
        if key not in self.done:
            try:
                self.done[key] = self._make(key)
            except Exception as exc:  # noqa: BLE001 - a profile that fails is reported
                self.done[key] = [{"label": key, "error": f"{type(exc).__name__}: {exc}",
                                   "rows": []}]
        return self.done[key]

    def _case(self, name: str) -> Any:
        from . import harness

        if name not in self._cases:
            n = harness.SIZES[name][1]  # the quick size: a profile needs shape, not volume
            self._cases[name] = harness.BUILDERS[name](n)
        return self._cases[name]

    def _floor(self, name: str) -> dict:
        """The case's floor decoder timed against fast and hand at the run's own size."""
        from . import harness

        c = harness.BUILDERS[name](harness.SIZES[name][1 if self.quick else 0])
        r = harness.floor_ratios(c, 3 if self.quick else 9,
                                 0.0 if self.quick else harness.MIN_RUN_S)
        return {"label": f"{name}: floor, {c.n:,} {c.unit}", "kind": "floor",
                "floor_fn": f"bench/hand.py::{c.floor.__name__}", **r, "rows": []}

    def _make(self, key: str) -> list[dict]:
        kind, _, arg = key.partition(":")
        if kind == "decode":
            c = self._case(arg)
            out = [measure.profile_call(f"{arg}: {who} decode, {c.n:,} {c.unit}",
                                        lambda w=who: c.decoders[w](c.data), 8, c.n)
                   for who in ("fast", "hand")]
            if c.floor is not None:
                out.append(self._floor(arg))
            return out
        if kind == "encode":
            c = self._case(arg)
            # as the harness does: each encoder encodes what its own decoder read
            ins = {w: c.decoders[w](c.data) if w in c.decoders else c.values
                   for w in ("fast", "hand")}
            return [measure.profile_call(f"{arg}: {who} encode, {c.n:,} {c.unit}",
                                         lambda w=who: c.encoders[w](ins[w]), 8, c.n)
                    for who in ("fast", "hand")]
        if kind == "construct":
            from . import harness

            c = self._case(arg)
            k = max(1, min(c.n // harness.CONSTRUCT_SHARE, 500))
            buf = c.prefix(k) if c.prefix else c.data
            fn = c.decoders["construct_gen_compiled"]
            fn(buf)  # compile outside the profile
            return [measure.profile_call(f"{arg}: construct_gen_compiled, {k:,} {c.unit}",
                                         lambda: fn(buf), 8, k)]
        if kind == "replay":
            return [measure.replay_profile(2_000 if self.quick else 10_000, 8)]
        if kind == "memory":
            return [self._memory(arg)]
        raise KeyError(key)

    def _memory(self, what: str) -> dict:
        # tracemalloc slows the traced code 3-30x: a few thousand items show where the
        # memory goes as well as a million
        n = 1_000 if self.quick else 5_000
        path = os.path.join(self.tmp, what)
        if what == "htt_replay":
            measure.build_htt(path, n, dims=measure.HTT_DIMS,
                              entry_bytes=measure.HTT_ENTRY_BYTES)
            return measure.memory_profile(f"HTT replay, {n:,} entries",
                                          "s = Store.open(PATH, readonly=True)", PATH=path)
        if what == "ze_replay":
            from . import ze as ze_bench

            with open(path, "wb") as fh:
                fh.write(ze_bench._wal(n))
            return measure.memory_profile(
                f"ZE replay, {n:,} records", "r = wal.replay(data, decode=True)\n"
                "done, _ = wal.commit(r.records)", setup="from bytewright.runtime.ze import "
                "wal\ndata = open(PATH, 'rb').read()", PATH=path)
        if what == "kladde":
            from . import kladde as kladde_bench

            with open(path, "wb") as fh:
                fh.write(kladde_bench.corpus(4 * n))
            return measure.memory_profile(
                f"kladde load, {4 * n:,} statements", "f = load(data)",
                setup="from bytewright.runtime.kladde import load\n"
                "data = open(PATH, 'rb').read()", PATH=path)
        if what.startswith("large_"):
            f = measure.build_htt(path, n, payload=measure.LARGE_PAYLOAD)
            code = {"large_decode": "f = open(PATH, 'rb'); mm = mmap.mmap(f.fileno(), 0, "
                    "access=mmap.ACCESS_READ)\nv, _ = h.decode_htt_file(memoryview(mm))",
                    "large_iterate": "from bytewright.runtime.mapped import iter_mapped\n"
                    "for _v, _e in iter_mapped(PATH, h.iter_wal_entry, WAL, semantic_dims=0, "
                    "tail_layout=0): pass",
                    "large_verify": "r = verify.verify_many([PATH], t)"}[what]
            setup = ("from bytewright.cli import verify\nfrom bytewright.generator import "
                     "project as pm\nt = verify._table_of(pm.resolve(None))"
                     if what == "large_verify" else "")
            return measure.memory_profile(
                f"{what.split('_')[1]} of a {f['file_bytes'] / 2**20:.0f} MB HTT file "
                "(what stays held; the traced peak is the transient)", code, setup=setup,
                PATH=path, WAL=f["wal_offset"])
        raise KeyError(what)


def attach_profiles(targets: list[dict], quick: bool = False,
                    log: Callable[[str], None] | None = None) -> dict[str, list[dict]]:
    """Run the profiles the missed targets ask for (each once) and attach them."""
    prof = Profiler(quick)
    try:
        for t in targets:
            for key in t["profile_keys"]:
                t0, new = time.perf_counter(), key not in prof.done
                t["profiles"].extend(prof.get(key))
                if log and new:
                    log(f"  profiled {key} ({time.perf_counter() - t0:.1f} s)")
            if t["profiles"]:
                _explain(t)
    finally:
        prof.close()
    return prof.done


# -- the whole run -------------------------------------------------------------------------

def run(quick: bool = False, large: bool = False, repeat: int | None = None,
        log: Callable[[str], None] | None = None, profiles: bool = True) -> dict:
    """Speed ratios, measurements, targets (with profiles where missed): one report."""
    from . import harness

    say = log or (lambda s: None)
    t0, cpu0 = time.perf_counter(), _cpu()
    rep: dict = {"command": "bytewright bench --baselines" + (" --quick" if quick else "")
                 + (" --large" if large else ""),
                 "started_utc": _now(), "quick": quick, "large": large,
                 "python": sys.version.split()[0], "cpus": os.cpu_count(),
                 "htt_replay_corpus": measure.htt_corpus_shape(),
                 # other work on the machine skews every figure: say how busy it was
                 "load_average_start": list(os.getloadavg()),
                 "case_kinds": {c: case_kind(c) for c in CASE_RECORDS},
                 "section_seconds": {}}
    say(f"speed ratios (bench/harness.py{', quick' if quick else ''}) ...")
    t = time.perf_counter()
    rep["harness"] = harness.run(quick, repeat, log=lambda s: say(s.splitlines()[0]))
    rep["section_seconds"]["harness"] = round(time.perf_counter() - t, 1)
    say(f"scaling, memory, --jobs (bench/measure.py{', --large' if large else ''}) ...")
    t = time.perf_counter()
    rep["measure"] = measure.measure(quick, large, log=say)
    rep["section_seconds"]["measure"] = round(time.perf_counter() - t, 1)
    rep["startup"] = startup.run(quick, log=say)
    rep["generator_time"] = generator_time.run(quick, log=say)
    t = time.perf_counter()
    rep["targets"] = evaluate(rep)
    if profiles:
        say("profiles of the targets missed ...")
        attach_profiles(rep["targets"], quick, log=say)
    rep["section_seconds"]["targets_and_profiles"] = round(time.perf_counter() - t, 1)
    rep["summary"] = summary(rep["targets"])
    rep["finished_utc"] = _now()
    rep["load_average_end"] = list(os.getloadavg())
    rep["seconds"] = round(time.perf_counter() - t0, 1)
    # CPU time of this process and its children: wall time well above it means the run
    # shared the machine (the 5-minute budget is for a machine the run has to itself)
    rep["cpu_seconds"] = round(_cpu() - cpu0, 1)
    return rep


def _cpu() -> float:
    import resource

    return sum(r.ru_utime + r.ru_stime for r in (
        resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)))


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def summary(targets: list[dict]) -> dict:
    return {"targets": len(targets), "met": sum(t["met"] is True for t in targets),
            "not_met": sum(t["met"] is False for t in targets),
            "not_measured": sum(t["met"] is None for t in targets),
            "reduced_scale": [t["id"] for t in targets if t["scale"] == "reduced"]}


# -- the printed table ---------------------------------------------------------------------

def _load(la: list | None) -> str:
    return f"{la[0]:.1f}" if la else "?"


def _met_word(met: bool | None) -> str:
    return {True: "yes", False: "NO", None: "n/a"}[met]


def format_table(rep: dict, profile_lines: int = 5) -> str:
    """The target table, then per missed target its why and profile top lines."""
    targets = rep["targets"]
    lines = [f"Targets ({rep.get('command', 'bytewright bench --baselines')}, "
             f"started {rep.get('started_utc', '?')}, {rep.get('seconds', '?')} s wall, "
             f"{rep.get('cpu_seconds', '?')} s CPU, load average "
             f"{_load(rep.get('load_average_start'))} at the start, "
             f"{_load(rep.get('load_average_end'))} at the end, {rep.get('cpus', '?')} CPUs)",
             f"HTT replay corpus: {rep.get('htt_replay_corpus', '')}",
             "case kinds: " + ", ".join(f"{c} {k['kind']}" for c, k in
                                         rep.get("case_kinds", {}).items()), ""]
    w_id = max(len(t["id"]) for t in targets)
    lines.append(f"{'target':<{w_id}}  {'threshold':<17}  met   measured")
    lines.append("-" * (w_id + 100))
    for t in targets:
        lines.append(f"{t['id']:<{w_id}}  {t['threshold']:<17}  {_met_word(t['met']):<4}  "
                     f"{t['measured']}")
        for v in t["values"]:
            flag = {True: "ok", False: "MISS", None: "--"}[v["met"]]
            if v["note"]:
                lines.append(f"{'':<{w_id}}    {flag:<4} {_fmt(v)}: {v['note']}")
        if t["note"]:
            lines.append(f"{'':<{w_id}}    note: {t['note']}")
    s = summary(targets)
    lines += ["", f"{s['met']} met, {s['not_met']} not met, {s['not_measured']} not measured"
              f" of {s['targets']}" + (f"; at reduced scale: {', '.join(s['reduced_scale'])}"
                                       if s["reduced_scale"] else "")]
    shown: dict[str, str] = {}  # profile label -> the target it was printed under
    for t in targets:
        if t["met"] is not False:
            continue
        lines += ["", f"why {t['id']} is not met: {t['why']}"]
        for p in t["profiles"]:
            if p["label"] in shown:
                lines.append(f"  (profile {p['label']}: shown under {shown[p['label']]})")
                continue
            shown[p["label"]] = t["id"]
            if p.get("error"):
                lines.append(f"  (profile {p['label']} failed: {p['error']})")
            elif p.get("kind") == "floor":
                lines.append("  == " + floor_text(p))
            elif p.get("kind") == "tracemalloc":
                lines += ["  " + x for x in measure.memory_text(
                    {**p, "rows": p["rows"][:profile_lines]}).splitlines()]
            else:
                lines += ["  " + x for x in measure.profile_text(p, profile_lines).splitlines()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json

    ap = argparse.ArgumentParser(prog="python -m bytewright.bench.targets",
                                 description="print the target table of a saved report")
    ap.add_argument("report", help="a JSON report of `bytewright bench --baselines --report`")
    ap.add_argument("--evaluate", action="store_true",
                    help="evaluate the targets again from the report's measurements "
                         "(without profiles), e.g. after changing a target")
    args = ap.parse_args(argv)
    with open(args.report) as fh:
        rep = json.load(fh)
    if args.evaluate:
        rep["targets"] = evaluate(rep)
    print(format_table(rep))
    return 0


if __name__ == "__main__":
    sys.exit(main())
