"""GACL (§7.2): cooperative, session-scoped access filtering on bands in dims 0-11.

Each access concept occupies a (lo, hi) pair of semantic dims. A session's credential
holds one position per concept; access is granted when the position lies in the band.
Reads check the read band, writes the write band; both also check the cross-cutting
domain, classification and identity bands. Decisions taken here where the spec is
silent: a concept whose band is (0, 0) is unconstrained, and a node with no bands at
all (dims 0-11 zero, or no placement) is unrestricted. GACL is not a security
boundary: raw file access sees everything.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..fixedpoint import q64_from_float, q64_to_float

CONCEPTS = ("read", "write", "exec", "domain", "classification", "identity")
BAND_DIMS = 12
_CROSS = ("domain", "classification", "identity")


def concept_dims(concept: str) -> tuple[int, int]:
    i = CONCEPTS.index(concept)
    return 2 * i, 2 * i + 1


class Credentials:
    """A requester's position per access concept (missing concepts: 0.0 = public)."""

    def __init__(self, positions: Mapping[str, float] | None = None, **kw: float) -> None:
        merged = dict(positions or {}, **kw)
        unknown = set(merged) - set(CONCEPTS)
        if unknown:
            raise ValueError(f"unknown GACL concepts {sorted(unknown)}; use {CONCEPTS}")
        self.raw = {c: q64_from_float(float(merged.get(c, 0.0))) for c in CONCEPTS}

    @classmethod
    def of_groups(cls, *groups: Mapping[str, float] | Credentials) -> Credentials:
        """The credential of a member of several groups: per concept, the MAX (most
        permissive) position across them (§7.2 Multi-Group Membership)."""
        out = cls()
        for group in groups:
            raw = group.raw if isinstance(group, Credentials) else cls(group).raw
            for concept, value in raw.items():
                out.raw[concept] = max(out.raw[concept], value)
        return out

    def __repr__(self) -> str:
        return "Credentials(" + ", ".join(
            f"{c}={q64_to_float(v):g}" for c, v in self.raw.items()) + ")"


def _in_band(tail: list[int], concept: str, position: int) -> bool:
    lo_d, hi_d = concept_dims(concept)
    lo, hi = tail[lo_d], tail[hi_d]
    if lo == 0 and hi == 0:
        return True
    return lo <= position <= hi


def allowed(tail: list[int] | None, creds: Credentials, action: str) -> bool:
    """Does ``creds`` grant ``action`` ('read' | 'write' | 'exec') on a node?"""
    if tail is None or len(tail) < BAND_DIMS or not any(tail[:BAND_DIMS]):
        return True
    if not _in_band(tail, action, creds.raw[action]):
        return False
    return all(_in_band(tail, c, creds.raw[c]) for c in _CROSS)


def narrow(child: list[int] | None, parent: list[int] | None) -> list[int] | None:
    """The child's effective bands given its parent's (§7.2 Inheritance Rules: lo = max,
    hi = min per concept, so a child can only narrow). Not applied automatically, as
    upstream; call it at write time for hierarchical restriction. Raw Q64.64 tails in,
    raw tail out (dims from 12 on are the child's own). A concept left unconstrained
    (0, 0) on one side takes the other side's band; an empty intersection stays as
    lo > hi, a band no position falls in (nobody is granted that concept)."""
    if parent is None or not any(parent[:BAND_DIMS]):
        return None if child is None else list(child)
    if child is None:
        child = [0] * len(parent)
    out = list(child)
    for concept in CONCEPTS:
        lo_d, hi_d = concept_dims(concept)
        p_lo, p_hi = parent[lo_d], parent[hi_d]
        c_lo, c_hi = child[lo_d], child[hi_d]
        if p_lo == 0 and p_hi == 0:
            continue
        if c_lo == 0 and c_hi == 0:
            out[lo_d], out[hi_d] = p_lo, p_hi
            continue
        out[lo_d], out[hi_d] = max(c_lo, p_lo), min(c_hi, p_hi)
    return out


def bands_vector(semantic_dims: int, user: list[float] | None = None,
                 **bands: tuple[float, float]) -> list[float]:
    """A full-width float vector with the given bands (``read=(lo, hi)``, ...) in dims
    0-11 and ``user`` values from dim 16 on, ready for ``put(semantic=...)``."""
    vec = [0.0] * semantic_dims
    for concept, (lo, hi) in bands.items():
        lo_d, hi_d = concept_dims(concept)
        vec[lo_d], vec[hi_d] = float(lo), float(hi)
    for i, v in enumerate(user or []):
        vec[16 + i] = float(v)
    return vec
