"""``bytewright verify PATH...``: detection, whole-file decode, --jobs, input order, exit codes."""

from __future__ import annotations

import json

import pytest

from bytewright.cli import verify
from bytewright.cli.main import main
from bytewright.review import checks

FX = checks.FIXTURE_DIR


def data_of(rel: str) -> bytes:
    return checks.parse_fixture(FX / rel).data


def run(argv, capsys):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Real files of three families in a folder, plus one corrupted copy beside it."""
    from bytewright.bench import ze as ze_bench
    from bytewright.runtime.pile import encode_blob

    d = tmp_path_factory.mktemp("corpus")
    good = d / "good"
    good.mkdir()
    (good / "a.htt").write_bytes(data_of("htt/wal_all_ops_v2.hex"))
    (good / "b.htt").write_bytes(data_of("htt/zstd_compressed.hex"))
    (good / "c.wal").write_bytes(ze_bench._wal(50))
    (good / "d.pile").write_bytes(b"".join(encode_blob(bytes([i]) * (i * 40), 1_700_000_000_000 + i)
                                           for i in range(1, 9)))
    raw = bytearray(data_of("htt/wal_all_ops_v2.hex"))
    raw[-3] ^= 0xFF  # inside the last WAL entry: its CRC no longer matches
    bad = d / "bad.htt"
    bad.write_bytes(bytes(raw))
    return d


def test_folder_all_good(corpus, capsys):
    code, out, err = run(["verify", str(corpus / "good")], capsys)
    assert code == 0, err
    lines = [ln for ln in out.splitlines() if ln.startswith(("ok", "BAD"))]
    assert [ln.split()[1].rsplit("/", 1)[1].rstrip(":") for ln in lines] == \
        ["a.htt", "b.htt", "c.wal", "d.pile"]
    assert all(ln.startswith("ok") for ln in lines)
    assert "htt.htt_file" in lines[0] and "ze.wal_file" in lines[2]
    assert "pile.pile_record, 8 record(s)" in lines[3]
    assert "4 file(s), 4 ok, 0 bad" in out


def test_bad_file_exit_1_with_offset_and_field(corpus, capsys):
    code, out, err = run(["verify", "--json", str(corpus / "good" / "a.htt"),
                          str(corpus / "bad.htt")], capsys)
    assert code == 1
    doc = json.loads(out)
    assert doc["bad"] == 1
    first, second = doc["files"]
    assert first["ok"] and first["path"].endswith("a.htt")
    assert not second["ok"] and second["path"].endswith("bad.htt")
    assert second["offset"] is not None and 0 < second["offset"] < second["bytes"]
    assert second["field"]  # the field path of the failure
    assert "bad.htt" in err


def test_jobs_keeps_input_order_and_results(corpus, capsys):
    files = [str(corpus / "bad.htt"), str(corpus / "good" / "d.pile"),
             str(corpus / "good" / "a.htt"), str(corpus / "good" / "c.wal")]
    code1, out1, _ = run(["verify", "--json", *files], capsys)
    code2, out2, _ = run(["verify", "--json", "--jobs", "2", *files], capsys)
    assert code1 == code2 == 1
    strip = [{k: v for k, v in r.items() if k != "seconds"} for r in json.loads(out1)["files"]]
    strip2 = [{k: v for k, v in r.items() if k != "seconds"} for r in json.loads(out2)["files"]]
    assert [r["path"] for r in strip2] == files
    assert strip == strip2


def test_glob_and_unknown_and_missing(corpus, tmp_path, capsys):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"not a known format at all")
    code, out, _ = run(["verify", str(corpus / "good" / "*.htt"), str(junk)], capsys)
    assert code == 1
    assert out.count("ok   ") == 2
    assert "BAD  " in out and "no family recognises" in out
    code, _, err = run(["verify", str(tmp_path / "nope*.x")], capsys)
    assert code == 3 and "matches no file" in err


def test_kladde_head_only_record_reports_uncovered_bytes(tmp_path):
    from bytewright.bench import kladde as kladde_bench

    f = tmp_path / "t.kladde"
    f.write_bytes(kladde_bench.corpus(200))
    from bytewright.cli.inspect_file import _families
    from bytewright.generator import project as project_mod

    proj = project_mod.resolve(None)
    table = verify.detection_table(_families(proj))
    (r,) = verify.verify_many([str(f)], table)
    assert r["ok"] and r["family"] == "kladde" and r["record"] == "header_page"
    assert r["uncovered"] == f.stat().st_size - 4096  # every page after the header page


def test_failure_inside_a_codec_is_a_bad_line_not_a_crash(tmp_path, capsys):
    """A decompression failure raised with views of the mapped file on the stack: the
    map must still close (no BufferError, exit 1, one BAD line naming offset and field)."""
    raw = bytearray(data_of("htt/zstd_compressed.hex"))
    raw[101] ^= 0xFF  # inside the zstd-compressed snapshot
    f = tmp_path / "z.htt"
    f.write_bytes(bytes(raw))
    trunc = tmp_path / "t.htt"
    trunc.write_bytes(data_of("htt/wal_all_ops_v2.hex")[:-5])
    code, out, err = run(["verify", str(f), str(trunc)], capsys)
    assert code == 1, err
    bad = [ln for ln in out.splitlines() if ln.startswith("BAD")]
    assert len(bad) == 2
    assert "zstd decompression failed" in bad[0] and "htt_file.snapshot" in bad[0]
    assert "offset" in bad[1] and "internal error" not in err
