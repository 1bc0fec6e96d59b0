"""Field values of the PNG fixtures: `bytewright fixtures write` encodes each one into
fixtures/png/<name>.hex and refuses if an existing fixture's bytes would change."""

import zlib


def _pixels(width: int, height: int) -> bytes:
    # One filter byte (0 = None) per scanline, then RGB triples.
    rows = []
    for y in range(height):
        row = bytes([0]) + b"".join(bytes([(x * 97) % 256, (y * 53) % 256, 128])
                                     for x in range(width))
        rows.append(row)
    return zlib.compress(b"".join(rows), 9)


def cases(codec):
    """(name, record, params, value, doc) per fixture; ``codec`` is the generated module."""
    T = codec.ChunkType
    ihdr = codec.Ihdr(width=2, height=2, bit_depth=8, color_type=codec.ColorType.TRUECOLOR,
                      compression_method=0, filter_method=0, interlace_method=0)
    chunks = [
        codec.Chunk(chunk_type=T.IHDR, data=ihdr),
        codec.Chunk(chunk_type=T.tEXt, data=b"Comment\x00made by a bytewright example"),
        codec.Chunk(chunk_type=T.IDAT, data=_pixels(2, 2)),
        codec.Chunk(chunk_type=T.IEND, data=None),
    ]
    yield ("rgb_2x2", "png_file", {}, codec.PngFile(chunks=chunks),
           "A 2x2 RGB image: IHDR, tEXt, one IDAT, IEND.")
    yield ("ihdr_chunk", "chunk", {}, chunks[0], "The IHDR chunk alone (13 data bytes).")
