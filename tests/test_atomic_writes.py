"""Rewrites that never lose a byte and never need the whole file in memory.

``runtime/atomic.py``: ``write_all`` loops until every byte is written (one ``write`` call
may take only part: at most ~2 GiB on Linux), ``AtomicFile`` writes a new file in pieces
through a temporary sibling. The pile repairs (``amputate``'s side file, ``reframe``,
``salvage``) used a single ``os.write`` of the whole output, built in memory from a copy
of the whole input: past 2 GiB their output would have been cut short (memory
that grows with the file; the standard: nothing is lost)."""

from __future__ import annotations

import os
import tracemalloc

import blake3
import pytest

from bytewright.runtime import atomic
from bytewright.runtime.pile import Pile, amputate, encode_blob, reframe, salvage


@pytest.fixture
def short_writes(monkeypatch):
    """Every write and pwrite takes at most 1,000 bytes, as the kernel may."""
    real_write, real_pwrite = os.write, os.pwrite
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, bytes(data[:1000])))
    monkeypatch.setattr(os, "pwrite",
                        lambda fd, data, at: real_pwrite(fd, bytes(data[:1000]), at))


def _pile(n: int, size: int = 700) -> bytes:
    return b"".join(encode_blob(i.to_bytes(4, "little") * (size // 4), 1_700_000_000_000 + i)
                    for i in range(n))


def test_write_all_writes_every_byte_through_short_writes(tmp_path, short_writes):
    data = os.urandom(10_007)
    for offset in (None, 0):
        path = tmp_path / f"w{offset}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            atomic.write_all(fd, memoryview(data), offset)
        finally:
            os.close(fd)
        assert path.read_bytes() == data


def test_atomic_file_appears_whole_or_not_at_all(tmp_path, short_writes):
    dest = tmp_path / "out"
    pieces = [os.urandom(n) for n in (10, 3_000, 1, 70_000)]
    with atomic.AtomicFile(dest, buffer=4096) as out:
        for p in pieces:
            out.write(p)
        assert not dest.exists()  # nothing at the name before commit
        out.commit()
    assert dest.read_bytes() == b"".join(pieces) and out.written == dest.stat().st_size
    other = tmp_path / "never"
    with pytest.raises(RuntimeError), atomic.AtomicFile(other) as out:
        out.write(b"half")
        raise RuntimeError("the rewrite failed")
    assert not other.exists() and list(tmp_path.iterdir()) == [dest]  # no temporary left


def test_pile_repairs_write_every_byte_through_short_writes(tmp_path, short_writes):
    good = _pile(30)
    src = tmp_path / "p.pile"
    src.write_bytes(good + good[:300])  # a torn tail of 300 bytes
    res = salvage(str(src), str(tmp_path / "s.pile"))
    assert (tmp_path / "s.pile").read_bytes() == good and res.kept == 30
    src.write_bytes(good)
    reframe(str(src), str(tmp_path / "r.pile"))
    # every blob comes through whole (reframe stamps blob timestamps afresh, so only the
    # length and the payloads are compared, not the bytes)
    out = Pile.open(str(tmp_path / "r.pile"), writable=False)
    try:
        assert (tmp_path / "r.pile").stat().st_size == len(good)
        for i in range(30):
            payload = i.to_bytes(4, "little") * 175
            assert out.get(blake3.blake3(payload).digest()) == payload
    finally:
        out.close()
    src.write_bytes(good + good[:300])
    cut = amputate(str(src))
    assert src.read_bytes() == good and open(cut.discarded, "rb").read() == good[:300]


def test_pile_rewrites_hold_a_record_at_a_time(tmp_path):
    """Traced memory of salvage and reframe on a 5.6 MB pile stays near the output
    buffer (1 MiB), where reading the source whole and building the output made it
    more than twice the file."""
    data = _pile(6_000)
    src = tmp_path / "big.pile"
    src.write_bytes(data)
    for name, run in (("salvage", salvage), ("reframe", reframe)):
        tracemalloc.start()
        try:
            run(str(src), str(tmp_path / f"{name}.pile"))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        out = (tmp_path / f"{name}.pile").read_bytes()
        # salvage copies byte for byte; reframe stamps blob timestamps afresh
        assert out == data if name == "salvage" else len(out) == len(data)
        assert peak < len(data) / 3, (name, peak, len(data))
