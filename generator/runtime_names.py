"""Names of runtime helpers the generated modules bind (one place to rename them).

A checksum is looked up in the registry once, at import of the generated module, and
bound to a module-level name; both codec paths call that name.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re

from . import ir
from .layout import fixed_size


def checksum_binding(ck: ir.Checksum) -> str:
    """The module-level name of ``ck``'s (possibly truncating) checksum callable."""
    base = re.sub(r"\W", "_", ck.algorithm)
    if base != ck.algorithm:  # keep distinct plug-in names distinct after sanitising
        base += "_" + hashlib.sha256(ck.algorithm.encode()).hexdigest()[:6]
    if ck.store_bits and ck.store_bits < ck.bits:
        base += f"_b{ck.store_bits}"
    return f"_ck_{base}"


def checksum_call(ck: ir.Checksum, data: str, res) -> str:  # noqa: ANN001 - name resolver
    """Python source computing ``ck`` over the bytes expression ``data``."""
    args = [data]
    if ck.seed is not None:
        args.append(ck.seed.render(res))
    args += [f"{k}={e.render(res)}" for k, e in ck.params]
    return f"{checksum_binding(ck)}({', '.join(args)})"


def checksum_bindings(family: ir.Family) -> list[dict]:
    """Every checksum binding a family's module needs: name, algorithm, stored bits."""
    seen: dict[str, dict] = {}
    for rec in family.records.values():
        for f in rec.fields:
            ck = f.checksum
            if ck is None:
                continue
            name = checksum_binding(ck)
            bits = ck.store_bits if ck.store_bits and ck.store_bits < ck.bits else None
            entry = seen.setdefault(name, {"name": name, "algorithm": ck.algorithm,
                                           "bits": bits, "fast": True})
            # data-only at every call site: the registry may hand out its C callable
            entry["fast"] = entry["fast"] and ck.seed is None and not ck.params
    return [seen[k] for k in sorted(seen)]


def numeric_binding(kind: str) -> str:
    """The module-level name of a numeric conversion (``convert:``)."""
    base = re.sub(r"\W", "_", kind)
    if base != kind:
        base += "_" + hashlib.sha256(kind.encode()).hexdigest()[:6]
    return f"_cv_{base}"


def numeric_bindings(family: ir.Family) -> list[dict]:
    kinds = {f.convert for rec in family.records.values() for f in rec.fields if f.convert}
    return [{"name": numeric_binding(k), "kind": k} for k in sorted(kinds)]


def intkind_binding(t: ir.VarintT) -> str:
    """The module-level name of a registered integer kind bound to its params."""
    base = f"t_{t.alias}" if t.alias else t.kind
    clean = re.sub(r"\W", "_", base)
    if clean != base:
        clean += "_" + hashlib.sha256(base.encode()).hexdigest()[:6]
    return f"_ik_{clean}"


def intkind_bindings(family: ir.Family) -> list[dict]:
    """Every integer kind a family's module binds (none for the LEB128 kinds, which the
    generated code calls directly): name and the source of the binding."""
    seen: dict[str, str] = {}

    def visit(t: object) -> None:
        if isinstance(t, ir.VarintT) and not t.legacy:
            seen[intkind_binding(t)] = (f"_registry.integer_codec({t.kind!r}, "
                                        f"{dict(t.params)!r})")

    for rec in family.records.values():
        for f in rec.fields:
            visit(f.type)
            if isinstance(f.type, ir.BytesT):
                visit(f.type.prefix)
            if f.repeat is not None:
                visit(f.repeat.prefix)
    return [{"name": k, "source": seen[k]} for k in sorted(seen)]


def chain_anchor(family: ir.Family, f: ir.Field, order: str | None = None
                 ) -> tuple[str, int, ir.IntT]:
    """Where a chained repeat reads the previous item's stored value: ("start", k) = k
    bytes after the item's start, ("end", k) = k bytes before its end; and its type
    (in ``order`` when the items inherit the caller's byte order)."""
    callee = family.records[f.type.target]
    names = [x.name for x in callee.fields]
    i = names.index(f.chain.source)
    sizes = [fixed_size(x, family.aliases, family.enums, family.flags)
             for x in callee.fields]
    t = callee.fields[i].type
    if isinstance(t, ir.RefT):
        t = family.aliases[t.target].base
    if order is not None and callee.orders and callee.endian is None and t.governed:
        t = dataclasses.replace(t, endian=order)
    if None not in sizes[:i]:
        return "start", sum(sizes[:i]), t
    return "end", sum(sizes[i:]), t


def codec_table(family: ir.Family, rec: ir.Record, c: ir.Compressed) -> dict:
    """A compressed field's ``codecs:`` map as the generated code uses it: by enum member
    name (the fast path holds members) and by its value (the Construct context holds the
    raw integer), when the labels are the members of one enum."""
    table: dict = dict(c.codecs)
    labels = set(table)
    enum_def = None
    name = c.algorithm.simple_name() if c.algorithm is not None else None
    if name is not None:
        f = next((x for x in rec.fields if x.name == name), None)
        if f is not None and isinstance(f.type, ir.RefT) and f.type.kind == "enum":
            enum_def = family.enums[f.type.target]
        elif name in rec.params and rec.params[name].type in family.enums:
            enum_def = family.enums[rec.params[name].type]
    if enum_def is None:
        hits = [e for e in family.enums.values() if labels <= {m.name for m in e.members}]
        enum_def = hits[0] if len(hits) == 1 else None
    if enum_def is not None:
        for m in enum_def.members:
            if m.name in table:
                table[m.value] = table[m.name]
    return table
