"""The generated Construct path compiles fully.

``Struct.compile()`` falls back to a construct's interpreted ``_parse`` for every class
without ``_emitparse`` (``linkedparsers[...]`` in the compiled source), and everything
below such a construct then runs interpreted. For every record of every shipped family and
of the example projects the compiled parser must have no such fallback (the documented
exceptions below, with their reason), and on every golden fixture the compiled parse, the
interpreted parse and the fast path must give the same value.
"""

from __future__ import annotations

import copy
import io
import re
import struct
from pathlib import Path

import construct as cs
import numpy as np
import pytest

from bytewright.generator import project
from bytewright.review import checks
from bytewright.runtime import codec
from bytewright.runtime.errors import DecodeError

FAMILIES = ("htt", "kladde", "pile", "ze")
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
EXAMPLE_PROJECTS = sorted(p for p in EXAMPLES.iterdir() if (p / "bytewright.toml").is_file())

# (family, record) -> why its compiled parser keeps an interpreted fallback. Empty: every
# construct the generator emits has an ``_emitparse``. An entry here must say why none can
# exist (for instance a user's own Construct class without one).
INTERPRETED: dict[tuple[str, str], str] = {}

_FALLBACK = re.compile(r"linkedparsers\[(\d+)\]|linkedinstances\[(\d+)\]\._parse\(")


def _modules() -> list[tuple[str, object]]:
    out = [(fam, project.package_project().load_module(fam)) for fam in FAMILIES]
    for root in EXAMPLE_PROJECTS:
        proj = project.load(root / "bytewright.toml")
        for path in proj.schema_files():
            fam = _family_of(path)
            out.append((fam, proj.load_module(fam)))
    return out


def _family_of(schema: Path) -> str:
    for line in schema.read_text(encoding="utf-8").splitlines():
        if line.startswith("family:"):
            return line.split(":", 1)[1].strip().strip("'\"")
    raise AssertionError(f"{schema}: no family")


MODULES = _modules()
RECORDS = [(fam, mod, rec) for fam, mod in MODULES for rec in mod.RECORDS]


def fallbacks(source: str, pattern: re.Pattern = _FALLBACK) -> list[str]:
    """What each interpreted fallback (``pattern``: parsers by default) in a compiled
    source is (Construct's own comment)."""
    out = []
    for m in pattern.finditer(source):
        ident = m.group(1) or m.group(2)
        what = re.search(rf"# linkedinstances\[{ident}\] is (.*)", source)
        out.append(what.group(1) if what else f"object {ident}")
    return out


@pytest.mark.parametrize("fam,mod,rec", RECORDS, ids=[f"{f}.{r}" for f, _, r in RECORDS])
def test_compiled_parser_has_no_interpreted_fallback(fam, mod, rec):
    source = mod._compiled(rec).source
    found = fallbacks(source)
    if (fam, rec) in INTERPRETED:
        assert found, f"{fam}.{rec} compiles fully now: drop it from INTERPRETED"
        return
    assert not found, f"{fam}.{rec}: interpreted inside the compiled parser: {found}"


def test_the_check_finds_a_fallback():
    """The detector itself: a construct without ``_emitparse`` is reported."""
    con = codec.Struct("a" / cs.Int8ul, "b" / cs.Adapter(cs.Int8ul))
    assert fallbacks(con.compile().source) == ["<Adapter <FormatField>>"]


def test_records_compile_tighter_than_construct():
    """HTT's WAL entry: its fixed runs are one unpack each, no per-field FormatField and
    no parent-linked context per record."""
    from bytewright.generated import htt

    source = htt._compiled("wal_entry").source
    assert "struct.Struct('<LBH')" in source  # seq, op and the key's length: one read
    assert "_root" not in source.split("def build")[0]


# -- the compiled parse agrees with the interpreted one and the fast path ---------------

def _fixture_sets() -> list[tuple[object, object]]:
    out = [(fx, None) for fx in checks.fixtures()]
    for root in EXAMPLE_PROJECTS:
        proj = project.load(root / "bytewright.toml")
        if proj.fixtures is not None and proj.fixtures.is_dir():
            out += [(fx, proj) for fx in checks.fixtures(fixture_dir=proj.fixtures)]
    return out


FIXTURES = _fixture_sets()


def _module(fx, proj):
    return (proj or project.package_project()).load_module(fx.family)


@pytest.mark.parametrize("fx,proj", FIXTURES,
                         ids=[f"{f.family}/{f.path.stem}" for f, _ in FIXTURES])
def test_compiled_equals_interpreted_equals_fast(fx, proj):
    mod = _module(fx, proj)
    fast, end = mod.DECODERS[fx.record](fx.data, **fx.params)
    assert end == len(fx.data)
    interpreted = mod.CONSTRUCT_DECODERS[fx.record](fx.data, **fx.params)
    compiled = mod.CONSTRUCT_DECODERS[fx.record](fx.data, compiled=True, **fx.params)
    assert interpreted == fast
    assert compiled == fast


@pytest.mark.parametrize("fx,proj", FIXTURES,
                         ids=[f"{f.family}/{f.path.stem}" for f, _ in FIXTURES])
def test_compiled_build_gives_the_fixture_bytes(fx, proj):
    """Every wrapper has an ``_emitbuild`` (no interpreted builder inside the compiled
    one): compiled build == interpreted build == the golden bytes."""
    mod = _module(fx, proj)
    value, _ = mod.DECODERS[fx.record](fx.data, **fx.params)
    compiled = mod.CONSTRUCT_ENCODERS[fx.record](value, compiled=True, **fx.params)
    interpreted = mod.CONSTRUCT_ENCODERS[fx.record](value, **fx.params)
    assert compiled == interpreted == fx.data


# (family, record) -> why its compiled builder keeps an interpreted fallback. Empty: every
# wrapper the generator emits has an ``_emitbuild``.
INTERPRETED_BUILD: dict[tuple[str, str], str] = {}

_BUILD_FALLBACK = re.compile(r"linkedbuilders\[(\d+)\]|linkedinstances\[(\d+)\]\._build\(")


def build_fallbacks(source: str) -> list[str]:
    """What each interpreted builder in a compiled source is."""
    return fallbacks(source, _BUILD_FALLBACK)


@pytest.mark.parametrize("fam,mod,rec", RECORDS, ids=[f"{f}.{r}" for f, _, r in RECORDS])
def test_compiled_builder_has_no_interpreted_fallback(fam, mod, rec):
    found = build_fallbacks(mod._compiled(rec).source)
    if (fam, rec) in INTERPRETED_BUILD:
        assert found, f"{fam}.{rec} builds compiled now: drop it from INTERPRETED_BUILD"
        return
    assert not found, f"{fam}.{rec}: interpreted inside the compiled builder: {found}"


def test_the_build_check_finds_a_fallback():
    con = codec.Struct("a" / cs.Int8ul, "b" / cs.Adapter(cs.Int8ul))
    assert build_fallbacks(con.compile().source) == ["<Adapter <FormatField>>"]


def _code(src: str) -> codec.Code:
    return codec.Code(src, eval(f"lambda this: {src}"))  # noqa: S307 -- test literals


class _Halves:
    """A numeric conversion (``convert:``): halves stored as an integer count."""

    name = "halves"

    @staticmethod
    def decode(raw: int) -> float:
        return raw / 2

    @staticmethod
    def encode(value: float) -> int:
        if value < 0:
            raise ValueError("negative")
        return int(value * 2)


def _wrappers() -> list[tuple[str, cs.Construct, list[dict]]]:
    """Each wrapper in a one-field record, with a good value and bad ones."""
    two = _code("2")
    flags = codec.BitFlags(codec.Int8ul, (("a", 1, 3, False), ("b", 0, 1, True)))
    chained = codec.ChainedRepeat(codec.Int16ul, _code("2"), _code("0"), "<H", 0, False)
    return [
        ("bitflags", flags, [{"a": 5, "b": True}, {"a": 9, "b": False}, {"a": -1, "b": 1}]),
        ("terminated_bytes", codec.TerminatedBytes(b"\0", "utf-8"), ["ab", "a\0b", 7]),
        ("pascal", codec.PascalString(codec.Int8ul, "utf8"), ["hé", b"bytes", 3]),
        ("greedy_string", codec.GreedyString("utf8"), ["x", None]),
        ("string_encoded", codec.StringEncoded(codec.Bytes(2), "ascii"), ["ab", "é!", "abc"]),
        ("terminated", codec.Terminated(codec.Int8ul, 0), [[1, 2], [1, 0, 2], [300]]),
        ("repeat_to_end", codec.RepeatToEnd(codec.Int16ul), [[1, 2], [1, -1]]),
        ("repeat_until", codec.RepeatUntil(codec.Int8ul, _code("this._last == 9")),
         [[1, 9], [9, 1], [1, 2]]),
        ("fixed_sized", codec.FixedSized(two, codec.GreedyBytes), [b"ab", b"abc", b"a"]),
        ("fixed_negative", codec.FixedSized(_code("-1"), codec.Bytes(1)), [b"a"]),
        ("prefixed", codec.Prefixed(codec.Int8ul, codec.GreedyBytes), [b"abc", b"x" * 300, "s"]),
        ("leb128", codec.Leb128("uleb128"), [0, 300, -1, "x"]),
        ("zigzag", codec.Leb128("zigzag"), [-5, 5]),
        ("zero_padding", codec.ZeroPadding(two), [None]),
        ("closed_enum", codec.ClosedEnum(codec.Int8ul, "E", (1, 2), ()), [1, 256]),
        ("chained", chained, [[1, 2], [1], [1, 2, 3]]),
        ("converted", codec.Converted(codec.Int8ul, _Halves(), name="v"), [2.5, -1.0, "x"]),
        ("numpy", codec.NumpyArray(two, "<u2"), [np.array([1, 2], dtype="<u2"), [1, 2],
                                                 [1, "x"]]),
        ("compressed", codec.Compressed(codec.GreedyBytes, _code("'zlib'"), codec.Int16ul,
                                        name="v"), [b"abc" * 20, "text"]),
        ("compressed_eos", codec.Compressed(codec.GreedyBytes, _code("'zlib'"), None,
                                            name="v"), [b"abc"]),
        ("plain", codec.Plain(codec.Bytes(2), name="v"), [b"ab", b"abc"]),
        ("with_params", codec.WithParams(codec.Struct("x" / codec.Bytes(_code(
            "this['_params']['n']"))), {"n": two}), [{"x": b"ab"}, {"x": b"a"}]),
    ]


WRAPPERS = _wrappers()


def _built(con: cs.Construct, obj) -> tuple:
    """('ok', bytes) or ('error', type, last line of the message): the path Construct
    prefixes (known only interpreted) aside, the same error."""
    try:
        return "ok", con.build(obj)
    except Exception as exc:  # noqa: BLE001 -- comparing whatever each raises
        text = getattr(exc, "message", None)  # the project's errors: without the path
        if text is None:
            text = str(exc).splitlines()[-1] if str(exc) else ""
        return "error", type(exc).__name__, text


@pytest.mark.parametrize("name,wrapper,values", WRAPPERS, ids=[w[0] for w in WRAPPERS])
def test_compiled_build_results_and_errors_are_the_interpreted(name, wrapper, values):
    con = codec.Struct("v" / wrapper)
    fast = con.compile()
    assert not build_fallbacks(fast.source), name
    outcomes = [(_built(con, {"v": v}), _built(fast, {"v": v})) for v in values]
    for interpreted, compiled in outcomes:
        assert compiled == interpreted
    if name != "fixed_negative":
        assert outcomes[0][0][0] == "ok", outcomes[0]  # the good value builds
    if name not in ("zero_padding", "zigzag", "fixed_negative", "compressed_eos"):
        assert any(i[0] == "error" for i, _ in outcomes[1:]), outcomes  # a bad one fails


def test_compiled_errors_are_the_projects_with_offsets():
    """A bad value refused inside a compiled fixed run: same error type, message and
    offset as interpreted (the WAL entry's op byte set to an unknown value)."""
    from bytewright.generated import htt

    entry = htt.encode_wal_entry(htt.WalEntry(7, htt.WalOp.DELETE, "k", None),
                                 semantic_dims=0, tail_layout=htt.SemTailLayout.full)
    bad = entry[:4] + b"\x09" + entry[5:]
    errs = []
    for compiled in (False, True):
        with pytest.raises(DecodeError) as info:
            htt.construct_decode_wal_entry(bad, compiled=compiled, semantic_dims=0,
                                           tail_layout=htt.SemTailLayout.full)
        errs.append(info.value)
    assert [type(e) for e in errs] == [type(errs[0])] * 2
    assert errs[0].offset == errs[1].offset == 4
    assert errs[0].message == errs[1].message


def test_compiled_truncation_is_a_truncation():
    """A short read in a compiled run raises Construct's StreamError (a truncation), not
    ``struct.error``: the stop reason of a log agrees with the interpreted path."""
    from bytewright.generated import htt

    entry = htt.encode_wal_entry(htt.WalEntry(7, htt.WalOp.DELETE, "key", None),
                                 semantic_dims=0, tail_layout=htt.SemTailLayout.full)
    con = htt._compiled("wal_entry")
    with pytest.raises(cs.StreamError):
        con.parse_stream(io.BytesIO(entry[:5]), semantic_dims=0,
                         tail_layout=htt.SemTailLayout.full)


def test_compiled_checksum_is_checked():
    from bytewright.generated import htt

    entry = bytearray(htt.encode_wal_entry(htt.WalEntry(7, htt.WalOp.DELETE, "key", None),
                                           semantic_dims=0,
                                           tail_layout=htt.SemTailLayout.full))
    entry[-1] ^= 0x40
    with pytest.raises(DecodeError) as info:
        htt.construct_decode_wal_entry(bytes(entry), compiled=True, semantic_dims=0,
                                       tail_layout=htt.SemTailLayout.full)
    assert type(info.value).__name__ == "ChecksumError"


def test_packed_view_keeps_the_wire_bytes():
    """A compiled array of numbers read for a ``view: packed`` field becomes the packed
    array of the bytes read, equal to the interpreted path's (packed again)."""
    from bytewright.generated import ze

    node = ze.GraphNodeBlock(bytes(range(64)), ze.Bit4Factors(1.0, 0.5, 2.0), 2,
                             ze.GraphBlockFlags(hub=True), [1, 2] + [0xFFFFFFFF] * 42)
    data = ze.encode_graph_node_block(node, code_bytes=64, max_degree=44)
    p = {"code_bytes": 64, "max_degree": 44}
    a = ze.construct_decode_graph_node_block(data, compiled=True, **p)
    b = ze.construct_decode_graph_node_block(data, **p)
    assert a == b == node
    assert a.neighbours.raw == b.neighbours.raw == data[80:80 + 44 * 4]  # after codes, factors, degree, flags
    assert a.flags.hub and not a.flags.entry_seed


def _mutations(data: bytes, seed: int, n: int = 60) -> list[bytes]:
    import random

    rng = random.Random(seed)
    out = [data[:cut] for cut in sorted({len(data) - 1, len(data) // 2, 1})]
    while len(out) < n and data:
        buf = bytearray(data)
        buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
        out.append(bytes(buf))
    return out


def _outcome(fn):
    """('ok', value) or ('error', None): which error may differ (a compiled record reads
    a fixed run whole before checking its members, as the fast path does, so a cut run
    is a truncation where the interpreted path first refuses a member). The value is
    read whole: a located structure decodes on first use and its errors surface then
    (docs: Random access), so they are an outcome of the decode, not of the comparison."""
    try:
        return "ok", copy.deepcopy(fn())
    except DecodeError:
        return "error", None


EXAMPLE_FIXTURES = [(fx, p) for fx, p in FIXTURES if p is not None]


@pytest.mark.parametrize("fx,proj", EXAMPLE_FIXTURES,
                         ids=[f"{f.family}/{f.path.stem}" for f, _ in EXAMPLE_FIXTURES])
def test_compiled_and_interpreted_agree_on_corrupted_example_inputs(fx, proj):
    """The example projects' wrappers (chained repeats that stop at the first bad frame,
    repeat-until, varints, terminated text, conversions) on damaged copies: the same
    value -- a log's stop reason and offset included -- or both an error."""
    mod = _module(fx, proj)
    dec = mod.CONSTRUCT_DECODERS[fx.record]
    for data in _mutations(fx.data, seed=len(fx.data)):
        a = _outcome(lambda d=data: dec(d, **fx.params))
        b = _outcome(lambda d=data: dec(d, compiled=True, **fx.params))
        assert a == b, (fx.path.name, a, b)


# -- the compiled parse builds the object model ------------------------------

def test_compiled_parse_builds_the_model_and_keeps_packed_bytes():
    """The compiled root record, its opaque nested record and its flags are built as
    model objects in the parse (no Container, no converter pass), the ``view: packed``
    neighbours are one read of the wire bytes (no numbers unpacked), and the converter
    passes the model through: equal to converting the interpreted Container."""
    from bytewright.generated import ze
    from bytewright.runtime.packed import PackedArray

    node = ze.GraphNodeBlock(bytes(range(64)), ze.Bit4Factors(1.0, 0.5, 2.0), 2,
                             ze.GraphBlockFlags(hub=True), [1, 2] + [0xFFFFFFFF] * 42)
    p = {"code_bytes": 64, "max_degree": 44}
    data = ze.encode_graph_node_block(node, **p)
    con = ze._compiled("graph_node_block")
    assert "read_items" not in con.source and "read_packed" in con.source
    got = con.parse(data, **p)
    assert type(got) is ze.GraphNodeBlock and type(got.factors) is ze.Bit4Factors
    assert type(got.flags) is ze.GraphBlockFlags and got.flags.hub
    assert type(got.neighbours) is PackedArray and got.neighbours.raw == data[80:256]
    assert ze._c2m_graph_node_block(got, 64, 44) is got
    assert got == ze._c2m_graph_node_block(ze.C_graph_node_block.parse(data, **p), 64, 44)
    assert got == node
    # a plain compile (outside the module's cache) binds the builders it names itself
    assert ze.C_graph_node_block.compile().parse(data, **p) == node


def _model_records(opaque: bool = True):
    """``outer`` holds ``inner`` (a model builder that is not opaque) and reads its
    member ``n`` for the length of ``data``; ``opaque``: no expression elsewhere reads
    a member of ``outer`` (the generator's finding, see ``ConstructEmitter.model_lines``)."""
    from dataclasses import dataclass

    @dataclass
    class Inner:
        n: int

    @dataclass
    class Outer:
        inner: Inner
        data: bytes

    inner = codec.Struct("n" / codec.Int8ul)
    inner._bw_model = (lambda n: Inner(n), ("n",), (), False)
    outer = codec.Struct("inner" / inner, "data" / codec.Bytes(_code("this['inner']['n']")))
    outer._bw_model = (lambda i, d: Outer(i, d), ("inner", "data"), (), opaque)
    return Inner, Outer, inner, outer


def test_a_member_read_by_its_parent_is_its_local_and_still_a_model():
    """The parent reads ``inner.n``: compiled, that read is the nested record's local,
    so the parent alone holds ``inner`` and both become models; the same record
    compiled on its own returns a Container where its parent cannot keep it."""
    Inner, Outer, inner, outer = _model_records()
    fast = outer.compile()
    assert "['n']" not in fast.source.split("def build")[0]
    assert fast.parse(b"\x02ab") == Outer(Inner(2), b"ab")
    with pytest.raises(cs.StreamError):
        fast.parse(b"\x03ab")  # the same truncation as interpreted
    holder = codec.Struct("x" / outer, "y" / codec.Int8ul)  # no builder: a Container
    got = holder.compile().parse(b"\x01a\x07")
    assert got["x"] == Outer(Inner(1), b"a") and got["y"] == 7
    assert holder.parse(b"\x01a\x07")["x"]["inner"]["n"] == 1  # interpreted: Containers


def test_a_record_read_elsewhere_stays_a_container():
    """Not opaque, nested in a record without a builder that reads its members: the
    Containers stay (the nested ``inner`` too, its parent being one)."""
    Inner, Outer, _, outer = _model_records(opaque=False)
    reader = codec.Struct("o" / outer, cs.Check(_code("this['o']['inner']['n'] == 1")))
    fast = reader.compile()
    got = fast.parse(b"\x01a")
    assert type(got["o"]) is cs.Container and type(got["o"]["inner"]) is cs.Container
    assert got["o"]["inner"]["n"] == 1
    with pytest.raises(cs.CheckError):
        fast.parse(b"\x02ab")
    assert outer.compile().parse(b"\x01a") == Outer(Inner(1), b"a")  # the root: a model


LOCATED_CRC = """
bytewright: 1
family: locatedcrc
records:
  member:
    fields:
      - {name: crc, type: u32, checksum: {algorithm: crc32, covers: [data]}}
      - {name: data, type: bytes, size: 4}
  archive:
    fields:
      - {name: where, type: u8}
      - {name: member, type: member, at: where}
"""


def test_located_damage_is_the_same_error_on_first_use_compiled_and_interpreted(
        schema_module):
    """A located structure with a bad CRC: both Construct decoders return the holder
    (the structure is read on first use), and that first use -- an attribute, a
    comparison, a deep copy -- raises the same error (class, path, absolute offset)."""
    import zlib

    from bytewright.runtime.errors import ChecksumError

    m = schema_module(LOCATED_CRC, "locatedcrc")
    good = bytes([3, 0, 0]) + struct.pack("<I", zlib.crc32(b"data")) + b"data"
    for compiled in (False, True):
        assert m.CONSTRUCT_DECODERS["archive"](good, compiled=compiled).member.data == b"data"
    bad = good[:3] + struct.pack("<I", zlib.crc32(b"data") ^ 1) + b"data"
    errors = []
    for compiled in (False, True):
        dec = m.CONSTRUCT_DECODERS["archive"]
        other = dec(bad, compiled=not compiled)
        for use in (lambda v: v.member.data, copy.deepcopy, other.__eq__):
            value = dec(bad, compiled=compiled)  # the holder decodes
            with pytest.raises(ChecksumError) as info:
                use(value)
            errors.append((type(info.value), info.value.path, info.value.offset))
        assert _outcome(lambda d=dec, c=compiled: d(bad, compiled=c)) == ("error", None)
    assert set(errors) == {(ChecksumError, "archive.member.crc", 3)}, errors
