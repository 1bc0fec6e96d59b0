"""What ``htt info`` reports of a store, built from its parts: the header, the WAL scan and
the counts of the live state. A store that replayed (``Store.info``) and a survey that
only counted (``survey``) describe a file through this one function, so the two agree
key for key."""

from __future__ import annotations

import os
from typing import Any

from ..fixedpoint import q64_to_float
from . import recovery, sidecars


def describe(path: str, header: Any, scan: Any, *, live_nodes: int, base_seq: int,
             next_seq: int, header_count: int, epoch: int, synthesized: int,
             bounds: list | None, discarded: Any = None, poisoned: Any = None,
             auto_compaction: dict | None = None) -> dict:
    """The ``info`` dict of the store at ``path``."""
    h = header
    damage = scan.damage
    return {
        "path": path,
        "version": h.version,
        "flags": h.flags.to_dict() | {"algorithm": h.flags.algorithm.name,
                                      "byte": h.flags.to_int()},
        "dimension": h.dimension,
        "semantic_dims": h.semantic_dims,
        "tau": q64_to_float(h.tau),
        "header_node_count": h.node_count,
        "live_nodes": live_nodes,
        "wal_base_seq": base_seq,
        "wal_entries": next_seq - base_seq,
        "wal_header_count": header_count,
        "next_seq": next_seq,
        "current_epoch": epoch,
        "synthesized_ancestors": synthesized,
        "wal_truncated": scan.problem,
        "wal_truncated_at": scan.problem_offset,
        "wal_damage": None if damage is None else {
            "offset": damage.offset, "reason": damage.reason,
            "records_after": damage.records_after},
        "discarded": discarded,
        "poisoned": poisoned,
        "discarded_files": [os.path.basename(p) for p in recovery.discarded_paths(path)],
        "bounds": bounds if h.flags.meaning_addressed else None,
        "sidecars": [os.path.basename(p) for p in sidecars.sidecar_paths(path)],
        "auto_compaction": auto_compaction or {"threshold": 0, "running": False, "runs": 0,
                                               "failures": 0, "error": None, "last": None},
    }
