"""Single-block framed artifacts: frame (1), manifest (10, v2/v3) and purge intent (15).

The generated ``*_file`` records hold the layout and both checksums; this module checks the
real file length, the manifest's extension order per version, and derives purge tokens.
"""

from __future__ import annotations

from ...generated import ze
from ..checksums import xxh3_64
from ..errors import ConstraintError
from . import registry

TSR1, ZGR3 = 0x31525354, 0x3352475A


def _file_length(buf, hdr) -> None:
    if hdr.file_length != len(buf):
        raise ConstraintError("file_length must equal the real file length", offset=24,
                              path="file_length", expected=len(buf), found=hdr.file_length)


def _exact(buf, end: int, what: str) -> None:
    if end != len(buf):
        raise ConstraintError(f"trailing bytes after the {what}", offset=end, path=what,
                              expected=end, found=len(buf))


def read_frame(buf) -> ze.FrameFile:
    hdr = registry.read_header(buf, expected_family=1)
    _file_length(buf, hdr)
    value, end = ze.decode_frame_file(buf)
    _exact(buf, end, "frame")
    return value


def read_purge(buf) -> ze.PurgeFile:
    hdr = registry.read_header(buf, expected_family=15)
    _file_length(buf, hdr)
    value, end = ze.decode_purge_file(buf)
    _exact(buf, end, "purge intent")
    return value


def purge_token(generation: int, doc_ids) -> int:
    """``token_id = xxh3_64(generation:u64 LE || each doc_id:u128 LE)``."""
    data = generation.to_bytes(8, "little") + b"".join(d.to_bytes(16, "little") for d in doc_ids)
    return xxh3_64(data)


def purge_file(generation: int, doc_ids) -> bytes:
    ids = list(doc_ids)
    payload = ze.PurgePayload(purge_token(generation, ids), ids)
    return ze.encode_purge_file(ze.PurgeFile(ze.PurgeBlock(payload)))


def read_manifest(buf) -> ze.ManifestFile:
    """Decode a manifest and apply the version rules: v2 may end with TSR1 only; v3 must end
    with exactly one ZGR3 (optionally after TSR1); v1 is refused as unsupported."""
    hdr = registry.read_header(buf, expected_family=10)
    _file_length(buf, hdr)
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
    return value


def manifest_file(payload: ze.ManifestPayload) -> bytes:
    """Writers emit v3 only when the graph section is present, else v2."""
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
