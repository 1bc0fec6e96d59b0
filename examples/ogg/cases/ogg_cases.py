"""Field values of the Ogg fixtures (encoded by `bytewright fixtures write`)."""

from bytewright.runtime.framing import FramedList


def cases(codec):
    """(name, record, params, value, doc) per fixture; ``codec`` is the generated module."""
    ident = codec.VorbisPacket(packet_type=1, body=codec.IdentificationHeader(
        audio_channels=2, audio_sample_rate=44100, bitrate_maximum=0, bitrate_nominal=112000,
        bitrate_minimum=0, blocksizes=codec.Blocksizes(blocksize_0=8, blocksize_1=11)))
    yield ("identification", "vorbis_packet", {}, ident,
           "The Vorbis identification header: stereo, 44.1 kHz.")
    comment = codec.VorbisPacket(packet_type=3, body=codec.CommentHeader(
        vendor="bytewright example", comments=["TITLE=sine", "ARTIST=nobody"]))
    yield ("comment", "vorbis_packet", {}, comment, "A comment header with two comments.")
    audio = codec.VorbisPacket(packet_type=0, body=codec.AudioPacket(data=b"\x55" * 300))
    yield ("audio", "vorbis_packet", {}, audio, "An audio packet (opaque bytes).")
    # A page on its own: the CRC covers the whole page with its own 4 bytes as zeros.
    flags = codec.PageFlags
    page = codec.OggPage(header_type=flags(continued=False, bos=True, eos=False), granule=0,
                         serial=0x1234, seqno=0, segment_table=[3], body=b"abc")
    yield ("page", "ogg_page", {}, page, "One page with a 3-byte body (one segment).")
    # A stream keeps its pages: where pages break and their headers are not derived.
    ident_raw, comment_raw, audio_raw = (codec.encode_vorbis_packet(p)
                                         for p in (ident, comment, audio))
    assert len(audio_raw) == 301  # two segments: 255 + 46

    def a_page(seqno, segments, body, continued=False, bos=False, eos=False, granule=0):
        return codec.OggPage(header_type=flags(continued=continued, bos=bos, eos=eos),
                             granule=granule, serial=0x1234, seqno=seqno,
                             segment_table=segments, body=body)

    pages = [
        a_page(0, [len(ident_raw)], ident_raw, bos=True),
        a_page(1, [len(comment_raw), 255], comment_raw + audio_raw[:255]),
        a_page(2, [46], audio_raw[255:], continued=True, eos=True, granule=1024),
    ]
    yield ("stream", "ogg_stream", {},
           codec.OggStream(packets=FramedList([ident, comment, audio], pages)),
           "Three pages: identification; comment and the start of an audio packet; its end.")
