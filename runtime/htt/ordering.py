"""Snapshot order on compaction (§3, §9; facts.md §3.3).

* no user semantic dims: insertion order (parents first by construction);
* user dims (semantic_dims > 16): ``(depth, hilbert_index, key)``, parents first;
* v3 meaning-addressed: pure global-Hilbert order ``(hilbert_index, key)``.

The Hilbert index is Skilling's over the first <= 8 user dims (16+), zero-padded to 8
axes (the reconstruction facts.md §3.3 found to fit upstream), 12 bits per axis, each
axis normalized by its ``(min, max)`` bound, computed over the decoded full-width values.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..fixedpoint import q64_to_float
from ..hilbert import hilbert_index, normalize_axis
from .layout import USER_DIM_START, FileLayout
from .state import Node, State, depth_of

HILBERT_AXES = 8
HILBERT_BITS = 12


def node_hilbert(node: Node, bounds: Sequence[tuple[float, float]]) -> int:
    axes = [0] * HILBERT_AXES
    raw = node.tail
    if raw is not None:
        user = raw[USER_DIM_START:USER_DIM_START + HILBERT_AXES]
        for i, v in enumerate(user):
            lo, hi = bounds[i]
            axes[i] = normalize_axis(q64_to_float(v), lo, hi, HILBERT_BITS)
    else:
        for i in range(min(len(bounds), HILBERT_AXES)):
            lo, hi = bounds[i]
            axes[i] = normalize_axis(0.0, lo, hi, HILBERT_BITS)
    return hilbert_index(axes, HILBERT_BITS)


def snapshot_order(state: State, layout: FileLayout,
                   bounds: Sequence[tuple[float, float]]) -> list[Node]:
    nodes = list(state.nodes.values())
    if layout.user_dims == 0:
        return nodes
    if len(bounds) < min(layout.user_dims, HILBERT_AXES):
        raise ValueError(f"need bounds for {layout.user_dims} user dims, got {len(bounds)}")
    keyed = [(node_hilbert(n, bounds), n) for n in nodes]
    if layout.flags.meaning_addressed:
        keyed.sort(key=lambda t: (t[0], t[1].key.encode("utf-8")))
    else:
        keyed.sort(key=lambda t: (depth_of(t[1].key), t[0], t[1].key.encode("utf-8")))
    return [n for _, n in keyed]


def is_parents_first(keys: Sequence[str]) -> bool:
    seen: set[str] = set()
    for k in keys:
        i = k.rfind("/")
        if i > 0 and k[:i] not in seen:
            return False
        seen.add(k)
    return True
