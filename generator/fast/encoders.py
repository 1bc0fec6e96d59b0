"""Encoders: one ``_e_<record>(out, value, *params)`` per layout, appending to ``out``.

Each field's value is checked (ranges, constants, asserts) and written; sizes and
counts derived from later fields are patched once those are written. The many-record
twin of each encoder is built from its text afterwards (``many``).
"""

from __future__ import annotations

from .. import absent, bitfields, byteorder, defaults, emit_framing, ir
from .. import checksum_cover as cover
from .. import emit_fast_encode as efe
from .. import emit_peek as peek
from ..model import camel, enum_class
from ..runtime_names import (
    numeric_binding,
)
from .base import Item, _encode_call


class Encoders:
    """The encoder of a layout, field by field."""

    def encoder(self, rec: ir.Record, lay: ir.Layout) -> list[str]:
        """``_e_<record><suffix>``, and its many-record twin (``many``) where it gets one."""
        lines = self.built_once("e", rec, lay, self.checked_encoder)
        if not self._inline_stack and not self._no_twin and len(rec.layouts) == 1 \
                and not rec.version_from:
            lines += self.encoder_many(rec, lines)
        return lines

    def checked_encoder(self, rec: ir.Record, lay: ir.Layout) -> list[str]:
        """The encoder of ``lay``, field by field."""
        params = "".join(f", p_{p}" for p in rec.params)
        self.lay = lay
        self.cur_rec = rec
        by_name = {f.name: f for f in lay.fields}
        derived_targets: dict[str, ir.Field] = {}
        for f in lay.fields:
            if f.derived_from:
                derived_targets.setdefault(f.derived_from[1], f)

        def res(name: str) -> str:
            if name in rec.params:
                return f"p_{name}"
            if name == "_offset":
                return "(len(out) - start)"
            if name == "_remaining":  # only known while decoding
                return "_no_remaining()"
            f = by_name.get(name)
            if f is not None and f.checksum is not None:
                return f"f_{name}"  # computed by encode_checksum (never in the model)
            if f is None and any(x.name == name for x in rec.virtuals):
                return f"v.{name}"  # a value with no bytes: the model holds it
            if f is None and name in rec.bit_parts:
                return f"_bp_{name}"  # a bit range, checked up front (bitfields.checks)
            if f is None:
                return "None"  # field absent in this version
            if f.derived_from:
                kind, target = f.derived_from
                if kind == "count":
                    return f"len(v.{target})"
                if kind == "stored":
                    return f"_stored_{target}"
                if f.derived_offset:
                    return f"(_size_{target} + {f.derived_offset})"
                return f"_size_{target}"
            if f.value is not None:
                return f.value.render(res)
            if f.const is not None:
                return repr(f.const)
            return f"v.{name}"

        self.enc_res = res
        spans = self.spans_needed(lay)
        self.deferred = self.deferred_checksums(lay)
        # size-derived fields whose target is encoded later get patched afterwards
        lines = [f"def _e_{rec.name}{lay.suffix}(out, v{params}):", "    start = len(out)"]
        body: list[str] = bitfields.checks(self, lay.fields, res)  # the value's bit ranges
        body += efe.assert_checks(rec, lay, res)  # before anything is written
        run: list[Item] = []

        def flush() -> None:
            if run:
                body.extend(self.encode_run(rec, run, spans, res))
                run.clear()

        # late checksums (covering bytes at or after their place): patched once the last
        # byte they cover is written
        patches: dict[int, list[ir.Field]] = {}
        for i, f in enumerate(lay.fields):
            if f.checksum is not None:
                at = cover.anchor(lay.fields, i, encode=True)
                if at is not None:
                    patches.setdefault(at, []).append(f)

        def step(f: ir.Field) -> None:
            if f.checksum is not None:
                flush()
                body.extend(self.encode_checksum(rec, f, spans))
                return
            role = self.run_role(f)
            if role is not None and not self.compatible(run, f, role):
                flush()
            if role == "value":
                self.add_run_item(run, f, "value")
                return
            if role == "prefix":
                body.extend(self.encode_text_prep(f))
                self.add_run_item(run, f, role)
                flush()
                body.extend(self.encode_field(rec, f, res, spans, prefixed=True))
                return
            if role == "count":
                self.add_run_item(run, f, role)
                flush()
                body.extend(self.encode_field(rec, f, res, spans, prefixed=True))
                return
            flush()
            body.extend(self.encode_field(rec, f, res, spans))

        for i, f in enumerate(lay.fields):
            step(f)
            if i in patches:
                flush()
                for ck in patches[i]:
                    body.extend(self.encode_checksum(rec, ck, spans, patch=True))
        flush()
        body += efe.assert_checks(rec, lay, res, late=True)  # sizes measured by now
        lines += ["    " + b for b in body] or ["    pass"]
        lines = self.drop_unused_start(lines) if body else lines
        return self.trailing_checksum(lines)

    trailing_checksum = staticmethod(efe.trailing_checksum)

    def encode_text_prep(self, f: ir.Field) -> list[str]:
        if f.type.text:
            return [f"_b_{f.name} = v.{f.name}{_encode_call(f.type.text)}"]
        return [f"_b_{f.name} = v.{f.name}"]

    def encode_field(self, rec: ir.Record, f: ir.Field, res, spans: set[str],
                     prefixed: bool = False) -> list[str]:
        if f.peek:
            return []  # a lookahead owns no bytes
        if isinstance(f.type, ir.VarintT) and f.derived_from \
                and f.derived_from[0] == "stored":  # inserted once the frame is built
            return ([f"_s_{f.name} = len(out)"] if f.name in spans.s else []) + \
                [f"_at_{f.name} = len(out)"]
        name = f.name
        want_span = name in spans
        out: list[str] = []
        if isinstance(f.type, ir.VarintT) and f.type.fixed is not None \
                and f.derived_from and f.derived_from[0] == "size":
            # a fixed-width kind: a placeholder, patched in place once the size is known
            return ([f"_s_{name} = len(out)"] if name in spans.s else []) + \
                [f"_at_{name} = len(out)", f"out += bytes({f.type.fixed})"] + \
                ([f"_e_{name} = len(out)"] if name in spans.e else [])
        if isinstance(f.type, ir.VarintT) and f.derived_from and f.derived_from[0] == "size":
            # written once its field's size is known (``insert_varint_size``)
            return ([f"_s_{name} = len(out)"] if name in spans.s else []) + \
                [f"_at_{name} = len(out)"]
        if name in spans.s and not prefixed:
            out.append(f"_s_{name} = len(out)")
        val = f"v.{name}"
        if f.convert is not None:
            val = f"_convert_encode({numeric_binding(f.convert)}, v.{name}, {name!r})"
        inner = self.encode_value(rec, f, val, res, prefixed)
        if absent.sentinel(f) is not None:
            inner = absent.encode_lines(self, rec, f, inner, spans)
        if f.chain is not None:
            inner = [f"f__chain = {f.chain.first.render(res)}"] + inner
        size_target = None
        for other in self.lay.fields:
            if other.derived_from == ("size", name):
                size_target = other
        if f.compressed is not None:
            self.cur_spans = spans  # a varint stored size is inserted (and moves spans)
            inner = self.encode_compressed(f, inner, res, want_span, size_target)
        elif size_target is not None:
            inner = ["_ps = len(out)"] + inner + [f"_size_{name} = len(out) - _ps"]
        else:  # a size the encoder cannot derive: what it wrote must agree with it
            inner = efe.size_checked(rec, f, inner, res)
        if size_target is not None and isinstance(size_target.type, ir.VarintT) \
                and size_target.type.fixed is not None:
            k = f" + {size_target.derived_offset}" if size_target.derived_offset else ""
            inner.append(self.ck_packers(size_target.type)[1](
                f"_at_{size_target.name}", f"_size_{name}{k}"))
        elif size_target is not None and isinstance(size_target.type, ir.VarintT):
            inner += self.insert_varint_size(size_target, f, spans)
        elif size_target is not None:
            st = self.patch_struct(size_target)
            k = f" + {size_target.derived_offset}" if size_target.derived_offset else ""
            inner.append(f"{st}.pack_into(out, _at_{size_target.name}, _size_{name}{k})")
        for ck in self.deferred.get(name, ()):
            inner += self.encode_checksum(rec, ck, spans, patch=True)
        own = efe.own_size_names(f, self.lay.fields)
        if own:  # the condition reads a size of the field itself: measured, then checked
            out += efe.own_size_cond(f, inner, f.cond.render(res), own)
        elif f.cond is not None:
            inner = efe.fixed_bytes_check(f) + inner
            if ("_remaining" in f.cond.names or f.cond.names & peek.peeked(rec)) and f.in_model:
                out.append(f"if v.{name} is not None:")  # presence is the value's, on encode
            else:
                out.append(f"if {f.cond.render(res)}:")
            out += ["    " + x for x in inner]
            if f.in_model:
                dflt = (f" and v.{name} != {defaults.code(f, self.family)}"
                        if f.has_default and f.default is not None else "")
                out += [f"elif v.{name} is not None{dflt}:",
                        f"    raise EncodeError('field is present but its condition is false', "
                        f"path={name!r})"]
            if want_span and f.compressed is not None:
                out += ["else:", f"    _plain_{name} = b''"]
        else:
            out += inner
        if name in spans.e:
            out.append(f"_e_{name} = len(out)")
        return out

    def encode_value(self, rec: ir.Record, f: ir.Field, val: str, res,
                     prefixed: bool) -> list[str]:
        if f.framing is not None:
            return emit_framing.encode_lines(self, f, val)
        if f.repeat is not None:
            return self.encode_repeat(rec, f, val, res, prefixed)
        return self.encode_one(rec, f, f.type, val, res, prefixed)

    def encode_one(self, rec: ir.Record, f: ir.Field, t: ir.Type, val: str, res,
                   prefixed: bool) -> list[str]:
        sc = self.scalar_code(t)
        if sc is not None:
            code, size, endian = sc
            st = self.const("S", f"struct.Struct({('<' if endian == 'le' else '>') + code!r})")
            item = Item(f, "value", code, size, "")
            if val == f"v.{f.name}":
                v2 = self.scalar_value(f, item, res)
            else:
                v2 = val
                if isinstance(t, ir.RefT) and t.kind == "flags":
                    v2 = f"{val}.to_int()"
                elif isinstance(t, ir.RefT) and t.kind == "enum" and not self.family.enums[t.target].open:
                    v2 = f"_{enum_class(t.target).upper()}_BY_VALUE[{val}]"  # KeyError: not one
                base = self.base_int(t)
                if base is not None and code.endswith("s"):
                    order = "little" if base.endian == "le" else "big"
                    v2 = f"({v2}).to_bytes({base.size}, {order!r}, signed={base.signed})"
            return [f"out += {st}.pack({v2})"]
        if isinstance(t, ir.BytesT):
            if f.reserved and val == f"v.{f.name}":  # not in the model: zeros
                return efe.reserved_bytes(f, t, res)
            if prefixed:
                return [f"out += _b_{f.name}"]
            b = f"{val}{_encode_call(t.text)}" if t.text else val
            out = [f"_b = {b}"]
            if t.terminator is not None:
                return out + [f"if {t.terminator!r} in _b:",
                              f"    raise EncodeError('value contains the terminator "
                              f"{t.terminator.hex()}', path={f.name!r})",
                              f"out += _b + {t.terminator!r}"]
            if isinstance(t.prefix, ir.VarintT):
                out.append(f"out += {self.varint_encode(t.prefix, 'len(_b)')}")
            elif t.prefix is not None:
                p = t.prefix
                st = self.const("S", f"struct.Struct({('<' if p.endian == 'le' else '>') + p.code!r})")
                out.append(f"out += {st}.pack(len(_b))")
            elif t.size is not None and not t.eos and "_remaining" not in t.size.names \
                    and not any(o.derived_from == ("size", f.name) for o in self.lay.fields):
                out += [f"if len(_b) != {t.size.render(res)}:",
                        f"    raise EncodeError('wrong length ' + str(len(_b)), path={f.name!r})"]
            out.append("out += _b")
            return out
        if isinstance(t, ir.VarintT):
            if val == f"v.{f.name}":  # const/value/derived count: computed, as in runs
                if f.const is not None:
                    val = repr(f.const)
                elif f.reserved:
                    val = "0"
                elif f.derived_from and f.derived_from[0] == "count":
                    val = f"len(v.{f.derived_from[1]})"
                elif f.value is not None:
                    val = f.value.render(res)
            if f.valid is not None and f.in_model and f.repeat is None \
                    and f.convert is None and val == f"v.{f.name}":
                # the decoder's range: a value outside it would not read back
                return efe.valid_check(f, val) + [f"out += {self.varint_encode(t, val)}"]
            return [f"out += {self.varint_encode(t, val)}"]
        if isinstance(t, ir.PaddingT):
            return [f"out += bytes((-(len(out) - start)) % {t.align})"]
        if isinstance(t, ir.RefT) and t.kind == "record":
            callee = self.family.records[t.target]
            args = self.call_args(callee, t.args, rec, res)
            return self.call_or_inline_encode(callee, args, val,
                                              byteorder.callee_suffix(callee, t.order))
        if isinstance(t, ir.SwitchT):
            out = [f"_tag = {t.on.render(res)}"]
            first = True
            for key, lbl, target_rec in t.cases:
                out.append(f"{'if' if first else 'elif'} _tag == {key!r}:")
                first = False
                if target_rec is None:
                    out += [f"    if {val} is not None:",
                            f"        raise EncodeError('case {lbl} carries no body', "
                            f"path={f.name!r})"]
                else:
                    callee = self.family.records[target_rec]
                    args = self.call_args(callee, t.args, rec, res)
                    out += ["    " + x for x in efe.case_check(val, camel(target_rec), lbl, f.name)
                            + self.call_or_inline_encode(callee, args, val,
                                              byteorder.callee_suffix(callee, t.order))]
            out.append("else:" if not first else "if True:")
            if t.default == "error":
                out.append(f"    raise EncodeError('no case for tag ' + repr(_tag), "
                           f"path={f.name!r})")
            elif t.default == "bytes":
                out.append(f"    out += {val}")
            else:
                callee = self.family.records[t.default]
                args = self.call_args(callee, t.args, rec, res)
                out += ["    " + x for x in self.call_or_inline_encode(callee, args, val,
                                              byteorder.callee_suffix(callee, t.order))]
            return out
        raise AssertionError(f"no encoder for {t!r}")

    def encode_repeat(self, rec: ir.Record, f: ir.Field, val: str, res,
                      prefixed: bool) -> list[str]:
        rp = f.repeat
        out: list[str] = []
        if isinstance(rp.prefix, ir.VarintT):
            out.append(f"out += {self.varint_encode(rp.prefix, f'len({val})')}")
        elif rp.prefix is not None and not prefixed:
            p = rp.prefix
            st = self.const("S", f"struct.Struct({('<' if p.endian == 'le' else '>') + p.code!r})")
            out.append(f"out += {st}.pack(len({val}))")
        if rp.count is not None:
            out += [f"if len({val}) != {rp.count.render(res)}:",
                    f"    raise EncodeError('expected ' + str({rp.count.render(res)}) + "
                    f"' items, found ' + str(len({val})), path={f.name!r})"]
        if rp.until_item is not None:
            cond = rp.until_item.render(lambda n: "_x" if n == "_item" else res(n))
            out += [f"for _j, _x in enumerate({val}):",
                    f"    if bool({cond}) != (_j == len({val}) - 1):",
                    f"        raise EncodeError('repeat-until condition must hold on the last "
                    f"item and only there', path={f.name!r})"]
        sc = self.scalar_code(f.type)
        if f.view == "packed":
            kind = self.packed_kind(f)
            out += [f"if {val}.__class__ is PackedArray and {val}.kind is {kind}:",
                    f"    out += {val}.raw",  # the bytes as decoded: no conversion
                    "else:",
                    f"    out += {kind}.encode_all({val})"]
            return out
        if sc is not None and not self.needs_post(f) and rp.until is None:
            code, size, endian = sc
            order = "<" if endian == "le" else ">"
            if f.view == "numpy":
                out.append(f"out += numpy.asarray({val}, "
                           f"dtype={order + self.np_code(code)!r}).tobytes()")
            elif code.endswith("s"):
                out.append(f"out += b''.join({val})")
            else:
                out.append(f"out += struct.pack({order!r} + str(len({val})) + {code!r}, *{val})")
            return out
        if f.view == "numpy":
            out.append(f"out += numpy.ascontiguousarray({val}).tobytes()")
            return out
        base = self.base_int(f.type)
        if sc is not None and base is not None and base.code is None and rp.until is None \
                and f.chain is None and f.valid is None and f.const is None \
                and not f.reserved and not (isinstance(f.type, ir.RefT)
                                            and f.type.kind in ("enum", "flags")):
            # wide integers: one join instead of a pack call per element (an out-of-range
            # item raises OverflowError, reported by encode_<record> as before)
            order = "little" if base.endian == "le" else "big"
            out.append(f"out += b''.join([_x.to_bytes({base.size}, {order!r}, "
                       f"signed={base.signed}) for _x in {val}])")
            return out
        if isinstance(f.type, ir.RefT) and f.type.kind == "record" and rp.until is None \
                and f.chain is None and self.simple(self.family.records[f.type.target]):
            elem = self.inline_simple_encode(self.family.records[f.type.target], "_x", res)
        elif f.chain is not None:  # the previous item's stored value, passed as a param
            def chained_res(n: str) -> str:
                return "f__chain" if n == "_chain" else res(n)
            elem = (["_p0 = len(out)"]
                    + self.encode_one(rec, f, self.chained_type(f), "_x", chained_res, False)
                    + [f"f__chain = {self.chain_read(f, 'out', '_p0', 'len(out)')}"])
        else:
            elem = self.encode_one(rec, f, f.type, "_x", res, False)
        out.append(f"for _x in {val}:")
        if rp.until is not None:
            out += [f"    if _x == {rp.until!r}:",
                    f"        raise EncodeError('an item equals the terminator {rp.until!r}', "
                    f"path={f.name!r})"]
        out += ["    " + x for x in elem]
        if rp.until is not None:
            out += self.encode_one(rec, f, f.type, repr(rp.until), res, False)
        return out
