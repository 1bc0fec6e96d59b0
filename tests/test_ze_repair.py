"""ZE WAL repair safety: why reading stopped and what follows the damage,
truncation and bit-flip sweeps, the appender's open (torn tail cut, damage in the middle
refused unless discard_after), side files, salvage, and crash points of the ZE writers."""

from __future__ import annotations

import pytest

from bytewright.generated import ze
from bytewright.review.checks import FIXTURE_DIR, parse_fixture
from bytewright.runtime.ze import artifacts, files, wal

DELETE = parse_fixture(FIXTURE_DIR / "ze" / "wal_delete_record_v1.hex").data[14:-8]
N = 6


def _wal(n: int = N) -> bytes:
    # distinct payload lengths so a wrong successor cannot line up by accident
    return wal.wal_bytes(1, [(2, DELETE)] * n)


def _offsets(data: bytes) -> list[tuple[int, int]]:
    r = wal.replay(data)
    assert r.terminator == "clean"
    return [(x.offset, x.end) for x in r.records]


def test_truncate_at_every_byte():
    data = _wal()
    recs = _offsets(data)
    for cut in range(wal.HEADER_LEN, len(data) + 1):
        r = wal.replay(data[:cut])
        whole = sum(1 for _, e in recs if e <= cut)
        assert len(r.records) == whole, cut
        assert [x.offset for x in r.records] == [o for o, _ in recs[:whole]]
        at_boundary = cut == wal.HEADER_LEN or any(e == cut for _, e in recs)
        assert r.terminator == ("clean" if at_boundary else "corrupt"), cut
        assert r.valid_after == 0 and (at_boundary or r.corruption == "tail"), cut
        if not at_boundary:
            assert "torn tail" in r.describe()


def test_flip_every_bit_of_every_record():
    data = _wal()
    recs = _offsets(data)
    for k, (start, end) in enumerate(recs):
        for byte in range(start, end):
            for bit in range(8):
                d = bytearray(data)
                d[byte] ^= 1 << bit
                r = wal.replay(bytes(d))
                assert len(r.records) == k, (byte, bit)
                assert r.offset == start and r.terminator == "corrupt"
                # every later record is found again, whatever the flip did to the length
                assert r.valid_after_offsets == [o for o, _ in recs[k + 1:]], (byte, bit)
                want = "torn tail" if k == N - 1 else "valid-looking records follow"
                assert want in r.describe()


def test_sequence_break_counts_the_out_of_sequence_record():
    data = wal.wal_bytes(1, [(2, DELETE)] * 3) + wal.frame(9, 2, DELETE)
    r = wal.replay(data)
    assert r.reason == "SequenceGap" and r.valid_after == 1
    assert "sequence break" in r.describe()


def test_appender_cuts_a_torn_tail_and_continues(tmp_path):
    path = tmp_path / "w.wal"
    whole = _wal()
    path.write_bytes(whole[:-5])
    torn_at = _offsets(whole)[-1][0]
    with files.WalAppender(path) as app:
        # a torn tail is kept too (runtime.cut): its bytes are in the side file
        assert app.discarded == f"{path}.discarded-{torn_at}" and app.next_seq == N
        assert app.append(2, DELETE) == N
    assert (tmp_path / f"w.wal.discarded-{torn_at}").read_bytes() == whole[torn_at:-5]
    r = wal.replay(path.read_bytes())
    assert r.terminator == "clean" and [x.seq for x in r.records] == list(range(1, N + 1))


def test_appender_refuses_damage_in_the_middle_then_cuts_with_discard_after(tmp_path):
    path = tmp_path / "m.wal"
    data = bytearray(_wal())
    start, _ = _offsets(bytes(data))[2]
    data[start + 20] ^= 0x10
    path.write_bytes(bytes(data))
    with pytest.raises(files.WalDamaged) as exc:
        files.WalAppender(path)
    msg = str(exc.value)
    assert f"offset {start}" in msg and "3 valid-looking records" in msg and "\n" not in msg
    assert path.read_bytes() == bytes(data)  # untouched
    with pytest.raises(files.WalDamaged):
        files.WalAppender(path, discard_after=start + 1)
    # salvage: the 2 records before and the 3 after the damage, byte for byte
    salvaged, offsets = files.salvage_wal(bytes(data))
    assert len(offsets) == N - 1
    r = wal.replay(salvaged)
    assert len(r.records) == 2 and r.reason == "SequenceGap" and r.valid_after == 3
    with files.WalAppender(path, discard_after=start) as app:
        assert app.discarded == f"{path}.discarded-{start}"
        app.append(2, DELETE)
    assert (tmp_path / f"m.wal.discarded-{start}").read_bytes() == bytes(data[start:])
    r = wal.replay(path.read_bytes())
    assert r.terminator == "clean" and len(r.records) == 3


# -- crash points -----------------------------------------------------------------------

class Crash(Exception):
    pass


class CrashIO(files.OsIO):
    def __init__(self, at: int | None = None, torn: bool = False) -> None:
        self.at, self.torn, self.steps = at, torn, 0

    def _hit(self) -> bool:
        self.steps += 1
        return self.steps - 1 == self.at

    def write(self, fd, data, offset):
        if self._hit():
            if self.torn:
                super().write(fd, data[:max(1, len(data) // 2)], offset)
            raise Crash
        super().write(fd, data, offset)

    def fsync(self, fd):
        if self._hit():
            raise Crash
        super().fsync(fd)

    def ftruncate(self, fd, size):
        if self._hit():
            raise Crash
        super().ftruncate(fd, size)

    def rename(self, src, dst):
        if self._hit():
            raise Crash
        super().rename(src, dst)


def _state(path) -> list[int]:
    """What a reopening writer would see: the trusted records (a torn tail is cut)."""
    with files.WalAppender(path) as app:
        return [x.seq for x in app.replay.records]


def test_crash_at_every_step_of_wal_append(tmp_path):
    base = _wal(3)
    io = CrashIO()
    probe = tmp_path / "probe.wal"
    probe.write_bytes(base)
    with files.WalAppender(probe, io=io) as app:
        app.append(2, DELETE)
    old, new = [1, 2, 3], [1, 2, 3, 4]
    seen = set()
    for at in range(io.steps):
        for torn in (False, True):
            path = tmp_path / f"a-{at}-{torn}.wal"
            path.write_bytes(base)
            app = files.WalAppender(path, io=CrashIO(at, torn))
            with pytest.raises(Crash):
                app.append(2, DELETE)
            app.close()
            r = wal.replay(path.read_bytes())
            assert r.valid_after == 0  # never damage with records after it
            got = _state(path)
            assert got in (old, new), (at, torn)
            seen.add(tuple(got))
    assert seen == {tuple(old), tuple(new)}  # a crash after the write leaves the new state


def test_crash_at_every_step_of_a_fresh_wal_and_of_the_tail_cut(tmp_path):
    # creating a WAL is atomic (temp write, fsync, rename): afterwards it is absent or whole
    for at in range(3):
        path = tmp_path / f"fresh-{at}.wal"
        with pytest.raises(Crash):
            files.WalAppender(path, io=CrashIO(at, True))
        assert not path.exists()
        with files.WalAppender(path) as app:
            assert app.next_seq == 1
        assert wal.replay(path.read_bytes()).terminator == "clean"
    # cutting a torn tail: ftruncate, fsync
    torn = _wal(3)[:-4]
    for at in range(2):
        path = tmp_path / f"cut-{at}.wal"
        path.write_bytes(torn)
        with pytest.raises(Crash):
            files.WalAppender(path, io=CrashIO(at))
        assert _state(path) == [1, 2]


def test_crash_at_every_step_of_an_atomic_artifact_write(tmp_path):
    old = artifacts.purge_file(2, [5])
    new = artifacts.purge_file(3, [5, 6, 7])
    for at in range(3):  # write temp, fsync temp, rename
        for torn in (False, True):
            path = tmp_path / f"purge-{at}-{torn}.ze"
            path.write_bytes(old)
            with pytest.raises(Crash):
                files.write_atomic(path, new, io=CrashIO(at, torn))
            assert artifacts.read_purge(path.read_bytes()) == artifacts.read_purge(old)
    path = tmp_path / "purge.ze"
    path.write_bytes(old)
    files.write_atomic(path, new)
    assert path.read_bytes() == new


def test_cli_repair_and_salvage(tmp_path, capsys):
    from bytewright.cli.main import main

    path = tmp_path / "c.wal"
    data = bytearray(_wal())
    start, _ = _offsets(bytes(data))[1]
    data[start + 3] ^= 0x01
    path.write_bytes(bytes(data))
    assert main(["ze", "info", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"at offset {start}" in out and "4 valid-looking records follow" in out
    assert main(["ze", "repair", str(path)]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and f"offset {start}" in err
    assert path.read_bytes() == bytes(data)
    out_path = tmp_path / "s.wal"
    assert main(["ze", "salvage", str(path), str(out_path)]) == 0
    assert "5 verifying records" in capsys.readouterr().out
    assert main(["ze", "repair", "--discard-after", str(start), str(path)]) == 0
    assert f"discarded-{start}" in capsys.readouterr().out
    assert main(["ze", "info", str(tmp_path / "missing.wal")]) == 3


# -- graph WAL (family 19): truncation and bit-flip sweeps --------------------------------

def _graph_wal():
    import copy

    from bytewright.generated import ze
    from bytewright.runtime.ze import envelope, graphwal

    env1 = parse_fixture(FIXTURE_DIR / "ze" / "wal_graph_commit_v1.hex").data[14:-8]
    env = envelope.validate(env1)
    store, batch = env.begin.payload.store, env.begin.batch_id
    state = env.commit.payload.state
    envs = [env1]
    for seq in (2, 3):
        state = copy.deepcopy(state)
        state.generation += 1
        state.sequence += 1
        inv = ze.ZgwInventory(state.catalog.descriptor, ze.InventoryState.retained, 0)
        envs.append(envelope.build_envelope(store=store, batch_id=batch + seq - 1, sequence=seq,
                                            kind=2, base_generation=seq - 1,
                                            changes=[(3, inv)], state=state))
    return graphwal.graph_wal_bytes(store, envs), envs


def test_graph_wal_truncation_sweep():
    from bytewright.runtime.errors import DecodeError
    from bytewright.runtime.ze import graphwal

    data, envs = _graph_wal()
    bounds = [graphwal.HEADER_LEN]
    for e in envs:
        bounds.append(bounds[-1] + len(e))
    for cut in range(graphwal.HEADER_LEN, len(data) + 1, 7):  # every 7th byte: ~500 cuts
        whole = sum(1 for b in bounds[1:] if b <= cut)
        try:
            r = graphwal.replay(data[:cut])
        except DecodeError as exc:  # a cut that cannot be a torn append is reported, not cut
            pytest.fail(f"cut {cut}: {exc}")
        assert len(r.envelopes) == whole, cut
        assert r.terminator == ("clean" if cut in bounds else "torn_tail"), cut
        if cut not in bounds:
            assert r.torn_at == bounds[whole]


def test_graph_wal_bit_flips_are_refused_not_cut():
    """A flipped bit in a complete envelope is corruption: replay raises the project's error
    (nothing is silently dropped), at an offset inside the damaged envelope or later."""
    from bytewright.runtime.errors import DecodeError
    from bytewright.runtime.ze import graphwal

    data, envs = _graph_wal()
    start = graphwal.HEADER_LEN + len(envs[0])  # flip every bit of envelopes 2 and 3
    last = start + len(envs[1])
    for byte in range(start, len(data)):
        for bit in (byte % 8,):  # one bit per byte keeps the sweep short
            d = bytearray(data)
            d[byte] ^= 1 << bit
            try:
                r = graphwal.replay(bytes(d))
            except DecodeError as exc:
                assert exc.offset is not None and exc.offset >= start, (byte, bit, exc)
                continue
            # the only silent outcome allowed: a flip in the last envelope's size that makes
            # it look like an incomplete final append whose present bytes all agree
            assert r.terminator == "torn_tail" and r.torn_at == last, (byte, bit)
            assert len(r.envelopes) == 2 and byte >= last


def test_a_scan_cut_short_by_its_limit_counts_as_damage():
    data = bytearray(_wal())
    start, _ = _offsets(bytes(data))[1]
    data[start + 20] ^= 0x01
    full = wal.replay(bytes(data))
    assert full.valid_after == 4 and full.scan_complete and full.damaged
    short = wal.replay(bytes(data), scan_bytes=30)
    assert not short.scan_complete and short.damaged and short.valid_after == 0
    assert "stopped at its limit" in short.describe() and "torn tail" not in short.describe()
    # the candidate cap too: adversarial bytes whose declared length fits at every other
    # u32, each candidate different (any op counts, so the length is the prefilter)
    adversarial = wal.wal_bytes(1, [(2, DELETE)]) + b"".join(
        i.to_bytes(4, "little") + (1).to_bytes(4, "little") for i in range(2500))
    r = wal.replay(adversarial)
    assert r.terminator == "corrupt"
    assert wal.scan_after(memoryview(adversarial), 40, candidates=10**6) == [40]
    with pytest.raises(wal._ScanCut):
        wal.scan_after(memoryview(adversarial), 64, candidates=5)


def test_salvage_from_a_file_streams_and_writes_the_same_bytes(tmp_path):
    """``salvage_wal_file`` (what ``ze salvage`` runs): the bytes ``salvage_wal`` builds in
    memory, read through a map and written piece by piece (a 290 MB WAL no longer needs
    the file and the output in memory); held memory stays well under the file."""
    import tracemalloc

    recs = [(1, wal.encode_payload(1, ze.OpUpsertV1(ze.PayloadV1Header(), i + 1, 1,
                                                     ze.F32Vector([0.5] * 256))))
            for i in range(8_000)]
    data = bytearray(wal.wal_bytes(1, recs))
    # damage with 99 valid records after it (the search past damage has its own bound,
    # a 256 KiB window of candidate offsets at a time, which a larger file does not move)
    start = _offsets(bytes(data))[7_900][0]
    data[start + 20] ^= 0x10
    src = tmp_path / "d.wal"
    src.write_bytes(bytes(data))
    want, want_offsets = files.salvage_wal(bytes(data))
    tracemalloc.start()
    try:
        offsets = files.salvage_wal_file(src, tmp_path / "s.wal")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (tmp_path / "s.wal").read_bytes() == want and offsets == want_offsets
    assert len(offsets) == 7_999 and peak < len(data) / 3, (peak, len(data))  # 8.6 MB
