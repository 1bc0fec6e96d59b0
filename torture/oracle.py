"""The oracle: which writes were acknowledged, written by the writers themselves.

A write counts as acknowledged only once the API call that makes it durable returned
normally. The writer then appends one line to its own oracle file and fsyncs it, through
the unfaulted calls (:data:`faults.REAL`). A SIGKILL between the acknowledgement and the
line only leaves the oracle conservative (a write the store has and the oracle does not
claim); the opposite order would make the oracle claim writes that were never
acknowledged.

Payloads are derived from a 16-byte token and a length, so a line only needs those two;
the checker regenerates the bytes and looks for them in the store, in the file and in the
side files.

Line kinds: ``A TOKEN LEN`` (acknowledged write; ``A TOKEN LEN D`` when it was
acknowledged on a handle after one of its fsyncs failed and lost data, or by a call during
which that happened: such a write must be readable, no side file excuses it), ``X TEXT`` (a finding the writer saw,
such as an exception of an unexpected type), ``F KIND N`` (faults the writer met, written
after the operation that met them, so a killed writer's faults are counted too).
"""

from __future__ import annotations

import glob
import hashlib
import os
from collections import Counter
from dataclasses import dataclass, field

from .faults import REAL

__all__ = ["Ack", "Oracle", "OracleLog", "payload_of", "read_oracles"]


def payload_of(token: bytes, length: int) -> bytes:
    """The payload of a write: the token, then bytes derived from it, ``length`` in all."""
    out = bytearray(token)
    block = hashlib.blake2b(token, digest_size=64).digest()
    while len(out) < length:
        out += block
        block = hashlib.blake2b(block, digest_size=64).digest()
    return bytes(out[:max(length, len(token))])


@dataclass(frozen=True)
class Ack:
    token: bytes
    length: int
    strict: bool = False  # acknowledged after its handle's failed fsync lost data

    @property
    def payload(self) -> bytes:
        return payload_of(self.token, self.length)


class Oracle:
    """One writer thread's oracle file (append-only, fsynced per line)."""

    def __init__(self, directory: str, name: str) -> None:
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, f"{name}.oracle")
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def _line(self, text: str) -> None:
        data = (text.replace("\n", " ") + "\n").encode("utf-8", "replace")
        REAL.write(self.fd, data)
        REAL.fsync(self.fd)

    def ack(self, token: bytes, length: int, strict: bool = False) -> None:
        self._line(f"A {token.hex()} {length}" + (" D" if strict else ""))

    def finding(self, text: str) -> None:
        self._line(f"X {text}")

    def faults(self, counts: Counter) -> None:
        for kind, n in counts.items():
            self._line(f"F {kind} {n}")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


@dataclass
class OracleLog:
    """Every oracle file of a scenario, merged."""

    acks: list[Ack] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    faults: Counter = field(default_factory=Counter)

    @property
    def acked_bytes(self) -> int:
        return sum(a.length for a in self.acks)


def read_oracles(directory: str) -> OracleLog:
    log = OracleLog()
    for path in sorted(glob.glob(os.path.join(directory, "*.oracle"))):
        with open(path, "rb") as fh:
            for raw in fh.read().decode("utf-8", "replace").splitlines():
                kind, _, rest = raw.partition(" ")
                if kind == "A":
                    tok, _, n = rest.partition(" ")
                    n, _, flag = n.partition(" ")
                    try:
                        log.acks.append(Ack(bytes.fromhex(tok), int(n), flag == "D"))
                    except ValueError:
                        continue  # a line the kill tore: never acknowledged in full
                elif kind == "X":
                    log.findings.append(rest)
                elif kind == "F":
                    name, _, n = rest.partition(" ")
                    if n.isdigit():
                        log.faults[name] += int(n)
    return log
