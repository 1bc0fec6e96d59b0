"""The PNG example, driven only through the CLI and the public API.

The PNG bytes are made here by a small independent encoder (zlib + struct, as any PNG
writer does), not by the generated codec, so decoding them checks the schema against
the format rather than against itself.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from bytewright.generator import project
from bytewright.runtime.errors import ChecksumError, DecodeError

ROOT = Path(__file__).resolve().parent.parent


# The project's generated module, loaded as `bytewright check` loads it (plug-ins included).
png = project.load(ROOT / "bytewright.toml").load_module("png")


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def make_png(width: int, height: int, *, text: bytes | None = None) -> bytes:
    raw = b"".join(b"\x00" + bytes((x * 7 + y) % 256 for x in range(width * 4))
                   for y in range(height))
    out = b"\x89PNG\r\n\x1a\n"
    out += chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0))
    if text is not None:
        out += chunk(b"tEXt", text)
    idat = zlib.compress(raw, 9)
    # A real writer may split the zlib stream over several IDAT chunks.
    out += chunk(b"IDAT", idat[: len(idat) // 2]) + chunk(b"IDAT", idat[len(idat) // 2:])
    return out + chunk(b"IEND", b"")


def bytewright(*args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("bytewright") or str(Path(sys.executable).with_name("bytewright"))
    return subprocess.run([exe, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_decodes_a_real_png_made_here():
    data = make_png(5, 3, text=b"Title\x00five by three")
    value, end = png.decode_png_file(data)
    assert end == len(data)
    kinds = [c.chunk_type for c in value.chunks]
    T = png.ChunkType
    assert kinds == [T.IHDR, T.tEXt, T.IDAT, T.IDAT, T.IEND]
    ihdr = value.chunks[0].data
    assert (ihdr.width, ihdr.height, ihdr.bit_depth) == (5, 3, 8)
    assert ihdr.color_type == png.ColorType.TRUECOLOR_ALPHA
    assert value.chunks[1].data == b"Title\x00five by three"
    pixels = zlib.decompress(value.chunks[2].data + value.chunks[3].data)
    assert len(pixels) == 3 * (1 + 5 * 4)
    # Both codec paths agree and re-encode the same bytes.
    assert png.construct_decode_png_file(data) == value
    assert png.encode_png_file(value) == data
    assert png.construct_encode_png_file(value) == data


def test_unknown_chunk_types_are_kept():
    data = make_png(1, 1)
    iend = data.rindex(b"IEND") - 4
    data = data[:iend] + chunk(b"zzZz", b"private") + data[iend:]
    value, _ = png.decode_png_file(data)
    assert value.chunks[-2].chunk_type == int.from_bytes(b"zzZz", "big")
    assert png.encode_png_file(value) == data


def test_a_bad_crc_names_the_chunk():
    data = bytearray(make_png(2, 2))
    at = data.index(b"IHDR") + 4  # first data byte of IHDR
    data[at] ^= 0x01
    with pytest.raises(ChecksumError) as info:
        png.decode_png_file(bytes(data))
    assert "chunks[0]" in info.value.path
    with pytest.raises(DecodeError):
        png.construct_decode_png_file(bytes(data))


def test_a_file_without_iend_is_truncated():
    data = make_png(2, 2)
    cut = data[: data.rindex(b"IEND") - 4]
    with pytest.raises(DecodeError):
        png.decode_png_file(cut)
    with pytest.raises(DecodeError):
        png.construct_decode_png_file(cut)


def test_check_is_green():
    r = bytewright("check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert " 0 failed" in r.stdout


def test_inspect_detects_a_real_png(tmp_path):
    path = tmp_path / "image.png"
    path.write_bytes(make_png(3, 2))
    r = bytewright("inspect", str(path))
    assert r.returncode == 0, r.stderr
    assert "png.png_file (detected" in r.stdout and "width = 3" in r.stdout
    bad = bytearray(path.read_bytes())
    bad[bad.index(b"IHDR") + 4] ^= 1  # the CRC no longer matches
    path.write_bytes(bytes(bad))
    r = bytewright("inspect", str(path))
    assert r.returncode == 1 and "Traceback" not in r.stderr
