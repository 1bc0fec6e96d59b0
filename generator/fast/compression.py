"""Compression: compressed sections decoded into a buffer of their own, and encoded.

A compressed field's bytes are decompressed (with the limits of its codec) and its
value decoded from the result as from the record's buffer; encoding writes the value
to a buffer of its own and compresses it, measured where a size or checksum needs it.
"""

from __future__ import annotations

from .. import ir
from ..runtime_names import (
    codec_table,
)


class Compression:
    """Compressed sections of the decoders and encoders."""

    def codecs_const(self, c: ir.Compressed) -> str:
        """Module constant mapping a field's algorithm values to registered codecs."""
        return self.const("CODECS", repr(codec_table(self.family, self.cur_rec, c)))

    def decode_compressed(self, rec: ir.Record, f: ir.Field, res, plain_code: list[str],
                          inline_code: list[str], want_span: bool) -> list[str]:
        c = f.compressed
        lt = c.length
        alg = c.algorithm.render(res)
        cap = (f.size.render(res) if f.size is not None else
               c.limit.render(res) if c.limit is not None else "_DEFAULT_LIMIT")
        expected = f.size.render(res) if f.size is not None else "None"
        codecs = f", codecs={self.codecs_const(c)}" if c.codecs else ""
        if c.stored is not None:  # an earlier field holds the compressed byte count
            comp = [f"_clen = {res(c.stored)}",
                    "if _clen < 0 or pos + _clen > end:",
                    f"    raise TruncatedError('compressed frame truncated', offset=pos, "
                    f"path={f.name!r}, expected=_clen, found=end - pos)",
                    f"_plain = _decompress({alg}, mv[pos:pos + _clen], {cap}, "
                    f"expected_size={expected}, offset=pos, path={f.name!r}{codecs})"]
        elif lt is None:  # self-terminating: the codec finds the stream's end
            comp = [f"_plain, _clen = _decompress_prefix({alg}, mv[pos:end], {cap}, "
                    f"expected_size={expected}, offset=pos, path={f.name!r}{codecs})"]
        else:
            if isinstance(lt, ir.VarintT):  # any integer kind
                comp = self.varint_decode(lt, "_clen", f.name + ".compressed_len")
            else:
                st = self.const("S", f"struct.Struct({('<' if lt.endian == 'le' else '>') + lt.code!r})")
                comp = [f"if pos + {lt.size} > end:",
                        f"    raise TruncatedError('compressed length truncated', offset=pos, "
                        f"path={f.name + '.compressed_len'!r}, expected={lt.size}, "
                        "found=end - pos)",
                        f"_clen = {st}.unpack_from(mv, pos)[0]",
                        f"pos += {lt.size}"]
            comp += ["if _clen < 0:",
                     f"    raise ConstraintError('negative compressed length', offset=pos, "
                     f"path={f.name!r}, expected='>= 0', found=_clen)"] \
                if lt.signed else []
            comp += ["if pos + _clen > end:",
                    f"    raise TruncatedError('compressed frame truncated', offset=pos, "
                    f"path={f.name!r}, expected=_clen, found=end - pos)",
                    f"_plain = _decompress({alg}, mv[pos:pos + _clen], {cap}, "
                    f"expected_size={expected}, offset=pos, path={f.name!r}{codecs})"]
        comp += ["_fpos = pos",
                "pos += _clen",
                "_save = (mv, pos, end)",
                "mv = memoryview(_plain)",
                "pos, end = 0, len(_plain)",
                "try:"]
        comp += ["    " + x for x in plain_code]
        comp += ["    if pos != end:",
                 f"        raise ConstraintError('decompressed section has trailing bytes', "
                 f"offset=pos, path={f.name!r}, expected=end, found=pos)",
                 "except DecodeError as _exc:",
                 "    _exc.message += f' (at +{_exc.offset} in the section decompressed from "
                 "offset {_fpos})'",
                 "    _exc.offset = _fpos",
                 "    raise",
                 "mv, pos, end = _save"]
        if want_span:
            comp.append(f"_plain_{f.name} = _plain")
        if c.when is None:
            return comp
        out = [f"if {c.when.render(res)}:"]
        out += ["    " + x for x in comp]
        out.append("else:")
        if want_span:
            out.append(f"    _ps_{f.name} = pos")
        if c.stored is not None:  # stored as it is: its stored size bounds it
            inline_code = [f"_csec_{f.name} = end",
                           f"end = pos + {res(c.stored)}",
                           "if end > _csec_" + f.name + ":",
                           f"    raise TruncatedError('stored section truncated', offset=pos, "
                           f"path={f.name!r}, expected=end - pos, found=_csec_{f.name} - pos)",
                           *inline_code,
                           "if pos != end:",
                           f"    raise ConstraintError('stored section size mismatch', "
                           f"offset=pos, path={f.name!r}, expected=end, found=pos)",
                           f"end = _csec_{f.name}"]
        out += ["    " + x for x in inline_code]
        if want_span:
            out.append(f"    _plain_{f.name} = mv[_ps_{f.name}:pos]")
        return out

    def encode_compressed(self, f: ir.Field, inner: list[str], res, want_span: bool,
                          size_target: ir.Field | None) -> list[str]:
        c = f.compressed
        lt = c.length
        codecs = f", codecs={self.codecs_const(c)}" if c.codecs else ""
        comp = ["_outer = out", "out = bytearray()"]
        comp += inner
        comp += ["_plain = bytes(out)", "out = _outer",
                 f"_frame = _compress({c.algorithm.render(res)}, _plain, path={f.name!r}{codecs})"]
        if isinstance(lt, ir.VarintT):
            comp.append(f"out += {self.varint_encode(lt, 'len(_frame)')}")
        elif lt is not None:
            st = self.const("S", f"struct.Struct({('<' if lt.endian == 'le' else '>') + lt.code!r})")
            comp.append(f"out += {st}.pack(len(_frame))")
        comp.append("out += _frame")
        stored = next((o for o in self.lay.fields if o.derived_from == ("stored", f.name)), None)
        if stored is not None:  # the compressed byte count, patched over its placeholder
            comp += [f"_stored_{f.name} = len(_frame)", *self.patch_stored(stored, f)]
        if want_span:
            comp.append(f"_plain_{f.name} = _plain")
        if size_target is not None:
            comp.append(f"_size_{f.name} = len(_plain)")
        if c.when is None:
            return comp
        out = [f"if {c.when.render(res)}:"] + ["    " + x for x in comp] + ["else:"]
        plain = ["_ps = len(out)"] + inner
        if want_span:
            plain.append(f"_plain_{f.name} = bytes(out[_ps:])")
        if size_target is not None:
            plain.append(f"_size_{f.name} = len(out) - _ps")
        if stored is not None:  # stored as it is: the stored size is the plain size
            plain += [f"_stored_{f.name} = len(out) - _ps", *self.patch_stored(stored, f)]
        out += ["    " + x for x in plain]
        return out
