"""Twins: ``_u_<record>`` (one record) and ``_m_<record>`` (a log in one loop).

Each checked decoder gets an optimistic twin (see ``optimist``), with its reads fused
(``read_fusion``), and a many-record loop that runs the twin's body once per record
with no call per record; a ``rows: true`` record also gets its rows loop (``rows``).
"""

from __future__ import annotations

import ast
import re

from .. import byteorder, ir, lookup_rows
from ..model import camel
from .astwalk import walk
from .optimist import Optimist
from .read_fusion import _IS_BYTES, bytes_slices, fuse_reads
from .rows import _rows_transform

_CALLS = re.compile(r"\b_d_(\w+)\(")


class Twins:
    """The optimistic twins and many-record loops of the checked decoders."""

    OPTIMISTIC_MAX_LINES = 1000  # larger decoders get no optimistic twin (code size)

    def has_twin(self, name: str) -> bool:
        """Whether record ``name`` gets an optimistic twin ``_u_<name>`` (decided from
        its checked decoder, built once more without twins)."""
        got = self._twins.get(name)
        if got is None:
            rec = self.family.records.get(name)
            got = False
            # byte order as data: one twin per order's layout, and a dispatcher twin
            target = byteorder.twin_layout(self.family, name)
            if target == "dispatch":
                got = all(self.has_twin(f"{name}_{o}") for o in rec.orders)
            elif target is not None:
                rec, lay = target
                sub = self.sub_emitter()
                sub._no_twin = True
                lines = sub.decoder(rec, lay)
                got = len(lines) <= self.OPTIMISTIC_MAX_LINES and \
                    Optimist({}).eligible(ast.parse("\n".join(lines)).body[0])
            self._twins[name] = got
        return got

    def twin_wanted(self, name: str) -> bool:
        """Whether record ``name``'s optimistic twin is worth building: the record is read
        in runs (``bulk``), or a wanted twin may call it (its checked decoder calls the
        record's, out of line). Computed once, from the checked decoders, before any
        twin is built (see :meth:`plan_twins`); an over-estimate that the module's
        dead-twin pass (``bulk.drop_unreferenced``) trims."""
        if self.all_twins:
            return True
        if self._wanted is None:
            self.plan_twins()
        return name in self._wanted

    def plan_twins(self) -> None:
        """The records whose twins are built (:meth:`twin_wanted`). Builds the checked
        decoders it reads, which the emission then takes from ``built_once``'s store."""
        records = self.family.records
        wanted: set[str] = set()
        todo = [n for n in records if self.read_in_runs(n)]
        while todo:
            name = todo.pop()
            if name in wanted:
                continue
            wanted.add(name)
            rec = records[name]
            for lay in rec.layouts:
                text = "\n".join(self.built_once("d", rec, lay, self.checked_decoder))
                for callee in _CALLS.findall(text):
                    while callee and callee not in records:  # a layout's suffix: _v2, _le
                        callee = callee.rpartition("_")[0]
                    if callee and callee not in wanted:
                        todo.append(callee)
        self._wanted = frozenset(wanted)

    def optimistic(self, rec: ir.Record, lines: list[str], order_name: str = "") -> list[str]:
        """``_u_<record>`` (one record) and ``_m_<record>`` (consecutive records in one
        loop, no call per record) for the checked decoder ``lines``; [] when the
        decoder does something the twin cannot mirror (see :class:`Optimist`)."""
        if len(lines) > self.OPTIMISTIC_MAX_LINES:
            return []
        fn = ast.parse("\n".join(lines)).body[0]
        formats = self.struct_formats()
        opt = Optimist(formats, self.has_twin)
        nodes = list(walk(fn))
        if not opt.eligible(fn, nodes):
            return []
        opt.transform(fn, nodes)
        fuse_reads(fn, formats, lambda fmt: self.const("S", f"struct.Struct({fmt!r})"))
        on_bytes = bytes_slices(fn, lambda: self.const("BD", "bytes.decode"))
        name = rec.name
        params = [a.arg for a in fn.args.args[3:]]
        fn.name = f"_u_{order_name or name}"
        single = ast.unparse(fn).splitlines()
        if on_bytes:  # the buffer's type, once per record here (once per log below)
            single[1:1] = [f"    {_IS_BYTES}"]
        if order_name:  # one order's layout: its dispatcher twin loops (byteorder.py)
            return [""] + single
        if not self.read_in_runs(name):  # no run of these records to loop over
            return [""] + single
        # the many-loop: the body once per record, the value appended; struct methods
        # are bound once per log (a local load instead of a global and an attribute)
        ret = fn.body[-1]
        hoisted: set[str] = set()
        nodes = list(walk(fn))
        taken = {n.id for n in nodes if isinstance(n, ast.Name)}
        for n in nodes:
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr == "unpack_from" and isinstance(n.func.value, ast.Name) \
                    and re.fullmatch(r"_S\d+", n.func.value.id) \
                    and f"{n.func.value.id}_unpack_from" not in taken:
                hoisted.add(n.func.value.id)
                n.func = ast.Name(f"{n.func.value.id}_unpack_from", ast.Load())
        body = ast.unparse(ast.Module(body=fn.body[:-1], type_ignores=[])).splitlines()
        value = ast.unparse(ret.value.elts[0])
        ptuple = "(" + "".join(f"{p}, " for p in params) + ")"
        # ``_end``, not ``end``: a section inlined into the body narrows ``end`` while
        # it runs, and a record that fails inside one leaves it narrowed
        # ``_rest`` takes over at the first record the loop cannot read: ``_decode_many``
        # (its value, or its error) for ``decode_many_<r>``, ``_decode_prefix`` (stop
        # there) for ``decode_prefix_<r>``
        fallback = f"_rest(_d_{name}, {name!r}, mv, _rs, _end, {ptuple}, _out)"
        # Loops over records are `while True:` with the end test inside, never
        # `while pos < end:`. CPython 3.11 specializes a function's bytecode after 8
        # calls or unconditional back-jumps; a `while cond:` loop jumps back
        # conditionally, which does not count, so a decoder called once over a large
        # buffer ran its whole loop unspecialized (~1.5x slower). The list loops in
        # in `decode_repeat` follow the same rule.
        loop = [f"def _m_{name}(mv, pos, end{''.join(', ' + p for p in params)}, "
                "_rest=_decode_many):",
                "    _out = []",
                "    _append = _out.append",
                "    _p0 = _rs = pos",
                "    _end = end"] + ([f"    {_IS_BYTES}"] if on_bytes else []) + [
                f"    {h}_unpack_from = {h}.unpack_from" for h in sorted(hoisted)] + [
                "    try:",
                "        while True:",
                "            if pos >= end:",
                "                break",
                "            _rs = pos"]
        loop += ["            " + x for x in body]
        if self.min_size(name) == 0:
            loop += ["            if pos <= _rs:", "                raise IndexError"]
        loop += [f"            _append({value})",
                 "    except Exception:",
                 "        # the checked decoder re-reads the failing record: its error (or value)",
                 f"        return {fallback}",
                 "    if pos > end and pos != _p0:  # the last record ran past the end",
                 "        _out.pop()",
                 f"        return {fallback}",
                 "    return _out"]
        if rec.rows:
            return [""] + single + [""] + loop + self.rows_loop(rec, loop)
        return [""] + single + [""] + loop

    def rows_loop(self, rec: ir.Record, loop: list[str]) -> list[str]:
        """``_r_<record>``: the many-loop ``loop`` building rows, not objects (schema
        ``rows: true``). A record is the tuple of its model fields in order, nested
        records are tuples too, a packed view is its raw bytes; every other value (ints,
        enums, flags, strings, lists) is what the object holds. The loop also lists where
        each record starts, and stops at the first record it does not take, with no
        second reading: ``(rows, starts, stop)``, and the checked decoder says why that
        record stops. [] (with a problem) when a value of the record is built by a call
        the loop cannot turn into a row (a sub-record decoded out of line)."""
        fn = ast.parse("\n".join(loop)).body[0]
        classes = {camel(r.name) for r in self.family.records.values()}
        why = _rows_transform(fn, classes) or lookup_rows.rewrite(
            fn, lookup_rows.item_orders(rec, self.family))
        if why is not None:
            self.problems.append((rec, f"rows: true, but {why}"))
            return []
        fn.name = f"_r_{rec.name}"
        fn.args.defaults = []
        fn.args.args = [a for a in fn.args.args if a.arg != "_rest"]
        return [""] + ast.unparse(ast.fix_missing_locations(fn)).splitlines()
