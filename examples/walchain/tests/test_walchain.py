"""The walchain example, driven only through the CLI and the public API.

Logs are written here by an independent encoder (the checksum re-implemented in the
test, not imported from the plug-in), then read by the generated codec.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from bytewright.generator import project

ROOT = Path(__file__).resolve().parent.parent


# The project's generated module, loaded as `bytewright check` loads it (plug-ins included).
wal = project.load(ROOT / "bytewright.toml").load_module("walchain")
BIG, LITTLE = 0x377F0683, 0x377F0682


def walsum(data: bytes, seed: int, big: bool) -> int:
    s0, s1 = seed >> 32, seed & 0xFFFFFFFF
    words = struct.unpack((">" if big else "<") + "I" * (len(data) // 4), data)
    for a, b in zip(words[::2], words[1::2], strict=True):
        s0 = (s0 + a + s1) % 2**32
        s1 = (s1 + b + s0) % 2**32
    return s0 << 32 | s1


def make_log(pages: list[bytes], *, magic: int = BIG, salts=(7, 9), page_size: int = 32,
             frame_salts=None) -> bytes:
    big = magic == BIG
    head = struct.pack(">6I", magic, 3007000, page_size, 1, *salts)
    check = walsum(head, 0, big)
    out = head + struct.pack(">Q", check)
    for i, page in enumerate(pages):
        s = frame_salts[i] if frame_salts else salts
        body = struct.pack(">4I", i + 1, len(pages) if i == len(pages) - 1 else 0, *s) + page
        check = walsum(body, check, big)
        out += body + struct.pack(">Q", check)
    return out


PAGES = [bytes([n]) * 32 for n in (1, 2, 3, 4)]


@pytest.mark.parametrize("magic", [BIG, LITTLE])
def test_whole_log_decodes_on_both_paths(magic):
    data = make_log(PAGES, magic=magic)
    value, end = wal.decode_wal_file(data)
    assert end == len(data)
    assert [f.data for f in value.frames] == PAGES
    assert value.frames.stop is None
    assert wal.construct_decode_wal_file(data) == value
    assert wal.encode_wal_file(value) == data
    assert wal.construct_encode_wal_file(value) == data


def test_the_chain_links_frames():
    # Swapping two frames keeps each frame's own bytes but breaks the chain at the first.
    data = make_log(PAGES)
    frame = 16 + 32 + 8
    a, b = 32 + frame, 32 + 2 * frame
    swapped = data[:a] + data[b:b + frame] + data[a:b] + data[b + frame:]
    value, _ = wal.decode_wal_file(swapped)
    assert len(value.frames) == 1
    assert value.frames.stop.offset == a and value.frames.stop.reason == "checksum"


def test_the_log_ends_at_the_first_bad_frame_with_its_reason():
    data = bytearray(make_log(PAGES))
    frame = 16 + 32 + 8
    data[32 + 2 * frame + 20] ^= 0xFF  # page data of frame 3
    value, _ = wal.decode_wal_file(bytes(data))
    assert [f.data for f in value.frames] == PAGES[:2]
    assert value.frames.stop.offset == 32 + 2 * frame
    assert value.frames.stop.reason == "checksum"
    assert wal.construct_decode_wal_file(bytes(data)) == value


def test_salt_mismatch_and_torn_tail_end_the_log():
    data = make_log(PAGES, frame_salts=[(7, 9), (7, 9), (8, 9), (7, 9)])
    value, _ = wal.decode_wal_file(data)
    assert len(value.frames) == 2 and value.frames.stop.reason == "constraint"
    assert "salt1" in value.frames.stop.detail
    torn = make_log(PAGES)[:-10]
    value, _ = wal.decode_wal_file(torn)
    assert len(value.frames) == 3 and value.frames.stop.reason == "truncated"


def test_check_is_green():
    exe = shutil.which("bytewright") or str(Path(sys.executable).with_name("bytewright"))
    r = subprocess.run([exe, "check"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert " 0 failed" in r.stdout
