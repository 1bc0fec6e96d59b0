"""What the harness needs from a format: create, write sessions, maintenance, checking."""

from __future__ import annotations

import random
from collections.abc import Iterable

Acked = list[tuple[bytes, int]]  # (token, payload length) of writes now durable
# a compressed frame found in a file: (first byte, end, decompressed bytes)
Frame = tuple[int, int, bytes]


class Session:
    """One writer session. ``write`` returns the writes its return made durable (for a
    batched mode, none until a flush); ``close`` returns what closing made durable."""

    def write(self, token: bytes, payload: bytes) -> Acked:
        raise NotImplementedError

    def close(self) -> Acked:
        raise NotImplementedError

    def abandon(self) -> None:
        """Drop the session after a failure without claiming anything was made durable."""
        try:
            self.close()
        except Exception:  # noqa: BLE001 - the failure that led here was already judged
            pass


class Checker:
    """The state one open exposes: which acknowledged payloads it can read back."""

    def has(self, token: bytes, payload: bytes) -> bool:
        raise NotImplementedError

    def close(self) -> None:
        pass


class Format:
    """A format adapter. ``self_locking``: the format serialises its own writers (else the
    harness holds a lock file around each writer session: concurrent unlocked writers are
    outside the format's contract). ``busy``: exceptions meaning "another writer holds
    the file; retry". ``slack``: bytes of framing around a payload that damage may hit
    and lose the record (key, header, checksum). Growth bound: a file may hold at most
    ``fixed + ops * per_op + 8 * payload_bytes`` bytes."""

    name = ""
    filename = ""
    self_locking = False
    busy: tuple[type[BaseException], ...] = ()
    slack = 128
    fixed = 4096
    per_op = 512
    protect = 0  # leading bytes damage leaves alone (none: headers are fair game)
    # the read-only open refuses a crash's torn tail by design (the repair is explicit)
    reader_refuses_torn_tail = False

    def fit(self, length: int) -> int:
        """A payload length the format can carry as one write."""
        return max(16, length)

    def variant(self, rng: random.Random) -> str:
        """How this scenario creates the store (a format with options draws one)."""
        return "plain"

    def create(self, path: str, variant: str = "plain") -> None:
        raise NotImplementedError

    def frames(self, data: bytes, variant: str) -> list[Frame]:
        """The compressed frames in ``data`` (a store's file or a side file), decoded,
        so the checker can find payloads a compressed store does not hold verbatim.
        Frames are found wherever they stand, so a side file holding cut blocks is
        decoded too; a frame that does not decompress (damaged) is not returned."""
        return []

    def session(self, path: str, rng: random.Random) -> Session:
        raise NotImplementedError

    def maintain(self, path: str, rng: random.Random) -> str:
        """One maintenance step alongside the writers; returns its name."""
        raise NotImplementedError

    def checker(self, path: str, *, writer: bool) -> Checker:
        """Open the file for checking: read-only, or through the writer's open (which may
        repair). A refusal raises the format's project error."""
        raise NotImplementedError

    def growth_bound(self, ops: int, payload_bytes: int) -> int:
        return self.fixed + ops * self.per_op + 8 * payload_bytes

    def files(self, path: str) -> Iterable[str]:
        """The files of the store besides side files (for the growth check)."""
        return [path]
