"""The many-record encoders' rewrites (generator/fast/many.py, generator/fast/pack_fusion.py):
a large sub-record's first case inlined into the loop (``inline_hot_cases``), other cases
through a fresh buffer so the records are still gathered (``cold_calls_apart``, only for
encoders that never use the buffer's absolute length: ``relative_only``), fixed writes
fused across checks and marks (``fuse_packs``), a size check computed from the lengths
written (``static_padding``), constant zero runs packed as pad bytes (``zero_pads``),
paddings from prebuilt tables (``padding_tables``), a switch tag's length check dropped
where the tag equals a constant of that length (``tag_implied_lengths``), a value's
fields, lengths and costly arithmetic taken once (``reuse_reads``) and records chunked by
slices of the values (``ENCODE_CHUNK_RECORDS``).

Each pass is checked on small functions (the rewritten source, and the same bytes or the
same failure as the original); the generated encoders against the per-record encoder on
every fixture: the same bytes, and an error in the middle of a list names its item."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import struct
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from bytewright.generated import pile as gp
from bytewright.generator.fast.many import ManyEncoders
from bytewright.generator.fast.pack_fusion import (
    drop_len_marks,
    fuse_packs,
    padding_tables,
    reuse_reads,
    static_padding,
    tag_implied_lengths,
    zero_pads,
)
from bytewright.runtime.errors import EncodeError

ROOT = Path(__file__).resolve().parents[1]
FORMATS = {"_S1": "<I", "_S2": "<H", "_S7": "<I8s", "_S9": "<4sI", "_S0": "<4s"}


def _fn(src: str) -> ast.FunctionDef:
    return ast.parse(textwrap.dedent(src)).body[0]  # type: ignore[return-value]


def _compile(fn: ast.FunctionDef, formats: dict[str, str], extra: dict | None = None):
    ns = {k: struct.Struct(v) for k, v in formats.items()} | (extra or {})
    exec(compile(ast.fix_missing_locations(ast.Module([fn], [])), "<t>", "exec"), ns)
    return ns[fn.name]


def _run(fn: ast.FunctionDef, formats: dict[str, str], *args, extra: dict | None = None) -> bytes:
    out = bytearray()
    _compile(fn, formats, extra)(out, *args)
    return bytes(out)


def _namer(formats: dict[str, str], prefix: str = "_F"):
    made: dict[str, str] = {}

    def new(fmt: str) -> str:
        name = f"{prefix}{len(made)}"
        made[name] = fmt
        formats[name] = fmt
        return name
    return new, made


# -- fusing across checks and marks --------------------------------------------------------

ACROSS = """
def enc(out, v):
    out += _S1.pack(v.a)
    if v.b > 9:
        raise ValueError('b too large')
    s = len(out)
    at = len(out) + 1
    out += _S2.pack(v.b)
    out += _S1.pack(len(out) - s + at)
"""


@pytest.mark.parametrize("b", [0, 7, 9])
def test_writes_fuse_across_a_check_and_marks_keep_their_positions(b):
    v = SimpleNamespace(a=5, b=b)
    before = _run(_fn(ACROSS), FORMATS, v)
    fn = _fn(ACROSS)
    formats = dict(FORMATS)
    new, made = _namer(formats)
    fuse_packs(fn.body, formats, new)
    src = ast.unparse(fn)
    # the two fixed writes are one pack after the check; the marks count the bytes
    # that are now written after them
    assert "_S1.pack(v.a)" not in src and "_F0.pack(v.a, v.b)" in src and made["_F0"] == "<IH"
    assert "s = len(out) + 4" in src and "at = len(out) + 1 + 4" in src
    assert src.index("raise ValueError") < src.index("_F0.pack")
    assert _run(fn, formats, v) == before


def test_a_failing_check_still_fails_after_fusing():
    fn = _fn(ACROSS)
    formats = dict(FORMATS)
    fuse_packs(fn.body, formats, _namer(formats)[0])
    with pytest.raises(ValueError, match="b too large"):
        _run(fn, formats, SimpleNamespace(a=5, b=10))


def test_a_check_that_calls_something_else_stops_the_fusion():
    src = """
    def enc(out, v):
        out += _S1.pack(v.a)
        if check(v.b):
            raise ValueError('b')
        out += _S2.pack(v.b)
    """
    fn = _fn(src)
    formats = dict(FORMATS)
    fuse_packs(fn.body, formats, _namer(formats)[0])
    assert ast.unparse(fn) == ast.unparse(_fn(src))


# -- a size check from the lengths written --------------------------------------------------

SIZED = """
def enc(out, v, b, want):
    s = len(out)
    out += _S1.pack(v)
    out += b
    out += bytes((-(len(out) - s)) % 16)
    if len(out) - s != want:
        raise ValueError('encoded size ' + str(len(out) - s))
"""


@pytest.mark.parametrize("n, want", [(0, 16), (12, 16), (13, 32), (13, 16)])
def test_a_size_check_is_computed_from_the_pieces(n, want):
    fn = _fn(SIZED)
    static_padding(fn.body, dict(FORMATS))
    drop_len_marks(fn)
    src = ast.unparse(fn)
    assert "len(out)" not in src  # no mark left: the record can be gathered
    assert "4 + len(b) + -(4 + len(b)) % 16 != want" in src
    ok = (4 + n + 15) // 16 * 16 == want
    for f in (_fn(SIZED), fn):
        if ok:
            assert len(_run(f, FORMATS, 9, b"x" * n, want)) == want
        else:
            with pytest.raises(ValueError, match=f"encoded size {(4 + n + 15) // 16 * 16}"):
                _run(f, FORMATS, 9, b"x" * n, want)


# -- zero runs as pad bytes, paddings from tables ----------------------------------------------

def test_a_constant_zero_run_becomes_pad_bytes_of_the_format():
    src = """
    def enc(out, v):
        out += _S7.pack(v, b'\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00')
        out += _S7.pack(v, b'\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x01')
    """
    before = _run(_fn(src), FORMATS, 77)
    fn = _fn(src)
    formats = dict(FORMATS)
    new, made = _namer(formats)
    assert zero_pads(fn, formats, new) == 1  # the run with a one in it stays an argument
    assert made == {"_F0": "<I8x"}
    assert ast.unparse(fn).splitlines()[1].strip() == "out += _F0.pack(v)"
    assert _run(fn, formats, 77) == before


PADS = """
def enc(out, b):
    out += b
    out += bytes(-len(b) % 64)
    out += bytes(-len(b) % 1000)
    out += bytes(f(b) % 16)
"""


@pytest.mark.parametrize("n", [0, 1, 63, 64, 65, 200])
def test_padding_up_to_256_comes_from_a_table(n):
    extra = {"f": len}
    before = _run(_fn(PADS), {}, b"y" * n, extra=extra)
    fn = _fn(PADS)
    tables: list[int] = []

    def table(a: int) -> str:
        tables.append(a)
        return f"_Z{a}"
    assert padding_tables(fn, table) == 1
    src = ast.unparse(fn)
    assert "_Z64[-len(b) % 64]" in src
    assert "bytes(-len(b) % 1000)" in src  # too large a boundary for a table
    assert "bytes(f(b) % 16)" in src  # not known to be arithmetic on lengths
    extra["_Z64"] = tuple(bytes(i) for i in range(64))
    assert _run(fn, {}, b"y" * n, extra=extra) == before


# -- a switch tag's length check ---------------------------------------------------------------

TAGGED = """
def enc(out, v):
    if len(v.m) != 4:
        raise ValueError('expected 4 bytes')
    t = v.m
    if t == b'abcd':
        out += _S9.pack(v.m, v.x)
    elif t == b'wxyz':
        out += v.raw
    else:
        out += _S0.pack(v.m)
        raise ValueError('no case')
"""


@pytest.mark.parametrize("m, raw, msg", [
    (b"abcd", b"", None), (b"wxyz", b"raw", None), (b"qqqq", b"", "no case"),
    (b"abc", b"", "expected 4 bytes"), (b"abcde", b"", "expected 4 bytes"),
    (bytearray(b"wxyz"), b"r", None),
])
def test_a_tag_length_check_stays_only_where_it_decides(m, raw, msg):
    v = SimpleNamespace(m=m, x=3, raw=raw)
    fn = _fn(TAGGED)
    assert tag_implied_lengths(fn, dict(FORMATS)) == 1
    body = fn.body
    # gone before the switch and from the case that packs the tag as 4s; kept in the
    # case that does not write it that way, and first in the final else
    assert ast.unparse(body[0]) == "t = v.m"
    sw = body[1]
    assert "len(v.m)" not in ast.unparse(sw.body)
    assert ast.unparse(sw.orelse[0].body[0]).startswith("if len(v.m) != 4:")
    assert ast.unparse(sw.orelse[0].orelse[0]).startswith("if len(v.m) != 4:")
    for f in (_fn(TAGGED), fn):
        if msg is None:
            assert _run(f, FORMATS, v) == _run(_fn(TAGGED), FORMATS, v)
        else:
            with pytest.raises(ValueError, match=msg):
                _run(f, FORMATS, v)


def test_a_tag_length_check_stays_when_the_constants_differ_in_length():
    src = TAGGED.replace("b'wxyz'", "b'wxy'")
    fn = _fn(src)
    assert tag_implied_lengths(fn, dict(FORMATS)) == 0
    assert ast.unparse(fn) == ast.unparse(_fn(src))


# -- which sub-record encoders may write into a fresh buffer -----------------------------------

def _fake_emitter(srcs: dict[str, str]):
    recs = {n: SimpleNamespace(name=n, layouts=[None], version_from=None) for n in srcs}

    class Fake:
        relative_only = ManyEncoders.relative_only
        family = SimpleNamespace(records=recs)
        checked_encoder = None

        def _sub_emitter(self, name):
            return self

        def built_once(self, kind, rec, lay, build):
            return textwrap.dedent(srcs[rec.name]).strip().splitlines()
    return Fake()


def test_an_encoder_aligning_to_the_buffers_start_is_not_relative():
    fake = _fake_emitter({
        "rel": """
            def _e_rel(out, v):
                s = len(out)
                out += v.a
                out += bytes(-(len(out) - s) % 8)
                out[s:s + 1] = b'x'
                _S1.pack_into(out, s + 2, 7)
                e = len(out)
                crc = f(out if s == 0 and e == len(out) else memoryview(out)[s:e])
                _e_inner(out, v.b)
        """,
        "sized": """
            def _e_sized(out, v):
                s = len(out)
                out += v.a
                size = len(out) - s
                if size > 9:
                    raise ValueError('too long')
                out += _S1.pack(size)
        """,
        "writes_a_position": """
            def _e_writes_a_position(out, v):
                s = len(out) + 4
                out += _S1.pack(s)
        """,
        "aligns_by_a_mark": """
            def _e_aligns_by_a_mark(out, v):
                s = len(out)
                out += bytes(-s % 8)
        """,
        "patches_the_start": """
            def _e_patches_the_start(out, v):
                s = len(out)
                out += v.a
                out[0:1] = b'x'
        """,
        "whole_buffer": """
            def _e_whole_buffer(out, v):
                out += v.a
                crc = f(out)
        """,
        "inner": """
            def _e_inner(out, v):
                out += v
                m = len(out) + 4
                out += memoryview(out)[m:]
        """,
        "absolute": """
            def _e_absolute(out, v):
                out += v.a
                out += bytes(-len(out) % 8)
        """,
        "calls_absolute": """
            def _e_calls_absolute(out, v):
                out += v.a
                _e_absolute(out, v.b)
        """,
        "plugin": """
            def _e_plugin(out, v):
                write_it(out, v)
        """,
    })
    assert fake.relative_only("rel") and fake.relative_only("inner")
    assert fake.relative_only("sized")  # a size is a difference of two positions
    for name in ("writes_a_position", "aligns_by_a_mark", "patches_the_start"):
        assert not fake.relative_only(name), name
    assert not fake.relative_only("absolute")
    assert not fake.relative_only("calls_absolute")  # through the encoder it calls
    assert not fake.relative_only("plugin")  # the buffer handed to anything else
    assert not fake.relative_only("whole_buffer")  # from its start, not the record's


# -- the generated encoders ---------------------------------------------------------------------

def _module(where: str):
    """A family's generated module (``pile``) or an example's (``examples/png``)."""
    if "/" not in where:
        return importlib.import_module(f"bytewright.generated.{where}")
    folder = ROOT / where
    gen = next(p for p in sorted((folder / "generated").glob("*.py")) if p.name != "__init__.py")
    name = f"_many_speedups_{folder.name}_{gen.stem}"
    if name not in sys.modules:
        sys.path.insert(0, str(folder))  # the example's plugins
        spec = importlib.util.spec_from_file_location(name, gen)
        mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules[name] = mod
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return sys.modules[name]


def _fixture_values(where: str) -> list[tuple[str, str, object, dict]]:
    """(file, record, value, params) of every fixture of a family or an example whose
    record has a many-record encoder, decoded."""
    mod = _module(where)
    fixtures = ROOT / "fixtures" / where if "/" not in where else ROOT / where / "fixtures"
    got = []
    for p in sorted(fixtures.rglob("*.hex")):
        lines = p.read_text().splitlines()
        meta = {ln[3:].split(":", 1)[0]: ln.split(":", 2)[2].strip()
                for ln in lines if ln.startswith("#: ")}
        rec = meta.get("record")
        if rec is None or f"_em_{rec}" not in vars(mod):
            continue
        params = ast.literal_eval(meta.get("params", "{}") or "{}")
        data = bytes.fromhex("".join(ln for ln in lines if not ln.startswith("#")))
        try:
            value, _end = getattr(mod, f"decode_{rec}")(data, 0, **params)
        except Exception:  # noqa: BLE001, S112 - a fixture of bytes that must not decode
            continue
        got.append((p.name, rec, value, params))
    return got


EXAMPLES = sorted(f"examples/{p.parent.name}" for p in (ROOT / "examples").glob("*/bytewright.toml")
                  if any(p.parent.glob("fixtures/**/*.hex")))


@pytest.mark.parametrize("where", ["pile", "kladde", "htt", "ze", *EXAMPLES])
def test_the_many_record_encoder_writes_what_the_per_record_encoder_writes(where):
    mod = _module(where)
    by_rec: dict[tuple[str, str], list] = {}
    for _name, rec, value, params in _fixture_values(where):
        by_rec.setdefault((rec, repr(sorted(params.items()))), []).append((value, params))
    if not by_rec:
        pytest.skip("no fixture of a record with a many-record encoder")
    for (rec, _), items in by_rec.items():
        params = items[0][1]
        values = [v for v, _p in items] * 2
        em = getattr(mod, f"_em_{rec}")
        public = inspect.signature(getattr(mod, f"encode_many_{rec}")).parameters
        args = [params.get(a[2:], public[a[2:]].default)
                for a in inspect.signature(em).parameters if a != "values"]
        one = getattr(mod, f"encode_{rec}")
        want = b"".join(one(v, **params) for v in values)
        assert em(values, *args) == want, rec  # the fast path itself, not its fallback
        assert getattr(mod, f"encode_many_{rec}")(values, **params) == want


def test_the_pile_loop_inlines_the_first_frame_kind_and_gathers_its_pieces():
    src = inspect.getsource(gp._em_pile_record)
    assert "_e_frame_rest(out," not in src  # no call for a frame of the first kind
    assert "_e_frame_rest(_cold, " in src  # any other kind: its encoder, a fresh buffer
    assert "len(out)" not in src and "out +=" not in src  # pieces listed, joined per chunk
    assert "bytes(" not in src.split("_e_frame_rest(_cold")[0]  # padding from a table
    assert "b'\\x00\\x00\\x00\\x00" not in src.split("_e_frame_rest(_cold")[0]  # zeros: pad bytes


def _blob_values(n: int) -> list:
    from bytewright.runtime.pile import encode_blob
    data = b"".join(encode_blob(i.to_bytes(8, "little") * (1 + i % 5), 1_700_000_000_000 + i)
                    for i in range(n))
    return gp.decode_many_pile_record(data)


@pytest.mark.parametrize("breaks, path", [
    (lambda v: setattr(v.record.body.head, "hash", b"short"), "pile_record[3].hash"),
    (lambda v: setattr(v.record, "span", v.record.span + 1), "pile_record[3].length"),
    (lambda v: setattr(v.record.body.data, "payload", b"x"), "pile_record[3].payload"),
    # the tags' length checks the loop drops where a constant implies them
    (lambda v: setattr(v, "marker", v.marker[:15]), "pile_record[3].marker"),
    (lambda v: setattr(v.record, "kind", v.record.kind[:31]), "pile_record[3].kind"),
])
def test_an_error_in_the_middle_of_a_log_names_its_item(breaks, path):
    values = _blob_values(6)
    breaks(values[3])
    with pytest.raises(Exception):  # noqa: B017, PT011 - the loop itself fails, any way
        gp._em_pile_record(values)
    with pytest.raises(EncodeError) as fast:
        gp.encode_many_pile_record(values)
    with pytest.raises(EncodeError) as per_record:
        gp._encode_many(gp._e_pile_record, "pile_record", values, ())
    assert str(fast.value) == str(per_record.value)
    assert fast.value.path == path


def test_a_log_of_every_pile_kind_mixed_with_blobs_is_the_same_bytes():
    values = [v for _n, rec, v, _p in _fixture_values("pile") if rec == "pile_record"]
    blobs = _blob_values(4)
    mixed = [x for pair in zip(values, blobs * len(values), strict=False) for x in pair]
    want = b"".join(gp.encode_pile_record(v) for v in mixed)
    assert gp._em_pile_record(mixed) == want


# -- reads and lengths taken once ----------------------------------------------------------------

READS = """
def enc(out, v, w):
    if v.a.__class__ is not A:
        raise TypeError('not an A')
    y = v.a
    if len(v.b) != y.n:
        raise ValueError('wrong length ' + str(len(v.b)))
    out += _S1.pack(v.a.n)
    out += v.b
    out += bytes(-len(v.b) % 4)
    out += bytes(len(out) % 4)
    v = w
    out += _S1.pack(v.a.n)
    out += _S1.pack(len(v.b) if v.a.n else len(v.c))
"""


class A:
    def __init__(self, n: int) -> None:
        self.n = n


def _reads_args(n: int, b: bytes) -> tuple:
    return (SimpleNamespace(a=A(n), b=b), SimpleNamespace(a=A(n + 1), b=b"zz", c=b"c"))


@pytest.mark.parametrize("n, b", [(3, b"abc"), (5, b"abcde"), (2, b"abc")])
def test_a_kept_read_and_a_length_are_taken_once(n, b):
    extra = {"A": A}
    fn = _fn(READS)
    assert reuse_reads(fn) >= 4
    src = ast.unparse(fn)
    lines = [ln.strip() for ln in src.splitlines()]
    # the kept read moves above its check, which then reads the local
    assert lines[1] == "y = v.a" and lines[2] == "if y.__class__ is not A:"
    assert "_S1.pack(y.n)" in src  # v.a.n: from the local
    assert "if (_k0 := len(v.b)) != y.n:" in src and "bytes(-_k0 % 4)" in src
    assert "bytes(len(out) % 4)" in src  # the buffer's length changes: never kept
    # v is rebound: its fields are read afresh, and a length read only sometimes is not kept
    assert lines[lines.index("v = w") + 1] == "out += _S1.pack(v.a.n)"
    assert "len(v.b) if v.a.n else len(v.c)" in src
    args = _reads_args(n, b)
    if len(b) == n:
        assert _run(fn, FORMATS, *args, extra=extra) == _run(_fn(READS), FORMATS, *args,
                                                             extra=extra)
    else:
        with pytest.raises(ValueError, match=f"wrong length {len(b)}"):
            _run(fn, FORMATS, *args, extra=extra)
    bad = (SimpleNamespace(a=object(), b=b), args[1])
    with pytest.raises((TypeError, AttributeError)):
        _run(fn, FORMATS, *bad, extra=extra)


def test_a_loop_body_does_not_reuse_what_it_rebinds():
    src = """
    def enc(out, v):
        y = v.a
        for x in v.items:
            out += _S1.pack(x.n)
            y = x
            out += _S1.pack(v.a.n)
    """
    fn = _fn(src)
    reuse_reads(fn)
    # ``y`` is rebound in the loop: ``v.a`` is not ``y`` there
    assert "_S1.pack(v.a.n)" in ast.unparse(fn)


def test_records_are_chunked_by_slices_of_the_values():
    src = inspect.getsource(gp._em_pile_record)
    k = ManyEncoders.ENCODE_CHUNK_RECORDS
    assert f"for _i in range(0, len(values), {k}):" in src
    assert f"for v in values[_i:_i + {k}]:" in src
    assert "len(_all)" not in src  # no test per record
    values = _blob_values(2 * k + 1)
    for n in (0, 1, k, k + 1, 2 * k + 1):
        assert gp._em_pile_record(values[:n]) == b"".join(
            gp.encode_pile_record(v) for v in values[:n])
