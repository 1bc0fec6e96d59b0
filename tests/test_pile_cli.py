"""``bytewright pile ...``: every verb on real files, one-line errors and exit codes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bytewright.cli.main import main
from bytewright.generated import pile as g

from .conftest import load_cases, spy_releaser

HERE = Path(__file__).resolve().parent


C = load_cases("pile_cases")  # field values of the fixtures (tests/cases)
MIXED = g.encode_pile_file(C.mixed_pile())


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def mixed(tmp_path) -> str:
    p = tmp_path / "m.pile"
    p.write_bytes(MIXED)
    return str(p)


def test_info_and_records_and_verify(capsys, mixed):
    code, out, _ = run(capsys, "pile", "info", mixed, "--json")
    info = json.loads(out)
    assert code == 0 and info["records"] == 9 and info["status"] == "ok"
    assert info["blobs"] == 4 and info["opaque"] == 1 and info["pins"] == 1
    assert info["by_kind"]["v1/v1_blob"] == 1 and info["by_kind"]["envelope36/env_blob_body"] == 1
    code, out, _ = run(capsys, "pile", "records", mixed)
    assert code == 0 and len(out.splitlines()) == 9 and "opaque" in out
    code, out, _ = run(capsys, "pile", "verify", mixed)
    assert code == 0 and out.rstrip().endswith("ok")


def test_verify_reports_a_bad_blob_and_a_bad_signature(capsys, tmp_path):
    data = bytearray(g.encode_pile_record(C.blob(b"hello")) + g.encode_pile_record(C.commit()))
    data[256] ^= 1          # payload
    data[512 + 200] ^= 1    # signature R of the commit
    p = tmp_path / "b.pile"
    p.write_bytes(bytes(data))
    code, out, _ = run(capsys, "pile", "verify", str(p))
    assert code == 1 and "2 finding(s)" in out and "signature does not verify" in out


def test_amputate_cli(capsys, tmp_path):
    p = tmp_path / "t.pile"
    good = MIXED
    p.write_bytes(good + g.encode_pile_record(C.blob(b"x" * 300))[:600])
    code, _, err = run(capsys, "pile", "amputate", str(p))
    assert code == 2 and f"--truncate-to {len(good)}" in err and len(err.splitlines()) == 1
    code, _, err = run(capsys, "pile", "amputate", str(p), "--truncate-to", "5")
    assert code == 1 and len(err.splitlines()) == 1 and p.stat().st_size == len(good) + 600
    code, out, _ = run(capsys, "pile", "amputate", str(p), "--truncate-to", str(len(good)))
    assert code == 0 and p.read_bytes() == good and f"discarded-{len(good)}" in out


def test_amputate_cli_refuses_middle_damage_in_one_line(capsys, tmp_path):
    recs = [g.encode_pile_record(C.blob(bytes([i]) * 10)) for i in range(4)]
    bad = bytearray(recs[0])
    bad[200] = 7
    p = tmp_path / "m.pile"
    data = bytes(bad) + b"".join(recs[1:])
    p.write_bytes(data)
    code, _, err = run(capsys, "pile", "amputate", str(p), "--truncate-to", "0")
    assert code == 1 and len(err.splitlines()) == 1
    assert "offset 0" in err and "3 valid-looking" in err and p.read_bytes() == data
    code, _, _ = run(capsys, "pile", "amputate", str(p), "--discard-after", "0")
    assert code == 0 and p.stat().st_size == 0
    assert Path(f"{p}.discarded-0").read_bytes() == data


def test_reframe_and_diagnose_cli(capsys, tmp_path):
    src = tmp_path / "old.pile"
    src.write_bytes(g.encode_pile_record(C.v1_blob(b"v1 data")) + g.encode_pile_record(C.blob(b"cur")))
    dest = tmp_path / "new.pile"
    code, out, _ = run(capsys, "pile", "reframe", str(src), "--into", str(dest), "--json")
    # spec: every blob's "insertion timestamps are stamped afresh", the current one too
    assert code == 0 and json.loads(out)["blobs_restamped"] == 2 and dest.exists()
    code, out, _ = run(capsys, "pile", "diagnose", "record-at", "0", str(dest), "--json")
    assert code == 0 and json.loads(out)["record"] == "blob_body"
    # spec: diagnose "rejects offsets that land inside a record"
    code, out, _ = run(capsys, "pile", "diagnose", "record-at", "7", str(dest))
    assert code == 1 and "inside_record" in out and "next_offset: 512" in out


@pytest.mark.parametrize("verb", ["info", "records", "verify", "amputate", "reframe", "salvage",
                                  "diagnose", "compact", "migrate"])
def test_every_verb_fails_in_one_line(capsys, tmp_path, verb):
    def extra(i: int) -> list[str]:
        return {"reframe": ["--into", str(tmp_path / f"out{i}.pile")],
                "salvage": ["--into", str(tmp_path / f"salvaged{i}.pile")],
                "compact": ["--into", str(tmp_path / f"compact{i}.pile")],
                "migrate": ["run", "monotone-wants"],
                "amputate": ["--truncate-to", "0"]}.get(verb, [])
    pre = ["record-at", "0"] if verb == "diagnose" else []
    empty = tmp_path / "empty.pile"
    empty.write_bytes(b"")
    rand = tmp_path / "rand.pile"
    rand.write_bytes(os.urandom(333))
    torn = tmp_path / "torn.pile"
    torn.write_bytes(MIXED[:-77])
    # random bytes are findings for every verb (salvage: no record verifies; docs/cli.md)
    cases = [(str(tmp_path / "missing.pile"), {3}), (str(tmp_path), {3}),
             (str(rand), {1}), (str(torn), {0, 1}), (str(empty), {0, 1})]
    for i, (path, codes) in enumerate(cases):
        code, _, err = run(capsys, "pile", verb, *pre, path, *extra(i))
        assert code in codes, (verb, path, code, err)
        assert "Traceback" not in err and len(err.strip().splitlines()) <= 1, err
    code, _, err = run(capsys, "pile", verb, *pre, str(empty), *extra(99))
    assert code == (1 if verb == "diagnose" else 0), (verb, err)


SCHEMA = HERE.parent / "schemas" / "pile.yaml"


def test_doc_covers_pile(capsys, tmp_path):
    code, _, err = run(capsys, "doc", str(SCHEMA), "--out", str(tmp_path / "site"))
    assert code == 0, err
    md = (tmp_path / "site" / "pile.md").read_text()
    for name in ("frame_rest", "blob_head", "want_request", "proof_v5_body", "envelope36_rest",
                 "v1_blob", "dense_record", "commit_transcript"):
        assert name in md
    layouts = json.loads((tmp_path / "site" / "layouts.json").read_text())
    assert "pile" in json.dumps(layouts)[:100000]


def test_diff_flags_a_changed_kind_handle(capsys, tmp_path):
    new = tmp_path / "pile.yaml"
    text = SCHEMA.read_text()
    handle = "01148F301FE56E346D16596A8480532E8B4420C4EFD00C8DFF437D0DF9810ED0"
    assert text.count(f'"hex:{handle}": blob_body') == 1
    new.write_text(text.replace(f'"hex:{handle}": blob_body', f'"hex:{handle[:-1]}1": blob_body'))
    code, out, _ = run(capsys, "diff", str(SCHEMA), str(new))
    assert code == 1 and "switch-case-changed" in out and "frame_rest.body" in out


def test_verify_names_each_bad_occurrence_once(capsys, tmp_path):
    """A blob written twice: its first copy damaged is one finding naming that offset
    (the later copy serves reads); both damaged is one ``none of 2`` finding. Every
    occurrence is hashed once (``get`` is not asked again)."""
    one = g.encode_pile_record(C.blob(b"hello"))
    for damaged, expect in (((0,), ["at offset 0: payload does not match"]),
                            ((0, len(one)), ["none of 2 occurrence(s)"])):
        data = bytearray(one * 2)
        for at in damaged:
            data[at + 256] ^= 1
        p = tmp_path / "twice.pile"
        p.write_bytes(bytes(data))
        code, out, _ = run(capsys, "pile", "verify", str(p))
        assert code == 1 and "1 finding(s)" in out, out
        assert all(e in out for e in expect), out


def test_reading_verbs_release_the_pages_they_walk(capsys, tmp_path, monkeypatch):
    """``pile info``/``verify``/``records`` read a mapped pile and give back the pages they
    have walked as they go (a 256 MB pile: verify peaked at 398 MB, now 168 MB, of which
    ~127 MB is this machine's import of the pile module and 45 MB the blob index), with
    the same output."""
    from bytewright.runtime import mapped
    from bytewright.runtime.pile import encode_blob, store

    p = tmp_path / "many.pile"
    p.write_bytes(b"".join(encode_blob(i.to_bytes(8, "little") * 100, 1_700_000_000_000 + i)
                           for i in range(300)))
    size = p.stat().st_size
    before = {verb: run(capsys, "pile", verb, str(p)) for verb in ("info", "records", "verify")}
    # one list for both: the store's scan and the CLI's mapped reads
    calls = spy_releaser(monkeypatch, store, record=lambda upto: (verb, upto))
    spy_releaser(monkeypatch, mapped, record=lambda upto: (verb, upto), calls=calls)
    monkeypatch.setattr(store, "RELEASE_EVERY", 8192)
    monkeypatch.setattr(mapped, "RELEASE_EVERY", 8192)
    for verb in ("info", "records", "verify"):
        assert run(capsys, "pile", verb, str(p)) == before[verb]
        ups = [u for v, u in calls if v == verb]
        assert len(ups) >= size // (8192 + 1280) - 1, (verb, len(ups))  # 1,280 B records
        assert max(ups) > size - 2 * 8192 and max(ups) <= size, (verb, max(ups), size)
