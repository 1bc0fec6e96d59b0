"""Checksums: what a checksum covers, where it is checked and where it is patched.

The decoder checks a checksum once the bytes it covers are read (a late checksum after
them); the encoder computes it in place, or writes a placeholder and patches it once
the covered bytes (and any size patched after them) are written. The spans of the
covered fields are kept only where a checksum needs them.
"""

from __future__ import annotations

import re

from .. import checksum_cover as cover
from .. import ir
from ..runtime_names import (
    checksum_call,
)
from .base import Spans


class Checksums:
    """Checksum spans, checks and patches for the decoders and encoders."""

    def spans_needed(self, lay: ir.Layout) -> Spans:
        """Which fields need start (``_s_``) / end (``_e_``) offsets kept for checksums.

        Only the first and last field of each contiguous covered group are tracked.
        """
        spans = Spans()
        order = [f.name for f in lay.fields]
        comp = {f.name for f in lay.fields if f.compressed is not None}
        for i, f in enumerate(lay.fields):
            if f.checksum is None:
                continue
            late = cover.anchor(lay.fields, i) is not None
            if late:  # checked after its place: its own offset is kept
                spans.s.add(f.name)
            group: list[str] = []
            for n in self.covered(lay, i) + [None]:
                own = late and n == f.name  # read as its filler: a piece of its own
                contiguous = (n is not None and n not in comp and group and not own
                              and order.index(n) == order.index(group[-1]) + 1)
                if group and not contiguous:
                    spans.s.add(group[0])
                    spans.e.add(group[-1])
                    group = []
                if n is None:
                    break
                if n in comp:
                    spans.plain.add(n)
                elif own:
                    spans.e.add(n)  # the encoder reads its placeholder as a span
                else:
                    group.append(n)
        return spans

    def covered(self, lay: ir.Layout, index: int) -> list[str]:
        return cover.covered(lay.fields, index)

    def late_checks(self, f: ir.Field) -> list[str]:
        """Checks of the checksums whose last covered field is ``f`` (decode)."""
        out: list[str] = []
        fields = self.lay.fields
        at = next((i for i, x in enumerate(fields) if x is f), None)
        for i, ck in enumerate(fields):
            if ck.checksum is not None and at is not None and cover.anchor(fields, i) == at:
                check = self.checksum_check(ck, f"_s_{ck.name}")
                out += [f"if f_{ck.name} is not None:"] + ["    " + x for x in check] \
                    if ck.cond else check
        return out

    def checksum_check(self, f: ir.Field, at: str) -> list[str]:
        index = next(i for i, x in enumerate(self.lay.fields) if x is f)
        expr = self.checksum_expr(self.lay, index, "mv", "start", self.dec_res)
        return [f"_ck = {expr}",
                f"if f_{f.name} != _ck:",
                f"    raise ChecksumError('{f.checksum.algorithm} mismatch', offset={at}, "
                f"path={f.name!r}, expected=_ck, found=f_{f.name})"]

    def checksum_expr(self, lay: ir.Layout, index: int, buf: str, start: str, res) -> str:
        """Python expression computing the checksum of field ``index`` over ``buf``."""
        f = lay.fields[index]
        if f.checksum.ranges:  # record-relative byte ranges, in the order listed
            parts = [f"{buf}[{start} + {a}:{start} + {b}]" for a, b in f.checksum.ranges]
            data = parts[0] if len(parts) == 1 else f"b''.join(({', '.join(parts)},))"
            return checksum_call(f.checksum, data, res)
        if f.checksum.files:  # absolute ranges of the buffer decoded / the bytes encoded
            fill = self.const("FB", repr(cover.filler_bytes(
                f.checksum, self.ck_width(f.type))))
            parts = [f"_cover.file_range(mv, {a.render(res)}, {b.render(res)}, _s_{f.name}, "
                     f"{f.name!r}, {fill})" if buf == "mv" else
                     f"_cover.file_range_out(out, {a.render(res)}, {b.render(res)}, "
                     f"{f.name!r})" for a, b in f.checksum.files]
            data = parts[0] if len(parts) == 1 else f"b''.join(({', '.join(parts)},))"
            return checksum_call(f.checksum, data, res)
        covered = self.covered(lay, index)
        order = [x.name for x in lay.fields]
        comp = {x.name for x in lay.fields if x.compressed is not None}
        own = f.name if cover.anchor(lay.fields, index) is not None else None
        pieces: list[str] = []
        group: list[str] = []

        def close() -> None:
            if group:
                pieces.append(f"{buf}[_s_{group[0]}:_e_{group[-1]}]")
                group.clear()

        prev = None
        for n in covered:
            if n == own:  # the checksum's own bytes: the filler (the encoder wrote it)
                close()
                if buf == "mv":
                    fill = self.const("FB", repr(cover.filler_bytes(
                        f.checksum, self.ck_width(f.type))))
                    pieces.append(f"({fill} if f_{n} is not None else b'')" if f.cond
                                  else fill)
                else:
                    pieces.append(f"{buf}[_atck_{n}:_e_{n}]")
            elif n in comp:
                close()
                pieces.append(f"_plain_{n}")
            else:
                if group and order.index(n) != order.index(prev) + 1:
                    close()
                group.append(n)
            prev = n
        close()
        data = pieces[0] if len(pieces) == 1 else f"b''.join(({', '.join(pieces)},))"
        m = re.fullmatch(r"memoryview\(out\)\[(_s_\w+):(_e_\w+)\]", data)
        if m:  # the whole buffer so far (a top-level record): no memoryview objects
            s_, e_ = m.groups()
            data = f"(out if {s_} == 0 and {e_} == len(out) else {data})"
        return checksum_call(f.checksum, data, res)

    def deferred_checksums(self, lay: ir.Layout) -> dict[str, list[ir.Field]]:
        """Checksums covering a size-derived field whose sized field comes after them.

        Such a checksum cannot be computed in place (the size is patched only once the
        sized field is encoded): it is written as a placeholder and patched right after
        the size patch. Maps the sized field's name to those checksum fields.
        """
        out: dict[str, list[ir.Field]] = {}
        names = [x.name for x in lay.fields]
        for i, f in enumerate(lay.fields):
            if f.checksum is None or cover.anchor(lay.fields, i, encode=True) is not None:
                continue
            later = set()
            for n in self.covered(lay, i):
                d = lay.fields[names.index(n)].derived_from
                if d and d[0] in ("size", "stored") and d[1] in names \
                        and names.index(d[1]) > i:
                    later.add(names.index(d[1]))
            if later:
                out.setdefault(names[max(later)], []).append(f)
        return out

    def encode_checksum(self, rec: ir.Record, f: ir.Field, spans: set[str],
                        patch: bool = False) -> list[str]:
        index = next(i for i, x in enumerate(self.lay.fields) if x is f)
        expr = self.checksum_expr(self.lay, index, "memoryview(out)", "start", self.enc_res)
        pack, pack_into = self.ck_packers(f.type)
        width = self.ck_width(f.type)
        late = cover.anchor(self.lay.fields, index, encode=True) is not None
        if late and patch:  # every byte it covers is written: computed, written over
            inner = [f"f_{f.name} = {expr}", pack_into(f"_atck_{f.name}", f"f_{f.name}")]
        elif late:  # its place: the filler as a placeholder
            fill = self.const("FB", repr(cover.filler_bytes(f.checksum, width)))
            inner = ([f"_s_{f.name} = len(out)"] if f.name in spans.s else []) + [
                f"_atck_{f.name} = len(out)", f"out += {fill}"] + (
                [f"_e_{f.name} = len(out)"] if f.name in spans.e else [])
        elif patch:  # deferred: the covered size field has just been patched
            inner = [pack_into(f"_atck_{f.name}", expr)]
        elif any(f is c for cks in self.deferred.values() for c in cks):
            zero = f"bytes({width})" if isinstance(f.type, ir.VarintT) else pack("0")
            inner = [f"_atck_{f.name} = len(out)", f"out += {zero}"]
        else:
            # kept in a local: a later seed/chain expression may read it
            inner = [f"f_{f.name} = {expr}", f"out += {pack(f'f_{f.name}')}"]
        if f.cond is not None:
            return [f"if {f.cond.render(self.enc_res)}:"] + ["    " + x for x in inner]
        return inner

    def patch_stored(self, stored: ir.Field, f: ir.Field) -> list[str]:
        """Write the stored (compressed) byte count ``_stored_<f>`` at its place."""
        if isinstance(stored.type, ir.VarintT):
            return self.insert_varint_size(stored, f, self.cur_spans, f"_stored_{f.name}")
        return [f"{self.patch_struct(stored)}.pack_into(out, _at_{stored.name}, "
                f"_stored_{f.name})"]

    def patch_struct(self, f: ir.Field) -> str:
        it = self.base_int(f.type)
        return self.const("S", f"struct.Struct({('<' if it.endian == 'le' else '>') + it.code!r})")

    def insert_varint_size(self, size_f: ir.Field, target: ir.Field, spans: Spans,
                           value: str | None = None) -> list[str]:
        """A varint size is only known once its field is encoded and its width depends on
        the value: insert it at its place, then move every offset remembered since."""
        k = f" + {size_f.derived_offset}" if size_f.derived_offset else ""
        at = f"_at_{size_f.name}"
        value = value or f"_size_{target.name}{k}"
        out = [f"_k = {self.varint_encode(size_f.type, value)}",
               f"out[{at}:{at}] = _k"]
        names = [x.name for x in self.lay.fields]
        between = self.lay.fields[names.index(size_f.name) + 1:names.index(target.name) + 1]
        if size_f.name in spans.e:
            out.append(f"_e_{size_f.name} = {at} + len(_k)")
        for x in between:
            if x.name in spans.s:
                out.append(f"_s_{x.name} += len(_k)")
            if x.name in spans.e and x is not target:
                out.append(f"_e_{x.name} += len(_k)")
            if x.derived_from and x.derived_from[0] == "size" and x is not target:
                out.append(f"_at_{x.name} += len(_k)")
            if any(x is c for cks in self.deferred.values() for c in cks) or (
                    x.checksum is not None and self.is_late(x, encode=True)):
                # (a late checksum's placeholder, patched once its last field is written)
                out.append(f"_atck_{x.name} += len(_k)")
        return out
