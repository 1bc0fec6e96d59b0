"""Damage injected between runs: bit flips, zeroed 512-byte sectors, truncation.

Every event is recorded (kind, offset, length) so the checker can excuse exactly the
acknowledged writes whose bytes the damage touched, and no others.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

__all__ = ["KINDS", "Damage", "damage_file"]

KINDS = ("bitflip", "sector-zero", "truncate")
SECTOR = 512


@dataclass(frozen=True)
class Damage:
    kind: str
    offset: int
    length: int  # bytes changed (truncate: bytes removed)

    def touches(self, start: int, end: int, slack: int) -> bool:
        """Whether this damage lands on ``[start, end)`` widened by ``slack`` bytes on
        each side (a record's framing, key and checksum sit around its payload)."""
        if self.kind == "truncate":
            return self.offset < end + slack
        return self.offset < end + slack and self.offset + self.length > start - slack


def _rewrite(path: str, data: bytes) -> None:
    # a new file renamed over the old one: the harness never shortens a file in place
    tmp = f"{path}.damage-tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def damage_file(path: str, rng: random.Random, kinds: tuple[str, ...],
                events: int = 1, protect: int = 0) -> list[Damage]:
    """Apply ``events`` random damage events of ``kinds`` to ``path``; returns them.
    ``protect`` bytes at the start are left alone (0: the whole file is fair game)."""
    with open(path, "rb") as fh:
        data = bytearray(fh.read())
    done: list[Damage] = []
    for _ in range(events):
        size = len(data)
        if size <= protect + 1:
            break
        kind = rng.choice(kinds)
        if kind == "bitflip":
            at = rng.randrange(protect, size)
            data[at] ^= 1 << rng.randrange(8)
            done.append(Damage(kind, at, 1))
        elif kind == "sector-zero":
            first = protect // SECTOR
            last = (size - 1) // SECTOR
            at = rng.randint(first, last) * SECTOR
            end = min(at + SECTOR, size)
            data[at:end] = bytes(end - at)
            done.append(Damage(kind, at, end - at))
        else:
            at = rng.randrange(protect, size)
            done.append(Damage(kind, at, size - at))
            del data[at:]
    if done:
        _rewrite(path, bytes(data))
    return done
