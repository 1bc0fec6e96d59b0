"""``bench --baselines --quick``: the report's shape, and that every contender decoded (and
every encoder produced) exactly what the generated fast path did. Never a speed assertion."""

from __future__ import annotations

import json

import pytest

from bytewright.bench import harness
from bytewright.cli.main import main


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "report.json"
    assert main(["bench", "--baselines", "--quick", "--report", str(out)]) == 0
    return json.loads(out.read_text())


def test_every_case_present_with_contenders(report):
    assert report["quick"] is True and report["repeat"] >= 1
    assert set(report["cases"]) == set(harness.BUILDERS)
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
    htt = report["cases"]["htt_wal_tail20"]
    assert {"construct_plain", "construct_plain_compiled"} <= set(htt["decode"])
    assert htt["encode_ratio_vs_hand"]["hand"] == pytest.approx(1.0)
