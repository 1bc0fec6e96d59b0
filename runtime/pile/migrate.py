"""Explicit pile migrations (spec "Compatibility surface"): ``monotone-wants`` and
``record-kind-descriptions`` (the latter lives in ``descriptions.py``).

``monotone_wants`` "scans the retired log, resolves its final active set once, and appends
only missing current positives. The operation is additive and idempotent." The retired log
is every retired WANT frame in file order: blob assert/retract in the current frame, the
36-byte envelope and the unenveloped V3 weak pin/unpin, and the typed assert/retract pair.
Each resolves last-writer-wins per exact historical key; a typed tag-3 derive keeps
``(source, target, input)`` as its identity and projects to current ``Derive(target,
input)``. It is never run implicitly: promoting retired history makes it live demand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...generated import pile as g

# The store calls in here with itself; typed loosely so this module need not import it.
Pile = Any  # runtime.pile.store.Pile

# Assertions among the retired WANT kinds (32-byte current kinds, 16-byte ids/markers).
_ASSERT = {
    bytes.fromhex("EC1C024C04AF08243DB3AE318C93FA500355C74395C0F553CFFC0AF0A4BA0346"),
    bytes.fromhex("65EE9E4279FFE01D263E75A8E2DF6289B6DE403CB4468098A0EAB925F81C28ED"),
    bytes.fromhex("8F3EEFEDECD491F63F6EAAA5FD6F3D5E"),
    bytes.fromhex("9A06797600FA90B8A8259B0ED029EC21"),
}
RETIRED_BLOB_WANTS = {"retired_blob_want_body", "env_blob_want_body", "v3_blob_want"}
RETIRED_TYPED_WANTS = {"retired_typed_want_body", "env_typed_want_body"}


def retired_want(name: str, kind: bytes, value) -> tuple[bool, bytes] | None:
    """``(asserts, historical key)`` of a retired WANT record, else None. The key is
    ``tag || A || B || C`` as the record stored it."""
    if name in RETIRED_BLOB_WANTS:
        return kind in _ASSERT, bytes([1]) + value.blob + bytes(64)
    if name in RETIRED_TYPED_WANTS:
        return kind in _ASSERT, bytes([value.tag]) + value.a + value.b + value.c
    return None


def project(key: bytes) -> g.WantRequest | None:
    """The current request a resolved historical key becomes (None: nothing current)."""
    tag, a, b, c = key[0], key[1:33], key[33:65], key[65:97]
    if tag == 1:
        return g.WantRequest(1, g.WantBlob(a))
    if tag == 2:
        low, high = sorted((b, c))  # operand order cannot create a second request key
        return g.WantRequest(2, g.WantMerge(a, low, high))
    if tag == 3:
        return g.WantRequest(4, g.WantDerive(b, c))  # (source, target, input) -> (target, input)
    if tag == 4:
        return g.WantRequest(4, g.WantDerive(a, b))
    return None


@dataclass
class WantCensus:
    retired_frames: int = 0
    active: int = 0          # distinct current requests in the resolved projection
    already_current: int = 0
    appended: int = 0


def resolve_retired_wants(log: list[tuple[int, bool, bytes]]) -> list[g.WantRequest]:
    """The final active set of a retired log (file order), projected, each once."""
    state: dict[bytes, bool] = {}
    for _, asserts, key in log:
        state[key] = asserts
    out: dict[bytes, g.WantRequest] = {}
    for key, active in state.items():
        req = project(key) if active else None
        if req is not None:
            out.setdefault(g.encode_want_request(req), req)
    return list(out.values())


def monotone_wants(pile: Pile, *, dry_run: bool = False) -> WantCensus:
    """``trible pile migrate <PILE> run monotone-wants``."""
    with pile._lock:
        pile.refresh()
        log = list(pile.retired_wants)
        current = set(pile._wants)
    census = WantCensus(retired_frames=len(log))
    for req in resolve_retired_wants(log):
        census.active += 1
        if g.encode_want_request(req) in current:
            census.already_current += 1
            continue
        if not dry_run:
            pile.want(req)
        census.appended += 1
    return census
