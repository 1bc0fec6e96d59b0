"""The kladde journal (facts.md §8): records, framing, the CRC chain, pages and trailers,
recovery and why it stops, current state = committed + journal, folding on open, crash
injection at every write step, ranged reads and the bounds that need resolution."""

from __future__ import annotations

from pathlib import Path

import pytest

from bytewright.generated import kladde as g
from bytewright.runtime.errors import BytewrightError, DecodeError
from bytewright.runtime.kladde import Corrupt, OutOfBounds, Store, load, open_file
from bytewright.runtime.kladde import journal as jn
from bytewright.runtime.kladde.limits import Limits
from bytewright.runtime.kladde.writer import OsIO

PAGE = 4096


# -- schema records ---------------------------------------------------------------------

def _all_records():
    return [jn.free(7), jn.resize(1, 300), jn.write(1, 5, b"abc"), jn.write(2, 9, b""),
            jn.splice(1, 2, 1, b"xy"), jn.copy(1, 0, 3, 2, 4),
            jn.copy(2, 1, 2, 2, 0, move=True)]


def test_records_round_trip_on_both_paths():
    recs = g.JournalRecords(_all_records())
    data = g.encode_journal_records(recs)
    assert data == g.construct_encode_journal_records(recs)
    assert g.decode_journal_records(data) == (recs, len(data))
    assert g.construct_decode_journal_records(data) == recs
    # tags are facts.md §8's: Free 1, Resize 2, Write 3, Splice 4, Copy 5, Move 6
    assert [data[0]] == [1] and data.hex().startswith("0107" + "0201ac02" + "0301050361626")


@pytest.mark.parametrize("raw, what", [
    (bytes([0, 1]), "unknown journal_tag"),  # tag 0 reserved
    (bytes([7, 1]), "unknown journal_tag"),  # tags 7..255 reserved
    (bytes([255, 1]), "unknown journal_tag"),
    (bytes([1, 0]), "invalid id"),  # id 0 is the null pointer
    (bytes([1, 0x80, 0x80, 0x80, 0x80, 0x10]), "invalid id"),  # id 2**32
    (bytes([2, 1, 0x80, 0x80, 0x80, 0x80, 0x10]), "past 2**32 - 1"),  # size 2**32
    (bytes([3, 1, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 1, 0x41]), "past 2**32 - 1"),  # offset+len
    (bytes([4, 1, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 1, 0]), "past 2**32 - 1"),  # offset+old_len
    (bytes([5, 1, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 2, 1]), "past 2**32 - 1"),  # dst_off+len
    (bytes([6, 1, 0, 1, 0, 0]), "invalid id"),  # Move to dst 0
    (bytes([3, 1, 0, 5, 1]), "truncated"),  # Write bytes past the transaction
])
def test_bad_records_refused_on_both_paths(raw, what):
    with pytest.raises(DecodeError) as exc:
        g.decode_journal_records(raw)
    assert what in str(exc.value)
    assert exc.value.offset is not None
    with pytest.raises(DecodeError):
        g.construct_decode_journal_records(raw)


def test_transaction_and_page_layout():
    payload = g.encode_journal_records(g.JournalRecords([jn.free(3)]))
    txn = g.encode_journal_transaction(g.JournalTransaction(payload, 0x11223344))
    assert txn == bytes([len(payload)]) + payload + bytes.fromhex("44332211")
    assert (jn.STREAM_BYTES, jn.TRAILER_CRC_AT, jn.CRC_SIZE) == (4088, 4092, 4)
    page = g.encode_journal_page(g.JournalPage(bytes(4088), 9, 0xAABBCCDD))
    assert len(page) == PAGE and page[4088:] == bytes.fromhex("09000000ddccbbaa")


def test_chain_seed_is_the_segment_epoch():
    import google_crc32c
    assert jn.chain_seed(8) == google_crc32c.value((8).to_bytes(8, "little"))


# -- appending and recovery ---------------------------------------------------------------

def _model_apply(model: dict, rec) -> None:
    """The reference implementation's naive oracle (state.rs tests), over dict of bytearray."""
    b, t = rec.body, rec.tag
    if t == g.JournalTag.Free:
        model.pop(b.id, None)
    elif t == g.JournalTag.Resize:
        v = model.setdefault(b.id, bytearray())
        del v[b.size:]
        v.extend(bytes(b.size - len(v)))
    elif t == g.JournalTag.Write:
        v = model.setdefault(b.id, bytearray())
        end = b.offset + len(b.data)
        v.extend(bytes(max(0, end - len(v))))
        v[b.offset:end] = b.data
    elif t == g.JournalTag.Splice:
        v = model.setdefault(b.id, bytearray())
        end = b.offset + b.old_len
        v.extend(bytes(max(0, end - len(v))))
        v[b.offset:end] = b.data
    else:
        src = model.get(b.src)
        piece = bytes((src[b.src_offset + i] if src is not None and
                       b.src_offset + i < len(src) else 0) for i in range(b.length))
        v = model.setdefault(b.dst, bytearray())
        end = b.dst_offset + b.length
        v.extend(bytes(max(0, end - len(v))))
        v[b.dst_offset:end] = piece
        if t == g.JournalTag.Move and b.src in model:
            sv = model[b.src]
            for i in range(b.src_offset, b.src_offset + b.length):
                in_dst = b.src == b.dst and b.dst_offset <= i < end
                if i < len(sv) and not in_dst:
                    sv[i] = 0


def _do(store: Store, model: dict, rec) -> None:
    b, t = rec.body, rec.tag
    if t == g.JournalTag.Free:
        if store.exists(b.id):
            store.delete(b.id)
    elif t == g.JournalTag.Resize:
        store.resize(b.id, b.size)
    elif t == g.JournalTag.Write:
        store.write(b.id, b.offset, b.data)
    elif t == g.JournalTag.Splice:
        store.splice(b.id, b.offset, b.old_len, b.data)
    elif t == g.JournalTag.Copy:
        store.copy(b.src, b.src_offset, b.length, b.dst, b.dst_offset)
    else:
        store.move(b.src, b.src_offset, b.length, b.dst, b.dst_offset)
    _model_apply(model, rec)


def _state(model: dict) -> dict:
    return {i: bytes(v) for i, v in sorted(model.items())}


def _base(path) -> dict:
    """A committed file with a few allocations; returns the model."""
    model: dict = {}
    with Store.create(path) as s:
        for rec in (jn.write(1, 0, b"hello world " * 20), jn.write(2, 5, bytes(range(256)) * 3),
                    jn.resize(3, 10)):
            _do(s, model, rec)
        s.flush()
    return model


TXNS = [
    [jn.write(1, 3, b"XYZ"), jn.splice(1, 0, 4, b"__")],
    [jn.copy(2, 10, 40, 4, 2), jn.free(3)],
    [jn.write(5, 100, b"\x07" * 5000)],  # crosses a journal page: a trailer
    [jn.copy(5, 90, 30, 5, 100, move=True), jn.resize(2, 50)],
    [jn.write(6, 0, b"last")],
]


def _journaled(tmp_path, name="j.kladde", txns=TXNS):
    """A file whose journal holds ``txns``; returns (path, states after each txn)."""
    path = tmp_path / name
    model = _base(path)
    states = [_state(model)]
    with Store.open(path) as s:
        for txn in txns:
            for rec in txn:
                _do(s, model, rec)
            assert s.commit() == len(txn)
            states.append(_state(model))
    return path, states


def test_journal_recovers_every_transaction_and_current_state_equals_model(tmp_path):
    path, states = _journaled(tmp_path)
    f = open_file(path)
    j = jn.journal_of(f)
    assert len(j.transactions) == len(TXNS) and j.stop == "end"
    assert len(j.pages) >= 2  # the stream continued across pages through a trailer
    assert [len(t.records) for t in j.transactions] == [len(t) for t in TXNS]
    assert jn.current_state(f).contents() == states[-1]
    # the committed state alone is the state before the journal
    assert f.contents() == states[0]


def test_store_open_folds_the_journal_before_a_new_append(tmp_path):
    path, states = _journaled(tmp_path)
    before = open_file(path)
    with Store.open(path) as s:
        assert s.epoch == before.epoch + 1  # folded into a new epoch at open
        assert len(s.recovered.transactions) == len(TXNS)
        assert {i: s.read(i) for i in s.ids()} == states[-1]
        s.write(9, 0, b"after")
        s.commit()
    f = open_file(path)
    assert f.contents() == states[-1]  # committed now holds the fold
    assert len(jn.journal_of(f).transactions) == 1  # only the new transaction
    assert jn.current_state(f).read(9) == b"after"


def test_uncommitted_edits_are_not_in_the_journal(tmp_path):
    path = tmp_path / "u.kladde"
    model = _base(path)
    with Store.open(path) as s:
        s.write(1, 0, b"committed")
        s.commit()
        s.write(1, 0, b"lost")  # never committed or flushed
    _model_apply(model, jn.write(1, 0, b"committed"))
    assert jn.current_state(open_file(path)).contents() == _state(model)


def test_journal_pointer_outside_the_file_is_an_empty_journal(tmp_path):
    path = tmp_path / "e.kladde"
    _base(path)
    f = open_file(path)
    assert f.header.journal_pointer >= f.npages
    assert jn.journal_of(f).stop == "empty" and jn.journal_of(f).transactions == []


def _rechain(data: bytearray, epoch: int, first_page: int, payloads: list[bytes]) -> None:
    """Write transactions with a correct chain into page ``first_page`` (one page)."""
    chain = jn.chain_seed(epoch + 1)
    pos = first_page * PAGE
    for p in payloads:
        body = g.encode_journal_transaction(g.JournalTransaction(p, 0))[:-4]
        chain = jn._extend(chain, body)
        whole = g.encode_journal_transaction(g.JournalTransaction(p, chain))
        data[pos:pos + len(whole)] = whole
        pos += len(whole)


def test_crc_matches_but_records_do_not_decode_is_corrupt(tmp_path):
    path, _ = _journaled(tmp_path, txns=[[jn.write(1, 0, b"a")]])
    data = bytearray(path.read_bytes())
    f = load(bytes(data))
    jp = f.header.journal_pointer
    good = jn.encode_records([jn.write(1, 0, b"a")])
    _rechain(data, f.epoch, jp, [good, bytes([7, 1])])  # reserved tag 7, chain CRC valid
    f = load(bytes(data))
    with pytest.raises(Corrupt) as exc:
        jn.journal_of(f)  # noqa: B018
    assert "CRC matches" in str(exc.value) and exc.value.offset == jp * PAGE + (1 + len(good) + 4) + 1
    path.write_bytes(bytes(data))
    with pytest.raises(Corrupt):
        Store.open(path)


def test_replay_that_would_materialise_4_gib_hits_the_resource_limit(tmp_path):
    path, _ = _journaled(tmp_path, txns=[[jn.write(1, 0, b"a")]])
    data = bytearray(path.read_bytes())
    f = load(bytes(data))
    # a Resize to 2**32 - 9 bytes: a legal record, but replaying it would allocate 4 GiB
    big = jn.encode_records([jn.resize(1, (1 << 32) - 1 - 8), ])
    _rechain(data, f.epoch, f.header.journal_pointer, [big])
    f = load(bytes(data), limits=Limits(replay_allocation_bytes=1 << 40))
    assert len(jn.journal_of(f).transactions) == 1
    # (materialising 4 GiB is refused by the resource limit instead, with its own error)
    with pytest.raises(jn.ReplayLimit):
        jn.current_state(load(bytes(data)))


def test_trailer_pointing_outside_or_back_stops_the_segment(tmp_path):
    path, states = _journaled(tmp_path)
    data = bytearray(path.read_bytes())
    f = load(bytes(data))
    first = jn.journal_of(f).pages[0]
    for bad_next in (1, len(data) // PAGE + 5, first):
        d = bytearray(data)
        # rewrite the first journal page's trailer with a correct chain CRC but a bad next
        s = jn._Stream(memoryview(bytes(d)), len(d) // PAGE, first,
                       jn.chain_seed(f.epoch + 1))
        j = jn.journal_of(f)
        # the chain just before the trailer: re-read the stream up to the page end
        t_index = next(i for i, t in enumerate(j.transactions)
                       if t.end // PAGE != t.offset // PAGE)
        for t in j.transactions[:t_index]:
            raw = bytes(d[t.offset:t.end])
            s.read(len(raw) - 4, [])
            s.read(4, [], feed=False)
        s.read(jn.STREAM_BYTES - s.pos, [])
        chain = jn._extend(s.chain, jn._next_bytes(bad_next))
        d[first * PAGE:(first + 1) * PAGE] = g.encode_journal_page(
            g.JournalPage(bytes(d[first * PAGE:first * PAGE + 4088]), bad_next, chain))
        j2 = jn.journal_of(load(bytes(d)))
        assert len(j2.transactions) == t_index
        assert "points at page" in j2.detail


# -- why reading stopped; sweeps ------------------------------------------------------------

SMALL = [[jn.write(1, i, bytes([65 + i]) * (3 + i))] for i in range(6)]


def test_truncation_sweep_every_byte(tmp_path):
    """Zero the journal from every byte offset on (a torn tail at each byte): exactly the
    transactions wholly before the cut are recovered, and the state is theirs."""
    path, states = _journaled(tmp_path, "t.kladde", SMALL)
    data = path.read_bytes()
    f = load(data)
    txns = jn.journal_of(f).transactions
    start, end = txns[0].offset, txns[-1].end
    for cut in range(start, end + 1):
        d = data[:cut] + bytes(len(data) - cut)
        j = jn.journal_of(load(d))
        whole = sum(1 for t in txns if t.end <= cut)
        assert len(j.transactions) == whole, cut
        clean = cut == start or any(t.end == cut for t in txns)
        assert j.stop == ("end" if clean else "torn tail") and j.valid_after == 0, cut
        assert jn.current_state(load(d)).contents() == states[whole]


def test_bit_flip_sweep_every_bit_of_every_transaction(tmp_path):
    """Flip each bit of each transaction: the ones before it are recovered, the reason is
    given, and the transactions after the damage are reported as valid-looking."""
    path, states = _journaled(tmp_path, "b.kladde", SMALL)
    data = path.read_bytes()
    txns = jn.journal_of(load(data)).transactions
    n = len(txns)
    for k, t in enumerate(txns):
        for byte in range(t.offset, t.end):
            for bit in range(8):
                d = bytearray(data)
                d[byte] ^= 1 << bit
                try:
                    j = jn.journal_of(load(bytes(d)))
                except Corrupt:
                    # a flip the chain does not see cannot happen: every byte is covered
                    pytest.fail(f"flip at {byte}.{bit} decoded as a writer bug")
                assert len(j.transactions) == k, (byte, bit)
                in_crc = byte >= t.end - 4
                want = max(0, n - k - 2) if in_crc else n - k - 1
                assert j.valid_after == want, (byte, bit)
                assert j.stop == ("torn tail" if want == 0 else j.stop)
                assert j.stop_offset == t.offset
                assert jn.current_state(load(bytes(d))).contents() == states[k]


def test_damage_in_the_middle_is_kept_in_a_side_file_on_open(tmp_path):
    path, states = _journaled(tmp_path, "m.kladde", SMALL)
    data = bytearray(path.read_bytes())
    t = jn.journal_of(load(bytes(data))).transactions[2]
    data[t.offset + 2] ^= 0x40
    path.write_bytes(bytes(data))
    j = jn.journal_of(open_file(path))
    assert j.stop == "checksum mismatch" and j.valid_after == 3 and j.damaged
    assert "3 valid-looking transactions follow" in j.describe()
    # valid-looking transactions follow the damage: the writer open refuses unless
    # discard_after repeats the offset of the damage (nothing is dropped silently)
    with pytest.raises(Corrupt, match="discard_after"):
        Store.open(path)
    assert path.read_bytes() == bytes(data)
    with pytest.warns(UserWarning, match="valid-looking"):
        s = Store.open(path, discard_after=t.offset)
    with s:
        side = s.discarded
        assert side == f"{path}.discarded-{t.offset}"
        assert {i: s.read(i) for i in s.ids()} == states[2]
    kept = open(side, "rb").read()
    assert kept == bytes(data[t.offset:])
    # salvage reads the valid-looking transactions back out of the side file's bytes
    rescued = jn.salvage(bytes(data))
    assert [len(x.records) for x in rescued] == [1] * 5  # 2 before + 3 after the damage


# -- crash injection -----------------------------------------------------------------------

class Crash(Exception):
    pass


class CrashIO(OsIO):
    """Crashes at write step ``at``; ``torn`` lets half of that write land first."""

    def __init__(self, at: int | None = None, torn: bool = False) -> None:
        self.at = at
        self.torn = torn
        self.steps = 0

    def _step(self) -> bool:
        hit = self.at is not None and self.steps == self.at
        self.steps += 1
        return hit

    def pwrite(self, fd, data, offset):
        if self._step():
            if self.torn:
                super().pwrite(fd, data[:max(1, len(data) // 2)], offset)
            raise Crash
        super().pwrite(fd, data, offset)

    def ftruncate(self, fd, size):
        if self._step():
            raise Crash
        super().ftruncate(fd, size)

    def fsync(self, fd):
        if self._step():
            raise Crash
        super().fsync(fd)


def _crash_each_step(tmp_path, setup, action, name):
    """Run ``action`` with a crash at every write step (clean and torn); after each, the
    reopened file's current state is the old or the new one, and the store opens."""
    probe = tmp_path / f"{name}-probe"
    old, _ = setup(probe)
    io = CrashIO()
    with Store.open(probe) as s:
        s.io = io
        new = action(s)
    steps = io.steps
    assert steps >= 3
    seen = set()
    for at in range(steps):
        for torn in (False, True):
            path = tmp_path / f"{name}-{at}-{torn}"
            setup(path)
            s = Store.open(path)
            s.io = CrashIO(at, torn)
            with pytest.raises(Crash):
                action(s)
            s.close()
            got = jn.current_state(open_file(path)).contents()
            assert got in (old, new), (at, torn)
            seen.add("new" if got == new and got != old else "old")
            with Store.open(path) as s2:  # the writer open (and its fold) succeeds too
                assert {i: s2.read(i) for i in s2.ids()} == got
            assert open_file(path).contents() == got
    assert seen == {"old", "new"}


def test_crash_at_every_step_of_flush(tmp_path):
    def setup(path):
        model = _base(path)
        return _state(model), model

    def action(s):
        model = {i: bytearray(s.read(i)) for i in s.ids()}
        for rec in (jn.write(1, 5, b"N" * 5000), jn.free(2), jn.write(8, 0, b"x" * 100)):
            _do(s, model, rec)
        s.flush()
        return _state(model)

    _crash_each_step(tmp_path, setup, action, "flush")


def test_crash_at_every_step_of_journal_append(tmp_path):
    def setup(path):
        p, states = _journaled(path.parent, path.name, TXNS[:2])
        return states[-1], None

    def action(s):
        model = {i: bytearray(s.read(i)) for i in s.ids()}
        for rec in TXNS[2]:  # crosses a page: trailer write, new page, torn record
            _do(s, model, rec)
        s.commit()
        return _state(model)

    _crash_each_step(tmp_path, setup, action, "append")


def test_crash_at_every_step_of_the_fold_on_open(tmp_path):
    path, states = _journaled(tmp_path, "f.kladde")
    data = path.read_bytes()
    io = CrashIO()
    with Store.open(path, io=io):
        pass
    for at in range(io.steps):
        for torn in (False, True):
            p = tmp_path / f"fold-{at}-{torn}"
            p.write_bytes(data)
            with pytest.raises(Crash):
                Store.open(p, io=CrashIO(at, torn))
            assert jn.current_state(open_file(p)).contents() == states[-1]


# -- ranged reads ------------------------------------------------------------------------

def test_ranged_read_on_reader_and_store(tmp_path):
    path, states = _journaled(tmp_path)
    f = open_file(path)
    committed = states[0]
    for i, content in committed.items():
        for off, n in ((0, 0), (0, len(content)), (3, 7), (len(content) - 1, 1), (5, None)):
            want = content[off:] if n is None else content[off:off + n]
            assert f.read(i, off, n) == want
    cur = states[-1]
    c = jn.current_state(f)
    with Store.open(path) as s:
        for i, content in cur.items():
            for off, n in ((0, len(content)), (1, 2), (len(content) // 2, None)):
                want = content[off:] if n is None else content[off:off + n]
                assert c.read(i, off, n) == want
                assert s.read(i, off, n) == want
        with pytest.raises(OutOfBounds):
            s.read(1, 0, len(cur[1]) + 1)
    with pytest.raises(OutOfBounds):
        f.read(1, len(committed[1]), 1)
    with pytest.raises(OutOfBounds):
        f.read(1, -1, 1)


def test_ranged_read_touches_only_overlapping_fragments(tmp_path):
    path = tmp_path / "r.kladde"
    with Store.create(path) as s:
        s.write(1, 0, b"a" * 5000 + bytes(100) + b"b" * 3000)  # Refs over 3 pages + Zero
        s.flush()
    f = open_file(path)
    alloc = f.allocation(1)
    assert len(alloc.fragments) >= 3
    data = bytearray(f.data)
    # damage the bytes of the first data page: a read of the tail never looks at them
    first_ref = next(src for a, b, k, src in alloc.fragments if k == 2)
    data[first_ref:first_ref + 10] = b"!" * 10
    g2 = load(bytes(data))
    assert g2.read(1, 5100, 3000) == b"b" * 3000


# -- bounds that need resolution -----------------------------------------------------------

def test_live_ref_bound_ignores_fully_overwritten_refs(tmp_path):
    path = tmp_path / "lr.kladde"
    with Store.create(path) as s:
        s.write(1, 0, b"q" * 400)  # a Ref of 400 bytes into one data page
        s.flush()
    limits = Limits(ref_bytes_per_data_page=300)
    with pytest.raises(Corrupt, match="live Ref sizes into data page"):
        load(path.read_bytes(), limits=limits)
    with Store.open(path) as s:
        s.write(1, 0, b"r" * 400)  # fully overwrites it (new Ref into a new page)
        s.flush()
    f = load(path.read_bytes(), limits=Limits(ref_bytes_per_data_page=400))
    assert f.read(1) == b"r" * 400  # the shadowed Ref no longer counts against the bound
    raw = {p: t for p, t in f.ref_bytes.items()}
    assert sum(raw.values()) == 800


def test_framing_bytes_bound_per_id(tmp_path):
    path = tmp_path / "fb.kladde"
    with Store.create(path) as s:
        for k in range(6):  # six epochs, each overwriting id 1 entirely
            s.write(1, 0, bytes([65 + k]) * 10)
            s.flush()
        s.write(2, 0, b"x")
        for k in range(1, 6):  # id 2: five live Inline statements (disjoint ranges)
            s.write(2, 20 * k, b"y")
            s.flush()
    data = path.read_bytes()
    # each statement here frames in 3 bytes (id delta, tag, offset delta). id 1 has six
    # statements (18 bytes) but only the newest is live (3); id 2 has six live ones (18)
    f = load(data)
    assert len(f.by_id[1]) == 6 and len(f.by_id[2]) == 6
    with pytest.raises(Corrupt, match="framing bytes of the live statements naming id 2") as e:
        load(data, limits=Limits(framing_bytes_per_id=12))
    assert e.value.found == 18 and e.value.offset is not None
    f = load(data, limits=Limits(framing_bytes_per_id=18))
    assert f.read(1) == b"F" * 10


def test_errors_are_the_projects():
    assert issubclass(Corrupt, BytewrightError) and issubclass(OutOfBounds, BytewrightError)
    assert issubclass(jn.ReplayLimit, OutOfBounds)


# -- the CLI: info, fold (refuses on damage), salvage ---------------------------------------

def test_cli_fold_refuses_on_damage_and_salvage_recovers(tmp_path, capsys):
    from bytewright.cli.main import main

    def run(*a):
        code = main(list(a))
        out = capsys.readouterr()
        return code, out.out, out.err

    path, states = _journaled(tmp_path, "cli.kladde", SMALL)
    data = bytearray(path.read_bytes())
    t = jn.journal_of(load(bytes(data))).transactions[2]
    data[t.offset + 3] ^= 0x01
    path.write_bytes(bytes(data))
    code, out, err = run("kladde", "info", str(path))
    assert code == 0 and f"stopped at offset {t.offset}" in out
    assert "3 valid-looking transactions follow" in out
    code, out, err = run("kladde", "info", "--json", str(path))
    assert '"valid_after": 3' in out and '"stop": "checksum mismatch"' in out
    # fold refuses in one line, naming the offset and the count; the file is untouched
    code, out, err = run("kladde", "fold", str(path))
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert f"offset {t.offset} with 3 valid-looking" in err and "--discard-after" in err
    assert path.read_bytes() == bytes(data)
    # a wrong offset is refused too
    code, _, err = run("kladde", "fold", "--discard-after", str(t.offset + 1), str(path))
    assert code == 1 and path.read_bytes() == bytes(data)
    # salvage: all five verifying transactions (2 before, 3 after the damage) in a new file
    out_path = tmp_path / "salvaged.kladde"
    code, out, err = run("kladde", "salvage", str(path), str(out_path))
    assert code == 0 and "2 before the damage, 3 after it" in out, err
    s = open_file(out_path)
    assert s.contents() == states[0] and len(jn.journal_of(s).transactions) == 5
    code, _, err = run("kladde", "salvage", str(path), str(out_path))
    assert code == 3 and "never overwrites" in err  # an output that exists (docs/cli.md)
    # with the reported offset, fold cuts there and keeps the cut bytes in the side file
    code, out, err = run("kladde", "fold", "--discard-after", str(t.offset), str(path))
    assert code == 0 and f"discarded-{t.offset}" in out, err
    assert open_file(path).contents() == states[2]
    assert (tmp_path / f"cli.kladde.discarded-{t.offset}").read_bytes() == bytes(data[t.offset:])
    code, out, _ = run("kladde", "resolve", "--current", str(path), "1")
    assert code == 0 and bytes(states[2][1]).hex()[:32] in out.replace(" ", "").replace("\n", "")
    code, _, err = run("kladde", "info", str(tmp_path / "missing.kladde"))
    assert code == 3 and len(err.strip().splitlines()) == 1


def test_journal_transaction_fixture_carries_the_real_chain_crc():
    from bytewright.review.checks import fixtures  # noqa: F401  (fixtures are checked there)

    raw = bytes.fromhex("".join(
        line.split("#")[0] for line in
        open(Path(__file__).parents[1] / "fixtures/kladde/journal_transaction.hex").read().splitlines()).replace(" ", ""))
    txn, _ = g.decode_journal_transaction(raw)
    assert txn.crc == jn._extend(jn.chain_seed(1), raw[:-4])
    # and recovery over a page holding it replays Free(7)
    j = jn.recover(bytes(2 * PAGE) + raw + bytes(PAGE - len(raw)), 0, 2)
    assert [r.tag for r in j.records] == [g.JournalTag.Free] and j.stop == "end"


def test_commit_with_a_journal_pointer_below_2_flushes_instead(tmp_path):
    from bytewright.runtime.kladde import writer as w

    path = tmp_path / "p0.kladde"
    page0 = w.frame_header(w.header_fields(journal_pointer=0), 0, g.TableContent([], []))
    path.write_bytes(page0 + bytes(PAGE))
    with Store.open(path) as s:
        s.write(1, 0, b"kept")
        assert s.commit() == 1
    f = open_file(path)
    assert f.read(1) == b"kept" and f.header.journal_pointer >= 2
    assert jn.journal_of(f).stop == "empty" and f.epoch == 1


def test_header_slot_report_says_why_a_slot_is_skipped(tmp_path, capsys):
    from bytewright.cli.main import main
    from bytewright.runtime.kladde.reader import slot_report

    path = tmp_path / "slots.kladde"
    with Store.create(path) as s:
        s.write(1, 0, b"one")
        s.flush()  # epoch 1 -> slot 1
        s.write(1, 0, b"two")
        s.flush()  # epoch 2 -> slot 0
    data = bytearray(path.read_bytes())
    assert slot_report(memoryview(bytes(data))) == ["slot 0: valid, epoch 2",
                                                    "slot 1: valid, epoch 1"]
    data[60] ^= 0xFF  # slot 0's content: its CRC fails; slot 1 (epoch 1) governs
    path.write_bytes(bytes(data))
    assert slot_report(memoryview(bytes(data)))[0] == "slot 0: CRC mismatch"
    f = open_file(path)
    assert f.slot == 1 and f.read(1) == b"one"
    assert main(["kladde", "info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "slot 0: CRC mismatch" in out and "slot 1: valid, epoch 1" in out


def test_a_scan_cut_short_by_its_limit_is_not_taken_for_a_torn_tail(tmp_path):
    path, _ = _journaled(tmp_path, "lim.kladde", SMALL)
    data = bytearray(path.read_bytes())
    t = jn.journal_of(load(bytes(data))).transactions[1]
    data[t.offset + 1] ^= 0x08
    full = jn.journal_of(load(bytes(data)))
    assert full.valid_after == 4 and full.scan_complete
    short = jn.journal_of(load(bytes(data), limits=Limits(scan_bytes=1)))
    assert short.valid_after == 0 and not short.scan_complete and short.damaged
    assert short.stop == "checksum mismatch" and "may follow" in short.detail
