"""The protolog example, driven only through the CLI and the public API.

Records are built here by an independent hand encoder (varints written by hand,
``google_crc32c`` for the CRC), then decoded by the generated codec on both paths.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from pathlib import Path

import google_crc32c
import pytest

from bytewright.generator import project
from bytewright.runtime.errors import ChecksumError, DecodeError

ROOT = Path(__file__).resolve().parent.parent


# The project's generated module, loaded as `bytewright check` loads it (plug-ins included).
log = project.load(ROOT / "bytewright.toml").load_module("protolog")


def uleb(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def sleb(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        done = (n == 0 and not b & 0x40) or (n == -1 and b & 0x40)
        out.append(b if done else b | 0x80)
        if done:
            return bytes(out)


def zz(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def text(s: str) -> bytes:
    return uleb(len(s.encode())) + s.encode()


def record(seq, kind, delta, value, offset, source, tags, note, payload) -> bytes:
    body = (uleb(seq) + bytes([kind]) + uleb(zz(delta)) + sleb(value) + uleb(zz(offset))
            + text(source) + uleb(len(tags)) + b"".join(text(t) for t in tags)
            + note.encode() + b"\x00" + payload)
    framed = uleb(len(body)) + body
    return framed + struct.pack("<I", google_crc32c.value(framed))


def test_hand_encoded_log_decodes_on_both_paths():
    recs = [record(7, 1, 0, 0, 0, "a", [], "", b""),
            record(8, 2, -5, -300, 70, "b" * 200, ["t1", "t2"], "note", b"\xff\x00"),
            record(2**35, 3, 2**40, -(2**63), -(2**31), "", [], "end", b"")]
    data = b"PLOG\x01" + b"".join(recs)
    value, end = log.decode_log_file(data)
    assert end == len(data)
    second = value.records[1].body
    assert (second.seq, second.time_delta, second.value, second.offset) == (8, -5, -300, 70)
    assert second.kind == log.EventKind.SAMPLE
    assert second.source == "b" * 200 and second.tags == ["t1", "t2"]
    assert second.note == "note" and second.payload == b"\xff\x00"
    third = value.records[2].body
    assert (third.seq, third.time_delta, third.value, third.offset) == (2**35, 2**40, -(2**63), -(2**31))
    assert log.construct_decode_log_file(data) == value
    assert log.encode_log_file(value) == data
    assert log.construct_encode_log_file(value) == data


def test_two_byte_length_prefix_on_the_construct_path():
    # A 200-byte string needs a 2-byte varint prefix; the record must not lose a byte.
    one = record(1, 2, 1, 1, 1, "k" * 200, [], "", b"")
    value, _ = log.decode_record(one)
    assert log.construct_encode_record(value) == one
    assert log.encode_record(value) == one


def test_crc_mismatch_and_truncation_are_errors_on_both_paths():
    data = bytearray(b"PLOG\x01" + record(1, 1, 0, 0, 0, "x", [], "", b""))
    data[-1] ^= 0x40  # the stored CRC itself
    for decode in (log.decode_log_file, log.construct_decode_log_file):
        with pytest.raises(ChecksumError):
            decode(bytes(data))
    whole = b"PLOG\x01" + record(1, 1, 0, 0, 0, "x", [], "", b"")
    for cut in range(5 + 1, len(whole)):
        for decode in (log.decode_log_file, log.construct_decode_log_file):
            with pytest.raises(DecodeError):
                decode(whole[:cut])


def test_check_is_green():
    exe = shutil.which("bytewright") or str(Path(sys.executable).with_name("bytewright"))
    r = subprocess.run([exe, "check"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert " 0 failed" in r.stdout
