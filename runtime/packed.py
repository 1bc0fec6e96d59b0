"""Packed arrays: a run of fixed-size numbers kept as its encoded bytes.

A field declared ``view: packed`` decodes to a :class:`PackedArray` instead of a list: the
decoder copies one slice and builds one small object, however many elements the run
holds; elements are decoded when they are read. It is a read-only ``Sequence`` (``len``,
indexing, slicing to a list, iteration, ``tolist()``), compares equal to a list or tuple
of the same values and, bit for bit, to another packed array of the same element kind;
:meth:`PackedArray.numpy` gives a zero-copy numpy view where numpy has the element type.
Encoders write :attr:`PackedArray.raw` back unchanged, and accept plain lists as well.

Why: twenty 128-bit fixed-point dims or a 768-dim float vector as Python objects cost
30-60 bytes per element and one conversion each on every decode; packed they cost their
wire size and no conversion until somebody looks.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy is imported by PackedArray.numpy, when a view is asked for
    import numpy as np

__all__ = ["PackedArray", "PackedKind", "packed_kind"]

# struct codes numpy can view directly
_NP = {"b": "i1", "B": "u1", "h": "i2", "H": "u2", "i": "i4", "I": "u4", "q": "i8",
       "Q": "u8", "e": "f2", "f": "f4", "d": "f8"}


class PackedKind:
    """The element type of a packed array: byte order, size, and how one element reads.

    ``code`` is a ``struct`` code, or ``""`` for integers ``struct`` has no code for
    (128-bit, 24-bit): those read with ``int.from_bytes``. One kind object exists per
    distinct element type (see :func:`packed_kind`), so kinds compare by identity.
    """

    __slots__ = ("order", "code", "size", "signed", "_one", "_many")

    def __init__(self, order: str, code: str, size: int, signed: bool) -> None:
        self.order, self.code, self.size, self.signed = order, code, size, signed
        self._one = struct.Struct(order + code) if code else None
        self._many: dict[int, struct.Struct] = {}

    def __reduce__(self) -> tuple:
        # one kind per element type, also after pickling (process pools, copies)
        return (packed_kind, (self.order, self.code, self.size, self.signed))

    def __deepcopy__(self, memo: dict) -> PackedKind:
        return self

    def __repr__(self) -> str:
        name = self.code or f"{'i' if self.signed else 'u'}{self.size * 8}"
        return f"PackedKind({'le' if self.order == '<' else 'be'} {name})"

    def decode_all(self, raw: bytes) -> list:
        """Every element of ``raw`` as Python numbers."""
        n = len(raw) // self.size
        if self.code:
            st = self._many.get(n)
            if st is None:
                st = struct.Struct(self.order + str(n) + self.code)
                if len(self._many) < 64:
                    self._many[n] = st
            return list(st.unpack(raw))
        if self.size == 16:  # two u64 halves per element: one unpack for the run
            lo, hi = "Q", "q" if self.signed else "Q"
            st = self._many.get(n)
            if st is None:
                st = struct.Struct(self.order + (lo + hi if self.order == "<" else hi + lo) * n)
                if len(self._many) < 64:
                    self._many[n] = st
            it = iter(st.unpack(raw))
            if self.order == "<":
                return [h << 64 | lw for lw, h in zip(it, it, strict=True)]
            return [h << 64 | lw for h, lw in zip(it, it, strict=True)]
        order = "little" if self.order == "<" else "big"
        size, signed = self.size, self.signed
        return [int.from_bytes(raw[p:p + size], order, signed=signed)
                for p in range(0, len(raw), size)]

    def decode_one(self, raw: bytes, i: int) -> Any:
        if self._one is not None:
            return self._one.unpack_from(raw, i * self.size)[0]
        p = i * self.size
        return int.from_bytes(raw[p:p + self.size], "little" if self.order == "<" else "big",
                              signed=self.signed)

    def encode_all(self, values: Iterable) -> bytes:
        """The packed bytes of ``values`` (``struct.error``/``OverflowError`` when one does
        not fit, as the list encoders raise)."""
        vals = list(values)
        if self.code:
            return struct.pack(self.order + str(len(vals)) + self.code, *vals)
        order = "little" if self.order == "<" else "big"
        return b"".join(v.to_bytes(self.size, order, signed=self.signed) for v in vals)


_KINDS: dict[tuple, PackedKind] = {}


def packed_kind(order: str, code: str, size: int, signed: bool) -> PackedKind:
    """The one :class:`PackedKind` of this element type (generated modules share them)."""
    key = (order, code, size, signed)
    kind = _KINDS.get(key)
    if kind is None:
        kind = _KINDS[key] = PackedKind(order, code, size, signed)
    return kind


class PackedArray(Sequence):
    """A read-only sequence of numbers held as their encoded bytes (``view: packed``).

    ``raw`` is the run's bytes exactly as on the wire; ``kind`` the element type. Reading
    an element decodes it; ``tolist()`` decodes them all in one ``struct`` call.
    """

    __slots__ = ("raw", "kind")

    def __init__(self, raw: bytes, kind: PackedKind) -> None:
        self.raw = raw
        self.kind = kind

    @classmethod
    def from_values(cls, values: Iterable, kind: PackedKind) -> PackedArray:
        """Pack ``values`` (any iterable of numbers) as ``kind``."""
        if isinstance(values, PackedArray) and values.kind is kind:
            return values
        return cls(kind.encode_all(values), kind)

    def __len__(self) -> int:
        return len(self.raw) // self.kind.size

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return self.tolist()[i]
        n = len(self.raw) // self.kind.size
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("packed array index out of range")
        return self.kind.decode_one(self.raw, i)

    def __iter__(self) -> Iterator:
        return iter(self.kind.decode_all(self.raw))

    def tolist(self) -> list:
        """Every element as a Python number."""
        return self.kind.decode_all(self.raw)

    def numpy(self) -> np.ndarray:
        """A read-only zero-copy numpy view (struct-codable element types only)."""
        if not self.kind.code or self.kind.code not in _NP:
            raise TypeError(f"numpy has no element type for {self.kind!r}")
        import numpy as np

        return np.frombuffer(self.raw, self.kind.order + _NP[self.kind.code])

    def __reduce__(self) -> tuple:
        return (PackedArray, (self.raw, self.kind))

    def __copy__(self) -> PackedArray:
        return self  # immutable: the bytes and the shared kind

    def __deepcopy__(self, memo: dict) -> PackedArray:
        return self

    def __bytes__(self) -> bytes:
        return bytes(self.raw)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PackedArray):
            if other.kind is self.kind:
                return self.raw == other.raw  # bit-exact, NaN payloads included
            return self.tolist() == other.tolist()
        if isinstance(other, (list, tuple)):
            return self.tolist() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to lists, which do not hash

    def __repr__(self) -> str:
        return f"PackedArray({self.tolist()!r})"

