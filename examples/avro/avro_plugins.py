"""The two Avro block codecs, registered as a bytewright plug-in.

``avro_null`` keeps a block's bytes as they are. ``avro_deflate`` is the ``deflate``
codec as fastavro writes it: a raw deflate stream (RFC 1951) cut from ``zlib.compress``
output by dropping the two-byte zlib header and the LAST byte only, so the stream is
followed by the first three bytes of the big-endian Adler-32 of the plain data. Readers
(fastavro, the Java and C libraries) inflate the raw stream and ignore what follows it.
Decoding accepts the stream alone (as other writers produce it) or followed by exactly
those three bytes; encoding writes fastavro's form, so its files re-encode byte-identical.
"""

from __future__ import annotations

import zlib

from bytewright.runtime.registry import CodecFailure


def _null_compress(raw: bytes, level: int | None = None) -> bytes:
    return bytes(raw)


def _null_decompress(data: bytes, limit: int) -> bytes:
    if len(data) > limit:
        raise CodecFailure(f"output exceeds the limit of {limit} bytes")
    return bytes(data)


def _deflate_compress(raw: bytes, level: int | None = None) -> bytes:
    return zlib.compress(bytes(raw), -1 if level is None else level)[2:-1]


def _deflate_decompress(data: bytes, limit: int) -> bytes:
    dobj = zlib.decompressobj(-zlib.MAX_WBITS)
    try:
        # one byte over the limit tells "too large" from "exactly the limit"
        plain = dobj.decompress(bytes(data), limit + 1)
    except zlib.error as exc:
        raise CodecFailure(f"raw deflate: {exc}") from exc
    if len(plain) > limit:
        raise CodecFailure(f"output exceeds the limit of {limit} bytes")
    if not dobj.eof:
        raise CodecFailure("raw deflate stream is incomplete", truncated=True)
    rest = dobj.unused_data
    if rest and rest != zlib.adler32(plain).to_bytes(4, "big")[:3]:
        raise CodecFailure(f"{len(rest)} bytes after the deflate stream are not the first "
                           "three bytes of its Adler-32")
    return plain


def register(reg) -> None:  # noqa: ANN001 - a bytewright Registry
    """Called once by ``registry.load_plugin("avro_plugins:register")``."""
    reg.add_codec("avro_null", compress=_null_compress, decompress=_null_decompress,
                  doc="Avro codec 'null': the block's bytes as they are")
    reg.add_codec("avro_deflate", compress=_deflate_compress, decompress=_deflate_decompress,
                  doc="Avro codec 'deflate' as fastavro writes it (raw deflate, then three "
                      "bytes of the zlib Adler-32)")
