"""MAP(attached; node -> attachment), the fourth native collection record (spec "Native
Collection Records"; facts.md §3.5).

Known from the spec: semantic kind ``329669AA662709605053C123671DF1D2``, pile description
anchor ``ED7B98CD20AD9A4D172F037A08CC47F1`` (``pile-collection-map-v1``), signature domain
``4A5191C36898D0B453FEFF99ED0E3852 || 4AADD87ED8EB8620BD39623B5221B5BE``, one 256-byte block,
no witness, and "a store believes a MAP only when its own host key signed it".

Not published (facts.md §3.5, §10): the record-kind handle, the exact layout and the
transcript. So replay cannot recognise MAP frames (they stay opaque, which the spec
allows), and the layout and transcript here are facts.md's inference, by analogy with
COMMIT and the equation transcripts: body ``attached | node | attachment | author | R | S``
at frame bytes 64..256, signed bytes ``domain || kind || author || attached || node ||
attachment``. A caller that knows the handle passes it to :func:`maps_in_pile`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from . import crypto
from .errors import RecordRefused
from .kinds import FRAME_MAGIC

if TYPE_CHECKING:
    from .store import Pile

SEMANTIC_MAP = bytes.fromhex("329669AA662709605053C123671DF1D2")
MAP_ANCHOR = bytes.fromhex("ED7B98CD20AD9A4D172F037A08CC47F1")
MAP_DESCRIPTION_NAME = "pile-collection-map-v1"
MAP_DOMAIN = bytes.fromhex("4A5191C36898D0B453FEFF99ED0E38524AADD87ED8EB8620BD39623B5221B5BE")
KIND_MAP: bytes | None = None  # the pinned handle is not available from public sources
DENSE_LENGTH = 6 * 32


@dataclass(frozen=True)
class MapRecord:
    attached: bytes    # the attached collection's descriptor handle
    node: bytes        # the parent-lattice node (a payload digest)
    attachment: bytes  # the attachment mapped from the node's own bytes
    author: bytes
    sig_r: bytes
    sig_s: bytes

    def to_bytes(self) -> bytes:
        return (self.attached + self.node + self.attachment + self.author + self.sig_r
                + self.sig_s)

    def signing_transcript(self) -> bytes:
        return MAP_DOMAIN + SEMANTIC_MAP + self.author + self.attached + self.node + self.attachment

    def fingerprint(self) -> bytes:
        """BLAKE3(semantic kind || dense payload), the rule every collection record uses."""
        return crypto.blake3(SEMANTIC_MAP + self.to_bytes())

    def verify_strict(self) -> None:
        if not crypto.key_is_valid(self.author):
            raise RecordRefused("MAP has an invalid public key (not canonical, or weak)",
                                offset=96, path="map.author")
        if not crypto.verify_strict(self.author, self.signing_transcript(),
                                    self.sig_r + self.sig_s):
            raise RecordRefused("MAP signature is invalid", offset=128, path="map.sig_r")

    @classmethod
    def from_bytes_trusted(cls, data: bytes) -> MapRecord:
        data = bytes(data)
        if len(data) != DENSE_LENGTH:
            raise RecordRefused(f"MAP has {len(data)} bytes; expected exactly {DENSE_LENGTH}",
                                offset=0, path="map")
        f = [data[i:i + 32] for i in range(0, DENSE_LENGTH, 32)]
        return cls(*f)

    @classmethod
    def from_bytes(cls, data: bytes) -> MapRecord:
        """Checked ingress: structure, then the strict signature."""
        rec = cls.from_bytes_trusted(data)
        rec.verify_strict()
        return rec

    @classmethod
    def from_frame(cls, raw: bytes, kind: bytes) -> MapRecord:
        """A MAP's one-block native frame (structure only, like native replay)."""
        raw = bytes(raw)
        if (len(raw) != 256 or raw[:28] != FRAME_MAGIC or raw[28:32] != (1).to_bytes(4, "little")
                or raw[32:64] != kind):
            raise RecordRefused("not a one-block MAP frame of the given kind", offset=0,
                                path="pile_record")
        return cls.from_bytes_trusted(raw[64:256])

    def frame(self, kind: bytes) -> bytes:
        return FRAME_MAGIC + (1).to_bytes(4, "little") + kind + self.to_bytes()


def sign_map(seed: bytes, attached: bytes, node: bytes, attachment: bytes) -> MapRecord:
    author = crypto.public_key(seed)
    unsigned = MapRecord(attached, node, attachment, author, bytes(32), bytes(32))
    sig = crypto.sign(seed, unsigned.signing_transcript())
    return MapRecord(attached, node, attachment, author, sig[:32], sig[32:])


@dataclass
class MapIndex:
    """The MAPs one store believes: only those its own host key signed. Another key's MAP
    "means nothing to another store" and changes nothing here; it is counted, not kept."""

    host_key: bytes
    attachments: dict[tuple[bytes, bytes], set[bytes]] = field(default_factory=dict)
    ignored: int = 0
    refused: int = 0

    def add(self, rec: MapRecord, *, verified: bool = False) -> bool:
        """Keep ``rec`` as its node's attachment if the host signed it. ``verified``:
        the signature was already checked at ingress (trusted local replay)."""
        if rec.author != self.host_key:
            self.ignored += 1
            return False
        if not verified:
            rec.verify_strict()
        self.attachments.setdefault((rec.attached, rec.node), set()).add(rec.attachment)
        return True

    def attachment_of(self, attached: bytes, node: bytes) -> frozenset[bytes]:
        return frozenset(self.attachments.get((attached, node), ()))


def maps_in_pile(pile: Pile, host_key: bytes, kind: bytes) -> MapIndex:
    """The host-believed MAPs among a pile's opaque frames of ``kind`` (native replay is
    structural, so each host-key frame's signature is checked once here; a forged one is
    counted in ``refused`` and not believed)."""
    index = MapIndex(host_key)
    for op in pile.opaque:
        if op.form == "current" and op.kind == kind and op.length == 256:
            try:
                index.add(MapRecord.from_frame(op.raw, kind))
            except RecordRefused:
                index.refused += 1
    return index
