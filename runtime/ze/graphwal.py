"""Native graph WAL files, family 19 (ZE-38): writer and multi-envelope prefix replay.

A file is the 64-byte ``zgw_file_header`` then whole envelopes (Begin, changes, Commit).
Replay reads envelope after envelope, each validated by :func:`envelope.validate` with the
expected sequence (the first is ``first_commit_sequence``, then +1), its store against the
file header, its CommitState refs (:func:`envelope.check_state`) and its transition from the
previous envelope's state (:func:`envelope.check_transition`).

Crash model (facts §4 "Prefix / crash model"): the file may end cleanly or in a torn tail,
an incomplete final append whose present bytes all agree with what is expected there (the
frame magic, version, index, sequence, batch and zero bytes; a complete frame header must
also pass its checksum). A complete declared envelope missing its Commit is corruption, and
a complete malformed frame is an error even at end of file; both raise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...generated import ze
from ..errors import ConstraintError, DecodeError, TruncatedError
from . import envelope, registry, seals


def _layout(record: str) -> dict[str, dict]:
    return {f["name"]: f for f in ze.LAYOUT[record]["layouts"][0]["fields"]}


HEADER_LEN = ze.LAYOUT["zgw_file_header"]["layouts"][0]["fixed_size"]  # 64
FRAME_HEADER = ze.LAYOUT["zgw_frame_header"]["layouts"][0]["fixed_size"]  # 64
_FH = _layout("zgw_frame_header")
#: where a Begin frame's complete_envelope_bytes sits, from the start of the frame
ENVELOPE_SIZE_AT = FRAME_HEADER + _layout("zgw_begin")["complete_envelope_bytes"]["offset"]


@dataclass
class GraphWalReplay:
    header: ze.ZgwFileHeader
    envelopes: list[ze.GraphEnvelope] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)  # of each envelope
    terminator: str = "clean"  # clean | torn_tail
    torn_at: int | None = None  # offset of the torn final append

    @property
    def state(self) -> ze.CommitState | None:
        """The CommitState of the last complete envelope."""
        return self.envelopes[-1].commit.payload.state if self.envelopes else None

    @property
    def next_sequence(self) -> int:
        return self.header.first_commit_sequence + len(self.envelopes)


def file_header(store: int, first_commit_sequence: int = 1) -> bytes:
    return ze.encode_zgw_file_header(ze.ZgwFileHeader(store, first_commit_sequence))


def graph_wal_bytes(store: int, envelopes, first_commit_sequence: int = 1) -> bytes:
    """A complete family-19 file: the header then each envelope's bytes."""
    return file_header(store, first_commit_sequence) + b"".join(bytes(e) for e in envelopes)


def _torn_frame_header(mv: memoryview, pos: int, index: int, seq: int, batch: int | None,
                       kind: int | None) -> None:
    """Bytes of a partial frame header must agree with every expected byte present."""
    have = bytes(mv[pos:pos + FRAME_HEADER])
    # the expected header as the schema encodes it; only the fields known here are compared
    want_hdr = ze.encode_zgw_frame_header(ze.ZgwFrameHeader(
        kind or 0, 1, 0, index, seq, batch or 0, bytes(16)))
    names = ["magic", "version", "frame_index", "sequence", "reserved"]
    if batch is not None:
        names.append("batch_id")
    if kind is not None:
        names.append("kind")
    expected = [(_FH[n]["offset"], want_hdr[_FH[n]["offset"]:_FH[n]["offset"] + _FH[n]["size"]],
                 n) for n in names]
    for at, want, name in expected:
        part = have[at:at + len(want)]
        if part != want[:len(part)]:
            raise ConstraintError("torn frame header disagrees with the expected bytes "
                                  "(corruption, not a torn tail)", offset=pos + at,
                                  path=f"frame[{index}].{name}", expected=want[:len(part)].hex(),
                                  found=part.hex())


def _check_torn(mv: memoryview, pos: int, seq: int) -> None:
    """``mv[pos:]`` is an incomplete envelope: every present byte must agree."""
    n = len(mv)
    index, batch, kind, at = 0, None, 1, pos
    declared = None
    while at < n:
        if n - at < FRAME_HEADER:
            _torn_frame_header(mv, at, index, seq, batch, kind)
            return
        # a complete header is checked against its checksum before its bytes are compared
        seals.zgw_frame(mv, at, f"frame[{index}]")
        _torn_frame_header(mv, at, index, seq, batch, kind)
        head, _ = ze.decode_zgw_frame_header(mv, at)
        end = at + FRAME_HEADER + head.payload_len + envelope.FRAME_CHECKSUM
        if index == 0:
            batch = head.batch_id
        if end > n:
            return  # torn body: nothing more to compare
        try:
            fr, _ = ze.decode_zgw_frame(mv, at)
        except DecodeError as exc:
            raise exc.prefixed(f"frame[{index}]") from None  # complete but malformed
        if index == 0:
            declared = fr.payload.complete_envelope_bytes
            if pos + declared <= n:
                raise ConstraintError("complete declared envelope is missing its Commit "
                                      "(corruption)", offset=pos, path="envelope",
                                      expected=declared, found=n - pos)
            changes = fr.payload.change_count
        kind = int(envelope.K.commit) if index == changes else None  # changes: any kind
        at, index = end, index + 1


def replay(buf, *, expected_store: int | None = None) -> GraphWalReplay:
    """Validate the file header, then every envelope; see the module doc for the crash model."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    if len(mv) == 0:
        raise TruncatedError("graph WAL file is missing (0 bytes)", offset=0,
                             path="zgw_file_header")
    # the shared header as the registry reads it (magic, family, the accepted version
    # range), then the header checksum before the fields it covers
    registry.read_header(mv, expected_family=19)
    seals.zgw_file_header(mv)
    header, pos = ze.decode_zgw_file_header(mv)
    if expected_store is not None and header.store != expected_store:
        raise ConstraintError("graph WAL store does not match", offset=32, path="store",
                              expected=expected_store, found=header.store)
    out = GraphWalReplay(header)
    n, seq, prev = len(mv), header.first_commit_sequence, None
    while pos < n:
        size = None
        # a complete Begin frame is verified before its envelope size is trusted: a flip
        # there must not make the envelope look like a torn final append
        seals.zgw_frame(mv, pos, f"envelopes[{len(out.envelopes)}].begin")
        if n - pos >= ENVELOPE_SIZE_AT + 8 + envelope.FRAME_CHECKSUM:
            size = ze.decode_zgw_envelope_size(mv, pos + ENVELOPE_SIZE_AT)[0].size
        if size is None or size < 72 * 2 or pos + size > n:
            if size is not None and size > envelope.LIMIT:
                raise ConstraintError("envelope exceeds 16 MiB", offset=pos + ENVELOPE_SIZE_AT,
                                      path=f"envelopes[{len(out.envelopes)}]", found=size)
            _check_torn(mv, pos, seq)
            out.terminator, out.torn_at = "torn_tail", pos
            return out
        path = f"envelopes[{len(out.envelopes)}]"
        try:
            env = envelope.validate(mv[pos:pos + size], expected_sequence=seq)
            if env.begin.payload.store != header.store:
                raise ConstraintError("envelope store must equal the file header store",
                                      path="begin.store", expected=header.store,
                                      found=env.begin.payload.store)
            st = env.commit.payload.state
            envelope.check_state(st, path="commit.state")
            if prev is not None:
                envelope.check_transition(prev, st, path="commit.state")
        except TruncatedError as exc:  # the declared bytes are all here: not a torn tail
            raise ConstraintError("complete declared envelope is missing its Commit "
                                  f"(corruption): {exc.message}", offset=pos + (exc.offset or 0),
                                  path=f"{path}.{exc.path}", expected=size) from None
        except DecodeError as exc:
            exc.offset = pos + (exc.offset or 0)
            raise exc.prefixed(path) from None
        out.envelopes.append(env)
        out.offsets.append(pos)
        prev, seq, pos = st, seq + 1, pos + size
    return out
