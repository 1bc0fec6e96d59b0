"""Segment files (family 2): open with lazy per-region checksums, and the writer.

Header and regions are generated codecs (``segment_header``, ``*_region``); this module
owns placement (16 KiB alignment, overlaps, bounds), lazy validation and the trailer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...generated import ze
from ..checksums import xxh3_64
from ..errors import ChecksumError, ConstraintError, TruncatedError
from . import registry

ALIGN = 16384
CHUNK = 65536
WRITER_ORDER = (1, 2, 4, 3, 5, 7, 12, 13, 14)  # then the checksum table (11), always last

DECODERS = {
    1: ze.decode_columns_region, 2: ze.decode_alive_region, 3: ze.decode_vector_codes_region,
    4: ze.decode_vector_factors_region, 5: ze.decode_vector_rescore_region,
    11: ze.decode_checksum_table_region, 12: ze.decode_document_versions_region,
    13: ze.decode_stored_metadata_region, 14: ze.decode_stored_text_region,
}


def align_up(n: int, a: int = ALIGN) -> int:
    return (n + a - 1) // a * a


@dataclass
class Segment:
    buf: memoryview
    header: ze.SegmentHeader
    entries: dict[int, ze.RegionEntry]
    unknown: list[ze.RegionEntry] = field(default_factory=list)
    _verified: set = field(default_factory=set)

    def region_bytes(self, kind: int) -> memoryview:
        """The region's bytes, its checksum verified on first access (lazy)."""
        e = self.entries[kind]
        data = self.buf[e.offset:e.offset + e.length]
        if kind not in self._verified:
            got = xxh3_64(data)
            if got != e.checksum:
                raise ChecksumError("region checksum mismatch", offset=e.offset,
                                    path=f"segment.region[{kind}]", expected=e.checksum,
                                    found=got)
            self._verified.add(kind)
        return data

    def region(self, kind: int):
        """A known region decoded with its generated codec (exact length, no trailing bytes)."""
        data = self.region_bytes(kind)
        if kind == 7:
            from .graph import open_blocks  # noqa: PLC0415
            return open_blocks(data, dims=self.header.dims, rows=self.header.row_count)
        if kind not in DECODERS:
            raise ConstraintError("region kind has no decoder (opaque)", path=f"region[{kind}]",
                                  found=kind)
        value, end = DECODERS[kind](data)
        if end != len(data):
            raise ConstraintError("trailing bytes after region", offset=self.entries[kind].offset
                                  + end, path=f"region[{kind}]", expected=len(data), found=end)
        return value

    def validate_all(self) -> None:
        """Every region checksum (unknown kinds included) and the file trailer."""
        for kind in self.entries:
            self.region_bytes(kind)
        for e in self.unknown:
            if xxh3_64(self.buf[e.offset:e.offset + e.length]) != e.checksum:
                raise ChecksumError("region checksum mismatch", offset=e.offset,
                                    path=f"segment.region[{e.kind}]")
        n = len(self.buf)
        want = int.from_bytes(self.buf[n - 8:], "little")
        got = xxh3_64(self.buf[:n - 8])
        if want != got:
            raise ChecksumError("segment trailer mismatch", offset=n - 8, path="segment.trailer",
                                expected=got, found=want)


def open_segment(buf, expected_id: bytes | None = None) -> Segment:
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    n = len(mv)
    registry.read_header(mv, expected_family=2)
    header, hend = ze.decode_segment_header(mv)
    header_length = hend  # the generated codec asserts header_length == 72 + 32 x regions
    if header_length > n - 8:
        raise TruncatedError("header_length exceeds the file", offset=16, path="header_length",
                             expected=n - 8, found=header_length)
    if header.file_length != n:
        raise ConstraintError("file_length must equal the file size", offset=24,
                              path="file_length", expected=n, found=header.file_length)
    if expected_id is not None and header.segment_id != expected_id:
        raise ConstraintError("segment id mismatch", offset=32, path="segment_id",
                              expected=expected_id, found=header.segment_id)
    first = align_up(header_length)
    entries: dict[int, ze.RegionEntry] = {}
    unknown: list[ze.RegionEntry] = []
    spans = []
    for i, e in enumerate(header.regions):
        path = f"regions[{i}]"
        if e.kind in entries or any(u.kind == e.kind for u in unknown):
            raise ConstraintError("duplicate region kind", offset=64 + 32 * i, path=path,
                                  found=e.kind)
        if e.offset < first:
            raise ConstraintError("region starts inside the header", offset=64 + 32 * i + 8,
                                  path=path + ".offset", expected=f">= {first}", found=e.offset)
        if e.offset + e.length > n - 8:
            raise ConstraintError("region ends past the trailer", offset=64 + 32 * i + 16,
                                  path=path + ".length", expected=n - 8,
                                  found=e.offset + e.length)
        if e.kind in registry.REGION_FAMILY:
            registry.check_version(registry.REGION_FAMILY[e.kind], e.version,
                                   offset=64 + 32 * i + 2, path=path + ".version")
        if e.kind in registry.REGION_KINDS:
            entries[e.kind] = e
        else:
            unknown.append(e)  # unknown kinds are bounded and skipped, not rejected
        spans.append((e.offset, e.offset + e.length, e.kind))
    spans.sort()
    for (_a0, a1, ka), (b0, _b1, kb) in zip(spans, spans[1:], strict=False):
        if b0 < a1:
            raise ConstraintError("regions overlap", offset=b0, path="regions",
                                  expected=f"kind {ka} ends at {a1}", found=f"kind {kb}")
    return Segment(mv, header, entries, unknown)


def checksum_table(regions: list[tuple[int, bytes]]) -> bytes:
    entries = []
    for kind, data in regions:
        for i in range(0, len(data), CHUNK):
            entries.append(ze.ChecksumEntry(kind, i // CHUNK, xxh3_64(data[i:i + CHUNK])))
    return ze.encode_checksum_table_region(ze.ChecksumTableRegion(entries))


def build_segment(segment_id: bytes, row_count: int, scheme: int, dims: int,
                  regions: list[tuple[int, bytes]]) -> bytes:
    """A complete segment: header, regions (in the given order) each at the next 16 KiB
    boundary, the checksum table (always last, unpadded) and the xxh3-64 trailer."""
    regions = list(regions) + [(11, checksum_table(regions))]
    header_len = 72 + 32 * len(regions)
    pos = align_up(header_len)
    entries, placed = [], []
    for i, (kind, data) in enumerate(regions):
        entries.append(ze.RegionEntry(kind, registry.current_version(
            registry.REGION_FAMILY[kind]) if kind in registry.REGION_FAMILY else 1, pos,
            len(data), xxh3_64(data)))
        placed.append((pos, data))
        pos += len(data)
        if i < len(regions) - 1:
            pos = align_up(pos)
    total = pos + 8
    hdr = ze.encode_segment_header(ze.SegmentHeader(total, segment_id, row_count,
                                                    ze.QuantScheme(scheme), dims, entries))
    out = bytearray(total - 8)
    out[:len(hdr)] = hdr
    for at, data in placed:
        out[at:at + len(data)] = data
    out += xxh3_64(bytes(out)).to_bytes(8, "little")
    return bytes(out)
