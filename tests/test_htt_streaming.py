"""``htt info`` and ``htt verify`` read a store in one pass without building its tree.

What they print must be what a full open (``Store.open(readonly=True).info()``, the
replay into the tree) gives: header fields, live nodes, synthesized ancestors (§4: replay
synthesizes missing ancestors), the current epoch, the WAL position and its damage; a
corrupt byte fails or is reported with the same error, offset and field path; and the
memory they take is a window and the keys, not the file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc

import pytest

from bytewright.cli.main import main
from bytewright.generated.htt import InsertBody, MetaPair, WalEntry, WalOp
from bytewright.runtime.errors import DecodeError
from bytewright.runtime.htt import census, replay
from bytewright.runtime.htt.store import Store
from bytewright.runtime.htt.survey import survey

from .conftest import read, write


def full_info(path: str) -> dict:
    """The tree-based figures: a read-only open replays every entry into the tree."""
    with Store.open(path, readonly=True) as s:
        return s.info()


def _mixed(path: str) -> None:
    """INSERTs (ancestors logged first), an epoch, UPDATE, SET_SEMANTIC, and a subtree
    DELETE (logged children first): 4 nodes are left (/a, /a/d, /e, /f)."""
    with Store.create(path, semantic_dims=4) as s:
        s.put("/a/b/c", b"x", {"k": "v"}, semantic=[0.1, 0.2, 0.3, 0.4])
        s.put("/a/d", b"y")
        s.seal_epoch()
        s.put("/e", b"z")
        s.delete("/a/b")
        s.update("/e", b"quux-payload")
        s.set_semantic("/e", [0.5] * 4)
        s.seal_epoch()
        s.put("/f", b"")


def _compacted(path: str) -> None:
    """``_mixed`` compacted, then /g and /g/h logged and /g/h deleted: 5 nodes."""
    _mixed(path)
    with Store.open(path) as s:
        s.compact()
        s.put("/g/h", b"1")
        s.delete("/g/h")


def _quantized_meaning(path: str) -> None:
    with Store.create(path, semantic_dims=20, quantized=True, meaning_addressed=True) as s:
        for i in range(30):
            s.put(f"/m/{i}", b"d", semantic=[0.0] * 16 + [(i + 1) / 100] * 4)
        s.compact()
        s.put("/m/x/y", b"")


def _zstd(path: str) -> None:
    with Store.create(path, compression="zstd") as s:
        for i in range(30):
            s.put(f"/m/{i}", b"d" * 100)
        s.compact()
        s.put("/m/x/y", b"")
        s.delete("/m/3")


def _unlogged_ancestors(path: str) -> None:
    """An INSERT of /x/y/z with no ancestor entries (files from before ancestor logging):
    replay synthesizes /x and /x/y (§4)."""
    with Store.create(path) as s:
        s.replicate([WalEntry(1, WalOp.INSERT, "/x/y/z",
                              InsertBody(b"", [MetaPair("_child_index", "0")], None))])


def _parent_delete(path: str) -> None:
    """A DELETE of a node that still has children (another writer's file): replay
    removes the subtree, which only the tree knows."""
    with Store.create(path) as s:
        s.put("/a/b", b"")
        s.put("/a/c", b"")
        s.replicate([WalEntry(s.next_seq, WalOp.DELETE, "/a", None)])
        s.put("/z", b"")


# (builder, live nodes, synthesized ancestors, current epoch, read without the tree)
STORES = {
    "mixed": (_mixed, 4, 0, 2, True),
    "compacted": (_compacted, 5, 0, 2, True),
    "quantized_meaning": (_quantized_meaning, 33, 0, 0, True),
    "zstd": (_zstd, 32, 0, 0, True),
    "unlogged_ancestors": (_unlogged_ancestors, 3, 2, 0, True),
    "parent_delete": (_parent_delete, 1, 0, 0, False),
}


@pytest.mark.parametrize("name", sorted(STORES))
def test_info_equals_the_tree_based_info(tmp_path, capsys, name):
    build, live, synthesized, epoch, streamed = STORES[name]
    p = str(tmp_path / f"{name}.htt")
    build(p)
    full = full_info(p)
    assert (full["live_nodes"], full["synthesized_ancestors"], full["current_epoch"]) == (
        live, synthesized, epoch)
    found = survey(p)
    assert found.info == full
    assert found.streamed is streamed
    assert main(["htt", "info", "--json", p]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(full))


def test_census_merges_agree_with_the_tree(tmp_path, monkeypatch):
    """Many keys through the census's sorted array (merged every few inserts here), with
    deletes of merged and recent keys and keys inserted again after their delete."""
    monkeypatch.setattr(census, "_RECENT", 5)
    p = str(tmp_path / "m.htt")
    with Store.create(p) as s:
        for i in range(60):
            s.put(f"/d{i % 3}/k{i}", b"v")
        for i in range(0, 60, 4):
            s.delete(f"/d{i % 3}/k{i}")
        for i in range(0, 60, 8):
            s.put(f"/d{i % 3}/k{i}", b"again")
        s.delete("/d1")
        s.put("/d1/new", b"")
    found = survey(p)
    assert found.streamed and found.info == full_info(p)
    # 63 nodes; 15 leaves deleted, 8 of them put again; /d1 goes with its 17 live
    # leaves; /d1 and /d1/new come back
    assert found.info["live_nodes"] == 63 - 15 + 8 - 18 + 2


# -- a corrupt byte ---------------------------------------------------------------------------

def _flip(path: str, at: int) -> None:
    buf = bytearray(read(path))
    buf[at] ^= 0xFF
    write(path, bytes(buf))


def _open_error(path: str) -> DecodeError:
    with pytest.raises(DecodeError) as caught:
        Store.open(path, readonly=True)
    return caught.value


@pytest.mark.parametrize("where", ["header", "snapshot_crc", "snapshot_key_length",
                                   "snapshot_payload"])
def test_strict_damage_fails_with_the_same_error(tmp_path, capsys, where):
    p = str(tmp_path / "c.htt")
    _compacted(p)
    buf = read(p)
    snap = replay.read_prefix(buf).snapshot_offset
    byte_len = int.from_bytes(buf[snap:snap + 4], "little")  # §3 snapshot header
    first_key = buf.index(b"/a", snap)  # the first snapshot entry's key (parents first)
    at = {"header": 6, "snapshot_key_length": first_key - 2,
          "snapshot_payload": buf.index(b"quux-payload", snap) + 3,
          "snapshot_crc": snap + 8 + byte_len}[where]
    _flip(p, at)
    expected = _open_error(p)
    with pytest.raises(DecodeError) as caught:
        survey(p)
    got = caught.value
    assert (type(got), got.offset, got.path, str(got)) == (
        type(expected), expected.offset, expected.path, str(expected))
    for verb in ("info", "verify"):
        assert main(["htt", verb, "--json", p]) == 1
        out = json.loads(capsys.readouterr().out)
        # the CLI's one shape, FILE:OFFSET: field: message, over the same error
        tail = str(expected).split(f"offset {expected.offset}: ", 1)[1]
        assert out["error"] == f"{p}:{expected.offset}: {tail}"
        assert (out["type"], out["offset"]) == (type(expected).__name__, expected.offset)


def test_wal_damage_reported_as_before(tmp_path, capsys):
    p = str(tmp_path / "w.htt")
    with Store.create(p) as s:
        for i in range(10):
            s.put(f"/k{i}", (b"payload-%d-" % i) * 20)
    _flip(p, read(p).index(b"payload-3-") + 15)
    full = full_info(p)
    damage = full["wal_damage"]
    assert damage["reason"] == "checksum mismatch" and damage["records_after"] == 6
    assert survey(p).info == full
    assert main(["htt", "verify", p]) == 1
    out = capsys.readouterr().out
    assert f"offset {damage['offset']} (checksum mismatch; 6 valid-looking record(s)" in out
    assert main(["htt", "info", p]) == 0
    assert f"WAL DAMAGED at offset {damage['offset']}" in capsys.readouterr().out


# -- verify says what it checked ---------------------------------------------------------------

def test_verify_names_its_checks_and_deep_replays(tmp_path, capsys):
    p = str(tmp_path / "v.htt")
    _mixed(p)
    assert main(["htt", "verify", p]) == 0
    text = capsys.readouterr().out
    assert "4 live nodes" in text and "counts streamed (no tree built)" in text
    assert "full replay not run (--deep runs it)" in text
    assert main(["htt", "verify", "--json", "--deep", p]) == 0
    assert json.loads(capsys.readouterr().out)["live_nodes"] == 4
    assert main(["htt", "verify", "--deep", p]) == 0
    text = capsys.readouterr().out
    assert "  checks: " in text and "full replay into the tree, counts compared" in text


def test_deep_verify_reports_a_disagreement(tmp_path, capsys, monkeypatch):
    """--deep compares the streamed counts against the tree's: a census that miscounts
    (simulated here) is a problem, exit 1."""
    p = str(tmp_path / "d.htt")
    _mixed(p)
    monkeypatch.setattr(census.Census, "live", property(lambda self: 99))
    assert main(["htt", "verify", "--deep", p]) == 1
    assert "full replay gives live_nodes 4, the streamed read 99" in capsys.readouterr().out


# -- memory ------------------------------------------------------------------------------------

def _bench_file(path: str, n: int, entry_bytes: int | None = None) -> int:
    """The replay bench's corpus: INSERTs with a 20-dim placement, 686 B each."""
    from bytewright.bench.measure import HTT_DIMS, HTT_ENTRY_BYTES, build_htt

    return build_htt(path, n, dims=HTT_DIMS,
                     entry_bytes=entry_bytes or HTT_ENTRY_BYTES)["file_bytes"]


def _traced_peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_info_memory_is_far_below_the_file(tmp_path):
    p = str(tmp_path / "big.htt")
    size = _bench_file(p, 1_500, entry_bytes=6_000)  # ~9 MB in few entries: fast to trace
    import numpy  # noqa: F401  (the census's array module: imported once per process)

    survey(p)  # the decoders' first-call set-up is not what is measured either
    streamed = _traced_peak(lambda: survey(p))
    # a decode window (~1 MB) and the keys, where the tree holds every payload
    assert streamed < size / 4, (streamed, size)


@pytest.mark.long
def test_info_and_verify_peak_rss_on_a_1gb_file(tmp_path):
    """The bound the streaming read is for: <= 200 MB peak RSS on a ~1 GB store."""
    p = str(tmp_path / "huge.htt")
    try:
        size = _bench_file(p, 1_560_000)
        assert size > 1_000_000_000
        for verb in ("info", "verify"):
            # VmHWM: the high-water mark of this process's own address space (ru_maxrss
            # would carry the forking parent's over)
            code = ("from bytewright.cli.main import main; "
                    f"assert main(['htt', {verb!r}, {p!r}]) == 0; "
                    "print([l.split()[1] for l in open('/proc/self/status') "
                    "if l.startswith('VmHWM')][0])")
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True,
                                  text=True, check=True)
            peak_kb = int(proc.stdout.strip().splitlines()[-1])
            assert peak_kb < 200 * 1024, (verb, peak_kb)
    finally:
        if os.path.exists(p):
            os.remove(p)


def test_meaning_addressed_snapshot_damage_fails_with_the_same_error(tmp_path):
    """A v3 snapshot (read twice by the census: keys, then ancestors) with a flipped
    payload byte fails on its CRC exactly as the full open does."""
    p = str(tmp_path / "v3.htt")
    with Store.create(p, semantic_dims=20, meaning_addressed=True) as s:
        for i in range(20):
            s.put(f"/m/{i}", b"payload-%d" % i, semantic=[0.0] * 16 + [(i + 1) / 40] * 4)
        s.compact()
    assert survey(p).info == full_info(p)
    _flip(p, read(p).index(b"payload-7") + 3)
    expected = _open_error(p)
    with pytest.raises(DecodeError) as caught:
        survey(p)
    assert (type(caught.value), caught.value.offset, caught.value.path, str(caught.value)) \
        == (type(expected), expected.offset, expected.path, str(expected))


class _Terminal:
    """A stderr that says it is a terminal and keeps what is written to it."""

    def __init__(self) -> None:
        self.text = ""

    def isatty(self) -> bool:
        return True

    def write(self, s: str) -> int:
        self.text += s
        return len(s)

    def flush(self) -> None:
        pass


def test_reading_shows_progress_on_a_terminal_only(tmp_path, capsys, monkeypatch):
    """A survey or replay reports how far it has read, window by window, up to the file's
    end; on a terminal the verbs draw it as a bar, elsewhere they print nothing of it."""
    p = str(tmp_path / "big.htt")
    with Store.create(p) as s:
        for i in range(400):
            s.put(f"/k{i}", bytes([i % 251]) * 2000)  # several read windows of WAL
    size = os.path.getsize(p)
    seen: list[int] = []
    with replay.reading_progress(seen.append):
        survey(p)
    assert len(seen) >= 2 and seen == sorted(seen) and seen[-1] <= size
    assert seen[-1] > size // 2
    from bytewright.cli import common

    assert main(["htt", "info", p]) == 0
    assert "|" not in capsys.readouterr().err  # not a terminal: no bar
    terminal = _Terminal()
    monkeypatch.setattr(common, "PROGRESS_AFTER", 0)
    monkeypatch.setattr(sys, "stderr", terminal)
    for verb in ("info", "verify"):
        terminal.text = ""
        assert main(["htt", verb, p]) == 0
        assert "reading" in terminal.text and "B" in terminal.text, verb
    terminal.text = ""
    monkeypatch.setenv("NO_COLOR", "1")  # colour is off; the bar stays
    assert main(["htt", "dump", p]) == 0
    assert "replaying" in terminal.text
