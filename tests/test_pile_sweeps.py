"""Pile bit-flip sweep: flip every bit of every record of a pile that
mixes current, legacy, envelope and opaque records. Expected results are exact:

- the records wholly before the flipped one are read back unchanged, always;
- the reader either stops at the flipped record's start (``CorruptPile.valid_length`` or
  ``UnsupportedRecord.offset`` equal to it), or reads on, when the flip lies in bytes that
  refresh does not judge (a payload that is verified lazily against its handle, or the
  body of an opaque record) — then the same records are read at the same offsets — or,
  where a length no checksum covers changed (legacy records), the flipped record is read
  with another framing from the same start; nothing before the damage is ever lost.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bytewright.review.checks import parse_fixture
from bytewright.runtime.errors import BytewrightError
from bytewright.runtime.pile import CorruptPile, UnsupportedRecord
from bytewright.runtime.pile.scan import iter_records

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "pile" / "pile_mixed.hex"


def _read_all(data: bytes):
    out = []
    try:
        for rec in iter_records(data, heads_only=True):
            out.append((rec.offset, rec.end, rec.form, bytes(rec.kind)))
    except (CorruptPile, UnsupportedRecord) as exc:
        return out, exc
    return out, None


@pytest.mark.long
def test_flip_bits_of_every_record():
    data = parse_fixture(FIX).data
    good, err = _read_all(data)
    assert err is None and len(good) >= 4
    outcomes = {"stopped": 0, "read on": 0, "reframed": 0}
    for index, (start, end, _form, _kind) in enumerate(good):
        for at in range(start, end):
            # every bit of the 64-byte framing head; bits 0 and 7 of the rest (CI time)
            for bit in (range(8) if at - start < 64 else (0, 7)):
                bad = bytearray(data)
                bad[at] ^= 1 << bit
                try:
                    got, exc = _read_all(bytes(bad))
                except BytewrightError as other:  # any other project error is a failure here
                    raise AssertionError(f"byte {at} bit {bit}: {other!r}") from None
                assert got[:index] == good[:index], (at, bit)  # nothing before it is lost
                if exc is not None:
                    where = exc.valid_length if isinstance(exc, CorruptPile) else exc.offset
                    if where == start:
                        outcomes["stopped"] += 1
                    else:  # later only when the flip reframed this record (see below)
                        assert got[index][0] == start and got[index][1] != end, (at, bit, where)
                        assert where >= got[index][1], (at, bit, where)
                        outcomes["reframed"] += 1
                elif [(o, e) for o, e, _, _ in got] == [(o, e) for o, e, _, _ in good]:
                    outcomes["read on"] += 1
                else:
                    # A length no checksum covers (legacy V1/V3 records) can change into
                    # another valid-looking framing: the flipped record still starts where
                    # it did, and everything before it is intact (asserted above).
                    assert got[index][0] == start, (at, bit)
                    outcomes["reframed"] += 1
    # framing flips stop the reader, payload flips do not; reframing stays the exception
    assert outcomes["stopped"] > 0 and outcomes["read on"] > 0, outcomes
    assert outcomes["reframed"] < outcomes["stopped"] // 4, outcomes
