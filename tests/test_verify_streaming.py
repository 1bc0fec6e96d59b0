"""``bytewright verify`` walks a composite top-level record (htt_file, ze wal_file) item by
item instead of decoding it whole: same results and same errors, memory not growing with
the number of entries."""

from __future__ import annotations

import pytest

from bytewright.cli import verify
from bytewright.cli.inspect_file import _families
from bytewright.generator import project as project_mod
from bytewright.review import checks
from bytewright.review import verify as verify_core
from bytewright.runtime.errors import DecodeError

from .conftest import spy_releaser

FX = checks.FIXTURE_DIR


@pytest.fixture(scope="module")
def table():
    return verify.detection_table(_families(project_mod.resolve(None)))


@pytest.fixture(scope="module")
def proj():
    return project_mod.resolve(None)


def _files():
    out = []
    for fam in ("htt", "ze"):
        for p in sorted((FX / fam).glob("*.hex")):
            out.append(p)
    return out


def _row(table, data):
    return verify.detect(data[:verify.HEAD], table)


def test_plans_exist_for_the_composite_records(table):
    plans = {(r[2], r[3]): r[7] for r in table}
    assert plans[("htt", "htt_file")] is not None
    assert plans[("ze", "wal_file")] is not None
    # a record with its own checks (checksums, sizes) is never walked in parts
    assert plans[("htt", "sidecar_segment")] is None


def test_streamed_walk_agrees_with_the_whole_decode_on_every_fixture(table, proj):
    """For every HTT and ZE fixture that has a plan: the walk itself (not its fallback)
    succeeds exactly when the whole decode does, and ends at the same offset."""
    walked = 0
    for path in _files():
        data = checks.parse_fixture(path).data
        row = _row(table, data)
        if row is None or row[7] is None:
            continue
        mod = proj.load_module(row[2])
        dec = getattr(mod, f"decode_{row[3]}")
        try:
            _, whole_end = dec(data, 0, **row[4])
        except DecodeError:
            whole_end = None
        try:
            walk_end = verify_core._stream(mod, row[7], data, 0, len(data), row[4])
        except DecodeError:
            walk_end = None
        assert walk_end == whole_end, path.name
        walked += whole_end is not None
    assert walked >= 5


@pytest.mark.parametrize("cut", [1, 5, 17])
def test_a_damaged_file_reports_the_whole_decodes_error(table, proj, cut):
    data = checks.parse_fixture(FX / "htt" / "wal_all_ops_v2.hex").data
    bad = data[:-cut]
    row = _row(table, bad)
    mod = proj.load_module("htt")
    with pytest.raises(DecodeError) as whole:
        mod.decode_htt_file(bad)
    with pytest.raises(DecodeError):
        verify.decode_buffer(memoryview(bad), mod, row[3], row[4], row[5], row[6], row[7])
    try:
        verify.decode_buffer(memoryview(bad), mod, row[3], row[4], row[5], row[6], row[7])
    except DecodeError as exc:
        assert (exc.offset, exc.path, exc.message) == (whole.value.offset, whole.value.path,
                                                       whole.value.message)


def test_walk_memory_does_not_grow_with_the_entries(table, proj, tmp_path):
    """Traced peak of the walk over 5,000 WAL entries is a small fraction of the whole
    decode's (which holds every entry); the result is the same."""
    import tracemalloc

    from bytewright.bench.measure import _build_htt

    path = tmp_path / "m.htt"
    _build_htt(str(path), 5_000)
    data = path.read_bytes()
    row = _row(table, data)
    mod = proj.load_module("htt")

    def peak(fn):
        tracemalloc.start()
        try:
            out = fn()
            return out, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    whole, whole_peak = peak(lambda: verify.decode_buffer(memoryview(data), mod, row[3],
                                                          row[4], plan=None))
    walked, walk_peak = peak(lambda: verify.decode_buffer(memoryview(data), mod, row[3],
                                                          row[4], plan=row[7]))
    assert walked == whole == (1, 0)
    assert walk_peak * 10 < whole_peak, (walk_peak, whole_peak)


def test_walked_pages_are_released_and_the_result_is_unchanged(table, tmp_path, monkeypatch):
    """A mapped file's walked pages are given back (madvise) every RELEASE_EVERY bytes;
    the verdict and counts are those of the whole decode."""
    from bytewright.bench.measure import _build_htt

    path = tmp_path / "r.htt"
    _build_htt(str(path), 3_000)
    calls = spy_releaser(monkeypatch, verify_core, "_releaser")
    monkeypatch.setattr(verify_core, "RELEASE_EVERY", 8192)
    (r,) = verify.verify_many([str(path)], table)
    assert r["ok"] and r["records"] == 1 and r["uncovered"] == 0, r
    assert len(calls) > 5 and calls == sorted(calls) and calls[-1] <= path.stat().st_size


def test_a_file_that_is_a_run_of_records_has_its_pages_released(table, tmp_path, monkeypatch):
    """A pile is a run of top-level records (``repeat``), not one composite record: its
    walked pages are released as it goes too (they were kept, so ``verify`` of a 256 MB
    pile peaked at 367 MB; now 134 MB), with the same verdict and count."""
    from bytewright.runtime.pile import encode_blob

    path = tmp_path / "r.pile"
    n = 400
    path.write_bytes(b"".join(encode_blob(i.to_bytes(8, "little") * 64, 1_700_000_000_000 + i)
                              for i in range(n)))
    size = path.stat().st_size
    calls = spy_releaser(monkeypatch, verify_core, "_releaser")
    monkeypatch.setattr(verify_core, "RELEASE_EVERY", 8192)
    (r,) = verify.verify_many([str(path)], table)
    assert r["ok"] and r["family"] == "pile" and r["records"] == n and r["uncovered"] == 0, r
    assert calls == sorted(calls) and calls[-1] <= size, calls
    # every 8 KiB walked: the released prefix reaches within one step of the end
    assert len(calls) >= size // 8192 - 1 and calls[-1] > size - 2 * 8192, (len(calls), size)
