"""``bytewright export arrow|parquet|jsonl FILE`` and ``to_arrow``: a file's records as
tables (docs/export.md), checked by querying the Parquet output with DuckDB.

The files are real: an HTT store written by the HTT runtime (``Store``) and a ZE WAL
written by the ZE runtime (``WalAppender``); the values asserted are the ones written.
"""

from __future__ import annotations

import json
import sys

import duckdb
import pytest

from bytewright.cli.main import main as cli_main
from bytewright.generated import ze
from bytewright.review import export_table
from bytewright.runtime.htt.store import Store
from bytewright.runtime.ze import files as ze_files
from bytewright.runtime.ze import wal as ze_wal

DOC_IDS = [5, 6, 7]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    d = tmp_path_factory.mktemp("records")
    htt = d / "store.htt"
    s = Store.create(str(htt))
    s.put("/a", b"hello", meta={"k": "v"})
    s.put("/a/b", b"world")
    s.delete("/a/b")
    s.close()
    wal = d / "store.wal"
    payloads = [ze_wal.encode_payload(2, ze.OpDeleteV1(ze.PayloadV1Header(), [i]))
                for i in DOC_IDS]
    with ze_files.WalAppender(str(wal)) as w:
        for p in payloads:
            w.append(2, p)
    return {"htt": htt, "wal": wal, "payloads": payloads}


def _rows(sql: str) -> list[tuple]:
    return duckdb.sql(sql).fetchall()


def test_htt_store_to_parquet_queried_with_duckdb(written, tmp_path, capsys):
    out = tmp_path / "htt"
    assert cli_main(["export", "parquet", str(written["htt"]), "-o", str(out)]) == 0
    assert "wal_entry.parquet (3 rows)" in capsys.readouterr().out
    entries = f"'{out}/wal_entry.parquet'"
    assert _rows(f"select count(*), sum(seq) from {entries}") == [(3, 6)]
    assert _rows(f'select key, op from {entries} order by _offset') == [
        ("/a", "INSERT"), ("/a/b", "INSERT"), ("/a/b", "DELETE")]
    assert _rows(f"select \"body.data\" from {entries} where key = '/a' and op = 'INSERT'"
                 ) == [(b"hello",)]
    assert _rows(f"select distinct _checksum from {entries}") == [("ok",)]
    # offsets increase, each record starts where the previous one ends, and every record
    # type together covers the file byte for byte
    offs = _rows(f"select _offset, _size from {entries} order by _offset")
    assert all(a + n == b for (a, n), (b, _) in zip(offs, offs[1:], strict=False))
    assert _rows(f"select min(_offset), sum(_size) from read_parquet('{out}/*.parquet', "
                 "union_by_name=true)") == [(0, written["htt"].stat().st_size)]
    assert _rows(f"select dimension, \"flags.compressed\" from '{out}/file_header.parquet'"
                 ) == [(4, False)]


def test_ze_wal_to_parquet_queried_with_duckdb(written, tmp_path):
    out = tmp_path / "ze"
    assert cli_main(["export", "parquet", str(written["wal"]), "-o", str(out)]) == 0
    frames = f"'{out}/wal_frame.parquet'"
    assert _rows(f"select count(*), sum(seq), min(op), max(op) from {frames}") == [
        (3, 6, 2, 2)]
    assert [r[0] for r in _rows(f"select payload from {frames} order by seq")] == \
        written["payloads"]
    assert _rows(f"select distinct _checksum from {frames}") == [("ok",)]
    assert _rows(f"select _offset from {frames} order by seq") == [(40,), (86,), (132,)]
    assert _rows(f"select first_seq, _checksum from '{out}/wal_file_header.parquet'") == [
        (1, "none")]


def test_jsonl_round_trips_the_tables(written, tmp_path):
    out = tmp_path / "store.jsonl"
    assert cli_main(["export", "jsonl", str(written["htt"]), "-o", str(out)]) == 0
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [x["_record"] for x in lines] == ["file_header", "snapshot_section",
                                             "wal_header", "wal_entry", "wal_entry",
                                             "wal_entry"]
    assert [x["_offset"] for x in lines] == sorted(x["_offset"] for x in lines)
    tables = export_table.to_arrow(written["htt"])
    for name, table in tables.items():
        mine = [{k: v for k, v in x.items() if k != "_record"} for x in lines
                if x["_record"] == name]
        theirs = [{k: v.hex() if isinstance(v, bytes) else v for k, v in row.items()}
                  for row in table.to_pylist()]
        assert len(mine) == len(theirs), name
        for a, b in zip(mine, theirs, strict=True):
            # a key a record lacks (a conditional part absent) is a null column; a
            # 128-bit integer is exact in JSON and text in Arrow (no such Arrow type)
            for k in set(a) | set(b):
                v = a.get(k)
                v = str(v) if isinstance(v, int) and not isinstance(v, bool) and v >= 2**64 \
                    else v
                assert v == b.get(k), (name, k)
    assert lines[3]["body.data"] == b"hello".hex()
    assert lines[3]["body.meta"] == [{"key": "_child_index", "value": "0"},
                                     {"key": "k", "value": "v"}]


def test_to_arrow_takes_bytes_and_marks_a_bad_checksum(written):
    data = bytearray(written["wal"].read_bytes())
    data[86 + 14 + 8] ^= 0xFF  # a payload byte of the second frame
    tables = export_table.to_arrow(bytes(data))
    frames = tables["wal_frame"].to_pylist()
    assert [f["_checksum"] for f in frames] == ["ok", "bad", "ok"]
    assert frames[1]["payload"] == bytes(data[86 + 14:86 + 46 - 8])


def test_a_corrupt_file_is_one_line_with_the_offset(written, tmp_path, capsys):
    bad = tmp_path / "torn.htt"
    bad.write_bytes(written["htt"].read_bytes()[:-5])
    assert cli_main(["export", "jsonl", str(bad)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert str(bad) in err and "htt htt_file does not decode at offset" in err
    at = int(err.split("does not decode at offset ")[1].split(":")[0])
    assert 142 <= at < 157  # inside the last WAL entry, the one cut short


def test_missing_pyarrow_is_one_line_with_the_install_hint(written, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    assert cli_main(["export", "parquet", str(written["htt"])]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install 'bytewright[tables]'" in err


def test_arrow_ipc_files_and_an_explicit_family(written, tmp_path):
    import pyarrow as pa

    out = tmp_path / "arrow"
    assert cli_main(["export", "arrow", str(written["wal"]), "-o", str(out)]) == 0
    with pa.memory_map(str(out / "wal_frame.arrow")) as src:
        table = pa.ipc.open_file(src).read_all()
    assert table.column("seq").to_pylist() == [1, 2, 3]
    assert table.column_names[:3] == ["_offset", "_size", "_checksum"]
    assert set(export_table.to_arrow(written["wal"], family="ze")) == {"wal_file_header",
                                                                        "wal_frame"}
    with pytest.raises(export_table.ExportError, match="no family recognises"):
        export_table.to_arrow(written["wal"], family="htt")
