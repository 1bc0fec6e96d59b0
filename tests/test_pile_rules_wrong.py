"""Pile rules the runtime got wrong, each tested against the words of the spec
(shared/specs/pile/spec.txt, normative; facts.md fills its gaps): what reframe keeps,
diagnose at an offset inside a record, where salvage may resume, proof v3 frames, the
retired typed WANT rule, no fingerprints at replay, and short error texts."""

from __future__ import annotations

import json
import os
import shlex
import struct
import time
from collections import Counter
from pathlib import Path

import pytest

from bytewright.cli.main import main
from bytewright.generated import pile as g
from bytewright.runtime.pile import (
    CorruptPile,
    Pile,
    RepairRefused,
    crypto,
    diagnose,
    iter_records,
    kinds,
    reframe,
    salvage,
)

from .conftest import load_cases

C = load_cases("pile_cases")
RECS = {n: v for n, v, _ in C.record_cases()}
MAGIC = bytes.fromhex("0371B249F0626B2ABDDB80E23EA969059D9656A5EA5A497320351F3B")
PROOF_V3 = bytes.fromhex("CFAD21DF6FA3D3ADF9939E432DDCF8447CB9C57081B979F1CFD669E4800D3E32")


def enc(name_or_value) -> bytes:
    v = RECS[name_or_value] if isinstance(name_or_value, str) else name_or_value
    return g.encode_pile_record(v)


def write(path, *parts: bytes) -> bytes:
    data = b"".join(parts)
    Path(path).write_bytes(data)
    return data


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def want_key(rec) -> bytes:
    v = rec.value
    return g.encode_want_request(g.WantRequest(v.tag, v.request))


def current_want(tag: int, a: bytes, b: bytes = bytes(32), c: bytes = bytes(32)) -> bytes:
    return bytes([tag]) + a + b + c


def retired_typed(assert_: bool, tag: int, a: bytes, b: bytes, c: bytes) -> bytes:
    kind = C.kind_of("retired_typed_want_body") if assert_ else C.RETRACT_TYPED_WANT
    return enc(C.cur(kind, g.RetiredTypedWantBody(tag, a, b, c)))


def retired_blob_want(assert_: bool, h: bytes) -> bytes:
    kind = C.kind_of("retired_blob_want_body") if assert_ else C.RETRACT_BLOB_WANT
    return enc(C.cur(kind, g.RetiredBlobWantBody(h)))


# -- 1. reframe keeps what the spec says survives ---------------------------------------

PRESERVED_EXACTLY = [
    # "Retired unsigned equations are preserved exactly" - all five forms (spec.txt, the
    # unsigned MERGE/DERIVE kinds; "The earlier 36-byte-envelope forms, and unenveloped
    # MERGE V4, are recognized as the same unsigned evidence")
    "unsigned_merge", "unsigned_derive", "v4_merge", "env_merge", "env_derive_v5",
    # "Earlier V3 definition-ID collection frames also survive byte-for-byte."
    "v3_collection_definition", "v3_commit", "v3_merge", "v3_derive",
    # "Current native MERGE and DERIVE records are grow-only materialized work and are
    # preserved exactly"
    "merge_v6", "derive_v7",
    # "Collection records and capability proofs are grow-only sets"
    "proof_v5_one_edge", "proof_v5_two_edges",
]
# "Records that no longer carry retained evidence are dropped and counted: retired PEER,
# STORE_SCOPE and pile-artifact-offer state. This includes older retired derivation record
# generations"; retired proofs: "semantic rewrites may drop them".
DROPPED = ["peer", "store_scope", "artifact_offer", "v4_derive", "env_derive_v4",
           "proof_v1", "proof_v2"]
BLOBS = ["blob_hello", "blob_empty", "blob_256", "blob_257", "v1_blob", "v3_blob", "env_blob"]
PINS = ["v1_branch", "v1_tombstone", "v3_branch", "pin_head", "v3_tombstone", "env_branch",
        "env_tombstone", "pin_tombstone"]


def test_reframe_every_record_form_comes_out_as_the_spec_says(tmp_path):
    src, dest = tmp_path / "all.pile", tmp_path / "new.pile"
    order = (BLOBS[:4] + ["commit_golden", "v4_commit", "env_commit", "commit_golden"]
             + PRESERVED_EXACTLY + DROPPED + PINS
             + ["want_blob", "want_merge", "want_derive", "want_blob"]
             + ["retired_blob_want_assert", "retired_blob_want_retract",
                "retired_typed_want_assert", "retired_typed_want_retract",
                "v3_weak_pin", "env_weak_pin", "env_typed_want"]
             + BLOBS[4:] + ["blob_hello", "merge_v6", "proof_v5_one_edge"] + PRESERVED_EXACTLY[:9])
    write(src, *[enc(n) for n in order])
    t0 = int(time.time() * 1000)
    res = reframe(str(src), str(dest))
    out = list(iter_records(dest.read_bytes(), heads_only=False))
    raw = dest.read_bytes()
    frames = Counter(bytes(raw[r.offset:r.end]) for r in out)

    # exact frames: each survives byte for byte, once ("re-insertion is idempotent")
    for name in PRESERVED_EXACTLY:
        assert frames[enc(name)] == 1, name
    for name in DROPPED:
        assert frames[enc(name)] == 0, name
    assert sum(res.dropped.values()) == len(DROPPED), res.dropped

    # "Blob payloads are content-addressed ... their insertion timestamps are stamped afresh"
    blobs = [r for r in out if r.name == "blob_body"]
    handles = Counter(r.value.head.hash for r in blobs)
    expected = {crypto.blake3(_payload(n)) for n in BLOBS}
    assert set(handles) == expected and all(n == 1 for n in handles.values()), handles
    assert all(r.value.head.timestamp >= t0 for r in blobs)

    # one COMMIT: the golden one, whatever its source framing (V4, envelope, current, twice)
    commits = [r for r in out if r.name == "commit_body"]
    assert len(commits) == 1 and bytes(raw[commits[0].offset:commits[0].end]) == enc("commit_golden")

    # "Legacy pins are replayed in order."
    pins = [(r.name, r.value.pin, getattr(r.value, "head", None)) for r in out
            if r.name in ("pin_head_body", "pin_tombstone_body")]
    heads = {"v1_branch", "v3_branch", "pin_head", "env_branch"}
    assert [p[0] for p in pins] == ["pin_head_body" if n in heads else "pin_tombstone_body"
                                    for n in PINS]
    assert all(p[1] == C.h16(0x11) for p in pins)
    assert all(p[2] == C.b(0x22) for p in pins if p[0] == "pin_head_body")

    # "Retired WANT state is resolved in order once and emitted only as current positive
    # markers; already-current markers union with that projection." The retired log here:
    # Blob(41) assert, retract, then V3 and envelope weak pins assert it again; typed tag 3
    # (source 01, target 02, input 03) -> Derive(02, 03); typed retract of Merge(1, 2, 3)
    # then the envelope typed want asserts Merge(1, 2, 3).
    wants = Counter(want_key(r) for r in out if r.name == "want_v3_body")
    assert wants == Counter({
        current_want(1, C.b(0x41)): 1,
        current_want(2, C.b(1), C.b(2), C.b(3)): 1,
        current_want(4, C.b(1), C.b(2)): 1,
        current_want(4, C.b(2), C.b(3)): 1,
    })
    # nothing else: no retired WANT frame, no opaque record, no other kind
    assert len(out) == (len(PRESERVED_EXACTLY) + len(BLOBS) + 1 + len(PINS) + len(wants))
    Pile.open(str(dest), writable=False).close()  # the output reads back


def _payload(name: str) -> bytes:
    v = RECS[name].record
    body = getattr(v, "body", v)
    data = body.data
    return data.payload


def test_reframe_has_a_rule_for_every_known_record_kind():
    """Every kind the reader decodes is kept, re-encoded, resolved or dropped by reframe
    (spec: "genuinely unknown kinds fail a full preflight before any destination write")."""
    from bytewright.runtime.pile.repair import reframe_rule
    names = set(kinds.FRAME_KINDS) | set(kinds.ENVELOPE_KINDS) | set(kinds.LEGACY_MARKERS)
    names -= {"frame_rest", "envelope36_rest", "v3_local_cell"}  # containers; cells are opaque
    assert {n for n in names if reframe_rule(n) is None} == set()


def test_reframe_turns_retired_want_asserts_into_current_wants(tmp_path):
    """3 retired asserts in, 3 current WANTs out (spec: "emitted only as current positive
    markers"); an assert then retract of the same request is resolved to nothing."""
    src, dest = tmp_path / "w.pile", tmp_path / "w2.pile"
    write(src, retired_blob_want(True, C.b(0x51)),
          retired_typed(True, 2, C.b(1), C.b(5), C.b(6)),
          retired_typed(True, 4, C.b(7), C.b(8), bytes(32)),
          retired_blob_want(True, C.b(0x52)), retired_blob_want(False, C.b(0x52)))
    reframe(str(src), str(dest))
    keys = sorted(want_key(r) for r in iter_records(dest.read_bytes()))
    assert keys == sorted([current_want(1, C.b(0x51)),
                           current_want(2, C.b(1), C.b(5), C.b(6)),
                           current_want(4, C.b(7), C.b(8))])


def test_reframe_inserts_duplicates_once(tmp_path):
    """2 COMMIT + 2 WANT (each twice) in: 2 records out ("re-insertion is idempotent")."""
    src, dest = tmp_path / "d.pile", tmp_path / "d2.pile"
    write(src, enc("commit_golden"), enc("want_blob"), enc("commit_golden"), enc("want_blob"))
    res = reframe(str(src), str(dest))
    assert dest.read_bytes() == enc("commit_golden") + enc("want_blob")
    assert res.written == 2


def test_reframe_stamps_blob_timestamps_afresh_as_the_cli_says(tmp_path, capsys):
    """"their insertion timestamps are stamped afresh": a current blob too."""
    src, dest = tmp_path / "b.pile", tmp_path / "b2.pile"
    write(src, enc("blob_hello"))
    t0 = int(time.time() * 1000)
    code, out, _ = run(capsys, "pile", "reframe", str(src), "--into", str(dest), "--json")
    (rec,) = iter_records(dest.read_bytes(), heads_only=False)
    assert rec.value.head.timestamp >= t0 > C.TS
    assert rec.value.data.payload == b"hello"
    assert code == 0 and json.loads(out)["blobs_restamped"] == 1


# -- 2. diagnose at an offset inside a record; amputate's suggestion ---------------------

def test_diagnose_rejects_an_offset_inside_a_record(tmp_path, capsys):
    """spec: diagnose "walks the same canonical decoder from byte zero, rejects offsets that
    land inside a record, and prints the physical marker, classification, known span, next
    offset, and the fields the current reader can safely decode"."""
    inner = enc("commit_golden")
    path = tmp_path / "p.pile"
    blob = enc(C.blob(inner))          # the payload, at record byte 256, is a COMMIT frame
    write(path, blob, enc("want_blob"))
    out = diagnose(str(path), 256)
    assert out["status"] != "ok" and out["inside"] == {"offset": 0, "record": "blob_body",
                                                       "end": len(blob)}
    assert out["next_offset"] == len(blob)
    code, text, _ = run(capsys, "pile", "diagnose", "record-at", "256", str(path))
    assert code == 1 and "inside" in text and "commit_body" not in text
    ok = diagnose(str(path), len(blob))
    assert ok["status"] == "ok" and ok["next_offset"] == len(blob) + 256
    assert ok["marker"] == MAGIC[:16].hex().upper() and ok["span"] == 1
    assert ok["fields"]["tag"] in (1, "Blob") and ok["fields"]["request"]["blob"] == "41" * 32


def test_diagnose_gives_a_repair_command_only_for_corrupt_records(tmp_path, capsys):
    """spec: "an unsupported unenveloped marker asks for a newer reader and never suggests
    amputation; only a malformed or torn known record presents the explicit destructive-repair
    command" - and that command is one the tool then accepts."""
    path = tmp_path / "t.pile"
    good = enc("blob_hello") + enc("commit_golden")
    write(path, good, enc("want_blob")[:100])
    out = diagnose(str(path), len(good))
    assert out["status"] == "CorruptPile" and "amputate" in out["repair"]
    argv = shlex.split(out["repair"])
    assert argv[:2] == ["bytewright", "pile"]
    code, _, err = run(capsys, *argv[1:])
    assert code == 0, err
    assert path.read_bytes() == good
    write(path, good, b"\xa5" * 16)
    out = diagnose(str(path), len(good))
    assert out["status"] == "UnsupportedRecord" and "repair" not in out


def test_amputate_suggests_a_command_it_accepts(tmp_path, capsys):
    """spec: amputate "requires the exact boundary reported by the current reader"; the
    suggestion printed for damage followed by valid-looking records must be accepted."""
    path = tmp_path / "m.pile"
    bad = bytearray(enc("commit_golden"))
    bad[28:32] = bytes(4)          # span 0: CorruptPile in the middle of the file
    write(path, enc("blob_hello"), bytes(bad), enc("commit_golden"))
    code, _, err = run(capsys, "pile", "amputate", str(path))
    assert code != 0 and "--truncate-to" in err
    argv = shlex.split(err[err.rindex("bytewright pile"):].strip())
    code, _, err2 = run(capsys, *argv[1:])
    assert code == 0, err2
    assert path.stat().st_size == 512


# -- 3. salvage resumes only at record boundaries ----------------------------------------

def test_salvage_never_reads_records_inside_a_blob_payload(tmp_path):
    """A blob whose length header is intact owns its payload: a COMMIT frame inside it is
    not a top-level record (spec: "Blob data starts at the constant record_start + 256")."""
    inner = enc("commit_golden")
    rotten = bytearray(enc(C.blob(inner + b"tail")))
    rotten[256 + len(inner) + 1] ^= 1  # a payload byte after the embedded frame
    src, dest = tmp_path / "s.pile", tmp_path / "d.pile"
    write(src, enc("blob_empty"), bytes(rotten), enc("want_blob"))
    res = salvage(str(src), str(dest))
    assert dest.read_bytes() == enc("blob_empty") + enc("want_blob")
    assert res.skipped == [(256, 256 + len(rotten))]


def test_salvage_resumes_only_where_a_record_may_start(tmp_path):
    """Framed records are whole 256-byte blocks ("Every record the pile writes ... occupies a
    256-byte multiple"); only V1 records have 64-byte granularity (facts §5.1). A frame
    64 bytes into damaged bytes is not a record of this pile."""
    garbage = bytearray(b"\xee" * 512)
    garbage[64:320] = enc("commit_golden")       # a frame at a 64-byte phase
    src, dest = tmp_path / "s.pile", tmp_path / "d.pile"
    write(src, enc("blob_hello"), bytes(garbage), enc("want_blob"))
    res = salvage(str(src), str(dest))
    assert dest.read_bytes() == enc("blob_hello") + enc("want_blob")
    assert res.skipped == [(512, 1024)]


def test_salvage_still_finds_v1_records_at_64_byte_steps(tmp_path):
    v1 = enc("v1_branch")                        # 64 bytes
    src, dest = tmp_path / "s.pile", tmp_path / "d.pile"
    write(src, enc("blob_hello"), b"\xee" * 64, v1, enc("v1_tombstone"))
    salvage(str(src), str(dest))
    assert dest.read_bytes() == enc("blob_hello") + v1 + enc("v1_tombstone")


# -- 4. proof v3 (161-byte edges) is a recognised inert frame ----------------------------

def proof_v3_frame(tail_byte: int = 0, span: int | None = None) -> bytes:
    edge = C.b(4) + b"\x03" + bytes(32) + crypto.public_key(C.b(2)) + bytes(64)
    assert len(edge) == 161
    body = bytes(16) + C.b(9) + crypto.public_key(C.b(1)) + edge   # 80 + 161
    n = 96 + len(body)
    span = span or (n + 255) // 256
    rec = MAGIC + struct.pack("<I", span) + PROOF_V3 + struct.pack("<Q", len(body)) + bytes(24)
    rec += body
    rec += bytes(span * 256 - len(rec))
    if tail_byte:
        rec = rec[:-1] + bytes([tail_byte])
    return rec


def test_proof_v3_is_a_recognised_inert_frame_and_reframe_drops_it(tmp_path):
    """spec: "The earlier K(S,C,K)+, 145-byte-edge action-ID, and 161-byte-edge
    handle/mode/validity proof kinds remain structurally recognizable as inert frames ...
    replay projects no authority from them, and semantic rewrites may drop them.\""""
    src, dest = tmp_path / "p.pile", tmp_path / "p2.pile"
    write(src, enc("blob_hello"), proof_v3_frame(), enc("want_blob"))
    with Pile.open(str(src), writable=False) as p:
        assert not p.opaque and not p.proofs and p.records == 3
    res = reframe(str(src), str(dest))
    assert dest.read_bytes().count(PROOF_V3) == 0 and sum(res.dropped.values()) == 1


def test_proof_v3_structure_is_checked(tmp_path):
    """A recognised frame is validated like proofs v1/v2: zero padding, minimal span."""
    for bad in (proof_v3_frame(tail_byte=1), proof_v3_frame(span=3)):
        with pytest.raises(CorruptPile):
            Pile.load(enc("blob_hello") + bad)


# -- 5. one rule for the retired typed WANT ----------------------------------------------

@pytest.mark.parametrize("tag", [1, 9, 0])
def test_retired_typed_want_tag_rule_is_the_same_in_both_framings(tag):
    """spec: the retired typed assertion/retraction "plus their legacy-envelope ... forms"
    are one historical record; facts §3.9: tag 1 (Blob) is rejected, tag 3 allowed."""
    # the encoder refuses these tags: encode valid tags 2 and 3, and write ``tag`` into the
    # one byte where the two differ (the tag field; no checksum covers it)
    def with_tag(build) -> bytes:
        two, three = build(2), build(3)
        (i,) = [n for n in range(len(two)) if two[n] != three[n]]
        data = bytearray(two)
        data[i] = tag
        return bytes(data)

    current = with_tag(lambda t: retired_typed(True, t, C.b(1), C.b(2), C.b(3)))
    envelope = with_tag(lambda t: enc(C.env(kinds.ENVELOPE_KINDS["env_typed_want_body"],
                                            g.EnvTypedWantBody(t, C.b(1), C.b(2), C.b(3)))))
    for data in (current, envelope):
        with pytest.raises(CorruptPile):
            Pile.load(data)


def test_retired_typed_want_tag_3_is_accepted_in_both_framings():
    current = retired_typed(True, 3, C.b(1), C.b(2), C.b(3))
    envelope = enc(C.env(kinds.ENVELOPE_KINDS["env_typed_want_body"],
                         g.EnvTypedWantBody(3, C.b(1), C.b(2), C.b(3))))
    assert Pile.load(current + envelope).records == 2


# -- 6. replay computes no fingerprint ---------------------------------------------------

def test_replay_computes_no_collection_fingerprint(tmp_path, monkeypatch):
    """spec: "A CollectionRecordFingerprint ... names the actual persisted record wherever a
    fixed-width identity is needed ... The pile computes none at replay.\""""
    path = tmp_path / "c.pile"
    write(path, enc("commit_golden"), enc("merge_v6"), enc("derive_v7"), enc("v4_commit"))
    calls = []
    real = crypto.blake3
    monkeypatch.setattr(crypto, "blake3", lambda data: calls.append(len(data)) or real(data))
    with Pile.open(str(path), writable=False) as p:
        assert calls == []
        assert p.records == 4
        fp = bytes.fromhex("B1740DE9C272B4552B97EDDF77C796D72688A2B9325D815C302236882657E608")
        assert fp in p.collection          # on demand: facts §8.1's golden fingerprint
        assert len(p.collection) == 3


# -- 7. error texts ----------------------------------------------------------------------

def test_reserved_byte_error_is_one_short_line():
    rec = bytearray(retired_blob_want(True, C.b(0x41)))
    rec[200] = 7
    with pytest.raises(CorruptPile) as exc:
        Pile.load(bytes(rec))
    text = str(exc.value)
    assert len(text) < 200 and "\n" not in text, text
    assert "200" in text and "07" in text     # the first non-zero byte and where it is


def test_reframe_names_a_retired_local_cell(tmp_path):
    """spec: "Opaque ownership, including retired local cells, makes semantic reframe fail
    closed" - the refusal names what the record is, not "unknown kind"."""
    for name in ("v3_local_cell", "env_opaque_local_cell"):
        src, dest = tmp_path / f"{name}.pile", tmp_path / f"{name}.out"
        write(src, enc("blob_hello"), enc(name))
        with pytest.raises(RepairRefused) as exc:
            reframe(str(src), str(dest))
        assert "local cell" in str(exc.value) and "unknown kind" not in str(exc.value)
        assert not os.path.exists(dest)


def test_amputate_counts_records_after_damage_by_the_same_rule_as_salvage(tmp_path):
    """The valid-looking records amputate counts after damage are looked for where salvage
    resumes: a frame 64 bytes into undecodable bytes is not one ("Every record the pile
    writes ... occupies a 256-byte multiple")."""
    from bytewright.runtime.pile import find_damage
    torn = bytearray(enc("commit_golden"))
    torn[28:32] = bytes(4)                     # span 0: CorruptPile at 512
    tail = bytearray(torn + b"\xee" * 256)
    tail[64:320] = enc("want_blob")            # a frame at a 64-byte phase
    data = enc("blob_hello") + bytes(tail)
    damage = find_damage(data)
    assert damage.offset == 512 and damage.valid_after == 0
    aligned = enc("blob_hello") + bytes(torn) + enc("want_blob")
    assert find_damage(aligned).valid_after == 1
