"""Compatibility rules for ``bytewright diff``, as data.

Each rule is a record: an id (what ``--allow`` names), a short name, a category, what it
protects, the scope it looks at and a check function. The engine in ``diff.py`` pairs old
and new objects of one scope (family registry, enum, flags, record, layout of one version
group, field) and calls every rule of that scope; a check yields ``Hit`` values.

Categories (modelled on the append-only contracts "never reorder, renumber, remove, or
reuse"):

- ``WIRE-BREAKING``: bytes of an existing version change meaning (width, type, offset,
  order, removal, magic, checksum coverage, encoding). A layout change to an existing
  version without a version bump lands here.
- ``API-BREAKING``: not one byte changes, but the generated public API does (a class or
  attribute renamed or removed, a decoder signature, an enum member name), or objects of
  older versions lack a value code reads (a version-gated field without a default).
- ``ID-CONTRACT``: an id (enum value, op code, registry entry, flag bit, version) is
  renumbered, removed, reassigned or a retired id is reused.
- ``ADDITIVE``: new ids, new records, new versions, new switch cases: safe for readers
  that skip unknowns.
- ``DOC``: documentation or spec references only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from dataclasses import field as dataclass_field

from ..generator import byteorder, ir
from ..generator.pipeline import type_label

WIRE = "WIRE-BREAKING"
API = "API-BREAKING"
IDS = "ID-CONTRACT"
ADDITIVE = "ADDITIVE"
DOC = "DOC"
CATEGORIES = (WIRE, API, IDS, ADDITIVE, DOC)
BREAKING = frozenset({WIRE, API, IDS})


@dataclass(frozen=True)
class Loc:
    file: str
    line: int | None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line is not None else self.file

    def as_dict(self) -> dict:
        return {"file": self.file, "line": self.line}


@dataclass(frozen=True)
class Hit:
    """What a check found: the subject (dotted path), a message, both locations."""

    subject: str
    message: str
    old: Loc | None
    new: Loc | None
    details: tuple[str, ...] = ()  # consequences of this one cause


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    category: str
    scope: str  # registry | enum | flags | record | layout | field | family
    purpose: str
    check: Callable[..., Iterable[Hit]]

    @property
    def breaking(self) -> bool:
        return self.category in BREAKING


# -- the objects the engine hands to checks ----------------------------------------------

class SideView:
    """One side's family plus a way to locate YAML paths (for lines the IR lacks)."""

    def __init__(self, family: ir.Family, locate: Callable[[ir.Family, str], Loc]):
        self.family = family
        self._locate = locate

    def loc(self, yaml_path: str) -> Loc:
        return self._locate(self.family, yaml_path)

    def rec_loc(self, rec: ir.Record, f: ir.Field | None = None) -> Loc:
        line = f.line if f is not None and f.line is not None else rec.line
        return Loc(self.file_label(rec.file), line)

    def file_label(self, file: str) -> str:
        return self._locate(self.family, "\0file:" + file).file


@dataclass
class FamilyPair:
    old: SideView
    new: SideView
    _record_renames: dict[str, str] | None = None

    @property
    def name(self) -> str:
        return (self.new or self.old).family.name

    @property
    def record_renames(self) -> dict[str, str]:
        """Records that vanished while one with the same layouts appeared (old -> new)."""
        if self._record_renames is None:
            of, nf = self.old.family, self.new.family
            gone = [r for n, r in of.records.items() if n not in nf.records]
            came = [r for n, r in nf.records.items() if n not in of.records]
            out: dict[str, str] = {}
            for o in gone:
                for n in came:
                    if n.name not in out.values() and _layouts_key(o, of) == _layouts_key(n, nf):
                        out[o.name] = n.name
                        break
            self._record_renames = out
        return self._record_renames


def _layouts_key(rec: ir.Record, fam: ir.Family) -> tuple:
    return (tuple(rec.params), tuple(
        (lay.versions, lay.fixed_size, tuple(
            (f.name, wire_type(f.type, fam), lay.offsets.get(f.name), lay.sizes.get(f.name),
             f.const, f.reserved, checksum_text(f.checksum), tuple(sorted(shape(f).items())))
            for f in lay.fields)) for lay in rec.layouts))


@dataclass
class TablePair:
    """An enum, a registry (``kind`` enums|registries) or a flags table on both sides."""

    fam: FamilyPair
    kind: str
    name: str
    old: ir.EnumDef | ir.FlagsDef | None
    new: ir.EnumDef | ir.FlagsDef | None

    @property
    def subject(self) -> str:
        return f"{self.fam.name}.{self.name}"

    def loc_old(self, sub: str = "") -> Loc | None:
        return self.fam.old.loc(f"{self.kind}.{self.name}{sub}") if self.old else None

    def loc_new(self, sub: str = "") -> Loc | None:
        return self.fam.new.loc(f"{self.kind}.{self.name}{sub}") if self.new else None


@dataclass
class RecordPair:
    fam: FamilyPair
    old: ir.Record | None
    new: ir.Record | None

    @property
    def name(self) -> str:
        return (self.new or self.old).name

    @property
    def subject(self) -> str:
        return f"{self.fam.name}.{self.name}"

    def loc_old(self, f: ir.Field | None = None) -> Loc | None:
        return self.fam.old.rec_loc(self.old, f) if self.old else None

    def loc_new(self, f: ir.Field | None = None) -> Loc | None:
        return self.fam.new.rec_loc(self.new, f) if self.new else None


@dataclass
class LayoutPair:
    """The layouts that hold the same versions on both sides (or N and N+1 of one side)."""

    rec: RecordPair
    old: ir.Layout
    new: ir.Layout
    label: str  # "v2-4", "v1 -> v2" or "" for unversioned records
    same_version: bool = True
    renames: dict[str, str] = dataclass_field(default_factory=dict)  # old name -> new name

    def __post_init__(self) -> None:
        if not self.renames:
            self.renames = detect_renames(self.old, self.new, self.rec.fam)

    def where(self) -> str:
        if not self.label:
            return "" if not self.same_version else " without a version bump (unversioned record)"
        return f" in {self.label}" + ("" if not self.same_version else " without a version bump")


@dataclass
class FieldPair:
    lay: LayoutPair
    old: ir.Field
    new: ir.Field

    @property
    def subject(self) -> str:
        return f"{self.lay.rec.subject}.{self.new.name}"

    def hit(self, message: str) -> Hit:
        rp = self.lay.rec
        return Hit(self.subject, message, rp.loc_old(self.old), rp.loc_new(self.new))


# -- helpers ------------------------------------------------------------------------------

def wire_type(t: ir.Type, fam: ir.Family) -> str:
    """The type as the bytes see it: enums, flags and aliases show their base integer."""
    label = type_label(t)
    if isinstance(t, ir.RefT):
        base = None
        if t.kind == "enum" and t.target in fam.enums:
            base = fam.enums[t.target].base
        elif t.kind == "flags" and t.target in fam.flags:
            base = fam.flags[t.target].base
        elif t.kind == "alias" and t.target in fam.aliases:
            base = fam.aliases[t.target].base
        if base is not None:
            return f"{label}({base.name})"
        if t.args:
            label += "(" + ", ".join(f"{k}={v.source}" for k, v in t.args) + ")"
    if isinstance(t, ir.SwitchT):
        label += f" default={t.default}"
    return label


def _renamed(text: str, renames: dict[str, str]) -> str:
    """``text`` with old field names replaced by their new names (renames are not wire)."""
    for old, new in renames.items():
        text = re.sub(rf"\b{re.escape(old)}\b", new, text)
    return text


def _same_bytes(of: ir.Field, nf: ir.Field, olay: ir.Layout, nlay: ir.Layout,
                fams: tuple[ir.Family, ir.Family]) -> bool:
    return (wire_type(of.type, fams[0]) == wire_type(nf.type, fams[1])
            and olay.offsets.get(of.name) == nlay.offsets.get(nf.name)
            and olay.sizes.get(of.name) == nlay.sizes.get(nf.name)
            and of.const == nf.const and of.reserved == nf.reserved
            and (of.checksum is None) == (nf.checksum is None)
            and set(shape(of)) == set(shape(nf)))


def detect_renames(old: ir.Layout, new: ir.Layout, fam: FamilyPair) -> dict[str, str]:
    """Fields that vanished and appeared at the same position with the same bytes: a
    rename changes the generated attribute, not one byte of the file."""
    onames = {f.name for f in old.fields}
    nnames = {f.name for f in new.fields}
    fams = (fam.old.family, fam.new.family)
    out: dict[str, str] = {}
    for i, of in enumerate(old.fields):
        if of.name in nnames or i >= len(new.fields):
            continue
        nf = new.fields[i]
        if nf.name not in onames and _same_bytes(of, nf, old, new, fams):
            out[of.name] = nf.name
    return out


def _bytes_type_base(label: str) -> str:
    return label.split("(")[0]


def shape(f: ir.Field) -> dict:
    """How a field is encoded apart from its type: repetition, condition, compression."""
    d: dict = {}
    if f.repeat is not None:
        rp = f.repeat
        d["repeat"] = (rp.count.source if rp.count is not None else
                       f"{rp.prefix.name} count" if rp.prefix is not None else "to end")
    if f.cond is not None:
        d["if"] = f.cond.source
    if f.size is not None:
        d["size"] = f.size.source
    if f.compressed is not None:
        c = f.compressed
        d["compressed"] = (f"{c.algorithm.source}, "
                           f"{c.length.name + ' length' if c.length else 'self-terminating'}"
                           + (f", codecs {dict(c.codecs)}" if c.codecs else "")
                           + (f", when {c.when.source}" if c.when is not None else ""))
    if f.derived_from is not None:
        d["derived"] = f"{f.derived_from[0]} of {f.derived_from[1]}"
    if f.value is not None:
        d["value"] = f.value.source
    return d


def const_text(v: int | bytes | None) -> str:
    if v is None:
        return "none"
    return v.hex() if isinstance(v, bytes) else str(v)


def checksum_text(c: ir.Checksum | None) -> str:
    if c is None:
        return "none"
    covers = ", ".join(c.covers) if c.covers else {
        "following": "all following bytes", "all": "the whole record"}.get(c.scope,
                                                                          "all preceding bytes")
    if c.ranges:
        covers = ", ".join(f"bytes {a}..{b}" for a, b in c.ranges)
    if c.files:
        covers = ", ".join(f"file bytes {a.source}..{b.source}" for a, b in c.files)
    if c.filler != 0:
        covers += f" (itself read as {c.filler!r})"
    text = f"{c.algorithm} over {covers}"
    if c.excluded:
        text += f" except {', '.join(c.excluded)}"
    if c.store_bits:
        text += f", stored as the low {c.store_bits} bits"
    if c.seed is not None:
        text += f", seeded from {c.seed.source}"
    if c.params:
        text += ", " + ", ".join(f"{k}={e.source}" for k, e in c.params)
    return text


def _vals(e: ir.EnumDef) -> dict[str, int]:
    return {m.name: m.value for m in e.members}


def _by_value(e: ir.EnumDef) -> dict[int, str]:
    return {m.value: m.name for m in e.members}


def _enum_kind(tp: TablePair) -> str:
    return "registry entry" if tp.kind == "registries" else "enum value"


# -- whole families -----------------------------------------------------------------------

def check_family_added(fp: FamilyPair) -> Iterator[Hit]:
    if not fp.old.family.files and fp.new.family.files:
        n = fp.new.family
        yield Hit(fp.name, f"family {fp.name} added ({len(n.records)} records, "
                  f"{len(n.enums) + len(n.registries)} id tables)", fp.old.loc("family"),
                  fp.new.loc("family"))


def check_family_removed(fp: FamilyPair) -> Iterator[Hit]:
    if fp.old.family.files and not fp.new.family.files:
        yield Hit(fp.name, f"family {fp.name} removed", fp.old.loc("family"),
                  fp.new.loc("family"))


# -- family registry ----------------------------------------------------------------------

def _reg_loc(fp: FamilyPair, side: str, sub: str = "") -> Loc | None:
    view = fp.old if side == "old" else fp.new
    return view.loc("versions" + sub) if view.family.versions else view.loc("family")


def check_versions_narrowed(fp: FamilyPair) -> Iterator[Hit]:
    o, n = fp.old.family.versions, fp.new.family.versions
    if o is None or n is None:
        return
    (olo, ohi), (nlo, nhi) = o.accepted, n.accepted
    if nlo > olo or nhi < ohi:
        yield Hit(f"{fp.name}.versions", f"accepted versions narrowed [{olo}, {ohi}] -> "
                  f"[{nlo}, {nhi}]: files of dropped versions no longer open",
                  _reg_loc(fp, "old", ".accepted"), _reg_loc(fp, "new", ".accepted"))


def check_versions_widened(fp: FamilyPair) -> Iterator[Hit]:
    o, n = fp.old.family.versions, fp.new.family.versions
    if o is None and n is not None:
        yield Hit(f"{fp.name}.versions", f"version registry added (current {n.current}, "
                  f"accepted {list(n.accepted)})", None, _reg_loc(fp, "new"))
        return
    if o is None or n is None:
        return
    (olo, ohi), (nlo, nhi) = o.accepted, n.accepted
    if nhi > ohi or nlo < olo:
        yield Hit(f"{fp.name}.versions", f"accepted versions widened [{olo}, {ohi}] -> "
                  f"[{nlo}, {nhi}]", _reg_loc(fp, "old", ".accepted"),
                  _reg_loc(fp, "new", ".accepted"))
    if n.current != o.current:
        yield Hit(f"{fp.name}.versions", f"current (written) version {o.current} -> {n.current}",
                  _reg_loc(fp, "old", ".current"), _reg_loc(fp, "new", ".current"))


def check_registry_removed(fp: FamilyPair) -> Iterator[Hit]:
    if fp.old.family.versions is not None and fp.new.family.versions is None:
        yield Hit(f"{fp.name}.versions", "version registry removed",
                  _reg_loc(fp, "old"), _reg_loc(fp, "new"))


def check_retired_version_reused(fp: FamilyPair) -> Iterator[Hit]:
    o, n = fp.old.family.versions, fp.new.family.versions
    if o is None or n is None:
        return
    lo, hi = n.accepted
    for r in o.retired:
        if lo <= r <= hi or r == n.current:
            yield Hit(f"{fp.name}.versions", f"retired version {r} is accepted again",
                      _reg_loc(fp, "old", ".retired"), _reg_loc(fp, "new", ".accepted"))
        elif r not in n.retired:
            yield Hit(f"{fp.name}.versions", f"retired version {r} dropped from the retired "
                      "list (it could be reused)", _reg_loc(fp, "old", ".retired"),
                      _reg_loc(fp, "new"))


# -- enums and registries -----------------------------------------------------------------

def _member_ranges(tp: TablePair) -> Iterator[tuple[ir.EnumMember, ir.EnumMember]]:
    """Entries present on both sides (by name) whose accepted version range is declared."""
    if not _pairs_present(tp):
        return
    old = {m.name: m for m in tp.old.members}
    for m in tp.new.members:
        o = old.get(m.name)
        if o is not None and o.accepted is not None and m.accepted is not None:
            yield o, m


def check_entry_versions_narrowed(tp: TablePair) -> Iterator[Hit]:
    for o, n in _member_ranges(tp):
        (olo, ohi), (nlo, nhi) = o.accepted, n.accepted
        if nlo > olo or nhi < ohi:
            sub = f".values.{n.name}"
            yield Hit(f"{tp.subject}.{n.name}", f"accepted versions narrowed [{olo}, {ohi}] -> "
                      f"[{nlo}, {nhi}]: files of dropped versions no longer open",
                      tp.loc_old(sub), tp.loc_new(sub))


def check_entry_versions_widened(tp: TablePair) -> Iterator[Hit]:
    for o, n in _member_ranges(tp):
        (olo, ohi), (nlo, nhi) = o.accepted, n.accepted
        sub = f".values.{n.name}"
        if nhi > ohi or nlo < olo:
            yield Hit(f"{tp.subject}.{n.name}", f"accepted versions widened [{olo}, {ohi}] -> "
                      f"[{nlo}, {nhi}]", tp.loc_old(sub), tp.loc_new(sub))
        if n.current != o.current:
            yield Hit(f"{tp.subject}.{n.name}", f"current (written) version {o.current} -> "
                      f"{n.current}", tp.loc_old(sub), tp.loc_new(sub))


def check_table_removed(tp: TablePair) -> Iterator[Hit]:
    if tp.old is not None and tp.new is None:
        yield Hit(tp.subject, f"{tp.kind[:-1] if tp.kind != 'flags' else 'flags'} "
                  f"{tp.name!r} removed", tp.loc_old(), tp.fam.new.loc(tp.kind))


def check_table_added(tp: TablePair) -> Iterator[Hit]:
    if tp.old is None and tp.new is not None:
        yield Hit(tp.subject, f"{tp.kind[:-1] if tp.kind != 'flags' else 'flags'} "
                  f"{tp.name!r} added", tp.fam.old.loc(tp.kind), tp.loc_new())


def check_enum_base(tp: TablePair) -> Iterator[Hit]:
    if tp.old is None or tp.new is None:
        return
    if tp.old.base.name != tp.new.base.name:
        yield Hit(tp.subject, f"stored as {tp.old.base.name} -> {tp.new.base.name}: every "
                  "field of this type changes width or byte order", tp.loc_old(".type"),
                  tp.loc_new(".type"))


def _pairs_present(tp: TablePair) -> bool:
    return isinstance(tp.old, ir.EnumDef) and isinstance(tp.new, ir.EnumDef)


def check_value_renumbered(tp: TablePair) -> Iterator[Hit]:
    if not _pairs_present(tp):
        return
    ov, nv = _vals(tp.old), _vals(tp.new)
    for name, value in ov.items():
        if name in nv and nv[name] != value:
            sub = f".values.{name}"
            yield Hit(f"{tp.subject}.{name}", f"{_enum_kind(tp)} {name} renumbered "
                      f"{value} -> {nv[name]}", tp.loc_old(sub), tp.loc_new(sub))


def check_value_removed(tp: TablePair) -> Iterator[Hit]:
    if not _pairs_present(tp):
        return
    ov, nv, nb = _vals(tp.old), _vals(tp.new), _by_value(tp.new)
    for name, value in ov.items():
        if name not in nv and value not in nb:
            how = ("(listed as retired)" if value in tp.new.retired
                   else "(not listed as retired: it could be reused)")
            yield Hit(f"{tp.subject}.{name}", f"{_enum_kind(tp)} {name}={value} removed {how}",
                      tp.loc_old(f".values.{name}"), tp.loc_new(".values"))


def check_value_reassigned(tp: TablePair) -> Iterator[Hit]:
    if not _pairs_present(tp):
        return
    ob, nv = _by_value(tp.old), _vals(tp.new)
    for m in tp.new.members:
        was = ob.get(m.value)
        if was is not None and was != m.name and was in nv and m.name not in _vals(tp.old):
            yield Hit(f"{tp.subject}.{m.name}", f"{_enum_kind(tp)} {m.value} reassigned "
                      f"from {was} to new name {m.name} ({was} moved to {nv[was]})",
                      tp.loc_old(f".values.{was}"), tp.loc_new(f".values.{m.name}"))


def check_member_renamed(tp: TablePair) -> Iterator[Hit]:
    if not _pairs_present(tp):
        return
    ob, nv = _by_value(tp.old), _vals(tp.new)
    cls = "".join(p.capitalize() for p in tp.name.split("_"))
    for m in tp.new.members:
        was = ob.get(m.value)
        if was is not None and was != m.name and was not in nv:
            yield Hit(f"{tp.subject}.{m.name}", f"{_enum_kind(tp)} {m.value} renamed "
                      f"{was} -> {m.name}: same bytes, generated member {cls}.{was} "
                      f"-> {cls}.{m.name} (if the meaning changed too, retire {m.value} and "
                      "add a new id instead)", tp.loc_old(f".values.{was}"),
                      tp.loc_new(f".values.{m.name}"))


def check_retired_reused(tp: TablePair) -> Iterator[Hit]:
    if not _pairs_present(tp):
        return
    retired = set(tp.old.retired)
    for m in tp.new.members:
        if m.value in retired:
            yield Hit(f"{tp.subject}.{m.name}", f"retired {_enum_kind(tp)} {m.value} reused "
                      f"by {m.name}", tp.loc_old(".retired"), tp.loc_new(f".values.{m.name}"))
    for r in sorted(retired - set(tp.new.retired)):
        if r not in _by_value(tp.new):
            yield Hit(tp.subject, f"retired {_enum_kind(tp)} {r} dropped from the retired "
                      "list (it could be reused)", tp.loc_old(".retired"), tp.loc_new())


def check_value_added(tp: TablePair) -> Iterator[Hit]:
    if not _pairs_present(tp):
        return
    ov, ob = _vals(tp.old), _by_value(tp.old)
    for m in tp.new.members:
        if m.name not in ov and m.value not in ob and m.value not in tp.old.retired:
            yield Hit(f"{tp.subject}.{m.name}", f"{_enum_kind(tp)} {m.name}={m.value} added",
                      tp.loc_old(".values"), tp.loc_new(f".values.{m.name}"))


def check_value_retired(tp: TablePair) -> Iterator[Hit]:
    if not _pairs_present(tp):
        return
    for r in sorted(set(tp.new.retired) - set(tp.old.retired)):
        if r not in _by_value(tp.old):
            yield Hit(tp.subject, f"{_enum_kind(tp)} {r} listed as retired",
                      tp.loc_old(), tp.loc_new(".retired"))


def check_enum_openness(tp: TablePair) -> Iterator[Hit]:
    if not _pairs_present(tp):
        return
    if tp.old.open and not tp.new.open:
        yield Hit(tp.subject, "enum closed: unknown values that decoded before now fail",
                  tp.loc_old(".open"), tp.loc_new())


def check_flag_bits(tp: TablePair) -> Iterator[Hit]:
    if not (isinstance(tp.old, ir.FlagsDef) and isinstance(tp.new, ir.FlagsDef)):
        return
    nb = {b.name: b for b in tp.new.bits}
    renamed = _flag_renames(tp)
    for b in tp.old.bits:
        sub = f".bits.{b.name}"
        if b.name in renamed:
            continue
        if b.name not in nb:
            yield Hit(f"{tp.subject}.{b.name}", f"flag bit {b.name} (bits {b.lo}..{b.lo + b.width - 1}) "
                      "removed", tp.loc_old(sub), tp.loc_new(".bits"))
        elif (nb[b.name].lo, nb[b.name].width) != (b.lo, b.width):
            n = nb[b.name]
            yield Hit(f"{tp.subject}.{b.name}", f"flag bit {b.name} moved: bits "
                      f"{b.lo}..{b.lo + b.width - 1} -> {n.lo}..{n.lo + n.width - 1}",
                      tp.loc_old(sub), tp.loc_new(sub))
        elif nb[b.name].enum != b.enum:
            yield Hit(f"{tp.subject}.{b.name}", f"flag bits {b.name} enum {b.enum} -> "
                      f"{nb[b.name].enum}", tp.loc_old(sub), tp.loc_new(sub))


def _flag_renames(tp: TablePair) -> dict[str, str]:
    """Bits that vanished while a new name took exactly their place (old -> new)."""
    if not (isinstance(tp.old, ir.FlagsDef) and isinstance(tp.new, ir.FlagsDef)):
        return {}
    old_names = {b.name for b in tp.old.bits}
    nb = {b.name for b in tp.new.bits}
    out = {}
    for b in tp.old.bits:
        if b.name in nb:
            continue
        for n in tp.new.bits:
            if n.name not in old_names and (n.lo, n.width, n.enum) == (b.lo, b.width, b.enum):
                out[b.name] = n.name
    return out


def check_flag_bit_renamed(tp: TablePair) -> Iterator[Hit]:
    cls = "".join(p.capitalize() for p in tp.name.split("_"))
    for old, new in _flag_renames(tp).items():
        yield Hit(f"{tp.subject}.{new}", f"flag bit {old} renamed to {new}: same bits, "
                  f"generated attribute {cls}.{old} -> {cls}.{new}",
                  tp.loc_old(f".bits.{old}"), tp.loc_new(f".bits.{new}"))


def check_flag_bit_added(tp: TablePair) -> Iterator[Hit]:
    if not (isinstance(tp.old, ir.FlagsDef) and isinstance(tp.new, ir.FlagsDef)):
        return
    old_names = {b.name for b in tp.old.bits}
    for b in tp.new.bits:
        if b.name not in old_names and not (b.mask & tp.old.known_mask):
            yield Hit(f"{tp.subject}.{b.name}", f"flag bit {b.name} (bits {b.lo}..{b.lo + b.width - 1}) "
                      "added", tp.loc_old(".bits"), tp.loc_new(f".bits.{b.name}"))


def check_table_doc(tp: TablePair) -> Iterator[Hit]:
    if tp.old is None or tp.new is None:
        return
    if (tp.old.doc.strip(), tp.old.spec) != (tp.new.doc.strip(), tp.new.spec):
        yield Hit(tp.subject, "doc/spec text changed", tp.loc_old(), tp.loc_new())
    if isinstance(tp.old, ir.EnumDef) and isinstance(tp.new, ir.EnumDef):
        nd = {m.name: m.doc for m in tp.new.members}
        for m in tp.old.members:
            if m.name in nd and nd[m.name].strip() != m.doc.strip():
                sub = f".values.{m.name}"
                yield Hit(f"{tp.subject}.{m.name}", "doc text changed", tp.loc_old(sub),
                          tp.loc_new(sub))
    if isinstance(tp.old, ir.FlagsDef) and isinstance(tp.new, ir.FlagsDef):
        nd = {b.name: b.doc for b in tp.new.bits}
        for b in tp.old.bits:
            if b.name in nd and nd[b.name].strip() != b.doc.strip():
                sub = f".bits.{b.name}"
                yield Hit(f"{tp.subject}.{b.name}", "doc text changed", tp.loc_old(sub),
                          tp.loc_new(sub))


# -- records ------------------------------------------------------------------------------

def _versions_of(rec: ir.Record) -> set[int | None]:
    out: set[int | None] = set()
    for lay in rec.layouts:
        out.update(lay.versions if lay.versions else (None,))
    return out


def _vlabel(vs: Iterable[int]) -> str:
    vs = sorted(vs)
    if not vs:
        return ""
    runs, start, prev = [], vs[0], vs[0]
    for v in vs[1:] + [None]:
        if v is not None and v == prev + 1:
            prev = v
            continue
        runs.append(f"v{start}" if start == prev else f"v{start}-{prev}")
        if v is not None:
            start = prev = v
    return ", ".join(runs)


def check_record_removed(rp: RecordPair) -> Iterator[Hit]:
    if rp.old is not None and rp.new is None and rp.old.name not in rp.fam.record_renames:
        yield Hit(rp.subject, f"record {rp.name} removed", rp.loc_old(),
                  rp.fam.new.loc("records"))


def check_record_renamed(rp: RecordPair) -> Iterator[Hit]:
    if rp.old is not None and rp.new is None and rp.old.name in rp.fam.record_renames:
        new = rp.fam.new.family.records[rp.fam.record_renames[rp.old.name]]
        yield Hit(rp.subject, f"record {rp.old.name} renamed to {new.name}: same bytes, "
                  f"generated API changes (class {rp.old.class_name} -> {new.class_name}, "
                  f"decode_{rp.old.name} -> decode_{new.name}, encode_{rp.old.name} -> "
                  f"encode_{new.name})", rp.loc_old(), rp.fam.new.rec_loc(new))


def check_record_added(rp: RecordPair) -> Iterator[Hit]:
    if rp.old is None and rp.new is not None and rp.new.name in rp.fam.record_renames.values():
        return
    if rp.old is None and rp.new is not None:
        yield Hit(rp.subject, f"record {rp.name} added", rp.fam.old.loc("records"), rp.loc_new())


def check_version_removed(rp: RecordPair) -> Iterator[Hit]:
    if rp.old is None or rp.new is None:
        return
    ov, nv = _versions_of(rp.old), _versions_of(rp.new)
    if None in ov and None not in nv:
        yield Hit(rp.subject, "unversioned record became versioned: old bytes carry no "
                  "version", rp.loc_old(), rp.loc_new())
        return
    gone = sorted(v for v in ov - nv if v is not None)
    if gone:
        yield Hit(rp.subject, f"{_vlabel(gone)} of {rp.name} no longer decodable",
                  rp.loc_old(), rp.loc_new())


def check_version_added(rp: RecordPair) -> Iterator[Hit]:
    if rp.old is None or rp.new is None:
        return
    ov, nv = _versions_of(rp.old), _versions_of(rp.new)
    new = sorted(v for v in nv - ov if v is not None)
    if not new or None in ov:
        return
    latest_old = max(v for v in ov if v is not None) if ov - {None} else None
    detail = ""
    if latest_old is not None:
        prev = _layout_for(rp.new, latest_old) or _layout_for(rp.old, latest_old)
        nxt = _layout_for(rp.new, new[0])
        if prev is not None and nxt is not None:
            pnames = [f.name for f in prev.fields]
            added = [f.name for f in nxt.fields if f.name not in pnames]
            removed = [n for n in pnames if n not in {f.name for f in nxt.fields}]
            parts = []
            if added:
                parts.append("adds " + ", ".join(added))
            if removed:
                parts.append("drops " + ", ".join(removed))
            if parts:
                detail = f" ({'; '.join(parts)} relative to v{latest_old})"
    yield Hit(rp.subject, f"new version {_vlabel(new)} of {rp.name}{detail}",
              rp.loc_old(), rp.loc_new())


def _layout_for(rec: ir.Record, v: int | None) -> ir.Layout | None:
    for lay in rec.layouts:
        if (lay.versions is None and v is None) or (lay.versions and v in lay.versions):
            return lay
    return None


def check_params(rp: RecordPair) -> Iterator[Hit]:
    if rp.old is None or rp.new is None:
        return
    op, np_ = list(rp.old.params), list(rp.new.params)
    if op != np_ and len(op) != len(np_):
        yield Hit(rp.subject, f"parameters {op} -> {np_}: callers pass different context",
                  rp.loc_old(), rp.loc_new())


def check_byte_order(rp: RecordPair) -> Iterator[Hit]:
    """The byte order a record is read in -- fixed, or the expression choosing it from
    data -- is part of its wire format."""
    if rp.old is None or rp.new is None:
        return
    old = byteorder.show(rp.old.endian, rp.fam.old.family.endian)
    new = byteorder.show(rp.new.endian, rp.fam.new.family.endian)
    if old != new:
        yield Hit(rp.subject, f"byte order {old} -> {new}: the same bytes read differently",
                  rp.loc_old(), rp.loc_new())


def _located_parts(loc: ir.Located) -> dict[str, str]:
    """Where and how a located field is read, part by part."""
    def src(e: object) -> str:
        return "-" if e is None else e.source  # type: ignore[attr-defined]

    return {"record": loc.target, "how": loc.how, "at": src(loc.where),
            "base": str(loc.base), "signature": loc.signature.hex(),
            "within": str(loc.within), "each": f"{loc.each}.{loc.each_offset}",
            "count": src(loc.count), "eos": str(loc.eos), "size": src(loc.size),
            "if": src(loc.cond)}


def check_located(rp: RecordPair) -> Iterator[Hit]:
    """A structure found at an offset (``at:``) keeps its record and the way it is found."""
    if rp.old is None or rp.new is None:
        return
    new = {loc.name: loc for loc in rp.new.located}
    for loc in rp.old.located:
        other = new.get(loc.name)
        if other is None:
            yield Hit(f"{rp.subject}.{loc.name}", "located field removed: files hold it",
                      rp.loc_old(), rp.loc_new())
            continue
        a, b = _located_parts(loc), _located_parts(other)
        changed = [f"{k} {a[k]} -> {b[k]}" for k in a if a[k] != b[k]]
        if changed:
            yield Hit(f"{rp.subject}.{loc.name}", "located field changed: " +
                      "; ".join(changed), rp.loc_old(), rp.loc_new())


def check_params_renamed(rp: RecordPair) -> Iterator[Hit]:
    if rp.old is None or rp.new is None:
        return
    op, np_ = list(rp.old.params), list(rp.new.params)
    if op != np_ and len(op) == len(np_):
        yield Hit(rp.subject, f"decoder signature decode_{rp.name}(buf, offset, *, "
                  f"{', '.join(op)}) -> (..., {', '.join(np_)}): keyword arguments renamed",
                  rp.loc_old(), rp.loc_new())



def check_attribute_removed(rp: RecordPair) -> Iterator[Hit]:
    """An attribute leaves the generated class while its bytes stay (the field became
    derived, constant or reserved): code that reads or sets it breaks."""
    if rp.old is None or rp.new is None:
        return
    new_all = {f.name for f in rp.new.fields}
    new_model = {f.name for f in rp.new.model_fields}
    renamed = set()
    for lay_o in rp.old.layouts:
        for lay_n in rp.new.layouts:
            renamed |= set(detect_renames(lay_o, lay_n, rp.fam))
    for f in rp.old.model_fields:
        if f.name in new_all and f.name not in new_model and f.name not in renamed:
            yield Hit(f"{rp.subject}.{f.name}", f"attribute {rp.old.class_name}.{f.name} "
                      "removed from the generated class (the field is now derived, constant "
                      "or reserved; its bytes stay)", rp.loc_old(f), rp.loc_new())


def check_gated_without_default(rp: RecordPair) -> Iterator[Hit]:
    """A field new to the record that only some versions carry: objects decoded from the
    other versions hold None there, so code that reads the attribute must cope."""
    if rp.old is None or rp.new is None:
        return
    old_names = {f.name for f in rp.old.fields}
    versions = sorted(v for v in _versions_of(rp.new) if v is not None)
    for f in rp.new.fields:
        if f.name in old_names or not f.in_model or f.has_default:
            continue
        missing = [v for v in versions if not f.in_version(v)]
        if (f.since is None and f.until is None) or not missing:
            continue
        yield Hit(f"{rp.subject}.{f.name}", f"{f.name} added for "
                  f"{_vlabel(v for v in versions if f.in_version(v))} without a default: "
                  f"records of {_vlabel(missing)} decode {rp.new.class_name}.{f.name} as "
                  "None (give it a default, or every reader must handle None)",
                  rp.loc_old(), rp.loc_new(f))


def check_record_doc(rp: RecordPair) -> Iterator[Hit]:
    if rp.old is None or rp.new is None:
        return
    if (rp.old.doc.strip(), rp.old.spec) != (rp.new.doc.strip(), rp.new.spec):
        yield Hit(rp.subject, "record doc/spec text changed", rp.loc_old(), rp.loc_new())


# -- layouts of one version group ---------------------------------------------------------

def check_field_removed(lp: LayoutPair) -> Iterator[Hit]:
    new = {f.name for f in lp.new.fields}
    for f in lp.old.fields:
        if f.name not in new and f.name not in lp.renames:
            at = lp.old.offsets.get(f.name)
            cls = lp.rec.new.class_name if lp.rec.new else lp.rec.name
            gone = lp.rec.new is not None and f.in_model and f.name not in {
                m.name for m in lp.rec.new.model_fields}
            yield Hit(f"{lp.rec.subject}.{f.name}", f"field {f.name} removed"
                      + (f" (was at offset {at})" if at is not None else "") + lp.where(),
                      lp.rec.loc_old(f), lp.rec.loc_new(),
                      (f"API: generated attribute {cls}.{f.name} removed",) if gone else ())


def check_field_added(lp: LayoutPair) -> Iterator[Hit]:
    old = {f.name for f in lp.old.fields} | set(lp.renames.values())
    names = [f.name for f in lp.new.fields]
    for i, f in enumerate(lp.new.fields):
        if f.name in old:
            continue
        after = [n for n in names[i + 1:] if n in old]
        at = lp.new.offsets.get(f.name)
        pos = f" at offset {at}" if at is not None else ""
        if after:
            where = f"inserted before {after[0]}{pos}"
        else:
            where = f"appended{pos}"
        yield Hit(f"{lp.rec.subject}.{f.name}", f"field {f.name} ({type_label(f.type)}) {where}"
                  + lp.where(), lp.rec.loc_old(), lp.rec.loc_new(f))


def check_field_reordered(lp: LayoutPair) -> Iterator[Hit]:
    new = [f.name for f in lp.new.fields]
    old = [lp.renames.get(f.name, f.name) for f in lp.old.fields]
    common_old = [n for n in old if n in new]
    common_new = [n for n in new if n in old]
    if common_old != common_new:
        yield Hit(lp.rec.subject, f"fields reordered: {', '.join(common_old)} -> "
                  f"{', '.join(common_new)}" + lp.where(), lp.rec.loc_old(), lp.rec.loc_new())


def check_field_renamed(lp: LayoutPair) -> Iterator[Hit]:
    cls = lp.rec.new.class_name if lp.rec.new else lp.rec.name
    by_name = {f.name: f for f in lp.old.fields}
    for old, new in lp.renames.items():
        what = (f"attribute {cls}.{old} -> {cls}.{new}" if by_name[old].in_model
                else "no attribute (derived or constant field)")
        yield Hit(f"{lp.rec.subject}.{new}", f"field {old} renamed to {new}: same bytes, "
                  f"generated API changes ({what})", lp.rec.loc_old(by_name[old]),
                  lp.rec.loc_new(next(f for f in lp.new.fields if f.name == new)))


def check_fixed_size(lp: LayoutPair) -> Iterator[Hit]:
    if lp.old.fixed_size is not None and lp.new.fixed_size != lp.old.fixed_size:
        new = lp.new.fixed_size if lp.new.fixed_size is not None else "variable"
        yield Hit(lp.rec.subject, f"record size {lp.old.fixed_size} -> {new} bytes"
                  + lp.where(), lp.rec.loc_old(), lp.rec.loc_new())


# -- fields present on both sides ---------------------------------------------------------

def check_field_type(fp: FieldPair) -> Iterator[Hit]:
    of, nf = fp.lay.rec.fam.old.family, fp.lay.rec.fam.new.family
    ot, nt = _renamed(wire_type(fp.old.type, of), fp.lay.renames), wire_type(fp.new.type, nf)
    osz, nsz = fp.lay.old.sizes.get(fp.old.name), fp.lay.new.sizes.get(fp.new.name)
    if ot != nt or (osz is not None and nsz is not None and osz != nsz):
        sizes = f" (size {osz} -> {nsz})" if osz != nsz else ""
        if ot == nt:
            yield fp.hit(f"embedded {ot} changed size {osz} -> {nsz}" + fp.lay.where())
            return
        verb = "widened" if (isinstance(osz, int) and isinstance(nsz, int) and nsz > osz) else (
            "narrowed" if isinstance(osz, int) and isinstance(nsz, int) and nsz < osz
            else "changed type")
        yield fp.hit(f"{verb}: {ot} -> {nt}{sizes}" + fp.lay.where())


def check_field_offset(fp: FieldPair) -> Iterator[Hit]:
    oo, no = fp.lay.old.offsets.get(fp.old.name), fp.lay.new.offsets.get(fp.new.name)
    if oo is not None and oo != no:
        yield fp.hit(f"offset {oo} -> {no if no is not None else 'variable'}" + fp.lay.where())


def check_magic(fp: FieldPair) -> Iterator[Hit]:
    if fp.old.const != fp.new.const:
        yield fp.hit(f"constant (magic) {const_text(fp.old.const)} -> "
                     f"{const_text(fp.new.const)}" + fp.lay.where())


def check_checksum(fp: FieldPair) -> Iterator[Hit]:
    o, n = fp.old.checksum, fp.new.checksum
    if _renamed(checksum_text(o), fp.lay.renames) != checksum_text(n) or (
            o is not None and n is not None and (o.algorithm, o.bits) != (n.algorithm, n.bits)):
        yield fp.hit(f"checksum {checksum_text(o)} -> {checksum_text(n)}" + fp.lay.where())


def check_encoding(fp: FieldPair) -> Iterator[Hit]:
    o = {k: _renamed(str(v), fp.lay.renames) for k, v in shape(fp.old).items()}
    n = {k: str(v) for k, v in shape(fp.new).items()}
    if o != n:
        keys = sorted(set(o) | set(n))
        parts = [f"{k}: {o.get(k, 'none')} -> {n.get(k, 'none')}" for k in keys
                 if o.get(k) != n.get(k)]
        yield fp.hit("encoding changed (" + "; ".join(parts) + ")" + fp.lay.where())


def check_constraint(fp: FieldPair) -> Iterator[Hit]:
    if fp.old.reserved != fp.new.reserved:
        yield fp.hit(f"reserved-zero {fp.old.reserved} -> {fp.new.reserved}" + fp.lay.where())
    if fp.old.valid != fp.new.valid and not _widened(fp.old.valid, fp.new.valid):
        yield fp.hit(f"valid range {_rng(fp.old.valid)} -> {_rng(fp.new.valid)}"
                     + fp.lay.where())


def _rng(v: tuple[int | None, int | None] | None) -> str:
    if v is None:
        return "any"
    return f"[{'' if v[0] is None else v[0]}, {'' if v[1] is None else v[1]}]"


def _widened(o, n) -> bool:
    """Whether range ``n`` accepts everything ``o`` accepted (None = unbounded)."""
    if n is None:
        return True
    if o is None:
        return False
    lo_ok = n[0] is None or (o[0] is not None and n[0] <= o[0])
    hi_ok = n[1] is None or (o[1] is not None and n[1] >= o[1])
    return lo_ok and hi_ok


def check_range_widened(fp: FieldPair) -> Iterator[Hit]:
    if fp.old.valid != fp.new.valid and _widened(fp.old.valid, fp.new.valid):
        yield fp.hit(f"valid range widened {_rng(fp.old.valid)} -> {_rng(fp.new.valid)}")


def _cases(f: ir.Field) -> dict:
    if not isinstance(f.type, ir.SwitchT):
        return {}
    return {key: (label, target) for key, label, target in f.type.cases}


def check_switch_case_changed(fp: FieldPair) -> Iterator[Hit]:
    o, n = _cases(fp.old), _cases(fp.new)
    for key, (label, target) in o.items():
        if key not in n:
            yield fp.hit(f"switch case {label} ({key}) -> {target or 'empty'} removed"
                         + fp.lay.where())
        elif n[key][1] != target:
            yield fp.hit(f"switch case {label} ({key}) body {target or 'empty'} -> "
                         f"{n[key][1] or 'empty'}" + fp.lay.where())


def check_switch_case_added(fp: FieldPair) -> Iterator[Hit]:
    o, n = _cases(fp.old), _cases(fp.new)
    for key, (label, target) in n.items():
        if key not in o:
            yield fp.hit(f"switch case {label} ({key}) -> {target or 'empty'} added")


def check_field_doc(fp: FieldPair) -> Iterator[Hit]:
    if (fp.old.doc.strip(), fp.old.spec) != (fp.new.doc.strip(), fp.new.spec):
        yield fp.hit("field doc/spec text changed")


RULES: tuple[Rule, ...] = (
    # WIRE-BREAKING
    Rule("W001", "field-removed", WIRE, "layout",
         "A field of an existing version must not disappear.", check_field_removed),
    Rule("W002", "field-added", WIRE, "layout",
         "An existing version must not gain a field (in the middle it shifts every later "
         "offset; at the end it changes the record size): add a version instead.",
         check_field_added),
    Rule("W003", "field-reordered", WIRE, "layout",
         "Fields of an existing version keep their order.", check_field_reordered),
    Rule("W004", "field-type-changed", WIRE, "field",
         "A field keeps its width, signedness, byte order and type in every existing version.",
         check_field_type),
    Rule("W005", "field-offset-changed", WIRE, "field",
         "A field keeps its byte offset in every existing version.", check_field_offset),
    Rule("W006", "magic-changed", WIRE, "field",
         "Magic numbers and constants identify the bytes; they never change.", check_magic),
    Rule("W007", "checksum-changed", WIRE, "field",
         "A checksum keeps its algorithm and exact coverage.", check_checksum),
    Rule("W008", "encoding-changed", WIRE, "field",
         "Repetition, presence condition, size and compression of a field keep their meaning.",
         check_encoding),
    Rule("W009", "constraint-changed", WIRE, "field",
         "Reserved-zero bytes stay reserved and valid ranges never narrow.",
         check_constraint),
    Rule("W010", "switch-case-changed", WIRE, "field",
         "A tag keeps selecting the same body; cases are never removed.",
         check_switch_case_changed),
    Rule("W011", "record-size-changed", WIRE, "layout",
         "A fixed-size record keeps its size in every existing version.", check_fixed_size),
    Rule("W012", "record-removed", WIRE, "record",
         "Records that files contain stay decodable.", check_record_removed),
    Rule("W013", "record-version-removed", WIRE, "record",
         "Every version a reader accepted stays decodable.", check_version_removed),
    Rule("W014", "record-params-changed", WIRE, "record",
         "The outside context a record is decoded with keeps its meaning.", check_params),
    Rule("W020", "byte-order-changed", WIRE, "record",
         "A record keeps its byte order, or the expression that chooses it from data.",
         check_byte_order),
    Rule("W021", "located-field-changed", WIRE, "record",
         "A structure found at an offset, from the end or by a signature keeps its record "
         "and the way it is found.", check_located),
    Rule("W015", "enum-width-changed", WIRE, "table",
         "An enum or flags type keeps its storage width and byte order.", check_enum_base),
    Rule("W016", "versions-narrowed", WIRE, "registry",
         "The accepted version range never shrinks: old files keep opening.",
         check_versions_narrowed),
    Rule("W017", "enum-closed", WIRE, "table",
         "An open enum stays open (unknown values keep decoding).", check_enum_openness),
    Rule("W018", "family-removed", WIRE, "family",
         "A shipped format family stays decodable.", check_family_removed),
    Rule("W019", "entry-versions-narrowed", WIRE, "table",
         "A registry entry's accepted version range never shrinks: old files keep opening.",
         check_entry_versions_narrowed),
    # API-BREAKING
    Rule("P001", "field-renamed", API, "layout",
         "A rename keeps every byte but changes the generated attribute name.",
         check_field_renamed),
    Rule("P002", "record-renamed", API, "record",
         "A record rename keeps every byte but renames the class and its codec functions.",
         check_record_renamed),
    Rule("P003", "decoder-signature-changed", API, "record",
         "Record parameters are keyword arguments of the generated decoders and encoders.",
         check_params_renamed),
    Rule("P004", "enum-member-renamed", API, "table",
         "Renaming an id keeps its value but renames the generated enum member.",
         check_member_renamed),
    Rule("P005", "attribute-removed", API, "record",
         "A field leaving the object model (now derived or constant) removes an attribute.",
         check_attribute_removed),
    Rule("P006", "gated-field-without-default", API, "record",
         "A field only some versions carry needs a default, or older records decode None.",
         check_gated_without_default),
    Rule("P007", "flag-bit-renamed", API, "table",
         "Renaming a flag bit keeps its bits but renames the generated attribute.",
         check_flag_bit_renamed),
    # ID-CONTRACT
    Rule("I001", "id-renumbered", IDS, "table",
         "Never renumber an op code, kind, family id or enum value.", check_value_renumbered),
    Rule("I002", "id-removed", IDS, "table",
         "Never remove an id that files may contain.", check_value_removed),
    Rule("I003", "id-reassigned", IDS, "table",
         "Never give an existing id a new name or meaning.", check_value_reassigned),
    Rule("I004", "retired-id-reused", IDS, "table",
         "Retired ids are never reused, and stay on the retired list.", check_retired_reused),
    Rule("I005", "retired-version-reused", IDS, "registry",
         "Retired versions are never accepted again and stay retired.",
         check_retired_version_reused),
    Rule("I006", "flag-bit-changed", IDS, "table",
         "Flag bits never move, disappear or change their enum.", check_flag_bits),
    Rule("I007", "table-removed", IDS, "table",
         "An enum, flags or registry table is never removed.", check_table_removed),
    Rule("I008", "registry-removed", IDS, "registry",
         "A family keeps its version registry.", check_registry_removed),
    # ADDITIVE
    Rule("A001", "id-added", ADDITIVE, "table",
         "New op codes, kinds and enum values are safe for readers that skip unknowns.",
         check_value_added),
    Rule("A002", "id-retired", ADDITIVE, "table",
         "Listing an unused id as retired reserves it forever.", check_value_retired),
    Rule("A003", "flag-bit-added", ADDITIVE, "table",
         "A new flag bit in previously unused bits.", check_flag_bit_added),
    Rule("A004", "table-added", ADDITIVE, "table",
         "A new enum, flags or registry table.", check_table_added),
    Rule("A005", "record-added", ADDITIVE, "record",
         "A new record.", check_record_added),
    Rule("A006", "record-version-added", ADDITIVE, "record",
         "A new version of a record (the way to change a layout).", check_version_added),
    Rule("A007", "switch-case-added", ADDITIVE, "field",
         "A new tag value selecting a body.", check_switch_case_added),
    Rule("A008", "versions-widened", ADDITIVE, "registry",
         "The family accepts or writes a new version.", check_versions_widened),
    Rule("A010", "family-added", ADDITIVE, "family",
         "A new format family.", check_family_added),
    Rule("A009", "range-widened", ADDITIVE, "field",
         "A valid range that accepts more values (old files stay valid).",
         check_range_widened),
    Rule("A011", "entry-versions-widened", ADDITIVE, "table",
         "A registry entry accepts or writes a new version.", check_entry_versions_widened),
    # DOC
    Rule("D001", "table-doc-changed", DOC, "table",
         "Documentation of enums, flags and registries.", check_table_doc),
    Rule("D002", "record-doc-changed", DOC, "record",
         "Documentation of records.", check_record_doc),
    Rule("D003", "field-doc-changed", DOC, "field",
         "Documentation of fields.", check_field_doc),
)

BY_ID: dict[str, Rule] = {r.id: r for r in RULES}
BY_NAME: dict[str, Rule] = {r.name: r for r in RULES}


def find(rule: str) -> Rule | None:
    """A rule by id (``W004``) or name (``field-type-changed``), case-insensitive."""
    return BY_ID.get(rule.upper()) or BY_NAME.get(rule.lower())


def of_scope(scope: str) -> list[Rule]:
    return [r for r in RULES if r.scope == scope]
