"""Lookahead fields (``peek: true``) and repeats chained by a decoded value (``chain:``
naming a model field, an optional field or a value with no type), on the fast path
(checked and optimistic decoders) and the Construct path (interpreted and compiled),
decode and encode, against bytes written out by hand."""

from __future__ import annotations

import pytest

from bytewright.runtime.errors import ConstraintError, DecodeError, EncodeError, TruncatedError

# A message stream with "running" op codes: a message whose first byte is below 0x80
# leaves out its op code, and the previous message's op applies.
RUNNING = """
bytewright: 1
family: running
endian: be
records:
  msg:
    params: {running: {type: int, default: 0}}
    fields:
      - {name: lead, type: u8, peek: true}
      - {name: op, type: u8, if: "lead >= 0x80"}
      - name: body
        switch: "op if op is not None else running"
        cases: {0x81: one, 0x82: two}
      - {name: op_now, value: "op if op is not None else running"}
  one:
    fields:
      - {name: a, type: u8, valid: {max: 127}}
  two:
    fields:
      - {name: a, type: u8, valid: {max: 127}}
      - {name: b, type: u16}
  stream:
    fields:
      - {name: n, type: u8}
      - name: msgs
        type: msg
        repeat: {count: n}
        chain: {param: running, from: op_now, first: 0}
      - name: rest
        type: msg
        repeat: eos
        chain: {param: running, from: op_now, first: 0x81}
  opt:
    params: {prev: {type: int, default: 0}}
    fields:
      - {name: lead, type: u8, peek: true}
      - {name: tag, type: u8, if: "lead >= 0x80"}
      - {name: x, type: u8}
      - {name: seen, value: "prev if prev is not None else 1000"}
  opts:
    fields:
      - name: items
        type: opt
        repeat: eos
        chain: {param: prev, from: tag, first: 7}
"""

# n = 2 | 82 05 0007 | 09 0008 (op 82 runs on) | 05 (op 81 = first) | 82 01 0002
STREAM = bytes([0x02, 0x82, 0x05, 0x00, 0x07, 0x09, 0x00, 0x08,
                0x05, 0x82, 0x01, 0x00, 0x02])


def decoders(m, rec: str):
    yield "fast", lambda data, **kw: m.DECODERS[rec](data, **kw)[0]
    yield "construct", lambda data, **kw: m.CONSTRUCT_DECODERS[rec](data, **kw)
    yield "compiled", lambda data, **kw: m.CONSTRUCT_DECODERS[rec](data, compiled=True, **kw)


def encoders(m, rec: str):
    yield "fast", m.ENCODERS[rec]
    yield "construct", m.CONSTRUCT_ENCODERS[rec]
    yield "compiled", lambda value, **kw: m.CONSTRUCT_ENCODERS[rec](value, compiled=True, **kw)


def errors(m, rec: str, data: bytes, **kw) -> set[tuple]:
    out = set()
    for name, decode in decoders(m, rec):
        with pytest.raises(DecodeError) as info:
            decode(data, **kw)
        out.add((type(info.value).__name__, info.value.path, info.value.offset))
        assert name
    return out


@pytest.fixture
def m(schema_module):
    return schema_module(RUNNING, "running")


def test_running_op_codes_decode_on_every_path(m):
    want = m.Stream(
        msgs=[m.Msg(op=0x82, body=m.Two(a=5, b=7), op_now=0x82),
              m.Msg(op=None, body=m.Two(a=9, b=8), op_now=0x82)],
        rest=[m.Msg(op=None, body=m.One(a=5), op_now=0x81),
              m.Msg(op=0x82, body=m.Two(a=1, b=2), op_now=0x82)])
    for name, decode in decoders(m, "stream"):
        assert decode(STREAM) == want, name
    assert m.decode_stream(STREAM)[1] == len(STREAM)
    # the peeked byte is no attribute of the model and no constructor argument
    assert not hasattr(want.msgs[0], "lead")


def test_encoders_write_the_op_code_where_the_model_holds_one(m):
    value = m.decode_stream(STREAM)[0]
    for name, encode in encoders(m, "stream"):
        assert encode(value) == STREAM, name
    # an op code given where the bytes ran on is written: one byte more, same meaning
    value.msgs[1].op = 0x82
    longer = STREAM[:5] + b"\x82" + STREAM[5:]
    for name, encode in encoders(m, "stream"):
        assert encode(value) == longer, name
    for name, decode in decoders(m, "stream"):
        assert decode(longer) == value, name


def test_the_optimistic_twins_agree(m):
    """``decode_many_msg`` runs the optimistic loop: one message, its op running from
    the caller's param, and a peek at the very end of the buffer is a truncation."""
    data = bytes([0x82, 0x05, 0x00, 0x07])
    assert m.decode_many_msg(data * 3) == [m.Msg(op=0x82, body=m.Two(a=5, b=7), op_now=0x82)] * 3
    assert m.decode_msg(bytes([0x05]), running=0x81)[0] == m.Msg(None, m.One(5), 0x81)
    assert m.construct_decode_msg(bytes([0x05]), running=0x81) == m.Msg(None, m.One(5), 0x81)
    with pytest.raises(TruncatedError) as info:
        m.decode_msg(b"")
    assert (info.value.path, info.value.offset) == ("msg.lead", 0)


@pytest.mark.parametrize(("data", "error"), [
    # the second message's first byte is missing: the peek is where it stops
    (STREAM[:5], ("TruncatedError", "stream.msgs[1].lead", 5)),
    # a data byte with no op code running (first: 0)
    (bytes([0x01, 0x05]), ("ConstraintError", "stream.msgs[0].body", 1)),
    # an unknown op code, after the count
    (bytes([0x00, 0x83, 0x01]), ("ConstraintError", "stream.rest[0].body", 2)),
    # more messages counted than bytes can hold (one byte each at least)
    (bytes([0x03, 0x05, 0x05]), ("TruncatedError", "stream.msgs", 1)),
])
def test_errors_agree_on_every_path(m, data, error):
    assert errors(m, "stream", data) == {error}


def test_a_chain_of_an_optional_field_passes_its_absence(m):
    """``from: tag``: each item gets the previous item's ``tag`` -- None where it had
    none -- and the first item ``first``."""
    data = bytes([0x90, 0x01,   # tag 0x90, x 1 (prev = first = 7)
                  0x02,         # no tag, x 2 (prev = 0x90)
                  0x03])        # x 3 (prev = None: the value says 1000)
    want = m.Opts(items=[m.Opt(tag=0x90, x=1, seen=7), m.Opt(tag=None, x=2, seen=0x90),
                         m.Opt(tag=None, x=3, seen=1000)])
    for name, decode in decoders(m, "opts"):
        assert decode(data) == want, name
    for name, encode in encoders(m, "opts"):
        assert encode(want) == data, name


def test_a_model_the_switch_cannot_place_is_an_encode_error_on_every_path(m):
    value = m.Stream(msgs=[m.Msg(op=None, body=m.One(a=5), op_now=0)], rest=[])
    for name, encode in encoders(m, "stream"):
        with pytest.raises(EncodeError):
            encode(value)
        assert name


def test_fixed_offset_chains_are_unchanged(schema_module):
    """A chain from a stored integer at a fixed offset still reads its bytes (the
    checksum chains of write-ahead logs): the generated code names no decoded value."""
    text = RUNNING.replace("family: running", "family: fixed") + """
  cell:
    params: {p: {type: int, default: 0}}
    fields:
      - {name: v, type: u8}
      - {name: w, type: u8, value: "p"}
  cells:
    fields:
      - {name: items, type: cell, repeat: eos, chain: {param: p, from: v, first: 9}}
"""
    f = schema_module(text, "fixed")
    data = bytes([0x01, 0x09, 0x02, 0x01])  # w = the previous v (first 9)
    want = f.Cells(items=[f.Cell(1), f.Cell(2)])
    for name, decode in decoders(f, "cells"):
        assert decode(data) == want, name
    for name, encode in encoders(f, "cells"):
        assert encode(want) == data, name
    import inspect
    assert "_x.v" not in inspect.getsource(f._d_cells)


def _problems(tmp_path, text: str) -> list[str]:
    from bytewright.generator import pipeline

    path = tmp_path / "p.yaml"
    path.write_text(text)
    return [str(p) for p in pipeline.run([path]).problems]


@pytest.mark.parametrize(("field", "needle"), [
    ("{name: lead, type: u8, peek: true, if: 'n > 0'}", "drop if"),
    ("{name: lead, type: vlq, peek: true}", "peek reads a fixed-width integer"),
    ("{name: lead, type: u8, peak: true}", "peak"),
])
def test_misused_peek_is_a_schema_problem_with_file_and_line(tmp_path, field, needle):
    text = f"""bytewright: 1
family: bad
records:
  r:
    fields:
      - {{name: n, type: u8}}
      - {field}
      - {{name: x, type: u8}}
"""
    found = _problems(tmp_path, text)
    assert any("p.yaml:7" in p and needle in p for p in found), found


def test_an_encoder_side_expression_reading_a_peek_is_refused(tmp_path):
    text = """bytewright: 1
family: bad
records:
  r:
    fields:
      - {name: lead, type: u8, peek: true}
      - {name: data, type: bytes, size: lead}
"""
    found = _problems(tmp_path, text)
    assert any("p.yaml:7" in p and "records.r.fields[1].size" in p and "'lead'" in p
               for p in found), found


def test_a_chain_from_a_name_the_item_lacks_is_refused(tmp_path):
    text = """bytewright: 1
family: bad
records:
  item:
    params: {p: {type: int, default: 0}}
    fields:
      - {name: v, type: u8}
  r:
    fields:
      - {name: items, type: item, repeat: eos, chain: {param: p, from: nothing}}
"""
    found = _problems(tmp_path, text)
    assert any("p.yaml:10" in p and "chain.from" in p and "'nothing'" in p
               for p in found), found


def test_peek_needs_bytes_to_look_at_even_inside_a_section(m):
    """Inside the count-bounded list the peek is held to the list's bytes: the checked
    and optimistic decoders and both Construct paths refuse the same byte."""
    cut = STREAM[:1] + STREAM[1:5]  # n = 2 but one message's bytes only
    assert errors(m, "stream", cut) == {("TruncatedError", "stream.msgs[1].lead", 5)}
    with pytest.raises(ConstraintError):
        m.decode_stream(bytes([0x01, 0x01]))


def test_a_log_of_decoded_chains_ends_at_its_first_bad_item(schema_module):
    """``stop_on_error``: the list keeps the items before the bad one, on every path."""
    text = RUNNING.replace("family: running", "family: logged").replace(
        "        repeat: eos\n        chain: {param: running, from: op_now, first: 0x81}",
        "        repeat: {eos: true, stop_on_error: true}\n"
        "        chain: {param: running, from: op_now, first: 0x81}")
    lg = schema_module(text, "logged")
    data = bytes([0x00, 0x05, 0x83, 0x01])  # one (a=5, running 81), then op 83: no case
    for name, decode in decoders(lg, "stream"):
        value = decode(data)
        assert value.rest == [lg.Msg(None, lg.One(5), 0x81)], name
        stop = value.rest.stop
        assert (stop.offset, type(stop.error).__name__) == (2, "ConstraintError"), name
