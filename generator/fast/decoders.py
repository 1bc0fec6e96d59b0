"""Decoders: one checked ``_d_<record>(mv, pos, end, *params) -> (value, pos)`` per layout.

Each field is read with its bounds tested before the read or any allocation; errors
unwind with the field's path prepended, so the happy path pays nothing for good error
messages. Fixed runs, inlining, checksums and compression are the other passes'; the
optimistic twin of each decoder is built from its text afterwards (``twins``).
"""

from __future__ import annotations

from .. import absent, bitfields, byteorder, defaults, emit_framing, ir
from .. import emit_fast_encode as efe
from .. import emit_peek as peek
from ..model import camel
from ..runtime_names import (
    numeric_binding,
)
from .base import Item


class Decoders:
    """The checked decoder of a layout, field by field."""

    def decoder(self, rec: ir.Record, lay: ir.Layout) -> list[str]:
        """``_d_<record><suffix>``, and its twins (``twins``) where it gets them."""
        lines = self.built_once("d", rec, lay, self.checked_decoder)
        if self._inline_stack or self._no_twin or rec.version_from \
                or not self.twin_wanted(rec.name):
            return lines
        if len(rec.layouts) == 1:
            twin = self.optimistic(rec, lines)
        elif lay.order:
            twin = self.optimistic(rec, lines, rec.name + lay.suffix)  # one per byte order
        else:
            return lines
        if not twin:
            return lines
        # the twin reads; the checked decoder re-reads only what the twin could not (and
        # gives the error): its sub-records are calls, not inlined bodies, the module is
        # smaller by that and nothing slower (bench/twins.py)
        return self.calling_decoder(rec, lay) + twin

    def calling_decoder(self, rec: ir.Record, lay: ir.Layout) -> list[str]:
        """The checked decoder of ``lay`` with every sub-record called, not inlined."""
        sub = self.sub_emitter(share_checked=False)  # its checked code is not built_once's
        sub._no_twin = True
        sub.INLINE_MAX_LINES = 0
        return sub.checked_decoder(rec, lay)

    def checked_decoder(self, rec: ir.Record, lay: ir.Layout) -> list[str]:
        """The checked decoder of ``lay``, field by field."""
        params = "".join(f", p_{p}" for p in rec.params)
        self.lay_name = rec.name + lay.suffix
        self.cur_rec = rec
        lines = [f"def _d_{rec.name}{lay.suffix}(mv, pos, end{params}):",
                 "    start = pos"]
        spans = self.spans_needed(lay)
        body: list[str] = []
        run: list[Item] = []
        bound: set[str] = set()

        def res(name: str) -> str:
            if name in rec.params:
                return f"p_{name}"
            if name == "_remaining":
                return "(end - pos)"
            if name == "_offset":
                return "(pos - start)"
            return f"f_{name}"

        # a sub-value lacking the attribute (another switch case, an absent optional) is
        # a decode error; a present sub-record that has the field is read directly
        by_name = {f.name: f for f in lay.fields}

        def attr(obj: str, a: str) -> str:
            f = by_name.get(obj[2:]) if obj.startswith("f_") else None
            if f is not None and f.cond is None and f.since is None and f.until is None \
                    and f.repeat is None and isinstance(f.type, ir.RefT) \
                    and f.type.kind == "record" and f.type.target in self.family.records \
                    and a in self.model_names(self.family.records[f.type.target]):
                return f"{obj}.{a}"
            return f"_attr({obj}, {a!r}, pos, {a!r})"

        res.attr = attr  # type: ignore[attr-defined]
        # int(x, base) over bytes that are not digits: a decode error of the field read
        res.call = lambda fn, args: (  # type: ignore[attr-defined]
            f"_int_of({args}, offset=pos, path={getattr(self, '_dec_field', '')!r})")
        self.dec_res = res

        def flush() -> None:
            if run:
                body.extend(self.decode_run(rec, run, spans))
                for it in run:
                    bound.add(it.field.name)
                run.clear()

        self.lay = lay
        for f in lay.fields:
            if f.checksum is not None:
                flush()
            role = self.run_role(f)
            if role is not None and not self.compatible(run, f, role):
                flush()
            if role == "value":
                self.add_run_item(run, f, "value")
                continue
            if role is not None:
                self.add_run_item(run, f, role)
                flush()
                body.extend(self.decode_field(rec, f, res, spans, prefixed=True))
                continue
            flush()
            body.extend(self.decode_field(rec, f, res, spans))
            body += bitfields.extract(self, [f], "f_")  # the model's bit ranges
        flush()
        body += bitfields.virtuals(rec, res, "f_")
        present = {f.name for f in lay.fields} | {p.name for f in lay.fields for p in f.bits} \
            | {v.name for v in rec.virtuals}
        vals = [f"f_{f.name}" if f.name in present else defaults.absent(f, self.family)
                for f in rec.model_fields]
        lines += ["    " + b for b in body]
        lines += ["    " + x for x in self.construct(rec, vals, "_obj")]
        lines.append("    return _obj, pos")
        return self.drop_unused_start(lines)

    def decode_field(self, rec: ir.Record, f: ir.Field, res, spans: set[str],
                     prefixed: bool = False) -> list[str]:
        if f.peek:
            return peek.decode_lines(self, rec, f)
        out: list[str] = []
        name = f.name
        self._dec_field = name  # the path checked expression functions report
        want_span = name in spans
        if f.asserts:
            out.append(f"_a_{name} = pos")
        if name in spans.s and not prefixed:
            out.append(f"_s_{name} = pos")
        inner = self.decode_value(rec, f, res, prefixed)
        if f.chain is not None:
            inner = [f"f__chain = {f.chain.first.render(res)}"] + inner
        if f.convert is not None:
            inner = ["_cva = pos"] + inner + [
                f"f_{name} = _convert_decode({numeric_binding(f.convert)}, f_{name}, _cva, "
                f"{name!r})"]
        sized = self.decode_sized(f, res, inner) if f.size is not None else inner
        if f.compressed is not None:
            # the declared size bounds the *decompressed* bytes (enforced exactly there)
            inner = self.decode_compressed(rec, f, res, inner, sized, want_span)
        else:
            inner = sized
        if f.cond is not None:
            out.append(f"if {f.cond.render(res)}:")
            out += ["    " + x for x in inner]
            out.append("else:")
            out.append(f"    f_{name} = {defaults.absent(f, self.family)}")
            if f.compressed is not None and want_span:
                out.append(f"    _plain_{name} = b''")
        else:
            out += inner
        if name in spans.e:
            out.append(f"_e_{name} = pos")
        if f.checksum is not None and not self.is_late(f):
            check = self.checksum_check(f, f"pos - {self.ck_width(f.type)}")  # its start
            out += [f"if f_{name} is not None:"] + ["    " + x for x in check] if f.cond \
                else check
        out += self.late_checks(f)
        out += self.assert_lines(rec, f, f"_a_{name}")
        return out

    def decode_sized(self, f: ir.Field, res, inner: list[str]) -> list[str]:
        size = f.size.render(res)
        out = [f"_n = {size}",
               "if _n < 0:",
               f"    raise ConstraintError('negative size', offset=pos, path={f.name!r}, "
               "expected='>= 0', found=_n)",
               "if pos + _n > end:",
               f"    raise TruncatedError('section needs ' + str(_n) + ' bytes', offset=pos, "
               f"path={f.name!r}, expected=_n, found=end - pos)",
               f"_outer_end_{f.name} = end",
               "end = pos + _n",
               f"_sec_{f.name} = pos"]
        out += inner
        out += ["if pos != end:",
                f"    raise ConstraintError('section size mismatch', offset=_sec_{f.name}, "
                f"path={f.name!r}, expected=end - _sec_{f.name}, found=pos - _sec_{f.name})",
                f"end = _outer_end_{f.name}"]
        return out

    def decode_value(self, rec: ir.Record, f: ir.Field, res, prefixed: bool) -> list[str]:
        """Decode one (possibly repeated) value into ``f_<name>``, advancing ``pos``."""
        name = f.name
        t = f.type
        if f.framing is not None:
            return emit_framing.decode_lines(self, f)
        if absent.sentinel(f) is not None:
            return absent.decode_lines(self, rec, f, res)
        if f.repeat is not None:
            return self.decode_repeat(rec, f, res, prefixed)
        return self.decode_one(rec, f, t, f"f_{name}", name, res, prefixed)

    def decode_one(self, rec: ir.Record, f: ir.Field, t: ir.Type, target: str, label: str,
                   res, prefixed: bool) -> list[str]:
        sc = self.scalar_code(t)
        if sc is not None:
            code, size, endian = sc
            st = self.const("S", f"struct.Struct({('<' if endian == 'le' else '>') + code!r})")
            item = Item(f, "value", code, size, target)
            out = [f"if pos + {size} > end:",
                   f"    raise TruncatedError('field truncated', offset=pos, path={label!r}, "
                   f"expected={size}, found=end - pos)",
                   f"{target} = {st}.unpack_from(mv, pos)[0]",
                   "_at = pos",
                   f"pos += {size}"]
            out += self.post_scalar(rec, f, item, "_at")
            return out
        if isinstance(t, ir.BytesT):
            out = []
            if t.terminator is not None:
                out += [f"_n = _find_term(mv, {t.terminator!r}, pos, end, {label!r}) - pos"]
                if t.text:
                    out += self.text_lines(target, "_n", t.text, label)
                else:
                    out.append(f"{target} = bytes(mv[pos:pos + _n])")
                out.append(f"pos += _n + {len(t.terminator)}")
                return out
            if isinstance(t.prefix, ir.VarintT):
                out += self.varint_decode(t.prefix, "_n", label + ".length")
                n = "_n"
                out += self.negative_length(t.prefix, label)
            elif t.prefix is not None:
                if prefixed:
                    n = f"n_{f.name}"
                    out += self.negative_length(t.prefix, label, n)
                else:
                    p = t.prefix
                    st = self.const("S", f"struct.Struct({('<' if p.endian == 'le' else '>') + p.code!r})")
                    out += [f"if pos + {p.size} > end:",
                            f"    raise TruncatedError('length prefix truncated', offset=pos, "
                            f"path={label + '.length'!r}, expected={p.size}, found=end - pos)",
                            f"_n = {st}.unpack_from(mv, pos)[0]",
                            f"pos += {p.size}"]
                    n = "_n"
                    out += self.negative_length(p, label)
            elif t.eos:
                n = "(end - pos)"
            else:
                out.append(f"_n = {t.size.render(res)}")
                n = "_n"
                if t.size.constant() is None:
                    out += ["if _n < 0:",
                            f"    raise ConstraintError('negative size', offset=pos, "
                            f"path={label!r}, expected='>= 0', found=_n)"]
            out += [f"if pos + {n} > end:",
                    f"    raise TruncatedError('{t.name} truncated', offset=pos, path={label!r}, "
                    f"expected={n}, found=end - pos)"]
            if t.text:
                out += self.text_lines(target, n, t.text, label)
            else:
                out.append(f"{target} = bytes(mv[pos:pos + {n}])")
            if f.reserved and f.repeat is None:
                out += efe.reserved_check(target, label)
            out.append(f"pos += {n}")
            if f.const is not None and f.repeat is None:
                out += [f"if {target} != {f.const!r}:",
                        f"    raise ConstraintError('bad magic', offset=pos - {n}, path={label!r}, "
                        f"expected={f.const!r}, found={target})"]
            return out
        if isinstance(t, ir.VarintT):
            out = ["_at = pos"] + self.varint_decode(t, target, label)
            out += self.post_scalar(rec, f, Item(f, "value", "varint", 1, target), "_at")
            return out
        if isinstance(t, ir.PaddingT) and t.arbitrary:
            return [f"_n = (-(pos - start)) % {t.align}",
                    "if pos + _n > end:",
                    f"    raise TruncatedError('padding truncated', offset=pos, path={label!r}, "
                    "expected=_n, found=end - pos)",
                    "pos += _n"]
        if isinstance(t, ir.PaddingT):
            return [f"_n = (-(pos - start)) % {t.align}",
                    "if pos + _n > end:",
                    f"    raise TruncatedError('padding truncated', offset=pos, path={label!r}, "
                    "expected=_n, found=end - pos)",
                    "if any(mv[pos:pos + _n]):",
                    f"    raise ConstraintError('padding must be zero', offset=pos, "
                    f"path={label!r})",
                    "pos += _n"]
        if isinstance(t, ir.RefT) and t.kind == "record":
            callee = self.family.records[t.target]
            args = self.call_args(callee, t.args, rec, res)
            return self.call_or_inline_decode(callee, args, target, label,
                                              byteorder.callee_suffix(callee, t.order))
        if isinstance(t, ir.SwitchT):
            out = [f"_tag = {t.on.render(res)}"]
            first = True
            for key, _lbl, target_rec in t.cases:
                kw = "if" if first else "elif"
                first = False
                out.append(f"{kw} _tag == {key!r}:")
                if target_rec is None:
                    out.append(f"    {target} = None")
                else:
                    callee = self.family.records[target_rec]
                    args = self.call_args(callee, t.args, rec, res)
                    out += ["    " + x for x in
                            self.call_or_inline_decode(callee, args, target, label,
                                              byteorder.callee_suffix(callee, t.order))]
            out.append("else:" if not first else "if True:")
            if t.default == "error":
                out.append(f"    raise ConstraintError('no case for tag', offset=pos, "
                           f"path={label!r}, expected={[k for k, _, _ in t.cases]!r}, "
                           "found=_tag)")
            elif t.default == "bytes":
                out += [f"    {target} = bytes(mv[pos:end])", "    pos = end"]
            else:
                callee = self.family.records[t.default]
                args = self.call_args(callee, t.args, rec, res)
                out += ["    " + x for x in
                        self.call_or_inline_decode(callee, args, target, label,
                                              byteorder.callee_suffix(callee, t.order))]
            return out
        raise AssertionError(f"no decoder for {t!r}")

    def decode_repeat(self, rec: ir.Record, f: ir.Field, res, prefixed: bool) -> list[str]:
        rp = f.repeat
        name = f.name
        out: list[str] = []
        if isinstance(rp.prefix, ir.VarintT):
            out += self.varint_decode(rp.prefix, "_c", name + ".count")
            count = "_c"
        elif rp.prefix is not None:
            if prefixed:
                count = f"n_{name}"
            else:
                p = rp.prefix
                st = self.const("S", f"struct.Struct({('<' if p.endian == 'le' else '>') + p.code!r})")
                out += [f"if pos + {p.size} > end:",
                        f"    raise TruncatedError('count truncated', offset=pos, "
                        f"path={name + '.count'!r}, expected={p.size}, found=end - pos)",
                        f"_c = {st}.unpack_from(mv, pos)[0]",
                        f"pos += {p.size}"]
                count = "_c"
        elif rp.count is not None:
            out.append(f"_c = {rp.count.render(res)}")
            count = "_c"
        else:
            count = None
        sc = self.scalar_code(f.type)
        elem_min = self.type_min(f.type)
        if count is not None:
            least = max(elem_min, 1)
            # one line (the inlining budget counts lines)
            out += [f"if {count} < 0 or {count} * {least} > end - pos:",
                    f"    raise (ConstraintError('negative count ' + str({count}), offset=pos, "
                    f"path={name!r}, expected='>= 0', found={count}) if {count} < 0 else "
                    f"TruncatedError('count ' + str({count}) + ' needs at least ' + "
                    f"str({count} * {least}) + ' bytes', offset=pos, path={name!r}, "
                    f"expected={count} * {least}, found=end - pos))"]
        if f.view == "packed":
            # one slice and one small object, whatever the count (runtime/packed.py)
            out += [f"f_{name} = PackedArray(bytes(mv[pos:pos + {count} * {sc[1]}]), "
                    f"{self.packed_kind(f)})",
                    f"pos += {count} * {sc[1]}"]
            return out
        if sc is not None and count is not None and not self.needs_post(f):
            code, size, endian = sc
            order = "<" if endian == "le" else ">"
            if f.view == "numpy":
                dt = self.dtype_const(order + self.np_code(code))
                out += [f"f_{name} = numpy.frombuffer(mv, {dt}, {count}, pos)",
                        f"pos += {count} * {size}"]
            elif code.endswith("s"):
                out += [f"f_{name} = [bytes(mv[pos + _i * {size}:pos + (_i + 1) * {size}]) "
                        f"for _i in range({count})]",
                        f"pos += {count} * {size}"]
            else:
                # one struct.Struct per element count, cached (bounded) per field
                rc = self.const("RC", f"{{}}  # {self.lay_name}.{name} element-count structs")
                out += [f"_st = {rc}.get({count})",
                        "if _st is None:",
                        f"    _st = struct.Struct({order!r} + str({count}) + {code!r})",
                        f"    if len({rc}) < 64:",
                        f"        {rc}[{count}] = _st",
                        f"f_{name} = list(_st.unpack_from(mv, pos))",
                        f"pos += {count} * {size}"]
            return out
        base = self.base_int(f.type)
        if sc is not None and count is not None and base is not None and base.code is None \
                and not (isinstance(f.type, ir.RefT) and f.type.kind in ("enum", "flags")) \
                and f.valid is None:
            # wide integers (i128 fixed point, u24), bounds checked above
            size = base.size
            order = "little" if base.endian == "le" else "big"
            if size == 16:
                # struct has no 128-bit code: one cached unpack of (low, high) u64 pairs for
                # the whole array, combined in one pass (measured faster than a slice and
                # an int.from_bytes per element)
                lo, hi = "Q", "q" if base.signed else "Q"
                pair = lo + hi if base.endian == "le" else hi + lo
                names = "_lo, _hi" if base.endian == "le" else "_hi, _lo"
                rc = self.const("RC", f"{{}}  # {self.lay_name}.{name} element-count structs")
                out += [f"_st = {rc}.get({count})",
                        "if _st is None:",
                        f"    _st = struct.Struct({'<' if base.endian == 'le' else '>'!r} + "
                        f"{pair!r} * {count})",
                        f"    if len({rc}) < 64:",
                        f"        {rc}[{count}] = _st",
                        "_it = iter(_st.unpack_from(mv, pos))",
                        f"f_{name} = [_hi << 64 | _lo for {names} in zip(_it, _it)]",
                        f"pos += {count} * {size}"]
                return out
            out += [f"f_{name} = [int.from_bytes(mv[_p:_p + {size}], {order!r}, "
                    f"signed={base.signed}) for _p in range(pos, pos + {count} * {size}, {size})]",
                    f"pos += {count} * {size}"]
            return out
        if f.view == "numpy":
            rec_name = f.type.target
            size = self.family.records[rec_name].layouts[0].fixed_size
            out += [f"f_{name} = numpy.frombuffer(mv, {camel(rec_name)}_DTYPE, {count}, pos)",
                    f"pos += {count} * {size}"]
            return out
        if isinstance(f.type, ir.RefT) and f.type.kind == "record" and \
                self.simple(self.family.records[f.type.target]):
            elem = self.inline_simple(self.family.records[f.type.target], "_x")
        else:
            elem = self.decode_one(rec, f, self.chained_type(f), "_x", "", res, False)
            if f.chain is not None:
                elem = ["_p0 = pos"] + elem + [f"f__chain = {self.chain_read(f, 'mv', '_p0', 'pos')}"]
        if rp.stop_on_error:
            # the first item that fails ends the list; why and where is kept on the list
            loop = ["_i = 0", "while True:", "    if pos >= end:", "        break",
                    "    _ip = pos", "    try:"]
            loop += ["        " + x for x in elem]
            loop += ["    except DecodeError as _exc:",
                     f"        f_{name}.stop = _stop_reason(_exc.prefixed('[' + str(_i) + ']')"
                     f".prefixed({name!r}), _ip)",
                     "        pos = end",
                     "        break",
                     "    if pos <= _ip:",
                     f"        f_{name}.stop = _stop_reason(ConstraintError('repeated item consumes "
                     f"no bytes', offset=_ip, path={name!r}), _ip)",
                     "        pos = end",
                     "        break",
                     f"    f_{name}.append(_x)",
                     "    _i += 1"]
            return out + [f"f_{name} = _LogList()"] + loop
        loop = ["try:"]
        if count is not None:
            loop.append(f"    for _i in range({count}):")
        elif rp.until is not None or rp.until_item is not None:
            loop += ["    _i = 0", "    while True:"]
        else:
            loop += ["    _i = 0", "    while True:", "        if pos >= end:", "            break",
                     "        _ip = pos"]
        loop += ["        " + x for x in elem]
        if rp.until is not None:
            loop += [f"        if _x == {rp.until!r}:", "            break"]
        if count is None and rp.until is None and rp.until_item is None:
            # a zero-size item would repeat forever
            loop += ["        if pos <= _ip:",
                     "            raise ConstraintError('repeated item consumes no bytes', "
                     "offset=pos, path='')"]
        loop.append(f"        f_{name}.append(_x)")
        if count is None:
            loop.append("        _i += 1")
        if rp.until_item is not None:
            cond = rp.until_item.render(lambda n: "_x" if n == "_item" else res(n))
            loop += [f"        if {cond}:", "            break"]
        loop += ["except DecodeError as _exc:",
                 f"    raise _exc.prefixed('[' + str(_i) + ']').prefixed({name!r}) from None"]
        out.append(f"f_{name} = []")
        out += loop
        return out
