"""The Avro example, on object container files written by fastavro.

fastavro (an independent Avro implementation) writes the files in the test, with the
codecs ``null`` and ``deflate`` and a small sync interval so that a file holds several
blocks. fastavro's own readers give what the generated codec is held to: the metadata,
the sync marker, every block's object count and byte size, and every record.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import fastavro
import pytest

from bytewright.generator import project
from bytewright.runtime.errors import ConstraintError, DecodeError, EncodeError, UnsupportedError

ROOT = Path(__file__).resolve().parent.parent

# The project's generated module, loaded as `bytewright check` loads it (plug-ins included).
avro = project.load(ROOT / "bytewright.toml").load_module("avro")

SCHEMA = fastavro.parse_schema({
    "type": "record", "name": "Reading", "namespace": "example",
    "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"},
               {"name": "payload", "type": "bytes"}]})

# Longs on both sides of zero and at the ends of the range (zigzag varints of 1..10
# bytes), names in and out of ASCII, payloads from empty to a few hundred bytes.
RECORDS = [{"id": i * (-1) ** i * 7919 ** (i % 5), "name": f"reading-{i}" + "é" * (i % 3),
            "payload": bytes(range(i % 256)) * (1 + i % 3)} for i in range(60)]
RECORDS += [{"id": -(2 ** 63), "name": "", "payload": b""},
            {"id": 2 ** 63 - 1, "name": "最後", "payload": b"\x00" * 300}]


def write(codec: str, records=RECORDS, **kw) -> bytes:
    out = io.BytesIO()
    fastavro.writer(out, SCHEMA, records, codec=codec, sync_interval=400,
                    metadata={"example.owner": "bytewright"}, **kw)
    return out.getvalue()


@pytest.fixture(scope="module", params=["null", "deflate"])
def made(request) -> tuple[str, bytes]:
    return request.param, write(request.param)


def decoders():
    yield "fast", lambda data: avro.decode_avro_file(data)[0]
    yield "construct", avro.construct_decode_avro_file
    yield "compiled", lambda data: avro.construct_decode_avro_file(data, compiled=True)


def as_dicts(value) -> list[dict]:
    return [{"id": r.id, "name": r.name, "payload": r.payload}
            for block in value.blocks for r in block.objects]


@pytest.mark.parametrize("path", ["fast", "construct", "compiled"])
def test_decodes_what_fastavro_wrote(made, path):
    codec, data = made
    value = dict(decoders())[path](data)
    header = fastavro.reader(io.BytesIO(data))._header
    assert {m.key: m.value for m in value.meta} == header["meta"]
    assert value.sync == header["sync"]
    # The codec the blocks were read with is the one the metadata names.
    assert dict((m.key, m.value) for m in value.meta)["avro.codec"] == codec.encode()
    blocks = list(fastavro.block_reader(io.BytesIO(data)))
    assert len(blocks) > 3  # the small sync interval gives several blocks
    assert [len(b.objects) for b in value.blocks] == [b.num_records for b in blocks]
    assert as_dicts(value) == RECORDS == list(fastavro.reader(io.BytesIO(data)))


def test_block_sizes_and_sync_markers_by_hand(made):
    """Walk the file with a few lines of its own (independent of the codec): every block's
    stored size is the size of its bytes after compression, and each ends in the sync."""
    codec, data = made
    value, end = avro.decode_avro_file(data)
    assert end == len(data)
    pos = data.index(value.sync) + 16  # the header's marker ends the header

    def long_at(p: int) -> tuple[int, int]:
        n = shift = 0
        while True:
            b = data[p]
            n |= (b & 0x7F) << shift
            p, shift = p + 1, shift + 7
            if b < 0x80:
                return (n >> 1) ^ -(n & 1), p

    for block in value.blocks:
        count, pos = long_at(pos)
        size, pos = long_at(pos)
        stored = data[pos:pos + size]
        plain = stored if codec == "null" else zlib.decompressobj(-15).decompress(stored)
        assert count == len(block.objects)
        # The objects re-serialized by fastavro are the block's plain bytes.
        out = io.BytesIO()
        for r in block.objects:
            fastavro.schemaless_writer(out, SCHEMA, {"id": r.id, "name": r.name,
                                                     "payload": r.payload})
        assert out.getvalue() == plain
        assert data[pos + size:pos + size + 16] == value.sync
        pos += size + 16
    assert pos == len(data)


def test_all_paths_re_encode_byte_identical(made):
    _, data = made
    value, _ = avro.decode_avro_file(data)
    assert avro.construct_decode_avro_file(data) == value
    assert avro.construct_decode_avro_file(data, compiled=True) == value
    assert avro.encode_avro_file(value) == data
    assert avro.construct_encode_avro_file(value) == data
    assert avro.construct_encode_avro_file(value, compiled=True) == data


@pytest.mark.parametrize("encode", ["fast", "construct", "compiled"])
def test_fastavro_reads_what_the_encoders_write(made, encode):
    """A new block (sizes, compression and sync derived by the encoder) is read by fastavro."""
    _, data = made
    value, _ = avro.decode_avro_file(data)
    extra = [avro.Reading(id=-5, name="added", payload=b"\xff" * 1000),
             avro.Reading(id=12, name="again", payload=b"")]
    value.blocks.append(avro.DataBlock(objects=extra))
    out = {"fast": avro.encode_avro_file,
           "construct": avro.construct_encode_avro_file,
           "compiled": lambda v: avro.construct_encode_avro_file(v, compiled=True)}[encode](value)
    assert out.startswith(data)
    assert list(fastavro.reader(io.BytesIO(out))) == RECORDS + [
        {"id": -5, "name": "added", "payload": b"\xff" * 1000},
        {"id": 12, "name": "again", "payload": b""}]


def test_a_missing_codec_key_means_null():
    """The specification's default: no avro.codec in the metadata reads as 'null'."""
    value, _ = avro.decode_avro_file(write("deflate"))
    value.meta = [m for m in value.meta if m.key != "avro.codec"]
    out = avro.encode_avro_file(value)
    assert out == avro.construct_encode_avro_file(value)
    assert list(fastavro.reader(io.BytesIO(out))) == RECORDS
    assert avro.decode_avro_file(out)[0] == value


def errors_of(data: bytes) -> list[tuple[type, str, int]]:
    out = []
    for _, decode in decoders():
        with pytest.raises(DecodeError) as info:
            decode(data)
        out.append((type(info.value), info.value.path, info.value.offset))
    return out


def test_a_changed_block_sync_marker_is_refused_where_it_is(made):
    _, data = made
    value, _ = avro.decode_avro_file(data)
    second = data.index(value.sync, data.index(value.sync) + 16)  # end of block 0
    third = data.index(value.sync, second + 16)  # end of block 1
    bad = bytearray(data)
    bad[third + 3] ^= 0x40
    errs = errors_of(bytes(bad))
    assert errs[0][0] is ConstraintError and errs[0][2] == third
    assert "blocks[1].sync" in errs[0][1]
    assert errs == [errs[0]] * 3


def test_an_unknown_codec_is_unsupported():
    value, _ = avro.decode_avro_file(write("null"))
    for m in value.meta:
        if m.key == "avro.codec":
            m.value = b"snappy"
    with pytest.raises(EncodeError):
        avro.encode_avro_file(value)  # no codec to write it with
    with pytest.raises(EncodeError):
        avro.construct_encode_avro_file(value)
    # The same file with its codec renamed (the metadata's lengths follow the new name).
    data = write("null").replace(b"\x08null", b"\x0csnappy", 1)
    errs = errors_of(data)
    assert errs[0][0] is UnsupportedError and "blocks[0]" in errs[0][1]
    assert errs == [errs[0]] * 3


def test_a_damaged_deflate_block_is_a_decode_error():
    data = write("deflate")
    value, _ = avro.decode_avro_file(data)
    start = data.index(value.sync) + 16
    bad = bytearray(data)
    bad[start + 3] = 0xFF  # inside block 0's deflate stream: an invalid block type
    errs = errors_of(bytes(bad))
    assert errs == [errs[0]] * 3


def bytewright(*args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("bytewright") or str(Path(sys.executable).with_name("bytewright"))
    return subprocess.run([exe, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_check_is_green():
    r = bytewright("check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert " 0 failed" in r.stdout


def test_inspect_detects_a_real_file(tmp_path):
    path = tmp_path / "readings.avro"
    path.write_bytes(write("deflate", RECORDS[:3]))
    r = bytewright("inspect", str(path))
    assert r.returncode == 0, r.stderr
    assert "avro.avro_file (detected" in r.stdout and "reading-1" in r.stdout
