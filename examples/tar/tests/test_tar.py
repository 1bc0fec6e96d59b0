"""The tar example, on archives written by Python's tarfile and by GNU tar.

tarfile (USTAR, GNU and pax formats) and, when the `tar` command is GNU tar, GNU tar itself
(its gnu, ustar and v7 formats) archive the same small tree: a text file, a 700-byte
binary file, an empty file, a file of exactly one block, a directory, a symbolic link and
a file whose name is longer than 100 bytes (USTAR splits it into prefix and name, GNU
writes a ././@LongLink member first). The test checks each header with its own few lines
(its own checksum sum), and holds the generated codec to that and to what tarfile reads
back, on the fast path and the Construct path (interpreted and compiled).
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from bytewright.generator import project
from bytewright.runtime.errors import ChecksumError, ConstraintError, DecodeError

ROOT = Path(__file__).resolve().parent.parent
LONG = "deep/" + "n" * 60 + "/" + "x" * 70 + ".txt"  # 140 bytes: longer than a name field
MTIME = 1_700_000_000
FILES = {
    "hello.txt": b"hello, tar\n",
    "random.bin": bytes((i * 37 + 11) % 256 for i in range(700)),
    "empty": b"",
    "block.bin": b"\xab" * 512,
    LONG: b"a long name\n",
}

# The project's generated module, loaded as `bytewright check` loads it (plug-ins included).
tar = project.load(ROOT / "bytewright.toml").load_module("tar")


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    for name, data in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    (root / "sub").mkdir()
    (root / "sub" / "inner.txt").write_bytes(b"inside\n")
    os.symlink("hello.txt", root / "link")
    for p in sorted(root.rglob("*"), reverse=True):
        os.utime(p, (MTIME, MTIME), follow_symlinks=False)
    return root


def _members(v7: bool = False) -> list[str]:
    # V7 headers have no name prefix: GNU tar refuses names over 99 bytes there
    short = ["hello.txt", "random.bin", "empty", "block.bin", "sub", "sub/inner.txt", "link"]
    return short if v7 else short + [LONG]


def python_tar(root: Path, fmt: int) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt) as t:
        for name in _members():
            t.add(root / name, arcname=name, recursive=False)
    return out.getvalue()


def gnu_tar(root: Path, fmt: str) -> bytes:
    r = subprocess.run(["tar", f"--format={fmt}", "--owner=0", "--group=0", "--numeric-owner",
                        "--no-recursion", "-cf", "-", "-C", str(root), *_members(fmt == "v7")],
                       capture_output=True, check=True)
    return r.stdout


def _gnu_tar_available() -> bool:
    exe = shutil.which("tar")
    if exe is None:
        return False
    r = subprocess.run([exe, "--version"], capture_output=True, text=True)
    return "GNU tar" in r.stdout


SOURCES = [("tarfile-ustar", lambda root: python_tar(root, tarfile.USTAR_FORMAT)),
           ("tarfile-gnu", lambda root: python_tar(root, tarfile.GNU_FORMAT)),
           ("tarfile-pax", lambda root: python_tar(root, tarfile.PAX_FORMAT))]
if _gnu_tar_available():
    SOURCES += [(f"gnutar-{fmt}", lambda root, fmt=fmt: gnu_tar(root, fmt))
                for fmt in ("gnu", "ustar", "v7")]
NAMES = [name for name, _ in SOURCES]


@pytest.fixture(scope="module")
def archives(tree) -> dict[str, bytes]:
    return {name: make(tree) for name, make in SOURCES}


def decoders():
    yield "fast", lambda data: tar.decode_archive(data)[0]
    yield "construct", tar.construct_decode_archive
    yield "compiled", lambda data: tar.construct_decode_archive(data, compiled=True)


def encoders():
    yield "fast", tar.encode_archive
    yield "construct", tar.construct_encode_archive
    yield "compiled", lambda value: tar.construct_encode_archive(value, compiled=True)


def headers(data: bytes) -> list[int]:
    """Offsets of the header blocks, by the format: each is followed by its data blocks."""
    out, pos = [], 0
    while data[pos:pos + 512] != bytes(512):
        out.append(pos)
        size = int(data[pos + 124:pos + 136].strip(b"\0 ") or b"0", 8)
        pos += 512 + (size + 511) // 512 * 512
    assert data[pos:] == bytes(len(data) - pos) and len(data) % 10240 == 0
    return out


def test_every_header_checksum_by_hand(archives):
    assert len(archives) in (3, 6)
    for name, data in archives.items():
        for at in headers(data):
            block = data[at:at + 512]
            assert block[154:156] == b"\0 ", name  # "%06o\0 "
            assert int(block[148:154], 8) == sum(block[:148]) + 8 * 0x20 + sum(block[156:])


def _full_name(block) -> bytes:
    name = block.name.rstrip(b"\0")
    prefix = block.member.prefix.rstrip(b"\0")  # the default, b"", outside ustar headers
    return prefix + b"/" + name if prefix else name


def _pax_records(data: bytes) -> dict[str, str]:
    """pax records: "LEN key=value\\n", LEN counting the whole record in decimal."""
    out, pos = {}, 0
    while pos < len(data):
        length = int(data[pos:data.index(b" ", pos)])
        key, _, value = data[data.index(b" ", pos) + 1:pos + length - 1].partition(b"=")
        assert data[pos + length - 1:pos + length] == b"\n"
        out[key.decode()] = value.decode()
        pos += length
    return out


@pytest.mark.parametrize("path", ["fast", "construct", "compiled"])
@pytest.mark.parametrize("source", NAMES)
def test_decodes_what_was_written(archives, source, path):
    data = archives[source]
    value = dict(decoders())[path](data)
    *blocks, end = value.blocks
    assert end.member is None and end.name == bytes(100)
    assert [len(b.member.data) for b in blocks] == [
        int(data[at + 124:at + 136].strip(b"\0 ") or b"0", 8) for at in headers(data)]
    T = tar.Typeflag
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        want = t.getmembers()
        long_name = None
        got = []
        for b in blocks:
            m = b.member
            if m.typeflag == T.GNU_LONGNAME:     # the next member's name, NUL-terminated
                long_name = m.data.rstrip(b"\0")
                continue
            if m.typeflag == T.PAX_EXTENDED:     # records for the next member
                pax = _pax_records(m.data)
                assert "mtime" in pax  # tarfile keeps a float mtime there
                long_name = pax["path"].encode() if "path" in pax else None
                continue
            got.append((long_name or _full_name(b), m))
            long_name = None
        assert len(got) == len(want) == len(_members(source == "gnutar-v7"))
        for (name, m), info in zip(got, want, strict=True):
            assert name.decode().rstrip("/") == info.name  # directories: "sub/"
            assert (m.mode, m.uid, m.gid, m.mtime) == (info.mode, info.uid, info.gid, MTIME)
            assert info.size == len(m.data)
            if info.isfile():
                assert m.typeflag in (T.REGULAR, T.REGULAR_V7)
                assert m.data == t.extractfile(info).read() == FILES.get(info.name, b"inside\n")
            elif info.isdir():
                assert m.typeflag == T.DIRECTORY and m.data == b""
            else:
                assert info.issym() and m.typeflag == T.SYMLINK
                assert m.linkname.rstrip(b"\0").decode() == info.linkname == "hello.txt"
            assert m.devmajor in (0, None) and m.devminor in (0, None)
    # the fields of the other header variants hold their defaults
    gnu = source in ("tarfile-gnu", "gnutar-gnu")
    for b in blocks:
        m = b.member
        if source.endswith(("ustar", "pax")):
            assert len(m.prefix) == 155 and (m.atime, m.ctime) == (None, None)
        else:
            assert m.prefix == b""
        if gnu:
            assert (m.atime, m.ctime) == (None, None)  # empty outside incremental dumps


@pytest.mark.parametrize("source", NAMES)
def test_empty_device_numbers_are_none_and_octal_zeros_are_zero(archives, source):
    """GNU tar's ustar and v7 headers write the device numbers of a file as octal zeros;
    its gnu headers and tarfile leave them empty (NULs)."""
    data = archives[source]
    value, _ = tar.decode_archive(data)
    devs = {(b.member.devmajor, b.member.devminor) for b in value.blocks[:-1]}
    at = headers(data)[0] + 329
    if data[at:at + 16] == bytes(16):
        assert devs == {(None, None)}
    else:
        assert data[at:at + 16] == b"0000000\0" * 2 and devs == {(0, 0)}
    assert source not in ("gnutar-ustar", "gnutar-v7") or devs == {(0, 0)}


@pytest.mark.parametrize("source", NAMES)
def test_all_paths_agree_and_re_encode_byte_identical(archives, source):
    data = archives[source]
    value, end = tar.decode_archive(data)
    assert end == len(data)
    for name, decode in decoders():
        assert decode(data) == value, name
    for name, encode in encoders():
        assert encode(value) == data, name


@pytest.mark.parametrize("source", NAMES)
def test_a_damaged_header_fails_its_checksum(archives, source):
    data = archives[source]
    at = headers(data)[1]
    bad = bytearray(data)
    bad[at + 110] ^= 0x01  # a digit of the uid: still octal, so only the checksum catches it
    for name, decode in decoders():
        with pytest.raises(ChecksumError) as err:
            decode(bytes(bad))
        assert err.value.offset == at + 148, name
        assert err.value.path == "archive.blocks[1].member.chksum", name


@pytest.mark.parametrize("path", ["fast", "construct", "compiled"])
def test_tarfile_reads_what_the_encoders_write(archives, path):
    """Give a file new contents of another length: the encoders derive its size, its
    padding and its header checksum, and tarfile reads the result."""
    value, _ = tar.decode_archive(archives["tarfile-ustar"])
    block = next(b for b in value.blocks if b.name.rstrip(b"\0") == b"hello.txt")
    block.member.data = b"new contents " * 50  # 650 bytes: two blocks
    block.member.mtime = MTIME + 60
    out = dict(encoders())[path](value)
    with tarfile.open(fileobj=io.BytesIO(out)) as t:
        info = t.getmember("hello.txt")
        assert (info.size, info.mtime) == (650, MTIME + 60)
        assert t.extractfile(info).read() == b"new contents " * 50
        assert t.extractfile("random.bin").read() == FILES["random.bin"]
    assert dict(decoders())[path](out) == value


def test_an_unknown_magic_is_refused(archives):
    data = bytearray(archives["tarfile-ustar"])
    data[257:265] = b"ustar\x0001"
    for name, decode in decoders():
        with pytest.raises(ConstraintError) as err:
            decode(bytes(data))
        assert "unknown tar header magic" in str(err.value), name
        assert (err.value.offset, err.value.path) == (257, "archive.blocks[0].member.magic"), name


def test_non_zero_bytes_after_the_end_are_refused(archives):
    data = bytearray(archives["tarfile-gnu"])
    data[-1] = 1  # in the padding of the last record
    for name, decode in decoders():
        with pytest.raises(DecodeError) as err:
            decode(bytes(data))
        assert isinstance(err.value, ConstraintError), name


def _fixture(name: str) -> bytes:
    text = (ROOT / "fixtures" / "tar" / f"{name}.hex").read_text()
    return bytes.fromhex("".join(line for line in text.splitlines()
                                 if not line.startswith("#")).replace(" ", ""))


def test_the_fixtures_are_archives_tarfile_reads():
    """The fixtures are encoded from cases/tar_cases.py by bytewright: tarfile (which
    checks every header checksum) reads them as the cases say."""
    with tarfile.open(fileobj=io.BytesIO(_fixture("ustar_archive"))) as t:
        assert [(m.name, m.size, m.type) for m in t.getmembers()] == [
            ("hello.txt", 11, tarfile.REGTYPE),
            ("a/" + "p" * 60 + "/" + "x" * 40 + ".txt", 0, tarfile.REGTYPE),
            ("link", 0, tarfile.SYMTYPE)]
        assert t.extractfile("hello.txt").read() == b"hello, tar\n"
    with tarfile.open(fileobj=io.BytesIO(_fixture("gnu_archive"))) as t:
        (m,) = t.getmembers()
        assert (m.name, m.size) == ("d/" + "n" * 120, 600)
        assert t.extractfile(m).read() == b"\x5a" * 600
    with tarfile.open(fileobj=io.BytesIO(_fixture("v7_archive"))) as t:
        (m,) = t.getmembers()
        assert (m.name, m.isfile(), t.extractfile(m).read()) == ("old.txt", True, b"v7\n")
