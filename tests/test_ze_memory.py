"""ZE WAL replay memory: the trusted prefix and the committed units are
held as columns (RecordList, CommittedList), so replay + commit holds a few bytes per
record instead of a decoded body per record, and the cyclic collector has nothing to
walk. These tests pin the held bytes (tracemalloc, not wall-clock) and check that the
column-backed results behave exactly like the record-by-record path."""

from __future__ import annotations

import gc
import math
import tracemalloc

import pytest

from bytewright.generated import ze
from bytewright.runtime.errors import ConstraintError, DecodeError
from bytewright.runtime.ze import wal


def _upsert(doc: int, values=None) -> tuple[int, bytes]:
    vec = ze.F32Vector([0.5] * 8 if values is None else values)
    return 1, wal.encode_payload(1, ze.OpUpsertV1(ze.PayloadV1Header(), doc, 1, vec))


def _delete(doc: int) -> tuple[int, bytes]:
    return 2, wal.encode_payload(2, ze.OpDeleteV1(ze.PayloadV1Header(), [doc]))


def _member8(i: int, n: int) -> tuple[int, bytes]:
    body = ze.OpUpsertV2(ze.UpsertFields(vector=True), i + 1, 1, ze.F32Vector([1.0]), None,
                         None, None, None)
    return 8, wal.encode_payload(8, ze.OpBatchMember(i, n, body))


def _member11(i: int, n: int) -> tuple[int, bytes]:
    return 11, wal.encode_payload(11, ze.OpMixedMember(i, n, 2, ze.OpDeleteV1(
        ze.PayloadV1Header(), [i + 1])))


def _held_per_record(data: bytes, n: int, decode: bool) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        r = wal.replay(data, decode=decode)
        done, held = wal.commit(r.records)
        cur, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(r.records) == n and len(done) == n and not held
    return cur / n


@pytest.mark.parametrize("decode", [True, False])
def test_replay_and_commit_hold_a_few_bytes_per_record(decode):
    n = 5_000
    data = wal.wal_bytes(1, [_upsert(i + 1) for i in range(n)])
    per = _held_per_record(data, n, decode)
    # 11 bytes of record columns + 13 of unit columns, plus array over-allocation; the
    # former list of Record + decoded body + Committed held ~800 bytes per record
    assert per < 48, per


def test_replay_commit_runs_no_collection():
    """The 10k -> 100k slowdown was the cyclic collector walking the retained bodies;
    nothing is retained now, so a bulk replay sets off (next to) no collection."""
    data = wal.wal_bytes(1, [_upsert(i + 1) for i in range(10_000)])
    gc.collect()
    before = sum(s["collections"] for s in gc.get_stats())
    r = wal.replay(data, decode=True)
    done, _ = wal.commit(r.records)
    after = sum(s["collections"] for s in gc.get_stats())
    assert len(done) == 10_000
    assert after - before <= 2


def _mixed() -> bytes:
    recs = [_upsert(1), _member8(0, 2), _member8(1, 2), _delete(1), _member11(0, 3),
            _member11(1, 3), _member11(2, 3), _upsert(2), _member8(0, 2), _member8(0, 2),
            _member8(1, 2), _member8(0, 3), _member8(1, 3)]  # the last run is withheld
    return wal.wal_bytes(7, recs)


@pytest.mark.parametrize("decode", [True, False])
def test_record_list_matches_the_frames(decode):
    data = _mixed()
    r = wal.replay(data, decode=decode)
    frames = list(ze.iter_wal_frame(data, wal.HEADER_LEN))
    assert len(r.records) == len(frames) == 13
    pos = wal.HEADER_LEN
    for rec, (fr, end) in zip(r.records, frames, strict=True):
        assert (rec.seq, rec.op, bytes(rec.payload), rec.offset, rec.end) == \
            (fr.seq, fr.op, bytes(fr.payload), pos, end)
        # a decoding replay hands out the body; a framing-only one does not
        assert (rec.body is not None) == decode
        if decode:
            assert rec.body == wal.decode_body(rec)
        pos = end
    assert r.records.offsets == [rec.offset for rec in r.records]
    assert r.records[-1] == r.records[12] and r.records[2:4] == list(r.records)[2:4]
    assert r.records == list(r.records) and r.records != []
    with pytest.raises(IndexError):
        r.records[13]


@pytest.mark.parametrize("after_seq", [0, 7, 10, 15])
@pytest.mark.parametrize("decode", [True, False])
def test_commit_on_columns_equals_commit_on_records(decode, after_seq):
    """The column path (RecordList) and the record-by-record path (a plain list) agree on
    every unit, its records and payloads, and on the withheld tail."""
    r = wal.replay(_mixed(), decode=decode)
    done, held = wal.commit(r.records, after_seq=after_seq)
    done_l, held_l = wal.commit(list(r.records), after_seq=after_seq)
    assert [c.kind for c in done] == [c.kind for c in done_l]
    assert [[x.seq for x in c.records] for c in done] == \
        [[x.seq for x in c.records] for c in done_l]
    assert [c.payloads for c in done] == [c.payloads for c in done_l]
    assert list(done) == list(done_l) and held == held_l
    assert [x.seq for x in held] == [18, 19]
    if after_seq == 0:
        assert [c.kind for c in done] == ["single", "batch", "single", "mixed", "single",
                                          "batch"]
        assert isinstance(done[0].payloads[0], ze.OpUpsertV1)
        assert done[0].payloads[0].doc_id == 1 and done[-1].payloads[1].index == 1
        assert [c.kind for c in done[-2:]] == ["single", "batch"]


@pytest.mark.parametrize("decode", [True, False])
def test_a_bad_payload_still_fails_in_commit_unless_skipped(decode):
    """replay(decode=True) runs the payload rules early but keeps the verdict: commit
    raises it at the record's turn, with the same path and offset, and not at all when
    after_seq skips the record."""
    bad = [_upsert(1), _upsert(2, [1.0, math.nan]), _upsert(3)]
    r = wal.replay(wal.wal_bytes(1, bad), decode=decode)
    assert r.terminator == "clean" and len(r.records) == 3
    with pytest.raises(ConstraintError, match="NonFiniteVector") as exc:
        wal.commit(r.records)
    assert exc.value.path == "wal_record[seq 2].vector[1]"
    assert exc.value.offset == r.records[1].offset
    done, _ = wal.commit(r.records, after_seq=2)
    assert [c.records[0].seq for c in done] == [3]


def test_long_packed_vector_nan_found_by_index():
    values = [0.25] * 300
    values[217] = -math.inf
    r = wal.replay(wal.wal_bytes(1, [_upsert(1, values)]), decode=True)
    with pytest.raises(ConstraintError, match=r"index 217 \(NonFiniteVector\)"):
        wal.commit(r.records)
    ok = wal.replay(wal.wal_bytes(1, [_upsert(1, [3.4e38] * 300)]), decode=True)
    assert len(wal.commit(ok.records)[0]) == 1


def test_orphan_member_refused_on_the_column_path():
    r = wal.replay(wal.wal_bytes(1, [_member8(0, 3), _member8(2, 3)]), decode=True)
    with pytest.raises(wal.OrphanBatchMember) as exc:
        wal.commit(r.records)
    assert exc.value.path == "wal_record[seq 2].index" and exc.value.offset == \
        r.records[1].offset


def test_committed_list_is_a_sequence():
    r = wal.replay(_mixed(), decode=True)
    done, _ = wal.commit(r.records)
    assert len(done) == 6 and done[-1] == done[5] and done[1:3] == list(done)[1:3]
    with pytest.raises(IndexError):
        done[6]
    assert [len(c.records) for c in done] == [1, 2, 1, 3, 1, 2]
    # a unit is built when read and decodes its payloads then
    assert done[1] is not done[1] and done[1] == done[1]


def test_invalid_header_has_empty_records():
    r = wal.replay(b"\x00" * 10)
    assert r.terminator == "invalid_header" and r.records == [] and len(r.records) == 0
    with pytest.raises(DecodeError):
        raise r.error


@pytest.mark.parametrize("decode", [False, True])
def test_replay_releases_the_pages_it_walked_and_reads_the_same(decode, monkeypatch):
    """``replay(release=)`` reports the offsets it has reached every RELEASE_EVERY bytes
    (what lets ``ze info`` / ``ze verify`` of a mapped WAL stay bounded: a 290 MB WAL
    peaked at 460 MB read whole, 207 MB mapped, the ZE module's import), in order, up to
    the end; the records, commit and terminator are those of a replay without it. A
    damaged tail is still classified the same."""
    monkeypatch.setattr(wal, "RELEASE_EVERY", 4096)
    data = wal.wal_bytes(1, [_upsert(i + 1, [0.25] * 64) for i in range(300)])
    for buf in (data, data[:-5]):
        calls: list[int] = []
        plain = wal.replay(buf, decode=decode)
        got = wal.replay(buf, decode=decode, release=calls.append)
        assert got.records.offsets == plain.records.offsets
        assert (got.terminator, got.offset, got.reason) == \
            (plain.terminator, plain.offset, plain.reason)
        assert wal.commit(got.records) == wal.commit(plain.records)
        assert calls == sorted(calls) and len(calls) >= len(buf) // 4096 - 1, calls
        assert calls[-1] <= len(buf) and calls[-1] > len(buf) - 2 * 4096 - 400
