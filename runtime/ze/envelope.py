"""Family-19 envelope validation (ZE-38 framing; used for WAL op 10 and graph WAL files).

The frame layouts and checksums are generated (``zgw_frame``, ``graph_envelope``); this
checks the envelope rules a layout cannot state: indices, one batch and sequence for every
frame, change kinds per envelope kind, the Commit digest and the size limits.
"""

from __future__ import annotations

from ...generated import ze
from ..checksums import xxh3_64
from ..errors import ConstraintError
from . import limits, seals

LIMIT = limits.ENVELOPE_BYTES
FRAME_HEADER = ze.LAYOUT["zgw_frame_header"]["layouts"][0]["fixed_size"]  # 64
FRAME_CHECKSUM = 8  # the frame's trailing xxh3-64 (zgw_frame.checksum)
MAX_MUTATIONS = limits.MAX_MUTATIONS
K = ze.ZgwFrameKind


def validate(payload, *, expected_sequence: int | None = None) -> ze.GraphEnvelope:
    """Decode and validate one complete envelope occupying exactly ``payload``."""
    mv = payload if isinstance(payload, memoryview) else memoryview(payload)
    if len(mv) > LIMIT:
        raise ConstraintError("envelope exceeds 16 MiB", path="envelope", expected=LIMIT,
                              found=len(mv))
    seals.zgw_frames(mv)  # every frame's checksums before any field is read
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
    for i, fr in enumerate(env.changes):
        if fr.kind == K.reclaim_intent:
            check_reclaim_intent(fr.payload, path=f"changes[{i}].payload")
        elif fr.kind == K.reclaim_complete:
            check_reclaim_complete(fr.payload, path=f"changes[{i}].payload")
    commit = env.commit.payload
    if commit.change_count != begin.change_count:
        raise ConstraintError("Commit change_count must equal Begin's", path="commit.change_count",
                              expected=begin.change_count, found=commit.change_count)
    commit_at = 0  # the Commit frame starts after Begin and the changes (already validated)
    for _ in range(1 + len(env.changes)):
        head, _ = ze.decode_zgw_frame_header(mv, commit_at)
        commit_at += FRAME_HEADER + head.payload_len + FRAME_CHECKSUM
    digest = xxh3_64(mv[:commit_at])
    if commit.digest != digest:
        raise ConstraintError("Commit digest does not cover Begin + changes", path="commit.digest",
                              expected=digest, found=commit.digest)
    st = commit.state
    if st.store != begin.store or st.generation != begin.target_generation or st.sequence != seq:
        raise ConstraintError("CommitState must name the store, target generation and sequence",
                              path="commit.state")
    return env


def _increasing(rows, path: str) -> None:
    for i in range(1, len(rows)):
        if rows[i].artifact <= rows[i - 1].artifact:
            raise ConstraintError("descriptor rows must have strictly increasing artifact ids",
                                  path=f"{path}[{i}].artifact",
                                  expected=f"> {rows[i - 1].artifact}", found=rows[i].artifact)


def check_reclaim_intent(ri: ze.ZgwReclaimIntent, *, path: str = "reclaim_intent") -> None:
    """Candidate rows: strictly increasing artifact ids, each serial <= the serial fence."""
    _increasing(ri.candidates, path + ".candidates")
    for i, d in enumerate(ri.candidates):
        if d.creation_serial > ri.serial_fence:
            raise ConstraintError("reclaim candidate serial is beyond the serial fence",
                                  path=f"{path}.candidates[{i}].creation_serial",
                                  expected=f"<= {ri.serial_fence}", found=d.creation_serial)


def check_reclaim_complete(rc: ze.ZgwReclaimComplete, *, path: str = "reclaim_complete") -> None:
    """The completed and remaining lists: each strictly increasing, and disjoint."""
    _increasing(rc.completed.rows, path + ".completed.rows")
    _increasing(rc.remaining.rows, path + ".remaining.rows")
    both = {d.artifact for d in rc.completed.rows} & {d.artifact for d in rc.remaining.rows}
    if both:
        raise ConstraintError("completed and remaining descriptor lists must be disjoint",
                              path=path + ".remaining.rows", found=sorted(both))


# -- CommitState rules (facts §4 "Commit transition rules") -----------------------------------

TREE_PAGE, COMMIT_PARTICIPANT = 1, 10
ROOT_NAMES = ("nodes", "relationships", "key_fences", "labels", "relationship_types", "out",
              "in", "inventory")


def state_refs(st: ze.CommitState) -> list[tuple[str, ze.RequiredRef, int]]:
    """Every RequiredRef in a CommitState as (path, ref, required block kind)."""
    out = [(f"roots[{i}:{ROOT_NAMES[i]}]", r.ref, TREE_PAGE)
           for i, r in enumerate(st.roots) if r.ref is not None]
    out.append(("catalog", st.catalog, COMMIT_PARTICIPANT))
    for name in ("vector", "text", "reclaim"):
        opt = getattr(st, name)
        if opt.ref is not None:
            out.append((name, opt.ref, COMMIT_PARTICIPANT))
    out += [(f"prepared[{i}]", r, COMMIT_PARTICIPANT) for i, r in enumerate(st.prepared)]
    return out


def check_state(st: ze.CommitState, *, path: str = "state") -> None:
    """Every ref has the state's store, descriptor generation <= state generation,
    descriptor serial <= creation_serial, the right block kind and block version 1."""
    for name, ref, kind in state_refs(st):
        d, where = ref.descriptor, f"{path}.{name}"
        if d.store != st.store:
            raise ConstraintError("ref store must equal the CommitState store",
                                  path=where + ".descriptor.store", expected=st.store,
                                  found=d.store)
        if d.creation_generation > st.generation:
            raise ConstraintError("ref descriptor generation is beyond the state generation",
                                  path=where + ".descriptor.creation_generation",
                                  expected=f"<= {st.generation}", found=d.creation_generation)
        if d.creation_serial > st.creation_serial:
            raise ConstraintError("ref descriptor serial is beyond the state creation_serial",
                                  path=where + ".descriptor.creation_serial",
                                  expected=f"<= {st.creation_serial}", found=d.creation_serial)
        if ref.block_kind != kind:
            raise ConstraintError("ref has the wrong block kind", path=where + ".block_kind",
                                  expected=kind, found=ref.block_kind)
        if ref.block_version != 1:
            raise ConstraintError("ref block version must be 1", path=where + ".block_version",
                                  expected=1, found=ref.block_version)


def check_transition(prev: ze.CommitState, new: ze.CommitState, *,
                     path: str = "state") -> None:
    """A Commit advances generation and sequence by exactly 1 with the same store, and no
    high-water regresses."""
    if new.store != prev.store:
        raise ConstraintError("CommitState store changed", path=path + ".store",
                              expected=prev.store, found=new.store)
    for name in ("generation", "sequence"):
        want = getattr(prev, name) + 1
        if getattr(new, name) != want:
            raise ConstraintError(f"CommitState {name} must advance by exactly 1",
                                  path=f"{path}.{name}", expected=want, found=getattr(new, name))
    pairs = [("node_high_water", prev.node_high_water, new.node_high_water),
             ("relationship_high_water", prev.relationship_high_water,
              new.relationship_high_water),
             ("creation_serial", prev.creation_serial, new.creation_serial)]
    pairs += [(f"symbol_high_water[{i}]", a, b)
              for i, (a, b) in enumerate(zip(prev.symbol_high_water, new.symbol_high_water,
                                             strict=True))]
    for name, a, b in pairs:
        if b < a:
            raise ConstraintError("CommitState high-water regressed", path=f"{path}.{name}",
                                  expected=f">= {a}", found=b)


# -- writer --------------------------------------------------------------------------------

def build_envelope(*, store: int, batch_id: int, sequence: int, kind, base_generation: int,
                   changes, state: ze.CommitState) -> bytes:
    """One complete envelope: Begin, the ``changes`` ((frame kind, payload record) pairs) and
    the Commit whose digest covers Begin + changes and whose size fields are exact."""
    change_frames = [ze.encode_zgw_frame(ze.ZgwFrame(ze.ZgwFrameKind(k), i + 1, sequence,
                                                     batch_id, p))
                     for i, (k, p) in enumerate(changes)]
    n = len(change_frames)
    commit_len = 72 + 16 + len(ze.encode_commit_state(state))
    total = 72 + 56 + sum(map(len, change_frames)) + commit_len
    begin = ze.encode_zgw_frame(ze.ZgwFrame(K.begin, 0, sequence, batch_id, ze.ZgwBegin(
        store, ze.EnvelopeKind(kind), base_generation, base_generation + 1, n, total)))
    head = begin + b"".join(change_frames)
    commit = ze.encode_zgw_frame(ze.ZgwFrame(K.commit, n + 1, sequence, batch_id, ze.ZgwCommit(
        n, xxh3_64(head), state)))
    return head + commit
