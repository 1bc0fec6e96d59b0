"""Both codec paths strict and in agreement.

Every golden fixture, and seeded corrupted copies of every fixture (truncations, bit
flips, byte overwrites), go through the fast path and the Construct path (interpreted and
compiled). For each input both must give the same value, or both must raise the project's
own error type: no silent stop on a partial or corrupt last item, no rule checked on one
path only, no NaN payload changed. Bounded: a fixed number of mutations per fixture and a
time budget per fixture.
"""

from __future__ import annotations

import importlib
import random
import time

import pytest

from bytewright.review import checks
from bytewright.runtime.errors import BytewrightError, DecodeError

FIXTURES = checks.fixtures()
MUTATIONS = 150  # per fixture (plus the golden bytes themselves)
BUDGET = 3.0  # seconds per fixture, so the test stays bounded on big fixtures


def _module(family: str):
    return importlib.import_module(f"bytewright.generated.{family}")


def mutations(data: bytes, seed: int) -> list[tuple[str, bytes]]:
    """Seeded corruptions: cuts (incl. the last byte), bit flips, overwritten bytes."""
    rng = random.Random(seed)
    out: list[tuple[str, bytes]] = []
    n = len(data)
    if n == 0:
        return out
    cuts = {n - 1, n // 2, 1} | {rng.randrange(n) for _ in range(MUTATIONS // 4)}
    for cut in sorted(c for c in cuts if 0 <= c < n):
        out.append((f"truncated to {cut}", data[:cut]))
    while len(out) < MUTATIONS:
        buf = bytearray(data)
        i = rng.randrange(n)
        if rng.random() < 0.6:
            bit = rng.randrange(8)
            buf[i] ^= 1 << bit
            out.append((f"bit {bit} of byte {i} flipped", bytes(buf)))
        else:
            value = rng.choice((0, 0xFF, rng.randrange(256)))
            buf[i] = value
            out.append((f"byte {i} set to {value:#x}", bytes(buf)))
    return out


def outcome(fn, data: bytes, params: dict):
    """('ok', value) or ('error', exception); anything but the project's error fails."""
    try:
        value = fn(data, **params)
    except DecodeError as exc:
        return "error", exc
    except BytewrightError as exc:  # pragma: no cover - an encode error on decode
        pytest.fail(f"non-decode project error {type(exc).__name__}: {exc}")
    if isinstance(value, tuple):
        value = value[0]
    return "ok", value


def same(mod, record: str, params: dict, a, b) -> bool:
    """Equal values; NaN floats compare by their encoded bytes."""
    if a == b:
        return True
    try:
        enc = mod.ENCODERS[record]
        return enc(a, **params) == enc(b, **params)
    except BytewrightError:
        return False


def agree(mod, fx, data: bytes, what: str) -> None:
    fast = outcome(mod.DECODERS[fx.record], data, fx.params)
    interp = outcome(mod.CONSTRUCT_DECODERS[fx.record], data, fx.params)
    compiled = outcome(lambda d, **p: mod.CONSTRUCT_DECODERS[fx.record](d, compiled=True, **p),
                       data, fx.params)
    for name, other in (("construct", interp), ("compiled", compiled)):
        assert fast[0] == other[0], (
            f"{fx.path.name} ({what}): fast path {fast[0]} ({fast[1]!s:.200}) but "
            f"{name} path {other[0]} ({other[1]!s:.200})")
        if fast[0] == "ok":
            assert same(mod, fx.record, fx.params, fast[1], other[1]), (
                f"{fx.path.name} ({what}): values differ between fast and {name} paths")


@pytest.mark.parametrize("fx", FIXTURES, ids=[f"{f.family}/{f.path.stem}" for f in FIXTURES])
def test_fixture_and_corrupted_copies_agree(fx):
    mod = _module(fx.family)
    agree(mod, fx, fx.data, "golden")
    started = time.monotonic()
    for what, data in mutations(fx.data, seed=len(fx.data) * 7919 + len(fx.path.stem)):
        if time.monotonic() - started > BUDGET:
            break
        agree(mod, fx, data, what)


def test_corrupted_last_wal_entry_fails_on_both_paths():
    """The issue's reproduction: wal_all_ops_v2 with its last entry's CRC flipped."""
    fx = next(f for f in FIXTURES if f.path.stem == "wal_all_ops_v2")
    mod = _module(fx.family)
    bad = fx.data[:-1] + bytes([fx.data[-1] ^ 0x01])
    with pytest.raises(DecodeError):
        mod.DECODERS[fx.record](bad, **fx.params)
    with pytest.raises(DecodeError):
        mod.CONSTRUCT_DECODERS[fx.record](bad, **fx.params)
    with pytest.raises(DecodeError):
        mod.CONSTRUCT_DECODERS[fx.record](bad, compiled=True, **fx.params)
