"""kladde resource limits and format bounds, as named constants.

The format bounds come from facts.md §7.2 and §8 and are not negotiable; the resource
limits are this implementation's choices, enforced with clear errors and overridable by
the API (``Journal.recover(..., limits=...)``, ``KladdeFile(..., limits=...)``) for users
who need more.
"""

from __future__ import annotations

from dataclasses import dataclass

U32_MAX = (1 << 32) - 1

# -- format bounds (facts.md §7.2, §8) ---------------------------------------------------
#: the framing bytes of the live statements naming one id sum to at most this
FRAMING_BYTES_PER_ID = U32_MAX
#: the sizes of the live Refs pointing into one data page sum to at most this
REF_BYTES_PER_DATA_PAGE = U32_MAX
#: an encoded transaction's record bytes (the length prefix's value)
TRANSACTION_BYTES = U32_MAX
#: the reader reads at most this many bytes of a transaction's length prefix (R-JNL)
LENGTH_PREFIX_BYTES = 5
#: the most bytes a statement's framing can take (every byte except an Inline payload)
STATEMENT_FRAMING_MAX = 21

# -- resource limits (implementation choices) --------------------------------------------
#: replaying the journal materialises each touched allocation; one may not exceed this
REPLAY_ALLOCATION_BYTES = 1 << 30
#: bytes of journal stream scanned past damage for valid-looking transactions (about 7 s
#: per MiB of random bytes); a look cut short by it counts as damage, never as a torn tail
SCAN_BYTES = 256 << 10


@dataclass(frozen=True, slots=True)
class Limits:
    """The limits one open uses; the defaults are the constants above."""

    framing_bytes_per_id: int = FRAMING_BYTES_PER_ID
    ref_bytes_per_data_page: int = REF_BYTES_PER_DATA_PAGE
    replay_allocation_bytes: int = REPLAY_ALLOCATION_BYTES
    scan_bytes: int = SCAN_BYTES


DEFAULT = Limits()
