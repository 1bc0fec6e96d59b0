"""Pile: nothing is lost. One handle shared by threads stores every blob; lookups see what
other handles appended; every cut goes through ``runtime/cut.py`` and keeps the cut bytes;
an incomplete tail and an unsupported record are told apart the same way at any length."""

from __future__ import annotations

import ast
import os
import threading
from pathlib import Path

import pytest
from blake3 import blake3

from bytewright.generated import pile as g
from bytewright.runtime import cut
from bytewright.runtime.pile import (
    CorruptPile,
    Pile,
    UnsupportedRecord,
    amputate,
    frame,
    iter_records,
    kinds,
)

from .conftest import load_cases

C = load_cases("pile_cases")
KEY = bytes([7]) * 32
PILE_RUNTIME = Path(__file__).resolve().parents[1] / "runtime" / "pile"


@pytest.fixture
def path(tmp_path) -> str:
    return str(tmp_path / "a.pile")


def g_blob(payload: bytes) -> bytes:
    return g.encode_pile_record(C.blob(payload))


def _run_threads(target, n: int) -> list[BaseException]:
    errors: list[BaseException] = []

    def guarded(i: int) -> None:
        try:
            target(i)
        except BaseException as exc:  # noqa: BLE001 - every failure is the test's result
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


# -- one handle, many threads ---------------------------------------------------------------

def test_four_threads_put_on_one_handle_store_all_1200_blobs(path):
    pl = Pile.create(path)

    def work(i: int) -> None:
        for j in range(300):
            pl.put(f"blob {i}-{j}".encode())

    errors = _run_threads(work, 4)
    pl.close()
    assert errors == []
    q = Pile.open(path, writable=False)
    try:
        for i in range(4):
            for j in range(300):
                payload = f"blob {i}-{j}".encode()
                assert q.get(blake3(payload).digest()) == payload
        assert len(q.blobs) == 1200 and q.applied == os.path.getsize(path)
    finally:
        q.close()


def test_readers_alongside_writers_on_one_handle_see_consistent_state(path):
    pl = Pile.create(path)
    seed = [f"seed {k}".encode() for k in range(20)]
    for payload in seed:
        pl.put(payload)
    done = threading.Event()
    bad: list[str] = []

    def writer(i: int) -> None:
        for j in range(60):
            pl.put(f"w {i}-{j}".encode() * (1 + j % 3))
            pl.commit(KEY, C.b(1), blake3(f"{i}-{j}".encode()).digest())

    def reader(_: int) -> None:
        seen = 0
        while not done.is_set():
            for payload in seed:
                got = pl.get(blake3(payload).digest())
                if got != payload:
                    bad.append(f"get returned {bytes(got)[:20]!r} for {payload!r}")
            members = pl.members(C.b(1))
            if len(members) < seen or len(set(members)) != len(members):
                bad.append(f"members went from {seen} to {len(members)} (or repeated)")
            seen = len(members)

    readers: list[BaseException] = []
    rthreads = [threading.Thread(target=lambda k=k: readers.extend(_run_threads(reader, 1)))
                for k in range(2)]
    for t in rthreads:
        t.start()
    try:
        errors = _run_threads(writer, 3)
    finally:
        done.set()
        for t in rthreads:
            t.join()
    assert errors == [] and readers == [] and bad == []
    assert len(pl.members(C.b(1))) == 180
    pl.close()
    with Pile.open(path, writable=False) as q:
        assert len(q.blobs) == 20 + 180 and len(q.members(C.b(1))) == 180


# -- lookups refresh first -------------------------------------------------------------------

def test_lookups_see_records_another_handle_appended(path):
    Pile.create(path).close()
    with Pile.open(path) as reader, Pile.open(path) as writer:
        assert reader.members(C.b(1)) == [] and not reader.wants
        handle = writer.put(b"appended elsewhere")
        writer.commit(KEY, C.b(1), C.b(2))
        key = writer.want(C.WANT_BLOB)
        with open(path, "ab") as f:  # pins have no writer: a record another tool appended
            f.write(frame(kinds.KIND_PIN_HEAD, g.PinHeadBody(C.h16(0x11), C.b(4))))
        # no refresh() on the reader: each lookup picks up what the file gained
        assert reader.get(handle) == b"appended elsewhere"
        assert handle in reader
        assert reader.members(C.b(1)) == [C.b(2)]
        assert key in reader.wants
        assert reader.pins == {C.h16(0x11): C.b(4)}


def test_a_lookup_rescans_only_when_the_file_grew(path, monkeypatch):
    with Pile.create(path) as p:
        handle = p.put(b"x")
        scans = []
        real = Pile._scan

        def counting(self, *a, **kw):
            if self is p:
                scans.append(self.applied)
            return real(self, *a, **kw)

        monkeypatch.setattr(Pile, "_scan", counting)
        for _ in range(5):
            assert p.get(handle) == b"x" and p.members(C.b(1)) == []
        assert scans == []  # the file did not grow: no scan
        with Pile.open(path) as other:
            other.put(b"y")
        assert p.get(blake3(b"y").digest()) == b"y"
        assert scans == [512]  # one scan, of the appended bytes only


# -- every cut goes through runtime/cut.py ---------------------------------------------------

def test_no_ftruncate_in_the_pile_runtime():
    offenders = []
    for src in sorted(PILE_RUNTIME.glob("*.py")):
        tree = ast.parse(src.read_text(), str(src))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in {"ftruncate", "truncate"}:
                offenders.append(f"{src.name}:{node.lineno}")
            if isinstance(node, ast.Name) and node.id in {"ftruncate", "truncate"}:
                offenders.append(f"{src.name}:{node.lineno}")
    assert offenders == []


def test_amputate_cuts_through_runtime_cut(path, monkeypatch):
    good = g_blob(b"a") + g_blob(b"b")
    torn = g_blob(b"c" * 300)[:600]
    Path(path).write_bytes(good + torn)
    calls = []
    real = cut.cut

    def spy(*a, **kw):
        calls.append((a[2], kw.get("reason")))
        return real(*a, **kw)

    monkeypatch.setattr(cut, "cut", spy)
    res = amputate(path, expected=len(good))
    assert calls and calls[0][0] == len(good) and calls[0][1]
    assert Path(path).read_bytes() == good
    assert res.discarded == f"{path}.discarded-{len(good)}"
    assert cut.side_files(path) == [res.discarded] and Path(res.discarded).read_bytes() == torn


def test_a_second_amputate_at_the_same_offset_keeps_both_tails(path):
    good = g_blob(b"a")
    Path(path).write_bytes(good + b"\x03\x71")
    first = amputate(path)
    with open(path, "ab") as f:
        f.write(kinds.FRAME_MAGIC[:20])
    second = amputate(path)
    assert first.discarded != second.discarded
    assert Path(first.discarded).read_bytes() == b"\x03\x71"
    assert Path(second.discarded).read_bytes() == kinds.FRAME_MAGIC[:20]
    assert Path(path).read_bytes() == good


# -- incomplete vs unsupported: the same answer at any length ---------------------------------

ODD_HEAD = kinds.MAGIC_HEAD + bytes(4)  # the magic's first half, then bytes the magic never has


@pytest.mark.parametrize("tail", [ODD_HEAD, ODD_HEAD.ljust(256, b"\0")], ids=["20", "256"])
def test_magic_head_then_foreign_bytes_is_unsupported_at_any_length(tail):
    good = g_blob(b"a")
    with pytest.raises(UnsupportedRecord) as exc:
        list(iter_records(good + tail))
    assert exc.value.offset == len(good) and exc.value.marker == kinds.MAGIC_HEAD


@pytest.mark.parametrize("tail", [ODD_HEAD, ODD_HEAD.ljust(256, b"\0")], ids=["20", "256"])
def test_amputate_refuses_magic_head_then_foreign_bytes_at_any_length(path, tail):
    data = g_blob(b"a") + tail
    Path(path).write_bytes(data)
    with pytest.raises(UnsupportedRecord):
        amputate(path)
    assert Path(path).read_bytes() == data and cut.side_files(path) == []


@pytest.mark.parametrize("n", [1, 15, 16, 20, 27, 28, 100])
def test_a_torn_current_record_is_corrupt_at_any_length(path, n):
    # a proper prefix of the magic, or the whole magic and less than the record: torn
    good = g_blob(b"a")
    tail = g_blob(b"b" * 10)[:n]
    with pytest.raises(CorruptPile) as exc:
        list(iter_records(good + tail))
    assert exc.value.valid_length == len(good)
    Path(path).write_bytes(good + tail)
    res = amputate(path, expected=len(good))
    assert res.truncated and Path(res.discarded).read_bytes() == tail
