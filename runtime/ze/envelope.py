"""Family-19 envelope validation (ZE-38 framing; used for WAL op 10 and graph WAL files).

The frame layouts and checksums are generated (``zgw_frame``, ``graph_envelope``); this
checks the envelope rules a layout cannot state: indices, one batch and sequence for every
frame, change kinds per envelope kind, the Commit digest and the size limits.
"""

from __future__ import annotations

from ...generated import ze
from ..checksums import xxh3_64
from ..errors import ConstraintError

LIMIT = 16 * 1024 * 1024
MAX_MUTATIONS = 16384
K = ze.ZgwFrameKind


def validate(payload, *, expected_sequence: int | None = None) -> ze.GraphEnvelope:
    """Decode and validate one complete envelope occupying exactly ``payload``."""
    mv = payload if isinstance(payload, memoryview) else memoryview(payload)
    if len(mv) > LIMIT:
        raise ConstraintError("envelope exceeds 16 MiB", path="envelope", expected=LIMIT,
                              found=len(mv))
    env, end = ze.decode_graph_envelope(mv)
    if end != len(mv):
        raise ConstraintError("trailing bytes after the envelope", offset=end, path="envelope")
    frames = [env.begin, *env.changes, env.commit]
    begin = env.begin.payload
    if env.begin.kind != K.begin or env.commit.kind != K.commit:
        raise ConstraintError("envelope must start with Begin and end with Commit",
                              path="envelope")
    seq, batch = env.begin.sequence, env.begin.batch_id
    if expected_sequence is not None and seq != expected_sequence:
        raise ConstraintError("envelope sequence must advance by exactly 1", path="begin.sequence",
                              expected=expected_sequence, found=seq)
    for i, fr in enumerate(frames):
        if fr.frame_index != i or fr.sequence != seq or fr.batch_id != batch:
            raise ConstraintError("frame index, sequence and batch must match the envelope",
                                  path=f"frames[{i}]", expected=(i, seq, batch),
                                  found=(fr.frame_index, fr.sequence, fr.batch_id))
    if begin.complete_envelope_bytes != len(mv):
        raise ConstraintError("Begin complete_envelope_bytes must equal the envelope size",
                              path="begin.complete_envelope_bytes", expected=len(mv),
                              found=begin.complete_envelope_bytes)
    if begin.change_count * 72 > len(mv):
        raise ConstraintError("change_count x 72 exceeds the envelope", path="begin.change_count")
    allowed = {K.mutation, K.inventory} if begin.envelope_kind == ze.EnvelopeKind.mutation else \
        {K.inventory, K.reclaim_intent, K.reclaim_complete}
    for i, fr in enumerate(env.changes):
        if fr.kind not in allowed:
            raise ConstraintError("change kind not admitted by this envelope kind",
                                  path=f"changes[{i}].kind", found=int(fr.kind))
    if sum(fr.kind == K.mutation for fr in env.changes) > MAX_MUTATIONS:
        raise ConstraintError("more than 16384 mutation changes", path="changes")
    commit = env.commit.payload
    if commit.change_count != begin.change_count:
        raise ConstraintError("Commit change_count must equal Begin's", path="commit.change_count",
                              expected=begin.change_count, found=commit.change_count)
    commit_at = len(mv) - (72 + env.commit.payload_len)
    digest = xxh3_64(mv[:commit_at])
    if commit.digest != digest:
        raise ConstraintError("Commit digest does not cover Begin + changes", path="commit.digest",
                              expected=digest, found=commit.digest)
    st = commit.state
    if st.store != begin.store or st.generation != begin.target_generation or st.sequence != seq:
        raise ConstraintError("CommitState must name the store, target generation and sequence",
                              path="commit.state")
    return env
