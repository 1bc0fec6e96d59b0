"""Pile (triblespace) runtime: scanning, refresh, blob reads, signed writes, repair.

Built on the generated codecs in ``generated/pile.py``: ``scan`` (the record scanner and
its error mapping), ``store`` (the ``Pile``), ``crypto`` (Ed25519 rules, transcripts,
fingerprints), ``repair`` (amputate, reframe, diagnose), ``kinds`` (handles from the schema).
"""

from __future__ import annotations

from .errors import CorruptPile, InvalidRecord, PileShrunk, RepairRefused, UnsupportedRecord
from .repair import amputate, diagnose, find_damage, reframe, salvage
from .scan import Record, iter_records, read_record
from .store import BlobUnavailable, Pile, encode_blob, frame, proof_frame, sign_proof

__all__ = [
    "BlobUnavailable", "CorruptPile", "InvalidRecord", "Pile", "PileShrunk", "Record",
    "RepairRefused", "UnsupportedRecord", "amputate", "diagnose", "encode_blob",
    "find_damage", "frame", "iter_records", "proof_frame", "read_record", "reframe",
    "salvage", "sign_proof",
]
