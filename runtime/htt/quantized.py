"""Semantic tails: full-width in memory, translated to the file's tail layout on disk.

In memory a placement is a list of ``semantic_dims`` raw Q64.64 ints, or ``None`` for
"not set" (§7: the all-zero tail IS "not set"). On disk it is ``TailFull``, or for v4
files (§7.3) ``TailQuantized`` (reserved region elided, user dims TQ1.9) or
``TailQuantizedGacl`` (reserved region kept full width). Writers reject rather than
saturate, and canonicalize: the in-memory value is always ``decode(encode(v))``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...generated.htt import (
    SemTailLayout,
    TailFull,
    TailQuantized,
    TailQuantizedGacl,
    decode_tail_full,
)
from ..errors import EncodeError
from ..fixedpoint import q64_from_float, q64_to_float, tq19_from_q64, tq19_to_q64
from .errors import SemanticError
from .layout import USER_DIM_START

Tail = TailFull | TailQuantized | TailQuantizedGacl | None


class TailCodec:
    """Converts between in-memory placements and one file's on-disk tails."""

    def __init__(self, semantic_dims: int, layout: SemTailLayout) -> None:
        layout = SemTailLayout(layout)
        if layout is not SemTailLayout.full and semantic_dims <= USER_DIM_START:
            raise SemanticError(
                f"quantized tails need semantic_dims > 16, got {semantic_dims} (§7.3)")
        self.dims = semantic_dims
        self.layout = layout
        self.reserved = min(semantic_dims, USER_DIM_START)
        self.user = semantic_dims - self.reserved
        self._zero = bytes(PACKED_DIM * semantic_dims)
        self._kind: object = None  # the decoder's packed element kind, once recognised
        self._rows_ok: bool | None = None  # rows hold full-width dims packed (None: unasked)

    # -- disk -> memory ------------------------------------------------------------------

    def from_disk(self, tail: Tail) -> list[int] | None:
        """Full-width raw values, or None when the tail is all zero ("not set").

        A TQ1.9 value outside +-29524 raises ``ConstraintError`` (a DecodeError)."""
        if tail is None:
            return None
        layout = self.layout
        if layout is SemTailLayout.full:
            dims = tail.dims
            return list(dims) if any(dims) else None
        if not any(tail.user) and (layout is SemTailLayout.quantized or not any(tail.reserved)):
            return None
        user = [tq19_to_q64(q) for q in tail.user]
        if layout is SemTailLayout.quantized:
            return [0] * self.reserved + user
        return list(tail.reserved) + user

    def packed(self, tail: Tail) -> bytes | None:
        """The placement in the state's packed form (``PACKED_DIM`` bytes per dim,
        little-endian two's complement), or None for "not set".

        A full-width tail the decoder returned as a packed array already is that form:
        its bytes are taken as they are, without converting twenty ints and back."""
        if tail is None:
            return None
        if self.layout is SemTailLayout.full:
            dims = tail.dims
            kind = getattr(dims, "kind", None)
            if kind is not None and (kind is self._kind or self._wire_kind(kind)):
                raw = dims.raw
                return None if raw == self._zero else raw
        raw_list = self.from_disk(tail)
        return None if raw_list is None else pack_dims(raw_list)

    def packed_row(self, tail: tuple) -> bytes | None:
        """``packed`` for a tail read as a row (``decode_rows_wal_entry``): its fields by
        position, ``(dims,)``, ``(user,)`` or ``(reserved, user)``, a packed view as its
        raw bytes. A full-width tail whose bytes are the packed form is taken as it is."""
        layout = self.layout
        if layout is SemTailLayout.full:
            raw = tail[0]
            if raw.__class__ is bytes and self._rows_packed():
                return None if raw == self._zero else raw
            return self.packed(TailFull(self._dims_of(raw)))
        if layout is SemTailLayout.quantized:
            return self.packed(TailQuantized(tail[0]))
        return self.packed(TailQuantizedGacl(self._dims_of(tail[0]), tail[1]))

    def _rows_packed(self) -> bool:
        """Whether the decoder's full-width dims are held in the packed form (asked of
        the generated decoder once: a row's bytes carry no element kind)."""
        ok = self._rows_ok
        if ok is None:
            dims = decode_tail_full(bytes(PACKED_DIM), semantic_dims=1)[0].dims
            kind = getattr(dims, "kind", None)
            ok = self._rows_ok = kind is not None and (kind is self._kind
                                                      or self._wire_kind(kind))
        return ok

    @staticmethod
    def _dims_of(raw):
        """A row's full-width dims as the decoder's objects hold them (a packed array)."""
        if raw.__class__ is not bytes:
            return raw
        return decode_tail_full(raw, semantic_dims=len(raw) // PACKED_DIM)[0].dims

    def _wire_kind(self, kind) -> bool:
        """Whether a packed array kind holds i128 little-endian (the packed form)."""
        if (getattr(kind, "order", None) == "<" and getattr(kind, "size", None) == PACKED_DIM
                and getattr(kind, "signed", None) is True):
            self._kind = kind
            return True
        return False

    # -- memory -> disk ------------------------------------------------------------------

    def to_disk(self, raw: Sequence[int] | None) -> Tail:
        """The on-disk tail for a placement (None -> the all-zero tail).

        Raises ``SemanticError`` for values the layout cannot hold (never saturates)."""
        if self.dims == 0:
            if raw:
                raise SemanticError("this file has no semantic dimensions")
            return None
        if raw is None:
            raw = [0] * self.dims
        elif len(raw) != self.dims:
            raise SemanticError(f"expected {self.dims} semantic values, got {len(raw)}")
        layout = self.layout
        if layout is SemTailLayout.full:
            return TailFull([int(v) for v in raw])
        reserved = [int(v) for v in raw[: self.reserved]]
        try:
            user = [tq19_from_q64(int(v)) for v in raw[self.reserved:]]
        except EncodeError as exc:
            raise SemanticError(f"user semantic value rejected (TQ1.9 range): {exc}") from None
        if layout is SemTailLayout.quantized:
            if any(reserved):
                raise SemanticError(
                    "reserved dims 0-15 must be zero: this quantized file elides them (§7.3)")
            return TailQuantized(user)
        return TailQuantizedGacl(reserved, user)

    def canonical(self, raw: Sequence[int] | None) -> list[int] | None:
        """What a placement becomes after a storage round trip (validates too)."""
        return self.from_disk(self.to_disk(raw))

    def zero(self) -> Tail:
        return self.to_disk(None)


PACKED_DIM = 16  # bytes of one packed raw Q64.64 value (signed, little-endian)


def pack_dims(raw: Sequence[int]) -> bytes:
    """Raw Q64.64 values as ``PACKED_DIM`` bytes each (``OverflowError`` outside i128)."""
    return b"".join([v.to_bytes(PACKED_DIM, "little", signed=True) for v in raw])


def raw_from_floats(values: Sequence[float]) -> list[int]:
    """Q64.64 raw values for floats (gMath ``from_f64``: exact, truncated toward zero)."""
    try:
        return [q64_from_float(float(v)) for v in values]
    except EncodeError as exc:
        raise SemanticError(str(exc)) from None


def floats_from_raw(raw: Sequence[int] | None) -> tuple[float, ...] | None:
    return None if raw is None else tuple(q64_to_float(v) for v in raw)
