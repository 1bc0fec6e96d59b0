"""Pass 2 (after JSON-Schema validation): resolve YAML data into the typed IR.

Names are resolved (types, enums, case labels), expressions parsed, derived fields found
(a field named by another's ``repeat.count`` or ``size`` is recomputed on encode), and
cross-field rules checked. Every problem carries file, line and YAML path.
"""

from __future__ import annotations

import re
from typing import Any

from . import ir
from .expr import Expr, ExprError, parse
from .problems import Problems
from .yamlsource import Source, join

_INT_RE = re.compile(r"^([ui])(8|16|24|32|64|128)(le|be)?$")
_FLOAT_RE = re.compile(r"^f(32|64)(le|be)?$")
_BUILTIN_PARAM_TYPES = {"int", "bool", "str"}


def self_int(t: ir.Type) -> ir.IntT | None:
    """The integer type of a plain integer field (for repeat.until), else None."""
    return t if isinstance(t, ir.IntT) else None


def int_type(text: str, default_endian: str = "le") -> ir.IntT | None:
    m = _INT_RE.match(text)
    if not m:
        return None
    return ir.IntT(int(m.group(2)), m.group(1) == "i", m.group(3) or default_endian)


class Resolver:
    """Resolve one family (possibly spread over several files, merged by the loader)."""

    def __init__(self, sources: list[Source], problems: Problems, digest: str) -> None:
        self.sources = sources
        self.problems = problems
        self.digest = digest
        self.where: dict[str, Source] = {}  # top-level item key -> its source

    # -- helpers -------------------------------------------------------------------
    def err(self, src: Source, path: str, message: str) -> None:
        self.problems.add(src.file, src.line(path), path, message)

    def expr(self, src: Source, path: str, value: Any) -> Expr | None:
        try:
            return parse(value)
        except ExprError as exc:
            self.err(src, path, str(exc))
            return None

    # -- entry ---------------------------------------------------------------------
    def run(self) -> ir.Family | None:
        head = self.sources[0].data
        endian = head.get("endian", "le")
        enums: dict[str, ir.EnumDef] = {}
        flags: dict[str, ir.FlagsDef] = {}
        aliases: dict[str, ir.AliasDef] = {}
        registries: dict[str, ir.EnumDef] = {}
        raw_records: list[tuple[Source, str, dict]] = []
        versions = None
        for src in self.sources:
            data = src.data
            if data.get("family") != head.get("family"):
                self.err(src, "family", "all files of a family must name the same family")
            if "versions" in data:
                v = data["versions"]
                versions = ir.Registry(v["current"], tuple(v["accepted"]),
                                       list(v.get("retired", [])), v.get("doc", ""))
                lo, hi = versions.accepted
                if not lo <= versions.current <= hi:
                    self.err(src, "versions.current", "current version outside accepted range")
                for r in versions.retired:
                    if lo <= r <= hi:
                        self.err(src, "versions.retired", f"retired version {r} is accepted")
            for kind, table in (("enums", enums), ("registries", registries)):
                for name, body in (data.get(kind) or {}).items():
                    table[name] = self.enum(src, join(kind, name), name, body, endian)
            for name, body in (data.get("flags") or {}).items():
                flags[name] = self.flags(src, join("flags", name), name, body, endian)
            for name, body in (data.get("types") or {}).items():
                base = int_type(body["base"], endian)
                aliases[name] = ir.AliasDef(name, base, body.get("fixed_point"),
                                            body.get("doc", ""), src.line(join("types", name)))
            for name, body in (data.get("records") or {}).items():
                raw_records.append((src, name, body))
        self.enums, self.flagdefs, self.aliases = enums, flags, aliases
        names: dict[str, str] = {}
        for kind, table in (("enum", enums), ("flags", flags), ("type", aliases)):
            for name in table:
                if name in names:
                    self.err(self.sources[0], name, f"{kind} {name!r} clashes with {names[name]}")
                names[name] = kind
        self.record_names = {name for _, name, _ in raw_records}
        for src, name, _ in raw_records:
            if name in names:
                self.err(src, join("records", name), f"record name clashes with {names[name]}")
        for flagdef in flags.values():
            for bit in flagdef.bits:
                if bit.enum and bit.enum not in enums:
                    self.err(self.sources[0], join("flags", flagdef.name),
                             f"unknown enum {bit.enum!r}")
        records: dict[str, ir.Record] = {}
        for src, name, body in raw_records:
            if name in records:
                self.err(src, join("records", name), "record defined twice")
                continue
            records[name] = self.record(src, name, body)
        for rec in records.values():
            self.check_record(rec, records)
        return ir.Family(
            name=head["family"], title=head.get("title", head["family"]),
            spec=head.get("spec", ""), doc=head.get("doc", ""), endian=endian,
            files=[s.file for s in self.sources], digest=self.digest, versions=versions,
            enums=enums, flags=flags, aliases=aliases, records=records,
            registries=registries,
        )

    # -- enums and flags -----------------------------------------------------------
    def enum(self, src: Source, path: str, name: str, body: dict, endian: str) -> ir.EnumDef:
        base = int_type(body.get("type", "u8"), endian)
        members: list[ir.EnumMember] = []
        seen: dict[int, str] = {}
        for mname, mval in body["values"].items():
            value, doc = (mval, "") if isinstance(mval, int) else (mval["value"], mval.get("doc", ""))
            if value in seen:
                self.err(src, join(join(path, "values"), mname),
                         f"value {value} already used by {seen[value]}")
            if not base.lo <= value <= base.hi:
                self.err(src, join(join(path, "values"), mname),
                         f"value {value} does not fit {base.name}")
            if value in body.get("retired", []):
                self.err(src, join(join(path, "values"), mname),
                         f"value {value} is retired and must never be reused")
            seen[value] = mname
            member = ir.EnumMember(str(mname), value, doc)
            if isinstance(mval, dict) and "current" in mval:
                member.current = mval["current"]
                member.accepted = tuple(mval.get("accepted", [mval["current"]] * 2))
                lo, hi = member.accepted
                if not lo <= member.current <= hi:
                    self.err(src, join(join(path, "values"), mname),
                             "current version outside accepted range")
            members.append(member)
        return ir.EnumDef(name, base, members, body.get("doc", ""), body.get("spec", ""),
                          bool(body.get("open", False)), list(body.get("retired", [])),
                          src.line(path))

    def flags(self, src: Source, path: str, name: str, body: dict, endian: str) -> ir.FlagsDef:
        base = int_type(body["type"], endian)
        bits: list[ir.FlagBit] = []
        used = 0
        for bname, spec in body["bits"].items():
            bpath = join(join(path, "bits"), bname)
            if isinstance(spec, int):
                lo, width, enum, doc = spec, 1, None, ""
            else:
                if "bit" in spec:
                    lo, width = spec["bit"], 1
                elif "bits" in spec:
                    lo, width = spec["bits"][0], spec["bits"][1] - spec["bits"][0] + 1
                else:
                    self.err(src, bpath, "give 'bit' or 'bits'")
                    continue
                enum, doc = spec.get("enum"), spec.get("doc", "")
            if width < 1 or lo + width > base.bits:
                self.err(src, bpath, f"bits outside {base.name}")
                continue
            mask = ((1 << width) - 1) << lo
            if used & mask:
                self.err(src, bpath, "overlaps another flag")
            used |= mask
            bits.append(ir.FlagBit(str(bname), lo, width, enum, doc))
        return ir.FlagsDef(name, base, bits, body.get("doc", ""), body.get("spec", ""),
                           src.line(path))

    # -- records -------------------------------------------------------------------
    def record(self, src: Source, name: str, body: dict) -> ir.Record:
        path = join("records", name)
        params = {}
        for pname, pbody in (body.get("params") or {}).items():
            ptype = (pbody or {}).get("type", "int")
            if ptype not in _BUILTIN_PARAM_TYPES and ptype not in self.enums:
                self.err(src, join(join(path, "params"), pname), f"unknown param type {ptype!r}")
            params[pname] = ir.Param(pname, ptype, (pbody or {}).get("default"),
                                     (pbody or {}).get("doc", ""))
        rec = ir.Record(name=name, fields=[], doc=body.get("doc", ""), spec=body.get("spec", ""),
                        params=params, line=src.line(path), file=src.file)
        if "versions" in body:
            rec.version_from = body["versions"]["from"]
            rec.version_range = tuple(body["versions"]["range"])
        for i, fbody in enumerate(body["fields"]):
            fpath = join(join(path, "fields"), i)
            f = self.field(src, fpath, fbody)
            if f is not None:
                rec.fields.append(f)
        rec._src = src  # type: ignore[attr-defined]
        return rec

    def type_of(self, src: Source, path: str, fb: dict) -> ir.Type | None:
        if "switch" in fb:
            return self.switch(src, path, fb)
        tname = fb.get("type")
        if tname is None:
            self.err(src, path, "a field needs 'type' or 'switch'")
            return None
        endian = self.sources[0].data.get("endian", "le")
        it = int_type(tname, endian)
        if it is not None:
            return it
        m = _FLOAT_RE.match(tname)
        if m:
            return ir.FloatT(int(m.group(1)), m.group(2) or endian)
        if tname in ("bytes", "str"):
            prefix = int_type(fb["length"], endian) if "length" in fb else None
            size = None
            eos = False
            if "size" in fb:
                if fb["size"] == "eos":
                    eos = True
                else:
                    size = self.expr(src, join(path, "size"), fb["size"])
            if sum(x is not None and x is not False for x in (prefix, size, eos or None)) != 1:
                self.err(src, path, f"{tname} needs exactly one of size, length, size: eos")
            text = fb.get("encoding", "utf-8") if tname == "str" else None
            return ir.BytesT(size=size, prefix=prefix, eos=eos, text=text)
        if tname == "uleb128":
            return ir.VarintT()
        if tname == "padding":
            if "align" not in fb:
                self.err(src, path, "padding needs 'align'")
                return None
            return ir.PaddingT(int(fb["align"]), arbitrary=bool(fb.get("arbitrary", False)))
        for kind, table in (("enum", self.enums), ("flags", self.flagdefs),
                            ("alias", self.aliases)):
            if tname in table:
                return ir.RefT(kind, tname)
        if tname in self.record_names:
            return ir.RefT("record", tname, self.args(src, path, fb))
        self.err(src, join(path, "type"), f"unknown type {tname!r}")
        return None

    def args(self, src: Source, path: str, fb: dict) -> tuple[tuple[str, Expr], ...]:
        out = []
        for aname, aval in (fb.get("args") or {}).items():
            e = self.expr(src, join(join(path, "args"), aname), aval)
            if e is not None:
                out.append((aname, e))
        return tuple(out)

    def switch(self, src: Source, path: str, fb: dict) -> ir.SwitchT | None:
        on = self.expr(src, join(path, "switch"), fb["switch"])
        if on is None:
            return None
        if "cases" not in fb:
            self.err(src, path, "a switch needs 'cases'")
            return None
        cases = []
        for label, target in fb["cases"].items():
            cpath = join(join(path, "cases"), str(label))
            key = self.case_key(src, cpath, label, fb)
            if key is None:
                continue
            rec = None if target == "empty" else target
            if rec is not None and rec not in self.record_names:
                self.err(src, cpath, f"unknown record {target!r}")
            cases.append((key, str(label), rec))
        default = fb.get("default", "error")
        if default not in ("error", "bytes") and default not in self.record_names:
            self.err(src, join(path, "default"), f"unknown default {default!r}")
        return ir.SwitchT(on=on, cases=tuple(cases), default=default,
                          args=self.args(src, path, fb))

    def case_key(self, src: Source, path: str, label: Any, fb: dict) -> int | bool | bytes | None:
        if isinstance(label, (bool, int)):
            return label
        text = str(label)
        if text.startswith("hex:"):  # byte-string tags: 16-byte markers, 32-byte kind handles
            try:
                return bytes.fromhex(text[4:])
            except ValueError:
                self.err(src, path, f"case label {text!r} is not valid hex")
                return None
        if text.lstrip("-").isdigit():
            return int(text)
        if text.lower().startswith("0x"):
            return int(text, 16)
        # An enum member name: find the enum by the switch tag's declared type later; here
        # accept any enum that has exactly this member name.
        hits = [e.value_of(text) for e in self.enums.values() if e.value_of(text) is not None]
        if len(set(hits)) == 1:
            return hits[0]
        self.err(src, path, f"case label {text!r} is not a number or a unique enum member")
        return None

    def field(self, src: Source, path: str, fb: dict) -> ir.Field | None:
        ftype = self.type_of(src, path, fb)
        if ftype is None:
            return None
        f = ir.Field(name=fb["name"], type=ftype, doc=fb.get("doc", ""), spec=fb.get("spec", ""),
                     since=fb.get("since"), until=fb.get("until"), line=src.line(path), path=path)
        if "if" in fb:
            f.cond = self.expr(src, join(path, "if"), fb["if"])
        if "const" in fb:
            c = fb["const"]
            if isinstance(c, str):
                try:
                    f.const = bytes.fromhex(c.replace(" ", ""))
                except ValueError:
                    self.err(src, join(path, "const"), "const string must be hex bytes")
            else:
                f.const = c
        f.reserved = fb.get("reserved") == "zero"
        if "valid" in fb:
            f.valid = (fb["valid"].get("min"), fb["valid"].get("max"))
        if "size" in fb and not isinstance(ftype, ir.BytesT):
            f.size = None if fb["size"] == "eos" else self.expr(src, join(path, "size"), fb["size"])
        if "repeat" in fb:
            rp = fb["repeat"]
            if rp == "eos":
                f.repeat = ir.Repeat(eos=True)
            elif "count" in rp:
                f.repeat = ir.Repeat(count=self.expr(src, join(path, "repeat.count"), rp["count"]))
            elif "prefix" in rp:
                f.repeat = ir.Repeat(prefix=int_type(rp["prefix"]))
            elif "until" in rp:
                f.repeat = ir.Repeat(until=int(rp["until"]))
                if not isinstance(ftype, ir.VarintT) and self_int(ftype) is None:
                    self.err(src, join(path, "repeat"), "repeat.until needs an integer element")
            else:
                self.err(src, join(path, "repeat"), "repeat needs count, prefix, until or eos")
        f.view = fb.get("view")
        if "compressed" in fb:
            c = fb["compressed"]
            alg = self.expr(src, join(path, "compressed.algorithm"), c["algorithm"])
            f.compressed = ir.Compressed(
                algorithm=alg, length=int_type(c["length"]),
                when=self.expr(src, join(path, "compressed.when"), c["when"]) if "when" in c else None,
                limit=self.expr(src, join(path, "compressed.limit"), c["limit"]) if "limit" in c else None)
        if "checksum" in fb:
            c = fb["checksum"]
            covers = None if c["covers"] == "preceding" else tuple(c["covers"])
            f.checksum = ir.Checksum(c["algorithm"], covers, tuple(c.get("except", [])))
        if "value" in fb:
            f.value = self.expr(src, join(path, "value"), fb["value"])
        if "assert" in fb:
            items = []
            for i, a in enumerate(fb["assert"]):
                a = {"check": a} if isinstance(a, str) else a
                e = self.expr(src, join(join(path, "assert"), i), a["check"])
                if e is not None:
                    items.append(ir.Assert(e, a.get("message") or f"rule {a['check']} broken",
                                           a.get("error", "constraint")))
            f.asserts = tuple(items)
        return f

    # -- cross-field checks ----------------------------------------------------------
    def check_record(self, rec: ir.Record, records: dict[str, ir.Record]) -> None:
        src: Source = rec._src  # type: ignore[attr-defined]
        names = [f.name for f in rec.fields]
        by_name: dict[str, ir.Field] = {}
        for f in rec.fields:
            if f.name in by_name:
                # the same name may appear in disjoint versions or conditions only
                other = by_name[f.name]
                if f.cond is None and other.cond is None and f.since is None and f.until is None \
                        and other.since is None and other.until is None:
                    self.err(src, f.path, f"field {f.name!r} appears twice")
            by_name.setdefault(f.name, f)
        known = set(names) | set(rec.params)
        for f in rec.fields:
            for label, e in self.exprs_of(f):
                for n in sorted(e.names - known):
                    self.err(src, f.path, f"{label} refers to unknown name {n!r}")
            # derived: count/size naming a plain integer field
            for kind, e in (("count", f.repeat.count if f.repeat else None),
                            ("size", f.size or (f.type.size if isinstance(f.type, ir.BytesT) else None))):
                n = e.simple_name() if e is not None else None
                k = 0
                if n is None and kind == "size" and e is not None:
                    n, k = self.name_minus_const(e)
                if n and n in by_name:
                    tgt = by_name[n]
                    if names.index(n) > names.index(f.name):
                        self.err(src, f.path, f"{kind} field {n!r} must come before {f.name!r}")
                    elif tgt.value is None and tgt.derived_from is None:
                        tgt.derived_from = (kind, f.name)
                        tgt.derived_offset = k
            if f.checksum:
                for c in (f.checksum.covers or ()) + f.checksum.excluded:
                    if c not in by_name:
                        self.err(src, f.path, f"checksum covers unknown field {c!r}")
                    elif names.index(c) > names.index(f.name) and c not in f.checksum.excluded:
                        self.err(src, f.path, f"checksum must come after the field {c!r} it covers")
            if f.since is not None or f.until is not None:
                if rec.version_from is None:
                    self.err(src, f.path, "since/until need the record's 'versions: {from: ...}'")
            if f.view == "numpy":
                from .emit_construct import numpy_code, record_dtype  # noqa: PLC0415
                t = f.type
                ok = f.repeat is not None and (
                    record_dtype(records[t.target], self.family_stub(records)) is not None
                    if isinstance(t, ir.RefT) and t.kind == "record"
                    else numpy_code(t, self.family_stub(records)) is not None)
                if not ok:
                    self.err(src, f.path, "view: numpy needs a repeated fixed-size element "
                                          "of numpy-representable scalars")
            if isinstance(f.type, ir.RefT) and f.type.kind == "record":
                self.check_args(src, f.path, records[f.type.target], f.type.args, rec)
            if isinstance(f.type, ir.SwitchT):
                # each case takes the args it declares; an arg no case declares is an error
                targets = [t for _, _, t in f.type.cases if t in records]
                if f.type.default in records:
                    targets.append(f.type.default)
                for target in targets:
                    self.check_args(src, f.path, records[target], f.type.args, rec,
                                    extra_ok=True)
                known_args = {p for t in targets for p in records[t].params}
                for a, _ in f.type.args:
                    if a not in known_args:
                        self.err(src, f.path, f"no case of the switch has a param {a!r}")
        if rec.version_from is not None:
            if rec.version_from not in rec.params and rec.version_from not in by_name:
                self.err(src, join(join("records", rec.name), "versions"),
                         f"versions.from names neither a param nor a field: {rec.version_from!r}")

    @staticmethod
    def name_minus_const(e: Expr) -> tuple[str | None, int]:
        """``name - k`` (or ``name + k``) as (name, k); a size derived from it is measured + k."""
        import ast  # noqa: PLC0415
        t = e.tree
        if isinstance(t, ast.BinOp) and isinstance(t.op, (ast.Sub, ast.Add)) \
                and isinstance(t.left, ast.Name) and isinstance(t.right, ast.Constant) \
                and isinstance(t.right.value, int) and not isinstance(t.right.value, bool):
            k = t.right.value if isinstance(t.op, ast.Sub) else -t.right.value
            return t.left.id, k
        return None, 0

    def family_stub(self, records: dict[str, ir.Record]) -> ir.Family:
        """Enough of a Family for type lookups while records are still being checked."""
        return ir.Family(name="", title="", spec="", doc="", endian="le", files=[], digest="",
                         versions=None, enums=self.enums, flags=self.flagdefs,
                         aliases=self.aliases, records=records)

    def check_args(self, src: Source, path: str, callee: ir.Record,
                   args: tuple[tuple[str, Expr], ...], caller: ir.Record,
                   extra_ok: bool = False) -> None:
        given = {a for a, _ in args}
        for a in given - set(callee.params) if not extra_ok else ():
            self.err(src, path, f"record {callee.name!r} has no param {a!r}")
        for p in callee.params.values():
            if p.name not in given and p.name not in caller.params and p.default is None:
                self.err(src, path, f"param {p.name!r} of {callee.name!r} is not passed "
                                    "(give args or declare it on the caller)")

    @staticmethod
    def exprs_of(f: ir.Field):
        if f.cond is not None:
            yield "if", f.cond
        if f.size is not None:
            yield "size", f.size
        if isinstance(f.type, ir.BytesT) and f.type.size is not None:
            yield "size", f.type.size
        if f.repeat and f.repeat.count is not None:
            yield "repeat.count", f.repeat.count
        if f.value is not None:
            yield "value", f.value
        for a in f.asserts:
            yield "assert", a.check
        if isinstance(f.type, ir.SwitchT):
            yield "switch", f.type.on
            for a, e in f.type.args:
                yield f"args.{a}", e
        if isinstance(f.type, ir.RefT):
            for a, e in f.type.args:
                yield f"args.{a}", e
        if f.compressed:
            yield "compressed.algorithm", f.compressed.algorithm
            if f.compressed.when is not None:
                yield "compressed.when", f.compressed.when
            if f.compressed.limit is not None:
                yield "compressed.limit", f.compressed.limit
