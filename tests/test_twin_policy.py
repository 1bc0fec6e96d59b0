"""Which records get one-loop twins (docs/schema-language.md, "Records read in runs").

The docs' rule: records read in runs (a record no other record holds, an item of a
list, a detect sequence, a ``rows: true`` record, ``many: true``) get ``_m_``/``_em_``;
``many: false`` refuses them; a sub-record's single-record twin stays where a kept twin
calls it. Without a twin, ``decode_many_``/``decode_prefix_``/``encode_many_`` give the
same values and errors as with one.
"""

from __future__ import annotations

import pytest

from bytewright.generator import pipeline
from bytewright.generator.fast import bulk
from bytewright.runtime.errors import DecodeError

SCHEMA = """
bytewright: 1
family: runs
endian: le
detect: [{record: page, magic: "hex:50414745", then: trailer}]
records:
  stamp:
    doc: Held once by page.
    fields:
      - {name: seconds, type: u32}
      - {name: note, type: str, length: u8}
  item:
    doc: An item of page's list.
    fields:
      - {name: key, type: u16}
      - {name: value, type: bytes, length: u8}
  body:
    doc: A switch case, held once; also read in runs on its own.
    many: true
    fields:
      - {name: a, type: u32}
      - {name: b, type: bytes, length: u16}
  other_body:
    doc: The other switch case, held once.
    fields:
      - {name: c, type: u64}
      - {name: d, type: str, length: u8}
  page:
    doc: A file's page, held by nothing.
    fields:
      - {name: magic, type: bytes, size: 4, const: "50414745"}
      - {name: stamp, type: stamp}
      - {name: kind, type: u8}
      - name: payload
        switch: kind
        cases: {1: body, 2: other_body}
      - {name: items, type: item, repeat: {prefix: u8}}
  trailer:
    doc: Read in sequence after the page (detect then:).
    fields:
      - {name: n, type: u32}
  header_only:
    doc: Held by nothing, but asks for no twins.
    many: false
    fields:
      - {name: x, type: u32}
"""


@pytest.fixture
def mod(schema_module):
    return schema_module(SCHEMA, "runs")


def _family():
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "runs.yaml"
        p.write_text(SCHEMA)
        return pipeline.run([p]).families["runs"]


def test_the_records_read_in_runs_are_the_ones_the_docs_name():
    assert bulk.read_in_runs(_family()) == {"page", "item", "trailer", "body"}


def test_one_loop_twins_only_where_records_are_read_in_runs(mod):
    for rec in ("page", "item", "trailer", "body"):
        assert hasattr(mod, f"_m_{rec}") and hasattr(mod, f"_em_{rec}"), rec
    for rec in ("stamp", "other_body", "header_only"):
        assert not hasattr(mod, f"_m_{rec}") and not hasattr(mod, f"_em_{rec}"), rec
    assert not hasattr(mod, "_u_header_only")  # nothing calls it


def test_every_twin_on_request():
    text = pipeline.render(_family(), all_twins=True)
    for rec in ("stamp", "other_body", "header_only", "page"):
        assert f"\ndef _m_{rec}(" in text and f"\ndef _em_{rec}(" in text, rec


def test_without_twins_the_run_functions_give_the_same_values_and_errors(mod):
    stamps = [mod.Stamp(i, "n" * i) for i in range(5)]
    data = mod.encode_many_stamp(stamps)
    assert data == b"".join(mod.encode_stamp(s) for s in stamps)
    assert mod.decode_many_stamp(data) == stamps
    assert mod.decode_prefix_stamp(data[:-1]) == (stamps[:4], len(data) - 9)
    with pytest.raises(DecodeError) as exc:
        mod.decode_many_stamp(data[:-1])
    assert exc.value.path.startswith("stamp[4]")
    with pytest.raises(Exception) as enc:
        mod.encode_many_stamp([stamps[0], mod.Stamp(-1, "")])
    assert "stamp[1]" in str(enc.value)


def test_a_run_with_twins_agrees_with_one_without(mod):
    items = [mod.Item(i, bytes([i]) * i) for i in range(9)]
    data = mod.encode_many_item(items)
    assert data == b"".join(mod.encode_item(i) for i in items)  # _em_ and the loop
    checked = mod._decode_many(mod._d_item, "item", data, 0, None, ())
    assert mod.decode_many_item(data) == checked == items  # _m_ and the checked loop
    with pytest.raises(DecodeError) as fast:
        mod.decode_many_item(data[:-1])
    with pytest.raises(DecodeError) as slow:
        mod._decode_many(mod._d_item, "item", data[:-1], 0, None, ())
    assert (fast.value.path, fast.value.offset) == (slow.value.path, slow.value.offset)
    assert fast.value.path.startswith("item[8]")


def test_a_page_decodes_through_its_twin_and_its_sub_records(mod):
    page = mod.Page(stamp=mod.Stamp(7, "hi"), kind=1, payload=mod.Body(3, b"xyz"),
                    items=[mod.Item(1, b"a")])
    data = mod.encode_page(page)
    assert mod.decode_page(data) == (page, len(data))
    assert mod.decode_many_page(data * 3) == [page] * 3


def test_drop_unreferenced_keeps_what_a_kept_function_calls():
    blocks = ["def _d_a(mv, pos, end):\n    return _d_b(mv, pos, end)\n\n"
              "def _u_a(mv, pos, end):\n    return _u_b(mv, pos, end)",
              "def _d_b(mv, pos, end):\n    pass\n\ndef _u_b(mv, pos, end):\n    pass",
              "def _d_c(mv, pos, end):\n    pass\n\ndef _u_c(mv, pos, end):\n    pass",
              "_K = 1"]
    out = "\n".join(bulk.drop_unreferenced(blocks, frozenset({"a"})))
    assert "def _u_a(" in out and "def _u_b(" in out  # kept, and called by a kept twin
    assert "def _u_c(" not in out  # neither
    assert "def _d_c(" in out and "_K = 1" in out  # checked code and constants stay


def test_many_is_a_boolean_in_the_schema_language(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(SCHEMA.replace("many: true", "many: often"))
    problems = [str(p) for p in pipeline.run([path]).problems]
    assert any("many" in p and "often" in p for p in problems), problems


def test_the_twins_benchmark_measures_the_twins_a_module_has(mod):
    from bytewright.bench import twins

    items = mod.encode_many_item([mod.Item(i, b"v" * (i % 5)) for i in range(50)])
    got = twins._gains(mod, "item", items, {}, ())
    assert set(got) == {"m_vs_u_loop", "m_vs_checked", "em_vs_e_loop"}
    assert all(v > 0 for v in got.values())
    stamps = mod.encode_many_stamp([mod.Stamp(i, "s") for i in range(50)])
    assert twins._gains(mod, "stamp", stamps, {}, ()) == {}  # no twin, nothing to measure
    # the loop the one-loop twin replaces reads the same records
    assert twins._loop_over_u(mod._u_item, mod._d_item, "item", items, 0, len(items), ()) \
        == mod.decode_many_item(items)
