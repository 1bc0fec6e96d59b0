"""After a run: open the store every way and hold it to the oracle.

The rules (docs/torture.md):

* the writer open and the read-only open succeed; a refusal (a ``BytewrightError``) is
  accepted only when damage was injected between runs, and must name an offset (a format
  whose reader refuses a crash's torn tail by design, Pile, may refuse the read-only open
  after a run with kills or faults; its repair, the writer open, must then succeed);
* every acknowledged write is readable through the read-only open and through the writer
  open, except that, when damage was injected, a write is excused if the damage touched its
  bytes (its payload widened by the format's framing slack) or, for the read-only open, if
  its bytes are still in the file (a reader stops at damage and cuts nothing); a read
  that refuses with a project error naming an offset reports the damage and is accepted;
* a write the writer open no longer shows must have its bytes in a side file
  (``runtime.cut.side_files``), unless the damage excuses it;
* after the writer open, a fresh read-only open shows every write the writer open showed;
* a compressed store's payloads are searched in its decoded frames too (``Format.frames``;
  side files are decoded the same way); damage that touches a frame excuses the writes
  in it;
* data a failed fsync lost (fsync drops) is damage to the opens but excuses no write; a
  strict write (acknowledged after its handle lost data) must be readable through the
  writer open, a side file does not excuse it;
* in a second round, the side files the first left excuse nothing;
* any exception that is not a ``BytewrightError`` is a finding;
* the store's files stay within the format's growth bound, and each side file is no
  larger than the largest size the file could have had (that bound).
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

from ..runtime.cut import side_files
from ..runtime.errors import BytewrightError
from .damage import Damage
from .formats.base import Format, Frame
from .oracle import Ack

__all__ = ["Checked", "check_store"]

Decode = Callable[[bytes], list[Frame]]


@dataclass
class Checked:
    """What one check found, and what a next round starts from: the acknowledged writes
    the writer open showed (they must survive whatever comes next), whether the writer
    open repaired the store, whether any open or read refused (damage is left in the
    file), and the side files present afterwards."""

    findings: list[str] = field(default_factory=list)
    survivors: list[Ack] = field(default_factory=list)
    repaired: bool = False
    refused: bool = False
    sides: frozenset[str] = frozenset()


CHUNK = 32  # payloads are searched piecewise: a store may split one across pages


def _chunks(payload: bytes) -> list[bytes]:
    return [payload[i:i + CHUNK] for i in range(0, len(payload), CHUNK)]


def _occurrences(data: bytes, needle: bytes) -> list[int]:
    out, at = [], data.find(needle)
    while at >= 0:
        out.append(at)
        at = data.find(needle, at + 1)
    return out


class _Text:
    """Where a payload may stand: a file's bytes, and the decoded contents of the
    compressed frames in it, each with the file range that holds it (a frame is one
    unit: damage anywhere in it may lose every payload it holds)."""

    def __init__(self, data: bytes, frames: list[Frame] = ()) -> None:
        self.data = data
        self.frames = list(frames)

    def __contains__(self, piece: bytes) -> bool:
        return piece in self.data or any(piece in plain for _, _, plain in self.frames)

    def spans(self, piece: bytes) -> list[tuple[int, int]]:
        out = [(o, o + len(piece)) for o in _occurrences(self.data, piece)]
        return out + [(a, b) for a, b, plain in self.frames if piece in plain]


class _Placed:
    """Where a payload's pieces stood in the file before the damage."""

    def __init__(self, payload: bytes, before: _Text) -> None:
        self.pieces = [c for c in _chunks(payload) if c in before]
        self.spans = [span for c in self.pieces for span in before.spans(c)]

    def touched(self, damage: list[Damage], slack: int) -> bool:
        return any(d.touches(a, b, slack) for a, b in self.spans for d in damage)

    def within(self, text: _Text) -> bool:
        """Every piece that was in the file is in ``text`` (a piece a page boundary split
        is in neither)."""
        return bool(self.pieces) and all(c in text for c in self.pieces)


def _describe(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else ""
    return f"{type(exc).__name__}: {exc}{where}"


def _names_offset(exc: BaseException) -> bool:
    return getattr(exc, "offset", None) is not None or "offset" in str(exc)


def _side_text(path: str, decode: Decode, ignore: frozenset[str] = frozenset()
               ) -> tuple[_Text, list[int]]:
    """The side files of ``path`` not in ``ignore`` (each decoded on its own), and the
    sizes of all of them."""
    chunks: list[bytes] = []
    frames: list[Frame] = []
    sizes = []
    for side in side_files(path):
        with open(side, "rb") as fh:
            data = fh.read()
        sizes.append(len(data))
        if side not in ignore:
            chunks.append(data)
            frames += decode(data)
    return _Text(b"\x00".join(chunks), frames), sizes


def _open(fmt: Format, path: str, writer: bool, damaged: bool, label: str,
          findings: list[str], tolerated: bool = False):
    """The checker, or None when the open refused (judged here). ``tolerated``: a
    refusal of an undamaged file is the format's documented answer to a torn tail."""
    try:
        return fmt.checker(path, writer=writer)
    except BytewrightError as exc:
        if not damaged and not tolerated:
            findings.append(f"{label} refused an undamaged file: {_describe(exc)}")
        elif not _names_offset(exc):
            findings.append(f"{label} refused without naming an offset: {_describe(exc)}")
        return None
    except Exception as exc:  # noqa: BLE001 - anything else is a finding
        findings.append(f"{label}: unexpected exception: {_describe(exc)}")
        return None


def _has(checker, ack: Ack, payload: bytes, label: str, damaged: bool,
         findings: list[str]):
    """True/False; after injected damage, the project error a refused read raised (the
    caller judges it); None after an exception that is already a finding."""
    try:
        return checker.has(ack.token, payload)
    except BytewrightError as exc:
        if damaged:
            return exc
        findings.append(f"{label} read refused an undamaged file: {_describe(exc)}")
        return None
    except Exception as exc:  # noqa: BLE001
        findings.append(f"{label} read: unexpected exception: {_describe(exc)}")
        return None


def _refusal(got, excused: bool, label: str, ack: Ack, findings: list[str]) -> bool:
    """Whether ``got`` is a refused read; one that is not excused must name an offset."""
    if not isinstance(got, BaseException):
        return False
    if not excused and not _names_offset(got):
        findings.append(f"{label} read of token {ack.token.hex()} refused without naming "
                        f"an offset: {_describe(got)}")
    return True


def check_store(fmt: Format, path: str, acks: list[Ack], before: bytes,
                damage: list[Damage], *, ops: int, payload_bytes: int,
                max_size: int, disturbed: bool = False, variant: str = "plain",
                dropped: int = 0, ignore_sides: frozenset[str] = frozenset()) -> Checked:
    """Judge one run. ``before`` is the file as the writers left it (before the
    damage); ``ops``/``payload_bytes`` are what the writers attempted (the growth bound).
    ``variant`` is how the store was created (its frames are decoded). ``dropped``: how
    many failed fsyncs lost data during the run; the file then holds what it held at an
    earlier fsync, which is damage to the opens but excuses no acknowledged write (its
    bytes were fsynced before the failure, or it was acknowledged after it on the same
    handle, ``Ack.strict``, and must be readable unless the harness damaged the file
    too). ``ignore_sides``: side files an earlier
    round left; they excuse nothing lost in this one."""
    out = Checked()
    findings = out.findings
    damaged = bool(damage) or dropped > 0

    def decode(data: bytes) -> list[Frame]:
        return fmt.frames(data, variant)

    bound = fmt.growth_bound(ops, payload_bytes)
    grown = sum(os.path.getsize(p) for p in fmt.files(path) if os.path.exists(p))
    if len(before) > bound or grown > bound + len(before):
        findings.append(f"unbounded growth: {len(before)} bytes after {ops} writes of "
                        f"{payload_bytes} payload bytes (bound {bound})")
    payloads = [a.payload for a in acks]
    # harness damage may refuse the writer open or cut anything after it: with damage, a
    # strict write is judged as any other
    strict = [a.strict and not damage for a in acks]
    placed_in = _Text(before, decode(before))
    placed = [_Placed(p, placed_in) for p in payloads]
    excused = [bool(damage) and pl.touched(damage, fmt.slack) for pl in placed]
    with open(path, "rb") as fh:
        now = fh.read()
    now_text = _Text(now, decode(now)) if damaged else placed_in

    # 1. read-only open: nothing cut, so a write it cannot show must still be in the file
    ro = _open(fmt, path, False, damaged, "read-only open", findings,
               tolerated=disturbed and fmt.reader_refuses_torn_tail)
    out.refused |= ro is None
    if ro is not None:
        try:
            for i, (ack, p) in enumerate(zip(acks, payloads, strict=True)):
                got = _has(ro, ack, p, "read-only", damaged, findings)
                if _refusal(got, excused[i], "read-only", ack, findings):
                    out.refused = True
                    continue
                if got is False and not excused[i] and not (
                        damaged and placed[i].within(now_text)):
                    findings.append(f"lost acknowledged write (read-only open): token "
                                    f"{ack.token.hex()} ({ack.length} bytes)")
        finally:
            ro.close()

    # 2. writer open (repairs): a write it cannot show must be in a side file
    wr = _open(fmt, path, True, damaged, "writer open", findings)
    shown = [False] * len(acks)
    if wr is None:
        out.refused = True
        for i, ack in enumerate(acks):
            if strict[i]:
                findings.append(f"write acknowledged after its handle's fsync failed and "
                                f"lost data is unreadable (the writer open refused): token "
                                f"{ack.token.hex()}")
    else:
        out.repaired = True
        try:
            sides, _ = _side_text(path, decode, ignore_sides)
            for i, (ack, p) in enumerate(zip(acks, payloads, strict=True)):
                got = _has(wr, ack, p, "writer", damaged, findings)
                shown[i] = got is True
                if strict[i] and not shown[i]:
                    findings.append(f"lost a write acknowledged after its handle's fsync "
                                    f"failed and lost data (the store kept accepting "
                                    f"writes): token {ack.token.hex()} ({ack.length} bytes)")
                    continue
                if _refusal(got, excused[i], "writer", ack, findings):
                    out.refused = True
                    continue
                if got is False and not excused[i] and not placed[i].within(sides):
                    findings.append(f"lost acknowledged write (writer open): token "
                                    f"{ack.token.hex()} ({ack.length} bytes), not in any "
                                    f"side file")
        finally:
            wr.close()

        # 3. what the writer open showed survives its repair
        again = _open(fmt, path, False, damaged, "read-only reopen", findings)
        out.refused |= again is None
        if again is not None:
            try:
                for ack, p, was in zip(acks, payloads, shown, strict=True):
                    if was and _has(again, ack, p, "reopen", damaged, findings) is False:
                        findings.append(f"lost after the writer open: token "
                                        f"{ack.token.hex()} ({ack.length} bytes)")
            finally:
                again.close()
    out.survivors = [a for a, was in zip(acks, shown, strict=True) if was]

    sizes = []
    for side in side_files(path):
        sizes.append(os.path.getsize(side))
    out.sides = frozenset(side_files(path))
    # a side file can come from any size the file had during the run, up to the bound
    limit = max(max_size, len(before), len(now), bound)
    for size in sizes:
        if size > limit:
            findings.append(f"side file of {size} bytes exceeds the largest size the file "
                            f"could have had ({limit})")
    return out
