"""HTT replay throughput: a read-only open decodes each mapped window's whole
records as rows with the one-loop decoder (``decode_rows_wal_entry``: every whole record
up to the first one the window's end cuts, as tuples, and where each starts) and applies
them with ``State.apply_rows``, the state's inlined loop. These tests hold the fast path
to what the entry-by-entry path gives: the same state, the same scan result, the same
errors and offsets. None of them measures time."""

from __future__ import annotations

import random

import pytest

from bytewright.generated import htt as g
from bytewright.runtime.errors import DecodeError
from bytewright.runtime.htt import replay
from bytewright.runtime.htt.quantized import TailCodec
from bytewright.runtime.htt.state import State
from bytewright.runtime.htt.store import Store

from .conftest import htt_wal_with_an_unappliable_entry, read, write

FULL = g.SemTailLayout.full
SEM = 4


def _zero() -> g.TailFull:
    return g.TailFull([0] * SEM)  # "no placement" (a tail is always present)


def _insert(seq: int, key: str, data: bytes, meta: list[tuple[str, str]], tail=None):
    tail = _zero() if tail is None else tail
    return g.WalEntry(seq, g.WalOp.INSERT, key,
                      g.InsertBody(data, [g.MetaPair(k, v) for k, v in meta], tail))


def _wal_file(path: str, entries: list[g.WalEntry], sem: int = SEM) -> bytes:
    """A WAL-only file holding exactly ``entries``; returns its bytes."""
    Store.create(path, semantic_dims=sem).close()
    head = read(path)[:-8]
    body = b"".join(g.encode_wal_entry(e, semantic_dims=sem, tail_layout=FULL)
                    for e in entries)
    data = head + g.encode_wal_header(g.WalHeader(len(entries), 1)) + body
    write(path, data)
    return data


def _every_op(n: int, seed: int = 5) -> list[g.WalEntry]:
    """Every op and every apply rule a replay meets: inserts of varied size and shape
    (no ``_child_index``, an odd one, three pairs, a zero and a nonzero placement),
    duplicates, missing ancestors, updates, metadata edits, placements,
    deletes of whole subtrees, epochs."""
    rnd = random.Random(seed)
    out: list[g.WalEntry] = []

    def add(op, key, body):
        out.append(g.WalEntry(len(out) + 1, op, key, body))

    def ins(key, data, meta, tail):
        add(g.WalOp.INSERT, key, g.InsertBody(data, [g.MetaPair(k, v) for k, v in meta],
                                              tail))

    ins("/d", b"", [("_child_index", "0"), ("content_type", "dir")], g.TailFull([0] * SEM))
    for i in range(n):
        key = f"/d/{i:05d}"
        size = 5000 if i % 97 == 50 else rnd.randrange(0, 400)
        tail = g.TailFull(
            [rnd.randrange(-2**100, 2**100) for _ in range(SEM)] if i % 3 else [0] * SEM)
        if i % 17 == 3:
            meta = [("kind", "x")]  # no _child_index: the next free one is assigned
        elif i % 19 == 7:
            meta = [("_child_index", "x9"), ("kind", "y")]  # not a number
        elif i % 23 == 11:
            meta = [("_child_index", str(i)), ("a", "1"), ("b", rnd.choice("pq"))]
        else:
            meta = [("_child_index", str(i)), ("kind", rnd.choice("ab"))]
        ins(key, rnd.randbytes(size), meta, tail)
        if i % 29 == 8:
            ins(key, b"again", [("_child_index", "0"), ("kind", "dup")], _zero())  # skipped
        if i % 31 == 9:  # no ancestors logged: replay synthesizes them
            ins(f"/m{i}/a/b", b"deep", [("_child_index", "0"), ("kind", "m")],
                g.TailFull([1] * SEM))
        if i % 7 == 3:
            add(g.WalOp.SET_META, key, g.MetaPair("k", str(i)))
        if i % 11 == 5:
            add(g.WalOp.SET_SEMANTIC, key, g.SetSemanticBody(g.TailFull([i + 1] * SEM)))
        if i % 37 == 20:
            add(g.WalOp.UPDATE, key, g.UpdateBody(b"new", [g.MetaPair("kind", "u")]))
        if i % 41 == 30:
            add(g.WalOp.DELETE, f"/d/{i - 5:05d}", None)
        if i % 211 == 100:
            add(g.WalOp.EPOCH, "", g.EpochBody(i, g.EpochFlags.from_int(0)))
        if i == n // 2:  # a delete builds the child index: later inserts take apply()
            ins(f"/d/{i:05d}/kid", b"k", [("_child_index", "0")], _zero())
            add(g.WalOp.DELETE, f"/d/{i:05d}", None)
            ins(f"/d/{i:05d}/kid2", b"k", [("_child_index", "1")], _zero())
    return out


def _state_of(state: State) -> dict:
    return {"nodes": [(k, n.key, n.data, n._meta, n._tail) for k, n in state.nodes.items()],
            "counters": dict(state.counters), "epoch": state.epoch,
            "synthesized": state.synthesized,
            "children": {k: list(v) for k, v in state.children.items()}}


def _scan_fields(scan: replay.WalScan) -> tuple:
    d = scan.damage
    return (scan.count, scan.next_seq, scan.valid_end, scan.problem, scan.problem_offset,
            None if d is None else (d.offset, d.reason, d.records_after))


def _one_by_one(data: bytes) -> tuple[State, replay.WalScan]:
    """The reference: the whole file as ``bytes`` (the entry-by-entry ``iter_wal_entry``
    loop), every entry through ``State.apply``."""
    prefix = replay.read_prefix(data)
    state = State(TailCodec(prefix.header.semantic_dims, prefix.layout.tail_layout))
    _, scan = replay.load(data, state)
    return state, scan


@pytest.fixture
def fast_path(monkeypatch):
    """Counts the windows whose records the one loop decoded ("fast": at least one), the
    others ("slow": none, the record at the window's start is damaged or longer than
    the window), and the entries the one loop decoded."""
    seen = {"fast": 0, "slow": 0, "entries": 0}
    real = replay.decode_rows_wal_entry

    def spy(chunk, offset, end, **params):
        got = real(chunk, offset, end, **params)
        seen["fast" if got[0] else "slow"] += 1
        seen["entries"] += len(got[0])
        return got

    monkeypatch.setattr(replay, "decode_rows_wal_entry", spy)
    return seen


@pytest.mark.parametrize("window", [2048, 8192, 1 << 18])
def test_fast_replay_state_equals_applying_entries_one_by_one(tmp_path, monkeypatch,
                                                             fast_path, window):
    monkeypatch.setattr(replay, "WINDOW", window)
    p = str(tmp_path / "a.htt")
    entries = _every_op(900)
    data = _wal_file(p, entries)
    ref_state, ref_scan = _one_by_one(data)
    with Store.open(p, readonly=True) as s:
        assert _scan_fields(s.scan) == _scan_fields(ref_scan)
        assert s.scan.problem is None and s.scan.count == len(entries)
        assert _state_of(s.state) == _state_of(ref_state)
        # the public view agrees too
        for key in ref_state.nodes:
            assert s.get(key).meta == {k: v for k, v in ref_state.nodes[key].meta_items(False)}
    # the one loop decoded the entries, each once (the few longer than a small window
    # are read from the file); the record a window's end cut started the next window
    assert len(entries) * 9 // 10 < fast_path["entries"] <= len(entries)
    assert fast_path["fast"] > fast_path["slow"]


def _rows_of(entries: list[g.WalEntry], sem: int = SEM, layout=FULL):
    """``entries`` encoded and read back as rows, and a reader of entry ``i`` (what the
    replay hands ``apply_rows`` for the rows it does not read itself)."""
    blob = b"".join(g.encode_wal_entry(e, semantic_dims=sem, tail_layout=layout)
                    for e in entries)
    rows, starts, stop = g.decode_rows_wal_entry(blob, semantic_dims=sem, tail_layout=layout)
    assert stop == len(blob) and len(rows) == len(entries)
    read: list[int] = []

    def entry_at(i: int) -> g.WalEntry:
        read.append(i)
        return g.decode_wal_entry(blob, starts[i], semantic_dims=sem, tail_layout=layout)[0]
    return rows, entry_at, read


def test_apply_rows_equals_apply_entry_by_entry():
    """``State.apply_rows`` is ``apply`` in a loop: the same nodes, counters, child index,
    epoch and synthesized ancestors, from an empty state and across runs; only the rows
    that are not a common INSERT are read as entries."""
    entries = _every_op(600, seed=9)
    one = State(TailCodec(SEM, FULL))
    for e in entries:
        blob = g.encode_wal_entry(e, semantic_dims=SEM, tail_layout=FULL)
        one.apply(g.decode_wal_entry(blob, semantic_dims=SEM, tail_layout=FULL)[0])
    run = State(TailCodec(SEM, FULL))
    rows, entry_at, read = _rows_of(entries)
    seq, k = 1, 0
    for size in (1, 7, 50, 3, 200, 10_000):  # runs of several lengths
        part = rows[k:k + size]
        applied, exc = run.apply_rows(part, seq, lambda i, k=k: entry_at(k + i))
        assert (applied, exc) == (len(part), None)
        seq += applied
        k += size
    assert k >= len(rows)
    assert _state_of(run) == _state_of(one)
    others = [i for i, e in enumerate(entries) if e.op is not g.WalOp.INSERT]
    assert others and set(others) <= set(read) and len(read) < len(entries)


@pytest.mark.parametrize("layout", [g.SemTailLayout.quantized, g.SemTailLayout.quantized_gacl])
def test_apply_rows_reads_quantized_tails_as_apply_does(layout):
    """Quantized tails come as rows too (``(user,)`` / ``(reserved, user)``): the same
    packed placements as ``apply`` gives, zero ones "not set"."""
    sem = 20
    codec = TailCodec(sem, layout)
    entries = []
    for i in range(40):
        raw = None if i % 5 == 0 else [((i * 7 + d) % 9 - 4) << 60 for d in range(sem)]
        if layout is g.SemTailLayout.quantized and raw is not None:
            raw[:16] = [0] * 16
        entries.append(g.WalEntry(i + 1, g.WalOp.INSERT, f"/q{i:02d}", g.InsertBody(
            b"d", [g.MetaPair("_child_index", str(i))], codec.to_disk(raw))))
    one = State(TailCodec(sem, layout))
    for e in entries:
        blob = g.encode_wal_entry(e, semantic_dims=sem, tail_layout=layout)
        one.apply(g.decode_wal_entry(blob, semantic_dims=sem, tail_layout=layout)[0])
    run = State(TailCodec(sem, layout))
    rows, entry_at, read = _rows_of(entries, sem, layout)
    assert run.apply_rows(rows, 1, entry_at) == (len(entries), None)
    assert _state_of(run) == _state_of(one) and read == []
    assert sum(n._tail is None for n in run.nodes.values()) == 8


def test_apply_rows_stops_at_a_sequence_break_and_reports_an_apply_error():
    run = State(TailCodec(SEM, FULL))
    es = [_insert(i + 1, f"/k{i}", b"v", [("_child_index", str(i))]) for i in range(5)]
    es[3] = _insert(9, "/k3", b"v", [("_child_index", "3")])
    rows, entry_at, _ = _rows_of(es)
    assert run.apply_rows(rows, 1, entry_at) == (3, None)
    assert list(run.nodes) == ["/k0", "/k1", "/k2"]
    # a TQ1.9 value out of range: the entries before it apply, its error comes back
    # and it changes nothing
    q = State(TailCodec(20, g.SemTailLayout.quantized))
    ok = [g.WalEntry(i + 1, g.WalOp.INSERT, f"/q{i}", g.InsertBody(
        b"", [g.MetaPair("_child_index", str(i))], g.TailQuantized([0, 0, 0, 0])))
        for i in range(2)]
    bad = g.WalEntry(3, g.WalOp.INSERT, "/bad",
                     g.InsertBody(b"", [], g.TailQuantized([30000, 0, 0, 0])))
    rows, entry_at, _ = _rows_of([*ok, bad], 20, g.SemTailLayout.quantized)
    applied, exc = q.apply_rows(rows, 1, entry_at)
    assert applied == 2 and isinstance(exc, (DecodeError, ValueError))
    assert list(q.nodes) == ["/q0", "/q1"]


def _entry_starts(data: bytes, entries: list[g.WalEntry]) -> list[int]:
    sizes = [len(g.encode_wal_entry(e, semantic_dims=SEM, tail_layout=FULL)) for e in entries]
    pos = len(data) - sum(sizes)
    out = []
    for n in sizes:
        out.append(pos)
        pos += n
    return out


@pytest.mark.parametrize("how", ["flip_crc", "flip_key", "cut"])
def test_damage_mid_wal_reads_the_same_as_the_entry_by_entry_scan(tmp_path, monkeypatch,
                                                                  fast_path, how):
    """A corrupted entry in a middle window: the same intact prefix, problem text,
    offset (the file's), ``wal_entry[i]`` index and damage report as the reference."""
    monkeypatch.setattr(replay, "WINDOW", 4096)
    p = str(tmp_path / "d.htt")
    entries = _every_op(400, seed=3)
    good = _wal_file(p, entries)
    starts = _entry_starts(good, entries)
    k = len(entries) * 2 // 3
    bad = bytearray(good)
    if how == "flip_crc":
        bad[starts[k + 1] - 1] ^= 0x01  # the last CRC byte of entry k
    elif how == "flip_key":
        bad[starts[k] + 8] ^= 0x20
    else:
        bad = bad[:starts[k] + 10]
    bad = bytes(bad)
    write(p, bad)
    ref_state, ref_scan = _one_by_one(bad)
    assert ref_scan.count == k and ref_scan.valid_end == starts[k]
    with Store.open(p, readonly=True) as s:
        assert _scan_fields(s.scan) == _scan_fields(ref_scan)
        assert _state_of(s.state) == _state_of(ref_state)
    assert fast_path["fast"] >= 3  # the windows before the damage went the fast way


def test_sequence_break_inside_a_fast_window(tmp_path, monkeypatch, fast_path):
    """A seq break in the middle of a window the fast path decoded whole: the WAL ends
    at that entry's start, with the reference's problem text."""
    monkeypatch.setattr(replay, "WINDOW", 8192)
    p = str(tmp_path / "s.htt")
    entries = [_insert(i + 1, f"/k{i:04d}", b"x" * 40, [("_child_index", str(i))])
               for i in range(600)]
    entries[333] = _insert(7777, "/k0333", b"x" * 40, [("_child_index", "333")])
    data = _wal_file(p, entries)
    starts = _entry_starts(data, entries)
    ref_state, ref_scan = _one_by_one(data)
    with Store.open(p, readonly=True) as s:
        assert s.scan.problem == "sequence break (expected 334, found 7777)"
        assert s.scan.valid_end == s.scan.problem_offset == starts[333]
        assert _scan_fields(s.scan) == _scan_fields(ref_scan)
        assert s.keys() == [f"/k{i:04d}" for i in range(333)]
    assert fast_path["fast"] >= 2


def test_an_entry_that_does_not_apply_inside_a_fast_window(tmp_path, monkeypatch,
                                                           fast_path):
    """A quantized placement out of range (valid CRC): decoding succeeds, applying
    raises; the WAL ends before that entry, exactly as in the reference scan."""
    monkeypatch.setattr(replay, "WINDOW", 4096)
    p = str(tmp_path / "q.htt")
    bad, entries = htt_wal_with_an_unappliable_entry(p, 120, 90)
    ref_state, ref_scan = _one_by_one(bad)
    with Store.open(p, readonly=True) as s:
        assert list(s.state.nodes) == list(ref_state.nodes) == [
            entries[i].key for i in range(90)]
        assert _scan_fields(s.scan) == _scan_fields(ref_scan)
    assert fast_path["fast"] >= 1


def test_decoy_record_starts_in_the_data_change_nothing(tmp_path, monkeypatch):
    """Node data full of copies of the next seqs' bytes (decoy record starts) around
    every window's end: windows end at whole records the decoder read, so the result is
    still the reference's."""
    monkeypatch.setattr(replay, "WINDOW", 4096)
    p = str(tmp_path / "f.htt")
    entries = []
    for i in range(500):
        decoys = b"".join((s).to_bytes(4, "little") + b"\x01\x05\x00/k" for s in
                          range(i + 2, i + 30))
        entries.append(_insert(i + 1, f"/k{i:04d}", decoys, [("_child_index", str(i))],
                               g.TailFull([i] * SEM)))
    data = _wal_file(p, entries)
    ref_state, ref_scan = _one_by_one(data)
    with Store.open(p, readonly=True) as s:
        assert _scan_fields(s.scan) == _scan_fields(ref_scan)
        assert _state_of(s.state) == _state_of(ref_state)
        assert len(s) == 500


def test_a_record_longer_than_the_window_is_read_from_the_file(tmp_path, monkeypatch):
    """Entries several windows long between short ones: each is read from the mapped file
    itself (no larger copy), applied in order, and the state is the reference's."""
    monkeypatch.setattr(replay, "WINDOW", 1024)
    p = str(tmp_path / "l.htt")
    entries = [_insert(i + 1, f"/k{i:03d}", bytes([i % 251]) * (5000 if i % 7 == 3 else 30),
                       [("_child_index", str(i))]) for i in range(60)]
    data = _wal_file(p, entries)
    ref_state, ref_scan = _one_by_one(data)
    windows: list[int] = []
    released: list[tuple[int, int]] = []
    real_rows, real_release = replay.decode_rows_wal_entry, replay._release

    def prefix(chunk, offset, end, **params):
        windows.append(len(chunk))
        return real_rows(chunk, offset, end, **params)

    def release(buf, lo, hi):
        released.append((lo, hi))
        real_release(buf, lo, hi)

    monkeypatch.setattr(replay, "decode_rows_wal_entry", prefix)
    monkeypatch.setattr(replay, "_release", release)
    with Store.open(p, readonly=True) as s:
        assert _scan_fields(s.scan) == _scan_fields(ref_scan)
        assert _state_of(s.state) == _state_of(ref_state)
    assert max(windows) <= 1024  # no window grew to hold a long entry
    # the long entries' pages are released too: the map holds no more than a window
    assert sum(hi - lo for lo, hi in released) >= len(data) - 1024 - 100


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_bulk_load_moves_the_load_to_the_oldest_generation_and_freezes_nothing():
    """After a load the collector runs again, nothing is left frozen, what was loaded
    sits in the oldest generation, and cyclic garbage made before the load is still
    collected by a full pass."""
    import gc
    import weakref

    if not gc.isenabled():
        pytest.skip("the collector is off in this run")
    assert gc.get_freeze_count() == 0
    before = weakref.ref(_Cycle())  # unreachable cycle: only the collector frees it
    with replay.bulk_load():
        assert not gc.isenabled()
        loaded = [_Cycle() for _ in range(10)]
        loaded_ids = {id(x) for x in loaded}
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert loaded_ids <= oldest
    gc.collect()
    assert before() is None


def test_bulk_load_leaves_a_programs_own_freeze_alone():
    import gc

    if not gc.isenabled():
        pytest.skip("the collector is off in this run")
    keep = [_Cycle() for _ in range(3)]
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with replay.bulk_load():
            more = [_Cycle() for _ in range(3)]
        assert gc.get_freeze_count() == frozen  # not unfrozen, nothing added
        assert gc.isenabled()
    finally:
        gc.unfreeze()
    del keep, more
