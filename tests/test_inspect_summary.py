"""``bytewright inspect FILE`` on a file of many records: a summary by default (parts,
items by type, where the first and last begin, errors), every field with ``--list``."""

from __future__ import annotations

import functools
import io
import json

import pytest

from bytewright.cli import inspect_file
from bytewright.cli.main import main
from bytewright.review import checks

FX = checks.FIXTURE_DIR


def data_of(rel: str) -> bytes:
    return checks.parse_fixture(FX / rel).data


@pytest.fixture(autouse=True)
def _loaded_once(monkeypatch):
    """The schemas are loaded once for the module (the command loads them per call)."""
    monkeypatch.setattr(inspect_file, "_families", lambda proj, *args, **kwargs: _families()[1])


def run(argv, capsys):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


_LOAD = inspect_file._families


@functools.cache
def _families():
    from bytewright.generator import project as pm

    proj = pm.resolve(None)
    return proj, _LOAD(proj)


def _whole(data: bytes):
    """The reference: the whole input inspected field by field from memory."""
    from bytewright.review import inspector

    proj, families = _families()
    target = inspector.choose(data[:512], families, hint="")
    return inspector.run_target(io.BytesIO(data), len(data), target, proj.load_module)


def _store(path, ops) -> None:
    from bytewright.runtime.htt.store import Store

    s = Store.create(str(path), semantic_dims=0)
    for op, key in ops:
        if op == "put":
            s.put(key, key.encode())
        elif op == "update":
            s.update(key, b"new " + key.encode())
        else:
            s.delete(key)
    s.close()


def test_store_summary_counts_entries_by_type(tmp_path, capsys):
    f = tmp_path / "s.htt"
    ops = [("put", f"/k{i}") for i in range(6)] + [("update", "/k1"), ("update", "/k2"),
                                                      ("delete", "/k3")]
    _store(f, ops)
    code, out, err = run(["inspect", str(f), "--json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    entries = next(p for p in doc["summary"]["parts"] if p["path"] == "htt_file.wal.entries")
    assert entries["items"] == len(ops) and entries["record"] == "wal_entry"
    assert entries["types"] == {"INSERT": 6, "UPDATE": 2, "DELETE": 1}
    # first and last: where the first and the last WAL entry begin
    from bytewright.generated import htt

    raw = f.read_bytes()
    starts = [entries["offset"]] + [end for _, end in htt.iter_wal_entry(
        raw, entries["offset"], semantic_dims=0, tail_layout=0)]
    assert starts[-1] == len(raw) and len(starts) == len(ops) + 1
    assert (entries["first"], entries["last"]) == (starts[0], starts[-2])
    code, text, _ = run(["inspect", str(f)], capsys)
    assert code == 0 and "htt_file.wal.entries: 9 wal_entry" in text
    assert "every checksum verified" in text and "entry_crc" not in text  # no field listed


def test_pile_summary_types_and_a_damaged_record(tmp_path, capsys):
    blob, branch = data_of("pile/blob_hello.hex"), data_of("pile/env_branch.hex")
    data = blob * 4 + branch * 2 + blob
    f = tmp_path / "p.pile"
    f.write_bytes(data)
    code, out, err = run(["inspect", str(f), "--json"], capsys)
    assert code == 0, err
    (part,) = json.loads(out)["summary"]["parts"]
    assert part["items"] == 7 and sorted(part["types"].values()) == [2, 5]
    assert part["first"] == 0 and part["last"] == len(data) - len(blob)
    # a damaged record: the error the listing gives, at its offset and path
    bad = bytearray(data)
    bad[len(blob) * 2 + 17] ^= 0xFF  # the magic of the third record
    f.write_bytes(bytes(bad))
    ref = _whole(bytes(bad)).as_dict()
    code, out, err = run(["inspect", str(f), "--json"], capsys)
    doc = json.loads(out)
    assert code == 1 and doc["ok"] is False
    assert doc["error"]["offset"] == ref["error"]["offset"] == len(blob) * 2 + 16
    assert doc["error"]["path"] == ref["error"]["path"]
    assert doc["summary"]["parts"][0]["items"] == 2  # the records before it


def test_list_equals_the_listing_from_memory(tmp_path, capsys):
    """``--list`` (records of a run traced from their own bytes, read from the file)
    prints exactly what inspecting the whole input from memory prints."""
    from bytewright.review import inspector

    data = data_of("pile/blob_hello.hex") * 3 + data_of("pile/env_branch.hex")
    f = tmp_path / "p.pile"
    f.write_bytes(data)
    code, out, _ = run(["inspect", str(f), "--list"], capsys)
    want = inspector.render_text(_whole(data))
    assert code == 0 and out.split("\n", 1)[1] == want and "pile_record[3]" in want


def test_a_run_after_a_head_record_is_numbered_as_the_listing_numbers_it(tmp_path, capsys):
    """A ZE graph WAL (a header, then frames): the frames' names in findings go on from
    the header's index, as in the listing."""
    from bytewright.runtime.ze import graphwal

    env = data_of("ze/wal_graph_commit_v1.hex")[14:-8]
    data = bytearray(graphwal.file_header(5, 1) + env * 2)
    data[-len(env) // 2] ^= 0x20  # inside the second copy
    f = tmp_path / "g.zgw"
    f.write_bytes(bytes(data))
    ref = _whole(bytes(data)).as_dict()
    code, out, _ = run(["inspect", str(f), "--json"], capsys)
    doc = json.loads(out)
    assert code == 1 and not ref["ok"] and ref["bad_checksums"] + [ref["error"]] != [None]
    assert doc["bad_checksums"] == ref["bad_checksums"]
    assert (doc["error"] or {}).get("path") == (ref["error"] or {}).get("path")
    (head, frames) = doc["summary"]["parts"]
    assert head["path"] == "zgw_file_header[0]" and frames["first"] == head["size"]
