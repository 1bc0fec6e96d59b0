"""Segment files (family 2): open with lazy per-region checksums, and the writer.

Header and regions are generated codecs (``segment_header``, ``*_region``); this module
owns placement (16 KiB alignment, overlaps, bounds), lazy validation and the trailer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...generated import ze
from ..checksums import xxh3_64
from ..errors import ChecksumError, ConstraintError, DecodeError, TruncatedError
from . import registry, seals

ALIGN = 16384
CHUNK = 65536
WRITER_ORDER = (1, 2, 4, 3, 5, 7, 12, 13, 14)  # then the checksum table (11), always last
TRAILER = ze.LAYOUT["segment_trailer"]["layouts"][0]["fixed_size"]  # 8
VECTOR_HEADER = ze.LAYOUT["vector_header"]["layouts"][0]["fixed_size"]  # codes start after it

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
        e = self.entries.get(kind)
        if e is None:
            what = ("no DocumentVersions region: the segment has no document identity"
                    if kind == 12 else f"the segment has no region of kind {kind}")
            raise ConstraintError(what, offset=64, path=f"segment.region[{kind}]",
                                  expected=kind, found=sorted(self.entries))
        data = self.buf[e.offset:e.offset + e.length]
        if kind not in self._verified:
            got = xxh3_64(data)
            if got != e.checksum:
                raise ChecksumError("region checksum mismatch", offset=e.offset,
                                    path=f"segment.region[{kind}]", expected=e.checksum,
                                    found=got)
            self._verified.add(kind)
        return data

    @staticmethod
    def decodable(kind: int) -> bool:
        """Whether :meth:`region` decodes ``kind``. Registered kinds without a codec here
        (postings 6, reserved 8, 9, 10 and 4096) are opaque: their checksum is verified
        and their bytes are skipped, as unknown kinds are (rules: "bounded and skipped")."""
        return kind == 7 or kind in DECODERS

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
        try:
            check_region(kind, value, self.header)
        except DecodeError as exc:
            exc.offset = self.entries[kind].offset + (exc.offset or 0)
            raise exc.prefixed(f"region[{kind}]") from None
        return value

    def document_versions(self):
        """The DocumentVersions rows (region kind 12): each row's document identity."""
        return self.region(12).rows

    def stored_text(self) -> list[str | None]:
        """Stored text rows (region kind 14), every present row validated as UTF-8 first."""
        return stored_text_rows(self.region(14))

    def stored_metadata(self) -> list[bytes]:
        """Stored metadata rows (region kind 13), offsets validated."""
        return stored_metadata_rows(self.region(13))

    def validate_all(self) -> None:
        """Every region checksum (unknown kinds included) and the file trailer."""
        for kind in self.entries:
            self.region_bytes(kind)
        for e in self.unknown:
            if xxh3_64(self.buf[e.offset:e.offset + e.length]) != e.checksum:
                raise ChecksumError("region checksum mismatch", offset=e.offset,
                                    path=f"segment.region[{e.kind}]")
        n = len(self.buf)
        trailer, _ = ze.decode_segment_trailer(self.buf, n - TRAILER)
        want = trailer.checksum
        got = xxh3_64(self.buf[:n - TRAILER])
        if want != got:
            raise ChecksumError("segment trailer mismatch", offset=n - 8, path="segment.trailer",
                                expected=got, found=want)


# -- region rules a layout cannot state ---------------------------------------------------

def _ceil_half(n: int) -> int:
    return (n + 1) // 2


def _vector_strides(scheme: int, dims: int) -> tuple[int | None, int | None]:
    """(row stride, factor stride) of the codes and factors regions for a scheme."""
    if scheme == 4:
        return _ceil_half(dims), 12
    if scheme == 2:
        return dims, 8
    if scheme == 0:
        return dims * 4, None
    return None, None  # scheme 1: live, payload not identified (U4)


def check_vector_header(kind: int, h, seg) -> None:
    """The vector header of regions 3/4/5 against the segment header (dims, rows, scheme)."""
    if h.dims != seg.dims:
        raise ConstraintError("vector header dims must equal the segment dims", offset=4,
                              path="header.dims", expected=seg.dims, found=h.dims)
    if h.row_count != seg.row_count:
        raise ConstraintError("vector header row_count must equal the segment row count",
                              offset=24, path="header.row_count", expected=seg.row_count,
                              found=h.row_count)
    if kind == 5:
        return  # scheme 0, stride dims x 4, factor stride 0: a schema assert
    if int(h.scheme) != int(seg.scheme):
        raise ConstraintError("vector header scheme must repeat the segment scheme", offset=0,
                              path="header.scheme", expected=int(seg.scheme), found=int(h.scheme))
    row, factor = _vector_strides(int(h.scheme), h.dims)
    if kind == 3 and row is not None and h.row_stride != row:
        raise ConstraintError("codes row stride does not match the scheme and dims", offset=8,
                              path="header.row_stride", expected=row, found=h.row_stride)
    if kind == 4 and factor is not None and h.factor_stride != factor:
        raise ConstraintError("factor stride does not match the scheme", offset=12,
                              path="header.factor_stride", expected=factor,
                              found=h.factor_stride)


def check_offsets(ends, data_len: int, base: int, *, what: str, start: int = 0) -> None:
    """End offsets are monotonic (from ``start``) and the last one equals ``data_len``."""
    prev = start
    for i, e in enumerate(ends):
        if e < prev:
            raise ConstraintError(f"{what} end offsets must be monotonic", offset=base + 8 * i,
                                  path=f"ends[{i}]", expected=f">= {prev}", found=e)
        prev = e
    if prev != data_len:
        raise ConstraintError(f"{what} last end offset must equal the data length",
                              offset=base + 8 * max(len(ends) - 1, 0), path="ends",
                              expected=data_len, found=prev)


def _check_bitmap_padding(bitmap: bytes, rows: int, at: int, what: str) -> None:
    if rows % 8 and bitmap and bitmap[-1] >> (rows % 8):
        raise ConstraintError(f"{what} bitmap padding bits must be zero",
                              offset=at + len(bitmap) - 1, path="presence", found=bitmap[-1])


def check_stored_metadata(v, rows: int | None = None) -> None:
    if rows is not None and len(v.ends) != rows:
        raise ConstraintError("stored metadata row count must equal the segment row count",
                              offset=0, path="row_count", expected=rows, found=len(v.ends))
    check_offsets(v.ends, len(v.data), 16, what="stored metadata")


def stored_metadata_rows(v) -> list[bytes]:
    check_stored_metadata(v)
    data, out, prev = bytes(v.data), [], 0
    for e in v.ends:
        out.append(data[prev:e])
        prev = e
    return out


def check_stored_text(v, rows: int | None = None) -> None:
    """Row count, bitmap padding, monotonic ends (absent rows unchanged), final end equals
    the byte area, and every present row valid UTF-8 (all checked before any row is used)."""
    n = len(v.ends)
    if rows is not None and n != rows:
        raise ConstraintError("stored text row count must equal the segment row count",
                              offset=0, path="row_count", expected=rows, found=n)
    _check_bitmap_padding(v.presence, n, 8, "stored text presence")
    base = 8 + len(v.presence)
    data, prev = bytes(v.data), 0
    for i, e in enumerate(v.ends):
        present = v.presence[i >> 3] >> (i & 7) & 1
        if e < prev or e > len(data):
            raise ConstraintError("stored text end offsets must be monotonic and within the "
                                  "data", offset=base + 8 * i, path=f"ends[{i}]",
                                  expected=f"{prev}..{len(data)}", found=e)
        if not present and e != prev:
            raise ConstraintError("absent stored text row must keep the end offset unchanged",
                                  offset=base + 8 * i, path=f"ends[{i}]", expected=prev, found=e)
        if present:
            try:
                data[prev:e].decode("utf-8")
            except UnicodeDecodeError:
                raise ConstraintError("stored text row is not valid UTF-8",
                                      offset=base + 8 * n + prev, path=f"rows[{i}]") from None
        prev = e
    if prev != len(data):
        raise ConstraintError("stored text last end offset must equal the data length",
                              offset=base + 8 * max(n - 1, 0), path="ends", expected=len(data),
                              found=prev)


def stored_text_rows(v) -> list[str | None]:
    """Every row (None when absent); nothing is returned unless every present row is UTF-8."""
    check_stored_text(v)
    data, out, prev = bytes(v.data), [], 0
    for i, e in enumerate(v.ends):
        out.append(data[prev:e].decode("utf-8") if v.presence[i >> 3] >> (i & 7) & 1 else None)
        prev = e
    return out


def check_bit4_codes(v) -> None:
    """Bit4 with odd dims: the last low nibble of every row is zero (facts §5 codes)."""
    import numpy as np

    h = v.header
    if int(h.scheme) != 4 or h.dims % 2 == 0 or not h.row_count or h.row_stride < 1:
        return
    rows = np.asarray(v.codes).reshape(h.row_count, h.row_stride)
    bad = np.flatnonzero(rows[:, -1] & 0x0F)
    if bad.size:
        r = int(bad[0])
        raise ConstraintError("Bit4 codes with odd dims must end each row in a zero nibble",
                              offset=VECTOR_HEADER + r * h.row_stride + h.row_stride - 1,
                              path=f"codes[{r}]", expected=0, found=int(rows[r, -1] & 0x0F))


def check_bit4_factors(v) -> None:
    """Every Bit4Factors value is finite (facts §5 factors)."""
    import numpy as np

    if v.bit4 is None:
        return
    arr = np.asarray(v.bit4)
    for name in arr.dtype.names or ():
        bad = np.flatnonzero(~np.isfinite(arr[name]))
        if bad.size:
            r = int(bad[0])
            raise ConstraintError("Bit4 factors must be finite", offset=VECTOR_HEADER + 12 * r,
                                  path=f"bit4[{r}].{name}", expected="finite",
                                  found=float(arr[name][r]))


def columns(v) -> list:
    """Decode and check a Columns region's per-column data (facts §5 Columns): the
    mandatory ``ts`` column first (id 0, I64, not nullable), presence padding zero, Bool
    values 0/1, and no trailing bytes. Returns one ``ColumnData`` per definition."""
    import numpy as np

    if not v.defs:
        raise ConstraintError("columns region must define the ts column first", offset=4,
                              path="defs", expected="ts", found=None)
    ts = v.defs[0]
    if (ts.column_id, ts.name, int(ts.type), ts.nullable) != (0, "ts", 2, 0):
        raise ConstraintError("the first column must be ts (id 0, I64, not nullable)",
                              offset=8, path="defs[0]", expected=(0, "ts", 2, 0),
                              found=(ts.column_id, ts.name, int(ts.type), ts.nullable))
    data = v.data
    base = len(ze.encode_columns_region(ze.ColumnsRegion(v.row_count, v.defs, b"")))
    pos, out = 0, []
    for i, d in enumerate(v.defs):
        try:
            col, end = ze.decode_column_data(data, pos, type=int(d.type), rows=v.row_count)
        except DecodeError as exc:
            exc.offset = base + (exc.offset or 0)
            raise exc.prefixed(f"columns[{i}]") from None
        _check_bitmap_padding(col.presence, v.row_count, base + pos + 4, f"column {d.name}")
        if col.bools is not None:
            vals = np.asarray(col.bools)
            bad = np.flatnonzero(vals > 1)
            if bad.size:
                r = int(bad[0])
                raise ConstraintError("Bool column values must be 0 or 1",
                                      offset=base + pos + 4 + len(col.presence) + r,
                                      path=f"columns[{i}].bools[{r}]", expected="0 or 1",
                                      found=int(vals[r]))
        out.append(col)
        pos = end
    if pos != len(data):
        raise ConstraintError("trailing bytes after the columns", offset=base + pos,
                              path="columns", expected=len(data), found=pos)
    return out


def check_region(kind: int, value, seg) -> None:
    """Rules of a decoded region against its segment header."""
    if kind in (3, 4, 5):
        check_vector_header(kind, value.header, seg)
        if kind == 3:
            check_bit4_codes(value)
        elif kind == 4:
            check_bit4_factors(value)
    elif kind == 13:
        check_stored_metadata(value, seg.row_count)
    elif kind == 14:
        check_stored_text(value, seg.row_count)
    elif kind == 12 and len(value.rows) != seg.row_count:
        raise ConstraintError("document versions must hold one row per segment row", offset=0,
                              path="rows", expected=seg.row_count, found=len(value.rows))
    elif kind == 2:
        if value.row_count != seg.row_count:
            raise ConstraintError("alive row_count must equal the segment row count", offset=0,
                                  path="row_count", expected=seg.row_count, found=value.row_count)
        _check_bitmap_padding(value.bitmap, value.row_count, 8, "alive")
    elif kind == 1:
        if value.row_count != seg.row_count:
            raise ConstraintError("columns row_count must equal the segment row count",
                                  offset=0, path="row_count", expected=seg.row_count,
                                  found=value.row_count)
        columns(value)


def open_segment(buf, expected_id: bytes | None = None) -> Segment:
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    n = len(mv)
    registry.read_header(mv, expected_family=2)
    seals.segment_header(mv)  # the header checksum before the fields it covers
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
    """A complete segment: header, regions in the writer's order (``WRITER_ORDER``; kinds it
    does not name follow in the order given) each at the next 16 KiB boundary, the
    checksum table (always last, unpadded, built here) and the xxh3-64 trailer."""
    kinds = [k for k, _ in regions]
    if 11 in kinds:
        raise ConstraintError("the checksum table (kind 11) is built by the writer",
                              path="regions", found=11)
    if len(set(kinds)) != len(kinds):
        raise ConstraintError("duplicate region kind", path="regions", found=kinds)
    rank = {k: i for i, k in enumerate(WRITER_ORDER)}
    regions = sorted(regions, key=lambda r: rank.get(r[0], len(WRITER_ORDER)))  # stable
    regions = regions + [(11, checksum_table(regions))]
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
    out += ze.encode_segment_trailer(ze.SegmentTrailer(xxh3_64(bytes(out))))
    return bytes(out)
