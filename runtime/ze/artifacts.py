"""Single-block framed artifacts: frame (1), manifest (10, v2/v3) and purge intent (15).

The generated ``*_file`` records hold the layout and both checksums; this module checks the
real file length, the manifest's extension order per version, and derives purge tokens.
"""

from __future__ import annotations

import dataclasses

from ...generated import ze
from ..checksums import xxh3_64
from ..errors import ConstraintError, UnsupportedError
from . import limits, registry, seals

TSR1, ZGR3 = 0x31525354, 0x3352475A


def _file_length(buf, hdr, what: str) -> None:
    """facts §2.2 decode order after the header: file_length equals the real length,
    header_length == 32, then the whole-file checksum, then the block checksum, all
    before a payload field is read."""
    if hdr.file_length != len(buf):
        raise ConstraintError("file_length must equal the real file length", offset=24,
                              path="file_length", expected=len(buf), found=hdr.file_length)
    if hdr.header_length != 32:
        raise ConstraintError("framed artifact header_length must be 32", offset=16,
                              path="header_length", expected=32, found=hdr.header_length)
    ze.decode_framed_trailer_check(buf)  # whole-file checksum before the block checksum
    seals.framed_block(buf, what)


def _exact(buf, end: int, what: str) -> None:
    if end != len(buf):
        raise ConstraintError(f"trailing bytes after the {what}", offset=end, path=what,
                              expected=end, found=len(buf))


def read_frame(buf) -> ze.FrameFile:
    hdr = registry.read_header(buf, expected_family=1)
    _file_length(buf, hdr, "frame_file")
    value, end = ze.decode_frame_file(buf)
    _exact(buf, end, "frame")
    return value


def read_purge(buf) -> ze.PurgeFile:
    hdr = registry.read_header(buf, expected_family=15)
    _file_length(buf, hdr, "purge_file")
    value, end = ze.decode_purge_file(buf)
    _exact(buf, end, "purge intent")
    return value


def purge_token(generation: int, doc_ids) -> int:
    """``token_id = xxh3_64(generation:u64 LE || each doc_id:u128 LE)``."""
    data = ze.encode_purge_token_input(ze.PurgeTokenInput(generation, list(doc_ids)))
    return xxh3_64(data)


def purge_file(generation: int, doc_ids) -> bytes:
    ids = list(doc_ids)
    payload = ze.PurgePayload(purge_token(generation, ids), ids)
    return ze.encode_purge_file(ze.PurgeFile(ze.PurgeBlock(payload)))


def read_manifest(buf, *, strict: bool = True, graph: bool = True) -> ze.ManifestFile:
    """Decode a manifest and apply the version rules: v2 may end with TSR1 only; v3 must end
    with exactly one ZGR3 (optionally after TSR1); v1 is refused as unsupported. The graph
    section is checked against its CommitState (:func:`check_graph_section`); ``strict``
    also applies the epoch-registry cross-checks (:func:`check_epochs`, facts U13).
    ``graph=False`` is a graph-free build: it refuses v3 at the codec boundary (rules
    "Graph-free builds refuse v3"), before the block is read."""
    hdr = registry.read_header(buf, expected_family=10)
    if not graph and hdr.family_version == 3:
        raise UnsupportedError("manifest v3 carries a graph section; this build is graph-free",
                               offset=10, path="manifest_file.family_version", expected=2,
                               found=3)
    _file_length(buf, hdr, "manifest_file")
    if hdr.family_version == 3:
        seals.zgr3_section(buf)  # the section checksum before its body is parsed
    value, end = ze.decode_manifest_file(buf)
    _exact(buf, end, "manifest")
    tags = [x.tag for x in value.block.payload.extensions]
    if value.family_version == 2:
        ok = tags in ([], [TSR1])
        msg = "manifest v2 may carry only an optional TSR1 after the schema"
    else:
        ok = tags in ([ZGR3], [TSR1, ZGR3])
        msg = "manifest v3 must end with exactly one ZGR3 graph section"
    if not ok:
        raise ConstraintError(msg, path="manifest_file.block.payload.extensions",
                              found=[hex(t) for t in tags])
    if tags.count(TSR1) and all(r.tag == 0 for r in value.block.payload.extensions[0].body.ranges):
        raise ConstraintError("TSR1 is written only when some range is stamped",
                              path="manifest_file.block.payload.extensions[0]")
    payload = value.block.payload
    for i, x in enumerate(payload.extensions):
        if x.tag == ZGR3:
            check_graph_section(x.body.graph,
                                path=f"manifest_file.block.payload.extensions[{i}].body.graph")
    if strict:
        check_epochs(payload)
    return value


MAX_ARTIFACT_BYTES = limits.MAX_ARTIFACT_BYTES
MIN_OBJECT_BYTES = limits.MIN_OBJECT_BYTES


def check_graph_section(g: ze.GraphSection, *, path: str = "graph") -> None:
    """ZGR3 body rules: object rows (length range, no duplicate ids), every RequiredRef of
    the CommitState listed with the same length and checksum, the state's own ref rules, and
    the ZGEN extension (at most one; v2 rows strictly ordered and not beyond the cutoff)."""
    from . import envelope  # noqa: PLC0415
    objects: dict[int, ze.GraphObject] = {}
    for i, o in enumerate(g.objects):
        if not MIN_OBJECT_BYTES <= o.length <= MAX_ARTIFACT_BYTES:
            raise ConstraintError("graph object length out of range", path=f"{path}.objects[{i}]"
                                  ".length", expected=f"{MIN_OBJECT_BYTES}..{MAX_ARTIFACT_BYTES}",
                                  found=o.length)
        if o.artifact_id in objects:
            raise ConstraintError("duplicate graph object artifact id",
                                  path=f"{path}.objects[{i}].artifact_id", found=o.artifact_id)
        objects[o.artifact_id] = o
    st = g.state
    envelope.check_state(st, path=f"{path}.state")
    for name in ("vector", "text"):
        if getattr(st, name).present:
            raise ConstraintError(f"manifest graph state must not carry a {name} root",
                                  path=f"{path}.state.{name}", expected=0, found=1)
    for name, ref, _kind in envelope.state_refs(st):
        d = ref.descriptor
        o = objects.get(d.artifact)
        if o is None:
            raise ConstraintError("state ref names an artifact missing from the object rows",
                                  path=f"{path}.state.{name}", found=d.artifact)
        if (o.length, o.checksum) != (d.complete_file_length, d.whole_file_checksum):
            raise ConstraintError("object row length/checksum differ from the state ref",
                                  path=f"{path}.state.{name}",
                                  expected=(d.complete_file_length, d.whole_file_checksum),
                                  found=(o.length, o.checksum))
    if len(g.zgen) > 1:
        raise ConstraintError("graph object count/length mismatch (more than one ZGEN)",
                              path=f"{path}.zgen")
    for z in g.zgen:
        prev = None
        for i, r in enumerate(z.rows or ()):
            if prev is not None and r.after_sequence <= prev:
                raise ConstraintError("ZGEN rows must be strictly ordered by sequence",
                                      path=f"{path}.zgen[0].rows[{i}]", expected=f"> {prev}",
                                      found=r.after_sequence)
            if r.after_sequence > z.counted_through:
                raise ConstraintError("ZGEN row is beyond the cutoff",
                                      path=f"{path}.zgen[0].rows[{i}]",
                                      expected=f"<= {z.counted_through}", found=r.after_sequence)
            prev = r.after_sequence


def check_epochs(p: ze.ManifestPayload) -> None:
    """Epoch-registry cross-checks (facts §6.1): recomputed epoch ids, unique identity pairs,
    alias naming a registry entry, segment tags naming registry embedding ids (all absent
    with an empty registry)."""
    base = "manifest_file.block.payload"
    ids = set()
    pairs = set()
    for i, e in enumerate(p.epochs):
        want = epoch_id(e)
        if e.embedding_epoch_id != want:
            raise ConstraintError("embedding epoch id does not match its recomputed digest",
                                  path=f"{base}.epochs[{i}].embedding_epoch_id", expected=want,
                                  found=e.embedding_epoch_id)
        pair = (e.embedding_epoch_id, e.tokenizer_epoch_id)
        if pair in pairs:
            raise ConstraintError("duplicate (embedding, tokenizer) epoch identity",
                                  path=f"{base}.epochs[{i}]", found=pair)
        pairs.add(pair)
        ids.add(e.embedding_epoch_id)
    a = p.alias
    if not p.epochs:
        if a.present:
            raise ConstraintError("alias must be absent with an empty epoch registry",
                                  path=f"{base}.alias.present", expected=0, found=1)
        for i, seg in enumerate(p.segments):
            if seg.epoch_present:
                raise ConstraintError("segment epoch tag must be absent with an empty registry",
                                      path=f"{base}.segments[{i}].epoch_present", expected=0,
                                      found=1)
        return
    if not a.present:
        raise ConstraintError("a non-empty epoch registry requires an alias",
                              path=f"{base}.alias.present", expected=1, found=0)
    if (a.embedding_epoch_id, a.tokenizer_epoch_id) not in pairs:
        raise ConstraintError("alias must name a registry entry", path=f"{base}.alias",
                              found=(a.embedding_epoch_id, a.tokenizer_epoch_id))
    for i, seg in enumerate(p.segments):
        if not seg.epoch_present or seg.embedding_epoch_id not in ids:
            raise ConstraintError("segment must carry an epoch tag naming a registry embedding id",
                                  path=f"{base}.segments[{i}].embedding_epoch_id",
                                  expected=sorted(ids), found=seg.embedding_epoch_id
                                  if seg.epoch_present else None)


def manifest_file(payload: ze.ManifestPayload) -> bytes:
    """Writers emit v3 only when the graph section is present, else v2. A TSR1 whose
    ranges are all Unstamped is left out (rules: "When every segment range is
    `Unstamped`, writers append no range bytes"); ``payload`` itself is not changed."""
    kept = [x for x in payload.extensions
            if not (x.tag == TSR1 and all(int(r.tag) == 0 for r in x.body.ranges))]
    if len(kept) != len(payload.extensions):
        payload = dataclasses.replace(payload, extensions=kept)
    version = 3 if any(x.tag == ZGR3 for x in payload.extensions) else 2
    return ze.encode_manifest_file(ze.ManifestFile(version, ze.ManifestBlock(payload)))


def epoch_id(epoch: ze.EmbeddingEpoch) -> int:
    """EmbeddingEpoch id: xxh3-64 of the ``epoch_digest_input`` encoding of its towers."""
    def tower(t: ze.EmbeddingTower) -> ze.DigestTower:
        return ze.DigestTower(t.model_id, t.model_version, t.weights_digest, t.dims,
                              t.normalization, t.prompt_prefix, t.max_tokens, t.runtime,
                              t.compute_units, t.os_build_present, t.os_build)
    data = ze.encode_epoch_digest_input(ze.EpochDigestInput(
        tower(epoch.document), tower(epoch.query), epoch.alignment_digest))
    return xxh3_64(data)


def zgen_generations(section: ze.GraphSection, batch_seqs) -> list[tuple[int, int]]:
    """The graph generation after each WAL graph batch replayed over a manifest (rules:
    ZGEN "Replay subtracts the covered batches and manifest-only increments, then restores
    each increment after its recorded WAL boundary").

    ``batch_seqs`` are the WAL sequences of the committed graph batches, ascending; those at
    or below ``absorbed_through`` are already in the state and are skipped. Batches up to
    the ZGEN cutoff (``counted_through``) are already counted in the manifest generation,
    and so are the manifest-only increments: both are subtracted from the starting
    generation, then each batch adds 1 and each increment is added back once the WAL has
    passed its ``after_sequence``. Without ZGEN nothing past ``absorbed_through`` is
    counted. The generation reached at the cutoff therefore equals the manifest's.
    Returns ``[(seq, generation after it), ...]``.
    """
    absorbed = section.absorbed_through
    generation = section.state.generation
    z = section.zgen[0] if section.zgen else None
    counted = z.counted_through if z is not None else absorbed
    rows = list(z.rows or ()) if z is not None else []
    batches = [s for s in batch_seqs if s > absorbed]
    if any(b <= a for a, b in zip(batches, batches[1:], strict=False)):
        raise ConstraintError("WAL graph batches must be strictly increasing", path="batches",
                              found=batches)
    covered = sum(1 for s in batches if s <= counted)
    gen = generation - covered - sum(r.increment_count for r in rows)
    if gen < 0:
        raise ConstraintError("ZGEN covers more batches and increments than the manifest "
                              "generation counts", path="graph.zgen", expected=f"<= {generation}",
                              found=covered + sum(r.increment_count for r in rows))
    i = 0
    while i < len(rows) and rows[i].after_sequence <= absorbed:  # before the first replayed batch
        gen += rows[i].increment_count
        i += 1
    out = []
    for s in batches:
        gen += 1
        while i < len(rows) and rows[i].after_sequence <= s:
            gen += rows[i].increment_count
            i += 1
        out.append((s, gen))
    return out
