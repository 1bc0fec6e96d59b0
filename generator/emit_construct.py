"""Pass 4b: emit the Construct definitions (the readable reference path).

One ``Struct`` per record covering every version: ``since``/``until`` become ``If`` on
the version expression, so the definition reads like the spec table. Expressions are
``Code(source, lambda)`` over ``this`` (fields) and ``this['_params']`` (parameters): the
lambda runs interpreted, the source is inlined by ``compile()``. Every class emitted has
an ``_emitparse`` and an ``_emitbuild`` (bytewright.runtime.codec;
tests/test_construct_compile.py), so ``Struct.compile()`` compiles every record whole, both
ways, with fixed runs read in one unpack and nested records flattened into their parent.
Converters map the resulting Containers to the shared object model and back; where a
conversion cannot fail, ``_f2m_<record>`` does the same from the field values and the
compiled parse calls it, building the model instead of a Container (``model_lines``).
"""

from __future__ import annotations

import dataclasses
import re

from ..runtime.field_names import FIELD_NAMES as _FIELD_NAMES
from . import absent as absent_values
from . import bitfields, byteorder, defaults, emit_framing, ir
from . import checksum_cover as cover
from . import emit_peek as peek
from .emit_fast import FastEmitter
from .emit_fast_encode import fast_runs, late_rule, measured, needs_roundtrip, value_rule
from .expr import parse
from .layout import numpy_code
from .model import call_args, camel, enum_class, flags_class
from .runtime_names import (
    chain_anchor,
    checksum_binding,
    checksum_call,
    codec_table,
    intkind_binding,
    numeric_binding,
)

_INT_NAMES = {(8, False): "Int8u", (8, True): "Int8s", (16, False): "Int16u",
              (16, True): "Int16s", (24, False): "Int24u", (24, True): "Int24s",
              (32, False): "Int32u", (32, True): "Int32s", (64, False): "Int64u",
              (64, True): "Int64s"}


# Construct classes of bytewright.runtime.codec that compile tighter than Construct's own
# (a record's fixed runs in one unpack, checked reads, compiled checksums): imported over
# Construct's names ahead of the first definition.
_PARSING = "this['_parsing']"  # dict reads: Container's attribute hook costs a call
_NOT_PARSING = "not this['_parsing']"
_PRELUDE = [
    "# compiled tighter than Construct's own classes (bytewright.runtime.codec)",
    "from bytewright.runtime.codec import (Array, BitFlags, Checksum, GreedyString, "
    "GreedyBytes, PackedView, PrefixedArray, StringEncoded, Struct, Switch)",
    "from bytewright.runtime.codec import packed_from as _packed_from, span_range as _span_range",
    "from bytewright.runtime.codec import FieldCheck, VersionCheck, RuleCheck as _RuleCheck",
    "from bytewright.runtime.codec import (" + ", ".join(sorted(_FIELD_NAMES)) + ")",
    "",
]


class ConstructEmitter:
    def __init__(self, family: ir.Family) -> None:
        self.family = family
        self._prelude_done = False
        # member names the Construct expressions read from a nested value (``a.b``): a
        # record with none of them is opaque (see ``model_lines``)
        self._attrs: set[str] = set()
        self.fast = FastEmitter(family)  # its run grouping and item sizes, never its output

    # -- construct expressions -------------------------------------------------------
    def int_c(self, t: ir.IntT | ir.VarintT) -> str:
        if isinstance(t, ir.VarintT):  # the fast path's exact varint rules
            if not t.legacy:  # a registered integer kind: the same bound codec
                return f"IntegerKind({intkind_binding(t)})"
            return f"Leb128({t.kind!r})"
        if t.bits == 128:
            return f"BytesInteger(16, signed={t.signed}, swapped={t.endian == 'le'})"
        return _INT_NAMES[(t.bits, t.signed)] + ("l" if t.endian == "le" else "b")

    def lam(self, e, rec: ir.Record) -> str:
        return self.code(e.render(self.res(rec)))

    @staticmethod
    def code(src: str) -> str:
        return f"Code({src!r}, lambda this: {src})"

    def version_cond(self, f: ir.Field, rec: ir.Record) -> str | None:
        if f.since is None and f.until is None:
            return None
        src = rec.version_from
        v = f"this['_params'][{src!r}]" if src in rec.params else f"this[{src!r}]"
        parts = []
        if f.since is not None:
            parts.append(f"{v} >= {f.since}")
        if f.until is not None:
            parts.append(f"{v} <= {f.until}")
        return " and ".join(parts)

    def flags_c(self, fd: ir.FlagsDef, base: ir.IntT | None = None) -> str:
        # bits numbered from the integer's least significant bit; unnamed bits must be 0
        fields = tuple((b.name, b.lo, b.width, b.width == 1 and not b.enum)
                       for b in sorted(fd.bits, key=lambda b: -b.lo))
        # without enum bit ranges the model takes the parsed bits as they are: the
        # compiled parse may build it (see ``flags_conv``)
        model = "" if any(b.enum for b in fd.bits) else f", model={flags_class(fd.name)}"
        return f"BitFlags({self.int_c(base or fd.base)}, {fields!r}{model})"

    def type_c(self, t: ir.Type, f: ir.Field, rec: ir.Record) -> str:
        if isinstance(t, ir.IntT):
            return self.int_c(t)
        if isinstance(t, ir.FloatT):
            return f"Float{t.bits}{'l' if t.endian == 'le' else 'b'}"
        if isinstance(t, ir.BytesT):
            enc = "utf8" if t.text == "utf-8" else t.text
            if t.terminator is not None:
                return f"TerminatedBytes({t.terminator!r}, {t.text!r})"
            if t.prefix is not None:
                pc = self.int_c(t.prefix)
                return f"PascalString({pc}, {enc!r})" if t.text else f"Prefixed({pc}, GreedyBytes)"
            if t.eos:
                return f"GreedyString({enc!r})" if t.text else "GreedyBytes"
            c = t.size.constant()
            size = repr(c) if isinstance(c, int) else self.lam(t.size, rec)
            sized = f"StringEncoded(Bytes({size}), {enc!r})" if t.text else f"Bytes({size})"
            if any(o.derived_from == ("size", f.name) for o in rec.fields) \
                    or "_remaining" in t.size.names:
                # the size field is derived: parse by it, build whatever bytes are given
                # (the size expression reads offsets that exist only once they are built)
                rest = f"GreedyString({enc!r})" if t.text else "GreedyBytes"
                return f"IfThenElse({self.code(_PARSING)}, {sized}, {rest})"
            return sized
        if isinstance(t, ir.VarintT):
            return self.int_c(t)
        if isinstance(t, ir.PaddingT):
            pad = "(-(this['_io'].tell() - this['_o_start'])) % " + str(t.align)
            return (f"ZeroPadding({self.code(pad)}"
                    f"{', True' if t.arbitrary else ''})")
        if isinstance(t, ir.RefT):
            if t.kind == "enum":
                e = self.family.enums[t.target]
                base = byteorder.base_of(self.family, t)  # in the layout's byte order
                if e.open:
                    return self.int_c(base)
                # closed: refused while parsing, as on the fast path
                values = tuple(sorted(m.value for m in e.members))
                return (f"ClosedEnum({self.int_c(base)}, {enum_class(e.name)!r}, {values!r}, "
                        f"{tuple(e.retired)!r})")
            if t.kind == "alias":
                return self.int_c(byteorder.base_of(self.family, t))
            if t.kind == "flags":
                return self.flags_c(self.family.flags[t.target], byteorder.base_of(self.family, t))
            return self.with_params(t.target, t.args, rec, t.order)
        if isinstance(t, ir.SwitchT):
            cases = []
            for key, _, target in t.cases:
                sub = "Pass" if target is None else self.with_params(target, t.args, rec, t.order)
                cases.append(f"{key!r}: {sub}")
            default = {"error": "Error", "bytes": "GreedyBytes"}.get(t.default)
            if default is None:
                default = self.with_params(t.default, t.args, rec, t.order)
            return (f"Switch({self.lam(t.on, rec)}, {{{', '.join(cases)}}}, "
                    f"default={default})")
        raise AssertionError(t)

    def with_params(self, target: str, args, rec: ir.Record, order: str | None = None) -> str:
        callee = self.family.records[target]
        given = dict(args)
        items = []
        for p in callee.params.values():
            if p.name not in given and p.name not in rec.params and p.default is not None:
                items.append(f"{p.name!r}: {self.code(repr(p.default))}")
            elif p.name in given:
                src = given[p.name].render(self.res(rec))
                if p.type in self.family.enums:  # hand the callee the enum, as the fast path does
                    src = f"_enum_value({enum_class(p.type)}, {src}, True)"
                items.append(f"{p.name!r}: {self.code(src)}")
        cname = f"C_{target}{byteorder.callee_suffix(callee, order)}"
        if not items:
            return cname
        return f"WithParams({cname}, {{{', '.join(items)}}})"

    def field_c(self, f: ir.Field, rec: ir.Record, lay_fields: list[ir.Field],
                spans: set[str]) -> list[str]:
        """The Struct members for one field (Tell markers and patches included)."""
        out: list[str] = []
        name = f.name
        base = self.type_c(f.type, f, rec)
        if f.const is not None:
            if isinstance(f.const, bytes):
                base = f"Const({f.const!r})"
            else:
                base = f"Const({f.const!r}, {base})"
        elif f.reserved and isinstance(f.type, ir.BytesT) and f.type.eos:
            # zero bytes to the end: every byte checked on parse, none written on build
            base = f"ZeroPadding({self.code('_remaining(this)')})"
        elif f.reserved and isinstance(f.type, ir.BytesT) and f.type.size is not None \
                and f.type.size.constant() is None:
            # zero bytes of a computed size: checked on parse, written as zeros on build
            base = f"ZeroPadding({self.lam(f.type.size, rec)})"
        elif f.reserved:
            zero = "0" if not isinstance(f.type, ir.BytesT) else repr(bytes(
                f.type.size.constant()))
            base = f"Const({zero}, {base})" if zero == "0" else f"Const({zero})"
        if f.chain is not None and f.repeat is not None and f.chain.decoded:
            base = peek.construct_chain(self, f, rec)
        elif f.chain is not None and f.repeat is not None:
            # items get the previous item's stored value as a param (chained checksums)
            side, k, it = chain_anchor(self.family, f, f.type.order)
            fmt = ("<" if it.endian == "le" else ">") + it.code
            args = tuple(a for a in f.type.args if a[0] != f.chain.param) + (
                (f.chain.param, parse("_chain")),)
            elem = self.with_params(f.type.target, args, rec, f.type.order)
            count = self.lam(f.repeat.count, rec) if f.repeat.count is not None else "None"
            stop = ", stop_on_error=True" if getattr(f.repeat, "stop_on_error", False) else ""
            base = (f"ChainedRepeat({elem}, {count}, {self.lam(f.chain.first, rec)}, "
                    f"{fmt!r}, {k}, {side == 'end'}{stop})")
        elif f.framing is not None:
            base = emit_framing.construct_member(rec, f)
        elif f.repeat is not None:
            rp = f.repeat
            least = max(self.fast.type_min(f.type), 1)  # bytes an item takes at least
            least = f", min_size={least}" if least > 1 else ""
            if rp.prefix is not None:
                base = f"PrefixedArray({self.int_c(rp.prefix)}, {base}{least})"
                if f.view == "packed":
                    base = f"PackedView({base}, {self.packed_kind(f)})"
            elif rp.count is not None and f.view == "numpy":
                # bit-exact (NaN payloads kept), as the fast path's numpy.frombuffer
                base = f"NumpyArray({self.lam(rp.count, rec)}, {self.np_dtype(f)})"
            elif rp.count is not None:
                base = f"Array({self.lam(rp.count, rec)}, {base}{least})"
                if f.view == "packed":  # compiled: the bytes read kept as they are
                    base = f"PackedView({base}, {self.packed_kind(f)})"
            elif rp.until is not None:
                base = f"Terminated({base}, {rp.until!r})"
            elif rp.until_item is not None:
                r0 = self.res(rec)
                cond = rp.until_item.render(lambda n: "this._last" if n == "_item" else r0(n))
                base = f"RepeatUntil({base}, {self.code(cond)})"
            elif rp.stop_on_error:
                base = f"RepeatToEnd({base}, stop_on_error=True)"
            else:
                base = f"RepeatToEnd({base})"  # strict: a partial last item is an error
        if f.convert is not None:
            base = f"Converted({base}, {numeric_binding(f.convert)}, name={name!r})"
        if absent_values.sentinel(f) is not None:
            base = absent_values.construct(self, f, base)
        derived_size = any(o.derived_from == ("size", name) for o in rec.fields)
        if f.compressed is not None:
            c = f.compressed
            expected = self.code(f"({f.size.render(self.res(rec))}) if this['_parsing'] else None") \
                if f.size is not None else "None"
            limit = (self.lam(c.limit, rec) if c.limit is not None else
                     self.lam(f.size, rec) if f.size is not None else "None")
            length = self.int_c(c.length) if c.length is not None else "None"
            codecs = f", codecs={codec_table(self.family, rec, c)!r}" if c.codecs else ""
            stored = f", stored={self.code(f'this[{c.stored!r}]')}" if c.stored else ""
            comp = (f"Compressed({base}, {self.lam(c.algorithm, rec)}, "
                    f"{length}, expected_size={expected}, limit={limit}, "
                    f"name={name!r}{codecs}{stored})")
            if c.when is not None:
                plain = base
                if f.size is not None:  # uncompressed, the size bounds it as on the fast path
                    plain = f"FixedSized({self.lam(f.size, rec)}, {base})"
                    if derived_size:
                        plain = f"IfThenElse({self.code(_PARSING)}, {plain}, {base})"
                if c.stored is not None:  # stored as it is: its stored size bounds it
                    bound = self.code(f"this[{c.stored!r}]")
                    plain = f"IfThenElse({self.code(_PARSING)}, FixedSized({bound}, {plain}), {plain})"
                base = (f"IfThenElse({self.lam(c.when, rec)}, {comp}, "
                        f"Plain({plain}, name={name!r}))")
            else:
                base = comp
        elif f.size is not None and not derived_size and "_remaining" not in f.size.names:
            base = f"FixedSized({self.lam(f.size, rec)}, {base})"
        elif f.size is not None:
            # a derived size bounds the parse; on build the size is measured and patched
            # (bytes left are known only while parsing: the encoder checks by decoding)
            base = (f"IfThenElse({self.code(_PARSING)}, "
                    f"FixedSized({self.lam(f.size, rec)}, {base}), {base})")
        if f.derived_from:
            kind, target = f.derived_from
            if kind == "count":
                base = f"Rebuild({base}, {self.code(f'len(this[{target!r}])')})"
            elif isinstance(f.type, ir.VarintT):
                # a varint's width depends on its value: build it from the real size up
                # front (a patched placeholder would have the wrong width)
                base = f"Rebuild({base}, {self.code(self.measure_ahead(f, rec))})"
            else:
                out.append(f"'_o_{name}' / Tell,")
                base = f"Rebuild({base}, 0)"
        if f.value is not None:
            base = f"Rebuild({base}, {self.lam(f.value, rec)})"
        late = f.checksum is not None and \
            cover.anchor(lay_fields, lay_fields.index(f), encode=True) is not None
        if late:
            # read as it is; checked (and on build patched over its placeholder, the
            # filler) by a LateChecksum member after the last field it covers
            out.append(f"'_o_{name}' / Tell,")
            fill = cover.filler_bytes(f.checksum, self.fast.ck_width(f.type))
            it = self.fast.base_int(f.type)
            if it is not None:
                fill = int.from_bytes(fill, "little" if it.endian == "le" else "big",
                                      signed=it.signed)
            if isinstance(f.type, ir.VarintT):  # a fixed-width kind: the filler's bytes
                base = (f"Rebuild(IfThenElse({self.code(_PARSING)}, {base}, "
                        f"Bytes({len(fill)})), {fill!r})")
            else:
                base = f"Rebuild({base}, {fill!r})"
        elif f.checksum is not None:
            if any(f is c for cks in self.deferred_checksums(lay_fields).values() for c in cks):
                out.append(f"'_o_{name}' / Tell,")
            index = lay_fields.index(f)
            pieces = self.checksum_pieces(lay_fields, index)
            ck = f.checksum
            data = self.span_expr(lay_fields, index, pieces)
            if ck.seed is None and not ck.params:
                fn = checksum_binding(ck)
                base = f"Checksum({base}, Code({fn!r}, {fn}), {self.code(data)})"
            else:  # seed/params need the context: compute it all in the bytes function
                base = (f"Checksum({base}, Code('_bw.identity', lambda _v: _v), "
                        f"{self.code(checksum_call(ck, data, self.res(rec)))})")
        if f.peek:
            base = peek.construct_member(self, f, base)
        cond = f.cond.render(self.res(rec)) if f.cond is not None else None
        if cond is not None and ("_remaining" in f.cond.names
                                 or f.cond.names & peek.peeked(rec)):
            # bytes left are known only while parsing; on build the value says it
            cond = f"({cond}) if this['_parsing'] else this[{name!r}] is not None"
        vcond = self.version_cond(f, rec)
        conds = [c for c in (vcond, cond) if c]
        if conds:
            base = f"If({self.code(' and '.join(f'({c})' for c in conds))}, {base})"
        if f.cond is not None and f.in_model and value_rule(rec, f, f.cond.names):
            # a value the condition leaves out would be dropped silently on build
            rule = f"this['_parsing'] or ({cond}) or this.get({name!r}) is None"
            if f.has_default and f.default is not None:  # absent holding its default
                rule += f" or this.get({name!r}) == {defaults.code(f, self.family)}"
            out.append(f"FieldCheck({self.code(rule)}, {name!r}),")
        if name in spans:
            out.append(f"'_s_{name}' / Tell,")
        out.append(f"{name!r} / {base},")
        if name in spans:
            out.append(f"'_e_{name}' / Tell,")
        if f.valid is not None and not isinstance(f.type, ir.SwitchT):
            lo, hi = f.valid
            x = "_x" if f.repeat is not None else f"this[{name!r}]"
            parts = ([f"{lo} <= {x}"] if lo is not None else []) + \
                ([f"{x} <= {hi}"] if hi is not None else [])
            rule = " and ".join(parts) or "True"
            if f.repeat is not None:
                rule = f"all({rule} for _x in this[{name!r}])"
            guard = f"this[{name!r}] is None or " if conds else ""
            # a given value is held to the range on build too (written, it would not decode)
            counted = f.derived_from is not None and f.derived_from[0] == "count"
            when = "" if f.in_model or counted else _NOT_PARSING + " or "
            out.append(f"Check({self.code(when + f'{guard}({rule})')}),")
        if rec.version_range is not None and name == rec.version_from:
            lo, hi = rec.version_range
            when = "" if f.in_model else _NOT_PARSING + " or "  # a given version: on build too
            out.append(f"VersionCheck({self.code(when + f'{lo} <= this[{name!r}] <= {hi}')}, "
                       f"{rec.name!r}, {name!r}, '{lo}..{hi}'),")
        for a in f.asserts:
            guard = f"this[{name!r}] is None or " if conds else ""
            # a rule on given values is held on build too (see emit_fast_encode.value_rule)
            when = "" if value_rule(rec, f, a.check.names) else _NOT_PARSING + " or "
            rule = self.code(when + f'{guard}({a.check.render(self.res(rec))})')
            if a.error == "unsupported":  # the fast path's class, message and field
                out.append(f"VersionCheck({rule}, {rec.name!r}, {name!r}, "
                           f"{a.check.source!r}, {a.message!r}),")
            else:  # the rule's own message (on a bit field: its name), as the fast path
                out.append(f"_RuleCheck({rule}, {(a.path or name)!r}, {a.check.source!r}, "
                           f"{a.message!r}),")
        stored_f = next((o for o in rec.fields if o.derived_from == ("stored", name)), None)
        if stored_f is not None and not isinstance(stored_f.type, ir.VarintT):
            # the compressed byte count, patched over its placeholder
            measure = self.stored_measure(name)
            out.append(f"'_patch_{stored_f.name}' / Pointer("
                       f"{self.code(f'this[{chr(39)}_o_{stored_f.name}{chr(39)}]')}, "
                       f"Rebuild({self.type_c(stored_f.type, stored_f, rec)}, "
                       f"{self.code(measure)})),")
        if derived_size:
            size_field = next(o for o in rec.fields if o.derived_from == ("size", name))
            if f.compressed is not None:
                measure = f"len(this['_plain_{name}'])"
            else:
                measure = f"this['_e_{name}'] - this['_s_{name}']"
            if size_field.derived_offset:
                measure = f"({measure} + {size_field.derived_offset})"
            ic = self.type_c(size_field.type, size_field, rec)
            if not isinstance(size_field.type, ir.VarintT):
                out.append(f"'_patch_{size_field.name}' / Pointer("
                           f"{self.code(f'this[{chr(39)}_o_{size_field.name}{chr(39)}]')}, "
                           f"Rebuild({ic}, {self.code(measure)})),")
            if f.compressed is None:
                absent = f" or this[{name!r}] is None" if conds else ""  # nothing was read
                out.append(f"Check({self.code(_NOT_PARSING + absent + f' or {measure} == this[{size_field.name!r}]')}),")
        out += self.late_members(f, rec, lay_fields)
        # checksums over a size field patched just above are rebuilt after the patch
        for ck in self.deferred_checksums(lay_fields).get(name, ()):
            pieces = self.checksum_pieces(lay_fields, lay_fields.index(ck))
            ic = self.type_c(ck.type, ck, rec)
            out.append(f"'_patch_{ck.name}' / If({self.code(_NOT_PARSING)}, Pointer("
                       f"{self.code(f'this[{chr(39)}_o_{ck.name}{chr(39)}]')}, "
                       f"Rebuild({ic}, {self.code(checksum_call(ck.checksum, f'_span(this, {pieces!r})', self.res(rec)))}))),")
        return out

    def late_members(self, f: ir.Field, rec: ir.Record, fields: list[ir.Field]) -> list[str]:
        """The checks (parse) and patches (build) of the late checksums whose last
        covered field is ``f``."""
        out = []
        at = fields.index(f)
        for i, ckf in enumerate(fields):
            if ckf.checksum is None:
                continue
            check = cover.anchor(fields, i) == at
            patch = cover.anchor(fields, i, encode=True) == at
            if not (check or patch):
                continue
            ck = ckf.checksum
            fill = cover.filler_bytes(ck, self.fast.ck_width(ckf.type))
            if ck.files:
                r = self.res(rec)
                parts = [f"_cover.stream_range(this, {a.render(r)}, {b.render(r)}, "
                         f"{ckf.name!r}, {fill!r})" for a, b in ck.files]
                data = parts[0] if len(parts) == 1 else f"b''.join(({', '.join(parts)},))"
            else:
                pieces = self.checksum_pieces(fields, i)
                data = f"_cover.span(this, {pieces!r}, {fill!r})"
            value = self.code(checksum_call(ck, data, self.res(rec)))
            field = self.type_c(ckf.type, ckf, rec)
            out.append(f"'_late_{ckf.name}' / LateChecksum({ckf.name!r}, {field}, {value}, "
                       f"{ck.algorithm!r}, check={check}, patch={patch}),")
        return out

    @staticmethod
    def span_expr(fields: list[ir.Field], index: int, pieces: list) -> str:
        """Source of the bytes a checksum covers: one read when the covered fields are
        consecutive (``_span_range``), else ``_span`` piece by piece."""
        names = [f.name for f in fields[:index]]
        if pieces and all(kind == "span" for kind, _ in pieces):
            first, last = names.index(pieces[0][1]), names.index(pieces[-1][1])
            if [n for _, n in pieces] == names[first:last + 1]:
                return f"_span_range(this, '_s_{names[first]}', '_e_{names[last]}')"
        return f"_span(this, {pieces!r})"

    def stored_ahead(self, target: ir.Field, rec: ir.Record) -> str:
        """The compressed size of ``target`` from the value to build (a varint stored size
        is built before the field, at its real width)."""
        t, v = target.type, f"this[{target.name!r}]"
        if isinstance(t, ir.BytesT) and target.repeat is None:
            plain = f"{v}.encode({t.text!r})" if t.text else f"bytes({v})"
        elif target.repeat is not None:
            plain = (f"b''.join(_build_bytes({self.type_c(t, target, rec)}, _x, this, "
                     f"{target.name!r} + '[' + str(_i) + ']') for _i, _x in enumerate({v}))")
        else:
            plain = f"_build_bytes({self.type_c(t, target, rec)}, {v}, this, {target.name!r})"
        c = target.compressed
        codecs = f", codecs={codec_table(self.family, rec, c)!r}" if c.codecs else ""
        frame = (f"len(_compress({c.algorithm.render(self.res(rec))}, {plain}, "
                 f"path={target.name!r}{codecs}))")
        if c.when is None:
            return frame
        return f"({frame} if {c.when.render(self.res(rec))} else len({plain}))"

    @staticmethod
    def stored_measure(name: str) -> str:
        """The stored byte count of compressed field ``name`` once built (its frame, or
        its plain bytes when it was stored as it is)."""
        return f"this.get('_stored_{name}', None) or len(this['_plain_{name}'])"

    def measure_ahead(self, size_f: ir.Field, rec: ir.Record) -> str:
        """The encoded size of the field a varint size counts, from the value to build."""
        target = next(o for o in rec.fields if o.name == size_f.derived_from[1])
        t, v = target.type, f"this[{target.name!r}]"
        if size_f.derived_from[0] == "stored":  # the compressed frame, built ahead
            return self.stored_ahead(target, rec)
        rp = target.repeat
        if isinstance(t, ir.BytesT) and rp is None and target.compressed is None:
            n = f"len({v}.encode({t.text!r}))" if t.text else f"len({v})"
        elif rp is not None and rp.prefix is None and rp.until is None \
                and target.framing is None:
            # a repeat without its own prefix measures as the sum of its items (of a
            # compressed repeat: its plain bytes, which its derived size counts)
            elem = self.type_c(t, target, rec)
            n = (f"sum(len(_build_bytes({elem}, _x, this, {target.name!r} + '[' + str(_i) + ']'))"
                 f" for _i, _x in enumerate({v}))")
        else:
            n = f"len(_build_bytes({self.type_c(t, target, rec)}, {v}, this, {target.name!r}))"
        return f"({n} + {size_f.derived_offset})" if size_f.derived_offset else n

    def deferred_checksums(self, fields: list[ir.Field]) -> dict[str, list[ir.Field]]:
        """Checksums covering a size-derived field whose sized field follows them (see
        ``FastEmitter.deferred_checksums``)."""
        out: dict[str, list[ir.Field]] = {}
        names = [x.name for x in fields]
        for i, f in enumerate(fields):
            if f.checksum is None or cover.anchor(fields, i, encode=True) is not None:
                continue
            later = set()
            for kind, n in self.checksum_pieces(fields, i):
                if kind == "range":
                    continue
                d = fields[names.index(n)].derived_from
                if d and d[0] in ("size", "stored") and names.index(d[1]) > i:
                    later.add(names.index(d[1]))
            if later:
                out.setdefault(names[max(later)], []).append(f)
        return out

    def res(self, rec: ir.Record):
        def r(name: str) -> str:
            if name in rec.params:
                return f"this['_params'][{name!r}]"
            if name == "_remaining":
                return "_remaining(this)"
            if name == "_offset":
                return "(this['_io'].tell() - this['_o_start'])"
            if name in rec.bit_parts:  # built: the value's (checked); parsed: from the integer
                holder, p = rec.bit_parts[name]
                raw = f"this[{holder.name!r}] >> {p.lo} & {(1 << p.width) - 1}"
                built = f"this[{name!r}]" if p.field is not None else \
                    bitfields.call(self.family, p, p.value.render(r))
                return f"(({raw}) if this['_parsing'] else {built})"
            f = next((x for x in rec.fields if x.name == name), None)
            if f is not None and f.derived_from and f.derived_from[0] == "stored":
                m = self.stored_measure(f.derived_from[1])
                return f"(this[{name!r}] if this['_parsing'] else ({m}))"
            if f is not None and f.derived_from and f.derived_from[0] == "size" \
                    and not isinstance(f.type, ir.VarintT):
                # a patched size reads as its placeholder while building: measure instead
                t = f.derived_from[1]
                tf = next(x for x in rec.fields if x.name == t)
                m = (f"len(this['_plain_{t}'])" if tf.compressed is not None
                     else f"(this['_e_{t}'] - this['_s_{t}'])")
                if f.derived_offset:
                    m = f"({m} + {f.derived_offset})"
                return f"(this[{name!r}] if this['_parsing'] else {m})"
            return f"this[{name!r}]"
        # a member of a nested record or flags: an item, not an attribute (Container's
        # attribute hook costs a failed lookup; built values may be plain dicts)
        def attr(base: str, name: str) -> str:
            self._attrs.add(name)
            return f"{base}[{name!r}]"
        r.attr = attr  # type: ignore[attr-defined]
        return r

    @staticmethod
    def checksum_pieces(fields: list[ir.Field], index: int) -> list:
        ck = fields[index].checksum
        if ck.ranges:  # record-relative byte ranges (from the '_o_start' Tell)
            return [("range", f"{a}:{b}") for a, b in ck.ranges]
        names = cover.covered(fields, index)
        own = fields[index].name if cover.anchor(fields, index) is not None else None
        comp = {f.name for f in fields if f.compressed is not None}
        return [("fill", n) if n == own else ("plain", n) if n in comp else ("span", n)
                for n in names]

    def spans(self, rec: ir.Record) -> set[str]:
        need = set()
        for i, f in enumerate(rec.fields):
            if f.checksum is not None:
                for kind, n in self.checksum_pieces(rec.fields, i):
                    if kind in ("span", "fill"):
                        need.add(n)
            if f.derived_from and f.derived_from[0] == "size":
                need.add(f.derived_from[1])
        return need

    def ordered_c(self, rec: ir.Record) -> list[str]:
        """A record whose byte order is data: one ``Struct`` per order
        (``C_<record>_<order>``) and ``C_<record>`` choosing between them."""
        lines: list[str] = []
        for o in byteorder.ORDERS:
            conc = dataclasses.replace(
                rec, fields=byteorder.layout_fields(rec, rec.fields, o),
                layouts=[lay for lay in rec.layouts if lay.order == o])
            part = self._record_c(conc)
            head = f"C_{rec.name}"
            lines += [head + f"_{o}" + x[len(head):] if x.startswith((head + " ", head + "."))
                      else x for x in part]
        lines.append("from bytewright.runtime.byteorder import ByteOrder as _ByteOrder")
        if rec.endian is None:  # inherited: used on its own, the file's order
            lines.append(f"C_{rec.name} = C_{rec.name}_{self.family.endian}")
            return lines
        marks, consts = [], {}
        fields = byteorder.mark_fields(rec, self.family)
        for n in sorted(rec.endian.names - set(rec.params)):
            off, f = fields[n]
            fmt, size = byteorder.mark_code(f, self.family)
            marks.append((n, off, fmt, size))
            if not f.in_model:
                consts[n] = f.const
        src = rec.endian.render(lambda n: f"p[{n!r}]" if n in rec.params else f"f[{n!r}]")
        lines += [f"def _order_{rec.name}(f, p):", f"    return {src}", "",
                  f"C_{rec.name} = _ByteOrder({rec.name!r}, C_{rec.name}_le, C_{rec.name}_be, "
                  f"{tuple(marks)!r}, _order_{rec.name}, {consts!r})"]
        return lines

    def record_c(self, rec: ir.Record) -> list[str]:
        if rec.orders:
            return self.ordered_c(rec)
        return self._record_c(rec)

    def _record_c(self, rec: ir.Record) -> list[str]:
        spans = self.spans(rec)
        lines = [] if self._prelude_done else list(_PRELUDE)
        self._prelude_done = True
        lines += emit_framing.construct_prelude(rec)
        lines += peek.construct_prelude(rec)
        lines += [f"C_{rec.name} = Struct(", "    '_o_start' / Tell,"]
        if rec.version_range is not None and rec.version_from in rec.params:
            lo, hi = rec.version_range
            v = f"this['_params'][{rec.version_from!r}]"
            lines.append(f"    VersionCheck({self.code(_NOT_PARSING + f' or {lo} <= {v} <= {hi}')}, "
                         f"{rec.name!r}, {rec.version_from!r}, '{lo}..{hi}'),")
        for f in rec.fields:
            lines += ["    " + x for x in self.field_c(f, rec, rec.fields, spans)]
        for f in rec.fields:  # rules on measured sizes: on build, once all is written
            for a in f.asserts:
                if late_rule(rec, f, a.check.names):
                    held = f.derived_from[1] if f.derived_from else f.name
                    guard = f"this.get({held!r}) is None or " if f.cond is not None else ""
                    rule = f"this['_parsing'] or {guard}({a.check.render(self.res(rec))})"
                    lines.append(f"    _RuleCheck({self.code(rule)}, {f.name!r}, "
                                 f"{a.check.source!r}, {a.message!r}),")
            if f.valid is not None and measured(f):  # a measured size outside its range
                lo, hi = f.valid
                x = self.res(rec)(f.name)
                parts = ([f"{lo} <= {x}"] if lo is not None else []) + \
                    ([f"{x} <= {hi}"] if hi is not None else [])
                target = next((o for o in rec.fields if o.name == f.derived_from[1]), None)
                conds = f.cond is not None or (target is not None and target.cond is not None)
                guard = f"this.get({f.derived_from[1]!r}) is None or " if conds else ""
                if parts:
                    rule = f"this['_parsing'] or {guard}({' and '.join(parts)})"
                    lines.append(f"    FieldCheck({self.code(rule)}, {f.name!r}),")
        lines.append(")")
        runs = fast_runs(self.fast, rec)
        if runs is not None:  # where a truncation is reported (runtime codec.Struct)
            lines.append(f"C_{rec.name}._bw_fast_runs = {runs!r}")
        src = rec.version_from
        if rec.version_range is not None and src not in rec.params:
            # the fast path reads the version first (its dispatcher)
            f = next(x for x in rec.layouts[0].fields if x.name == src)
            it = f.type if isinstance(f.type, ir.IntT) else None
            size, code = (it.size, "<" + it.code) if it else (1, "<B")
            known = tuple(v for lay in rec.layouts for v in lay.versions)
            lo, hi = rec.version_range
            lines.append(f"C_{rec.name}._bw_version_at = {(src, rec.layouts[0].offsets[src], size, code, known, f'{lo}..{hi}', rec.name)!r}")
        return lines

    def order(self) -> list[ir.Record]:
        done: list[str] = []
        seen: set[str] = set()

        def deps(rec: ir.Record) -> list[str]:
            out = []
            for f in rec.fields:
                t = f.type
                if isinstance(t, ir.RefT) and t.kind == "record":
                    out.append(t.target)
                if f.framing is not None:
                    out.append(f.framing.fragment)
                if isinstance(t, ir.SwitchT):
                    out += [r for _, _, r in t.cases if r]
                    if t.default not in ("error", "bytes"):
                        out.append(t.default)
            return out

        def visit(name: str) -> None:
            if name in seen:
                return
            seen.add(name)
            for d in deps(self.family.records[name]):
                visit(d)
            done.append(name)

        for name in self.family.records:
            visit(name)
        return [self.family.records[n] for n in done]

    # -- converters ------------------------------------------------------------------
    def c2m(self, rec: ir.Record) -> list[str]:
        """Container -> object model, mirroring the fast decoder's parameter flow."""
        lines = self.c2m_lines(rec)
        self._guard = True  # nested values a compiled parse built are models already
        try:
            guarded = self.c2m_lines(rec)
        finally:
            self._guard = False
        return self.model_lines(lines, guarded, rec)

    _guard = False

    def nested(self, fn: str, val: str, args: str, cls: str | None) -> str:
        """The conversion ``fn`` of a nested value; in a model builder (``_guard``) a
        model (``cls``) built by the compiled parse is taken as it is, without a call."""
        call = f"{fn}({val}{args})"
        if self._guard and cls is not None:
            return f"({val} if {val}.__class__ is {cls} else {call})"
        return call

    def model_class(self, name: str) -> str | None:
        """The model class of record ``name`` when a compiled parse may build it."""
        rec = self.family.records[name]
        return camel(rec.name) if self.safe_conv(rec) else None

    def c2m_lines(self, rec: ir.Record) -> list[str]:
        params = "".join(f", p_{p}" for p in rec.params)
        lines = [f"def _c2m_{rec.name}(c{params}):"]

        def res(name: str) -> str:
            return f"p_{name}" if name in rec.params else f"f_{name}"

        for f in rec.fields:
            # every field is a member of the Struct, so parsed Containers hold each one
            # (None where a condition left it out): an item read, not Container.get
            lines.append(f"    f_{f.name} = c[{f.name!r}]")
            if f.bits:  # its bit ranges, at once (later fields' expressions read them)
                lines += ["    " + x for x in bitfields.extract(self, [f], "f_")]
                continue
            if f.view == "numpy":
                lines.append(f"    if f_{f.name} is not None:")
                lines.append(f"        f_{f.name} = _rows_to_array(f_{f.name}, "
                             f"{self.np_dtype(f)})")
                continue
            if f.view == "packed":  # the same type as the fast path gives
                kind = f"_CPK_{rec.name}_{f.name}"  # built once, at import
                lines.insert(0, f"{kind} = {self.packed_kind(f)}")
                lines.append(f"    if f_{f.name} is not None:")
                v = f"f_{f.name}"
                conv = f"_packed_from({v}, {kind})"
                if self._guard:  # read packed by the compiled parse: no call
                    conv = f"{v} if {v}.__class__ is PackedArray and {v}.kind is {kind} else {conv}"
                lines.append(f"        {v} = {conv}")
                continue
            if f.framing is not None:
                continue  # the adapter gives the model's FramedList
            conv = self.conv(f, f.type, f"f_{f.name}", rec, res)
            if conv is None:
                continue
            if f.chain is not None and f.chain.decoded:
                conv = peek.c2m_chain(self, f, rec, res)
            elif f.repeat is not None and f.view != "numpy":
                item = self.conv(f, f.type, "_x", rec, res)
                conv = f"[{item} for _x in f_{f.name}]" if item else None
                if conv and f.repeat.stop_on_error:  # keep why the log ended
                    conv = f"_LogList({conv}, f_{f.name}.stop)"
            if conv and f.repeat is None and isinstance(f.type, ir.RefT) \
                    and f.type.kind == "enum":
                # the member table first (one dict read); misses keep _enum_value's rules
                table = f"_{enum_class(f.type.target).upper()}_BY_VALUE"
                if self.family.enums[f.type.target].open:
                    conv = f"f_{f.name}"  # an open enum keeps a value it does not name
                lines.append(f"    if f_{f.name} is not None:")
                lines.append(f"        _t = {table}.get(f_{f.name})")
                lines.append(f"        f_{f.name} = {conv} if _t is None else _t")
            elif conv:
                lines.append(f"    if f_{f.name} is not None:")
                lines.append(f"        f_{f.name} = {conv}")
        lines += ["    " + x for x in bitfields.virtuals(rec, res, "f_")]
        for f in rec.model_fields:
            if f.has_default and f.default is not None:  # absent: the field's default
                lines.append(f"    if f_{f.name} is None:")
                lines.append(f"        f_{f.name} = {defaults.code(f, self.family)}")
        # defaulted fields are keyword-only in the dataclass
        mf = rec.model_fields
        vals = ", ".join([f"f_{f.name}" for f in mf if not f.has_default]
                         + [f"{f.name}=f_{f.name}" for f in mf if f.has_default])
        lines.append(f"    return {camel(rec.name)}({vals})")
        return self.drop_unused(lines, rec)

    def model_lines(self, lines: list[str], guarded: list[str], rec: ir.Record) -> list[str]:
        """The converter ``lines`` plus, when the conversion cannot fail, ``_f2m_<rec>``:
        the same conversion from the field values themselves, which the compiled record
        calls instead of building a Container (``Struct._bw_model``). ``_c2m_`` then
        passes a model through. A record is opaque when no Construct expression reads a
        member of a nested value by one of its field names: its compiled value may then be
        the model wherever it is nested; otherwise only as the compiled root."""
        if not self.safe_conv(rec):
            return lines
        cls = camel(rec.name)
        at = next(i for i, x in enumerate(lines) if x.startswith(f"def _c2m_{rec.name}("))
        reads = {f"    f_{f.name} = c[{f.name!r}]": f.name for f in rec.fields}
        gat = next(i for i, x in enumerate(guarded) if x.startswith(f"def _c2m_{rec.name}("))
        names = [reads[x] for x in guarded[gat + 1:] if x in reads]
        body = [x for x in guarded[gat + 1:] if x not in reads]
        used = [p for p in rec.params if any(re.search(rf"\bp_{p}\b", x) for x in body)]
        args = ", ".join([f"f_{n}" for n in names] + [f"p_{p}" for p in used])
        opaque = not any(f.name in self._attrs for f in rec.fields)
        return (lines[:at + 1] + [f"    if c.__class__ is {cls}:  # built by a compiled parse",
                                  "        return c"] + lines[at + 1:]
                + ["", f"def _f2m_{rec.name}({args}):"] + body
                + [f"C_{rec.name}{sfx}._bw_model = (_f2m_{rec.name}, {tuple(names)!r}, "
                   f"{tuple(used)!r}, {opaque})"
                   # byte order as data: both concrete definitions build the model
                   for sfx in ([f"_{o}" for o in byteorder.ORDERS] if rec.orders else [""])])

    def safe_conv(self, rec: ir.Record, seen: frozenset = frozenset()) -> bool:
        """The conversion of a parsed ``rec`` (nested records included) cannot fail:
        then converting inside the parse raises nothing the parse would not."""
        if rec.name in seen:
            return False
        seen = seen | {rec.name}
        for f in rec.fields:
            t = f.type
            if isinstance(t, ir.RefT) and t.kind == "flags":
                # an enum bit range holds any value: converting it may refuse one
                if any(b.enum for b in self.family.flags[t.target].bits):
                    return False
            targets = []
            if isinstance(t, ir.RefT) and t.kind == "record":
                targets = [t.target]
            elif isinstance(t, ir.SwitchT):
                targets = [r for _, _, r in t.cases if r]
                if t.default not in ("error", "bytes"):
                    targets.append(t.default)
            if not all(self.safe_conv(self.family.records[x], seen) for x in targets):
                return False
        return True

    @staticmethod
    def drop_unused(lines: list[str], rec: ir.Record) -> list[str]:
        """Without the reads and conversions of fields the model does not hold and no
        other conversion reads (constants, reserved bytes): work on the timed path."""
        model = {f.name for f in rec.model_fields}
        out = lines
        for f in rec.fields:
            if f.name in model:
                continue
            var = re.compile(rf"\bf_{re.escape(f.name)}\b")
            own = [i for i, x in enumerate(out) if x.startswith((f"    f_{f.name} = ",
                                                                   f"    if f_{f.name} is ",
                                                                   f"        f_{f.name} = "))]
            if any(var.search(x) for i, x in enumerate(out) if i not in own):
                continue
            out = [x for i, x in enumerate(out) if i not in own]
        return out

    def conv(self, f: ir.Field, t: ir.Type, val: str, rec: ir.Record, res) -> str | None:
        if isinstance(t, ir.RefT):
            if t.kind == "enum":
                e = self.family.enums[t.target]
                if e.retired:
                    return (f"_enum_value({enum_class(e.name)}, {val}, {e.open}, "
                            f"retired={tuple(e.retired)!r})")
                return f"_enum_value({enum_class(e.name)}, {val}, {e.open})"
            if t.kind == "flags":
                fd = self.family.flags[t.target]
                cls = None if any(b.enum for b in fd.bits) else flags_class(fd.name)
                return self.nested(f"_c2m_flags_{t.target}", val, "", cls)
            if t.kind == "record":
                callee = self.family.records[t.target]
                return self.nested(f"_c2m_{t.target}", val,
                                   self.call_args(callee, t.args, rec, res),
                                   self.model_class(t.target))
            return None
        if isinstance(t, ir.SwitchT):
            parts = []
            for key, _, target in t.cases:
                if target is None:
                    body = "None"
                else:
                    callee = self.family.records[target]
                    body = self.nested(f"_c2m_{target}", val,
                                       self.call_args(callee, t.args, rec, res),
                                       self.model_class(target))
                parts.append((key, body))
            if t.default in ("error", "bytes"):
                expr = val if t.default == "bytes" else "None"
            else:
                callee = self.family.records[t.default]
                expr = self.nested(f"_c2m_{t.default}", val,
                                   self.call_args(callee, t.args, rec, res),
                                   self.model_class(t.default))
            tag = t.on.render(res)
            for key, body in reversed(parts):
                expr = f"({body} if {tag} == {key!r} else {expr})"
            return expr
        if isinstance(t, ir.BytesT) and not t.text:
            return f"bytes({val})"
        return None

    def call_args(self, callee: ir.Record, args, caller: ir.Record, res) -> str:
        return call_args(callee, args, caller, res)

    def m2c(self, rec: ir.Record) -> list[str]:
        """Object model -> dict for ``Struct.build``."""
        lines = [f"def _m2c_{rec.name}(v):", "    return {"]
        for f in rec.model_fields:
            val = f"v.{f.name}"
            item = self.m2c_value(f.type, "_x")
            if f.bit_of is not None:  # a bit range: checked as the fast encoder does
                part = rec.bit_parts[f.name][1]
                expr = f"None if {val} is None else {bitfields.call(self.family, part, val)}"
            elif f.framing is not None:
                expr = emit_framing.m2c_value(f, val)
            elif f.view == "packed":
                expr = f"None if {val} is None else list({val})"
            elif f.view == "numpy" and f.repeat is not None and f.repeat.count is not None:
                expr = val  # NumpyArray builds from the array itself (bit-exact)
            elif f.view == "numpy":
                expr = f"None if {val} is None else _array_to_rows({val})"
            elif f.repeat is not None and item != "_x":
                expr = f"None if {val} is None else [{item} for _x in {val}]"
            elif f.repeat is None and isinstance(f.type, ir.SwitchT) \
                    and self.case_classes(f.type, rec) is not None:
                classes, default, tag = self.case_classes(f.type, rec)
                expr = (f"None if {val} is None else _m2c_any(_case_value({val}, {tag}, "
                        f"{classes}, {default}, {f.name!r}))")
            elif f.repeat is None and item != "_x":
                expr = f"None if {val} is None else {self.m2c_value(f.type, val)}"
            else:
                expr = val
            lines.append(f"        {f.name!r}: {expr},")
        lines.append("    }")
        lines += emit_framing.construct_bindings(rec)
        if rec.name in needs_roundtrip(self.family):  # read by the module template
            lines.append(f"# encoders check by decoding: {rec.name}")
        return lines

    def case_classes(self, t: ir.SwitchT, rec: ir.Record) -> tuple[str, str, str] | None:
        """(case key -> model class, the default's class, the tag read from the value)
        when the tag reads only the record's own model fields, else None."""
        model = {f.name for f in rec.model_fields}
        if not set(t.on.names) <= model or not t.on.simple_name():
            return None
        classes = ", ".join(f"{key!r}: {camel(target) if target else None}"
                            for key, _, target in t.cases)
        default = camel(t.default) if t.default not in ("error", "bytes") else "None"
        return f"{{{classes}}}", default, f"v.{t.on.simple_name()}"

    def packed_kind(self, f: ir.Field) -> str:
        """The element kind of a ``view: packed`` field (runtime/packed.py)."""
        t = f.type
        if isinstance(t, ir.RefT) and t.kind == "alias":
            t = byteorder.base_of(self.family, t)
        if isinstance(t, ir.IntT):
            order, code, size, signed = t.endian, t.code or "", t.size, t.signed
        else:
            order, code, size, signed = t.endian, t.code, t.size, True
        return f"_packed_kind({'<' if order == 'le' else '>'!r}, {code!r}, {size}, {signed})"

    def np_dtype(self, f: ir.Field) -> str:
        """The numpy dtype expression of a ``view: numpy`` field's element."""
        if isinstance(f.type, ir.RefT) and f.type.kind == "record":
            # read after ``numpy.``, which binds the constant (numpy is imported lazily)
            return f"numpy.dtype({camel(f.type.target)}_DTYPE)"
        return repr(numpy_code(f.type, self.family))

    def m2c_value(self, t: ir.Type, val: str) -> str:
        if isinstance(t, ir.RefT):
            if t.kind == "enum":
                return f"int({val})"
            if t.kind == "flags":
                return f"{val}.to_dict()"
            if t.kind == "record":
                return f"_m2c_{t.target}({val})"
            return val
        if isinstance(t, ir.SwitchT):
            return f"_m2c_any({val})"
        return val

    def flags_conv(self, fd: ir.FlagsDef) -> list[str]:
        args = []
        for b in fd.bits:
            if b.enum:
                args.append(f"{b.name}={enum_class(b.enum)}(c[{b.name!r}])")
            elif b.width == 1:
                args.append(f"{b.name}=bool(c[{b.name!r}])")
            else:
                args.append(f"{b.name}=c[{b.name!r}]")
        cls = flags_class(fd.name)
        if any(b.enum for b in fd.bits):
            return [f"def _c2m_flags_{fd.name}(c):", f"    return {cls}({', '.join(args)})"]
        # opaque (no expression reads a bit of it by name): compiled parses build the model
        opaque = not any(b.name in self._attrs for b in fd.bits)
        return [f"def _c2m_flags_{fd.name}(c):",
                f"    if c.__class__ is {cls}:  # built by a compiled parse",
                "        return c",
                f"    return {cls}({', '.join(args)})",
                f"{cls}._bw_opaque = {opaque}"]
