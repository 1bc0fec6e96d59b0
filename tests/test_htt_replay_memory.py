"""HTT replay speed and memory: a read-only open maps the file and
decodes the WAL in windows whose pages it releases, the state holds nodes packed
(metadata as one flat string tuple, placements as their 16-byte-per-dim bytes), and the
child index is built on first use. Every shortcut must give exactly what the plain
whole-buffer replay gives."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tracemalloc

import pytest

from bytewright.generated import htt as g
from bytewright.runtime.htt import replay
from bytewright.runtime.htt.quantized import TailCodec
from bytewright.runtime.htt.state import ROOT, Node, State, pack_meta
from bytewright.runtime.htt.store import Store

from .conftest import htt_wal_with_an_unappliable_entry, read, write

FULL = g.SemTailLayout.full


def _entry(seq: int, key: str, data: bytes, meta: list[tuple[str, str]], tail=None):
    return g.WalEntry(seq, g.WalOp.INSERT, key,
                      g.InsertBody(data, [g.MetaPair(k, v) for k, v in meta], tail))


def _wal_file(path: str, entries: list[g.WalEntry], sem: int = 0) -> bytes:
    """A WAL-only file holding exactly ``entries``; returns its bytes."""
    Store.create(path, semantic_dims=sem).close()
    head = read(path)[:-8]
    body = b"".join(g.encode_wal_entry(e, semantic_dims=sem, tail_layout=FULL)
                    for e in entries)
    data = head + g.encode_wal_header(g.WalHeader(len(entries), 1)) + body
    write(path, data)
    return data


def _mixed_entries(n: int, sem: int = 4, seed: int = 7) -> list[g.WalEntry]:
    """Inserts of varied sizes (one much larger than the test windows), updates,
    metadata edits, placements, a delete and a re-insert under a deleted parent."""
    rnd = random.Random(seed)
    out = [_entry(1, "/d", b"", [("_child_index", "0"), ("content_type", "dir")],
                  g.TailFull([0] * sem))]
    seq = 2
    for i in range(n):
        size = 3000 if i == n // 2 else rnd.randrange(0, 90)
        tail = g.TailFull([rnd.randrange(-2**100, 2**100) for _ in range(sem)]
                          if i % 3 else [0] * sem)
        out.append(_entry(seq, f"/d/{i:04d}", rnd.randbytes(size),
                          [("_child_index", str(i)), ("kind", rnd.choice("ab"))], tail))
        seq += 1
        if i % 7 == 3:
            out.append(g.WalEntry(seq, g.WalOp.SET_META, f"/d/{i:04d}", g.MetaPair("k", "v")))
            seq += 1
        if i % 11 == 5:
            out.append(g.WalEntry(seq, g.WalOp.SET_SEMANTIC, f"/d/{i:04d}",
                                  g.SetSemanticBody(g.TailFull([i + 1] * sem))))
            seq += 1
    out.append(_entry(seq, "/d/0001/x", b"kid", [("_child_index", "0")],
                      g.TailFull([0] * sem)))
    out.append(g.WalEntry(seq + 1, g.WalOp.DELETE, "/d/0001", None))
    # no ancestor /d/0001 any more: replay synthesizes it again
    out.append(_entry(seq + 2, "/d/0001/y", b"back", [("_child_index", "1")],
                      g.TailFull([0] * sem)))
    return out


def _bytes_replay(data: bytes) -> tuple[State, replay.WalScan]:
    """The reference: the whole file as one ``bytes`` buffer, as before."""
    prefix = replay.read_prefix(data)
    state = State(TailCodec(prefix.header.semantic_dims, prefix.layout.tail_layout))
    _, scan = replay.load(data, state)
    return state, scan


def _dump(state: State) -> dict:
    return {k: (n.data, n.meta, n.tail) for k, n in state.nodes.items()}


def _scan_fields(scan: replay.WalScan) -> tuple:
    d = scan.damage
    return (scan.count, scan.next_seq, scan.valid_end, scan.problem, scan.problem_offset,
            None if d is None else (d.offset, d.reason, d.records_after))


@pytest.fixture
def small_windows(monkeypatch):
    """Windows far smaller than an entry: every boundary case is crossed many times."""
    def use(size: int) -> None:
        monkeypatch.setattr(replay, "WINDOW", size)
    return use


@pytest.mark.parametrize("window", [64, 150, 1 << 20])
def test_windowed_replay_equals_whole_buffer_replay(tmp_path, small_windows, window):
    small_windows(window)
    p = str(tmp_path / "w.htt")
    data = _wal_file(p, _mixed_entries(120), sem=4)
    ref_state, ref_scan = _bytes_replay(data)
    with Store.open(p, readonly=True) as s:
        assert _dump(s.state) == _dump(ref_state)
        assert list(s.state.nodes) == list(ref_state.nodes)  # insertion order too
        assert _scan_fields(s.scan) == _scan_fields(ref_scan)
        assert s.scan.problem is None and s.scan.valid_end == len(data)
        assert s.state.synthesized == ref_state.synthesized == 1
        assert "/d/0001" in s and "/d/0001/x" not in s and "/d/0001/y" in s


def test_damage_reads_the_same_with_and_without_windows(tmp_path, small_windows):
    """Bit flips and cuts anywhere in the WAL: the same intact prefix, the same problem
    text (offsets and the ``wal_entry[i]`` index are the file's, not a window's) and
    the same damage report."""
    small_windows(96)
    p = str(tmp_path / "f.htt")
    good = _wal_file(p, _mixed_entries(25, sem=2), sem=2)
    start = len(good) - sum(len(g.encode_wal_entry(e, semantic_dims=2, tail_layout=FULL))
                            for e in _mixed_entries(25, sem=2))
    rnd = random.Random(3)
    cases = [("cut", n) for n in sorted(rnd.sample(range(start, len(good)), 25))]
    cases += [("flip", n) for n in sorted(rnd.sample(range(start, len(good)), 40))]
    damaged = 0
    for how, at in cases:
        bad = bytearray(good)
        if how == "cut":
            bad = bad[:at]
        else:
            bad[at] ^= 0x10
        write(p, bytes(bad))
        ref_state, ref_scan = _bytes_replay(bytes(bad))
        with Store.open(p, readonly=True) as s:
            assert _scan_fields(s.scan) == _scan_fields(ref_scan), (how, at)
            assert _dump(s.state) == _dump(ref_state), (how, at)
        damaged += ref_scan.problem is not None
    assert damaged >= 50  # the sweep really exercised the error paths


def test_sequence_break_inside_a_window(tmp_path, small_windows):
    small_windows(128)
    p = str(tmp_path / "s.htt")
    entries = [_entry(i + 1, f"/k{i}", b"x" * 20, [("_child_index", str(i))])
               for i in range(30)]
    entries[17] = _entry(99, "/k17", b"x" * 20, [("_child_index", "17")])
    data = _wal_file(p, entries)
    ref_state, ref_scan = _bytes_replay(data)
    with Store.open(p, readonly=True) as s:
        assert s.scan.problem == ref_scan.problem
        assert "sequence break (expected 18, found 99)" in s.scan.problem
        assert _scan_fields(s.scan) == _scan_fields(ref_scan)
        assert s.keys() == [f"/k{i}" for i in range(17)]


def test_an_entry_that_decodes_but_does_not_apply_ends_the_wal(tmp_path, small_windows):
    """A TQ1.9 value outside +-29524 with a valid CRC: decoding succeeds, applying raises;
    the WAL ends before that entry, exactly as in the whole-buffer replay."""
    small_windows(64)
    p = str(tmp_path / "q.htt")
    bad, _entries = htt_wal_with_an_unappliable_entry(p, 6, 3)
    ref_state, ref_scan = _bytes_replay(bad)
    with Store.open(p, readonly=True) as s:
        assert s.keys() == ["/n000", "/n001", "/n002"] == list(ref_state.nodes)
        assert _scan_fields(s.scan) == _scan_fields(ref_scan)


def test_readonly_replay_releases_the_wal_behind_it(tmp_path, monkeypatch, small_windows):
    """The read-only open maps the file and drops each decoded window's pages, so memory
    holds the state, not the file; the mapping is closed after the open."""
    small_windows(4096)
    p = str(tmp_path / "r.htt")
    data = _wal_file(p, [_entry(i + 1, f"/k{i:05d}", os.urandom(200),
                                [("_child_index", str(i))]) for i in range(400)])
    released: list[tuple[int, int]] = []
    real = replay._release

    def spy(buf, lo, hi):
        released.append((lo, hi))
        real(buf, lo, hi)

    maps = []
    real_map = replay.mmap.mmap

    def counting_map(*a, **kw):
        m = real_map(*a, **kw)
        maps.append(m)
        return m

    monkeypatch.setattr(replay, "_release", spy)
    monkeypatch.setattr("bytewright.runtime.htt.store.mmap.mmap", counting_map)
    with Store.open(p, readonly=True) as s:
        assert len(s) == 400 and s.scan.problem is None
    assert len(maps) == 1 and maps[0].closed
    covered = sum(hi - lo for lo, hi in released)
    assert covered >= len(data) - 4096 - 200  # all but the last window's tail
    # nothing in the state points into the mapping: values are copies
    assert all(n.data.__class__ is bytes for n in s.state.nodes.values())


def test_damage_near_the_start_copies_no_more_than_a_window(tmp_path, small_windows):
    """A bad CRC in the second window of a long log: the reader reads the failing record
    from the file itself (it used to copy ever larger windows, up to the rest of the
    file) and its damage report counts the records after it without holding them. The
    open's allocations peak far below the file's size."""
    small_windows(4096)
    p = str(tmp_path / "d.htt")
    n = 3000
    data = bytearray(_wal_file(p, [_entry(i + 1, f"/k{i:05d}", os.urandom(200),
                                          [("_child_index", str(i))]) for i in range(n)]))
    at = data.find(b"/k00020") + 40  # inside entry 20's data
    data[at] ^= 0x10
    write(p, bytes(data))
    tracemalloc.start()
    try:
        with Store.open(p, readonly=True) as s:
            peak = tracemalloc.get_traced_memory()[1]
            assert len(s) == 20 and "ChecksumError" in s.scan.problem
            assert s.scan.damage.records_after == n - 21
    finally:
        tracemalloc.stop()
    assert peak < len(data) // 3, (peak, len(data))  # was 4.4x the file


def test_readonly_replay_peak_memory_is_bounded_by_the_live_state(tmp_path):
    """A fresh interpreter replays ~12 MB of 20-dim INSERTs: the peak grows by less than
    twice the file (the whole file in memory plus the state was ~3.6x before)."""
    p = str(tmp_path / "big.htt")
    rnd = random.Random(1)
    n = 30_000
    entries = [_entry(1, "/b", b"", [("_child_index", "0")], g.TailFull([0] * 20))]
    entries += [_entry(i + 1, f"/b/{i:07d}", i.to_bytes(4, "little") * 8,
                       [("_child_index", str(i - 1)), ("kind", "bench")],
                       g.TailFull([rnd.randrange(-2**80, 2**80) for _ in range(20)]))
                for i in range(1, n)]
    size = len(_wal_file(p, entries, sem=20))
    code = ("import json, sys\nfrom bytewright.runtime.htt.store import Store\n"
            "def hwm():\n    return [int(l.split()[1]) for l in open('/proc/self/status')"
            " if l.startswith('VmHWM')][0] * 1024\n"
            "before = hwm()\ns = Store.open(sys.argv[1], readonly=True)\n"
            "print(json.dumps({'n': len(s), 'grew': hwm() - before}))\n")
    out = subprocess.run([sys.executable, "-c", code, p], capture_output=True, text=True,
                         check=True)
    res = json.loads(out.stdout)
    assert res["n"] == n
    assert res["grew"] < 2 * size, (res["grew"] / size)


# -- the node model --------------------------------------------------------------------

def test_metadata_is_held_as_one_flat_tuple_and_read_as_pairs():
    pairs = [g.MetaPair("_child_index", "3"), g.MetaPair("kind", "leaf")]
    node = Node("/a", b"x", pairs, None)
    assert node._meta == ("_child_index", "3", "kind", "leaf")
    assert node.meta == pairs and node.meta is not node.meta  # fresh list per access
    assert node.meta_value("kind") == "leaf" and node.meta_value("nope") is None
    assert node.meta_items(reserved=True) == [("_child_index", "3")]
    assert node.meta_items(reserved=False) == [("kind", "leaf")]
    node.meta = [g.MetaPair("z", "1")]
    assert node._meta == ("z", "1") and node.meta == [g.MetaPair("z", "1")]
    # a tuple of pairs is packed too, not mistaken for the flat form
    assert Node("/b", b"", tuple(pairs), None)._meta == node_meta_of(pairs)
    assert Node("/c", b"", (), None).meta == []


def node_meta_of(pairs):
    return pack_meta(list(pairs))


def test_replay_shares_equal_metadata_strings_between_nodes(tmp_path):
    p = str(tmp_path / "m.htt")
    _wal_file(p, [_entry(i + 1, f"/k{i}", b"", [("_child_index", str(i)), ("kind", "leaf")])
                  for i in range(50)])
    with Store.open(p, readonly=True) as s:
        a, b = s.state.nodes["/k3"], s.state.nodes["/k40"]
        assert a._meta[0] is b._meta[0] and a._meta[3] is b._meta[3]  # one copy each
        assert s.get("/k40").meta == {"kind": "leaf"}
        assert s.reserved_meta("/k40") == [("_child_index", "40")]


def test_placements_from_packed_dims_are_taken_without_conversion():
    codec = TailCodec(4, FULL)
    data = g.encode_wal_entry(_entry(1, "/a", b"", [], g.TailFull([1, -2, 3, 2**120])),
                              semantic_dims=4, tail_layout=FULL)
    entry, _ = g.decode_wal_entry(data, semantic_dims=4, tail_layout=FULL)
    dims = entry.body.tail.dims
    packed = codec.packed(entry.body.tail)
    if hasattr(dims, "raw"):
        assert packed is dims.raw  # the decoder's bytes, as they are
    assert Node("/a", b"", [], packed).tail == [1, -2, 3, 2**120]
    zero = g.encode_wal_entry(_entry(1, "/z", b"", [], g.TailFull([0] * 4)),
                              semantic_dims=4, tail_layout=FULL)
    entry, _ = g.decode_wal_entry(zero, semantic_dims=4, tail_layout=FULL)
    assert codec.packed(entry.body.tail) is None  # the zero tail is "not set"
    assert codec.packed(g.TailFull([0, 0, 5, 0])) == bytes(32) + (5).to_bytes(16, "little") \
        + bytes(16)


@pytest.mark.parametrize("with_delete", [False, True])
def test_child_index_built_on_first_use_equals_the_one_kept_all_along(tmp_path, with_delete):
    """Children and counters after a replay that did not build the index (or built it
    at its first DELETE), against a replay whose index was kept from the first entry."""
    p = str(tmp_path / "c.htt")
    entries = _mixed_entries(60, sem=1)
    data = _wal_file(p, entries if with_delete else entries[:-2], sem=1)
    lazy, _ = _bytes_replay(data)
    assert (lazy._children is None) is not with_delete
    eager = State(TailCodec(1, FULL))
    assert eager.children == {}  # built now (empty): maintained from here on
    replay.load(data, eager)
    assert {k: list(v) for k, v in lazy.children.items()} == \
        {k: list(v) for k, v in eager.children.items()}
    assert lazy.counters == eager.counters and lazy.synthesized == eager.synthesized
    assert _dump(lazy) == _dump(eager)


def test_insert_under_a_parent_deleted_since_the_last_insert_synthesizes_it():
    """The replay remembers the last parent it saw exist; a DELETE must make it forget."""
    st = State(TailCodec(0, FULL))
    st.apply(_entry(1, "/a", b"", [("_child_index", "0")]))
    st.apply(_entry(2, "/a/x", b"", [("_child_index", "0")]))
    st.apply(g.WalEntry(3, g.WalOp.DELETE, "/a", None))
    st.apply(_entry(4, "/a/y", b"", [("_child_index", "1")]))
    assert list(st.nodes) == ["/a", "/a/y"] and st.synthesized == 1
    assert st.children[ROOT] == {"/a": None} and list(st.children["/a"]) == ["/a/y"]
    # counters are never reused: /a was index 0 under the root, the synthesized one is 1
    assert st.nodes["/a"].meta_value("_child_index") == "1"


def test_the_two_pair_insert_shortcut_equals_the_general_path():
    """An INSERT with two metadata pairs reads its ``_child_index`` without a scan, and
    only when it is plain ASCII digits; every other spelling (signs, spaces, non-ASCII
    digits, a value spelled ``_child_index``, none at all) must land exactly where the
    general path (``_link``, taken by a state whose child index is built) puts it."""
    metas = [
        [("_child_index", "4"), ("kind", "a")],
        [("kind", "b"), ("_child_index", "9")],  # the index second
        [("_child_index", "+2"), ("kind", "c")],
        [("_child_index", " 7"), ("kind", "c")],
        [("_child_index", "\u0663"), ("kind", "d")],  # an Arabic-Indic 3: int() takes it
        [("_child_index", "x"), ("kind", "e")],  # not a number: a fresh index
        [("kind", "_child_index"), ("_child_index", "11")],  # the name as a value first
        [("a", "b"), ("c", "d")],  # none: a fresh index is assigned
        [("_child_index", "5")],
        [("_child_index", "6"), ("a", "b"), ("c", "d")],
        [("_child_index", "1"), ("_child_index", "30")],  # the first one counts
    ]
    entries = [_entry(1, "/p", b"", [("_child_index", "0")])]
    entries += [_entry(i + 2, f"/p/{i:02d}", bytes([i]), m, g.TailFull([i, 0, -i, 0]))
                for i, m in enumerate(metas)]
    fast = State(TailCodec(4, FULL))
    general = State(TailCodec(4, FULL))
    assert general.children == {}  # built: every insert goes through _link
    for e in entries:
        fast.apply(e)
        general.apply(e)
    assert _dump(fast) == _dump(general)
    assert fast.counters == general.counters
    assert {k: list(v) for k, v in fast.children.items()} == \
        {k: list(v) for k, v in general.children.items()}
    # the shortcut kept the placements packed, as the decoder produced them
    assert fast.nodes["/p/01"].tail == [1, 0, -1, 0] and fast.nodes["/p/00"].tail is None
