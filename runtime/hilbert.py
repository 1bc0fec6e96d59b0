"""Hilbert-curve keys for n-dimensional integer coordinates.

Implements John Skilling, "Programming the Hilbert curve", AIP Conf. Proc. 707 (2004):
``AxestoTranspose`` / ``TransposetoAxes`` work on the "transposed" index (one word per
axis); the index proper is those words' bits interleaved, from the top bit-plane down,
axis 0 most significant within each plane. Nearby keys mean nearby points, which is
what spatial indexes sort on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def _check_shape(n: int, bits: int) -> None:
    if n < 1:
        raise ValueError(f"need at least one axis, got {n}")
    if bits < 1:
        raise ValueError(f"bits must be >= 1, got {bits}")


def _axes_to_transpose(x: list[int], bits: int) -> None:
    """Skilling's AxestoTranspose, in place."""
    n = len(x)
    m = 1 << (bits - 1)
    # Inverse undo excess work.
    q = m
    while q > 1:
        p = q - 1
        for i in range(n):
            if x[i] & q:
                x[0] ^= p  # invert
            else:
                t = (x[0] ^ x[i]) & p  # exchange
                x[0] ^= t
                x[i] ^= t
        q >>= 1
    # Gray encode.
    for i in range(1, n):
        x[i] ^= x[i - 1]
    t = 0
    q = m
    while q > 1:
        if x[n - 1] & q:
            t ^= q - 1
        q >>= 1
    for i in range(n):
        x[i] ^= t


def _transpose_to_axes(x: list[int], bits: int) -> None:
    """Skilling's TransposetoAxes, in place."""
    n = len(x)
    top = 2 << (bits - 1)
    # Gray decode by H ^ (H/2).
    t = x[n - 1] >> 1
    for i in range(n - 1, 0, -1):
        x[i] ^= x[i - 1]
    x[0] ^= t
    # Undo excess work.
    q = 2
    while q != top:
        p = q - 1
        for i in range(n - 1, -1, -1):
            if x[i] & q:
                x[0] ^= p
            else:
                t = (x[0] ^ x[i]) & p
                x[0] ^= t
                x[i] ^= t
        q <<= 1


def hilbert_index(coords: Sequence[int], bits: int) -> int:
    """Hilbert index (``len(coords) * bits`` bits) of a point with ``bits``-bit coordinates."""
    n = len(coords)
    _check_shape(n, bits)
    limit = (1 << bits) - 1
    x = []
    for axis, c in enumerate(coords):
        c = int(c)
        if not 0 <= c <= limit:
            raise ValueError(f"coordinate {axis} = {c} outside 0..{limit}")
        x.append(c)
    _axes_to_transpose(x, bits)
    # Interleave: top bit-plane first, axis 0 the most significant bit of each plane.
    index = 0
    for plane in range(bits - 1, -1, -1):
        for word in x:
            index = (index << 1) | ((word >> plane) & 1)
    return index


def hilbert_coords(index: int, n: int, bits: int) -> list[int]:
    """Inverse of :func:`hilbert_index`: the point with Hilbert index ``index``."""
    _check_shape(n, bits)
    if not 0 <= index < 1 << (n * bits):
        raise ValueError(f"index {index} outside 0..2**{n * bits}-1")
    x = [0] * n
    # De-interleave, consuming the least significant bits (lowest plane, last axis) first.
    for plane in range(bits):
        for axis in range(n - 1, -1, -1):
            x[axis] |= (index & 1) << plane
            index >>= 1
    _transpose_to_axes(x, bits)
    return x


def normalize_axis(value: float, lo: float, hi: float, bits: int) -> int:
    """Map ``value`` in ``[lo, hi]`` onto ``0..2**bits-1``, rounding to nearest, clamped."""
    if bits < 1:
        raise ValueError(f"bits must be >= 1, got {bits}")
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        raise ValueError(f"need finite lo < hi, got lo={lo!r} hi={hi!r}")
    if math.isnan(value):
        raise ValueError("cannot normalize NaN")
    top = (1 << bits) - 1
    # Clamp first so infinities and far-out values cannot overflow the arithmetic.
    value = min(max(value, lo), hi)
    scaled = (value - lo) / (hi - lo) * top
    return min(max(math.floor(scaled + 0.5), 0), top)
