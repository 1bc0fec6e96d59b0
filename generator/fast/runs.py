"""Fixed-run fusion: consecutive fixed-size fields read and written as one struct.

Fields whose size is known (integers, enums, fixed byte strings, length prefixes and
repeat counts) are grouped into one run and read with one ``unpack_from`` (written with
one ``pack``): one bounds check and one call per run instead of one per field. The
values then get their per-field conversions and checks (enums, constants, asserts).
"""

from __future__ import annotations

import re

from .. import absent, ir
from .. import emit_fast_encode as efe
from ..model import enum_class, flags_class
from .base import Item


class FixedRuns:
    """Grouping fields into runs and the code that reads or writes a run."""

    def add_run_item(self, run: list[Item], f: ir.Field, role: str) -> None:
        if role == "value":
            code, size, endian = self.scalar_code(f.type)
            local = f"f_{f.name}"
        else:
            it = f.type.prefix if role == "prefix" else f.repeat.prefix
            code, size, _endian = it.code or f"{it.size}s", it.size, it.endian
            local = f"n_{f.name}"
        run.append(Item(f, role, code, size, local))

    def run_role(self, f: ir.Field) -> str | None:
        """How ``f`` joins a fixed-size run: its whole value, its length prefix, its count
        prefix, or not at all (None). Decoder, encoder and the Construct path's truncation
        checks group runs by this one rule, so the paths report a cut input alike."""
        if f.bits or absent.sentinel(f) is not None:  # (bit ranges are taken once it is
            return None  # read; a sentinel is tested before the rest is read)
        if self.runnable(f):
            return "value"
        if isinstance(f.type, ir.BytesT) and isinstance(f.type.prefix, ir.IntT) \
                and self.plain(f) and f.repeat is None:
            return "prefix"
        if f.repeat is not None and isinstance(f.repeat.prefix, ir.IntT) and self.plain(f):
            return "count"
        return None

    def compatible(self, run: list[Item], f: ir.Field, role: str) -> bool:
        """A run has one byte order; byte strings fit any run."""
        if role == "value":
            code, _, endian = self.scalar_code(f.type)
        else:
            it = f.type.prefix if role == "prefix" else f.repeat.prefix
            code, endian = it.code or "s", it.endian
        if code.endswith("s"):
            return True
        for other in run:
            oc = other.code
            if not oc.endswith("s") and self.item_endian(other) != endian:
                return False
        return True

    def item_endian(self, item: Item) -> str:
        if item.role == "value":
            return self.scalar_code(item.field.type)[2]
        it = item.field.type.prefix if item.role == "prefix" else item.field.repeat.prefix
        return it.endian

    def run_struct(self, run: list[Item]) -> str:
        """The precompiled Struct constant of one fixed run (one byte order)."""
        endian = "<"
        for it in run:
            if not it.code.endswith("s"):
                endian = "<" if self.item_endian(it) == "le" else ">"
                break
        return self.const("S", f"struct.Struct({endian + ''.join(it.code for it in run)!r})")

    def decode_run(self, rec: ir.Record, run: list[Item], spans: set[str]) -> list[str]:
        endian = "<"
        for it in run:
            if not it.code.endswith("s"):
                endian = "<" if self.item_endian(it) == "le" else ">"
                break
        fmt = endian + "".join(it.code for it in run)
        total = sum(it.size for it in run)
        st = self.const("S", f"struct.Struct({fmt!r})")
        table = []
        off = 0
        for it in run:
            label = it.field.name if it.role == "value" else f"{it.field.name}.length"
            table.append((label, off, it.size))
            off += it.size
        tab = self.const("T", repr(tuple(table)))
        out = [f"if pos + {total} > end:",
               f"    raise _short(pos, end, {tab})"]
        targets = ", ".join(it.local for it in run)
        if fmt[1:] == "B":  # one u8: indexing the buffer gives the int, no tuple
            out.append(f"{targets} = mv[pos]")
        else:
            out.append(f"{targets}{',' if len(run) == 1 else ''} = {st}.unpack_from(mv, pos)")
        rvar = f"_r{st[2:]}"
        at_rvar = len(out)
        out.append(f"{rvar} = pos")
        out.append(f"pos += {total}")
        off = 0
        for it in run:
            f = it.field
            at = f"{rvar} + {off}" if off else rvar
            if f.name in spans.s:
                out.append(f"_s_{f.name} = {at}")
            if f.name in spans.e and it.role == "value":
                out.append(f"_e_{f.name} = {rvar} + {off + it.size}")
            if it.role == "value":
                out.extend(self.post_scalar(rec, f, it, at))
                if f.checksum is not None and not self.is_late(f):
                    out.extend(self.checksum_check(f, at))
                out.extend(self.late_checks(f))
                out.extend(self.assert_lines(rec, f, at, it.local[:-len(f"f_{f.name}")]))
            off += it.size
        if not any(re.search(rf"\b{rvar}\b", x) for x in out[at_rvar + 1:]):
            del out[at_rvar]  # the run's start is not needed by any check or span
        return out

    def assert_lines(self, rec: ir.Record, f: ir.Field, at: str, px: str = "") -> list[str]:
        """Decode-time ``assert`` rules of a field (names resolve to decoded locals)."""
        out: list[str] = []
        for a in f.asserts:
            cls = "UnsupportedError" if a.error == "unsupported" else "ConstraintError"
            src = a.check.render(lambda n: f"p_{n}" if n in rec.params else f"{px}f_{n}")
            out += [f"if not {src}:",
                    f"    raise {cls}({a.message!r}, offset={at}, path={(a.path or f.name)!r}, "
                    f"expected={a.check.source!r}, found={px}f_{f.name})"]
        if out and f.cond is not None:
            out = [f"if {px}f_{f.name} is not None:"] + ["    " + x for x in out]
        return out

    def post_scalar(self, rec: ir.Record, f: ir.Field, it: Item, at: str) -> list[str]:
        """Conversions and checks after a fixed run is unpacked."""
        out: list[str] = []
        loc = it.local
        it_base = self.base_int(f.type)
        if it_base is not None and it.code.endswith("s"):
            order = "little" if it_base.endian == "le" else "big"
            out.append(f"{loc} = int.from_bytes({loc}, {order!r}, signed={it_base.signed})")
        if f.const is not None:
            out += [f"if {loc} != {f.const!r}:",
                    f"    raise ConstraintError('bad magic', offset={at}, path={f.name!r}, "
                    f"expected={f.const!r}, found={loc})"]
        if f.reserved:
            zero = repr(bytes(it.size)) if it.code.endswith("s") and it_base is None else "0"
            out += [f"if {loc} != {zero}:",
                    f"    raise ConstraintError('reserved bytes must be zero', offset={at}, "
                    f"path={f.name!r}, expected={zero}, found={loc})"]
        if f.valid is not None:
            lo, hi = f.valid
            conds = []
            if lo is not None:
                conds.append(f"{loc} < {lo}")
            if hi is not None:
                conds.append(f"{loc} > {hi}")
            out += [f"if {' or '.join(conds)}:",
                    f"    raise ConstraintError('value out of range', offset={at}, "
                    f"path={f.name!r}, expected={f'{lo}..{hi}'!r}, found={loc})"]
        if isinstance(f.type, ir.RefT) and f.type.kind == "enum":
            e = self.family.enums[f.type.target]
            table = f"_{enum_class(e.name).upper()}_BY_VALUE"
            if e.open and it.code == "B":
                # one byte: a 256-slot list (member or the int itself) indexed directly,
                # cheaper than a dict method call per value
                tab = self.const("EB", f"[{table}.get(_i, _i) for _i in range(256)]")
                out.append(f"{loc} = {tab}[{loc}]")
            elif e.open:
                out.append(f"{loc} = {table}.get({loc}, {loc})")
            else:
                out += [f"_v = {table}.get({loc})",
                        "if _v is None:"]
                if e.retired:
                    out += [f"    if {loc} in {tuple(e.retired)!r}:",
                            f"        raise ConstraintError('retired {e.name} value "
                            f"(permanently retired, never reused)', offset={at}, "
                            f"path={f.name!r}, expected={sorted(m.value for m in e.members)!r}, "
                            f"found={loc})"]
                out += [
                        f"    raise ConstraintError('unknown {e.name} value', offset={at}, "
                        f"path={f.name!r}, expected={sorted(m.value for m in e.members)!r}, "
                        f"found={loc})",
                        f"{loc} = _v"]
        if isinstance(f.type, ir.RefT) and f.type.kind == "flags":
            fd = self.family.flags[f.type.target]
            out += [f"if {loc} & {~fd.known_mask & ((1 << fd.base.bits) - 1)}:",
                    f"    raise ConstraintError('undefined {fd.name} bits set', offset={at}, "
                    f"path={f.name!r}, expected='mask {fd.known_mask:#x}', found={loc})",
                    f"{loc} = {flags_class(fd.name)}.from_int({loc})"]
        return out

    def scalar_value(self, f: ir.Field, it: Item, res) -> str:
        """Expression for the value packed into a run slot."""
        if it.role == "prefix":
            return f"len(_b_{f.name})"
        if it.role == "count":
            return f"len(v.{f.name})"
        base = self.base_int(f.type)
        if f.const is not None:
            val = repr(f.const)
        elif f.reserved:
            val = "0" if base is not None else repr(bytes(it.size))
        elif f.derived_from:
            kind, target = f.derived_from
            val = f"len(v.{target})" if kind == "count" else "0"
        elif f.value is not None:
            val = f.value.render(res)
        else:
            val = f"v.{f.name}"
            if isinstance(f.type, ir.RefT) and f.type.kind == "flags":
                val = f"v.{f.name}.to_int()"
            elif isinstance(f.type, ir.RefT) and f.type.kind == "enum" \
                    and not self.family.enums[f.type.target].open:  # a non-member: KeyError
                val = f"_{enum_class(f.type.target).upper()}_BY_VALUE[{val}]"
        if base is not None and it.code.endswith("s"):
            order = "little" if base.endian == "le" else "big"
            val = f"({val}).to_bytes({base.size}, {order!r}, signed={base.signed})"
        return val

    def encode_run(self, rec: ir.Record, run: list[Item], spans: set[str], res) -> list[str]:
        endian = "<"
        for it in run:
            if not it.code.endswith("s"):
                endian = "<" if self.item_endian(it) == "le" else ">"
                break
        fmt = endian + "".join(it.code for it in run)
        st = self.const("S", f"struct.Struct({fmt!r})")
        out = []
        off = 0
        patches = []
        for it in run:
            f = it.field
            if f.name in spans.s:
                out.append(f"_s_{f.name} = len(out)" + (f" + {off}" if off else ""))
            if f.name in spans.e and it.role == "value":
                out.append(f"_e_{f.name} = len(out) + {off + it.size}")
            if it.role == "value" and f.derived_from and f.derived_from[0] in ("size", "stored"):
                patches.append(f"_at_{f.name} = len(out) + {off}")
            off += it.size
        out += patches + efe.run_checks(self, run)
        vals = ", ".join(self.scalar_value(it.field, it, res) for it in run)
        out.append(f"out += {st}.pack({vals})")
        return out
