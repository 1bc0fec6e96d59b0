"""The many-record encoders' passes (generator/fast/pack_fusion.py): ``static_padding`` (a
padding's length from the lengths of the pieces before it, not from ``len(out)``),
``drop_len_marks``, ``fuse_packs`` (consecutive fixed writes, and a switch tag with
each case's first fixed run, in one ``pack``) and ``small_length_packs`` (a short length
prefix from a prebuilt table). Each is checked on small functions: the
rewritten source, and that it writes exactly the bytes the original did."""

from __future__ import annotations

import ast
import struct
import textwrap

import pytest

from bytewright.generator.emit_fast import (
    SMALL_LENGTHS,
    drop_len_marks,
    fuse_packs,
    small_length_packs,
    static_padding,
)

FORMATS = {"_S1": "<I", "_S2": "<H", "_S3": "<16s", "_S4": "<12sI", "_S5": "<QQ", "_S6": "I"}


def _structs(formats: dict[str, str]) -> dict:
    return {k: struct.Struct(v) for k, v in formats.items()}


def _fn(src: str) -> ast.FunctionDef:
    return ast.parse(textwrap.dedent(src)).body[0]  # type: ignore[return-value]


def _run(fn: ast.FunctionDef, formats: dict[str, str], *args) -> bytes:
    ns = _structs(formats)
    exec(compile(ast.fix_missing_locations(ast.Module([fn], [])), "<t>", "exec"), ns)
    out = bytearray()
    ns[fn.name](out, *args)
    return bytes(out)


def _passes(fn: ast.FunctionDef, formats: dict[str, str]) -> dict[str, str]:
    made: dict[str, str] = {}

    def new(fmt: str) -> str:
        name = f"_F{len(made)}"
        made[name] = fmt
        return name

    static_padding(fn.body, formats)
    drop_len_marks(fn)
    fuse_packs(fn.body, formats, new)
    return made


PADDED = """
def enc(out, v, b):
    s = len(out)
    out += _S1.pack(v)
    out += b
    out += bytes((-(len(out) - s)) % 16)
    out += _S2.pack(7)
"""


@pytest.mark.parametrize("n", [0, 1, 11, 12, 13, 40])
def test_padding_comes_from_the_pieces_lengths(n):
    before = _run(_fn(PADDED), FORMATS, 9, b"x" * n)
    fn = _fn(PADDED)
    _passes(fn, dict(FORMATS))
    src = ast.unparse(fn)
    assert "len(out)" not in src  # the mark is gone with its last reader
    assert "bytes(-(4 + len(b)) % 16)" in src
    assert _run(fn, FORMATS, 9, b"x" * n) == before and len(before) % 16 == 2


@pytest.mark.parametrize("middle", [
    "out += f(b)",         # a piece of unknown length
    "b = b + b'z'",        # the bytes local changes after it was written
    "out[0:1] = b'q'",     # ``out`` used another way
])
def test_padding_left_alone_when_a_length_is_not_known(middle):
    src = PADDED.replace("    out += bytes(", f"    {middle}\n    out += bytes(")
    fn = _fn(src)
    static_padding(fn.body, dict(FORMATS))
    assert "bytes(-(len(out) - s) % 16)" in ast.unparse(fn)


def test_consecutive_packs_fuse_across_reads():
    src = """
    def enc(out, v):
        out += _S1.pack(v.a)
        x = v.inner
        out += _S5.pack(x.b, x.c)
        out += _S2.pack(3)
    """

    class V:
        a, inner = 5, type("I", (), {"b": 1, "c": 2})

    before = _run(_fn(src), FORMATS, V)
    fn = _fn(src)
    formats = dict(FORMATS)
    made = _passes(fn, formats)
    assert list(made.values()) == ["<IQQ", "<IQQH"]
    assert ast.unparse(fn).count(".pack(") == 1
    assert _run(fn, {**FORMATS, **made}, V) == before


def test_a_tag_is_packed_with_each_cases_first_fixed_run():
    src = """
    def enc(out, v):
        out += _S3.pack(v.marker)
        t = v.marker
        if t == b'AAAAAAAAAAAAAAAA':
            out += _S4.pack(b'magic-bytes!', v.n)
            out += v.tail
        elif t == b'BBBBBBBBBBBBBBBB':
            out += _S2.pack(v.n)
        else:
            raise ValueError('no case')
    """

    class V:
        n, tail = 7, b"rest"

    fn = _fn(src)
    made = _passes(fn, dict(FORMATS))
    assert sorted(made.values()) == ["<16s12sI", "<16sH"]
    text = ast.unparse(fn)
    assert text.index("t = v.marker") < text.index(".pack(")  # the write moved into the cases
    for marker in (b"A" * 16, b"B" * 16):
        V.marker = marker
        assert _run(fn, {**FORMATS, **made}, V) == _run(_fn(src), FORMATS, V)
    V.marker = b"C" * 16
    with pytest.raises(ValueError, match="no case"):
        _run(fn, {**FORMATS, **made}, V)


def test_no_fusion_when_a_read_rebinds_what_the_first_write_reads_or_alignment_differs():
    rebinds = _fn("""
    def enc(out, v, x):
        out += _S1.pack(x)
        x = v.other
        out += _S2.pack(x)
    """)
    assert _passes(rebinds, dict(FORMATS)) == {}
    native = _fn("""
    def enc(out, v):
        out += _S6.pack(v)
        out += _S2.pack(v)
    """)  # native alignment: concatenating formats could add padding bytes
    assert _passes(native, dict(FORMATS)) == {}
    call_between = _fn("""
    def enc(out, v):
        out += _S1.pack(v)
        y = f(v)
        out += _S2.pack(y)
    """)
    assert _passes(call_between, dict(FORMATS)) == {}


def test_a_write_is_not_copied_into_cases_where_it_would_not_fuse():
    src = """
    def enc(out, v):
        out += _S1.pack(v.crc)
        if v.flag:
            n = count(v.items)
            out += _S2.pack(n)
        else:
            out += v.raw
    """
    fn = _fn(src)
    assert _passes(fn, dict(FORMATS)) == {}
    assert ast.unparse(fn) == ast.unparse(_fn(src))  # untouched


LENGTHS = """
def enc(out, k, items):
    out += _S2.pack(len(k))
    out += k
    out += _S1.pack(len(items))
    out += _S5.pack(len(k), 1)
    out += _S6.pack(len(k))
    out += _S1.pack(len(k) + 1)
"""


def _lengths() -> tuple[ast.FunctionDef, dict[str, str], dict[str, str], int]:
    formats = dict(FORMATS)
    fn = _fn(LENGTHS)
    tables: dict[str, str] = {}

    def new(fmt: str) -> str:
        name = f"_L{len(tables)}"
        tables[name] = fmt
        return name

    n = small_length_packs(fn, formats, new)
    return fn, formats, tables, n


@pytest.mark.parametrize("k", [0, 1, 255, 256, 1000, 65535])
def test_a_short_length_prefix_comes_from_a_table_and_the_bytes_are_the_same(k):
    fn, formats, tables, n = _lengths()
    src = ast.unparse(fn)
    # one unsigned integer of len(...) only: not a pair, not native order, not a sum
    assert n == 2 and list(tables.values()) == ["<H", "<I"]
    assert "_L0[_ln] if (_ln := len(k)) < 256 else _S2.pack(_ln)" in src
    assert "_L1[_ln] if (_ln := len(items)) < 256 else _S1.pack(_ln)" in src
    for kept in ("_S5.pack(len(k), 1)", "_S6.pack(len(k))", "_S1.pack(len(k) + 1)"):
        assert kept in src
    ns = _structs(formats)
    for name, fmt in tables.items():
        ns[name] = tuple(struct.pack(fmt, i) for i in range(SMALL_LENGTHS))
    exec(compile(fn_module(fn), "<t>", "exec"), ns)
    key, items = bytes(k), list(range(k))
    got = bytearray()
    ns["enc"](got, key, items)
    assert bytes(got) == _run(_fn(LENGTHS), formats, key, items)


def test_a_length_too_large_for_its_prefix_still_raises_struct_error():
    formats = dict(FORMATS, _S7="<B", _S8="<b")
    fn = _fn("def enc(out, k):\n    out += _S7.pack(len(k))\n    out += _S8.pack(len(k))\n")
    assert small_length_packs(fn, formats, lambda fmt: "_L0") == 1  # not the signed byte
    assert "_S8.pack(len(k))" in ast.unparse(fn)
    ns = _structs(formats)
    ns["_L0"] = tuple(struct.pack("<B", i) for i in range(SMALL_LENGTHS))
    exec(compile(fn_module(fn), "<t>", "exec"), ns)
    out = bytearray()
    ns["enc"](out, b"x" * 127)
    assert bytes(out) == b"\x7f\x7f"
    with pytest.raises(struct.error):
        ns["enc"](bytearray(), b"x" * 256)  # the table's fallback: pack's own error


def fn_module(fn: ast.FunctionDef) -> ast.Module:
    return ast.fix_missing_locations(ast.Module([fn], []))
