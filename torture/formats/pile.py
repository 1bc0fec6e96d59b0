"""Pile: ``runtime.pile.Pile`` (appends under ``flock``; ``amputate`` and refresh alongside)."""

from __future__ import annotations

import random

from ...runtime.pile import Pile, amputate
from ...runtime.pile.crypto import blake3
from .base import Acked, Checker, Format, Session


class _PileSession(Session):
    def __init__(self, path: str) -> None:
        self.pile = Pile.open(path)

    def write(self, token: bytes, payload: bytes) -> Acked:
        self.pile.put(payload)  # one O_APPEND write under LOCK_EX, fsynced before it returns
        return [(token, len(payload))]

    def close(self) -> Acked:
        self.pile.close()
        return []


class _PileChecker(Checker):
    def __init__(self, pile: Pile) -> None:
        self.pile = pile

    def has(self, token: bytes, payload: bytes) -> bool:
        handle = blake3(payload)
        if handle not in self.pile:
            return False
        return self.pile.get(handle) == payload

    def close(self) -> None:
        self.pile.close()


class PileFormat(Format):
    name = "pile"
    filename = "store.pile"
    self_locking = True
    slack = 256  # a blob's 256-byte head block precedes its payload
    fixed = 4096
    per_op = 1024  # a head block plus padding to 256
    reader_refuses_torn_tail = True  # kAbsoluteConsistency reader; amputate repairs

    def create(self, path: str, variant: str = "plain") -> None:
        Pile.create(path).close()

    def session(self, path: str, rng: random.Random) -> Session:
        return _PileSession(path)

    def maintain(self, path: str, rng: random.Random) -> str:
        if rng.random() < 0.5:
            with Pile.open(path, writable=False) as pile:
                pile.refresh()
            return "refresh"
        amputate(path)
        return "amputate"

    def checker(self, path: str, *, writer: bool) -> Checker:
        if writer:
            amputate(path)  # the explicit repair: cuts a torn tail, refuses middle damage
        return _PileChecker(Pile.open(path, writable=writer))
