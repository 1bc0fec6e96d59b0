"""Record-kind descriptions: each 32-byte kind is the handle of its description archive
(spec "The record kind resolves"; facts.md §2.1), and ``publish_record_kind_descriptions``.

A description is one entity rooted at the kind's 16-byte anchor with three tribles
(``E(16) | A(16) | V(32)``): ``metadata::name`` -> BLAKE3(name), ``metadata::description``
-> BLAKE3(layout text), ``metadata::tag`` -> 16 zero bytes || ``KIND_PILE_RECORD``. The
SimpleArchive is the rows sorted by raw bytes, concatenated; the kind is its BLAKE3. The
texts are the upstream ones (E1 ``record_kind.rs``); editing one is a format change, which
the recomputation test catches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import crypto

if TYPE_CHECKING:
    from .store import Pile

KIND_PILE_RECORD = bytes.fromhex("29D9F7F6B5062623F65D63DBF4F633B3")
ATTR_NAME = bytes.fromhex("7FB28C0B48E1924687857310EE230414")
ATTR_DESCRIPTION = bytes.fromhex("AE94660A55D2EE3C428D2BB299E02EC3")
ATTR_TAG = bytes.fromhex("91C50E9FBB1F73E892EBD5FFDE46C251")


@dataclass(frozen=True)
class KindDescription:
    constant: str  # the kinds.py constant this description names
    anchor: bytes
    name: str
    layout: str

    @property
    def pinned(self) -> bytes:
        """The pinned 32-byte kind: a ``kinds`` constant, or the hex handle of a retired
        kind the reader still recognises."""
        if self.constant.startswith("KIND_"):
            from . import kinds
            return getattr(kinds, self.constant)
        return bytes.fromhex(self.constant)

    def archive(self) -> bytes:
        rows = sorted([
            self.anchor + ATTR_NAME + crypto.blake3(self.name.encode()),
            self.anchor + ATTR_DESCRIPTION + crypto.blake3(self.layout.encode()),
            self.anchor + ATTR_TAG + bytes(16) + KIND_PILE_RECORD,
        ])
        return b"".join(rows)

    def handle(self) -> bytes:
        return crypto.blake3(self.archive())

    def blobs(self) -> list[bytes]:
        """Everything needed to resolve the kind: the archive, the name and the layout."""
        return [self.archive(), self.name.encode(), self.layout.encode()]


def _d(constant: str, anchor: str, name: str, layout: str) -> KindDescription:
    return KindDescription(constant, bytes.fromhex(anchor), name, layout)


# The kinds the current binary writes, in upstream declaration order.
DESCRIBED_KINDS: tuple[KindDescription, ...] = (
    _d("KIND_BLOB", "9C33EEB525065A62EAEC4BE43DCC355A", "pile-blob-v1",
       "A content-addressed blob. Envelope bytes 64..72 hold the insertion timestamp in Unix "
       "milliseconds as an unsigned little-endian 64-bit integer, 72..80 the exact unpadded "
       "payload length in bytes in the same encoding, 80..96 zeros, 96..128 the BLAKE3 digest "
       "of the payload, and 128..256 zeros. The payload begins at record_start + 256 and is "
       "post-padded with zeros to the declared block span. Padding is not covered by the "
       "digest."),
    _d("KIND_PIN_HEAD", "AC363D04AFE1AF17B39581B1E23021D7", "pile-pin-head-v1",
       "A last-writer-wins assignment of one pin (branch) identifier to the handle of its "
       "metadata blob. Envelope bytes 64..80 hold the 16-byte pin identifier, 80..96 zeros, "
       "96..128 the BLAKE3 handle of the head SimpleArchive, and 128..256 zeros. The record "
       "spans exactly one 256-byte block and has no payload. The pile does not require the "
       "referenced blob to be resident."),
    _d("KIND_PIN_TOMBSTONE", "D0CBA0C8EAAB4C0C73121C3205671E4F", "pile-pin-tombstone-v1",
       "Retraction of a pin (branch) head assignment, resolved last-writer-wins against "
       "pile-pin-head-v1 records for the same identifier. Envelope bytes 64..80 hold the "
       "16-byte pin identifier and 80..256 are zeros. The record spans exactly one 256-byte "
       "block and has no payload."),
    _d("KIND_WANT_V3", "E6CEE6F8578E3B8DB4C081486A8CBD28", "pile-want-v3",
       "One element of the grow-only durable local WANT set, keyed by a canonical 97-byte "
       "WantRequest. Envelope byte 64 holds the versioned request tag, 65..96 are zeros, "
       "96..128 hold field A, 128..160 field B, 160..192 field C, and 192..256 are zeros. Tag "
       "1 is a blob request (A the BLAKE3 blob handle; B and C zero); tag 2 is a merge request "
       "(A the collection descriptor handle; B and C the input digests in lexicographic "
       "order); tag 4 is a derive request (A the target collection descriptor handle; B the "
       "input digest; C zero). The record spans exactly one 256-byte block and has no "
       "payload. Repeating an exact request is idempotent. There is no retraction kind; "
       "forgetting is a policy rewrite such as Yard reclaim."),
    _d("KIND_COMMIT", "CBF2CF97D52A3486E16C12D70D397C66", "pile-collection-commit-v4",
       "A signed COMMIT(collection, data, metadata) assertion. Envelope bytes 64..96 hold the "
       "collection descriptor handle, 96..128 the data digest, 128..160 the metadata archive "
       "handle, 160..192 the author Ed25519 public key, 192..224 the signature R component, "
       "and 224..256 the signature S component. This is the tightest record the pile writes: "
       "it fills the block exactly and reserves nothing. The signature covers a "
       "domain-separated transcript, not these bytes, so a commit survives reframing "
       "unchanged."),
    _d("KIND_MERGE_V6", "3AB7D3C2BAB53C85CCA6108A30BB8930", "pile-collection-merge-v6",
       "A signed MERGE(collection, low, high, result, low_witness, high_witness) endorsement. "
       "Envelope bytes 64..96 hold the collection descriptor handle, 96..128 the low input "
       "digest, 128..160 the high input digest, 160..192 the result digest, 192..224 the low "
       "input record fingerprint, 224..256 the high input record fingerprint, 256..288 the "
       "author Ed25519 public key, 288..320 the signature R component, 320..352 the signature "
       "S component, and 352..512 zeros. The record spans exactly two 256-byte blocks. Input "
       "pairs are sorted lexicographically by payload digest then record fingerprint; "
       "witnesses move with their payloads, including when the payload digests are equal. A "
       "record fingerprint is the full BLAKE3 digest of its semantic kind followed by its "
       "canonical dense payload, not a blob handle. The signature covers a domain-separated "
       "transcript containing the semantic kind, author, collection, ordered payload inputs, "
       "result, and ordered witnesses, not the pile framing. An authorized producer endorses "
       "the exact witnessed inputs and the join result; storing an endorsement does not "
       "itself establish WRITE admission or witness availability."),
    _d("KIND_DERIVE_V7", "D933002B5656620792BFD250AB5061AD", "pile-collection-derive-v7",
       "A signed DERIVE(target, input, output, input_witness) endorsement. Envelope bytes "
       "64..96 hold the target collection descriptor handle, 96..128 the input digest, "
       "128..160 the output digest, 160..192 the input record fingerprint, 192..224 the "
       "author Ed25519 public key, 224..256 the signature R component, 256..288 the signature "
       "S component, and 288..512 zeros. The record spans exactly two 256-byte blocks. A "
       "record fingerprint is the full BLAKE3 digest of its semantic kind followed by its "
       "canonical dense payload, not a blob handle. The signature covers a domain-separated "
       "transcript containing the semantic kind, author, target, input, output, and input "
       "witness, not the pile framing. The target descriptor names the source and mapping. "
       "An authorized producer endorses the exact witnessed source record and the mapping "
       "result; storing an endorsement does not itself establish WRITE admission or witness "
       "availability."),
    _d("KIND_PROOF_V5", "C7116B04EE6DA4BADFDE77D79692AEFF", "pile-auth-proof-v5",
       "A canonical self-contained prefix-signed capability proof. The proof starts at "
       "envelope byte 32: the 32-byte record kind is also its grammar magic, followed by a "
       "32-byte opaque resource at 64..96 and the 32-byte root Ed25519 public key at 96..128. "
       "One to 255 fixed 128-byte edges follow. Each edge holds a 32-byte SimpleArchive "
       "capability-definition handle, a 32-byte delegate Ed25519 public key, and a 64-byte "
       "Ed25519 signature. Each signature covers the exact proof prefix from the record kind "
       "through its edge's delegate, including all preceding signatures. The unpadded proof "
       "length is exactly 96 + 128n bytes. There are no inline modes, flags, validity bounds, "
       "separate proof length, or inner magic. The generic frame declares the minimal "
       "256-byte block span; trailing zero padding cannot form an edge because every delegate "
       "must be a canonical non-weak Ed25519 key. Generic framing and padding are not proof "
       "content and do not participate in signatures or its BLAKE3 content id. Capability "
       "definition handles are strong blob references; the resource remains opaque. "
       "Byte-only signature verification does not acquire or interpret those definitions; "
       "action and delegation authority are interpreted from resident capability definitions "
       "separately."),
)


# Retired kinds the reader still recognises by pinned constant (upstream M record_kind.rs).
# They resolve the same way but are never published or written by a fresh pile.
RETIRED_KINDS: tuple[KindDescription, ...] = (
    _d("EC1C024C04AF08243DB3AE318C93FA500355C74395C0F553CFFC0AF0A4BA0346",
       "8F3EEFEDECD491F63F6EAAA5FD6F3D5E", "pile-blob-want-assert-v1",
       "Durable local demand for one blob, keyed by its handle and resolved last-writer-wins "
       "against pile-blob-want-retract-v1. Envelope bytes 64..96 hold the wanted BLAKE3 blob "
       "handle and 96..256 are zeros. Blob wants deliberately keep this kind rather than "
       "moving to pile-want-assert-v2, so a reader that skips the typed operation wants still "
       "observes the complete blob demand history."),
    _d("ACCB531FC7489357C40FCEF0DDE8BD9088F2AC1924A652EA211ADD5C30B95B46",
       "2D76662DFF0187EC36A8C90B12BB8B0D", "pile-blob-want-retract-v1",
       "Retraction of durable local demand for one blob. Envelope bytes 64..96 hold the "
       "BLAKE3 blob handle and 96..256 are zeros."),
    _d("65EE9E4279FFE01D263E75A8E2DF6289B6DE403CB4468098A0EAB925F81C28ED",
       "9A06797600FA90B8A8259B0ED029EC21", "pile-want-assert-v2",
       "Durable local demand for one reproducible collection operation, keyed by a canonical "
       "97-byte request. Envelope byte 64 holds the versioned request tag, 65..96 are zeros, "
       "96..128 hold field A, 128..160 field B, 160..192 field C, and 192..256 are zeros. Tag "
       "2 is a merge request (A the collection descriptor handle, B and C the two input "
       "digests in lexicographic order); tag 3 is a derive request (A the source descriptor "
       "handle, B the target descriptor handle, C the input digest). Tag 1, a blob request, "
       "is not valid here: blob wants use pile-blob-want-assert-v1."),
    _d("A57C866A83A90635090A947D92464B19D9F898C0C961AB7A91C79A979F9F1483",
       "2D957A780A52E474F58A06D44D6FE46C", "pile-want-retract-v2",
       "Retraction of durable local demand for one reproducible collection operation. The "
       "request layout is identical to pile-want-assert-v2, and the two resolve "
       "last-writer-wins per exact request key."),
    _d("0CEE320DE0BDA40A6A6F52221C5E4E4D2CE3B165B69C858673FD13D98F655379",
       "9F5D028D4C423620D6957A5F726FA727", "pile-collection-merge-v4",
       "An unsigned MERGE equation asserting that two element digests join to a third under "
       "the collection's recipe. Envelope bytes 64..96 hold the collection descriptor handle, "
       "96..128 the lexicographically lower input digest, 128..160 the higher input digest, "
       "160..192 the result digest, and 192..256 are zeros. Storing the inputs in order means "
       "operand order cannot produce a second representation of the same commutative "
       "equation."),
    _d("7ACE1ED10F3EBC632627058CC461DC1CC171CD2E56C52E5DCE60EA4C8DC23C36",
       "ED6B46F7286D4556B076C17B79FD8315", "pile-collection-derive-v5",
       "An unsigned DERIVE equation asserting that an input state of a derived collection's "
       "source maps to an output state of that collection. Envelope bytes 64..96 hold the "
       "target collection's descriptor handle, 96..128 the input digest, 128..160 the output "
       "digest, and 160..256 are zeros. The source is not named here because the target's "
       "descriptor already names it, and naming it twice only creates a way for the two to "
       "disagree."),
)


@dataclass
class DescriptionCensus:
    """What ``publish_record_kind_descriptions`` found: blobs already resident and blobs it
    had left to store (and stored), so a re-run reports honestly."""

    already_resident: int = 0
    left_to_store: int = 0
    stored: int = 0


def description_blobs() -> list[bytes]:
    """Every blob that resolves every described kind, each once, in declaration order."""
    seen: set[bytes] = set()
    out: list[bytes] = []
    for d in DESCRIBED_KINDS:
        for blob in d.blobs():
            h = crypto.blake3(blob)
            if h not in seen:
                seen.add(h)
                out.append(blob)
    return out


def publish_record_kind_descriptions(pile: Pile, *, dry_run: bool = False) -> DescriptionCensus:
    """``trible pile migrate <PILE> run record-kind-descriptions``: store the description
    archives (and their name and layout strings) of every kind this binary writes.
    Content addressing makes it idempotent."""
    census = DescriptionCensus()
    for blob in description_blobs():
        h = crypto.blake3(blob)
        if h in pile and pile._readable(h):
            census.already_resident += 1
            continue
        census.left_to_store += 1
        if not dry_run:
            pile.put(blob)
            census.stored += 1
    return census
