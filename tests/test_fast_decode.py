"""The optimistic fast path (``_u_<record>``, ``_m_<record>``, ``_em_<record>``) against
the checked one it falls back to.

The optimistic decoders leave out per-read bounds tests and re-run the checked decoder
on anything unusual, so every input must give the same value or the same error (type,
message, offset, path, expected, found) whichever path runs. Each fixture of the
package's own project is decoded whole, truncated at every length, cut with ``end``
inside a buffer that goes on (where an unchecked slice would silently read past
``end``), and corrupted byte by byte; the reference is the same public function with
its optimistic twin switched off (so it takes the checked decoder).
"""

from __future__ import annotations

import functools
import itertools
import pathlib

import pytest

from bytewright.bench import harness
from bytewright.generated import htt as h
from bytewright.generated import kladde as kl
from bytewright.generated import pile as gp
from bytewright.generator import pipeline, project
from bytewright.generator.emit_fast import FastEmitter
from bytewright.generator.emit_fast_encode import needs_roundtrip
from bytewright.review import checks
from bytewright.runtime.errors import BytewrightError, EncodeError

FIXTURES = [f for f in checks.fixtures() if f.data]
MAX_CUTS = 160  # truncation / flip positions per fixture (spread over the whole input)


def _module(family: str):
    return project.package_project().load_module(family)


def _outcome(fn, *args, **kw):
    """The value, or the error as comparable data."""
    try:
        return ("ok", fn(*args, **kw))
    except BytewrightError as exc:
        return ("error", type(exc).__name__, exc.message, exc.offset, exc.path,
                repr(exc.expected), repr(exc.found))


def _raise(*_a, **_k):
    raise RuntimeError("optimistic path switched off")


def _positions(n: int) -> list[int]:
    if n <= MAX_CUTS:
        return list(range(n))
    step = n / MAX_CUTS
    return sorted({int(i * step) for i in range(MAX_CUTS)} | set(range(min(n, 40))))


def _checked(monkeypatch, mod, record: str) -> None:
    """Make ``mod``'s public functions for ``record`` take the checked decoder."""
    monkeypatch.setattr(mod, f"_u_{record}", _raise)
    if hasattr(mod, f"_m_{record}"):  # records not read in runs have no one-loop twin
        monkeypatch.setattr(mod, f"_m_{record}", lambda mv, pos, end, *p: mod._decode_many(
            getattr(mod, f"_d_{record}"), record, mv, pos, end, p))


def _inputs(data: bytes):
    yield data
    for cut in _positions(len(data)):
        yield data[:cut]
    for at in _positions(len(data)):
        for bit in (0x01, 0x80):
            b = bytearray(data)
            b[at] ^= bit
            yield bytes(b)


@pytest.mark.parametrize("fx", FIXTURES, ids=[f"{f.family}/{f.path.stem}" for f in FIXTURES])
def test_optimistic_decode_agrees_with_checked(fx, monkeypatch):
    mod = _module(fx.family)
    record = fx.record
    if not hasattr(mod, f"_u_{record}"):
        pytest.skip(f"{record} has no optimistic twin")
    decode = getattr(mod, f"decode_{record}")
    many = getattr(mod, f"decode_many_{record}")
    inputs = list(_inputs(fx.data))
    # the buffer goes on past ``end``: unchecked reads may see bytes they must not use
    tails = [(fx.data + fx.data, cut) for cut in _positions(len(fx.data))]
    fast = [_outcome(decode, b, **fx.params) for b in inputs]
    fast_many = [_outcome(many, b, **fx.params) for b in inputs]
    fast_end = [_outcome(many, b, 0, end, **fx.params) for b, end in tails]
    # the twins take another road on ``bytes`` than on a ``memoryview`` (a mapped file)
    fast_mv = [_outcome(many, memoryview(b), **fx.params) for b in inputs]
    _checked(monkeypatch, mod, record)
    slow = [_outcome(decode, b, **fx.params) for b in inputs]
    slow_many = [_outcome(many, b, **fx.params) for b in inputs]
    slow_end = [_outcome(many, b, 0, end, **fx.params) for b, end in tails]
    for got, want, what in ((fast, slow, "decode"), (fast_many, slow_many, "decode_many"),
                            (fast_end, slow_end, "decode_many with end"),
                            (fast_mv, slow_many, "decode_many on a memoryview")):
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert g == w, f"{what} input #{i}: optimistic {g[:4]} != checked {w[:4]}"


def _example_fixtures() -> list:
    root = pathlib.Path(__file__).resolve().parents[1] / "examples"
    out = []
    for toml in sorted(root.glob("*/bytewright.toml")):
        proj = project.load(toml)
        out += [(proj, f) for f in checks.fixtures(fixture_dir=proj.fixtures) if f.data]
    return out


EVERY = [(None, f) for f in FIXTURES] + _example_fixtures()


@functools.cache
def _families(toml: pathlib.Path | None) -> dict:
    proj = project.load(toml) if toml else None
    return pipeline.run(proj=proj, render_modules=False).families


def _family(proj, family: str):
    """The IR of ``family`` in ``proj`` (None: the package's own project)."""
    return _families(proj.file if proj else None)[family]


def _located_records(proj, family: str) -> set[str]:
    return {n for n, r in _family(proj, family).records.items() if r.located}


# docs/schema-language.md, "Structures at offsets": a record with located fields has
# ``decode_``/``encode_`` (both paths) but no run functions (it does not repeat)
_RUN_FUNCTIONS = ("iter", "decode_many", "decode_prefix", "decode_rows", "encode_many")


def _assert_no_runs(mod, record: str) -> None:
    for fn in ("decode", "encode", "construct_decode", "construct_encode"):
        assert callable(getattr(mod, f"{fn}_{record}", None)), f"{fn}_{record} missing"
    present = [f"{fn}_{record}" for fn in _RUN_FUNCTIONS if hasattr(mod, f"{fn}_{record}")]
    assert present == [], f"a record with located fields has run functions {present}"


def _assert_many_is_decoded_back(mod, fx) -> None:
    """docs/schema-language.md, "Positions in expressions": a record whose layout reads
    ``_remaining`` is encoded in a run only where each record decodes back, at its
    place in the whole buffer, to its value and ends where the next begins; the first
    that does not is an ``EncodeError`` naming it."""
    record = fx.record
    decode = getattr(mod, f"decode_{record}")
    many = getattr(mod, f"encode_many_{record}")
    value, _end = decode(fx.data, **fx.params)
    one = getattr(mod, f"encode_{record}")(value, **fx.params)
    assert many([], **fx.params) == b""
    assert many([value], **fx.params) == one  # alone, it is the last in its buffer
    log = one * 3
    bad = None  # the first record of the log that does not decode back at its place
    for i in range(3):
        try:
            got, end = decode(log, i * len(one), **fx.params)
        except BytewrightError:
            bad = i
            break
        if got != value or end != (i + 1) * len(one):
            bad = i
            break
    if bad is None:
        assert many([value] * 3, **fx.params) == log
        return
    # not self-delimiting: the bytes would read back as other records
    with pytest.raises(EncodeError) as err:
        many([value] * 3, **fx.params)
    assert err.value.path == f"{record}[{bad}]"
    assert "the layout depends on what only a decoder knows" in err.value.message


@pytest.mark.parametrize("proj,fx", EVERY,
                         ids=[f"{p.name + ':' if p else ''}{f.family}/{f.path.stem}"
                              for p, f in EVERY])
def test_many_encoder_gives_the_records_encoded_one_by_one(proj, fx, monkeypatch):
    # ``_em_<record>`` gathers each record's pieces in a list joined once, its checksum
    # taken over the joined bytes: it must give exactly the one-by-one bytes
    if proj:
        proj.activate()  # the example's plug-ins (its checksums, kinds) are registered
    mod = proj.load_module(fx.family) if proj else _module(fx.family)
    record = fx.record
    if record in _located_records(proj, fx.family):
        _assert_no_runs(mod, record)
        return
    if record in needs_roundtrip(_family(proj, fx.family)):
        _assert_many_is_decoded_back(mod, fx)
        return
    if not hasattr(mod, f"_em_{record}"):
        pytest.skip(f"{record} has no many-loop encoder")
    value, _end = getattr(mod, f"decode_{record}")(fx.data, **fx.params)
    one = getattr(mod, f"encode_{record}")(value, **fx.params)
    monkeypatch.setattr(mod, "_encode_many", _raise)  # the inline loop may not fall back
    many = getattr(mod, f"encode_many_{record}")
    assert many([value, value, value], **fx.params) == one * 3
    assert many([], **fx.params) == b""
    # past the point where the listed pieces are joined into a chunk, and a count that
    # leaves a partial last chunk
    n = 2 * FastEmitter.ENCODE_CHUNK_RECORDS + 3
    assert many([value] * n, **fx.params) == one * n


@pytest.mark.parametrize("proj,fx", EVERY,
                         ids=[f"{p.name + ':' if p else ''}{f.family}/{f.path.stem}"
                              for p, f in EVERY])
def test_decode_prefix_is_the_whole_records_before_the_first_that_fails(proj, fx):
    """``decode_prefix_<record>`` over a log of three copies of the fixture, cut with
    ``end`` at spread positions (the buffer goes on past ``end``) and with bytes
    flipped: the records and the stop offset are what the checked public decoder gives
    record by record, stopping at the first error; it never raises."""
    if proj:
        proj.activate()
    mod = proj.load_module(fx.family) if proj else _module(fx.family)
    if fx.record in _located_records(proj, fx.family):
        _assert_no_runs(mod, fx.record)
        return
    decode = getattr(mod, f"decode_{fx.record}")
    prefix = getattr(mod, f"decode_prefix_{fx.record}")
    try:
        _value, size = decode(fx.data, **fx.params)
    except BytewrightError:
        pytest.skip("the fixture is not one whole record")
    log = fx.data[:size] * 3

    def reference(buf: bytes) -> tuple[list, int]:
        out, pos = [], 0
        while pos < len(buf):
            try:
                value, nxt = decode(buf, pos, **fx.params)
            except BytewrightError:
                break
            if nxt <= pos:
                break
            out.append(value)
            pos = nxt
        return out, pos

    whole = prefix(log, **fx.params)
    assert whole == reference(log)
    # a record that reads to the end of its buffer (a whole file) is not repeatable
    repeatable = len(whole[0]) == 3
    assert not repeatable or whole[1] == len(log)
    for cut in _positions(len(log)):
        assert prefix(log, 0, cut, **fx.params) == reference(log[:cut]), f"end={cut}"
    for at in _positions(len(log)):
        bad = bytearray(log)
        bad[at] ^= 0x10
        assert prefix(bytes(bad), **fx.params) == reference(bytes(bad)), f"flip at {at}"
    # from an offset: the stop is an offset into the whole buffer
    if repeatable:
        records, stop = prefix(log, size, **fx.params)
        assert len(records) == 2 and stop == len(log)


def test_optimistic_twins_exist_for_the_benchmarked_records():
    # the mechanism is in use where it matters (a silent opt-out would pass every test)
    assert callable(getattr(h, "_m_wal_entry", None)) and callable(h._u_wal_entry)
    assert callable(getattr(kl, "_u_table_content", None))
    assert callable(getattr(gp, "_m_pile_record", None))
    assert callable(getattr(gp, "_u_frame_rest", None))
    assert callable(getattr(h, "_em_wal_entry", None))


def _wal(n: int = 6, dims: int = 0) -> tuple[bytes, list]:
    return harness._htt_corpus(n, dims)


def _err(fn, *a, **k):
    out = _outcome(fn, *a, **k)
    assert out[0] == "error", out
    return out


def test_torn_last_entry_keeps_the_entries_before_and_names_the_index():
    data, values = _wal()
    params = {"semantic_dims": 0, "tail_layout": h.SemTailLayout.full}
    # the checked decoder on the same bytes is the authority
    want = _err(h._decode_many, h._d_wal_entry, "wal_entry", data[:-3], 0, None,
                (0, h.SemTailLayout.full))
    got = _err(h.decode_many_wal_entry, data[:-3], **params)
    assert got == want
    assert got[1] == "TruncatedError" and got[4].startswith("wal_entry[5]")
    # a short last entry followed by more bytes beyond ``end`` reads past end unchecked
    cut = len(data) - 10
    got = _err(h.decode_many_wal_entry, data, 0, cut, **params)
    want = _err(h._decode_many, h._d_wal_entry, "wal_entry", data, 0, cut,
                (0, h.SemTailLayout.full))
    assert got == want


def test_fallback_continues_after_the_good_records():
    data, values = _wal(5)
    bad = bytearray(data)
    bad[-1] ^= 0xFF  # last entry's CRC
    err = _err(h.decode_many_wal_entry, bytes(bad), semantic_dims=0,
               tail_layout=h.SemTailLayout.full)
    assert err[1] == "ChecksumError" and err[4].startswith("wal_entry[4]")
    assert h.decode_many_wal_entry(data, semantic_dims=0,
                                   tail_layout=h.SemTailLayout.full) == values


def test_unknown_enum_in_the_optimistic_loop_is_the_checked_error():
    data, _ = _wal(3)
    bad = bytearray(data)
    bad[4] = 99  # first entry's op
    got = _err(h.decode_many_wal_entry, bytes(bad), semantic_dims=0,
               tail_layout=h.SemTailLayout.full)
    assert got[1:5] == ("ConstraintError", "unknown wal_op value", 4, "wal_entry[0].op")


def test_kladde_statements_truncated_everywhere():
    case = harness.kladde_case(40)
    data = case.data
    for cut in range(len(data)):
        got = _outcome(kl.decode_table_content, data[:cut])
        want = _outcome(lambda b: kl._d_table_content(b, 0, len(b)), data[:cut])
        if want[0] == "error":  # the public function prefixes the record name
            want = (*want[:4], "table_content" + ("." + want[4] if want[4] else ""), *want[5:])
        assert got[0] == want[0], cut
        if got[0] == "ok":
            assert got[1] == want[1]
        else:
            assert got[1:4] == want[1:4] and got[4].rstrip(".") == want[4].rstrip("."), cut


def test_encode_many_inline_loop_names_the_failing_item():
    data, values = _wal(4)
    params = {"semantic_dims": 0, "tail_layout": h.SemTailLayout.full}
    assert h.encode_many_wal_entry(values, **params) == data
    assert h.encode_many_wal_entry(tuple(values), **params) == data
    assert h.encode_many_wal_entry(iter(values), **params) == data  # not a list: per record
    broken = list(values)
    broken[2] = h.WalEntry(broken[2].seq, broken[2].op, 12345, broken[2].body)
    with pytest.raises(EncodeError) as inline:
        h.encode_many_wal_entry(broken, **params)
    with pytest.raises(EncodeError) as per_record:
        h._encode_many(h._e_wal_entry, "wal_entry", broken, (0, h.SemTailLayout.full))
    assert inline.value.path == per_record.value.path
    assert inline.value.path.startswith("wal_entry[2]")
    assert str(inline.value) == str(per_record.value)


def test_tailed_wal_agrees_under_truncation():
    data, values = _wal(3, dims=4)
    params = {"semantic_dims": 4, "tail_layout": h.SemTailLayout.full}
    ref = (4, h.SemTailLayout.full)
    assert h.decode_many_wal_entry(data, **params) == values
    for cut in itertools.chain(range(0, 60), range(len(data) - 80, len(data))):
        got = _outcome(h.decode_many_wal_entry, data[:cut], **params)
        want = _outcome(h._decode_many, h._d_wal_entry, "wal_entry", data[:cut], 0, None, ref)
        assert got == want, cut
