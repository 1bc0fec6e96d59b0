"""Record-kind handles and legacy markers, read from the schema (``LAYOUT``), never retyped.

The 32-byte kind handles are the ``hex:`` case labels of ``frame_rest.body`` in
schemas/pile.yaml; writers look them up here by the body record they encode.
"""

from __future__ import annotations

from ...generated import pile as g


def _cases(record: str, field: str) -> dict[str, bytes]:
    for lay in g.LAYOUT[record]["layouts"]:
        for f in lay["fields"]:
            if f["name"] == field:
                out: dict[str, bytes] = {}
                for label, rec in f["cases"].items():
                    out.setdefault(rec, bytes.fromhex(label[4:]))
                return out
    raise KeyError(f"{record}.{field}")  # the schema lost the switch: a programming error


def _const(record: str, field: str) -> bytes:
    for lay in g.LAYOUT[record]["layouts"]:
        for f in lay["fields"]:
            if f["name"] == field:
                return bytes.fromhex(f["const"])
    raise KeyError(f"{record}.{field}")


FRAME_KINDS = _cases("frame_rest", "body")          # body record -> first matching handle
ENVELOPE_KINDS = _cases("envelope36_rest", "body")
LEGACY_MARKERS = _cases("pile_record", "record")   # form record -> 16-byte marker

KIND_BLOB = FRAME_KINDS["blob_body"]
KIND_COMMIT = FRAME_KINDS["commit_body"]
KIND_MERGE_V6 = FRAME_KINDS["merge_v6_body"]
KIND_DERIVE_V7 = FRAME_KINDS["derive_v7_body"]
KIND_WANT_V3 = FRAME_KINDS["want_v3_body"]
KIND_PROOF_V5 = FRAME_KINDS["proof_v5_body"]
KIND_PIN_HEAD = FRAME_KINDS["pin_head_body"]
KIND_PIN_TOMBSTONE = FRAME_KINDS["pin_tombstone_body"]

FRAME_MAGIC = _const("frame_head", "magic")
MAGIC_HEAD = LEGACY_MARKERS["frame_rest"]           # the magic's first 16 bytes
ENVELOPE_MARKER = LEGACY_MARKERS["envelope36_rest"]
BLOCK = 256

SEMANTIC_COMMIT = _const("commit_transcript", "semantic_kind")
SEMANTIC_MERGE_V6 = _const("merge_endorsement", "semantic_kind")
SEMANTIC_DERIVE_V7 = _const("derive_endorsement", "semantic_kind")
