"""kladde: ``runtime.kladde.Store`` (journal commits, epoch flushes; the writer open folds).

kladde has no writer lock of its own, so the harness serialises writer sessions and folds
with a lock file; readers run alongside.
"""

from __future__ import annotations

import random
import warnings

from ...runtime.kladde import DanglingPointer, Store, open_file
from ...runtime.kladde.journal import current_state
from .base import Acked, Checker, Format, Session


def _alloc_id(token: bytes) -> int:
    return int.from_bytes(token[:4], "little") % 0x7FFFFFF0 + 1


class _KladdeSession(Session):
    def __init__(self, path: str, rng: random.Random) -> None:
        self.rng = rng
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.store = Store.open(path)

    def write(self, token: bytes, payload: bytes) -> Acked:
        aid = _alloc_id(token)
        s = self.store
        if not s.exists(aid):
            s.create_allocation(aid)
        s.write(aid, 0, payload)
        if self.rng.random() < 0.15:
            s.flush()  # an epoch: durable once the header commit's fsync returned
        else:
            s.commit()  # a journal transaction: durable when this returns
        return [(token, len(payload))]

    def close(self) -> Acked:
        self.store.close()
        return []


class _KladdeChecker(Checker):
    def __init__(self, reader) -> None:
        self.reader = reader

    def has(self, token: bytes, payload: bytes) -> bool:
        try:
            return self.reader.read(_alloc_id(token)) == payload
        except DanglingPointer:
            return False

    def close(self) -> None:
        close = getattr(self.reader, "close", None)
        if close is not None:
            close()


class Kladde(Format):
    name = "kladde"
    filename = "store.kladde"
    self_locking = False
    slack = 64
    fixed = 3 * 4096
    per_op = 4 * 4096  # a flush writes whole pages (data, table, header)

    def create(self, path: str, variant: str = "plain") -> None:
        Store.create(path).close()

    def session(self, path: str, rng: random.Random) -> Session:
        return _KladdeSession(path, rng)

    def maintain(self, path: str, rng: random.Random) -> str:
        if rng.random() < 0.3:
            current_state(open_file(path)).ids()
            return "read"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            Store.open(path).close()  # the fold (`bytewright kladde fold`)
        return "fold"

    def checker(self, path: str, *, writer: bool) -> Checker:
        if writer:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return _KladdeChecker(Store.open(path))
        return _KladdeChecker(current_state(open_file(path)))
