"""``bytewright inspect FILE`` from the command line: no family or record needed."""

from __future__ import annotations

import json

import pytest

from bytewright.cli.main import main
from bytewright.review import checks

from .conftest import spread

FX = checks.FIXTURE_DIR


def data_of(rel: str) -> bytes:
    return checks.parse_fixture(FX / rel).data


def run(argv, capsys):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_raw_file_is_detected(tmp_path, capsys):
    f = tmp_path / "store.htt"
    f.write_bytes(data_of("htt/02_structural_only.hex"))
    code, out, err = run(["inspect", str(f), "--list"], capsys)
    assert code == 0, err
    assert "htt.htt_file (detected: htt magic 48545400 at 0)" in out
    assert "header_crc = 0x" in out and "[checksum ok]" in out
    assert "tau = 1 (q64.64" in out
    assert out.rstrip().endswith("every checksum verified")


def test_fixture_needs_no_arguments(capsys):
    code, out, err = run(["inspect", str(FX / "htt" / "wal_entry_insert_1.hex")], capsys)
    assert code == 0, err
    assert "htt.wal_entry (fixture header)" in out and "op = INSERT (1)" in out


def test_corrupt_file_shows_what_decoded_then_the_error(tmp_path, capsys):
    f = tmp_path / "cut.htt"
    f.write_bytes(data_of("htt/02_structural_only.hex")[:300])
    code, out, err = run(["inspect", str(f), "--list"], capsys)
    assert code == 1
    assert "header_crc" in out and "error: offset" in out
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err + out
    code, out, _ = run(["inspect", str(f), "--json", "--list"], capsys)
    doc = json.loads(out)
    assert code == 1 and doc["ok"] is False and doc["error"]["offset"] is not None
    assert doc["records"][0]["children"][0]["name"] == "header"


def test_bad_checksum_exit_and_message(tmp_path, capsys):
    raw = bytearray(data_of("htt/02_structural_only.hex"))
    raw[6] ^= 1
    f = tmp_path / "flip.htt"
    f.write_bytes(bytes(raw))
    code, out, err = run(["inspect", str(f), "--list"], capsys)
    assert code == 1 and "CHECKSUM BAD: expected 0x" in out
    assert "checksum mismatch" in err


def test_at_hex_and_limit(tmp_path, capsys):
    f = tmp_path / "store.htt"
    f.write_bytes(data_of("htt/01_empty.hex"))
    code, out, _ = run(["inspect", str(f), "--at", "9"], capsys)
    assert code == 0 and "offset 9 is in htt_file.header.tau" in out
    code, out, _ = run(["inspect", str(f), "--hex"], capsys)
    assert code == 0 and "| 48 54 54 00" in out
    pile = tmp_path / "many.pile"
    pile.write_bytes(data_of("pile/blob_hello.hex") * 50)
    code, out, _ = run(["inspect", str(pile), "--limit", "2"], capsys)
    assert code == 0 and "pile_record[1]" in out and "pile_record[2]" not in out
    assert "stopped after 2 records" in out


def test_explicit_format_record_and_params(tmp_path, capsys):
    f = tmp_path / "entry.bin"
    f.write_bytes(data_of("htt/wal_entry_insert_1.hex"))
    code, out, err = run(["inspect", str(f)], capsys)
    assert code == 1 and "no family recognises" in err
    code, out, err = run(["inspect", str(f), "--format", "htt", "--record", "wal_entry",
                          "--params", '{"semantic_dims": 16, "tail_layout": 0}'], capsys)
    assert code == 0, err
    assert "op = INSERT (1)" in out
    code, _, err = run(["inspect", str(f), "--format", "nope"], capsys)
    assert code == 2 and "no family 'nope'" in err


@pytest.mark.parametrize("kind", ["missing", "folder"])
def test_bad_paths_are_one_line(kind, tmp_path, capsys):
    path = tmp_path / "nothing" if kind == "missing" else tmp_path
    code, out, err = run(["inspect", str(path)], capsys)
    assert code == 3 and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_progress_bar_on_a_terminal(tmp_path, capsys, monkeypatch):
    import sys

    from bytewright.cli import inspect_file

    pile = tmp_path / "many.pile"
    pile.write_bytes(data_of("pile/blob_hello.hex") * 200)
    monkeypatch.setattr(inspect_file, "PROGRESS_MIN", 1)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    code, out, err = run(["inspect", str(pile), "--list"], capsys)
    assert code == 0 and "pile_record[199]" in out
    assert "inspect:" in err and "/102k" in err  # tqdm drew a bar sized to the file
    code, out, err = run(["inspect", str(pile), "--json"], capsys)
    assert code == 0 and "inspect:" not in err  # machine output: no bar



@pytest.mark.parametrize("rel", ["htt/02_structural_only.hex", "pile/blob_256.hex"])
@pytest.mark.parametrize("cut", [None, 300, 20])
def test_json_streams_the_same_document_the_whole_tree_gives(rel, cut, tmp_path, capsys):
    """``--json`` writes each record as it is decoded (memory does not grow with the file)
    and still prints one JSON document, equal to the whole-tree result."""
    import io

    from bytewright.cli import inspect_file
    from bytewright.generator import project as pm
    from bytewright.review import inspector

    data = data_of(rel) * 3 if rel.startswith("pile") else data_of(rel)
    data = data if cut is None else data[:cut]
    f = tmp_path / "x.bin"
    f.write_bytes(data)
    proj = pm.resolve(None)
    target = inspector.choose(data[:512], inspect_file._families(proj), hint="")
    want = inspector.run_target(io.BytesIO(data), len(data), target, proj.load_module)
    code, out, _ = run(["inspect", str(f), "--json", "--list"], capsys)
    doc = json.loads(out)
    ref = json.loads(json.dumps(want.as_dict(), default=str))
    assert code == (0 if want.ok else 1) and doc["ok"] == ref["ok"]
    if want.ok:
        assert doc == ref and len(doc["records"]) == len(want.records)
    else:  # a file walked part by part stops at the failing part: same error, same place
        assert doc["error"]["offset"] == ref["error"]["offset"]


def _whole(data: bytes):
    """The whole-record inspection (the reference the part-by-part walk must equal)."""
    import io

    from bytewright.cli import inspect_file
    from bytewright.generator import project as pm
    from bytewright.review import inspector

    proj = pm.resolve(None)
    target = inspector.choose(data[:512], inspect_file._families(proj), hint="")
    return inspector.run_target(io.BytesIO(data), len(data), target, proj.load_module)


def _store_files() -> list[str]:
    out = []
    for f in sorted((FX / "htt").glob("*.hex")) + sorted((FX / "ze").glob("*.hex")):
        d = checks.parse_fixture(f).data
        if d[:4] == b"HTT\x00" or d[:10] == bytes.fromhex("5a4550454d4245440b00"):
            out.append(f"{f.parent.name}/{f.name}")
    return out


# every store file with every damage under -m long; a spread of them (each damage, both
# formats) in the default run
BIG_RECORD_CASES = [(rel, damage) for damage in ("none", "cut", "flip")
                    for rel in _store_files()]


@pytest.mark.parametrize(("rel", "damage"), spread(BIG_RECORD_CASES, 7))
def test_one_big_record_is_shown_part_by_part_with_the_same_document(rel, damage,
                                                                     tmp_path, capsys):
    """An HTT store or ZE WAL (one top-level record) is inspected part by part, its WAL
    items one at a time: the JSON document and the verdict equal the whole-record
    inspection's, on intact and damaged copies."""
    data = bytearray(data_of(rel))
    if damage == "cut":
        data = data[:len(data) * 2 // 3]
    elif damage == "flip":
        data[len(data) * 3 // 4] ^= 0x40
    f = tmp_path / "x.bin"
    f.write_bytes(bytes(data))
    want = _whole(bytes(data))
    code, out, err = run(["inspect", str(f), "--json", "--list"], capsys)
    doc = json.loads(out)
    ref = json.loads(json.dumps(want.as_dict(), default=str))
    assert doc["ok"] == ref["ok"] and code == (0 if want.ok else 1)
    assert (doc["error"] or {}).get("offset") == (ref["error"] or {}).get("offset")
    assert [c["path"] for c in doc["bad_checksums"]] == [c["path"] for c in ref["bad_checksums"]]
    if want.ok:
        assert doc == ref
    # the summary (the default) reaches the same verdict, error and checksum findings
    code2, text, _ = run(["inspect", str(f)], capsys)
    said_ok = "every checksum verified" in text or "no checksum to verify" in text
    assert code2 == code and said_ok == want.ok
    code3, out3, _ = run(["inspect", str(f), "--json"], capsys)
    summary = json.loads(out3)
    assert code3 == code and summary["ok"] == ref["ok"]
    assert summary["bad_checksums"] == ref["bad_checksums"]
    assert ({k: v for k, v in (summary["error"] or {}).items() if k != "message"}
            == {k: v for k, v in (ref["error"] or {}).items() if k != "message"})


def test_many_files_folders_and_globs_with_jobs(tmp_path, capsys):
    """``inspect`` over files, a folder and a glob, in 1 or 2 processes: the same output
    in input order, one ``== FILE`` block (or JSON line) per file, the worst exit code."""
    good = tmp_path / "d" / "store.htt"
    good.parent.mkdir()
    good.write_bytes(data_of("htt/02_structural_only.hex"))
    bad = tmp_path / "d" / "cut.htt"
    bad.write_bytes(data_of("htt/02_structural_only.hex")[:300])
    other = tmp_path / "p.bin"
    other.write_bytes(data_of("pile/blob_256.hex"))
    argv = ["inspect", str(tmp_path / "d"), str(tmp_path / "*.bin")]
    code1, out1, _ = run(argv, capsys)
    code2, out2, _ = run(argv + ["--jobs", "2"], capsys)
    assert code1 == code2 == 1 and out1 == out2
    heads = [ln for ln in out1.splitlines() if ln.startswith("== ")]
    assert heads == [f"== {bad}", f"== {good}", f"== {other}"]
    code3, out3, _ = run(argv + ["--jobs", "2", "--json"], capsys)
    rows = [json.loads(ln) for ln in out3.splitlines()]
    assert code3 == 1 and [r["path"] for r in rows] == [str(bad), str(good), str(other)]
    assert [r["exit"] for r in rows] == [1, 0, 0] and rows[1]["ok"] is True
    assert rows[0]["ok"] is False and rows[0]["error"]["offset"] is not None
    code4, _, err4 = run(["inspect", str(tmp_path / "nothing-*.bin")], capsys)
    assert code4 == 3 and "matches no file" in err4 and "Traceback" not in err4
