"""Fast-path code generation for speed: the faster forms must decode and
encode exactly what the plain forms did, with the same errors.

Covered: 128-bit integer arrays unpacked as one cached Struct of u64 pairs (both byte
orders, signed and unsigned, extreme values); ``bytes`` inputs read directly (no
memoryview) giving the same values and errors as memoryview/bytearray inputs; varint and
terminator helpers on bytes cut at ``end``; simple records encoded inline in repeat
loops; the Construct path's entry loop (``repeat: eos``) and closed enums compiled by
``compile()`` instead of linked back to the interpreter.
"""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys
import textwrap

import pytest

from bytewright.generated import htt as h
from bytewright.runtime import codec
from bytewright.runtime.errors import (
    ConstraintError,
    DecodeError,
    EncodeError,
    TruncatedError,
)

EXTREMES = [-(1 << 127), (1 << 127) - 1, 0, -1, 1, 1 << 64, -(1 << 64), (1 << 64) - 1]
FULL = h.SemTailLayout.full


def _entry(seq: int, dims: list[int] | None) -> h.WalEntry:
    tail = h.TailFull(dims) if dims is not None else None
    meta = [h.MetaPair("_child_index", "3"), h.MetaPair("kind", "ℓeaf")]
    return h.WalEntry(seq, h.WalOp.INSERT, f"/a/{seq}", h.InsertBody(b"\x00data", meta, tail))


def test_q64_64_tail_extremes_round_trip_and_match_from_bytes():
    e = _entry(1, EXTREMES)
    data = h.encode_wal_entry(e, semantic_dims=len(EXTREMES), tail_layout=FULL)
    tail = data[-4 - 16 * len(EXTREMES):-4]
    assert [int.from_bytes(tail[i:i + 16], "little", signed=True)
            for i in range(0, len(tail), 16)] == EXTREMES
    for buf in (data, memoryview(data), bytearray(data)):
        back, end = h.decode_wal_entry(buf, semantic_dims=len(EXTREMES), tail_layout=FULL)
        assert back == e and end == len(data)
    assert h.construct_decode_wal_entry(data, semantic_dims=len(EXTREMES),
                                        tail_layout=FULL, compiled=True) == e


def test_q64_64_out_of_range_is_an_encode_error():
    with pytest.raises(EncodeError):
        h.encode_wal_entry(_entry(1, [1 << 127]), semantic_dims=1, tail_layout=FULL)


@pytest.mark.parametrize("kind", [bytes, memoryview, bytearray])
def test_truncated_tail_same_error_for_every_buffer_kind(kind):
    data = h.encode_wal_entry(_entry(1, [5] * 20), semantic_dims=20, tail_layout=FULL)
    cut = data[:len(data) - 4 - 17]  # the tail loses one element and one byte
    with pytest.raises(TruncatedError) as info:
        h.decode_wal_entry(kind(cut), semantic_dims=20, tail_layout=FULL)
    ref = len(data) - 4 - 16 * 20  # the tail's first byte: the count is checked up front
    assert info.value.offset == ref
    assert info.value.path == "wal_entry.body.tail.dims"


@pytest.mark.parametrize("kind", [bytes, memoryview, bytearray])
def test_iter_over_every_buffer_kind_same_values_and_index_in_errors(kind):
    entries = [_entry(i, [i, -i, 1 << 100]) for i in range(1, 6)]
    data = b"".join(h.encode_wal_entry(e, semantic_dims=3, tail_layout=FULL) for e in entries)
    got = [v for v, _ in h.iter_wal_entry(kind(data), semantic_dims=3, tail_layout=FULL)]
    assert got == entries
    assert type(got[0].body.data) is bytes and type(got[0].key) is str
    bad = bytearray(data)
    bad[-1] ^= 0xFF  # the last entry's CRC
    with pytest.raises(DecodeError) as info:
        list(h.iter_wal_entry(kind(bytes(bad)), semantic_dims=3, tail_layout=FULL))
    assert info.value.path == "wal_entry[4].entry_crc"


WIDE = """
bytewright: 1
family: wide
records:
  arrays:
    params: {n: {type: int}}
    fields:
      - {name: sle, type: i128, repeat: {count: n}}
      - {name: ule, type: u128, repeat: {count: n}}
      - {name: sbe, type: i128be, repeat: {count: n}}
      - {name: ube, type: u128be, repeat: {count: n}}
  pair:
    fields:
      - {name: k, type: str, length: u8}
      - {name: v, type: u16be}
  pairs:
    fields:
      - {name: items, type: pair, repeat: {prefix: u8}}
"""


def test_wide_arrays_both_byte_orders_all_paths(schema_module):
    m = schema_module(WIDE)
    s = [-(1 << 127), (1 << 127) - 1, -1, 0]
    u = [(1 << 128) - 1, 0, 1 << 64, (1 << 64) - 1]
    value = m.Arrays(s, u, s, u)
    data = m.encode_arrays(value, n=4)
    assert data[:16] == (-(1 << 127)).to_bytes(16, "little", signed=True)
    assert data[128:144] == (-(1 << 127)).to_bytes(16, "big", signed=True)
    assert data[192:208] == ((1 << 128) - 1).to_bytes(16, "big")
    assert m.decode_arrays(data, n=4) == (value, len(data))
    assert m.construct_encode_arrays(value, n=4) == data
    assert m.construct_decode_arrays(data, n=4, compiled=True) == value
    with pytest.raises(TruncatedError):
        m.decode_arrays(data[:-1], n=4)
    with pytest.raises(EncodeError):
        m.encode_arrays(m.Arrays(s, [-1, 0, 0, 0], s, u), n=4)  # negative into u128


def test_simple_records_encoded_inline_match_construct(schema_module):
    m = schema_module(WIDE)
    value = m.Pairs([m.Pair("a", 1), m.Pair("ßé", 0xBEEF), m.Pair("", 0)])
    data = m.encode_pairs(value)
    assert data == b"\x03\x01a\x00\x01\x04\xc3\x9f\xc3\xa9\xbe\xef\x00\x00\x00"
    assert m.construct_encode_pairs(value) == data
    assert m.decode_pairs(data) == (value, len(data))
    with pytest.raises(EncodeError):
        m.encode_pairs(m.Pairs([m.Pair("a", 1 << 16)]))


def test_varint_and_terminator_helpers_honour_end_on_bytes():
    raw = b"\x80\x01\x05ab\x00cd"
    for buf in (raw, memoryview(raw)):
        assert codec.uleb128(buf, 0, len(raw), "x") == (128, 2)
        with pytest.raises(TruncatedError):
            codec.uleb128(buf, 0, 1, "x")  # cut inside the varint
        assert codec.find_term(buf, b"\x00", 3, len(raw), "s") == 5
        with pytest.raises(TruncatedError):
            codec.find_term(buf, b"\x00", 3, 5, "s")  # terminator beyond end


def test_construct_entry_loop_and_enums_compile():
    con = h._compiled("wal_section")
    # compiled, not linked back to the interpreted _parse
    assert "def parse_repeattoend_" in con.source
    assert ".refuse(" in con.source  # closed enums checked in the compiled record's run
    assert "linkedparsers[" not in con.source
    entries = [_entry(i, None) for i in range(1, 4)]
    body = h.encode_wal_header(h.WalHeader(3, 1)) + b"".join(
        h.encode_wal_entry(e, semantic_dims=0, tail_layout=FULL) for e in entries)
    kw = dict(block_compressed=False, algorithm=h.CompressionAlgorithm.zstd,
              semantic_dims=0, tail_layout=FULL)
    fast, _ = h.decode_wal_section(body, **kw)
    assert fast.entries == entries
    assert h.construct_decode_wal_section(body, compiled=True, **kw) == fast
    bad = bytearray(body)
    bad[8 + 4] = 99  # first entry's op: not a wal_op value
    with pytest.raises(ConstraintError) as info:
        h.construct_decode_wal_section(bytes(bad), compiled=True, **kw)
    assert info.value.offset == 12
    with pytest.raises(TruncatedError):
        h.construct_decode_wal_section(body[:-1], compiled=True, **kw)


# -- loops the interpreter can specialize within one call ----------------------------------

def _generated_sources() -> list:
    root = pathlib.Path(__file__).resolve().parent.parent
    return sorted(root.glob("generated/*.py")) + sorted(root.glob("examples/*/generated/*.py"))


@pytest.mark.parametrize("path", _generated_sources(), ids=lambda p: p.name)
def test_emitted_loops_jump_back_unconditionally(path):
    """CPython 3.11 specializes a function after 8 calls or unconditional back-jumps; a
    `while cond:` loop jumps back conditionally, so a decoder called once over a large
    buffer would run its whole loop unspecialized. Every loop the emitters write (outside
    the `iter_*` generators, which warm up at each resume) is `while True:`."""
    tree = ast.parse(path.read_text())
    bad = []
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        nodes = list(ast.walk(fn))
        if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in nodes):
            continue
        bad += [f"{fn.name}: while {ast.unparse(n.test)}" for n in nodes
                if isinstance(n, ast.While)
                and not (isinstance(n.test, ast.Constant) and n.test.value is True)]
    assert bad == []


def test_one_call_over_many_records_runs_specialized_bytecode():
    """In a fresh interpreter, the first and only decode of a 2,000-statement table runs
    its loop specialized (the adaptive bytecode shows specialized instructions after it).
    Before the loops were `while True:`, this decoder stayed unspecialized for 7 calls."""
    code = textwrap.dedent("""
        import dis
        from bytewright.generated import kladde as k
        stmts = [k.Statement(1, 2, k.ShrinkBody(i)) for i in range(2000)]
        data = k.encode_table_content(k.TableContent([], stmts))
        assert len(k.decode_table_content(data)[0].statements) == 2000
        base = set(dis.opmap)
        print(sum(i.opname not in base
                  for i in dis.get_instructions(k._u_table_content, adaptive=True)))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert int(out) > 20


def _many_cases_schema(n_cases: int = 14) -> str:
    """A frame whose body record switches over many kinds (too large to inline whole)."""
    cases = "\n".join(f"          {k}: c{k}" for k in range(n_cases))
    bodies = "\n".join(f"""  c{k}:
    fields:
      - {{name: a, type: u32, assert: [{{check: "a != {k + 7}", message: "bad a"}}]}}
      - {{name: n, type: u8}}
      - {{name: data, type: bytes, size: n}}""" for k in range(n_cases))
    return f"""
bytewright: 1
family: spec
records:
  frame:
    fields:
      - {{name: tag, type: u8}}
      - name: body
        switch: tag
        cases:
          1: rest
        default: error
  rest:
    fields:
      - {{name: kind, type: u8}}
      - {{name: size, type: u16}}
      - name: body
        switch: kind
        size: size
        cases:
{cases}
        default: bytes
{bodies}
"""


def _frames(m) -> tuple[bytes, list]:
    vals, out = [], b""
    for i, kind in enumerate([0, 0, 3, 0, 13, 0, 99, 0]):
        body = m.__dict__[f"C{kind}"](100 + i, bytes([i, i])) if kind < 14 else b"xyz"
        v = m.Frame(1, m.Rest(kind, body))
        vals.append(v)
        out += m.encode_frame(v)
    return out, vals


def test_a_large_callee_is_inlined_for_its_first_case_and_called_for_the_others(schema_module):
    import inspect
    m = schema_module(_many_cases_schema())
    u_src = inspect.getsource(m._u_frame)
    # the first case runs in the caller's twin; any other kind calls the whole decoder
    assert "_u_rest(mv, pos, end)" in u_src and "_new(C0)" in u_src
    assert "_new(C3)" not in u_src
    # the checked decoder, run only where the twin could not read, calls it for every kind
    d_src = inspect.getsource(m._d_frame)
    assert "_d_rest(mv, pos, end)" in d_src and "_new(C0)" not in d_src
    m_src = ast.parse(textwrap.dedent(inspect.getsource(m._m_frame)))
    reads = [n for n in ast.walk(m_src) if isinstance(n, ast.Assign)
             and isinstance(n.value, ast.Call) and getattr(n.value.func, "id", "").endswith(
                 "_unpack_from")]
    # one speculative read (the u8 tag is an index): the rest's kind and size, then
    # c0's a and n, which sit behind the switch on the kind
    assert len(reads) == 1 and len(reads[0].targets[0].elts) == 4
    data, vals = _frames(m)
    assert m.decode_many_frame(data) == vals


def test_first_case_inlining_and_fused_reads_agree_with_the_checked_decoder(
        schema_module, monkeypatch):
    m = schema_module(_many_cases_schema())
    data, _vals = _frames(m)
    inputs = [data] + [data[:i] for i in range(len(data))]
    for at in range(len(data)):
        for bit in (0x01, 0x80):
            b = bytearray(data)
            b[at] ^= bit
            inputs.append(bytes(b))
    inputs += [data + data[:i] for i in range(0, 12)]

    def outcome(fn, b):
        try:
            return ("ok", fn(b))
        except DecodeError as exc:
            return ("error", type(exc).__name__, exc.message, exc.offset, exc.path)

    fast = [outcome(m.decode_many_frame, b) for b in inputs]
    fast_one = [outcome(m.decode_frame, b) for b in inputs]
    monkeypatch.setattr(m, "_m_frame", lambda mv, pos, end: m._decode_many(
        m._d_frame, "frame", mv, pos, end, ()))
    monkeypatch.setattr(m, "_u_frame", lambda *a: (_ for _ in ()).throw(RuntimeError("off")))
    slow = [outcome(m.decode_many_frame, b) for b in inputs]
    slow_one = [outcome(m.decode_frame, b) for b in inputs]
    assert fast == slow and fast_one == slow_one
    assert sum(o[0] == "error" for o in slow) > len(data)  # the corruptions are seen


TEXTS = """
bytewright: 1
family: t
records:
  note:
    fields:
      - {name: title, type: str, length: u8}
      - {name: tag, type: str, length: u8, encoding: ascii}
      - {name: blob, type: bytes, length: u16}
"""


def test_text_and_bytes_fields_read_the_same_from_bytes_and_a_memoryview(schema_module):
    """The twins slice a ``bytes`` buffer and decode it with ``bytes.decode`` (no
    ``bytes(...)``/``str(...)`` constructor call), and keep the constructors for a
    ``memoryview``: same values, same exact types, same errors on both."""
    import inspect

    m = schema_module(TEXTS)
    src = inspect.getsource(m._m_note)
    assert "_isb = mv.__class__ is bytes" in src and "if _isb else str(mv[" in src
    assert "if _isb else bytes(mv[" in src
    notes = [m.Note("wörter €" * i, "ok", bytes(range(i))) for i in range(5)]
    data = m.encode_many_note(notes)
    for buf in (data, memoryview(data)):
        got = m.decode_many_note(buf)
        assert got == notes
        assert all(type(n.title) is str and type(n.blob) is bytes for n in got)
        assert m.decode_note(buf) == (notes[0], len(m.encode_note(notes[0])))
    second = len(m.encode_note(notes[0]))  # the first title is empty
    for at, field in ((second + 1, "title"), (second + 2 + len(notes[1].title.encode()) + 1,
                                              "tag")):
        bad = bytearray(data)
        bad[at] = 0xFF  # not UTF-8, not ASCII
        for fn, path in ((m.decode_many_note, f"note[1].{field}"),
                         (lambda b: m.decode_note(b, second), f"note.{field}")):
            errors = set()
            for buf in (bytes(bad), memoryview(bytes(bad))):
                with pytest.raises(DecodeError) as exc:
                    fn(buf)
                errors.add((type(exc.value), exc.value.offset, exc.value.path))
            assert errors == {(ConstraintError, at, path)}
