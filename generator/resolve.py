"""Pass 2 (after JSON-Schema validation): resolve YAML data into the typed IR.

Names are resolved (types, enums, case labels), expressions parsed, derived fields found
(a field named by another's ``repeat.count`` or ``size`` is recomputed on encode), and
cross-field rules checked. Every problem carries file, line and YAML path.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from typing import Any

from ..runtime import registry
from . import (
    absent,
    defaults,
    exprcheck,
    framing_check,
    ir,
    located_check,
    numbers_check,
    peek_check,
)
from . import checksum_cover as cover
from .expr import Expr, ExprError, parse
from .layout import fixed_size, numpy_code, record_dtype
from .problems import Problems
from .yamlsource import Source, join

_INT_RE = re.compile(r"^([ui])(8|16|24|32|64|128)(le|be)?$")
_FLOAT_RE = re.compile(r"^f(32|64)(le|be)?$")
_BUILTIN_PARAM_TYPES = {"int", "bool", "str", "bytes"}


def self_int(t: ir.Type) -> ir.IntT | None:
    """The integer type of a plain integer field (for repeat.until), else None."""
    return t if isinstance(t, ir.IntT) else None


_VARINTS = ("uleb128", "sleb128", "zigzag")
# Names the generated module itself defines or imports at top level (class names are
# CamelCase of record/enum/flags names): a schema name that maps onto one would shadow it.
_MODULE_NAMES = frozenset({
    "Struct", "Array", "Bytes", "Const", "Switch", "Pass", "Check", "Error", "If", "Tell",
    "Pointer", "Rebuild", "Code", "Compressed", "Plain", "WithParams", "Terminated",
    "Container", "ListContainer", "Padding", "Prefixed", "GreedyBytes", "Enum", "Flag",
    "Checksum", "Computed", "Optional", "Select", "Sequence", "Default", "Hex", "Byte",
    "NumpyArray", "RepeatToEnd", "RepeatUntil", "ZeroPadding", "Leb128", "TerminatedBytes",
    "ChecksumError", "ConstraintError", "DecodeError", "EncodeError", "TruncatedError",
    "UnsupportedError", "Any", "FixedSized", "IfThenElse", "StringEncoded", "BitStruct",
    "BitsInteger", "ByteSwapped", "BytesInteger", "PascalString", "GreedyString",
    "PrefixedArray", "VarInt", "ZigZag", "GreedyRange", "Float32l", "Float32b", "Float64l",
    "Float64b", "Int8ul", "Int8sl", "Int16ul", "Int16ub", "Int32ul", "Int32ub", "Int64ul",
    "Int64ub", "LogList", "StopReason", "This", "Path", "Renamed", "Terminator",
    "Absent", "IntegerKind",
})
# Params become keyword arguments of the public functions, next to these.
_API_ARGS = frozenset({"buf", "offset", "end", "compiled", "value", "mv", "pos", "out", "v",
                       "start", "con", "stream", "exc", "i", "c", "nxt"})


def name_problem(name: str, what: str) -> str | None:
    """Why ``name`` cannot be a field/param/member/record name in generated Python."""
    import keyword  # noqa: PLC0415

    if isinstance(name, bool):  # YAML 1.1 reads on/off/yes/no/true/false as bools
        spelled = "on, yes or true" if name else "off, no or false"
        return (f"{what} name reads as the YAML boolean {str(name).lower()} (YAML takes an "
                f"unquoted {spelled} as a bool): quote the name, e.g. \"on\"")
    if not isinstance(name, str) or not name.isidentifier():
        return f"{what} name {name!r} is not a Python identifier"
    if keyword.iskeyword(name):
        return (f"{what} name {name!r} is a Python keyword (the generated module would not "
                f"compile); choose another name, e.g. {name + '_'!r}")
    if name.startswith("_"):
        return f"{what} name {name!r} starts with '_' (reserved for generated code)"
    return None


def varint_type(text: str) -> ir.VarintT | None:
    """A registered integer kind that needs no params, by name."""
    if text in _VARINTS:
        return ir.VarintT(kind=text)
    spec = registry.REGISTRY.integer_kinds.get(text)
    if spec is None or spec.required:
        return None
    codec = registry.REGISTRY.integer_codec(text)
    return ir.VarintT(kind=text, is_signed=spec.signed, max_bytes=codec.max_bytes,
                      fixed=codec.fixed)


def int_type(text: str, default_endian: str = "le") -> ir.IntT | None:
    m = _INT_RE.match(text)
    if not m:
        return None
    return ir.IntT(int(m.group(2)), m.group(1) == "i", m.group(3) or default_endian,
                   governed=m.group(3) is None)


class Resolver:
    """Resolve one family (possibly spread over several files, merged by the loader)."""

    def __init__(self, sources: list[Source], problems: Problems, digest: str) -> None:
        self.sources = sources
        self.problems = problems
        self.digest = digest
        self.where: dict[str, Source] = {}  # top-level item key -> its source

    # -- helpers -------------------------------------------------------------------
    @property
    def default_endian(self) -> str:
        """The file's fixed byte order; a file-level expression reads ``le`` until the
        byte-order pass gives its records one layout per order."""
        e = self.sources[0].data.get("endian", "le")
        return e if e in ("le", "be") else "le"

    def kind_type(self, text: str) -> ir.VarintT | None:
        """An integer kind by name: a registered one needing no params, or a named type
        of the schema giving a kind its params."""
        return self.int_kinds.get(text) or varint_type(text)

    def prefix_type(self, text: str) -> ir.IntT | ir.VarintT | None:
        """A length/count prefix: any fixed-width integer or integer kind."""
        return int_type(text, self.default_endian) or self.kind_type(text)

    def err(self, src: Source, path: str, message: str) -> None:
        self.problems.add(src.file, src.line(path), path, message)

    def expr(self, src: Source, path: str, value: Any) -> Expr | None:
        try:
            e = parse(value)
        except ExprError as exc:
            self.err(src, path, str(exc))
            return None
        try:  # ENUM.MEMBER is a constant; names of the record's fields and params win
            return exprcheck.substitute_enums(e, getattr(self, "enums", {}),
                                              getattr(self, "_cur_local", set()))
        except ValueError as exc:
            self.err(src, path, str(exc))
            return None

    # -- entry ---------------------------------------------------------------------
    def run(self) -> ir.Family | None:
        head = self.sources[0].data
        self.plugins = []
        self.int_kinds: dict[str, ir.VarintT] = {}
        endian = self.default_endian
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
            for i, spec in enumerate(data.get("plugins") or []):
                self.load_plugin(src, f"plugins[{i}]", spec)
            for name, body in (data.get("types") or {}).items():
                if "integer" in body:
                    kt = numbers_check.integer_type(self, src, join("types", name), name, body)
                    if kt is not None:
                        self.int_kinds[name] = kt
                    continue
                base = int_type(body["base"], endian)
                aliases[name] = ir.AliasDef(name, base, body.get("fixed_point"),
                                            body.get("doc", ""), src.line(join("types", name)),
                                            convert=body.get("convert"))
                for key in ("fixed_point", "convert"):
                    if body.get(key) is not None:
                        self.check_numeric(src, join(join("types", name), key), body[key], base)
            for name, body in (data.get("records") or {}).items():
                raw_records.append((src, name, body))
        self.enums, self.flagdefs, self.aliases = enums, flags, aliases
        names: dict[str, str] = {}
        for kind, table in (("enum", enums), ("flags", flags), ("type", aliases),
                            ("type", self.int_kinds)):
            for name in table:
                if name in names:
                    self.err(self.sources[0], name, f"{kind} {name!r} clashes with {names[name]}")
                names[name] = kind
        self.record_names = {name for _, name, _ in raw_records}
        self.raw_bodies = {name: body for _, name, body in raw_records}
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
        located_check.check(self, records)
        for rec in records.values():  # after every derived field is known
            for f in rec.fields:
                if f.framing is not None:
                    framing_check.check(self, rec._src, f, records)  # type: ignore[attr-defined]
        self.check_file_ranges(records)
        return ir.Family(
            name=head["family"], title=head.get("title", head["family"]),
            spec=head.get("spec", ""), doc=head.get("doc", ""), endian=endian,
            files=[s.file for s in self.sources], digest=self.digest, versions=versions,
            enums=enums, flags=flags, aliases=aliases, records=records,
            registries=registries, plugins=list(self.plugins),
            detect=self.detect_rules(records), endian_expr=self.file_endian(head, records),
        )

    def file_endian(self, head: dict, records: dict[str, ir.Record]) -> Any:
        """A file-level ``endian:`` that is an expression over params of the records."""
        e = head.get("endian", "le")
        if e in ("le", "be"):
            return None
        expr = self.expr(self.sources[0], "endian", e)
        if expr is not None and not any(expr.names <= set(r.params) for r in records.values()):
            self.err(self.sources[0], "endian", f"the byte-order expression {expr.source!r} "
                     "names no params a record takes (write le, be, or an expression over "
                     "params of the root records)")
        return expr

    def detect_rules(self, records: dict[str, ir.Record]) -> list[ir.Detect]:
        """``detect:`` entries (how ``inspect FILE`` recognises the family's files)."""
        out = []
        for src in self.sources:
            for i, body in enumerate(src.data.get("detect") or []):
                path = f"detect[{i}]"
                magic = str(body.get("magic", ""))
                try:
                    raw = bytes.fromhex(magic[4:].replace(" ", "")) if magic.startswith(
                        "hex:") else magic.encode("latin-1")
                except ValueError:
                    self.err(src, join(path, "magic"), "magic must be \"hex:...\" or text")
                    continue
                bad = [k for k in ("record", "then") if k in body and body[k] not in records]
                if bad:
                    self.err(src, join(path, bad[0]), f"unknown record {body[bad[0]]!r}")
                    continue
                tags = body.get("tags")
                if tags is not None and not any(
                        f.name == tags and isinstance(f.type, ir.SwitchT)
                        for f in records[body["record"]].fields):
                    self.err(src, join(path, "tags"), f"{tags!r} is not a switch field of "
                                                      f"{body['record']}")
                    continue
                if not raw and tags is None:
                    self.err(src, path, "give magic bytes or tags: <switch field>")
                    continue
                out.append(ir.Detect(body["record"], raw, int(body.get("at", 0)),
                                     bool(body.get("repeat", False)),
                                     tuple(sorted((body.get("params") or {}).items())),
                                     body.get("then"), tags))
        return out

    # -- plug-ins: checksums, codecs, numeric conversions -----------------------------
    plugins: list[str]

    def load_plugin(self, src: Source, path: str, spec: str) -> None:
        """Load a schema's ``plugins:`` entry now, so its algorithms validate the schema."""
        try:
            registry.load_plugin(spec)
        except Exception as exc:  # noqa: BLE001 - any import/registration failure is a problem
            self.err(src, path, f"cannot load plug-in {spec!r}: {type(exc).__name__}: {exc}")
            return
        if spec not in self.plugins:
            self.plugins.append(spec)

    def check_numeric(self, src: Source, path: str, name: str, base: ir.IntT | None) -> None:
        spec = registry.REGISTRY.numerics.get(name)
        if spec is None:
            self.err(src, path, f"unknown numeric kind {name!r} (registered: "
                                f"{', '.join(sorted(registry.REGISTRY.numerics))})")
        elif base is not None and spec.signed is not None and base.signed != spec.signed:
            self.err(src, path, f"{name} needs a{' signed' if spec.signed else 'n unsigned'} "
                                f"integer, not {base.name}")

    def checksum(self, src: Source, path: str, c: dict) -> ir.Checksum | None:
        """A field's ``checksum:``; the algorithm must be registered (built-in or plug-in)."""
        spec = registry.REGISTRY.checksums.get(c["algorithm"])
        if spec is None:
            self.err(src, join(path, "algorithm"),
                     f"unknown checksum algorithm {c['algorithm']!r} (registered: "
                     f"{', '.join(sorted(registry.REGISTRY.checksums))}; a plug-in adds more)")
            return None
        ranges: list[tuple[int, int]] = []
        files: list[tuple[Expr, Expr]] = []
        spans: list[tuple[str, str | None]] = []
        scope = ""
        if c["covers"] in ("preceding", "following", "all"):
            covers = None
            scope = "" if c["covers"] == "preceding" else c["covers"]
        else:
            names = [x for x in c["covers"] if isinstance(x, str)]
            for i, x in enumerate(c["covers"]):
                at = join(path, f"covers[{i}]")
                if isinstance(x, dict) and "bytes" in x:
                    a, b = x["bytes"]
                    if not 0 <= a < b:
                        self.err(src, at, f"empty byte range [{a}, {b})")
                    ranges.append((a, b))
                elif isinstance(x, dict) and "file" in x:
                    a, b = (self.expr(src, join(at, "file"), e) for e in x["file"])
                    if a is not None and b is not None:
                        files.append((a, b))
                elif isinstance(x, dict):
                    spans.append((x["from"], x.get("to")))
            if sum(map(bool, (names or spans, ranges, files))) > 1:
                self.err(src, join(path, "covers"),
                         "covers lists field names (with spans), record byte ranges or "
                         "file ranges, not both kinds")
            covers = tuple(names)
        filler: int | bytes = 0
        if "filler" in c:
            fv = c["filler"]
            if isinstance(fv, int) and not isinstance(fv, bool) and 0 <= fv <= 255:
                filler = fv
            elif isinstance(fv, str) and fv.startswith("hex:"):
                try:
                    filler = bytes.fromhex(fv[4:])
                except ValueError:
                    self.err(src, join(path, "filler"), f"bad hex filler {fv!r}")
            elif isinstance(fv, str):
                filler = fv.encode("latin-1", "replace")
            else:
                self.err(src, join(path, "filler"),
                         "filler is a byte value 0..255, \"hex:...\" or a text string")
        store = c.get("store") or {}
        bits = store.get("bits")
        if bits is not None and (bits <= 0 or bits > spec.bits or (spec.digest and bits % 8)):
            self.err(src, join(path, "store.bits"),
                     f"store.bits must be 1..{spec.bits}" + (" in whole bytes" if spec.digest else ""))
            bits = None
        seed = None
        if "seed" in c:
            seed = self.expr(src, join(path, "seed"), c["seed"])
            if not spec.seeded:
                self.err(src, join(path, "seed"), f"{spec.name} takes no seed")
        params = []
        for pname, pval in (c.get("params") or {}).items():
            if pname not in spec.params:
                self.err(src, join(join(path, "params"), pname),
                         f"{spec.name} has no parameter {pname!r} (it takes: "
                         f"{', '.join(spec.params) or 'none'})")
                continue
            e = self.expr(src, join(join(path, "params"), pname), pval)
            if e is not None:
                params.append((pname, e))
        full = spec.bits
        if spec.width_param is not None:
            full = self.checksum_width(src, path, spec, dict(params))
        return ir.Checksum(spec.name, covers, tuple(c.get("except", [])), bits, seed,
                           tuple(params), full, spec.digest, tuple(ranges), scope, filler,
                           tuple(files), tuple(spans))

    def checksum_width(self, src: Source, path: str, spec: registry.ChecksumSpec,
                       params: dict[str, Expr]) -> int:
        """A parametrised checksum's width: its width param, a constant; and every
        keyword-only parameter without a default is given."""
        for pname, p in inspect.signature(spec.func).parameters.items():
            if p.kind is p.KEYWORD_ONLY and p.default is p.empty and pname not in params:
                self.err(src, join(path, "params"), f"{spec.name} needs the param {pname!r}")
        e = params.get(spec.width_param)
        w = e.constant() if e is not None else None
        if e is not None and (not isinstance(w, int) or isinstance(w, bool)
                              or not 1 <= w <= spec.bits):
            self.err(src, join(join(path, "params"), spec.width_param),
                     f"{spec.width_param} must be a constant 1..{spec.bits}")
            return spec.bits
        return w if isinstance(w, int) else spec.bits

    @staticmethod
    def _fixed_size(f: ir.Field, aliases: dict, enums: dict, flags: dict) -> int | None:
        return fixed_size(f, aliases, enums, flags)

    def check_chain(self, src: Source, f: ir.Field, records: dict[str, ir.Record]) -> None:
        """A chain needs a repeat of one record that has the param and a stored integer
        field at a fixed distance from the item's start or end."""
        ch = f.chain
        t = f.type
        if f.repeat is None or not isinstance(t, ir.RefT) or t.kind != "record":
            self.err(src, join(f.path, "chain"), "chain needs a repeated record field")
            return
        if f.repeat.count is None and not f.repeat.eos:
            self.err(src, join(f.path, "chain"), "chain works with repeat: {count: ...} or eos")
        callee = records[t.target]
        if ch.param not in callee.params:
            self.err(src, join(f.path, "chain.param"),
                     f"record {callee.name!r} has no param {ch.param!r}")
        names = [x.name for x in callee.fields]
        if callee.version_from is None and ch.source not in names \
                and ch.source in {x.name for x in callee.model_fields}:
            f.chain = dataclasses.replace(ch, decoded=True)  # a value with no type, a bit range
            return
        if ch.source not in names or callee.version_from is not None:
            self.err(src, join(f.path, "chain.from"),
                     f"record {callee.name!r} has no (unversioned) field {ch.source!r}")
            return
        i = names.index(ch.source)
        sizes = [self._fixed_size(x, self.aliases, self.enums, self.flagdefs)
                 for x in callee.fields]
        base = callee.fields[i].type
        if isinstance(base, ir.RefT) and base.kind == "alias":
            base = self.aliases[base.target].base
        stored = isinstance(base, ir.IntT) and sizes[i] is not None and base.code is not None
        fixed = not (None in sizes[:i] and None in sizes[i + 1:])
        if not (stored and fixed) and ch.source in {x.name for x in callee.model_fields}:
            f.chain = dataclasses.replace(ch, decoded=True)  # the item's decoded value
        elif not stored:
            self.err(src, join(f.path, "chain.from"), f"{ch.source!r} must be a stored integer")
        elif not fixed:
            self.err(src, join(f.path, "chain.from"),
                     f"{ch.source!r} must sit at a fixed offset from the item's start or end")

    def check_checksum_cover(self, src: Source, rec: ir.Record, f: ir.Field,
                             names: list[str]) -> None:
        """Covered names must be fields; spans expand to the fields they run over; a
        checksum covering itself needs a fixed width its filler fills exactly."""
        ck = f.checksum
        me = names.index(f.name)
        covers = list(ck.covers or ())
        for i, (a, b) in enumerate(ck.spans):
            at = join(f.path, f"checksum.covers[{len(covers) + i}]")
            bad = [n for n in (a, b) if n is not None and n not in names]
            if bad:
                self.err(src, at, f"span names unknown field {bad[0]!r}")
                continue
            lo = names.index(a)
            hi = names.index(b) if b is not None else me - 1
            if b is None and lo >= me:
                self.err(src, at, f"span from {a!r} to the checksum: {a!r} must come "
                                  "before it (name its end with to:)")
            elif hi < lo:
                self.err(src, at, f"span ends at {b!r}, before its start {a!r}")
            covers += [n for n in names[lo:hi + 1] if n not in covers]
        if ck.spans:
            ck = f.checksum = dataclasses.replace(ck, covers=tuple(covers), spans=())
        for c in (ck.covers or ()) + ck.excluded:
            if c not in names:
                self.err(src, f.path, f"checksum covers unknown field {c!r}")
        if not (ck.ranges or ck.files or cover.covered(rec.fields, rec.fields.index(f))):
            self.err(src, join(f.path, "checksum.covers"), "the checksum covers no bytes")
        selfcover = ck.scope == "all" or (ck.covers is not None and f.name in ck.covers)
        selfcover = selfcover and f.name not in ck.excluded
        # its own width, present or not (a condition makes the field's size unknown)
        width = self._fixed_size(dataclasses.replace(f, cond=None, since=None, until=None),
                                 self.aliases, self.enums, self.flagdefs)
        if selfcover and width is None:
            self.err(src, f.path, "a checksum covering its own bytes needs a fixed width")
        elif isinstance(ck.filler, bytes) and (not (selfcover or ck.files)
                                               or len(ck.filler) != width):
            why = (f"is {len(ck.filler)} bytes, the field {width}" if selfcover or ck.files
                   else "applies only to a checksum that covers its own bytes")
            self.err(src, join(f.path, "checksum.filler"), f"filler {why}")

    def check_file_ranges(self, records: dict[str, ir.Record]) -> None:
        """A record holding a checksum over absolute file ranges is read where its bytes
        are the buffer's own: not from a ``size:`` section or a compressed one, which
        the Construct path reads as a stream of their own (offsets would not be the
        buffer's there, nor the bytes written so far on encode)."""
        def refs(t: ir.Type) -> list[str]:
            if isinstance(t, ir.RefT) and t.kind == "record":
                return [t.target]
            if isinstance(t, ir.SwitchT):
                return [r for _, _, r in t.cases if r] + [t.default]
            return []

        holders = {n for n, r in records.items()
                   if any(f.checksum is not None and f.checksum.files for f in r.fields)}
        if not holders:
            return
        reach: dict[str, bool] = {}

        def holds(name: str, seen: frozenset[str] = frozenset()) -> bool:
            if name not in records or name in seen:
                return False
            if name not in reach:
                reach[name] = name in holders or any(
                    holds(t, seen | {name}) for f in records[name].fields for t in refs(f.type))
            return reach[name]

        for rec in records.values():
            for f in rec.fields:
                if (f.size is not None or f.compressed is not None) \
                        and any(holds(t) for t in refs(f.type)):
                    self.err(rec._src, f.path,  # type: ignore[attr-defined]
                             "a record with a checksum over file ranges cannot be read "
                             "from a size: or compressed section (its offsets are the "
                             "buffer's own)")

    def check_checksum_width(self, src: Source, f: ir.Field) -> None:
        """The stored width must hold the algorithm's value (or its declared truncation)."""
        ck = f.checksum
        want = ck.store_bits or ck.bits
        t = f.type
        if isinstance(t, ir.RefT) and t.kind == "alias":
            t = self.aliases[t.target].base
        if ck.digest:
            n = t.size.constant() if isinstance(t, ir.BytesT) and t.size is not None else None
            if not isinstance(n, int) or n * 8 != want:
                self.err(src, f.path, f"{ck.algorithm} stores {want // 8} bytes: the field "
                                      f"must be bytes of size {want // 8}")
            return
        if isinstance(t, ir.VarintT) and t.fixed is not None:
            return  # a fixed-width kind: a value it cannot write is an EncodeError
        if not isinstance(t, ir.IntT):
            self.err(src, f.path, f"a {ck.algorithm} checksum needs an integer field "
                                  "(fixed-width binary or a fixed-width integer kind)")
        elif t.bits < want:
            hint = "" if ck.store_bits else (f"; declare store: {{bits: {t.bits}}} to keep "
                                             "its low bits")
            self.err(src, f.path, f"{t.name} is narrower than {ck.algorithm}'s {want} bits{hint}")

    # -- enums and flags -----------------------------------------------------------
    def enum(self, src: Source, path: str, name: str, body: dict, endian: str) -> ir.EnumDef:
        base = int_type(body.get("type", "u8"), endian)
        members: list[ir.EnumMember] = []
        seen: dict[int, str] = {}
        if path.startswith("enums"):
            self.check_name(src, path, name, "enum")
        for mname, mval in body["values"].items():
            self.check_name(src, join(join(path, "values"), mname), str(mname), "enum member")
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
        self.check_name(src, path, name, "flags")
        for bname, spec in body["bits"].items():
            bpath = join(join(path, "bits"), bname)
            self.check_name(src, bpath, str(bname), "flag bit")
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
        self.check_name(src, path, name, "record")
        for pname, pbody in (body.get("params") or {}).items():
            self.check_name(src, join(join(path, "params"), pname), pname, "param")
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
        rec.rows = bool(body.get("rows", False))
        rec.many = body.get("many")
        if "endian" in body:
            rec.endian = self.order_expr(src, join(path, "endian"), body["endian"])
        if rec.rows and rec.version_from is not None:
            self.err(src, join(path, "rows"), "rows: a versioned record has one layout per "
                     "version and no single loop to read rows with")
        self._cur_fields, self._cur_params = rec.fields, params
        self._cur_local = set(params) | {fb.get("name") for fb in body["fields"]
                                         if isinstance(fb, dict)} | {
            b for fb in body["fields"] if isinstance(fb, dict)
            and isinstance(fb.get("bits"), dict) for b in fb["bits"]}  # bit ranges too
        for i, fbody in enumerate(body["fields"]):
            fpath = join(join(path, "fields"), i)
            if isinstance(fbody, dict) and "value" in fbody and "type" not in fbody \
                    and "switch" not in fbody:
                numbers_check.virtual(self, src, fpath, fbody, rec)
                continue
            if isinstance(fbody, dict) and "at" in fbody:  # random access: apart
                loc = located_check.resolve(self, src, fpath, fbody)
                if loc is not None:
                    rec.located.append(loc)
                continue
            f = self.field(src, fpath, fbody)
            if f is not None:
                rec.fields.append(f)
        absent.fold(self, src, rec)  # a size/count with absent: becomes its field's prefix
        rec._src = src  # type: ignore[attr-defined]
        return rec

    def order_expr(self, src: Source, path: str, value: Any) -> Any:
        """An ``endian:`` of a record or field: ``le``/``be`` (a fixed order, kept as a
        string literal) or an expression evaluating to 'le' or 'be'."""
        if value in ("le", "be"):
            return parse(repr(value))
        e = self.expr(src, path, value)
        if e is not None and isinstance(e.constant(), str) and e.constant() not in ("le", "be"):
            self.err(src, path, f"byte order must be 'le' or 'be', not {e.constant()!r}")
            return None
        return e

    def type_of(self, src: Source, path: str, fb: dict) -> ir.Type | None:
        if "switch" in fb:
            return self.switch(src, path, fb)
        tname = fb.get("type")
        if tname is None:
            self.err(src, path, "a field needs 'type' or 'switch'")
            return None
        endian = self.default_endian
        it = int_type(tname, endian)
        if it is not None:
            return it
        m = _FLOAT_RE.match(tname)
        if m:
            return ir.FloatT(int(m.group(1)), m.group(2) or endian, governed=not m.group(2))
        if tname in ("bytes", "str"):
            prefix = None
            if "length" in fb:
                prefix = self.prefix_type(str(fb["length"]))
                if prefix is None:
                    self.err(src, join(path, "length"), f"unknown length type {fb['length']!r}")
            size = None
            eos = False
            term = self.terminator(src, join(path, "terminator"), fb["terminator"]) \
                if "terminator" in fb else None
            if "size" in fb:
                if fb["size"] == "eos":
                    eos = True
                else:
                    size = self.expr(src, join(path, "size"), fb["size"])
            if sum(x is not None and x is not False
                   for x in (prefix, size, eos or None, term)) != 1:
                self.err(src, path, f"{tname} needs exactly one of size, length, size: eos, "
                                    "terminator")
            text = fb.get("encoding", "utf-8") if tname == "str" else None
            return ir.BytesT(size=size, prefix=prefix, eos=eos, text=text, terminator=term)
        kt = self.kind_type(tname)
        if kt is not None:
            return kt
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

    def terminator(self, src: Source, path: str, value: Any) -> bytes | None:
        """``terminator: 0`` (one byte) or ``"hex:0d0a"`` (a byte sequence)."""
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 255:
            return bytes([value])
        if isinstance(value, str) and value.startswith("hex:"):
            try:
                term = bytes.fromhex(value[4:])
            except ValueError:
                term = b""
            if term:
                return term
        self.err(src, path, "terminator must be a byte value 0..255 or \"hex:...\" bytes")
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
        tag_enum = self.tag_enum(on)
        text = self.tag_text(on)
        for label, target in fb["cases"].items():
            cpath = join(join(path, "cases"), str(label))
            key = (self.text_case_key(src, cpath, label, text) if text is not None
                   else self.case_key(src, cpath, label, fb, tag_enum))
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

    def tag_enum(self, on: Expr) -> str | None:
        """The enum of a switch tag that is a field or param (or a field of a sub-record,
        ``header.kind``), so case labels resolve against that enum only."""
        import ast  # noqa: PLC0415
        chain: list[str] = []
        node = on.tree
        while isinstance(node, ast.Attribute):
            chain.insert(0, node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        root = node.id
        tname: str | None = None
        for f in reversed(getattr(self, "_cur_fields", [])):
            if f.name == root:
                tname = f.type.target if isinstance(f.type, ir.RefT) else None
                break
        else:
            param = getattr(self, "_cur_params", {}).get(root)
            tname = param.type if param is not None else None
        for attr in chain:
            body = self.raw_bodies.get(tname or "")
            if body is None:
                return None
            tname = next((fb.get("type") for fb in body.get("fields", [])
                          if isinstance(fb, dict) and fb.get("name") == attr), None)
        return tname if tname in self.enums else None

    def tag_text(self, on: Expr) -> str | None:
        """The encoding of a switch tag that is a ``str`` field or param (else None)."""
        name = on.simple_name()
        if name is None:
            return None
        for f in reversed(getattr(self, "_cur_fields", [])):
            if f.name == name:
                t = f.type
                return t.text if isinstance(t, ir.BytesT) and f.repeat is None else None
        param = getattr(self, "_cur_params", {}).get(name)
        return "utf-8" if param is not None and param.type == "str" else None

    def text_case_key(self, src: Source, path: str, label: Any, encoding: str) -> str | None:
        """A case label of a ``str`` tag: the text itself, or ``"hex:..."`` bytes read in
        the tag's encoding (so both spellings match the decoded string)."""
        if not isinstance(label, str):
            self.err(src, path, f"case label {label!r} of a str tag must be text (quote it)")
            return None
        if not label.startswith("hex:"):
            return label
        try:
            return bytes.fromhex(label[4:]).decode(encoding)
        except ValueError:
            self.err(src, path, f"case label {label!r} is not valid hex text in {encoding}")
            return None

    def case_key(self, src: Source, path: str, label: Any, fb: dict,
                 tag_enum: str | None = None) -> int | bool | bytes | None:
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
        if "." in text:  # explicit Enum.MEMBER
            ename, _, member = text.partition(".")
            from .model import camel  # noqa: PLC0415
            ename = next((n for n in self.enums if ename in (n, camel(n))), ename)
            e = self.enums.get(ename)
            value = e.value_of(member) if e is not None else None
            if value is None:
                self.err(src, path, f"case label {text!r}: no such enum member")
            elif tag_enum is not None and ename != tag_enum:
                self.err(src, path, f"case label {text!r} is not of the tag's enum {tag_enum!r}")
                return None
            return value
        if tag_enum is not None:  # labels belong to the tag's own enum
            value = self.enums[tag_enum].value_of(text)
            if value is None:
                self.err(src, path, f"case label {text!r} is not a member of enum {tag_enum!r}")
            return value
        # the tag's type is not known here (an expression): the member must be unambiguous
        hits = [e.value_of(text) for e in self.enums.values() if e.value_of(text) is not None]
        if len(set(hits)) == 1:
            return hits[0]
        self.err(src, path, f"case label {text!r} is not a number or a unique enum member "
                            "(write Enum.MEMBER)")
        return None

    def check_name(self, src: Source, path: str, name: Any, what: str) -> None:
        from .model import camel  # noqa: PLC0415
        problem = name_problem(name, what)
        if problem is None and what in ("record", "enum", "flags") and camel(name) in _MODULE_NAMES:
            problem = (f"{what} name {name!r} becomes class {camel(name)!r}, a name the "
                       "generated module already uses")
        if problem is None and what == "param" and name in _API_ARGS:
            problem = f"param name {name!r} clashes with an argument of the generated functions"
        if problem is None and what == "flag bit" and name in ("from_int", "to_int", "to_dict"):
            problem = f"flag bit name {name!r} clashes with a method of the flags class"
        if problem is None and what == "enum member" and name in ("name", "value", "mro"):
            problem = f"enum member name {name!r} clashes with an attribute of Python enums"
        if problem is not None:
            self.err(src, path, problem)

    def field(self, src: Source, path: str, fb: dict) -> ir.Field | None:
        self.check_name(src, join(path, "name"), fb.get("name"), "field")
        comp = fb.get("compressed")
        if isinstance(comp, dict) and comp.get("plain_size") is not None:
            if "size" in fb:
                self.err(src, join(path, "compressed.plain_size"),
                         "plain_size and size: both say the decompressed size; keep one")
            else:  # the decompressed size: the field's size (exact, derived on encode)
                fb = {**fb, "size": comp["plain_size"],
                      "compressed": {"limit": comp["plain_size"], **comp}}
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
                pt = self.prefix_type(str(rp["prefix"]))
                if pt is None:
                    self.err(src, join(path, "repeat.prefix"),
                             f"unknown count type {rp['prefix']!r}")
                f.repeat = ir.Repeat(prefix=pt, absent=rp.get("absent"))
            elif "until_item" in rp:
                f.repeat = ir.Repeat(until_item=self.expr(src, join(path, "repeat.until_item"),
                                                          rp["until_item"]))
            elif rp.get("eos") is True or "stop_on_error" in rp:
                if rp.get("stop_on_error") is not True or rp.get("eos", True) is not True:
                    self.err(src, join(path, "repeat"),
                             "stop_on_error needs eos: true and stop_on_error: true")
                f.repeat = ir.Repeat(eos=True, stop_on_error=True)
            elif "until" in rp:
                f.repeat = ir.Repeat(until=int(rp["until"]))
                if not isinstance(ftype, ir.VarintT) and self_int(ftype) is None:
                    self.err(src, join(path, "repeat"), "repeat.until needs an integer element")
            else:
                self.err(src, join(path, "repeat"), "repeat needs count, prefix, until or eos")
        f.view = fb.get("view")
        if "endian" in fb:
            f.endian = self.order_expr(src, join(path, "endian"), fb["endian"])
        if "chain" in fb:
            ch = fb["chain"]
            first = self.expr(src, join(path, "chain.first"), ch.get("first", 0))
            if first is not None:
                f.chain = ir.Chain(ch["param"], ch["from"], first)
        if "framing" in fb:
            f.framing = framing_check.resolve(self, src, path, fb["framing"])
        if "compressed" in fb:
            f.compressed = self.compressed(src, join(path, "compressed"), fb["compressed"])
        if "checksum" in fb:
            f.checksum = self.checksum(src, join(path, "checksum"), fb["checksum"])
        conv = fb.get("convert")
        if conv is None and isinstance(ftype, ir.RefT) and ftype.kind == "alias":
            conv = self.aliases[ftype.target].convert
        if conv is not None:
            it = ftype if isinstance(ftype, ir.IntT) else (
                self.aliases[ftype.target].base if isinstance(ftype, ir.RefT)
                and ftype.kind == "alias" else None)
            if it is None and not isinstance(ftype, ir.VarintT):
                self.err(src, join(path, "convert"), "convert needs an integer or varint field")
            elif "repeat" in fb or "const" in fb or "value" in fb:
                self.err(src, join(path, "convert"),
                         "convert applies to a single stored value (no repeat/const/value)")
            else:
                self.check_numeric(src, join(path, "convert"), conv, it)
                f.convert = conv
        if "value" in fb:
            f.value = self.expr(src, join(path, "value"), fb["value"])
        if "default" in fb and "switch" not in fb:  # a switch's default is its default case
            defaults.resolve_default(self, src, path, f, fb["default"])
        if "assert" in fb:
            items = []
            for i, a in enumerate(fb["assert"]):
                a = {"check": a} if isinstance(a, str) else a
                e = self.expr(src, join(join(path, "assert"), i), a["check"])
                if e is not None:
                    items.append(ir.Assert(e, a.get("message") or f"rule {a['check']} broken",
                                           a.get("error", "constraint")))
            f.asserts = tuple(items)
        if "bits" in fb:
            numbers_check.bit_fields(self, src, path, fb, f)
        if "absent" in fb:
            f.absent = fb["absent"]
        absent.check(self, src, path, fb, f)
        if fb.get("peek") is True:
            peek_check.field(self, src, path, fb, f)
        return f

    def compressed(self, src: Source, path: str, c: dict) -> ir.Compressed:
        raw = c["algorithm"]
        if "codecs" not in c and isinstance(raw, str) and raw in registry.REGISTRY.codecs:
            raw = repr(raw)  # a bare registered codec name is that codec, not a field
        alg = self.expr(src, join(path, "algorithm"), raw)
        length = c.get("length", "none")
        lt = None if length == "none" else self.prefix_type(str(length))  # any kind
        codecs = None
        if "codecs" in c:
            codecs = tuple((str(k), str(v)) for k, v in c["codecs"].items())
        names = [v for _, v in codecs] if codecs else (
            [alg.constant()] if alg is not None and isinstance(alg.constant(), str) else [])
        for name in names:
            spec = registry.REGISTRY.codecs.get(name)
            if spec is None:
                self.err(src, join(path, "codecs") if codecs else join(path, "algorithm"),
                         f"unknown compression codec {name!r} (registered: "
                         f"{', '.join(sorted(registry.REGISTRY.codecs))})")
            elif lt is None and "stored_size" not in c and not spec.self_terminating:
                # (a stored compressed size bounds the region as a length prefix does)
                self.err(src, join(path, "length"),
                         f"codec {name!r} is not self-terminating: the region needs a length")
        return ir.Compressed(
            algorithm=alg, length=lt,
            when=self.expr(src, join(path, "when"), c["when"]) if "when" in c else None,
            limit=self.expr(src, join(path, "limit"), c["limit"]) if "limit" in c else None,
            codecs=codecs, stored=c.get("stored_size"))

    # -- cross-field checks ----------------------------------------------------------
    def check_stored(self, src: Source, f: ir.Field, by_name: dict, names: list) -> None:
        """``compressed.stored_size``: an earlier stored fixed-width integer, derived."""
        n = f.compressed.stored
        path = join(f.path, "compressed.stored_size")
        tgt = by_name.get(n)
        if f.compressed.length is not None:
            self.err(src, path, "stored_size and length: both say where the compressed "
                                "bytes end; keep one")
        elif tgt is None or names.index(n) > names.index(f.name):
            self.err(src, path, f"stored_size: {n!r} is no field before {f.name!r}")
        elif not isinstance(tgt.type, (ir.IntT, ir.VarintT)) or not tgt.in_model \
                or tgt.repeat is not None or tgt.convert is not None:
            self.err(src, path, f"stored_size: {n!r} is not a plain integer field (stored, "
                                f"not derived or computed)")
        else:
            tgt.derived_from = ("stored", f.name)

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
        known = set(names) | set(rec.params) | {"_remaining", "_offset"} | set(rec.bit_parts) \
            | {v.name for v in rec.virtuals}
        numbers_check.check_virtuals(self, src, rec, known, by_name)
        for f in rec.fields:
            for p in f.bits:
                if p.name in by_name or p.name in rec.params:
                    self.err(src, join(f.path, f"bits.{p.name}"),
                             f"bit field {p.name!r} clashes with a field or param")
            for label, e in self.exprs_of(f):
                for n in sorted(e.names - known - ({"_item"} if label == "repeat.until_item"
                                                   else set())):
                    self.err(src, f.path, f"{label} refers to unknown name {n!r}")
                for msg in self.expr_types(rec, f, e, records):
                    self.err(src, join(f.path, label), msg)
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
            if f.compressed is not None and f.compressed.stored is not None:
                self.check_stored(src, f, by_name, names)
            if f.chain is not None:
                self.check_chain(src, f, records)
            peek_check.uses(self, src, rec, f)
            if f.checksum and f.checksum.ranges:
                # ranges are read before the checksum: they must lie in the fixed prefix
                prefix = 0
                for x in rec.fields[:names.index(f.name)]:
                    size = self._fixed_size(x, self.aliases, self.enums, self.flagdefs)
                    if size is None:
                        break
                    prefix += size
                for a, b in f.checksum.ranges:
                    if b > prefix:
                        self.err(src, f.path, f"byte range [{a}, {b}) reaches past the "
                                              f"{prefix} fixed bytes before the checksum")
            if f.checksum:
                self.check_checksum_width(src, f)
                self.check_checksum_cover(src, rec, f, names)
            if f.since is not None or f.until is not None:
                if rec.version_from is None:
                    self.err(src, f.path, "since/until need the record's 'versions: {from: ...}'")
            if f.view not in (None, "numpy", "packed"):
                self.err(src, f.path, f"unknown view {f.view!r} (numpy or packed)")
            if f.view == "packed":
                t = f.type
                base = t if isinstance(t, ir.IntT | ir.FloatT) else (
                    self.aliases[t.target].base
                    if isinstance(t, ir.RefT) and t.kind == "alias" else None)
                rp = f.repeat
                if rp is None or (rp.count is None and rp.prefix is None) or base is None \
                        or f.convert is not None or f.valid is not None \
                        or f.chain is not None or f.const is not None or f.reserved:
                    self.err(src, f.path, "view: packed needs a repeat with count or prefix "
                                          "of a plain integer or float element (no convert, "
                                          "valid, const, reserved or chain)")
            if f.view == "numpy":
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

    def expr_types(self, rec: ir.Record, f: ir.Field, e: Expr,
                   records: dict[str, ir.Record]) -> list[str]:
        """Mismatched comparisons in one of ``f``'s expressions (see exprcheck)."""
        def kind_of(x: ir.Field) -> object:
            k = exprcheck.field_kind(x.type, self.enums, self.aliases)
            return ("list", k) if x.repeat is not None else (k or "?")

        def root(name: str) -> object:
            p = rec.params.get(name)
            if p is not None:
                return ("enum", p.type) if p.type in self.enums else p.type
            x = next((x for x in rec.fields if x.name == name), None)
            return kind_of(x) if x is not None else None

        def member(k: object, name: str) -> object:
            if not (isinstance(k, tuple) and k[0] == "record" and k[1] in records):
                return "?"
            x = next((x for x in records[k[1]].fields if x.name == name), None)
            return kind_of(x) if x is not None else None

        return exprcheck.problems(e, root, member)

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
        if f.repeat and f.repeat.until_item is not None:
            yield "repeat.until_item", f.repeat.until_item
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
        if f.checksum is not None:
            if f.checksum.seed is not None:
                yield "checksum.seed", f.checksum.seed
            for a, e in f.checksum.params:
                yield f"checksum.params.{a}", e
            for a, b in f.checksum.files:
                yield "checksum.covers.file", a
                yield "checksum.covers.file", b
        if f.chain is not None:
            yield "chain.first", f.chain.first
        if f.compressed:
            yield "compressed.algorithm", f.compressed.algorithm
            if f.compressed.when is not None:
                yield "compressed.when", f.compressed.when
            if f.compressed.limit is not None:
                yield "compressed.limit", f.compressed.limit
