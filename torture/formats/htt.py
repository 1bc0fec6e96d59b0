"""HTT: ``runtime.htt.store.Store`` (single writer by ``flock``; compaction alongside).

A scenario's store is plain or compressed (§5: zstd, zlib or lz4; a compressed file also
block-compresses its WAL), so payloads may stand in the file only inside compressed
frames: :meth:`Htt.frames` finds and decodes them.
"""

from __future__ import annotations

import random
import re

from ...runtime import compression
from ...runtime.errors import BytewrightError
from ...runtime.htt.errors import StoreLocked
from ...runtime.htt.store import Store
from .base import Acked, Checker, Format, Frame, Session

CODECS = ("zstd", "zlib", "lz4")
# how the canonical frame each writer emits begins (§5; the snapshot's frame and each WAL
# block's frame are preceded by their u32 LE compressed length)
_FRAME_START = {"zstd": re.compile(re.escape(b"\x28\xb5\x2f\xfd")),
                "zlib": re.compile(b"\x78[\x01\x5e\x9c\xda]"),
                "lz4": re.compile(re.escape(compression.LZ4_FRAME_MAGIC))}
_BLOCK_HEAD = 6  # a WAL block's entry count (u16) and compressed length (u32)
_FRAME_LIMIT = 64 << 20


def _key(token: bytes) -> str:
    return f"/t/{token.hex()}"


class _HttSession(Session):
    def __init__(self, path: str, rng: random.Random) -> None:
        mode = rng.choice(("per_op", "per_op", "batched", "manual"))
        self.mode = mode
        self.every = rng.randint(1, 4)  # explicit flush every N writes (batched, manual)
        self.store = Store.open(path, durability=mode, batch_size=rng.randint(1, 8))
        self.pending: Acked = []

    def write(self, token: bytes, payload: bytes) -> Acked:
        self.store.put(_key(token), payload)
        if self.mode == "per_op":
            return [(token, len(payload))]
        self.pending.append((token, len(payload)))
        if len(self.pending) >= self.every:
            return self._flush()
        return []

    def _flush(self) -> Acked:
        self.store.flush()
        done, self.pending = self.pending, []
        return done

    def close(self) -> Acked:
        try:
            return self._flush()
        finally:
            self.store.close()  # releases the lock even when the last flush failed

    def abandon(self) -> None:
        self.pending = []
        try:
            self.store.close()
        except Exception:  # noqa: BLE001 - the failure that led here was already judged
            pass


class _HttChecker(Checker):
    def __init__(self, store: Store) -> None:
        self.store = store

    def has(self, token: bytes, payload: bytes) -> bool:
        node = self.store.get(_key(token))
        return node is not None and bytes(node.data) == payload

    def close(self) -> None:
        self.store.close()


class Htt(Format):
    name = "htt"
    filename = "store.htt"
    self_locking = True
    busy = (StoreLocked,)
    slack = 96
    fixed = 8192
    per_op = 160

    def variant(self, rng: random.Random) -> str:
        return "plain" if rng.random() < 0.4 else rng.choice(CODECS)

    def create(self, path: str, variant: str = "plain") -> None:
        Store.create(path, compression=None if variant == "plain" else variant).close()

    def frames(self, data: bytes, variant: str) -> list[Frame]:
        if variant not in CODECS:
            return []
        out: list[Frame] = []
        for m in _FRAME_START[variant].finditer(data):
            at = m.start()
            clen = int.from_bytes(data[max(at - 4, 0):at], "little")
            if at < 4 or not 0 < clen <= len(data) - at:
                continue
            try:
                plain = compression.decompress(variant, data[at:at + clen], _FRAME_LIMIT)
            except BytewrightError:
                continue
            out.append((max(at - _BLOCK_HEAD, 0), at + clen, plain))
        return out

    def session(self, path: str, rng: random.Random) -> Session:
        return _HttSession(path, rng)

    def maintain(self, path: str, rng: random.Random) -> str:
        if rng.random() < 0.3:
            Store.open(path, readonly=True).close()
            return "read"
        with Store.open(path) as store:
            store.compact()
        return "compact"

    def checker(self, path: str, *, writer: bool) -> Checker:
        return _HttChecker(Store.open(path, readonly=not writer, lock_wait=True))
