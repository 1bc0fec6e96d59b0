"""Field values of the ZIP fixtures: `bytewright fixtures write` encodes each one into
fixtures/zip/<name>.hex and refuses if an existing fixture's bytes would change."""

import zlib

STAMP = dict(hour=12, minute=34, second_half=28, year=2023, month=5, day=17)


def _deflate(data: bytes) -> bytes:
    co = zlib.compressobj(6, zlib.DEFLATED, -15)
    return co.compress(data) + co.flush()


def cases(codec):
    """(name, record, params, value, doc) per fixture; ``codec`` is the generated module."""
    M = codec.CompressionMethod
    rows = [("readme.txt", b"A stored member.\n", M.STORED),
            ("notes/log.txt", b"deflated " * 30, M.DEFLATED)]
    members, entries = [], []
    for name, data, method in rows:
        members.append(codec.LocalFile(version_needed=20, deflate_option=0, utf8_name=False,
                                       method=method, name=name, extra=[], data=data, **STAMP))
        stored = data if method == M.STORED else _deflate(data)
        entries.append(codec.CentralEntry(
            zip_version=20, host=codec.HostSystem.UNIX, version_needed=20, deflate_option=0,
            utf8_name=False, method=method, crc32=zlib.crc32(data),
            compressed_size=len(stored), uncompressed_size=len(data), disk_start=0,
            internal_attrs=0, dos_attrs=0, unix_mode=0o100644, name=name, extra=[],
            comment=b"", **STAMP))
    eocd = codec.EndOfCentralDirectory(disk_number=0, cd_disk=0,
                                       comment=b"fixture")
    yield ("two_members", "zip_file", {},
           codec.ZipFile(eocd=eocd, members=members, entries=entries),
           "A stored and a deflated member, the central directory and the end record.")
    yield ("local_deflated", "local_file", {}, members[1],
           "One local file header and its deflated data.")
