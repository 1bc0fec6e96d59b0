"""The LevelDB log example, on a real write-ahead log written by LevelDB itself.

plyvel (the Python binding of the LevelDB C++ library) writes the log in a temporary
directory; the database is closed before its memtable is compacted, so every write is
still in ``*.log``. The test knows what it wrote, walks the blocks with its own few lines
(independent of bytewright) to find each fragment, and holds the generated codec to both.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from pathlib import Path

import google_crc32c
import plyvel
import pytest

from bytewright.generator import project
from bytewright.runtime.errors import ChecksumError, DecodeError

ROOT = Path(__file__).resolve().parent.parent
BLOCK = 32768
HEADER = 7  # crc u32, length u16, kind u8

# The project's generated module, loaded as `bytewright check` loads it (plug-ins included).
ldb = project.load(ROOT / "bytewright.toml").load_module("leveldb_log")

# (batch of operations) in the order they were written; None as value = delete.
# Sizes are chosen so that LevelDB's writer meets each of its cases: the first record
# leaves 3 bytes in block 0 (a zero-padded tail), the second leaves exactly one header's
# worth in block 1 (an empty FIRST fragment), the third spans three blocks
# (FIRST, MIDDLE, MIDDLE, LAST).
BATCHES: list[list[tuple[bytes, bytes | None]]] = [
    [(b"p", b"v" * 32740)],
    [(b"q", b"w" * 32736)],
    [(b"big", bytes(range(256)) * 280)],
    [(b"k1", b"v1"), (b"p", None), (b"k2", b"y" * 200)],
    [(b"zz", None)],
    [(b"", b"")],
]


@pytest.fixture(scope="module")
def log_bytes(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("leveldb")
    db = plyvel.DB(str(path), create_if_missing=True)
    for batch in BATCHES:
        with db.write_batch() as wb:
            for key, value in batch:
                if value is None:
                    wb.delete(key)
                else:
                    wb.put(key, value)
    db.close()  # no compaction of so small a memtable: the log stays
    (log,) = path.glob("*.log")
    return log.read_bytes()


def fragments(data: bytes) -> list[tuple[int, int, int]]:
    """(offset, kind, length) of every fragment, by the log_format.md rules."""
    out, pos = [], 0
    while pos < len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:
            assert data[pos:pos + left] == bytes(left)  # the writer zero-fills the tail
            pos += left
            continue
        _, length, kind = struct.unpack_from("<IHB", data, pos)
        out.append((pos, kind, length))
        pos += HEADER + length
    assert pos == len(data)
    return out


def masked_crc32c(data: bytes) -> int:
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def ops_of(batch) -> list[tuple[bytes, bytes | None]]:
    out = []
    for op in batch.ops:
        if op.tag == ldb.ValueType.VALUE:
            out.append((op.body.key, op.body.value))
        else:
            assert op.tag == ldb.ValueType.DELETION
            out.append((op.body.key, None))
    return out


def decoders():
    yield "fast", lambda data: ldb.decode_log_file(data)[0]
    yield "construct", ldb.construct_decode_log_file
    yield "compiled", lambda data: ldb.construct_decode_log_file(data, compiled=True)


def test_the_real_log_meets_every_writer_case(log_bytes):
    frags = fragments(log_bytes)
    kinds = [kind for _, kind, _ in frags]
    assert kinds[:7] == [1, 1, 2, 3, 3, 4, 1]  # FULL, FULL, FIRST, MIDDLE, MIDDLE, LAST, FULL
    assert frags[2][2] == 0 and frags[2][0] % BLOCK == BLOCK - HEADER  # empty FIRST
    assert frags[0][2] + HEADER == BLOCK - 3  # 3 zero bytes end block 0
    # Every stored CRC is LevelDB's masked CRC-32C of the kind byte and the piece.
    for pos, kind, length in frags:
        stored = struct.unpack_from("<I", log_bytes, pos)[0]
        piece = log_bytes[pos + HEADER:pos + HEADER + length]
        assert stored == masked_crc32c(bytes([kind]) + piece)


@pytest.mark.parametrize("path", ["fast", "construct", "compiled"])
def test_decodes_what_plyvel_wrote(log_bytes, path):
    decode = dict(decoders())[path]
    value = decode(log_bytes)
    assert [ops_of(b) for b in value.batches] == BATCHES
    # Sequence numbers: each batch starts after the operations of the ones before it.
    seq = 1
    for batch, ops in zip(value.batches, BATCHES, strict=True):
        assert batch.sequence == seq
        seq += len(ops)


def test_all_paths_agree_and_re_encode_byte_identical(log_bytes):
    value, end = ldb.decode_log_file(log_bytes)
    assert end == len(log_bytes)
    assert ldb.construct_decode_log_file(log_bytes) == value
    assert ldb.construct_decode_log_file(log_bytes, compiled=True) == value
    assert ldb.encode_log_file(value) == log_bytes
    assert ldb.construct_encode_log_file(value) == log_bytes
    assert ldb.construct_encode_log_file(value, compiled=True) == log_bytes


@pytest.mark.parametrize("encode", ["fast", "construct"])
def test_leveldb_reads_what_the_encoders_write(log_bytes, tmp_path, encode):
    """Add a batch to the decoded log, encode it (fragments, padding and CRCs are the
    encoder's) and hand it to LevelDB as the log of a fresh database: recovery replays it
    with paranoid checks, so LevelDB itself checks every CRC and the block layout."""
    value, _ = ldb.decode_log_file(log_bytes)
    V = ldb.ValueType
    extra = ldb.WriteBatch(sequence=1 + sum(len(b) for b in BATCHES), ops=[
        ldb.BatchOp(tag=V.VALUE, body=ldb.PutOp(key=b"new", value=b"n" * 40000)),
        ldb.BatchOp(tag=V.DELETION, body=ldb.DeleteOp(key=b"q")),
    ])
    batches = list(value.batches) + [extra]
    out = (ldb.encode_log_file if encode == "fast" else ldb.construct_encode_log_file)(
        ldb.LogFile(batches=batches))
    assert out.startswith(log_bytes)  # the old records are cut exactly as LevelDB cut them
    db = plyvel.DB(str(tmp_path), create_if_missing=True)
    db.close()
    (log,) = tmp_path.glob("*.log")
    log.write_bytes(out)
    db = plyvel.DB(str(tmp_path), paranoid_checks=True)
    try:
        assert dict(db) == {b"": b"", b"big": bytes(range(256)) * 280, b"k1": b"v1",
                            b"k2": b"y" * 200, b"new": b"n" * 40000}
    finally:
        db.close()


@pytest.mark.parametrize("which", range(7))
def test_a_flipped_piece_byte_fails_that_fragments_crc(log_bytes, which):
    """Every fragment kind (FULL, an empty FIRST, MIDDLE, LAST): a flipped covered byte
    is a ChecksumError at that fragment's CRC, at its offset in the physical file."""
    pos, kind, length = fragments(log_bytes)[which]
    bad = bytearray(log_bytes)
    if length:
        bad[pos + HEADER + length // 2] ^= 0x20
    else:  # the kind byte is covered too: FIRST becomes MIDDLE, still a known kind
        bad[pos + 6] ^= 0x01
    for name, decode in decoders():
        with pytest.raises(ChecksumError) as info:
            decode(bytes(bad))
        assert info.value.offset == pos, name
        assert info.value.path.endswith(f"fragments[{which}].crc"), (name, info.value.path)


def test_an_error_inside_a_reassembled_record_names_its_physical_offset(log_bytes):
    """The third batch starts in an empty FIRST fragment and goes on in a MIDDLE one: its
    operation tag (logical offset 12) sits 12 bytes into that MIDDLE piece. Break the tag
    and re-seal the fragment's CRC: the error is the record's, at the byte in the file."""
    pos, kind, length = fragments(log_bytes)[3]
    assert kind == 3
    tag_at = pos + HEADER + 12
    bad = bytearray(log_bytes)
    assert bad[tag_at] == 1  # a put
    bad[tag_at] = 9  # no such operation
    bad[pos:pos + 4] = struct.pack("<I", masked_crc32c(bytes(bad[pos + 6:pos + HEADER + length])))
    for name, decode in decoders():
        with pytest.raises(DecodeError) as info:
            decode(bytes(bad))
        assert not isinstance(info.value, ChecksumError), name
        assert info.value.offset == tag_at, name
        assert "batches[2].ops[0].tag" in info.value.path, (name, info.value.path)


def test_a_non_zero_block_tail_is_refused(log_bytes):
    bad = bytearray(log_bytes)
    bad[BLOCK - 2] = 1
    for _, decode in decoders():
        with pytest.raises(DecodeError) as info:
            decode(bytes(bad))
        assert info.value.offset == BLOCK - 2


def test_a_cut_log_is_refused(log_bytes):
    cut = log_bytes[:2 * BLOCK + 100]  # inside the spanning record
    for _, decode in decoders():
        with pytest.raises(DecodeError):
            decode(cut)


def bytewright(*args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("bytewright") or str(Path(sys.executable).with_name("bytewright"))
    return subprocess.run([exe, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_check_is_green():
    r = bytewright("check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert " 0 failed" in r.stdout


def fixture_bytes(name: str) -> bytes:
    text = (ROOT / "fixtures" / "leveldb_log" / f"{name}.hex").read_text()
    return bytes.fromhex("".join(line for line in text.splitlines()
                                 if not line.startswith("#")))


def test_the_fixtures_are_what_leveldb_writes_and_reads(tmp_path):
    """The committed fixtures, made by the encoder from cases/, checked by independent
    code: the lone fragment's masked CRC by hand, the log by LevelDB's recovery."""
    frag = fixture_bytes("fragment_full")
    assert frag == struct.pack("<IHB", masked_crc32c(b"\x01" + b"\x01" * 13), 13, 1) \
        + b"\x01" * 13
    log = fixture_bytes("log_two_blocks")
    assert [kind for _, kind, _ in fragments(log)] == [1, 2, 4, 1]  # FULL, FIRST, LAST, FULL
    db = plyvel.DB(str(tmp_path), create_if_missing=True)
    db.close()
    (path,) = tmp_path.glob("*.log")
    path.write_bytes(log)
    db = plyvel.DB(str(tmp_path), paranoid_checks=True)
    try:
        assert dict(db) == {b"big": bytes(range(250)) * 132}
    finally:
        db.close()
