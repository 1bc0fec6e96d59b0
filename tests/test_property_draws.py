"""The property harness (bytewright.properties) draws valid values for three constructs
it cannot steer by a single constant: a ``bytes`` param with no default, a
``repeat: {until_item: ...}`` whose test is not ``_item.FIELD == CONSTANT``, and a value
with no bytes that a bit range derives its value from. Each schema here is drawn for on
every codec path (valid and near-valid values), and the drawn values are checked against
what the schema asks, computed here by hand."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from bytewright.generator import pipeline
from bytewright.properties import Builder, run_record
from bytewright.properties import numbers as numbers_mod

SCHEMA = """
bytewright: 1
family: draws
records:
  block:
    params:
      marker: {type: bytes, doc: "the file's 6-byte marker"}
      label: {type: bytes, doc: "a label of any length"}
    fields:
      - {name: n, type: u8}
      - {name: sync, type: bytes, size: 6, value: marker,
         assert: [{check: "sync == marker", message: marker differs}]}
      - {name: note, type: u8, if: "label != marker"}
  entry:
    fields:
      - {name: key, type: bytes, size: 4}
      - {name: weight, type: u8}
      - {name: extra, type: u16, if: "sum(key) != 0"}
  listing:
    fields:
      - name: entries
        type: entry
        repeat: {until_item: "sum(_item.key) + _item.weight == 0"}
      - {name: trailer, type: u8}
  stamp:
    fields:
      - name: packed
        type: u16
        bits:
          year_from_1980: {bits: [9, 15], value: "year - 1980"}
          left: {bits: [0, 3], value: "20 - level"}
          month: {bits: [4, 8], valid: {min: 1, max: 12}}
      - {name: year, value: "year_from_1980 + 1980"}
      - {name: level, value: "20 - left"}
"""


@pytest.fixture
def draws(schema_module, tmp_path):
    m = schema_module(SCHEMA, "draws")
    src = tmp_path / "draws_src.yaml"
    src.write_text(SCHEMA)
    return Builder(pipeline.run([src]).families["draws"], m)


def _cases(builder: Builder, record: str, n: int = 60) -> list:
    out = []

    @settings(max_examples=n, derandomize=True, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(builder.case_strategy(record))
    def collect(case):
        out.append(case)

    collect()
    return out


@pytest.mark.parametrize("record", ["block", "listing", "stamp"])
@pytest.mark.parametrize("kind", ["valid", "near"])
def test_drawn_values_agree_on_every_path(draws, record, kind):
    r = run_record(draws, record, max_examples=15, kind=kind, shrink=False)
    assert r.status == "ok", r.line()
    if kind == "valid":
        assert r.examples >= 1, r.line()


def test_a_bytes_param_is_drawn_at_the_size_of_the_field_it_fills(draws):
    cases = _cases(draws, "block")
    assert {len(c.params["marker"]) for c in cases} == {6}  # ``size: 6`` of ``sync``
    # read by a condition only, with no size to take: several lengths are drawn
    assert len({len(c.params["label"]) for c in cases}) > 1
    for c in cases:
        assert (c.value.note is None) == (c.params["label"] == c.params["marker"])


def test_until_item_ends_the_list_at_the_first_item_the_test_holds_on(draws):
    cases = _cases(draws, "listing")
    assert any(len(c.value.entries) > 1 for c in cases)
    for c in cases:
        held = [sum(e.key) + e.weight == 0 for e in c.value.entries]
        assert held[-1] and not any(held[:-1]), c


def test_a_virtual_is_drawn_within_what_its_bit_ranges_hold(draws):
    years, levels = set(), set()
    for c in _cases(draws, "stamp"):
        years.add(c.value.year)
        levels.add(c.value.level)
    # 7 bits of ``year - 1980``: 1980..2107; 4 bits of ``20 - level``: 5..20
    assert years <= set(range(1980, 2108)) and len(years) > 1
    assert levels <= set(range(5, 21)) and len(levels) > 1


def test_virtual_bounds_solve_a_linear_value_either_way_round(draws):
    rec = draws.family.records["stamp"]
    unknown = type("Unknown", (Exception,), {})
    assert numbers_mod.virtual_bounds(draws, rec, "year", unknown) == (1980, 2107)
    assert numbers_mod.virtual_bounds(draws, rec, "level", unknown) == (5, 20)
