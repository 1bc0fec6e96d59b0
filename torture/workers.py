"""The loops that run inside a scenario: writers and maintenance.

A writer opens sessions (a few writes each, so maintenance and other writers interleave),
writes unique payloads and records each acknowledged write in its oracle file (marked
strict when a failed fsync lost data of the store's files during the call that
acknowledged it, or earlier on the same session: the store should have stopped). Errors are
judged where they happen: an ``OSError`` the fault layer injected during the call, a project
error (``BytewrightError``) or a "busy" error are expected; any other exception is a
finding, written to the oracle file as an ``X`` line.
"""

from __future__ import annotations

import fcntl
import os
import random
import time
import traceback
from contextlib import contextmanager

from ..runtime.errors import BytewrightError
from .faults import Faults
from .formats.base import Format, Session
from .oracle import Oracle, payload_of

__all__ = ["maintenance_loop", "writer_loop"]

BUSY_WAIT = 2.0  # seconds a writer retries a busy file before giving the write up


@contextmanager
def _harness_lock(path: str | None):
    if path is None:
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


class _Locked:
    """A session together with the harness lock it holds (formats without their own)."""

    def __init__(self, lock_path: str | None) -> None:
        self.fd = -1
        if lock_path is not None:
            self.fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(self.fd, fcntl.LOCK_EX)

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _describe(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else ""
    return f"{type(exc).__name__}: {exc}{where}"


def _judge(exc: BaseException, injected: bool, faulty: bool, fmt: Format) -> str | None:
    """None when ``exc`` is an expected outcome, else the finding's text."""
    if isinstance(exc, OSError) and injected:
        return None
    if isinstance(exc, fmt.busy):
        return None
    if isinstance(exc, BytewrightError):
        # refusals after injected faults are the store protecting itself; without any
        # fault in the scenario a refused write is itself suspicious
        return None if faulty else f"write refused without faults: {_describe(exc)}"
    return f"unexpected exception: {_describe(exc)}"


def _open(fmt: Format, path: str, rng: random.Random, lock_path: str | None
          ) -> tuple[Session, _Locked]:
    deadline = time.monotonic() + BUSY_WAIT
    while True:
        held = _Locked(lock_path)
        try:
            return fmt.session(path, rng), held
        except fmt.busy:
            held.release()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.001)
        except BaseException:
            held.release()
            raise


def writer_loop(fmt: Format, path: str, work: str, name: str, seed: int, ops: int,
                lengths: tuple[int, int], faults: Faults | None, slot: int,
                lock_path: str | None, faulty: bool) -> None:
    rng = random.Random(seed)
    oracle = Oracle(work, name)
    if faults is not None:
        faults.join(slot)
    session: Session | None = None
    held: _Locked | None = None
    left = 0
    tainted = False  # the open session's handle lost data to a failed fsync
    store = {os.path.realpath(p) for p in fmt.files(path)}

    def lost(mark: int) -> bool:
        return faults is not None and any(os.path.realpath(p) in store
                                          for p in faults.dropped()[mark:])

    try:
        for _ in range(ops):
            token = rng.randbytes(16)
            payload = payload_of(token, fmt.fit(rng.randint(*lengths)))
            before = faults.fired() if faults is not None else 0
            mark = len(faults.dropped()) if faults is not None else 0
            acked = []
            try:
                if session is None:
                    session, held = _open(fmt, path, rng, lock_path)
                    left = rng.randint(1, 6)
                acked = session.write(token, payload)
                left -= 1
                if left <= 0:
                    s, session = session, None
                    try:
                        acked += s.close()
                    except Exception:
                        s.abandon()
                        raise
                    finally:
                        held.release()
            except Exception as exc:  # noqa: BLE001 - every outcome is judged
                injected = faults is not None and faults.fired() != before
                verdict = _judge(exc, injected, faulty, fmt)
                if verdict is not None:
                    oracle.finding(verdict)
                if session is not None and (not injected or rng.random() < 0.5):
                    session.abandon()
                    session = None
                if session is None and held is not None:
                    held.release()
            strict = tainted or lost(mark)
            for token_, length in acked:
                oracle.ack(token_, length, strict)
            tainted = session is not None and strict
            if faults is not None:
                met = faults.take()
                if met:
                    oracle.faults(met)
        if session is not None:
            before = faults.fired() if faults is not None else 0
            mark = len(faults.dropped()) if faults is not None else 0
            try:
                for token_, length in session.close():
                    oracle.ack(token_, length, tainted or lost(mark))
            except Exception as exc:  # noqa: BLE001
                session.abandon()
                injected = faults is not None and faults.fired() != before
                verdict = _judge(exc, injected, faulty, fmt)
                if verdict is not None:
                    oracle.finding(verdict)
            if held is not None:
                held.release()
    finally:
        if faults is not None:
            met = faults.take()
            if met:
                oracle.faults(met)
            faults.leave()
        oracle.close()


def maintenance_loop(fmt: Format, path: str, work: str, name: str, seed: int, steps: int,
                     faults: Faults | None, slot: int, lock_path: str | None,
                     faulty: bool) -> None:
    rng = random.Random(seed)
    oracle = Oracle(work, name)
    if faults is not None:
        faults.join(slot)
    try:
        for _ in range(steps):
            before = faults.fired() if faults is not None else 0
            try:
                with _harness_lock(lock_path):
                    fmt.maintain(path, rng)
            except Exception as exc:  # noqa: BLE001 - every outcome is judged
                injected = faults is not None and faults.fired() != before
                if isinstance(exc, BytewrightError) or isinstance(exc, fmt.busy) or (
                        isinstance(exc, OSError) and injected):
                    pass  # a refusal (damage from an earlier fault, a busy file) is fine
                else:
                    oracle.finding(f"maintenance: unexpected exception: {_describe(exc)}")
            if faults is not None:
                met = faults.take()
                if met:
                    oracle.faults(met)
            time.sleep(rng.random() * 0.002)
    finally:
        if faults is not None:
            faults.leave()
        oracle.close()
