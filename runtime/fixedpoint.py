"""Named fixed-point number types and numeric conversions (exact integer arithmetic).

``Q64.64`` is a signed i128 whose value is ``raw / 2**64`` (stored i128 LE); the float
conversion matches gMath ``FixedPoint::from_f64`` (exact IEEE value, truncated toward
zero). ``TQ1.9`` is an i16 holding ``value * 3**9``; it is converted from and to Q64.64
with round-half-away-from-zero in pure integers, and out-of-range values are rejected,
never saturated, so that a decode/encode cycle cannot silently change a value.
"""

from __future__ import annotations

import math
from fractions import Fraction

from .errors import ConstraintError, EncodeError

# --- Q64.64 ---------------------------------------------------------------------------

Q64_FRAC_BITS = 64
Q64_ONE = 1 << Q64_FRAC_BITS
I128_MIN = -(1 << 127)
I128_MAX = (1 << 127) - 1

# --- TQ1.9 ----------------------------------------------------------------------------

TQ19_SCALE = 3**9  # 19683
TQ19_MAX = 29524  # (3**10 - 1) // 2: the largest magnitude of ten balanced trits
TQ19_MIN = -TQ19_MAX


def round_half_away(num: int, den: int) -> int:
    """``num / den`` rounded to nearest, ties away from zero; ``den`` must be > 0."""
    if den <= 0:
        raise ValueError(f"denominator must be positive, got {den}")
    quotient, remainder = divmod(abs(num), den)
    if 2 * remainder >= den:
        quotient += 1
    return -quotient if num < 0 else quotient


def _encode_i128(raw: int, what: str) -> int:
    if not I128_MIN <= raw <= I128_MAX:
        raise EncodeError(f"{what} is outside the Q64.64 (i128) range")
    return raw


def _check_raw(raw: int) -> None:
    # Raw values come from decoded i128 fields; anything else is a broken invariant.
    if not I128_MIN <= raw <= I128_MAX:
        raise ConstraintError(
            "Q64.64 raw value outside i128 range",
            expected=f"{I128_MIN}..{I128_MAX}",
            found=raw,
        )


def q64_from_float(v: float) -> int:
    """Raw Q64.64 for ``v``: exact IEEE value times 2**64, truncated toward zero."""
    if math.isnan(v) or math.isinf(v):
        raise EncodeError(f"cannot encode {v!r} as Q64.64")
    # int() of a Fraction truncates toward zero, as from_f64 does.
    return _encode_i128(int(Fraction(v) * Q64_ONE), f"{v!r}")


def q64_to_float(raw: int) -> float:
    """Nearest float to the Q64.64 value ``raw / 2**64`` (int true division is exact-rounded)."""
    _check_raw(raw)
    return raw / Q64_ONE


def q64_from_fraction(value: Fraction) -> int:
    """Raw Q64.64 for an exact rational, truncated toward zero."""
    return _encode_i128(int(Fraction(value) * Q64_ONE), f"{value}")


def q64_to_fraction(raw: int) -> Fraction:
    """The exact rational value of a raw Q64.64."""
    _check_raw(raw)
    return Fraction(raw, Q64_ONE)


def tq19_from_q64(raw: int) -> int:
    """TQ1.9 integer nearest to a Q64.64 value; :class:`EncodeError` if out of range."""
    _encode_i128(raw, f"raw {raw}")
    q = round_half_away(raw * TQ19_SCALE, Q64_ONE)
    if abs(q) > TQ19_MAX:
        raise EncodeError(
            f"Q64.64 value {float(Fraction(raw, Q64_ONE))!r} rounds to TQ1.9 {q}, "
            f"outside {TQ19_MIN}..{TQ19_MAX}"
        )
    return q


def tq19_to_q64(q: int) -> int:
    """Raw Q64.64 nearest to a TQ1.9 integer; :class:`ConstraintError` if out of range."""
    if abs(q) > TQ19_MAX:
        raise ConstraintError(
            "TQ1.9 value out of range",
            expected=f"{TQ19_MIN}..{TQ19_MAX}",
            found=q,
        )
    return round_half_away(q * Q64_ONE, TQ19_SCALE)


def tq19_canonical(raw: int) -> int:
    """Snap a raw Q64.64 to the nearest value TQ1.9 can represent."""
    return tq19_to_q64(tq19_from_q64(raw))


# --- numeric conversions for the registry ----------------------------------------------


def zigzag_decode(raw: int) -> int:
    """Zigzag (protobuf sint): 0, 1, 2, 3 -> 0, -1, 1, -2; any width."""
    if raw < 0:
        raise ConstraintError("zigzag raw value must be unsigned", expected=">= 0", found=raw)
    return (raw >> 1) ^ -(raw & 1)


def zigzag_encode(value: int) -> int:
    """Inverse of :func:`zigzag_decode`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise EncodeError(f"zigzag needs an int, got {value!r}")
    return value << 1 if value >= 0 else (-value << 1) - 1


def _q64_encode(value: Fraction | int | float) -> int:
    if isinstance(value, float):
        return q64_from_float(value)
    return q64_from_fraction(Fraction(value))


def _tq19_decode(q: int) -> Fraction:
    if abs(q) > TQ19_MAX:
        raise ConstraintError("TQ1.9 value out of range", expected=f"{TQ19_MIN}..{TQ19_MAX}",
                              found=q)
    return Fraction(q, TQ19_SCALE)


def _tq19_encode(value: Fraction | int | float) -> int:
    frac = Fraction(value)
    q = round_half_away(frac.numerator * TQ19_SCALE, frac.denominator)
    if abs(q) > TQ19_MAX:
        raise EncodeError(f"{value!r} is outside the TQ1.9 range")
    return q


def register(reg) -> None:  # noqa: ANN001 - a Registry (not imported: avoids a cycle)
    """Plug-in entry point ``bytewright.runtime.fixedpoint:register``.

    q64.64 and tq1.9 convert raw integers to exact :class:`~fractions.Fraction` values
    (as ``convert:``); as ``fixed_point:`` types the object model keeps the raw integer.
    """
    reg.add_numeric("q64.64", decode=q64_to_fraction, encode=_q64_encode, signed=True,
                    raw_model=True, doc="Q64.64: raw / 2**64 (i128)", annotation="Fraction")
    reg.add_numeric("tq1.9", decode=_tq19_decode, encode=_tq19_encode, signed=True,
                    raw_model=True, doc="TQ1.9: raw / 3**9, |raw| <= 29524 (i16)",
                    annotation="Fraction")
    reg.add_numeric("zigzag", decode=zigzag_decode, encode=zigzag_encode, signed=False,
                    doc="zigzag: 0, 1, 2, 3 <-> 0, -1, 1, -2 (protobuf sint)", annotation="int")
