"""The generic CLI verbs (generate/check are covered in test_generator.py)."""

from __future__ import annotations

import json

from bytewright.cli.main import main
from bytewright.review.checks import FIXTURE_DIR


def test_inspect_fixture_as_json(capsys):
    assert main(["inspect", "htt", "auto", str(FIXTURE_DIR / "htt/02_structural_only.hex"),
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["end"] == out["size"] == 518
    entries = out["value"]["snapshot"]["entries"]
    assert entries[1]["key"] == "/plain/node_00" and entries[1]["data"] == b"payload-0".hex()


def test_inspect_reports_decode_error(tmp_path, capsys):
    bad = tmp_path / "bad.htt"
    bad.write_bytes(b"HTT\0\x02" + bytes(10))
    assert main(["inspect", "htt", "htt_file", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "bytewright inspect: " in err and "bad.htt:8: htt_file.header" in err


def test_inspect_unknown_record(tmp_path, capsys):
    f = tmp_path / "x.bin"
    f.write_bytes(b"")
    assert main(["inspect", "htt", "nope", str(f)]) == 2
