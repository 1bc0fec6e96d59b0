"""ZIP's compression method 0 ("stored") as a bytewright codec plug-in.

A stored member's bytes are its data as they are; registering that as a codec lets the
schema map the member's method through one `codecs:` table (0 -> zip_stored,
8 -> deflate), with the local header's sizes bounding and checking it like any other.

It registers as self-terminating: a stored member ends where the bytes it is given end,
and the schema always gives it exactly the local header's compressed size
(`stored_size:`), so "the stream's end" is the end of that region.
"""

from __future__ import annotations

from bytewright.runtime.registry import CodecFailure


def _stored_compress(raw: bytes, level: int | None = None) -> bytes:
    return bytes(raw)


def _stored_decompress(data: bytes, limit: int) -> bytes:
    if len(data) > limit:
        raise CodecFailure(f"output exceeds the limit of {limit} bytes")
    return bytes(data)


def _stored_prefix(data: bytes, limit: int) -> tuple[bytes, int]:
    # The local header's compressed size bounds what the codec is given: all of it is data.
    return _stored_decompress(data, limit), len(data)


def register(reg) -> None:  # noqa: ANN001 - a bytewright Registry
    """Called once by ``registry.load_plugin("zip_plugins:register")``."""
    reg.add_codec("zip_stored", compress=_stored_compress, decompress=_stored_decompress,
                  self_terminating=True, decompress_prefix=_stored_prefix,
                  doc="ZIP method 0: the member's bytes, not compressed")
