"""``runtime.mapped.iter_mapped``: a large file's records through a memory map whose
walked pages are released as the walk goes (iterate in bounded memory)."""

from __future__ import annotations

import os

from bytewright.generated import htt as h
from bytewright.generated import ze as z
from bytewright.runtime import mapped

P = {"semantic_dims": 2, "tail_layout": 0}


def _entries(n: int) -> list:
    return [h.WalEntry(i, h.WalOp.INSERT, f"/k/{i}", h.InsertBody(
        bytes([i % 251]) * 300, [h.MetaPair("a", str(i))], h.TailFull([i, -i])))
        for i in range(1, n + 1)]


def test_records_equal_the_in_memory_decode_and_pages_are_released(tmp_path, monkeypatch):
    entries = _entries(2000)
    data = h.encode_many_wal_entry(entries, **P)
    path = tmp_path / "wal.bin"
    path.write_bytes(b"\0" * 8 + data)
    calls: list[int] = []
    real = mapped.releaser

    def spy(mm):
        rel = real(mm)
        return None if rel is None else (lambda upto: (calls.append(upto), rel(upto)))

    monkeypatch.setattr(mapped, "releaser", spy)
    got = list(mapped.iter_mapped(str(path), h.iter_wal_entry, 8, release_every=64 << 10,
                                  **P))
    assert [v for v, _ in got] == entries == h.decode_many_wal_entry(data, **P)
    assert got[-1][1] == len(data) + 8
    # released in steps through the walk (only whole pages before the walked offset)
    assert len(calls) >= len(data) // (64 << 10) - 1 and calls == sorted(calls)
    assert all(c <= len(data) + 8 for c in calls)


def test_an_error_names_the_record_and_the_map_is_closed(tmp_path):
    data = bytearray(h.encode_many_wal_entry(_entries(5), **P))
    data[-1] ^= 1  # the last entry's CRC
    path = tmp_path / "bad.bin"
    path.write_bytes(bytes(data))
    seen = []
    try:
        for v, _ in mapped.iter_mapped(str(path), h.iter_wal_entry, **P):
            seen.append(v)
    except h.DecodeError as exc:
        assert exc.path.startswith("wal_entry[4]")
    else:
        raise AssertionError("the bad CRC was not reported")
    assert len(seen) == 4


def test_empty_file_and_numpy_views_outliving_the_walk(tmp_path):
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    assert list(mapped.iter_mapped(str(empty), h.iter_wal_entry, **P)) == []
    # a record holding zero-copy numpy views of the map keeps working after the walk
    blocks = [z.GraphNodeBlock(bytes(range(64)), z.Bit4Factors(1.0, 2.0, 3.0), 3,
                               z.GraphBlockFlags.from_int(1), list(range(44)))
              for _ in range(3)]
    path = tmp_path / "nodes.bin"
    path.write_bytes(z.encode_many_graph_node_block(blocks, code_bytes=64, max_degree=44))
    got = [v for v, _ in mapped.iter_mapped(str(path), z.iter_graph_node_block,
                                            code_bytes=64, max_degree=44)]
    assert got == blocks


def test_mapped_file_maps_a_file_and_reads_a_pipe(tmp_path):
    """``mapped_file``: a regular file is a view of a map (no copy) with a working
    ``release``; an empty file, and a pipe (which cannot be mapped), give their bytes."""
    import threading

    from bytewright.runtime.mapped import mapped_file

    path = tmp_path / "f.bin"
    payload = bytes(range(256)) * 64
    path.write_bytes(payload)
    with mapped_file(path) as (buf, release):
        assert isinstance(buf, memoryview) and bytes(buf) == payload
        release(8192)  # pages before 8 KiB dropped: reading them refaults the same bytes
        assert bytes(buf[:8192]) == payload[:8192]
    empty = tmp_path / "e.bin"
    empty.write_bytes(b"")
    with mapped_file(empty) as (buf, release):
        assert buf == b""
        release(0)
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(payload[:1000]))
    writer.start()
    with mapped_file(fifo) as (buf, _):
        assert bytes(buf) == payload[:1000]
    writer.join()
