"""``bench --baselines --quick``: the report's shape, that every contender decoded (and
every encoder produced) exactly what the generated fast path did, and that every target
of the benchmark is evaluated with its values, scale and (when missed) why and profile.
Never a speed assertion: whether a target is met is not tested here, only that it says."""

from __future__ import annotations

import json
import os
import statistics

import pytest

from bytewright.bench import harness, measure, targets
from bytewright.cli.main import main

# The whole quick bench (every case, measurements, targets) is a long run; the default
# run times one case through the same harness and holds it to the same checks.
FAST_CASE = "htt_wal_tail20"  # the case with the most contenders (plain Construct too)


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "report.json"
    assert main(["bench", "--baselines", "--quick", "--report", str(out)]) == 0
    return json.loads(out.read_text())


@pytest.fixture(scope="module", params=[
    pytest.param([FAST_CASE], id=FAST_CASE),
    pytest.param(None, id="every-case", marks=pytest.mark.long)])
def cases(request) -> list[str] | None:
    """The harness cases a report covers (None: every case, from the whole bench)."""
    return request.param


@pytest.fixture(scope="module")
def report(cases, request):
    if cases is None:
        return request.getfixturevalue("full")["harness"]
    return harness.run(True, only=cases)


def test_every_case_present_with_contenders(report, cases):
    assert report["quick"] is True and report["repeat"] >= 1
    assert set(report["cases"]) == set(cases or harness.BUILDERS)
    for name, case in report["cases"].items():
        assert case["items"] == harness.SIZES[name][1]
        assert "fast" in case["decode"], name
        assert "kaitai" in case["decode"] or "kaitai" in case["skipped"], name
        for contender, t in case["decode"].items():
            assert t["items_per_s"] > 0 and t["items_timed"] >= 1, (name, contender)


def test_every_contender_agrees_with_fast_path(report):
    for name, case in report["cases"].items():
        assert case["agree"], name
        assert all(case["agree"].values()), (name, case["agree"])
        assert set(case["agree"]) == set(case["decode"]), name
        for k, ok in case.get("encode_agree", {}).items():
            assert ok, (name, k)


def test_ratios_against_hand(report):
    for name, case in report["cases"].items():
        if "hand" not in case["decode"]:
            assert "hand" in case["skipped"], name
            continue
        ratios = case["decode_ratio_vs_hand"]
        assert ratios["hand"] == pytest.approx(1.0)
        assert set(ratios) == set(case["decode"])
        for contender in ("construct_gen", "construct_gen_compiled", "hand_raw"):
            assert contender in ratios, (name, contender)
        # the ratio is the median of the per-round ratios the report keeps
        rounds = case["decode_round_ratios"]["fast"]
        assert len(rounds) == report["repeat"], name
        assert ratios["fast"] == pytest.approx(statistics.median(rounds), rel=1e-3), name
        assert all(r == pytest.approx(1.0) for r in case["decode_round_ratios"]["hand"])
        # every case has a hand encoder beside the generated one, agreeing byte for byte
        assert set(case["encode_ratio_vs_hand"]) == {"fast", "hand"}, name
        assert case["encode_agree"] == {"fast": True, "hand": True}, name
        assert case["encode_ratio_vs_hand"]["fast"] == pytest.approx(
            statistics.median(case["encode_round_ratios"]["fast"]), rel=1e-3), name
    htt = report["cases"]["htt_wal_tail20"]
    assert {"construct_plain", "construct_plain_compiled"} <= set(htt["decode"])
    assert htt["encode_ratio_vs_hand"]["hand"] == pytest.approx(1.0)


@pytest.mark.long
def test_every_target_is_evaluated(full):
    from bytewright.bench import kaitai

    got = {t["id"]: t for t in full["targets"]}
    assert list(got) == [t.id for t in targets.TARGETS]
    no_kaitai = kaitai._build()[1]  # the reason the Kaitai baseline is absent, or None
    if no_kaitai and os.environ.get("CI"):
        pytest.fail(f"CI must measure the Kaitai baseline: {no_kaitai}")
    for tid, t in got.items():
        assert t["statement"] and t["how"] and t["threshold"], tid
        assert t["values"], f"{tid} measured nothing in the quick run"
        if tid == "vs_kaitai" and no_kaitai:
            continue  # judged only where the Kaitai compiler is installed (.ci/run installs it)
        assert t["met"] in (True, False), tid
        for v in t["values"]:
            assert v["value"] is not None or v["note"], (tid, v)
            if v["met"] is not None:
                assert v["met"] == (v["value"] >= v["threshold"] if v["higher_is_better"]
                                    else v["value"] <= v["threshold"]), (tid, v)
        if t["met"] is False:
            assert t["why"] and "missed on" in t["why"], tid
            if t["profile_keys"]:
                assert t["profiles"], tid
                for p in t["profiles"]:
                    if p.get("kind") == "floor":  # timed, not profiled: no rows
                        assert all(p["agree"].values()) and "floor" in t["why"], (tid, p)
                    else:
                        assert p["rows"], (tid, p["label"])
        else:
            assert t["why"] is None and t["profiles"] == [], tid
    assert full["summary"]["targets"] == len(targets.TARGETS)


@pytest.mark.long
def test_quick_sizes_are_reduced_scale_and_say_so(full):
    by = {t["id"]: t for t in full["targets"]}
    assert "not 1M: run --large" in by["replay_scaling"]["note"]
    assert "not 1 GB: run --large" in by["large_file_rss"]["note"]
    assert "run --large" in by["kladde_1m"]["note"]
    for tid in ("replay_scaling", "large_file_rss", "kladde_1m"):
        assert tid in full["summary"]["reduced_scale"]


@pytest.mark.long
def test_case_kinds_and_fixed_cases_not_judged(full):
    kinds = full["case_kinds"]
    assert kinds["ze_graph_nodes"]["kind"] == "fixed"
    decode = {v["subject"]: v for v in full["targets"][0]["values"]}
    assert decode["ze_graph_nodes"]["met"] is None
    assert all(decode[c]["met"] is not None for c, k in kinds.items() if k["kind"] == "variable")


@pytest.mark.long
def test_memory_figures_state_baseline_and_net(full):
    m = full["measure"]
    mems = [row["replay_memory"] for row in m["htt_replay"]["by_size"].values()]
    mems += [row["memory"] for row in m["ze_replay"]["by_size"].values()]
    mems += [m["large_file"][p]["memory"] for p in ("decode", "iterate", "verify")]
    mems += [m["htt_verify"]["memory"], m["kladde"]["memory"]]
    for mem in mems:
        assert mem["baseline_rss_mb"] > 10, mem  # an interpreter with imports
        assert mem["net_mb"] == pytest.approx(mem["peak_rss_mb"] - mem["baseline_rss_mb"])
    assert m["large_file"]["verify"]["ok"] and m["htt_verify"]["ok"]


@pytest.mark.long
def test_each_formats_reading_verb_is_measured_and_judged_on_a_file_of_its_own(full):
    """pile verify, ze verify and kladde resolve: a fresh child each, on a file of the
    run's size (8 MiB quick), exit 0, peak and baseline stated, judged with the large
    file's other rows."""
    verbs = full["measure"]["large_file"]["verbs"]
    assert set(verbs) == {"pile verify", "ze verify", "kladde resolve"}
    for name, r in verbs.items():
        assert r["code"] == 0 and r["file_mb"] == pytest.approx(measure.FORMAT_VERB_MB[0],
                                                               rel=0.02), (name, r)
        mem = r["memory"]
        assert mem["baseline_rss_mb"] > 10 and mem["peak_rss_mb"] >= mem["baseline_rss_mb"]
    target = next(t for t in full["targets"] if t["id"] == "large_file_rss")
    rows = [v for v in target["values"] if "(the format's own verb)" in v["subject"]]
    assert len(rows) == 3 and all(v["met"] is not None for v in rows), rows  # judged


@pytest.mark.long
def test_replay_corpus_has_the_issue_shape(full):
    rows = {int(n): r["file_bytes"] for n, r in full["measure"]["htt_replay"]["by_size"].items()}
    (a, size_a), (b, size_b) = sorted(rows.items())[:2]
    # the same header and directory entry, then entries of exactly HTT_ENTRY_BYTES
    assert size_b - size_a == (b - a) * measure.HTT_ENTRY_BYTES
    assert "686 B" in full["htt_replay_corpus"] and "68.6 MB" in full["htt_replay_corpus"]


@pytest.mark.long
def test_replay_and_jobs_are_measured_in_fresh_children_with_their_rounds(full):
    m = full["measure"]
    for row in m["htt_replay"]["by_size"].values():
        rounds = row["replay_vs_decode_only_cpu_rounds"]
        assert row["rounds"] == len(rounds) == measure.REPLAY_ROUNDS
        # the rounds are kept to 3 decimals (rounding keeps order: compare rounded)
        assert min(rounds) <= round(row["replay_vs_decode_only_cpu"], 3) <= max(rounds)
        assert row["replay_minor_faults"] > 0 and row["replay_fault_cpu_s"] > 0
        # the replay child's CPU time, split into user and system (getrusage), adds up
        # to its process time: both clocks count the same CPU of the same child
        assert row["replay_user_s"] > 0 and row["replay_sys_s"] >= 0
        assert row["replay_user_s"] + row["replay_sys_s"] == pytest.approx(
            row["replay_cpu_s"], rel=0.1, abs=0.02)
    assert m["htt_replay"]["minor_fault_us"] > 0
    # the scaling row carries the machine's floor: bare node loops into a dict and a list
    floor = m["htt_replay"]["state_floor"]
    assert floor["sizes"] == [min(map(int, m["htt_replay"]["by_size"])),
                              max(map(int, m["htt_replay"]["by_size"]))]
    assert floor["dict"] > 0 and floor["list"] > 0
    scaling = next(t for t in full["targets"] if t["id"] == "replay_scaling")
    assert "into a dict keyed by path" in scaling["values"][0]["note"]
    jobs = m["verify_jobs"]
    assert jobs["process"].startswith("a fresh child")
    for n in jobs["n_measured"]:
        row = jobs[f"N{n}"]
        assert row["jobs1_s"] > 0 and row["jobsN_s"] > 0
        assert row["speedup"] == pytest.approx(row["jobs1_s"] / row["jobsN_s"])
        # interleaved rounds (one for N = 1), the best of each side judged
        one, par = row["rounds"]
        assert len(one) == len(par) == (1 if n == 1 else measure.JOBS_ROUNDS)
        assert row["jobs1_s"] == min(one) and row["jobsN_s"] == min(par)
        # each file's own time in the best run of each side, within that run's time
        assert len(row["file_s"]["jobs1"]) == len(row["file_s"]["jobsN"]) == n
        assert sum(row["file_s"]["jobs1"]) <= row["jobs1_s"]
        assert max(row["file_s"]["jobsN"]) <= row["jobsN_s"]
        # N > 1: the machine's own ceiling, measured in the same child, beside it
        assert (row["machine_ceiling"] > 0) if n > 1 else "machine_ceiling" not in row


@pytest.mark.long
def test_table_prints_every_target(full):
    text = targets.format_table(full)
    for t in targets.TARGETS:
        assert t.id in text
    assert "met," in text and "not met" in text


def test_contenders_are_timed_in_interleaved_rounds_and_ratios_pair_rounds():
    calls = []
    timers = {"hand": (lambda a: calls.append(("hand", a)), 1, 3),
              "fast": (lambda a: calls.append(("fast", a)), 2, 3),
              "slow": (lambda a: calls.append(("slow", a)), 3, 1)}
    times = harness._rounds(timers, 3)
    # round by round, every contender once; the one-run contender only in round 0
    assert [c[0] for c in calls] == ["hand", "fast", "slow", "hand", "fast", "hand", "fast"]
    assert {k: len(v) for k, v in times.items()} == {"hand": 3, "fast": 3, "slow": 1}
    # a ratio is the median of per-round ratios: one round slowed for both leaves it exact
    assert harness._ratio([1.0, 5.0, 1.0], [0.5, 2.5, 0.5]) == 2.0
    assert harness._ratio([2.0, 2.0, 2.0], [1.0]) == 2.0


def test_a_short_run_is_repeated_until_it_lasts_the_minimum():
    assert harness._loops(0.02, 0.1) == 5
    assert harness._loops(0.03, 0.1) == 4  # rounded up: never shorter than the minimum
    assert harness._loops(0.2, 0.1) == 1
    assert harness._loops(0.0, 0.1) == harness.MAX_LOOPS  # a call too quick to time
    assert harness._loops(0.01, 0.0) == 1  # no minimum: one call, as --quick runs


def test_rounds_give_the_time_per_call_of_the_back_to_back_calls(monkeypatch):
    now = [0.0]
    calls = {"fast": 0, "hand": 0, "slow": 0}

    def contender(name, cost):
        def run(_arg):
            calls[name] += 1
            now[0] += cost
        return run

    monkeypatch.setattr(harness.time, "process_time", lambda: now[0])
    timers = {"fast": (contender("fast", 0.02), None, 3),
              "hand": (contender("hand", 0.25), None, 3),
              "slow": (contender("slow", 0.01), None, 1)}
    times = harness._rounds(timers, 3, 0.1)
    # one call sizes the runs; then five calls a round for fast, one for hand; a contender
    # timed in one round only is not sized (it is the slow, sampled kind)
    assert calls == {"fast": 1 + 3 * 5, "hand": 1 + 3, "slow": 1}
    assert times["fast"] == pytest.approx([0.02] * 3)
    assert times["hand"] == pytest.approx([0.25] * 3)
    assert times["slow"] == pytest.approx([0.01])
    assert harness._ratio(times["hand"], times["fast"]) == pytest.approx(12.5)


def test_every_contender_is_specialized_before_it_is_timed():
    calls = []
    harness._specialize(calls.append, b"x")
    # CPython 3.11 specializes after 8 calls; the harness gives every contender more
    assert len(calls) == harness.WARM_CALLS >= 8


def test_each_encoder_is_timed_on_a_copy_decoded_first_and_one_decoded_last():
    """Where a decoded input sits in the heap changes how fast it is walked, so neither
    encoder may get only the later-decoded (better placed) input: each is timed on one
    copy decoded before the other's and one decoded after."""
    decoded: list[str] = []  # every decode, in order

    def decoder(name):
        def run(buf):
            decoded.append(name)
            return [len(decoded)]  # the copy is known by its place in the decode order
        return run

    given: dict[str, set] = {"fast": set(), "hand": set()}

    def encoder(name):
        def run(vs):
            given[name].add(vs[0])
            return b"\x01"
        return run

    case = harness.Case("toy", "items", 1, b"\x01",
                        {"fast": decoder("fast"), "hand": decoder("hand")})
    case.encoders = {"fast": encoder("fast"), "hand": encoder("hand")}
    case.values = [0]
    res = harness.run_case(case, 3)
    start = len(decoded) - 3  # the four encode inputs are the last four decodes
    assert decoded[start - 1:] == ["fast", "hand", "hand", "fast"]
    assert given == {"fast": {start, start + 3}, "hand": {start + 1, start + 2}}
    assert res["encode_agree"] == {"fast": True, "hand": True}
    assert res["encode_ratio_vs_hand"]["hand"] == pytest.approx(1.0)


def test_the_pile_floor_gives_the_fast_paths_values_and_checks_nothing():
    """The floor a missed decode target is measured against (``harness.floor_ratios``):
    the same values as the fast path on the corpus, and no check (a bad magic passes)."""
    case = harness.pile_case(300)
    assert case.floor is not None
    assert case.floor(case.data) == case.decoders["fast"](case.data)
    bad = bytearray(case.data)
    bad[20] ^= 0xFF  # in the first frame's magic tail
    with pytest.raises(Exception, match="magic"):
        case.decoders["fast"](bytes(bad))
    assert len(case.floor(bytes(bad))) == 300
    r = harness.floor_ratios(case, 2)
    assert r["agree"] == {"fast": True, "hand": True, "floor": True}
    assert r["rounds"] == 2 and r["items"] == 300
    assert r["ratio_vs_hand"]["hand"] == pytest.approx(1.0)
    assert r["ratio_vs_hand"]["floor"] > 0 and r["fast_vs_floor"] > 0
    with pytest.raises(ValueError, match="no floor"):
        harness.floor_ratios(harness.kladde_case(10), 1)
