"""The ZIP example, on archives written by Python's zipfile and by Info-ZIP's zip.

The archives are made in the test. zipfile's own reader gives what the generated codec
is held to: each member's name, CRC-32, sizes, date and time, method, attributes, its
local header's offset and its data; the central directory's offset; the comment.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

import pytest

from bytewright.generator import project
from bytewright.runtime.errors import ChecksumError, ConstraintError, DecodeError

ROOT = Path(__file__).resolve().parent.parent

# The project's generated module, loaded as `bytewright check` loads it (plug-ins included).
zp = project.load(ROOT / "bytewright.toml").load_module("zip")

WHEN = (2023, 7, 14, 13, 45, 58)
TEXT = b"".join(b"line %d of a text member that deflates well\n" % i for i in range(400))
MEMBERS = [  # (name, data, method)
    ("hello.txt", b"Hello, ZIP!\n", zipfile.ZIP_STORED),
    ("data/lines.txt", TEXT, zipfile.ZIP_DEFLATED),
    ("empty.bin", b"", zipfile.ZIP_DEFLATED),
    ("data/", b"", zipfile.ZIP_STORED),
    ("naïve-ü.txt", bytes(range(256)) * 3, zipfile.ZIP_DEFLATED),  # a UTF-8 name (flag bit 11)
]


def make_zipfile(comment: bytes = b"made by zipfile") -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        for name, data, method in MEMBERS:
            info = zipfile.ZipInfo(name, date_time=WHEN)
            info.compress_type = method
            info.external_attr = (0o40755 << 16 | 0x10) if name.endswith("/") else 0o100644 << 16
            zf.writestr(info, data)
        zf.comment = comment
    return out.getvalue()


def make_infozip(tmp: Path, level: str) -> bytes:
    """Info-ZIP's zip: its own deflate, and extra fields (UT timestamps, ux uid/gid)."""
    src = tmp / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_bytes(TEXT)
    (src / "sub" / "b.bin").write_bytes(bytes(range(256)) * 9)
    (src / "sub" / "zero").write_bytes(b"")
    out = tmp / f"infozip{level}.zip"
    subprocess.run(["zip", "-q", level, "-r", str(out), "a.txt", "sub"], cwd=src, check=True)
    return out.read_bytes()


needs_infozip = pytest.mark.skipif(shutil.which("zip") is None, reason="Info-ZIP zip not installed")


def decoders():
    yield "fast", lambda data: zp.decode_zip_file(data)[0]
    yield "construct", zp.construct_decode_zip_file
    yield "compiled", lambda data: zp.construct_decode_zip_file(data, compiled=True)


def held_to_zipfile(value, data: bytes) -> None:
    """Every decoded field against what zipfile reads from the same bytes."""
    zf = zipfile.ZipFile(io.BytesIO(data))
    infos = zf.infolist()
    assert value.eocd.comment == zf.comment
    assert value.eocd.cd_offset == zf.start_dir
    assert value.eocd.total_entries == len(infos) == len(value.entries) == len(value.members)
    for info, entry, member in zip(infos, value.entries, value.members, strict=True):
        for rec in (entry, member):
            assert rec.name == info.filename
            assert rec.method == info.compress_type
            y, mo, d, h, mi, s = info.date_time
            assert (rec.year, rec.month, rec.day) == (y, mo, d)
            assert (rec.hour, rec.minute, rec.second_half * 2) == (h, mi, s)
            assert rec.utf8_name == bool(info.flag_bits & 0x800)
        assert entry.local_offset == info.header_offset
        assert (entry.crc32, entry.compressed_size, entry.uncompressed_size) == (
            info.CRC, info.compress_size, info.file_size)
        assert (entry.zip_version, int(entry.host)) == (info.create_version, info.create_system)
        assert entry.unix_mode == info.external_attr >> 16
        assert entry.dos_attrs == info.external_attr & 0xFFFF
        assert b"".join(x.header_id.to_bytes(2, "little") + len(x.data).to_bytes(2, "little")
                        + x.data for x in entry.extra) == info.extra
        # The member's data, decompressed by the generated codec, is zipfile's.
        assert member.data == zf.read(info)
        assert zlib.crc32(member.data) == info.CRC


@pytest.mark.parametrize("path", ["fast", "construct", "compiled"])
def test_decodes_what_zipfile_wrote(path):
    data = make_zipfile()
    value = dict(decoders())[path](data)
    held_to_zipfile(value, data)
    assert [m.method for m in value.members] == [
        zp.CompressionMethod(m) for _, _, m in MEMBERS]
    assert value.members[4].utf8_name and not value.members[0].utf8_name


def test_all_paths_agree_and_re_encode_byte_identical():
    data = make_zipfile()
    value, end = zp.decode_zip_file(data)
    assert end == len(data)
    assert zp.construct_decode_zip_file(data) == value
    assert zp.construct_decode_zip_file(data, compiled=True) == value
    assert zp.encode_zip_file(value) == data
    assert zp.construct_encode_zip_file(value) == data
    assert zp.construct_encode_zip_file(value, compiled=True) == data


def test_an_archive_after_a_long_comment_and_with_no_comment():
    for comment in (b"", b"PK" + bytes(range(256)) * 200):  # 51 KiB of comment
        data = make_zipfile(comment)
        value, _ = zp.decode_zip_file(data)
        held_to_zipfile(value, data)
        assert zp.encode_zip_file(value) == data == zp.construct_encode_zip_file(value)


@needs_infozip
@pytest.mark.parametrize("path", ["fast", "construct", "compiled"])
def test_decodes_what_infozip_stored_and_re_encodes_it(tmp_path, path):
    data = make_infozip(tmp_path, "-0")
    value = dict(decoders())[path](data)
    held_to_zipfile(value, data)
    assert {x.header_id for m in value.members for x in m.extra} >= {0x5455, 0x7875}
    assert zp.encode_zip_file(value) == data
    assert zp.construct_encode_zip_file(value) == data
    assert zp.construct_encode_zip_file(value, compiled=True) == data


@needs_infozip
def test_decodes_what_infozip_deflated(tmp_path):
    """Info-ZIP's deflate is not zlib's, so its compressed bytes are not re-made; every
    member still decompresses and its CRC-32 is verified by the generated code."""
    data = make_infozip(tmp_path, "-9")
    for _, decode in decoders():
        value = decode(data)
        held_to_zipfile(value, data)
        assert any(m.method == zp.CompressionMethod.DEFLATED for m in value.members)


@pytest.mark.parametrize("encode", ["fast", "construct", "compiled"])
def test_zipfile_reads_a_new_archive_the_encoders_write(encode):
    """Offsets, counts, the central directory's size and every local size and CRC are
    derived by the encoder; only the central directory's copies are given."""
    rows = [("a.txt", b"alpha " * 50, zp.CompressionMethod.DEFLATED),
            ("b/c.bin", bytes(range(40)), zp.CompressionMethod.STORED)]
    members, entries = [], []
    for name, data, method in rows:
        stamp = dict(hour=9, minute=30, second_half=7, year=2024, month=2, day=29)
        members.append(zp.LocalFile(version_needed=20, deflate_option=0, utf8_name=False,
                                    method=method, name=name, extra=[], data=data,
                                    **stamp))
        stored = data if method == zp.CompressionMethod.STORED else _deflate(data)
        entries.append(zp.CentralEntry(
            zip_version=20, host=zp.HostSystem.UNIX, version_needed=20, deflate_option=0,
            utf8_name=False, method=method, **stamp, crc32=zlib.crc32(data),
            compressed_size=len(stored), uncompressed_size=len(data), internal_attrs=0,
            dos_attrs=0, unix_mode=0o100644, disk_start=0, name=name, extra=[], comment=b""))
    value = zp.ZipFile(eocd=zp.EndOfCentralDirectory(disk_number=0, cd_disk=0,
                                                      comment=b"new"),
                       members=members, entries=entries)
    out = {"fast": zp.encode_zip_file, "construct": zp.construct_encode_zip_file,
           "compiled": lambda v: zp.construct_encode_zip_file(v, compiled=True)}[encode](value)
    zf = zipfile.ZipFile(io.BytesIO(out))
    assert zf.testzip() is None
    assert [(i.filename, zf.read(i), i.date_time) for i in zf.infolist()] == [
        (n, d, (2024, 2, 29, 9, 30, 14)) for n, d, _ in rows]
    assert zf.comment == b"new"
    held_to_zipfile(zp.decode_zip_file(out)[0], out)


def _deflate(data: bytes) -> bytes:
    co = zlib.compressobj(6, zlib.DEFLATED, -15)
    return co.compress(data) + co.flush()


def errors_of(data: bytes) -> list[tuple[type, str, int]]:
    out = []
    for _, decode in decoders():
        with pytest.raises(DecodeError) as info:
            value = decode(data)
            for m in value.members:  # members are read on access
                m.data  # noqa: B018
        out.append((type(info.value), info.value.path, info.value.offset))
    return out


def test_a_damaged_member_fails_its_crc_at_the_local_header():
    data = make_zipfile()
    info = zipfile.ZipFile(io.BytesIO(data)).infolist()[0]  # hello.txt, stored
    at = info.header_offset + 30 + len(info.filename)  # first data byte
    bad = bytearray(data)
    bad[at] ^= 0x20
    errs = errors_of(bytes(bad))
    assert errs[0][0] is ChecksumError
    assert errs[0][1].endswith("members[0].crc32")
    assert errs[0][2] == info.header_offset + 14  # where the CRC is stored
    assert errs == [errs[0]] * 3


def test_members_are_read_at_the_offsets_the_directory_gives():
    """Random access: member 1 is read from its own offset although member 0 is damaged."""
    data = make_zipfile()
    infos = zipfile.ZipFile(io.BytesIO(data)).infolist()
    bad = bytearray(data)
    bad[infos[0].header_offset + 30 + len(infos[0].filename)] ^= 0x20
    for _, decode in decoders():
        value = decode(bytes(bad))
        assert value.members.offsets == [i.header_offset for i in infos]
        assert value.eocd.offset == len(data) - 22 - len(b"made by zipfile")
        assert value.members[1].data == TEXT
    value, _ = zp.decode_zip_file(bytes(bad))
    with pytest.raises(ChecksumError):
        value.members[0].data  # noqa: B018


def test_no_end_record_is_a_decode_error():
    data = make_zipfile()
    cut = data[: data.rindex(b"PK\x05\x06")]
    errs = errors_of(cut)
    assert errs[0][0] is ConstraintError and errs[0][1] == "zip_file.eocd"
    assert errs == [errs[0]] * 3


def test_a_wrong_local_signature_is_refused_with_its_message():
    data = make_zipfile()
    infos = zipfile.ZipFile(io.BytesIO(data)).infolist()
    bad = bytearray(data)
    bad[infos[2].header_offset + 3] = 0x09
    errs = errors_of(bytes(bad))
    assert errs[0][0] is ConstraintError and errs[0][2] == infos[2].header_offset
    assert "members[2]" in errs[0][1]
    assert errs == [errs[0]] * 3


def test_a_data_descriptor_flag_is_refused():
    """Bit 3 (sizes after the data) is not a named bit: it must be zero."""
    data = make_zipfile()
    infos = zipfile.ZipFile(io.BytesIO(data)).infolist()
    bad = bytearray(data)
    bad[infos[1].header_offset + 6] |= 0x08
    errs = errors_of(bytes(bad))
    assert errs[0][0] is ConstraintError and "members[1].flags" in errs[0][1]
    assert errs == [errs[0]] * 3


def bytewright(*args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("bytewright") or str(Path(sys.executable).with_name("bytewright"))
    return subprocess.run([exe, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_check_is_green():
    r = bytewright("check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert " 0 failed" in r.stdout
