"""The generated Construct path compiles fully (issue 16).

``Struct.compile()`` falls back to a construct's interpreted ``_parse`` for every class
without ``_emitparse`` (``linkedparsers[...]`` in the compiled source), and everything
below such a construct then runs interpreted. For every record of every shipped family and
of the example projects the compiled parser must have no such fallback (the documented
exceptions below, with their reason), and on every golden fixture the compiled parse, the
interpreted parse and the fast path must give the same value.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import construct as cs
import pytest

from bytewright.generator import checks, project
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


def fallbacks(source: str) -> list[str]:
    """What each interpreted fallback in a compiled source is (Construct's own comment)."""
    out = []
    for m in _FALLBACK.finditer(source):
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
    """Builds still compile around the wrappers (those without ``_emitbuild`` build
    interpreted inside the compiled builder): the golden bytes, as interpreted."""
    mod = _module(fx, proj)
    value, _ = mod.DECODERS[fx.record](fx.data, **fx.params)
    assert mod.CONSTRUCT_ENCODERS[fx.record](value, compiled=True, **fx.params) == fx.data


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
    is a truncation where the interpreted path first refuses a member)."""
    try:
        return "ok", fn()
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
