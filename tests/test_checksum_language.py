"""Checksum constructs of the schema language, on both codec paths (fast; Construct
interpreted and compiled), decode and encode, on small schemas generated in the test:
registered names, plug-in checksums with parameters, seeds and chains across the records
of a repeat, truncated storage, width checks, and coverage of listed fields."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from bytewright.generator import pipeline
from bytewright.runtime import registry
from bytewright.runtime.errors import ChecksumError, DecodeError

# A SQLite-WAL-style checksum as a user's plug-in: 32-bit words in a byte order chosen by
# the schema, a 64-bit state (s0, s1) seeded from an earlier value and chained.
PLUGIN = '''
import struct

M = 0xFFFFFFFF


def wal64(data, seed=None, order="big"):
    seed = seed or 0
    s0, s1 = seed >> 32, seed & M
    data = bytes(data)
    if len(data) % 8:
        raise ValueError("wal64 covers a multiple of 8 bytes")
    fmt = (">" if order == "big" else "<") + "II"
    for i in range(0, len(data), 8):
        x0, x1 = struct.unpack_from(fmt, data, i)
        s0 = (s0 + x0 + s1) & M
        s1 = (s1 + x1 + s0) & M
    return (s0 << 32) | s1


CALLS = []


def register(reg):
    CALLS.append(reg)
    reg.add_checksum("wal64", bits=64, func=wal64, seeded=True, params=("order",),
                     doc="SQLite WAL checksum")
'''

BIG, LITTLE = 0x377F0683, 0x377F0682

WAL = """
bytewright: 1
family: walx
plugins: ["{plugin}:register"]
records:
  frame:
    params:
      prev: {{type: int, default: 0}}
      order: {{type: str, default: big}}
    fields:
      - {{name: page, type: u32be}}
      - {{name: commit, type: u32be}}
      - {{name: data, type: bytes, size: 8}}
      - name: check
        type: u64be
        checksum: {{algorithm: wal64, covers: [page, commit, data], seed: prev,
                   params: {{order: order}}}}
  wal:
    fields:
      - {{name: magic, type: u32be}}
      - {{name: salt, type: u32be}}
      - name: hdr_check
        type: u64be
        checksum: {{algorithm: wal64, covers: [magic, salt],
                   params: {{order: "'big' if magic == {big} else 'little'"}}}}
      - name: frames
        type: frame
        repeat: eos
        args: {{order: "'big' if magic == {big} else 'little'"}}
        chain: {{param: prev, from: check, first: hdr_check}}
"""


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest):
    """A plug-in module importable as ``module:register`` (unique per test)."""
    name = "bw_plugin_" + request.node.name.replace("[", "_").replace("]", "").replace("-", "_")
    (tmp_path / f"{name}.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def wal64(data: bytes, seed: int, order: str) -> int:
    s0, s1 = seed >> 32, seed & 0xFFFFFFFF
    fmt = (">" if order == "big" else "<") + "II"
    for i in range(0, len(data), 8):
        x0, x1 = struct.unpack_from(fmt, data, i)
        s0 = (s0 + x0 + s1) & 0xFFFFFFFF
        s1 = (s1 + x1 + s0) & 0xFFFFFFFF
    return (s0 << 32) | s1


def wal_bytes(magic: int, salt: int, frames: list[tuple[int, int, bytes]]) -> bytes:
    """The expected bytes, computed independently of the generator."""
    order = "big" if magic == BIG else "little"
    out = struct.pack(">II", magic, salt)
    prev = wal64(out, 0, order)
    out += struct.pack(">Q", prev)
    for page, commit, data in frames:
        body = struct.pack(">II", page, commit) + data
        prev = wal64(body, prev, order)
        out += body + struct.pack(">Q", prev)
    return out


def both_paths(m, record: str, data: bytes, **params):
    """Decode on every path, require agreement, re-encode on both encoders."""
    fast, end = getattr(m, f"decode_{record}")(data, **params)
    assert end == len(data)
    assert getattr(m, f"construct_decode_{record}")(data, **params) == fast
    assert getattr(m, f"construct_decode_{record}")(data, compiled=True, **params) == fast
    assert getattr(m, f"encode_{record}")(fast, **params) == data
    assert getattr(m, f"construct_encode_{record}")(fast, **params) == data
    return fast


def every_path_rejects(m, record: str, data: bytes, exc=DecodeError, **params):
    for call in (lambda: getattr(m, f"decode_{record}")(data, **params),
                 lambda: getattr(m, f"construct_decode_{record}")(data, **params),
                 lambda: getattr(m, f"construct_decode_{record}")(data, compiled=True,
                                                                    **params)):
        with pytest.raises(exc):
            call()


@pytest.mark.parametrize("magic", [BIG, LITTLE])
def test_plugin_checksum_chained_across_records(schema_module, plugin, magic):
    m = schema_module(WAL.format(plugin=plugin, big=BIG))
    frames = [(1, 0, b"abcdefgh"), (2, 0, b"ijklmnop"), (3, 3, bytes(8))]
    data = wal_bytes(magic, 0xDEADBEEF, frames)
    value = both_paths(m, "wal", data)
    assert [(f.page, f.commit, f.data) for f in value.frames] == frames
    # Built from the object model alone, both encoders compute every chained value.
    assert m.encode_wal(m.Wal(magic, 0xDEADBEEF, value.frames)) == data
    # The word order follows the magic: the other order gives other checksums.
    other = wal_bytes(LITTLE if magic == BIG else BIG, 0xDEADBEEF, frames)
    assert other[16:] != data[16:]


def test_chain_break_is_a_checksum_error_on_every_path(schema_module, plugin):
    m = schema_module(WAL.format(plugin=plugin, big=BIG))
    frames = [(1, 0, b"abcdefgh"), (2, 0, b"ijklmnop"), (3, 3, b"qrstuvwx")]
    data = bytearray(wal_bytes(BIG, 7, frames))
    # Each frame's check is valid on its own bytes only given the previous check: corrupt
    # the second frame's data and the third frame (intact bytes) must fail too once the
    # second check is recomputed to match -- proving the seed is the previous stored value.
    good = bytes(data)
    second = 16 + 24
    data[second + 8] ^= 0x01
    every_path_rejects(m, "wal", bytes(data), ChecksumError)
    body = bytes(data[second:second + 16])
    first_check = struct.unpack_from(">Q", good, 16 + 16)[0]
    data[second + 16:second + 24] = struct.pack(">Q", wal64(body, first_check, "big"))
    with pytest.raises(ChecksumError) as info:
        m.decode_wal(bytes(data))
    assert info.value.path.startswith("wal.frames[2]")
    with pytest.raises(DecodeError):
        m.construct_decode_wal(bytes(data))


def test_plugin_loads_once_and_generated_module_loads_it(schema_module, plugin):
    import importlib

    m = schema_module(WAL.format(plugin=plugin, big=BIG))
    mod = importlib.import_module(plugin)
    assert f"{plugin}:register" in registry.REGISTRY.plugins
    registry.load_plugin(f"{plugin}:register")  # idempotent
    assert len(mod.CALLS) == 1
    assert f'_registry.load_plugin("{plugin}:register")' in Path(m.__file__).read_text()


def test_checksum_seeded_from_an_earlier_field(schema_module):
    m = schema_module("""
bytewright: 1
family: seeded
records:
  rec:
    fields:
      - {name: salt, type: u32}
      - {name: body, type: bytes, length: u8}
      - {name: crc, type: u32, checksum: {algorithm: crc32, covers: [body], seed: salt}}
""")
    body = b"payload"
    field = bytes([len(body)]) + body  # a field's bytes include its length prefix
    data = struct.pack("<I", 0x1234) + field + struct.pack("<I", zlib.crc32(field, 0x1234))
    value = both_paths(m, "rec", data)
    assert value.body == body
    plain = struct.pack("<I", 0x1234) + field + struct.pack("<I", zlib.crc32(field))
    every_path_rejects(m, "rec", plain, ChecksumError)


TRUNC = """
bytewright: 1
family: trunc
records:
  rec:
    fields:
      - {name: a, type: u16}
      - {name: b, type: bytes, length: u8}
      - {name: skip, type: u8}
      - {name: check, type: u16, checksum: {algorithm: crc32, covers: [a, b], store: {bits: 16}}}
"""


def test_truncated_crc_and_listed_fields(schema_module):
    m = schema_module(TRUNC)
    covered = struct.pack("<HB", 7, 3) + b"xyz"
    data = covered + b"\x55" + struct.pack("<H", zlib.crc32(covered) & 0xFFFF)
    value = both_paths(m, "rec", data)
    assert (value.a, value.b, value.skip) == (7, b"xyz", 0x55)
    # 'skip' is not covered: changing it keeps the checksum valid on every path.
    both_paths(m, "rec", data[:6] + b"\xaa" + data[7:])
    bad = data[:-2] + struct.pack("<H", (zlib.crc32(covered) >> 16) & 0xFFFF)
    every_path_rejects(m, "rec", bad, ChecksumError)


def problems(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return [str(p) for p in pipeline.run([path]).problems]


def test_width_checked_against_the_algorithm(tmp_path):
    narrow = TRUNC.replace(", store: {bits: 16}", "")
    found = problems(tmp_path, narrow)
    assert any("u16 is narrower than crc32's 32 bits" in p and "store" in p for p in found)
    assert problems(tmp_path, TRUNC) == []
    too_many = TRUNC.replace("bits: 16", "bits: 40")
    assert any("store.bits must be 1..32" in p for p in problems(tmp_path, too_many))
    digest = TRUNC.replace("algorithm: crc32", "algorithm: blake3").replace("bits: 16", "bits: 8")
    assert any("bytes of size 1" in p for p in problems(tmp_path, digest))


def test_unknown_algorithm_and_bad_parameters_are_schema_errors(tmp_path):
    found = problems(tmp_path, TRUNC.replace("algorithm: crc32", "algorithm: crc99"))
    assert any("unknown checksum algorithm 'crc99'" in p for p in found)
    found = problems(tmp_path, TRUNC.replace("store: {bits: 16}", "store: {bits: 16}, "
                                                                 "params: {order: 1}"))
    assert any("crc32 has no parameter 'order'" in p for p in found)
    found = problems(tmp_path, TRUNC.replace("algorithm: crc32", "algorithm: blake3")
                     .replace("type: u16, checksum", "type: bytes, size: 2, checksum")
                     .replace("store: {bits: 16}", "store: {bits: 16}, seed: a"))
    assert any("blake3 takes no seed" in p for p in found)


def test_plugin_that_does_not_load_is_a_schema_error(tmp_path):
    text = WAL.format(plugin="no_such_module_bw", big=BIG)
    found = problems(tmp_path, text)
    assert any("cannot load plug-in 'no_such_module_bw:register'" in p for p in found)


def test_chain_needs_a_fixed_position(tmp_path, plugin):
    text = WAL.format(plugin=plugin, big=BIG).replace(
        "{name: data, type: bytes, size: 8}", "{name: data, type: bytes, length: u8}").replace(
        "      - name: check\n        type: u64be\n        checksum: {algorithm: wal64, covers: "
        "[page, commit, data], seed: prev,\n                   params: {order: order}}\n",
        "      - name: check\n        type: u64be\n        checksum: {algorithm: wal64, covers: "
        "[page, commit, data], seed: prev,\n                   params: {order: order}}\n"
        "      - {name: tail, type: bytes, length: u8}\n")
    assert any("fixed offset" in p for p in problems(tmp_path, text))


def test_blake3_digest_field(schema_module):
    import blake3

    m = schema_module("""
bytewright: 1
family: digest
records:
  blob:
    fields:
      - {name: body, type: bytes, length: u16}
      - {name: hash, type: bytes, size: 32, checksum: {algorithm: blake3, covers: preceding}}
      - {name: short, type: bytes, size: 8,
         checksum: {algorithm: blake3, covers: [body], store: {bits: 64}}}
""")
    body = b"hello blob"
    head = struct.pack("<H", len(body)) + body
    data = head + blake3.blake3(head).digest() + blake3.blake3(head).digest()[:8]
    both_paths(m, "blob", data)
    every_path_rejects(m, "blob", data[:-1] + b"\x00", ChecksumError)


RANGES = """
bytewright: 1
family: ranged
records:
  frame:
    fields:
      - {name: magic, type: u32}
      - {name: kind, type: u8}
      - {name: flags, type: u8}
      - {name: seq, type: u16}
      - {name: check, type: u32, checksum: {algorithm: crc32c, covers: [{bytes: [4, 8]}, {bytes: [0, 2]}]}}
      - {name: body, type: bytes, length: u8}
"""


def test_checksum_over_byte_ranges(schema_module):
    from bytewright.runtime.checksums import crc32c

    m = schema_module(RANGES)
    head = struct.pack("<IBBH", 0xCAFEF00D, 1, 2, 3)
    data = head + struct.pack("<I", crc32c(head[4:8] + head[0:2])) + b"\x02hi"
    value = both_paths(m, "frame", data)
    assert (value.kind, value.seq, value.body) == (1, 3, b"hi")
    # bytes 2..4 of magic are outside both ranges: changing them keeps the check valid
    both_paths(m, "frame", data[:2] + b"\x00\x00" + data[4:])
    every_path_rejects(m, "frame", data[:5] + b"\x09" + data[6:], ChecksumError)


def test_byte_ranges_must_lie_before_the_checksum(tmp_path):
    found = problems(tmp_path, RANGES.replace("[0, 2]", "[0, 9]"))
    assert any("reaches past the 8 fixed bytes" in p for p in found)
    found = problems(tmp_path, RANGES.replace("{bytes: [0, 2]}", "kind"))
    assert any("not both" in p for p in found)


def test_chain_with_counted_repeat_and_trailing_checksum(schema_module):
    # The chained value sits at the item's end (a trailing CRC); the repeat is counted.
    m = schema_module("""
bytewright: 1
family: chained
records:
  rec:
    params: {prev: {type: int, default: 0}}
    fields:
      - {name: body, type: bytes, length: u8}
      - {name: crc, type: u32, checksum: {algorithm: crc32, covers: [body], seed: prev}}
  log:
    fields:
      - {name: n, type: u16}
      - {name: recs, type: rec, repeat: {count: n}, chain: {param: prev, from: crc, first: 77}}
      - {name: tail, type: u8}
""")
    out, prev = struct.pack("<H", 3), 77
    for body in (b"a", b"bc", b""):
        field = bytes([len(body)]) + body
        prev = zlib.crc32(field, prev)
        out += field + struct.pack("<I", prev)
    data = out + b"\x09"
    value = both_paths(m, "log", data)
    assert [r.body for r in value.recs] == [b"a", b"bc", b""]
    # n is derived: two records re-encode with the chain recomputed, on both encoders
    two = m.Log(recs=value.recs[:2], tail=9)
    assert m.encode_log(two) == m.construct_encode_log(two) == \
        struct.pack("<H", 2) + data[2:2 + 6 + 7] + b"\x09"


def test_chain_with_a_log_that_ends_at_the_first_bad_record(schema_module, plugin):
    # 'the log ends here' (stop_on_error) combined with the chain, on both paths
    text = WAL.format(plugin=plugin, big=BIG).replace(
        "        repeat: eos\n", "        repeat: {eos: true, stop_on_error: true}\n")
    m = schema_module(text)
    frames = [(1, 0, b"abcdefgh"), (2, 0, b"ijklmnop"), (3, 3, b"qrstuvwx")]
    data = bytearray(wal_bytes(BIG, 7, frames))
    data[16 + 2 * 24 + 9] ^= 0x40  # third frame's data: its chained check fails
    fast, end = m.decode_wal(bytes(data))
    assert [f.page for f in fast.frames] == [1, 2]
    assert fast.frames.stop is not None and fast.frames.stop.offset == 16 + 2 * 24
    assert m.construct_decode_wal(bytes(data)) == fast
    assert m.construct_decode_wal(bytes(data), compiled=True) == fast


def test_generated_module_loads_its_plugins_in_a_fresh_process(tmp_path, plugin):
    import subprocess
    import sys

    path = tmp_path / "walx.yaml"
    path.write_text(WAL.format(plugin=plugin, big=BIG))
    result = pipeline.run([path])
    assert not result.problems
    (tmp_path / "gen_walx.py").write_text(result.modules["walx.py"])
    data = wal_bytes(BIG, 5, [(1, 0, b"abcdefgh")])
    code = ("import sys; sys.path[:0] = [sys.argv[1]]; import gen_walx; "
            "v, end = gen_walx.decode_wal(bytes.fromhex(sys.argv[2])); "
            "print(end, v.frames[0].page, gen_walx.encode_wal(v).hex() == sys.argv[2])")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path), data.hex()],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(len(data)), "1", "True"]
