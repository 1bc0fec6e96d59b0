"""``rows: true``: ``decode_rows_<record>`` reads consecutive records as tuples.

A row is the record's fields in order; nested records are tuples too, a packed view is
its raw bytes, everything else is what the object holds. Every row must equal the
object the checked path gives, seen through that rule, and the run must stop exactly
where ``decode_prefix_<record>`` stops, on whole, cut and corrupted input alike.
"""

from __future__ import annotations

import dataclasses

import pytest

from bytewright.generated import htt as h
from bytewright.generator import pipeline, project
from bytewright.review import checks
from bytewright.runtime.packed import PackedArray

SCHEMA = """
bytewright: 1
family: rowed
enums:
  kind: {type: u8, values: {POINT: 1, NAMED: 2, NOTHING: 3}}
flags:
  marks: {type: u8, bits: {hot: 0, cold: 1}}
records:
  pair:
    fields:
      - {name: key, type: str, length: u16}
      - {name: value, type: str, length: u16}
  point:
    params:
      dims: {type: int}
    fields:
      - {name: xs, type: i64, repeat: {count: dims}, view: packed}
      - {name: w, type: f64}
  named:
    fields:
      - {name: name, type: str, length: u8}
      - {name: tags, type: pair, repeat: {prefix: u16}}
  item:
    rows: true
    params:
      dims: {type: int}
    fields:
      - {name: seq, type: u32}
      - {name: kind, type: kind}
      - {name: marks, type: marks}
      - name: body
        switch: kind
        cases: {POINT: point, NAMED: named, NOTHING: empty}
      - {name: extra, type: u16, if: "seq > 2"}
      - {name: data, type: bytes, length: u32}
      - {name: crc, type: u32, checksum: {algorithm: crc32, covers: preceding}}
"""


def row_of(value):
    """What the rows decoder gives for ``value``, by the documented rule."""
    if isinstance(value, PackedArray):
        return value.raw
    if dataclasses.is_dataclass(value) and not hasattr(value, "from_int"):  # not flags
        return tuple(row_of(getattr(value, f.name)) for f in dataclasses.fields(value))
    if isinstance(value, list):
        return [row_of(v) for v in value]
    return value


def _items(m, n: int = 12):
    out = []
    for i in range(n):
        kind = m.Kind(1 + i % 3)
        body = (m.Point([i, -i, 2**62 - i], i / 3) if kind is m.Kind.POINT
                else m.Named(f"n{i}", [m.Pair(f"k{j}", "v" * j) for j in range(i % 4)])
                if kind is m.Kind.NAMED else None)
        out.append(m.Item(i, kind, m.Marks(hot=bool(i & 1), cold=False), body,
                          7 if i > 2 else None, bytes([i]) * (i * 5)))
    return out


@pytest.fixture(scope="module")
def rowed(tmp_path_factory):
    from .conftest import build_module
    return build_module(SCHEMA, tmp_path_factory.mktemp("rows"), "rowed")


def _same_as_prefix(m, record: str, data: bytes, **params) -> int:
    rows, starts, stop = getattr(m, f"decode_rows_{record}")(data, **params)
    values, stop_prefix = getattr(m, f"decode_prefix_{record}")(data, **params)
    assert stop == stop_prefix
    assert rows == [row_of(v) for v in values]
    assert starts == [end for _, end in zip(values, [0] + [
        e for _, e in getattr(m, f"iter_{record}")(data, 0, stop, **params)], strict=False)]
    return len(rows)


def test_rows_are_the_records_fields_by_position(rowed):
    m = rowed
    items = _items(m)
    data = m.encode_many_item(items, dims=3)
    rows, starts, stop = m.decode_rows_item(data, dims=3)
    assert stop == len(data) and len(rows) == len(items)
    assert rows == [row_of(v) for v in m.decode_many_item(data, dims=3)]
    # nested records are tuples, the packed view its raw bytes, enums and flags as held
    point = rows[0][3]
    assert point == ((0).to_bytes(8, "little", signed=True) * 2
                     + (2**62).to_bytes(8, "little", signed=True), 0.0)
    assert rows[1][3] == ("n1", [("k0", "")]) and rows[4][3] == ("n4", [])
    assert rows[7][3] == ("n7", [("k0", ""), ("k1", "v"), ("k2", "vv")])
    assert rows[2][3] is None and rows[0][1] is m.Kind.POINT and rows[1][2] == m.Marks(hot=True)
    ends = [end for _, end in m.iter_item(data, dims=3)]
    assert starts == [0, *ends[:-1]]
    # from an offset, within an end that cuts the fifth record
    rows, starts, stop = m.decode_rows_item(data, starts[2], ends[5] - 1, dims=3)
    assert len(rows) == 3 and starts[0] == ends[1] and stop == ends[4]


def test_rows_stop_where_decode_prefix_stops_on_cut_and_corrupted_input(rowed):
    m = rowed
    data = m.encode_many_item(_items(m), dims=3)
    seen = set()
    for cut in range(len(data) + 1):
        seen.add(_same_as_prefix(m, "item", data[:cut], dims=3))
    for at in range(len(data)):
        b = bytearray(data)
        b[at] ^= 0x41
        _same_as_prefix(m, "item", bytes(b), dims=3)
    assert seen == set(range(13))


def test_a_record_without_rows_gets_no_rows_decoder(rowed):
    assert hasattr(rowed, "decode_rows_item") and not hasattr(rowed, "decode_rows_named")


def test_rows_on_a_versioned_record_is_a_problem(tmp_path):
    text = """
bytewright: 1
family: bad
records:
  head:
    rows: true
    params:
      version: {type: int}
    versions: {from: version, range: [1, 2]}
    fields:
      - {name: a, type: u8}
      - {name: b, type: u8, since: 2}
"""
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    found = [str(p) for p in pipeline.run([path]).problems]
    assert any("records.head.rows" in p and "versioned" in p for p in found), found


def test_rows_of_a_record_with_no_loop_is_a_problem(tmp_path, monkeypatch):
    """A record whose decoder is too large for the one loop cannot give rows: the
    generator says so on that record instead of leaving the function out silently."""
    from bytewright.generator import emit_fast
    monkeypatch.setattr(emit_fast.FastEmitter, "OPTIMISTIC_MAX_LINES", 3)
    path = tmp_path / "rowed.yaml"
    path.write_text(SCHEMA)
    found = [str(p) for p in pipeline.run([path]).problems]
    assert any("records.item.rows" in p and "no one-loop decoder" in p for p in found), found


# -- the shipped schemas: every record with rows, over its fixtures --------------------

def _rowed_fixtures():
    out = []
    for fx in checks.fixtures():
        if not fx.data:
            continue
        mod = project.package_project().load_module(fx.family)
        if hasattr(mod, f"decode_rows_{fx.record}"):
            out.append(fx)
    return out


ROWED = _rowed_fixtures()


def test_the_shipped_schemas_have_rows_fixtures():
    assert any(fx.record == "wal_entry" for fx in ROWED)


@pytest.mark.parametrize("fx", ROWED, ids=[f"{f.family}/{f.path.stem}" for f in ROWED])
def test_shipped_rows_agree_with_the_objects(fx):
    mod = project.package_project().load_module(fx.family)
    data = fx.data
    _same_as_prefix(mod, fx.record, data, **fx.params)
    for cut in range(0, len(data), max(1, len(data) // 64)):
        _same_as_prefix(mod, fx.record, data[:cut], **fx.params)


def test_htt_wal_rows_of_every_op():
    from .test_htt_replay_speed import SEM, _every_op
    entries = _every_op(300, seed=4)
    blob = h.encode_many_wal_entry(entries, semantic_dims=SEM, tail_layout=0)
    assert _same_as_prefix(h, "wal_entry", blob, semantic_dims=SEM, tail_layout=0) == len(entries)
