"""Pile codecs: facts.md §8.1/§8.2 conformance values reproduced from their inputs, every
fixture (record forms, keys, dense encodings, transcripts, whole files), the §5 dispatch
(CorruptPile vs UnsupportedRecord), truncation at every offset and reserved-byte flips."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from bytewright.generated import pile as g
from bytewright.review.checks import check_fixture, fixture_text, fixtures
from bytewright.runtime.errors import BytewrightError
from bytewright.runtime.pile import (
    CorruptPile,
    Pile,
    UnsupportedRecord,
    crypto,
    iter_records,
    kinds,
)
from bytewright.runtime.pile.scan import read_record

from .conftest import load_cases

HERE = Path(__file__).resolve().parent
FIX = HERE.parent / "fixtures" / "pile"


C = load_cases("pile_cases")  # field values of the fixtures (tests/cases)


def _hex(text: str) -> bytes:
    return bytes.fromhex(re.sub(r"\s+", "", text))


def _enc(value: g.PileRecord) -> bytes:
    return g.encode_pile_record(value)


# -- facts.md §8.1: repository goldens, reproduced from their inputs --------------------------

def test_8_1_commit_transcript_signature_and_fingerprint():
    assert C.PK == _hex("EA4A6C63E29C520ABEF5507B132EC5F9954776AEBEBE7B92421EEA691446D22C")
    t = crypto.commit_transcript(C.PK, C.b(1), C.b(2), C.b(3))
    assert len(t) == 188
    assert t == (b"triblespace.collection.commit.transcript" + _hex("B34817308188C4515A3C51967A91A603")
                 + _hex("00000002") + C.PK + C.b(1) + C.b(2) + C.b(3))
    body = C.commit().record.body
    assert body.sig_r == _hex("F89FCF5C72BC7EC3E376C6AB6BDEFC6ECEA3ADBBCA7A36DBF1729413A7820564")
    assert body.sig_s == _hex("F684108AF3E8E3898904D20EA458DCAE68F0F97F4E5C06DAFA0FAE0691F68D0B")
    assert crypto.commit_fingerprint(body) == _hex(
        "B1740DE9C272B4552B97EDDF77C796D72688A2B9325D815C302236882657E608")
    assert crypto.commit_signature_ok(body)


def test_8_1_proof_root_key_of_01():
    assert crypto.public_key(C.b(1)) == _hex(
        "8A88E3DD7409F195FD52DB2D3CBA5D72CA6709BF1D94121BF3748801B40F6F5C")


def test_transcript_lengths_4_2():
    assert len(crypto.merge_transcript(C.PK, *[C.b(i) for i in range(1, 7)])) == 280
    assert len(crypto.derive_transcript(C.PK, *[C.b(i) for i in range(1, 5)])) == 217


# -- facts.md §8.2: derived frames ----------------------------------------------------------

def test_8_2_blob_hello():
    data = _enc(C.blob(b"hello"))
    assert len(data) == 512
    assert data[:128] == _hex(
        "0371B249F0626B2ABDDB80E23EA969059D9656A5EA5A497320351F3B02000000"
        "01148F301FE56E346D16596A8480532E8B4420C4EFD00C8DFF437D0DF9810ED0"
        "0068E5CF8B010000050000000000000000000000000000000000000000000000"
        "EA8F163DB38682925E4491C5E58D4BB3506EF8C14EB78A86E908C5624A67200F")
    assert data[128:256] == bytes(128) and data[256:261] == b"hello" and data[261:] == bytes(251)


def test_8_2_commit_frame():
    data = _enc(C.commit())
    assert data == _hex(
        "0371B249F0626B2ABDDB80E23EA969059D9656A5EA5A497320351F3B01000000"
        "A1322BB3F5214287C314D42AFCC1A97CB264FACD9A22B4938838BE78DB31AA59") + C.b(1) + C.b(2) \
        + C.b(3) + _hex(
        "EA4A6C63E29C520ABEF5507B132EC5F9954776AEBEBE7B92421EEA691446D22C"
        "F89FCF5C72BC7EC3E376C6AB6BDEFC6ECEA3ADBBCA7A36DBF1729413A7820564"
        "F684108AF3E8E3898904D20EA458DCAE68F0F97F4E5C06DAFA0FAE0691F68D0B")


def test_8_2_one_edge_proof_and_id():
    data = _enc(C.proof(1))
    assert data == _hex(
        "0371B249F0626B2ABDDB80E23EA969059D9656A5EA5A497320351F3B01000000"
        "9E00F6EB8D63E5EB1A3ECFA284118F157B2F08CBDC95ECCEB8C2392AD794069D") + C.b(9) + _hex(
        "8A88E3DD7409F195FD52DB2D3CBA5D72CA6709BF1D94121BF3748801B40F6F5C") + C.b(4) + _hex(
        "8139770EA87D175F56A35466C34C7ECCCB8D8A91B4EE37A25DF60F5B8FC9B394"
        "10C02C5965D8A30F50CEC06F2421758F20376B681D139E29847F80E5F55F6B8B"
        "4C8A17E5A9D76A9B676FB73C77FE2A72A9DA9210220BAE7E9D54B29956F48D07")
    pile = Pile.load(data)
    assert list(pile.proofs) == [_hex("39904C25AD7877FFFD07B08F2BC872DC04CAF01167AE38585152EA2B60919361")]


def test_8_2_want_blob_41():
    data = _enc(C.want(C.WANT_BLOB))
    assert data == (kinds.FRAME_MAGIC + _hex("01000000")
                    + _hex("82EE8C72E252AB403C431AA98C9E77C0EA89796A8111DFF8C252ABCDE6F87D6F")
                    + b"\x01" + bytes(31) + C.b(0x41) + bytes(128))
    assert g.encode_want_request(C.WANT_BLOB) == b"\x01" + C.b(0x41) + bytes(64)


def test_kind_handles_come_from_the_schema():
    assert kinds.KIND_BLOB.hex().upper().startswith("01148F30") and len(kinds.KIND_BLOB) == 32
    assert kinds.FRAME_MAGIC.hex().upper() == "0371B249F0626B2ABDDB80E23EA969059D9656A5EA5A497320351F3B"
    assert crypto.EMPTY_ARCHIVE == _hex("AF1349B9F5F9A1A6A0404DEA36DCC9499BCB25C9ADC112B7CC9A93CAE41F3262")


# -- fixtures -------------------------------------------------------------------------------

def test_every_case_is_its_fixture_byte_for_byte():
    names = set()
    for name, record, params, value, doc in C.cases():
        data = g.ENCODERS[record](value, **params)
        assert (FIX / f"{name}.hex").read_text() == fixture_text(record, params, data, doc), name
        names.add(name)
    assert {p.stem for p in FIX.glob("*.hex")} == names


def test_every_pile_fixture_passes_both_codec_paths():
    fxs = fixtures("pile")
    assert len(fxs) >= 60
    for fx in fxs:
        res = check_fixture(fx)
        assert res.ok, (fx.path.name, res.error, res.checks)


def test_every_schema_record_form_has_a_fixture():
    seen = set()
    for fx in fixtures("pile"):
        if fx.record == "pile_record":
            seen.add(read_record(memoryview(fx.data), 0, heads_only=False).name)
    wanted = set(kinds.FRAME_KINDS) | set(kinds.ENVELOPE_KINDS) | set(kinds.LEGACY_MARKERS)
    wanted -= {"frame_rest", "envelope36_rest", "v3_local_cell"}  # containers; cells are opaque
    assert wanted <= seen, wanted - seen
    assert "opaque" in seen


@pytest.mark.parametrize("path", sorted((FIX / "bad").glob("*.hex")), ids=lambda p: p.stem)
def test_bad_fixtures_raise_their_error(path):
    text = path.read_text()
    error, offset = re.search(r"#: expect: (\w+) (\d+)", text).groups()
    data = _hex("".join(ln for ln in text.splitlines() if not ln.startswith("#")))
    with pytest.raises((CorruptPile, UnsupportedRecord)) as exc:
        Pile.load(data)
    assert type(exc.value).__name__ == error and exc.value.offset == int(offset)
    expected = {name: (data, err, off) for name, data, err, off, _ in C.bad_cases()}[path.stem]
    assert data == expected[0]


def test_trailing_a5_is_unsupported_with_marker():
    good = g.encode_pile_file(C.mixed_pile())
    with pytest.raises(UnsupportedRecord) as exc:
        Pile.load(good + b"\xa5" * 16)
    assert exc.value.offset == len(good) and exc.value.marker == b"\xa5" * 16


# -- §5 dispatch order ----------------------------------------------------------------------

@pytest.mark.parametrize("data,error", [
    (b"\x03q", CorruptPile),                                  # fewer than 16 bytes
    (kinds.FRAME_MAGIC[:20], CorruptPile),                    # proper prefix of the magic
    (kinds.LEGACY_MARKERS["v3_blob"], CorruptPile),           # a V3 blob marker alone
    (bytes.fromhex("ED6B46F7286D4556B076C17B79FD8315") + bytes(240), UnsupportedRecord),  # V5 derive unenveloped
    (kinds.MAGIC_HEAD + b"\x00" * 12 + bytes(228), UnsupportedRecord),   # magic's head, wrong tail
    (bytes(256), UnsupportedRecord),
])
def test_dispatch(data, error):
    with pytest.raises(error) as exc:
        Pile.load(data)
    assert exc.value.offset == 0


def _frame_bytes(kind: bytes, body: bytes, span: int) -> bytes:
    return kinds.FRAME_MAGIC + span.to_bytes(4, "little") + kind + body


@pytest.mark.parametrize("mutate,why", [
    (lambda d: d[:28] + bytes(4) + d[32:], "span 0"),
    (lambda d: d[:28] + (3).to_bytes(4, "little") + d[32:] + bytes(256), "blob span not 1 + ceil(len/256)"),
    (lambda d: d[:28] + (2**32 - 1).to_bytes(4, "little") + d[32:], "record past end of file"),
])
def test_bad_span_is_corrupt(mutate, why):
    good = _enc(C.blob(b"hello"))
    data = good + mutate(good)
    with pytest.raises(CorruptPile) as exc:
        Pile.load(data)
    assert exc.value.valid_length == len(good), why


def _commit_span2() -> bytes:
    data = bytearray(_enc(C.commit()) + bytes(256))
    data[28] = 2  # a COMMIT requires span 1
    return bytes(data)


def _patched(build, good, other, bad: bytes) -> bytes:
    """Bytes the encoder refuses to write (it checks the layout's rules): encode build(good),
    a valid value, and overwrite the offending field with ``bad``, its raw encoding. The
    field is found by diffing with build(other), a valid value differing from ``good`` in
    the field's first and last byte. Pile frames carry no checksum over these bytes."""
    a, b = build(good), build(other)
    assert len(a) == len(b)
    diff = [i for i in range(len(a)) if a[i] != b[i]]
    lo, hi = diff[0], diff[-1] + 1
    assert hi - lo == len(bad), (lo, hi, bad)
    out = bytearray(a)
    out[lo:hi] = bad
    return bytes(out)


def _nil_pin_head() -> bytes:
    return _patched(lambda pin: _enc(C.cur(kinds.KIND_PIN_HEAD, g.PinHeadBody(pin, C.b(2)))),
                    C.h16(1), C.h16(2), bytes(16))


def _nil_v1_branch() -> bytes:
    return _patched(lambda br: _enc(C.legacy("v1_branch", g.V1Branch(br, C.b(2)))),
                    C.h16(1), C.h16(2), bytes(16))


@pytest.mark.parametrize("build,why", [
    (lambda: _want_raw(2, C.b(1), C.b(3), C.b(2)), "want merge high < low"),
    (lambda: _nil_pin_head(), "nil pin id"),
    (_commit_span2, "commit with span 2"),
    (lambda: _nil_v1_branch(), "nil V1 branch id"),
])
def test_rule_breaks_are_corrupt(build, why):
    with pytest.raises(CorruptPile) as exc:
        Pile.load(_enc(C.blob(b"x")) + build())
    assert exc.value.valid_length == 512, why


def _want_raw(tag: int, a: bytes, b: bytes, c: bytes) -> bytes:
    return kinds.FRAME_MAGIC + (1).to_bytes(4, "little") + kinds.KIND_WANT_V3 + bytes([tag]) \
        + bytes(31) + a + b + c + bytes(64)


@pytest.mark.parametrize("tag,a,b,c", [
    (3, C.b(1), C.b(2), C.b(3)),          # retired Derive v1 request
    (9, C.b(1), C.b(2), C.b(3)),          # unknown tag
    (1, C.b(1), C.b(2), bytes(32)),       # Blob with B non-zero
    (2, C.b(1), C.b(3), C.b(2)),          # Merge with high < low
    (4, C.b(1), C.b(2), C.b(3)),          # Derive with C non-zero
])
def test_want_request_rules(tag, a, b, c):
    with pytest.raises(CorruptPile):
        Pile.load(_want_raw(tag, a, b, c))
    assert Pile.load(_want_raw(2, C.b(1), C.b(2), C.b(2))).wants  # equal inputs allowed


def test_merge_v6_canonical_order_and_proof_minimal_span():
    m = C.merge_v6().record.body
    # low <-> high and low_witness <-> high_witness swapped (the encoder refuses to write
    # this), patched into the valid frame; the signature bytes stay those of the valid one
    good = _enc(C.cur(kinds.KIND_MERGE_V6, m, 2))
    swapped = bytearray(good)
    for x, y in ((m.low, m.high), (m.low_witness, m.high_witness)):
        assert x != y and good.count(x) == 1 and good.count(y) == 1
        i, j = good.index(x), good.index(y)
        swapped[i:i + 32], swapped[j:j + 32] = y, x
    with pytest.raises(CorruptPile):
        Pile.load(bytes(swapped))
    one = C.proof(1).record.body
    padded = g.ProofV5Body(one.resource, one.root, list(one.edges) + [C.ZERO_EDGE] * 2)
    with pytest.raises(CorruptPile, match="minimal"):
        Pile.load(_enc(C.cur(kinds.KIND_PROOF_V5, padded, 2)))


# -- bad input sweeps -----------------------------------------------------------------------

def _boundaries(data: bytes) -> list[int]:
    return [0] + [r.end for r in iter_records(data)]


def test_truncation_at_every_offset():
    data = g.encode_pile_file(C.mixed_pile())
    bounds = _boundaries(data)
    assert bounds[-1] == len(data) and len(bounds) == 10
    for n in range(len(data) + 1):
        cut = data[:n]
        expect = max(b for b in bounds if b <= n)
        try:
            pile = Pile.load(cut)
        except CorruptPile as exc:
            assert n != expect and exc.valid_length == expect, n
        except BytewrightError as exc:  # anything else is a failure of the dispatch
            raise AssertionError(f"cut at {n}: {type(exc).__name__}: {exc}") from exc
        else:
            assert n == expect and pile.applied == n, n


RESERVED = {  # record fixture -> byte ranges a reader must refuse when non-zero
    "blob_hello": [(80, 96), (128, 256)],
    "pin_head": [(80, 96), (128, 256)],
    "pin_tombstone": [(80, 256)],
    "want_blob": [(65, 96), (128, 256)],
    "want_derive": [(65, 96), (160, 256)],
    "merge_v6": [(352, 512)],
    "derive_v7": [(288, 512)],
    "retired_blob_want_assert": [(96, 256)],
    "unsigned_merge": [(192, 256)],
    "peer": [(128, 256)],
    "v3_commit": [(192, 256)],
    "v4_merge": [(144, 256)],
    "env_blob": [(84, 256)],
    "env_commit": [(228, 256)],
}


@pytest.mark.parametrize("name", sorted(RESERVED))
def test_flipped_reserved_byte_is_corruption_at_that_record(name):
    rec = dict((n, v) for n, v, _ in C.record_cases())[name]
    head = _enc(C.blob(b"first"))
    body = _enc(rec)
    tail = _enc(C.blob(b"last"))
    assert Pile.load(head + body + tail).records == 3
    for lo, hi in RESERVED[name]:
        for i in range(lo, hi):
            bad = bytearray(body)
            bad[i] ^= 0x5A
            with pytest.raises(CorruptPile) as exc:
                Pile.load(head + bytes(bad) + tail)
            assert exc.value.valid_length == len(head), (name, i)


def test_flipped_payload_is_not_seen_by_refresh_but_by_reads():
    data = bytearray(_enc(C.blob(b"hello")))
    data[257] ^= 1
    pile = Pile.load(bytes(data))  # refresh never hashes payloads
    (handle,) = pile.blobs
    from bytewright.runtime.pile import BlobUnavailable
    with pytest.raises(BlobUnavailable):
        pile.get(handle)
    fixed = Pile.load(bytes(data) + _enc(C.blob(b"hello")))
    assert fixed.get(handle) == b"hello" and len(fixed.blobs[handle]) == 2


def _retired_v2(edge: g.ProofV2Edge) -> bytes:
    content = g.ProofV2Content(C.b(9), crypto.public_key(C.b(1)), [edge])
    return _enc(C.cur(C.kind_of("proof_v2_body"), g.ProofV2Body(225, g.ProofV2Data(content, bytes(256 * 2 - 96 - 225))), 2))


def _edge(action=None, flags=1, lower=0, upper=0, delegate=None) -> g.ProofV2Edge:
    action = C.h16(1) if action is None else action
    return g.ProofV2Edge(action, flags, lower, upper,
                         crypto.public_key(C.b(2)) if delegate is None else delegate, bytes(64))


def _i128(n: int) -> bytes:
    return n.to_bytes(16, "big", signed=True)


# (valid edge, None) or (valid edge, (field, good, other, bad bytes)): the encoder refuses
# the bad edges, so a valid edge is encoded and the offending field patched (_patched)
_V2_CASES = [
    (_edge(), None, True),
    (_edge(flags=5, lower=-3, upper=7), None, True),                               # bounded
    (_edge(flags=5, lower=7, upper=7), ("lower", 7, -1, _i128(8)), False),         # lower > upper
    (_edge(flags=5, upper=7), ("flags", 5, 6, bytes([1])), False),                # bounds without bit 2
    (_edge(flags=1), ("flags", 1, 2, bytes([4])), False),                         # bits 0..1 both zero
    (_edge(flags=1), ("flags", 1, 2, bytes([9])), False),                         # bit 3 set
    (_edge(), ("action", C.h16(1), C.h16(2), bytes(16)), False),                  # nil action
    (_edge(delegate=b"\x01" + bytes(31)), None, False),                           # weak delegate
]


@pytest.mark.parametrize("edge,bad,ok", _V2_CASES,
                         ids=[f"edge{i}-{ok}" for i, (_, _, ok) in enumerate(_V2_CASES)])
def test_retired_proof_v2_structure(edge, bad, ok):
    if bad is None:
        data = _retired_v2(edge)
    else:
        field, good, other, raw = bad
        data = _patched(lambda v: _retired_v2(dataclasses.replace(edge, **{field: v})),
                        good, other, raw)
    if ok:
        assert Pile.load(data).records == 1
    else:
        with pytest.raises(CorruptPile):
            Pile.load(data)


def test_retired_proof_v1_keys_must_be_points():
    good = C.proof_v1()
    assert Pile.load(_enc(good)).records == 1
    body = good.record.body
    not_a_point = bytes([2]) + bytes(31)  # y = 2 has no x on the curve
    assert crypto.is_small_order(not_a_point) is None
    bad = g.ProofV1Body(160, g.ProofV1Data(g.ProofV1Content(not_a_point, body.data.body.edges), b""))
    with pytest.raises(CorruptPile, match="retired proof key"):
        Pile.load(_enc(C.cur(C.kind_of("proof_v1_body"), bad, 1)))
