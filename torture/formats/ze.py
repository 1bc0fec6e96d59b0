"""ZE WAL (family 11): ``runtime.ze.files.WalAppender`` and ``runtime.ze.wal.replay``.

The appender has no writer lock of its own, so the harness serialises appender sessions
and repairs (the appender's open) with a lock file; ``replay`` readers run alongside.
"""

from __future__ import annotations

import random

from ...generated import ze
from ...runtime.ze import files, wal
from .base import Acked, Checker, Format, Session

OP_DELETE = 2
_HEADER = ze.PayloadV1Header()


def _payload_bytes(payload: bytes) -> bytes:
    ids = [int.from_bytes(payload[i:i + 16], "little") for i in range(0, len(payload), 16)]
    return wal.encode_payload(OP_DELETE, ze.OpDeleteV1(_HEADER, ids))


class _ZeSession(Session):
    def __init__(self, path: str) -> None:
        self.app = files.WalAppender(path)

    def write(self, token: bytes, payload: bytes) -> Acked:
        self.app.append(OP_DELETE, _payload_bytes(payload))  # written and fsynced
        return [(token, len(payload))]

    def close(self) -> Acked:
        self.app.close()
        return []


class _ZeChecker(Checker):
    def __init__(self, path: str) -> None:
        with open(path, "rb") as fh:
            data = fh.read()
        r = wal.replay(data)
        if r.terminator == "invalid_header":
            raise r.error
        self.payloads = b"\x00".join(bytes(rec.payload) for rec in r.records)

    def has(self, token: bytes, payload: bytes) -> bool:
        return payload in self.payloads


class ZeWal(Format):
    name = "ze"
    filename = "store.wal"
    self_locking = False
    slack = 48
    fixed = 4096
    per_op = 128

    def fit(self, length: int) -> int:
        return max(16, length - length % 16)  # a DELETE carries 16-byte doc ids

    def create(self, path: str, variant: str = "plain") -> None:
        files.WalAppender(path).close()

    def session(self, path: str, rng: random.Random) -> Session:
        return _ZeSession(path)

    def maintain(self, path: str, rng: random.Random) -> str:
        if rng.random() < 0.4:
            _ZeChecker(path)
            return "replay"
        files.WalAppender(path).close()  # the repair (`bytewright ze repair`): reopen
        return "repair"

    def checker(self, path: str, *, writer: bool) -> Checker:
        if writer:
            files.WalAppender(path).close()
        return _ZeChecker(path)
