"""bench/targets.py on hand-made reports: each target's verdict, scale note and why, the
variable-length classification read from the schemas, profiles as data, the bulk-built
HTT corpus. No benchmark runs here (tests/test_bench_quick.py runs the quick one)."""

from __future__ import annotations

import json

import pytest

from bytewright.bench import measure, targets
from bytewright.cli.main import main


def _case(fast: float, *, kaitai: float | None = 0.3, plain: float | None = None,
          gen_compiled: float = 0.1, encode: float | None = None) -> dict:
    ratios = {"fast": fast, "hand": 1.0, "construct_gen_compiled": gen_compiled}
    if kaitai is not None:
        ratios["kaitai"] = kaitai
    if plain is not None:
        ratios["construct_plain_compiled"] = plain
    case = {"decode_ratio_vs_hand": ratios, "agree": {k: True for k in ratios},
            "skipped": {} if kaitai is not None else {"kaitai": "no compiler"},
            "decode": {k: {} for k in ratios}}
    if encode is not None:
        case["encode_ratio_vs_hand"] = {"fast": encode, "hand": 1.0}
        case["encode_agree"] = {"fast": True, "hand": True}
    return case


def _replay_row(n: int, per_s: float, ratio: float, net_over_file: float) -> dict:
    return {"replay_entries_per_s": per_s, "decode_only_entries_per_s": per_s / ratio,
            "replay_vs_decode_only": ratio, "replay_gc_s": 0.1, "replay_s": n / per_s,
            "replay_memory": {"peak_rss_mb": 100.0, "baseline_rss_mb": 40.0, "net_mb": 60.0,
                              "file_mb": 60.0 / net_over_file,
                              "net_over_file": net_over_file}}


def _mem(peak: float, base: float = 45.0) -> dict:
    return {"peak_rss_mb": peak, "baseline_rss_mb": base, "net_mb": peak - base}


def _report(*, replay_sizes=(10_000, 100_000), file_mb=197.0, kladde_n=200_000,
            decode_peak=500.0, inspect_peak=90.0, jobs2=1.7) -> dict:
    cases = {
        "htt_wal": _case(1.3, kaitai=0.4, plain=0.2, gen_compiled=0.35, encode=1.1),
        "htt_wal_tail20": _case(0.9, kaitai=0.3, plain=0.25, encode=0.8),
        "ze_op7_768": _case(1.5, kaitai=0.05, encode=1.0),
        "ze_graph_nodes": _case(0.7, kaitai=0.1),  # fixed-size: not judged on decode
        "pile_frames": _case(1.25, kaitai=0.2),
        "kladde_statements": _case(1.21, kaitai=None),
    }
    rows = {str(n): _replay_row(n, 50_000.0 if n <= 10_000 else 40_000.0, 0.7, 2.5)
            for n in replay_sizes}
    return {"harness": {"cases": cases}, "measure": {
        "htt_replay": {"by_size": rows},
        "ze_replay": {"by_size": {"100000": {"memory": {**_mem(100.0, 90.0), "file_mb": 8.0,
                                                          "net_over_file": 1.25}}}},
        "large_file": {"file_mb": file_mb, "entries": 190_000,
                       "decode": {"memory": _mem(decode_peak)},
                       "inspect": {"memory": _mem(inspect_peak), "file_mb": 21.0},
                       "iterate": {"memory": _mem(150.0), "anon_rss_at_end_mb": 20.0},
                       "verify": {"memory": _mem(80.0, 60.0)}},
        "kladde": {"statements": kladde_n, "held_mb": 34.0 * kladde_n / 200_000,
                   "bytes_per_statement": 178.0, "projected_1M_mb": 169.8},
        "verify_jobs": {"n_measured": [1, 2], "cores": 2, "file_mb": 33.0,
                        "jobs1_1file_s": 1.2,
                        "N1": {"speedup": 0.7, "jobs1_s": 1.2, "jobsN_s": 1.7},
                        "N2": {"speedup": jobs2, "jobs1_s": 2.4, "jobsN_s": 2.4 / jobs2}},
    }}


def _by_id(rep: dict) -> dict:
    return {t["id"]: t for t in targets.evaluate(rep)}


# -- which cases are variable-length ---------------------------------------------------------

def test_case_kinds_come_from_the_schemas():
    kinds = {c: targets.case_kind(c) for c in targets.CASE_RECORDS}
    assert kinds["ze_graph_nodes"]["kind"] == "fixed"
    assert "code_bytes" in kinds["ze_graph_nodes"]["why"]
    for case in ("htt_wal", "htt_wal_tail20", "ze_op7_768", "pile_frames",
                 "kladde_statements"):
        assert kinds[case]["kind"] == "variable", kinds[case]
    assert "length" in kinds["htt_wal"]["why"] and "varint" in kinds["kladde_statements"]["why"]


def _layout(fields: list[dict], params=(), **more) -> dict:
    return {"r": {"params": list(params), "layouts": [{"fields": fields}]}, **more}


@pytest.mark.parametrize("field, fixed", [
    ({"name": "a", "type": "u32", "size": 4}, True),
    ({"name": "a", "type": "bytes[n]", "size": None}, True),  # n is a parameter
    ({"name": "a", "type": "u32", "size": None, "repeat": "n * 2"}, True),
    ({"name": "a", "type": "padding", "size": None}, True),
    ({"name": "a", "type": "bytes[len]", "size": None}, False),  # len is a field
    ({"name": "a", "type": "u32", "size": None, "repeat": "count"}, False),
    ({"name": "a", "type": "str[u16 length]", "size": None}, False),
    ({"name": "a", "type": "switch(op)", "size": None}, False),
    ({"name": "a", "type": "uleb128", "size": None}, False),
    ({"name": "a", "type": "u32", "size": 4, "if": "flags.a"}, False),
    ({"name": "a", "type": "u32", "size": 4, "if": "n > 0"}, True),  # on a parameter
])
def test_record_kind_rules(field, fixed):
    assert (targets._record_kind("r", _layout([field], params=["n"])) is None) is fixed


def test_record_kind_follows_sub_records():
    sub = {"params": [], "layouts": [{"fields": [
        {"name": "k", "type": "u16", "size": 2},
        {"name": "v", "type": "str[u16 length]", "size": None}]}]}
    why = targets._record_kind("r", _layout([{"name": "s", "type": "sub", "size": None}],
                                            sub=sub))
    assert why and "r.s" in why and "sub.v" in why


# -- verdicts --------------------------------------------------------------------------------

def test_decode_target_judges_variable_cases_only():
    t = _by_id(_report())["decode_vs_hand"]
    vals = {v["subject"]: v for v in t["values"]}
    assert vals["ze_graph_nodes"]["met"] is None and "fixed-size" in vals["ze_graph_nodes"]["note"]
    assert vals["htt_wal"]["met"] is True and vals["kladde_statements"]["met"] is True
    assert vals["htt_wal_tail20"]["met"] is False
    assert t["met"] is False and "htt_wal_tail20 0.90x (needs >= 1.2x)" in t["why"]
    assert t["profile_keys"] == ["decode:htt_wal_tail20"]


def test_decode_miss_says_what_building_the_objects_costs():
    rep = _report()
    rep["harness"]["cases"]["htt_wal_tail20"]["decode_ratio_vs_hand"]["hand_raw"] = 2.0
    t = _by_id(rep)["decode_vs_hand"]
    assert ("htt_wal_tail20: the hand decoder building tuples instead of the objects runs at "
            "2.00x, so building the objects is 50% of its time") in t["why"]
    # a case that is met is not explained
    rep["harness"]["cases"]["htt_wal"]["decode_ratio_vs_hand"]["hand_raw"] = 3.0
    assert "htt_wal:" not in _by_id(rep)["decode_vs_hand"]["why"]


def test_decode_and_encode_values_show_the_spread_of_their_rounds():
    rep = _report()
    pile = rep["harness"]["cases"]["pile_frames"]
    pile["decode_round_ratios"] = {"fast": [1.25, 1.09, 1.31], "hand": [1.0, 1.0, 1.0]}
    htt = rep["harness"]["cases"]["htt_wal"]
    htt["encode_round_ratios"] = {"fast": [1.2, 0.98], "hand": [1.0, 1.0]}
    by = _by_id(rep)
    dec = {v["subject"]: v for v in by["decode_vs_hand"]["values"]}
    assert dec["pile_frames"]["note"].endswith("; 3 rounds 1.09-1.31x")
    assert "rounds" not in dec["kladde_statements"]["note"]  # none recorded: none shown
    enc = {v["subject"]: v for v in by["encode_vs_hand"]["values"]}
    assert enc["htt_wal"]["note"] == "identical bytes; 2 rounds 0.98-1.20x"


def test_a_floor_profile_is_explained_and_printed(monkeypatch):
    floor = {"label": "htt_wal_tail20: floor, 20,000 entries", "kind": "floor",
             "floor_fn": "bench/hand.py::some_floor", "items": 20_000, "rounds": 9,
             "agree": {"fast": True, "hand": True, "floor": True},
             "ratio_vs_hand": {"fast": 0.9, "hand": 1.0, "floor": 1.1},
             "fast_vs_floor": 0.82, "rows": []}
    monkeypatch.setattr(targets.Profiler, "_make",
                        lambda self, key: [floor] if key.startswith("decode:") else [])
    res = targets.evaluate(_report())
    targets.attach_profiles(res)
    why = {t["id"]: t for t in res}["decode_vs_hand"]["why"]
    assert ("htt_wal_tail20: floor, 20,000 entries, 9 interleaved rounds: a loop that builds "
            "the same values with no checks at all (bench/hand.py::some_floor) runs at 1.10x "
            "the hand decoder, the fast path at 0.90x in the same rounds, 82% of the "
            "floor's speed") in why
    assert "DISAGREE" not in why
    text = targets.format_table({"targets": res})
    assert "  == htt_wal_tail20: floor, 20,000 entries, 9 interleaved rounds" in text
    floor["agree"]["floor"] = False
    assert "(DISAGREE with the fast path: floor)" in targets.floor_text(floor)


def test_decode_target_met_when_every_variable_case_is():
    rep = _report()
    rep["harness"]["cases"]["htt_wal_tail20"]["decode_ratio_vs_hand"]["fast"] = 1.2
    t = _by_id(rep)["decode_vs_hand"]
    assert t["met"] is True and t["why"] is None and t["profile_keys"] == []


def test_encode_kaitai_construct_targets():
    by = _by_id(_report())
    enc = {v["subject"]: v["met"] for v in by["encode_vs_hand"]["values"]}
    assert enc == {"htt_wal": True, "htt_wal_tail20": False, "ze_op7_768": True}
    kai = {v["subject"]: v for v in by["vs_kaitai"]["values"]}
    assert kai["htt_wal"]["value"] == pytest.approx(1.3 / 0.4)
    assert kai["htt_wal_tail20"]["met"] is True  # 0.9 / 0.3 = 3.0
    assert kai["kladde_statements"]["met"] is None
    assert "skipped" in kai["kladde_statements"]["note"]
    plain = {v["subject"]: v["met"] for v in by["vs_plain_construct"]["values"]}
    assert plain == {"htt_wal": True, "htt_wal_tail20": True}  # 6.5x, 3.6x
    comp = {v["subject"]: v for v in by["construct_compiles"]["values"]}
    assert comp["htt_wal"]["met"] is True and "compile() ok" in comp["htt_wal"]["note"]
    assert comp["pile_frames"]["met"] is False
    assert "construct:pile_frames" in by["construct_compiles"]["profile_keys"]


def test_construct_that_does_not_run_is_not_met():
    rep = _report()
    case = rep["harness"]["cases"]["pile_frames"]
    del case["decode_ratio_vs_hand"]["construct_gen_compiled"]
    case["skipped"]["construct_gen_compiled"] = "ConstructError: boom"
    v = {v["subject"]: v for v in _by_id(rep)["construct_compiles"]["values"]}["pile_frames"]
    assert v["met"] is False and "boom" in v["note"]


def test_replay_targets_and_their_scale():
    by = _by_id(_report())
    rv = by["replay_vs_decode_only"]
    judged = [v for v in rv["values"] if v["met"] is not None]
    assert [v["subject"] for v in judged] == ["100,000 entries"]  # the corpus
    assert rv["met"] is False and rv["profile_keys"] == ["replay"]
    sc = by["replay_scaling"]
    assert sc["values"][0]["value"] == pytest.approx(0.8) and sc["met"] is False
    assert sc["scale"] == "reduced" and sc["note"] == "measured at 100,000, not 1M: run --large"
    by_large = _by_id(_report(replay_sizes=(10_000, 100_000, 1_000_000)))
    large = by_large["replay_scaling"]
    assert large["scale"] == "full" and large["note"] == ""
    assert large["values"][0]["subject"] == "1,000,000 vs 10,000 entries"
    # with --large, 1M is judged as well as the 100k
    judged = [v["subject"] for v in by_large["replay_vs_decode_only"]["values"]
              if v["met"] is not None]
    assert judged == ["100,000 entries", "1,000,000 entries"]
    small = _by_id(_report(replay_sizes=(1_000, 5_000)))["replay_vs_decode_only"]
    assert [v["met"] is not None for v in small["values"]] == [False, True]
    assert small["scale"] == "reduced" and "not the target's 100,000" in small["note"]


def test_replay_scaling_names_the_machines_dict_floor():
    """A missed scaling target says what a bare loop building the same nodes into a
    dict (and into a list) keeps of its rate on this machine, from the report."""
    rep = _report(replay_sizes=(10_000, 1_000_000))
    rep["measure"]["htt_replay"]["state_floor"] = {
        "sizes": [10_000, 1_000_000], "dict": 0.74, "list": 0.97,
        "dict_entries_per_cpu_s": [900_000.0, 666_000.0],
        "list_entries_per_cpu_s": [1_000_000.0, 970_000.0]}
    sc = _by_id(rep)["replay_scaling"]
    assert sc["met"] is False
    assert "scales 0.74x into a dict keyed by path, 0.97x into a list" in sc["values"][0]["note"]
    assert "keeps 0.74x of its rate (into a list: 0.97x)" in sc["why"]
    assert "the dict loop runs at 0.69x the list loop" in sc["why"]
    # without the probe in the report, nothing is claimed
    plain = _by_id(_report(replay_sizes=(10_000, 1_000_000)))["replay_scaling"]
    assert "dict" not in plain["values"][0]["note"] and "dict" not in (plain["why"] or "")


def test_replay_scaling_says_where_the_cost_grows_and_does_not_blame_a_dict_that_scales():
    """The why splits replay's CPU time beyond decode-only per entry at both sizes (and
    the page faults'), and when the bare dict loop itself meets 0.9x it says the dict is
    not the reason instead of blaming it."""
    rep = _report(replay_sizes=(10_000, 1_000_000))
    rows = rep["measure"]["htt_replay"]["by_size"]
    for n, replay, decode, faults in ((10_000, 0.043, 0.041, 0.0073),
                                      (1_000_000, 5.71, 4.21, 0.77)):
        rows[str(n)].update({"entries": n, "replay_cpu_s": replay, "decode_only_cpu_s": decode,
                             "replay_fault_cpu_s": faults,
                             "replay_entries_per_cpu_s": n / replay})
    # user time scales; system time (the state's page faults) grows per entry
    rows["10000"].update({"replay_user_s": 0.035, "replay_sys_s": 0.008,
                          "replay_minor_faults": 3_700})
    rows["1000000"].update({"replay_user_s": 3.6, "replay_sys_s": 2.1,
                            "replay_minor_faults": 370_000})
    rep["measure"]["htt_replay"]["state_floor"] = {
        "sizes": [10_000, 1_000_000], "dict": 0.91, "list": 1.42,
        "dict_entries_per_cpu_s": [900_000.0, 819_000.0],
        "list_entries_per_cpu_s": [1_000_000.0, 1_420_000.0]}
    sc = _by_id(rep)["replay_scaling"]
    assert sc["met"] is False
    assert "costs 0.20 us at 10,000 and 1.50 us at 1,000,000" in sc["why"]
    assert "decode-only 4.10 -> 4.21 us" in sc["why"]
    assert "page faults at the probe's rate 0.73 -> 0.77 us" in sc["why"]
    assert "user time 3.50 -> 3.60 us per entry (alone it scales 0.97x)" in sc["why"]
    assert "system time 0.80 -> 2.10 us" in sc["why"]
    assert "2.2 -> 5.7 us of system time per first-touch page fault" in sc["why"]
    assert "In user time replay scales 0.97x: the loss is the kernel's" in sc["why"]
    assert "meets 0.9x by itself: the dict of 1,000,000 paths is not what is missing" in sc["why"]
    assert "no dict-keyed state avoids" not in sc["why"]
    # the missed replay-vs-decode-only value at 1M gets the same split, 10k against 1M
    rv = _by_id(rep)["replay_vs_decode_only"]
    assert rv["met"] is False
    assert "costs 0.20 us at 10,000 and 1.50 us at 1,000,000" in rv["why"]
    assert "In user time replay scales 0.97x" in rv["why"]


def test_replay_targets_are_judged_on_cpu_time_when_the_report_has_it():
    """Wall figures move with whatever else runs on the machine; the children also
    record CPU time (user + system), and the replay targets are read from it."""
    rep = _report(replay_sizes=(10_000, 100_000))
    rows = rep["measure"]["htt_replay"]["by_size"]
    for n, cpu_rate, cpu_ratio in ((10_000, 60_000.0, 0.75), (100_000, 57_000.0, 0.85)):
        rows[str(n)].update({"replay_entries_per_cpu_s": cpu_rate,
                             "replay_vs_decode_only_cpu": cpu_ratio,
                             "replay_cpu_s": n / cpu_rate, "decode_only_cpu_s": 1.0})
    by = _by_id(rep)
    rv = {v["subject"]: v for v in by["replay_vs_decode_only"]["values"]}
    assert rv["100,000 entries"]["value"] == pytest.approx(0.85)
    assert rv["100,000 entries"]["met"] is True and "CPU time" in rv["100,000 entries"]["note"]
    assert "(0.70x)" in rv["100,000 entries"]["note"]  # the wall ratio is still shown
    sc = by["replay_scaling"]["values"][0]
    assert sc["value"] == pytest.approx(0.95) and sc["met"] is True
    assert "per CPU second" in sc["note"] and "wall: 50,000 -> 40,000" in sc["note"]


def test_replay_ratio_names_its_rounds_and_the_measurement_takes_their_median(
        tmp_path, monkeypatch):
    """The replay children's CPU times move from run to run: the report takes the median
    over interleaved (replay, decode-only) rounds, as the harness does, and its note
    lists every round's ratio."""
    from bytewright.bench import measure

    cpu = iter([1.0, 0.9, 2.0, 0.8, 1.25, 1.0])  # replay, decode-only, ... per round
    calls = []

    def child(code: str, timeout: int = 1200) -> dict:
        if "mmap.mmap(-1" in code:  # the page-fault probe
            return {"cpu_s": 0.1, "faults": 1000, "peak_rss_mb": 100.0}
        if "verify" in code:  # the `htt verify` child of the issue-sized file
            return {"code": 0, "s": 0.1, "peak_rss_mb": 50.0, "baseline_rss_mb": 40.0,
                    "hwm_reset": True}
        calls.append("replay" if "Store.open" in code else "decode")
        t = next(cpu)
        if calls[-1] == "replay":
            return {"n": 5, "replay_s": t, "replay_cpu_s": t, "gc_s": 0.0,
                    "minor_faults": 100,
                    "gc_collections": 0, "peak_rss_mb": 50.0 + t, "baseline_rss_mb": 40.0,
                    "hwm_reset": True}
        return {"n": 5, "decode_s": t, "decode_cpu_s": t, "peak_rss_mb": 45.0}

    monkeypatch.setattr(measure, "SIZES", {**measure.SIZES, "htt_replay": ((5,), (5,), (5,))})
    monkeypatch.setattr(measure, "_child", child)
    out: dict = {}
    measure._htt_replay(out, str(tmp_path), quick=True, large=False)
    row = out["htt_replay"]["by_size"]["5"]
    assert calls == ["replay", "decode"] * 3 and row["rounds"] == 3
    assert row["replay_vs_decode_only_cpu_rounds"] == [0.9, 0.4, 0.8]
    assert row["replay_vs_decode_only_cpu"] == pytest.approx(0.8)  # the median round
    assert row["replay_cpu_s"] == pytest.approx(1.25)  # each side: its median
    assert row["replay_memory"]["peak_rss_mb"] == pytest.approx(52.0)  # the highest peak
    rep = {"measure": {"htt_replay": out["htt_replay"]}}
    note = _by_id(rep)["replay_vs_decode_only"]["values"][0]["note"]
    assert "median of 3 interleaved rounds (0.90, 0.40, 0.80)" in note
    # the state's first-touch faults, priced at the probe's 100 us per fault
    assert out["htt_replay"]["minor_fault_us"] == pytest.approx(100.0)
    assert row["replay_fault_cpu_s"] == pytest.approx(0.01)
    assert "100 minor page faults, ~0.01 s of 1.25 CPU s at this machine's 100.0 us" in note


def test_memory_targets():
    by = _by_id(_report())
    lf = by["large_file_rss"]
    met = {v["subject"].split(" ")[0]: v["met"] for v in lf["values"]}
    # the whole-file object tree is shown, not judged; the streaming paths are judged
    assert met == {"decode_htt_file": None, "iterate": True, "verify": True, "decode": True}
    assert lf["met"] is True and lf["profile_keys"] == []
    bad = _by_id(_report(inspect_peak=260.0))["large_file_rss"]
    assert bad["met"] is False and bad["values"][0]["subject"].startswith("decode (inspect")
    assert "not 1 GB: run --large" in lf["note"] and lf["scale"] == "reduced"
    assert _by_id(_report(file_mb=1024.0))["large_file_rss"]["scale"] == "full"
    rep = _report()
    rep["measure"]["large_file"]["iterate"] = {"memory": _mem(240.0),
                                               "anon_rss_at_end_mb": 25.0,
                                               "file_rss_at_end_mb": 190.0}
    it = _by_id(rep)["large_file_rss"]
    assert "memory:large_iterate" not in it["profile_keys"]  # nothing held to trace
    assert "190 MB the mapped file's clean pages" in it["why"]
    rr = {v["subject"]: v["met"] for v in by["replay_rss"]["values"]}
    assert rr == {"HTT replay, 10,000 entries": None, "HTT replay, 100,000 entries": False,
                  "ZE replay, 100,000 records": True}
    assert by["replay_rss"]["profile_keys"] == ["memory:htt_replay"]
    k = by["kladde_1m"]
    assert k["met"] is False and k["values"][0]["value"] == pytest.approx(169.8)
    assert "projected" in k["values"][0]["subject"] and "run --large" in k["note"]
    k1m = _by_id(_report(kladde_n=1_000_000))["kladde_1m"]
    assert k1m["values"][0]["value"] == pytest.approx(170.0) and k1m["scale"] == "full"


def test_jobs_target_does_not_judge_n1():
    j = _by_id(_report())["jobs_scaling"]
    vals = {v["subject"]: v for v in j["values"]}
    assert vals["N=1"]["met"] is None and vals["N=2"]["met"] is True and j["met"] is True
    assert "N = 1, 2" in j["note"]
    low = _by_id(_report(jobs2=1.5))["jobs_scaling"]
    # a report without each file's own time (older runs) says only what it has
    assert low["met"] is False and "one file alone takes 1.20 s" in low["why"]
    assert low["profile_keys"] == []


def test_a_missed_jobs_target_splits_the_run_into_the_workers_and_the_pool():
    rep = _report(jobs2=1.2)  # --jobs 1 2.4 s, --jobs 2 2.0 s
    rep["measure"]["verify_jobs"]["N2"]["file_s"] = {"jobs1": [1.2, 1.2], "jobsN": [1.5, 1.7]}
    why = _by_id(rep)["jobs_scaling"]["why"]
    assert ("N=2: in the best --jobs 2 run a file took 1.60 s in its worker against 1.20 s "
            "in one process alone (1.33x: the machine gave the workers less than a core "
            "each), and the pool itself (start-up, hand-off, shutdown) 0.30 s of the run's "
            "2.00 s") in why
    rep["measure"]["verify_jobs"]["N2"]["file_s"] = {"jobs1": [1.2, 1.2], "jobsN": [1.2, 1.25]}
    why = _by_id(rep)["jobs_scaling"]["why"]
    assert "(1.02x), and the pool itself (start-up, hand-off, shutdown) 0.75 s" in why


def test_missing_sections_are_not_measured():
    by = _by_id({"harness": {"cases": {}}})
    for t in by.values():
        assert t["met"] is None and t["measured"] == "not measured" and t["why"] is None


# -- profiles as data, the table, the command ------------------------------------------------

def test_profile_call_is_data():
    def work():
        return sorted(str(i) for i in range(20_000))
    p = measure.profile_call("sorting", work, top=5, items=20_000)
    assert p["label"] == "sorting" and 1 <= len(p["rows"]) <= 5
    assert p["calls_per_item"] == pytest.approx(p["calls"] / 20_000)
    assert all(r["tottime"] >= 0 and 0 <= r["share"] <= 1 for r in p["rows"])
    assert any("sorted" in r["function"] for r in p["rows"])
    assert "sorting" in measure.profile_text(p)


def test_memory_profile_names_the_allocating_line():
    p = measure.memory_profile("lists", "keep = [bytes(1000) for _ in range(20_000)]")
    assert p["traced_mb"] > 15 and p["rows"][0]["mb"] > 15
    assert p["rows"][0]["where"] == "<string>"  # the snippet itself
    p = measure.memory_profile("fractions", "import fractions\n"
                               "keep = [fractions.Fraction(i, 7) for i in range(20_000)]")
    top = p["rows"][0]
    assert top["where"].endswith("fractions.py") and top["code"] and top["blocks"] >= 20_000


def test_profiles_attached_once_and_explained(monkeypatch):
    made = []

    def fake(self, key):
        made.append(key)
        return [{"label": key, "total_s": 1.0, "calls": 10, "items": 5, "calls_per_item": 2.0,
                 "rows": [{"ncalls": 5, "tottime": 0.6, "cumtime": 0.9, "share": 0.6,
                           "function": "generated/htt.py:1(_d_wal_entry)"}]}]
    monkeypatch.setattr(targets.Profiler, "_make", fake)
    res = targets.evaluate(_report())
    targets.attach_profiles(res)
    assert made.count("replay") == 1  # shared by two targets, made once
    by = {t["id"]: t for t in res}
    assert by["replay_scaling"]["profiles"] == by["replay_vs_decode_only"]["profiles"]
    assert by["decode_vs_hand"]["profiles"][0]["label"] == "decode:htt_wal_tail20"
    assert "_d_wal_entry) 60% of own time, 2.0 calls/item" in by["decode_vs_hand"]["why"]
    assert all(t["profiles"] == [] for t in res if t["met"] is not False)
    text = targets.format_table({"targets": res})
    assert "(profile replay: shown under replay_vs_decode_only)" in text
    assert text.count("== replay") == 1


def test_saved_report_table_and_cli(tmp_path, monkeypatch, capsys):
    rep = _report()
    rep["targets"] = targets.evaluate(rep)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(rep))
    assert targets.main([str(path)]) == 0
    assert "replay_scaling" in capsys.readouterr().out
    seen = {}

    def fake_run(quick, large, repeat=None, log=None, profiles=True):
        seen.update(quick=quick, large=large, profiles=profiles)
        return rep
    monkeypatch.setattr(targets, "run", fake_run)
    out = tmp_path / "o.json"
    assert main(["bench", "--baselines", "--large", "--no-profiles", "--report", str(out)]) == 0
    assert seen == {"quick": False, "large": True, "profiles": False}
    assert json.loads(out.read_text())["targets"][0]["id"] == "decode_vs_hand"
    assert "decode_vs_hand" in capsys.readouterr().out


# -- the bulk-built corpus -------------------------------------------------------------------

def test_bulk_built_htt_file_is_a_real_store(tmp_path):
    from bytewright.generated import htt as h
    from bytewright.runtime.htt.store import Store

    path = str(tmp_path / "c.htt")
    f = measure.build_htt(path, 1_200, dims=measure.HTT_DIMS,
                          entry_bytes=measure.HTT_ENTRY_BYTES)
    data = open(path, "rb").read()
    ends = [e for _, e in h.iter_wal_entry(data, f["wal_offset"], semantic_dims=20,
                                          tail_layout=0)]
    assert len(ends) == 1_200 and ends[-1] == len(data)
    sizes = {b - a for a, b in zip(ends, ends[1:], strict=False)}
    assert sizes == {measure.HTT_ENTRY_BYTES}
    store = Store.open(path, readonly=True)
    assert len(store) == 1_200 and store.scan.problem is None
    plain = measure.build_htt(str(tmp_path / "p.htt"), 100, payload=1024)
    assert plain["file_bytes"] > 100 * 1024
