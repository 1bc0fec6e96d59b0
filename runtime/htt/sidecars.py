"""History sidecars, the writing side (§4.1, §7.3): ``<file name>.h000001``, ... oldest
first. Compaction (through the store) archives the pre-compaction WAL span here before the
main file is replaced; :mod:`.history` reads them back.
"""

from __future__ import annotations

import glob
import re

from ...generated.htt import (
    SemTailLayout,
    SidecarLayout,
    SidecarSegment,
    WalEntry,
    encode_sidecar_segment,
)
from .durability import atomic_write
from .layout import FileLayout

ARCHIVE = "archive"
_SUFFIX = re.compile(r"\.h(\d{6})$")


def sidecar_paths(path: str) -> list[str]:
    """Existing segments of ``path``, oldest first."""
    found = []
    for p in glob.glob(glob.escape(path) + ".h[0-9][0-9][0-9][0-9][0-9][0-9]"):
        m = _SUFFIX.search(p)
        if m:
            found.append((int(m.group(1)), p))
    return [p for _, p in sorted(found)]


def next_sidecar_path(path: str) -> str:
    existing = sidecar_paths(path)
    n = int(_SUFFIX.search(existing[-1]).group(1)) + 1 if existing else 1
    return f"{path}.h{n:06d}"


def segment_for(layout: FileLayout, entries: list[WalEntry], first_seq: int,
                end_seq: int) -> SidecarSegment:
    flags = layout.flags
    if flags.quantized or flags.gacl:
        return SidecarSegment(2, layout.semantic_dims,
                              SidecarLayout(flags.quantized, flags.gacl),
                              first_seq, end_seq, entries)
    return SidecarSegment(1, layout.semantic_dims, None, first_seq, end_seq, entries)


def segment_tail_layout(seg: SidecarSegment) -> SemTailLayout:
    """The tail layout a segment's entries were decoded with (v1: full width)."""
    if seg.version >= 2 and seg.layout.quantized:
        return SemTailLayout.quantized_gacl if seg.layout.gacl else SemTailLayout.quantized
    return SemTailLayout.full


def archive(path: str, layout: FileLayout, entries: list[WalEntry], first_seq: int,
            end_seq: int) -> str | None:
    """Write one segment crash-safely; returns its path (None if nothing to archive)."""
    if not entries:
        return None
    target = next_sidecar_path(path)
    atomic_write(target, encode_sidecar_segment(segment_for(layout, entries, first_seq,
                                                            end_seq)))
    return target
