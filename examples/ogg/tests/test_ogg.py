"""The Ogg example, on an Ogg Vorbis file written by libsndfile/libvorbis.

soundfile (its wheel bundles libsndfile with libogg and libvorbis) encodes a short stereo
sine to OGG/VORBIS in memory, with a comment long enough that the comment packet spans
two pages. The test walks the pages and their lacing with its own few lines (and its own
CRC), independent of bytewright, and holds the generated codec to that and to what it
asked soundfile to write.
"""

from __future__ import annotations

import io
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile

from bytewright.generator import project
from bytewright.runtime.errors import ChecksumError, DecodeError

ROOT = Path(__file__).resolve().parent.parent
RATE, CHANNELS = 22050, 2
TITLE, COMMENT = "bytewright sine", "c" * 70000  # > 255 * 255 bytes: two pages
CRC_AT = 22  # offset of the CRC in a page

# The project's generated module, loaded as `bytewright check` loads it.
ogg = project.load(ROOT / "bytewright.toml").load_module("ogg")


@pytest.fixture(scope="module")
def ogg_bytes() -> bytes:
    t = np.arange(int(RATE * 0.5)) / RATE
    tone = (0.3 * np.sin(2 * np.pi * 440 * t)).astype("float32")
    out = io.BytesIO()
    with soundfile.SoundFile(out, "w", RATE, CHANNELS, format="OGG", subtype="VORBIS") as f:
        f.title = TITLE
        f.comment = COMMENT
        f.write(np.stack([tone, tone * 0.5], axis=1))
    return out.getvalue()


def _crc_table() -> list[int]:
    table = []
    for i in range(256):
        r = i << 24
        for _ in range(8):
            r = ((r << 1) ^ 0x04C11DB7) if r & 0x80000000 else r << 1
        table.append(r & 0xFFFFFFFF)
    return table


TABLE = _crc_table()


def ogg_crc(data: bytes) -> int:
    """RFC 3533's CRC: polynomial 0x04c11db7, initial 0, no reflection, no final xor."""
    crc = 0
    for b in data:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ TABLE[(crc >> 24) ^ b]
    return crc


def pages(data: bytes) -> list[tuple[int, int, list[int], bytes]]:
    """(offset, header_type, lacing values, body) of every page, by RFC 3533."""
    out, pos = [], 0
    while pos < len(data):
        assert data[pos:pos + 4] == b"OggS"
        n = data[pos + 26]
        lacing = list(data[pos + 27:pos + 27 + n])
        body_at = pos + 27 + n
        out.append((pos, data[pos + 5], lacing, data[body_at:body_at + sum(lacing)]))
        pos = body_at + sum(lacing)
    return out


def packets(data: bytes) -> list[bytes]:
    out, current = [], b""
    for _, _, lacing, body in pages(data):
        at = 0
        for size in lacing:
            current += body[at:at + size]
            at += size
            if size < 255:
                out.append(current)
                current = b""
    assert current == b""
    return out


def decoders():
    yield "fast", lambda data: ogg.decode_ogg_stream(data)[0]
    yield "construct", ogg.construct_decode_ogg_stream
    yield "compiled", lambda data: ogg.construct_decode_ogg_stream(data, compiled=True)


def test_the_file_has_a_packet_spanning_pages_and_valid_crcs(ogg_bytes):
    ps = pages(ogg_bytes)
    assert [flags & 1 for _, flags, _, _ in ps][:3] == [0, 0, 1]  # page 2 continues
    assert ps[0][1] & 2 and ps[-1][1] & 4  # bos, eos
    for pos, _, lacing, body in ps:
        header = bytearray(ogg_bytes[pos:pos + 27 + len(lacing)])
        stored = struct.unpack_from("<I", header, CRC_AT)[0]
        header[CRC_AT:CRC_AT + 4] = bytes(4)
        assert stored == ogg_crc(bytes(header) + body)


@pytest.mark.parametrize("path", ["fast", "construct", "compiled"])
def test_decodes_what_soundfile_wrote(ogg_bytes, path):
    value = dict(decoders())[path](ogg_bytes)
    raw = packets(ogg_bytes)
    assert len(value.packets) == len(raw) > 3
    ident, comment, setup = (p.body for p in value.packets[:3])
    assert [p.packet_type for p in value.packets[:3]] == [1, 3, 5]
    assert ident.audio_channels == CHANNELS and ident.audio_sample_rate == RATE
    info = soundfile.info(io.BytesIO(ogg_bytes))
    assert (info.channels, info.samplerate) == (CHANNELS, RATE)
    assert 1 << ident.blocksizes.blocksize_0 <= 1 << ident.blocksizes.blocksize_1
    assert comment.vendor.startswith("Xiph.Org libVorbis")
    assert f"TITLE={TITLE}" in comment.comments and f"COMMENT={COMMENT}" in comment.comments
    assert setup.codebooks[:1] == raw[2][7:8]
    for got, want in zip(value.packets[3:], raw[3:], strict=True):
        assert got.packet_type % 2 == 0  # audio
        assert bytes([got.packet_type]) + got.body.data == want


def test_all_paths_agree_and_re_encode_byte_identical(ogg_bytes):
    value, end = ogg.decode_ogg_stream(ogg_bytes)
    assert end == len(ogg_bytes)
    assert ogg.construct_decode_ogg_stream(ogg_bytes) == value
    assert ogg.construct_decode_ogg_stream(ogg_bytes, compiled=True) == value
    assert ogg.encode_ogg_stream(value) == ogg_bytes
    assert ogg.construct_encode_ogg_stream(value) == ogg_bytes
    assert ogg.construct_encode_ogg_stream(value, compiled=True) == ogg_bytes


@pytest.mark.parametrize("encode", ["fast", "construct"])
def test_libsndfile_reads_what_the_encoders_write(ogg_bytes, encode):
    """Change the title (same length, so the pages keep their lacing) and encode: the
    encoders recompute every page CRC, which libogg checks when libsndfile reads."""
    value, _ = ogg.decode_ogg_stream(ogg_bytes)
    comment = value.packets[1].body
    comment.comments = [c.replace(f"TITLE={TITLE}", f"TITLE={TITLE.upper()}")
                        for c in comment.comments]
    out = (ogg.encode_ogg_stream if encode == "fast" else ogg.construct_encode_ogg_stream)(value)
    assert len(out) == len(ogg_bytes) and out != ogg_bytes
    with soundfile.SoundFile(io.BytesIO(out)) as f:
        assert (f.title, f.samplerate, f.channels) == (TITLE.upper(), RATE, CHANNELS)
        assert f.read().shape == (int(RATE * 0.5), CHANNELS)
    # The same change without the encoder's CRCs is refused by libsndfile.
    stale = bytearray(ogg_bytes)
    at = stale.index(f"TITLE={TITLE}".encode()) + 6
    stale[at:at + len(TITLE)] = TITLE.upper().encode()
    with pytest.raises(RuntimeError):
        soundfile.SoundFile(io.BytesIO(bytes(stale)))


def test_a_flipped_byte_fails_that_pages_crc(ogg_bytes):
    """On every page, a body byte and a header byte (the granule) are covered: the error
    names the page's CRC at its offset in the file."""
    for pos, _, lacing, body in pages(ogg_bytes):
        body_at = pos + 27 + len(lacing)
        for at in (body_at + len(body) // 2, pos + 6):
            bad = bytearray(ogg_bytes)
            bad[at] ^= 0x10
            for name, decode in decoders():
                with pytest.raises(ChecksumError) as info:
                    decode(bytes(bad))
                assert info.value.offset == pos + CRC_AT, name
                assert info.value.path.endswith("page_crc"), (name, info.value.path)


def reseal(data: bytearray, pos: int) -> None:
    """Recompute the CRC of the page at ``pos`` (the test's own CRC)."""
    n = data[pos + 26]
    end = pos + 27 + n + sum(data[pos + 27:pos + 27 + n])
    data[pos + CRC_AT:pos + CRC_AT + 4] = bytes(4)
    data[pos + CRC_AT:pos + CRC_AT + 4] = struct.pack("<I", ogg_crc(bytes(data[pos:end])))


def test_an_error_in_a_packet_spanning_pages_names_its_physical_offset(ogg_bytes):
    """The comment packet ends on page 2 with its framing flag (1). Make it 0 and re-seal
    the page: the error is the packet's, at that byte's offset in the file."""
    pos, flags, lacing, body = pages(ogg_bytes)[2]
    assert flags & 1  # continues the comment packet
    j = next(i for i, v in enumerate(lacing) if v < 255)  # the segment ending the packet
    flag_at = pos + 27 + len(lacing) + 255 * j + lacing[j] - 1
    bad = bytearray(ogg_bytes)
    assert bad[flag_at] == 1
    bad[flag_at] = 0
    reseal(bad, pos)
    for name, decode in decoders():
        with pytest.raises(DecodeError) as info:
            decode(bytes(bad))
        assert not isinstance(info.value, ChecksumError), name
        assert info.value.offset == flag_at, name
        assert "packets[1].body.framing_flag" in info.value.path, (name, info.value.path)


def test_a_cut_file_is_refused(ogg_bytes):
    pos = pages(ogg_bytes)[2][0]  # cut before the page that ends the comment packet
    for _, decode in decoders():
        with pytest.raises(DecodeError):
            decode(ogg_bytes[:pos])


def bytewright(*args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("bytewright") or str(Path(sys.executable).with_name("bytewright"))
    return subprocess.run([exe, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_check_is_green():
    r = bytewright("check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert " 0 failed" in r.stdout


def fixture_bytes(name: str) -> bytes:
    text = (ROOT / "fixtures" / "ogg" / f"{name}.hex").read_text()
    return bytes.fromhex("".join(line for line in text.splitlines()
                                 if not line.startswith("#")))


def test_the_fixture_pages_carry_rfc3533_crcs_and_lacing():
    """The committed fixtures, made by the encoder from cases/: every page's CRC by the
    test's own CRC, and the packets by the test's own lacing walk."""
    for name, count in (("page", 1), ("stream", 3)):
        data = fixture_bytes(name)
        ps = pages(data)
        assert len(ps) == count
        for pos, _, lacing, body in ps:
            page = bytearray(data[pos:pos + 27 + len(lacing)] + body)
            stored = struct.unpack_from("<I", page, CRC_AT)[0]
            page[CRC_AT:CRC_AT + 4] = bytes(4)
            assert stored == ogg_crc(bytes(page))
    stream = fixture_bytes("stream")
    assert [flags for _, flags, _, _ in pages(stream)] == [2, 0, 5]  # bos; -; continued+eos
    raw = packets(stream)
    assert [len(p) for p in raw] == [30, 65, 301] and raw[2] == b"\x00" + b"\x55" * 300
