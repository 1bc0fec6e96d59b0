"""Pass 4a: emit the fast path — specialized Python decoders and encoders.

Each record layout becomes ``_d_<record><suffix>(mv, pos, end, *params) -> (value, pos)``
and ``_e_<record><suffix>(out, value, *params)``. Consecutive fixed-size fields are
coalesced into one precompiled ``struct.Struct`` run; variable parts slice a memoryview.
Bounds are checked before any read or allocation, and errors unwind with the field path
prepended, so the happy path pays nothing for good error messages.

The emitter is a set of named passes, one module each, in ``generator/fast`` (see
:mod:`bytewright.generator.fast.emitter`); this module is their entry point.
"""

from __future__ import annotations

from .fast.base import Item, Spans
from .fast.emitter import FastEmitter
from .fast.pack_fusion import (
    SMALL_LENGTHS,
    drop_len_marks,
    fuse_packs,
    small_length_packs,
    static_padding,
)

__all__ = ["SMALL_LENGTHS", "FastEmitter", "Item", "Spans", "drop_len_marks", "fuse_packs",
           "small_length_packs", "static_padding"]
