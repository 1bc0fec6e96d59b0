"""Nothing lost in kladde: damage in the journal or a header slot never makes a fold drop
committed transactions silently, a failed commit is never written twice, replay at open
is bounded, and every byte a fold leaves behind is kept in a side file
(runtime/cut.py, docs/recovery.md "kladde address table")."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from bytewright.runtime import cut
from bytewright.runtime.errors import BytewrightError
from bytewright.runtime.kladde import Store, load, open_file
from bytewright.runtime.kladde import journal as jn
from bytewright.runtime.kladde.writer import OsIO

PAGE = 4096
ROOT = Path(__file__).resolve().parents[1]


def _fold(path, *extra) -> tuple[int, str]:
    import contextlib
    import io

    from bytewright.cli.main import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["kladde", "fold", *extra, str(path)])
    return code, err.getvalue()


def _straddling(path) -> bytes:
    """14 journal transactions of 900 bytes each, several of them crossing a page."""
    s = Store.create(path)
    s.write(1, 0, b"committed")
    s.flush()
    for k in range(14):
        s.write(2 + k, 0, bytes([65 + k]) * 900)
        s.commit()
    s.close()
    return Path(path).read_bytes()


def _expected_contents() -> dict[int, bytes]:
    out = {1: b"committed"}
    out.update({2 + k: bytes([65 + k]) * 900 for k in range(14)})
    return out


def _journal_pages(data: bytes) -> list[int]:
    return jn.journal_of(load(data)).pages


# -- 1. a flip in the next-page part of a straddling transaction ---------------------------

def test_flip_in_the_next_page_part_of_a_straddling_transaction_is_damage(tmp_path):
    good = _straddling(tmp_path / "good.kladde")
    txns = jn.journal_of(load(good)).transactions
    pages = _journal_pages(good)
    assert len(pages) >= 3
    straddlers = [t for t in txns if t.offset // PAGE != (t.end - 1) // PAGE]
    tested = 0
    for t in straddlers:
        # a flip in the part of its records that lies on the page it continues on
        start = ((t.end - 1) // PAGE) * PAGE
        if t.end - 4 - start < 1:
            continue
        at = start + (t.end - 4 - start) // 2
        d = bytearray(good)
        d[at] ^= 0x02
        j = jn.journal_of(load(bytes(d)))
        after = [x for x in txns if x.offset >= t.end]
        assert j.stop_offset == t.offset
        if not after:  # the last transaction: nothing follows, a torn tail
            assert j.stop == "torn tail"
            continue
        # every transaction after the damaged one verifies on its own (the first one
        # needs the damaged one's stored CRC, which is intact)
        assert j.valid_after == len(after), (t.offset, j.describe())
        assert j.stop != "torn tail" and j.damaged
        tested += 1
    assert tested >= 2


def test_fold_never_drops_committed_transactions_after_a_flip_in_any_journal_page(tmp_path):
    good = _straddling(tmp_path / "good.kladde")
    want = _expected_contents()
    for page in range(2, len(good) // PAGE):
        p = tmp_path / f"flip-{page}.kladde"
        d = bytearray(good)
        d[page * PAGE + 20] ^= 0x02
        p.write_bytes(bytes(d))
        code, err = _fold(p)
        if code != 0:  # refused (valid-looking transactions follow, or a table page is bad)
            assert p.read_bytes() == bytes(d), err
            continue
        # folded: either nothing committed was lost, or what was cut is in a side file
        state = jn.current_state(open_file(p)).contents()
        if state != want:
            assert cut.side_files(p), (page, sorted(set(want) - set(state)))


# -- 2. the last sector of a journal page zeroed -------------------------------------------

def test_zeroed_last_sector_of_a_journal_page_is_damage_not_a_torn_tail(tmp_path):
    good = _straddling(tmp_path / "good.kladde")
    txns = jn.journal_of(load(good)).transactions
    pages = _journal_pages(good)
    tested = 0
    for page in pages[:-1]:
        later = [t for t in txns if t.offset >= (page + 1) * PAGE]
        if len(later) < 2:
            continue
        tested += 1
        d = bytearray(good)
        d[page * PAGE + PAGE - 512:(page + 1) * PAGE] = bytes(512)
        j = jn.journal_of(load(bytes(d)))
        assert j.damaged and j.stop != "torn tail" and j.valid_after >= len(later) - 1, (
            page, j.describe())
        p = tmp_path / f"zero-{page}.kladde"
        p.write_bytes(bytes(d))
        code, err = _fold(p)
        assert code == 1 and "valid-looking" in err, err
        assert p.read_bytes() == bytes(d)
    assert tested >= 1


def test_a_zeroed_sector_that_begins_with_a_transaction_is_not_a_clean_end(tmp_path):
    """The same damage when a transaction starts exactly on the zeroed sector: only zero
    bytes follow on that page, as at the journal's clean end, yet the journal goes on."""
    p = tmp_path / "aligned.kladde"
    s = Store.create(p)
    s.write(1, 0, b"committed")
    s.flush()
    # 2 (length) + 5 (Write id, offset, 2-byte len) + n + 4 (crc) = 3584 bytes
    s.write(2, 0, b"a" * (3584 - 11))
    s.commit()
    for k in range(6):
        s.write(3 + k, 0, bytes([66 + k]) * 900)
        s.commit()
    s.close()
    good = p.read_bytes()
    txns = jn.journal_of(load(good)).transactions
    t = txns[1]
    assert t.offset % PAGE == 3584
    page = t.offset // PAGE
    d = bytearray(good)
    d[t.offset:(page + 1) * PAGE] = bytes((page + 1) * PAGE - t.offset)
    j = jn.journal_of(load(bytes(d)))
    later = [x for x in txns if x.offset >= (page + 1) * PAGE]
    assert j.stop_offset == t.offset and len(later) >= 2
    assert j.stop != "end" and j.damaged and j.valid_after >= len(later) - 1, j.describe()
    p.write_bytes(bytes(d))
    code, err = _fold(p)
    assert code == 1 and p.read_bytes() == bytes(d), err


def test_a_clean_end_on_a_sector_boundary_stays_a_clean_end(tmp_path):
    p = tmp_path / "end.kladde"
    s = Store.create(p)
    s.write(1, 0, b"committed")
    s.flush()
    s.write(2, 0, b"a" * (3584 - 11))
    s.commit()
    s.close()
    j = jn.journal_of(open_file(p))
    assert j.stop == "end" and j.stop_offset % 512 == 0 and not j.damaged


def test_a_crash_torn_tail_over_a_page_boundary_is_still_a_torn_tail(tmp_path):
    """The look past a trailer that does not verify must not take a crash for damage: a
    transaction whose second page never landed is a torn tail, nothing follows it."""
    good = _straddling(tmp_path / "good.kladde")
    txns = jn.journal_of(load(good)).transactions
    t = [x for x in txns if x.offset // PAGE != (x.end - 1) // PAGE][-1]
    page = t.offset // PAGE
    # the first page's trailer and everything from the second page on never reached disk
    d = bytearray(good[:(page + 1) * PAGE]) + bytes(len(good) - (page + 1) * PAGE)
    d[(page + 1) * PAGE - 8:(page + 1) * PAGE] = bytes(8)
    j = jn.journal_of(load(bytes(d)))
    assert j.stop == "torn tail" and j.stop_offset == t.offset and not j.damaged


# -- 3. a flipped bit in the governing header slot -----------------------------------------

def _two_journals(path) -> bytes:
    s = Store.create(path)
    s.write(1, 0, b"epoch-one data")
    s.flush()
    s.write(2, 0, b"journaled A")
    s.commit()
    s.close()
    s = Store.open(path)
    s.write(3, 0, b"journaled after the fold: B" * 3)
    s.commit()
    s.write(4, 0, b"C" * 5000)
    s.commit()
    s.close()
    return Path(path).read_bytes()


def test_fold_refuses_when_the_damaged_header_slot_had_a_journal(tmp_path):
    p = tmp_path / "hdr.kladde"
    good = _two_journals(p)
    assert set(jn.current_state(load(good)).ids()) == {1, 2, 3, 4}
    d = bytearray(good)
    d[20] ^= 0x02
    p.write_bytes(bytes(d))
    f = open_file(p)
    assert f.slot == 1  # readers fall back to the older slot
    code, err = _fold(p)
    assert code == 1 and "header slot 0" in err and len(err.strip().splitlines()) == 1, err
    assert p.read_bytes() == bytes(d)
    with pytest.raises(BytewrightError, match="header slot 0"):
        Store.open(p)
    assert p.read_bytes() == bytes(d)


def test_a_damaged_header_slot_is_kept_before_a_flush_overwrites_it(tmp_path):
    p = tmp_path / "hdr2.kladde"
    with Store.create(p) as s:
        s.write(1, 0, b"one")
        s.flush()  # epoch 1, slot 1
        s.write(2, 0, b"two")
        s.flush()  # epoch 2, slot 0
    d = bytearray(p.read_bytes())
    d[20] ^= 0x02  # slot 0 damaged; slot 1 (epoch 1) governs
    p.write_bytes(bytes(d))
    with Store.open(p) as s:
        s.write(5, 0, b"five")
        s.flush()  # epoch 2 again, into slot 0
    assert f"{p}.overwritten-0" in cut.side_files(p)
    assert Path(f"{p}.overwritten-0").read_bytes() == bytes(d[:PAGE])


def test_a_torn_header_write_during_a_fold_still_reopens(tmp_path):
    """A crash while writing the newer slot: no journal of that epoch exists, so the older
    slot governs and the writer open proceeds (keeping the torn slot)."""
    p = tmp_path / "torn.kladde"
    with Store.create(p) as s:
        s.write(1, 0, b"one")
        s.flush()
        s.write(2, 0, b"j")
        s.commit()
    d = bytearray(p.read_bytes())
    d[10:PAGE] = bytes(PAGE - 10)  # a header write into slot 0 that landed 10 bytes
    p.write_bytes(bytes(d))
    with Store.open(p) as s:
        assert s.read(2) == b"j"
    assert Path(f"{p}.overwritten-0").read_bytes() == bytes(d[:PAGE])


# -- 4. a failed commit is never written twice -------------------------------------------

class _Fail(OsIO):
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.armed = False

    def pwrite(self, fd, data, offset):
        if self.armed and self.kind == "torn":
            self.armed = False
            super().pwrite(fd, data[:max(1, len(data) // 2)], offset)
            raise OSError(5, "injected write error")
        super().pwrite(fd, data, offset)

    def fsync(self, fd):
        if self.armed and self.kind == "fsync":
            self.armed = False
            raise OSError(5, "injected fsync error")
        super().fsync(fd)


@pytest.mark.parametrize("kind", ["fsync", "torn"])
def test_a_failed_commit_poisons_the_store(tmp_path, kind):
    p = tmp_path / f"poison-{kind}.kladde"
    with Store.create(p) as s:
        s.write(1, 0, b"abcdef")
        s.flush()
    io = _Fail(kind)
    s = Store.open(p, io=io)
    s.splice(1, 2, 0, b"XY")
    io.armed = True
    with pytest.raises(OSError):
        s.commit()
    for op in (lambda: s.commit(), lambda: s.read(1), lambda: s.flush(),
               lambda: s.write(1, 0, b"z"), lambda: s.splice(1, 0, 0, b"q"), lambda: s.ids()):
        with pytest.raises(BytewrightError, match="reopen") as exc:
            op()
        assert type(exc.value).__name__ == "Poisoned"
    s.close()
    with Store.open(p) as s2:
        assert s2.read(1) in (b"abXYcdef", b"abcdef")
    assert jn.current_state(open_file(p)).read(1) in (b"abXYcdef", b"abcdef")


def test_a_failed_flush_poisons_the_store(tmp_path):
    p = tmp_path / "poison-flush.kladde"
    with Store.create(p) as s:
        s.write(1, 0, b"abcdef")
        s.flush()
    io = _Fail("fsync")
    s = Store.open(p, io=io)
    s.write(2, 0, b"new")
    io.armed = True
    with pytest.raises(OSError):
        s.flush()
    with pytest.raises(BytewrightError, match="reopen"):
        s.flush()
    s.close()
    assert open_file(p).read(1) == b"abcdef"


# -- 5. replay at open is bounded like the read-only replay ----------------------------------

_CHILD = textwrap.dedent("""
    import resource, sys
    from bytewright.runtime.kladde import Store, ReplayLimit
    def vm():
        for line in open("/proc/self/status"):
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    limit = vm() + (512 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        Store.open(sys.argv[1])
    except ReplayLimit as exc:
        print("limit", exc)
    except MemoryError:
        print("memory")
    else:
        print("opened")
""")


@pytest.mark.parametrize("records", [
    [jn.resize(2, 1 << 31)],
    [jn.resize(2, (1 << 32) - 1), jn.splice(2, 5, 0, b"xy")],
    [jn.splice(2, 0, (1 << 32) - 2, b"")],
    [jn.copy(7, 0, (1 << 32) - 2, 2, 0)],
], ids=["resize", "resize-splice", "splice", "copy"])
def test_store_open_replay_is_bounded(tmp_path, records):
    p = tmp_path / "big.kladde"
    with Store.create(p) as s:
        s.write(1, 0, b"x")
        s.flush()
        s.pending = list(records)  # journaled without materialising it here
        s.commit()
    with pytest.raises(jn.ReplayLimit):
        jn.current_state(open_file(p))  # the read-only path refuses it
    r = subprocess.run([sys.executable, "-c", _CHILD, str(p)], capture_output=True,
                       text=True, timeout=120)
    assert r.stdout.startswith("limit"), (r.stdout, r.stderr[-2000:])
    assert "replay" in r.stdout


# -- 6. every truncation and every kept byte goes through runtime.cut ---------------------

def test_no_ftruncate_call_in_the_kladde_runtime():
    found = []
    for path in sorted((ROOT / "runtime" / "kladde").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                if name in {"ftruncate", "truncate"}:
                    found.append(f"{path.name}:{node.lineno}")
    assert found == []


def _journaled(tmp_path, name):
    """A committed allocation, then six small journal transactions on one page; returns
    the path and the current state after each transaction (states[0]: none)."""
    path = tmp_path / name
    with Store.create(path) as s:
        s.write(1, 0, b"hello world " * 20)
        s.flush()
    with Store.open(path) as s:
        states = [{i: s.read(i) for i in s.ids()}]
        for i in range(6):
            s.write(1, i, bytes([65 + i]) * (3 + i))
            s.commit()
            states.append({i: s.read(i) for i in s.ids()})
    return path, states


def _damaged_middle(tmp_path, name):
    path, states = _journaled(tmp_path, name)
    data = bytearray(path.read_bytes())
    t = jn.journal_of(load(bytes(data))).transactions[2]
    data[t.offset + 2] ^= 0x40
    path.write_bytes(bytes(data))
    return path, bytes(data), t, states


def test_the_writer_open_refuses_damage_without_discard_after(tmp_path):
    path, data, t, states = _damaged_middle(tmp_path, "mid.kladde")
    with pytest.raises(BytewrightError, match=f"offset {t.offset}.*discard_after"):
        Store.open(path)
    assert path.read_bytes() == data and cut.side_files(path) == []
    with pytest.raises(BytewrightError):
        Store.open(path, discard_after=t.offset + 1)
    with pytest.warns(UserWarning, match="valid-looking"):
        s = Store.open(path, discard_after=t.offset)
    with s:
        assert {i: s.read(i) for i in s.ids()} == states[2]
    assert Path(f"{path}.discarded-{t.offset}").read_bytes() == data[t.offset:]


def test_an_earlier_side_file_is_never_overwritten(tmp_path):
    path, data, t, _ = _damaged_middle(tmp_path, "twice.kladde")
    earlier = Path(f"{path}.discarded-{t.offset}")
    earlier.write_bytes(b"an earlier cut at the same offset")
    code, err = _fold(path, "--discard-after", str(t.offset))
    assert code == 0, err
    assert earlier.read_bytes() == b"an earlier cut at the same offset"
    assert Path(f"{earlier}.2").read_bytes() == data[t.offset:]


def test_a_torn_tail_folded_at_open_is_kept(tmp_path):
    path, states = _journaled(tmp_path, "tail.kladde")
    data = path.read_bytes()
    t = jn.journal_of(load(data)).transactions[-1]
    torn = data[:t.offset + 3] + bytes(len(data) - t.offset - 3)
    path.write_bytes(torn)
    assert jn.journal_of(load(torn)).stop == "torn tail"
    with Store.open(path) as s:
        assert {i: s.read(i) for i in s.ids()} == states[-2]
    assert Path(f"{path}.discarded-{t.offset}").read_bytes() == torn[t.offset:]


def test_journal_pages_grow_the_file_through_cut(tmp_path, monkeypatch):
    grown = []
    real = cut.grow

    def spy(fd, size, io=None):
        grown.append(size)
        real(fd, size, io)

    monkeypatch.setattr(cut, "grow", spy)
    _straddling(tmp_path / "g.kladde")
    assert grown and all(n % PAGE == 0 for n in grown)
    assert os.path.getsize(tmp_path / "g.kladde") == max(grown)


# -- 6. a file cut short inside a journal page ---------------------------------------------

def _two_commits(path) -> tuple[bytes, list[jn.Transaction]]:
    """Epoch 0 with two committed transactions on journal page 2 (a few hundred bytes)."""
    with Store.create(path) as s:
        s.write(5, 0, b"A" * 100)
        s.commit()
        s.write(6, 0, b"B" * 100)
        s.commit()
    data = Path(path).read_bytes()
    txns = jn.journal_of(load(data)).transactions
    assert len(txns) == 2 and txns[-1].end < 3 * PAGE
    return data, txns


def test_a_journal_page_cut_short_still_yields_its_complete_transactions(tmp_path):
    """facts.md §8: recovery replays the complete transactions before the first failure; a
    file that ends inside a journal page after them still holds them whole."""
    p = tmp_path / "short.kladde"
    data, txns = _two_commits(p)
    short = data[:txns[-1].end + 200]
    assert len(short) % PAGE
    j = jn.journal_of(load(short))
    assert [t.offset for t in j.transactions] == [t.offset for t in txns]
    assert {i: jn.current_state(load(short)).read(i) for i in (5, 6)} == {
        5: b"A" * 100, 6: b"B" * 100}


def test_the_writer_open_keeps_transactions_of_a_journal_page_cut_short(tmp_path):
    p = tmp_path / "short2.kladde"
    data, txns = _two_commits(p)
    short = data[:txns[-1].end + 200]
    p.write_bytes(short)
    with Store.open(p) as s:
        assert {i: s.read(i) for i in s.ids()} == {5: b"A" * 100, 6: b"B" * 100}
    # the fold committed them, and the bytes that held them were not overwritten unkept
    assert {i: open_file(p).read(i) for i in open_file(p).ids()} == {
        5: b"A" * 100, 6: b"B" * 100}
    after = p.read_bytes()
    kept = b"".join(Path(f).read_bytes() for f in cut.side_files(p))
    assert after[2 * PAGE:len(short)] == short[2 * PAGE:] or short[2 * PAGE:] in kept
    assert len(after) % PAGE == 0  # the file ends on a page boundary again


def test_a_torn_transaction_in_a_journal_page_cut_short_is_kept(tmp_path):
    p = tmp_path / "short3.kladde"
    data, txns = _two_commits(p)
    short = data[:txns[-1].offset + 50]  # inside the second transaction
    p.write_bytes(short)
    j = jn.journal_of(load(short))
    assert len(j.transactions) == 1 and j.stop_offset == txns[-1].offset
    with Store.open(p) as s:
        assert {i: s.read(i) for i in s.ids()} == {5: b"A" * 100}
    assert Path(f"{p}.discarded-{txns[-1].offset}").read_bytes() == short[txns[-1].offset:]


# -- 7. a header slot zeroed whole --------------------------------------------------------

def test_fold_refuses_when_the_zeroed_header_slot_had_a_journal(tmp_path):
    """A slot of zeros looks never written; a journal of the segment only its header could
    name says it was written, exactly as for a slot whose CRC fails."""
    p = tmp_path / "zslot.kladde"
    good = _two_journals(p)
    d = bytearray(good)
    d[0:512] = bytes(512)  # a zeroed sector: the header's bytes all sit in it
    assert not any(d[:PAGE])
    p.write_bytes(bytes(d))
    assert open_file(p).slot == 1
    with pytest.raises(BytewrightError, match="header slot 0") as exc:
        Store.open(p)
    assert exc.value.offset == 0
    assert p.read_bytes() == bytes(d) and not cut.side_files(p)


def test_a_never_written_slot_of_a_new_file_opens(tmp_path):
    p = tmp_path / "fresh.kladde"
    with Store.create(p) as s:
        s.write(1, 0, b"x")
        s.commit()
    assert not any(p.read_bytes()[PAGE:2 * PAGE])  # slot 1 never written
    with Store.open(p) as s:
        assert s.read(1) == b"x"


def test_a_file_cut_short_inside_header_slot_1_never_revives_that_slot(tmp_path):
    """Readers skip a slot the file ends inside (facts.md §2.2: both slots must be whole
    pages). Extending the file again (padding at open, a journal page) must not bring back
    a header whose pages the cut removed; its bytes are kept before they are zeroed."""
    p = tmp_path / "slot1.kladde"
    with Store.create(p) as s:
        s.write(1, 0, b"epoch one")
        s.flush()  # epoch 1 in slot 1, naming pages past it
        s.write(2, 0, b"journaled")
        s.commit()
    data = p.read_bytes()
    short = data[:PAGE + 2675]  # the header's bytes all survive the cut
    p.write_bytes(short)
    assert open_file(p).slot == 0
    with Store.open(p) as s:
        assert s.ids() == []
        s.write(3, 0, b"after the cut")
        s.commit()
    assert jn.current_state(open_file(p)).read(3) == b"after the cut"
    with Store.open(p) as s:
        assert s.read(3) == b"after the cut"
    assert Path(f"{p}.overwritten-{PAGE}").read_bytes() == short[PAGE:]


# -- 8. a zeroed newer header slot with no journal after it ------------------------------

def _flushed_twice(path) -> bytes:
    with Store.create(path) as s:
        s.write(1, 0, b"epoch one")
        s.flush()  # epoch 1, slot 1
        s.write(2, 0, b"acknowledged by the flush of epoch two")
        s.flush()  # epoch 2, slot 0: its pages and header fsynced, no journal after it
    return Path(path).read_bytes()


def test_fold_refuses_when_a_zeroed_header_slot_names_pages_of_its_epoch(tmp_path):
    """A header write starts with the magic and the slot it overwrites held a header (page
    0 from the start, facts.md §2.3), so a slot of zeros is damage, never a torn commit.
    When pages of the epoch that slot would hold verify, that header committed: folding
    under the older slot would overwrite it and lose the epoch's writes."""
    p = tmp_path / "zflush.kladde"
    good = _flushed_twice(p)
    d = bytearray(good)
    d[0:512] = bytes(512)  # a zeroed sector: the header's bytes all sit in it
    assert not any(d[:PAGE])
    p.write_bytes(bytes(d))
    assert open_file(p).slot == 1  # readers fall back to the older slot
    with pytest.raises(BytewrightError, match="header slot 0") as exc:
        Store.open(p)
    assert exc.value.offset == 0
    assert p.read_bytes() == bytes(d) and not cut.side_files(p)


def test_a_zeroed_older_header_slot_still_opens(tmp_path):
    """The zeroed slot held the older header: no page of the epoch after the governing
    one exists, so the writer open proceeds."""
    p = tmp_path / "zold.kladde"
    _flushed_twice(p)
    with Store.open(p) as s:
        s.write(3, 0, b"epoch three")
        s.flush()  # epoch 3, slot 1 governs; slot 0 holds epoch 2
    d = bytearray(p.read_bytes())
    d[0:512] = bytes(512)
    p.write_bytes(bytes(d))
    with Store.open(p) as s:
        assert s.read(3) == b"epoch three"
        assert s.read(2) == b"acknowledged by the flush of epoch two"


def test_kladde_fold_refuses_a_zeroed_newer_header_slot_in_one_line(tmp_path):
    p = tmp_path / "zfold.kladde"
    d = bytearray(_flushed_twice(p))
    d[0:512] = bytes(512)
    p.write_bytes(bytes(d))
    code, err = _fold(p)
    assert code == 1 and "header slot 0" in err and len(err.strip().splitlines()) == 1, err
    assert p.read_bytes() == bytes(d) and not cut.side_files(p)


def test_pages_of_the_epoch_a_damaged_slot_may_have_held_are_kept(tmp_path):
    """A damaged slot that is not all zero may be a crash's torn commit, so the writer
    open proceeds under the older slot; but it may as well be a committed header damaged
    afterwards, so the pages of its epoch, which no header names any more, are kept in a
    side file before anything is written."""
    p = tmp_path / "flip.kladde"
    d = bytearray(_flushed_twice(p))
    d[20] ^= 0x02  # slot 0 (epoch 2) fails its CRC; slot 1 (epoch 1) governs
    p.write_bytes(bytes(d))
    with pytest.warns(UserWarning, match="header slot 0"):
        s = Store.open(p)
    with s:
        assert not s.exists(2)
        s.write(3, 0, b"after the open")
        s.flush()
    kept = b"".join(Path(f).read_bytes() for f in cut.side_files(p))
    assert b"acknowledged by the flush of epoch two" in kept
    assert p.read_bytes()[:2 * PAGE] != bytes(d[:2 * PAGE])  # slot 0 rewritten


# -- 9. the file ends inside the last page of the epoch a damaged slot may have held ------

def test_a_page_of_the_damaged_slots_epoch_that_the_file_ends_inside_is_kept(tmp_path):
    """The damaged newer slot may be a committed header (the open proceeds under the
    older slot, keeping the pages of its epoch). When the file ends inside the last of
    those pages, past that page's CRC, the page still verifies once padded with zeros
    (facts.md §1.1: padding is not checksummed), and it is kept like the others before
    the fold rewrites the slot."""
    p = tmp_path / "cutflip.kladde"
    payload = b"acknowledged by the flush of epoch two, in a page the file ends inside"
    with Store.create(p) as s:
        s.write(1, 0, b"epoch one")
        s.flush()  # epoch 1, slot 1; its journal segment starts after its pages
        s.write(2, 0, b"a journal transaction of segment two")
        s.commit()
        s.write(3, 0, payload)
        s.flush()  # epoch 2, slot 0: its pages follow the journal page
    d = bytearray(p.read_bytes())
    at = d.find(payload)
    page = at // PAGE
    assert d[page * PAGE] == 2 and page > 2  # a data page of epoch 2 holds the payload
    d[20] ^= 0x02  # slot 0 (epoch 2) fails its CRC; slot 1 (epoch 1) governs
    end = at + len(payload) + 4 + 200  # past the page's CRC, well inside the page
    assert end < (page + 1) * PAGE
    del d[end:]  # the rest of that page and the epoch's table page are gone
    p.write_bytes(bytes(d))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = Store.open(p)
    except BytewrightError as exc:  # a refusal naming the damage keeps the write too
        assert exc.offset is not None
        assert p.read_bytes() == bytes(d)
        return
    with s:
        if s.exists(3) and s.read(3) == payload:
            return
        s.write(4, 0, b"after the open")
        s.flush()
    kept = b"".join(Path(f).read_bytes() for f in cut.side_files(p))
    assert payload in kept


def test_a_zeroed_slot_refuses_when_its_epoch_survives_in_a_page_the_file_ends_inside(
        tmp_path):
    """A zeroed slot is damage, never a torn commit; a page of its epoch that verifies
    makes the writer open refuse. The page the file ends inside counts: cut past its CRC,
    it verifies once padded with zeros (facts.md §1.1), and the fold would pad it and
    rewrite the slot, losing the epoch with no side file."""
    p = tmp_path / "zcut.kladde"
    payload = b"acknowledged by the flush of epoch two, in a page the file ends inside"
    with Store.create(p) as s:
        s.write(1, 0, b"epoch one")
        s.flush()
        s.write(2, 0, b"a journal transaction of segment two")
        s.commit()
        s.write(3, 0, payload)
        s.flush()  # epoch 2, slot 0
    d = bytearray(p.read_bytes())
    at = d.find(payload)
    d[0:512] = bytes(512)  # a zeroed sector: the header's bytes all sit in it
    assert not any(d[:PAGE])
    del d[at + len(payload) + 4 + 200:]  # inside the data page, past its CRC
    assert len(d) % PAGE
    p.write_bytes(bytes(d))
    with pytest.raises(BytewrightError, match="header slot 0") as exc:
        Store.open(p)
    assert exc.value.offset == 0
    assert p.read_bytes() == bytes(d) and not cut.side_files(p)


def test_a_page_of_the_damaged_slots_epoch_that_fails_its_crc_is_kept_too(tmp_path):
    """Damage that fails one page's CRC touches only some of the writes in it: a page
    whose framing names the damaged slot's epoch is kept with the pages that verify."""
    p = tmp_path / "twoflips.kladde"
    first = bytes(range(1, 256)) * 4  # two writes of one flush share a data page
    second = bytes(reversed(range(1, 256))) * 4
    with Store.create(p) as s:
        s.write(1, 0, b"epoch one")
        s.flush()  # epoch 1, slot 1; its journal segment starts after its pages
        s.write(2, 0, b"a journal transaction of segment two")
        s.commit()
        s.write(3, 0, first)
        s.write(4, 0, second)
        s.flush()  # epoch 2, slot 0
    d = bytearray(p.read_bytes())
    a, b = d.find(first), d.find(second)
    assert a // PAGE == b // PAGE and d[a // PAGE * PAGE] == 2
    d[20] ^= 0x02  # slot 0 fails its CRC; slot 1 (epoch 1) governs
    d[b + len(second) // 2] ^= 0x10  # the data page fails its CRC, far from `first`
    assert a < b and b + len(second) // 2 - (a + len(first)) > 256
    p.write_bytes(bytes(d))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = Store.open(p)
    except BytewrightError as exc:
        assert exc.offset is not None and p.read_bytes() == bytes(d)
        return
    with s:
        if s.exists(3) and s.read(3) == first:
            return
        s.write(5, 0, b"after the open")
        s.flush()
    kept = b"".join(Path(f).read_bytes() for f in cut.side_files(p))
    assert first in kept


def test_a_zeroed_slot_1_over_the_first_epoch_keeps_that_epochs_pages(tmp_path):
    """Slot 1 all zero bytes under epoch 0 is a new file's never-written slot, or the
    header of epoch 1 zeroed after it committed; pages of epoch 1 that verify may be a
    crash's first commit that never wrote its header, so the open proceeds, but those
    pages, which no header names any more, are kept before the fold rewrites slot 1."""
    p = tmp_path / "zslot1.kladde"
    payload = b"acknowledged by the flush of epoch one"
    with Store.create(p) as s:
        s.write(1, 0, b"a journal transaction of segment one")
        s.commit()  # the journal of epoch 0 at page 2, so epoch 1's pages follow it
        s.write(2, 0, payload)
        s.flush()  # epoch 1, slot 1
    d = bytearray(p.read_bytes())
    assert d.find(payload) >= 3 * PAGE
    d[PAGE:PAGE + 512] = bytes(512)  # a zeroed sector: the header's bytes all sit in it
    assert not any(d[PAGE:2 * PAGE])
    p.write_bytes(bytes(d))
    assert open_file(p).slot == 0
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = Store.open(p)
    except BytewrightError as exc:
        assert exc.offset is not None and p.read_bytes() == bytes(d)
        return
    with s:
        if s.exists(2) and s.read(2) == payload:
            return
        s.write(3, 0, b"after the open")
        s.flush()
    kept = b"".join(Path(f).read_bytes() for f in cut.side_files(p))
    assert payload in kept
