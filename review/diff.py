"""``bytewright diff``: compare two layout sets and classify every change by rule.

Sides are loaded through the normal pipeline (so both are validated and resolved the same
way) from schema folders, single files, in-memory texts or a git revision of this
repository. The engine pairs families, tables, records, version groups and fields, runs
every rule of ``diff_rules`` on each pair, and returns ``Finding`` values; rendering
(text, JSON, GitHub annotations) is separate so tests can golden-check each output.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..generator import byteorder, ir, pipeline
from ..generator.yamlsource import Source
from . import diff_rules as dr
from .diff_rules import Loc

FORMAT_VERSION = 1

Progress = Callable[[str], None] | None  # told each pipeline step (a verb shows it)
_shown: list[Progress] = [None]  # the progress of the verb running now (``showing``)


@contextlib.contextmanager
def showing(progress: Progress) -> Iterator[None]:
    """Tell ``progress`` every pipeline step of the sides loaded meanwhile (however the
    verb reaches them)."""
    _shown.append(progress)
    try:
        yield
    finally:
        _shown.pop()


class DiffError(Exception):
    """A side could not be loaded (bad path, bad revision, schema errors)."""


@dataclass
class Side:
    """One side of a comparison: the pipeline result plus sources for line lookup."""

    label: str
    result: pipeline.Result
    sources: dict[str, Source] = field(default_factory=dict)
    prefix: str = ""  # shown before file names, e.g. "HEAD:" for a git revision

    @property
    def families(self) -> dict[str, ir.Family]:
        return self.result.families

    def locate(self, family: ir.Family, yaml_path: str) -> Loc:
        if yaml_path.startswith("\0file:"):
            return Loc(self.prefix + yaml_path[6:], None)
        if not family.files:
            return Loc(f"{self.prefix}(no {family.name} schema)", None)
        files = family.files
        for file in files:
            src = self.sources.get(file)
            if src is not None and yaml_path in src.lines:
                return Loc(self.prefix + file, src.lines[yaml_path])
        for file in files:  # nearest ancestor
            src = self.sources.get(file)
            if src is not None:
                return Loc(self.prefix + file, src.line(yaml_path))
        return Loc(self.prefix + files[0], None)


def _side(label: str, paths: list[Path], texts: dict[str, str] | None, base: Path | None,
          prefix: str = "", progress: Progress = None) -> Side:
    # Layouts only: the generated code is rendered on demand (``code_diff``).
    result = pipeline.run(paths, texts=texts, base=base, render_modules=False,
                          progress=progress or _shown[-1])
    errors = [p for p in result.problems if p.severity == "error"]
    if errors:
        raise DiffError(f"{label}: schema problems:\n" + "\n".join(
            f"  {prefix}{p}" for p in errors))
    side = Side(label, result, prefix=prefix)
    for src in result.sources:  # the files given first, then the parts they import
        side.sources.setdefault(src.file, src)
    return side


def schema_paths(target: Path) -> list[Path]:
    if target.is_dir():
        return pipeline.schema_files(target)
    if target.is_file():
        return [target]
    raise DiffError(f"{target}: no such schema file or folder")


def load_path(target: Path, label: str | None = None, base: Path | None = None,
              progress: Progress = None) -> Side:
    """A side from a schema folder (every ``*.yaml``) or one file."""
    base = base or Path.cwd()
    return _side(label or str(target), schema_paths(target), None, base, progress=progress)


def load_texts(texts: dict[Path, str], label: str, base: Path | None = None,
               prefix: str = "", progress: Progress = None) -> Side:
    """A side from in-memory YAML texts keyed by (possibly virtual) path."""
    paths = sorted(texts)
    return _side(label, paths, {str(p): t for p, t in texts.items()},
                 base or pipeline.PACKAGE_ROOT, prefix, progress)


def shipped(label: str = "working tree") -> Side:
    return load_path(pipeline.SCHEMA_DIR, label, pipeline.PACKAGE_ROOT)


def _git(args: list[str], cwd: Path) -> str:
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              check=False)
    except FileNotFoundError as exc:
        raise DiffError("git is not installed") from exc
    if proc.returncode != 0:
        raise DiffError(proc.stderr.strip() or f"git {' '.join(args)} failed")
    return proc.stdout


def load_revision(rev: str, schema_dir: Path = pipeline.SCHEMA_DIR,
                  progress: Progress = None) -> Side:
    """The schemas of ``schema_dir`` as they were at git revision ``rev`` (read-only git)."""
    root = schema_dir.resolve().parent
    try:
        top = Path(_git(["rev-parse", "--show-toplevel"], root).strip())
    except DiffError as exc:
        raise DiffError(f"--against {rev}: {root} is not inside a git repository ({exc})") from exc
    try:
        commit = _git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], top).strip()
    except DiffError:
        commit = ""
    if not commit:
        hint = ""
        try:
            _git(["rev-parse", "--verify", "--quiet", "HEAD"], top)
        except DiffError:
            hint = " (the repository has no commits yet: commit the schemas first)"
        raise DiffError(f"--against {rev}: not a git revision of {top}{hint}")
    rel = schema_dir.resolve().relative_to(top).as_posix()
    listing = _git(["ls-tree", "--name-only", commit, "--", rel + "/"], top).split()
    texts: dict[Path, str] = {}
    for name in listing:
        if not name.endswith(".yaml") or "/" in name[len(rel) + 1:]:
            continue
        texts[top / name] = _git(["show", f"{commit}:{name}"], top)
    return load_texts(texts, f"{rev} ({commit[:12]})", base=schema_dir.resolve().parent,
                      prefix=f"{rev}:", progress=progress)


# -- findings -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Finding:
    rule: dr.Rule
    subject: str
    message: str
    old: Loc | None
    new: Loc | None
    allowed: bool = False
    details: tuple[str, ...] = ()  # consequences of this cause (shifted fields, size)

    @property
    def breaking(self) -> bool:
        return self.rule.breaking and not self.allowed

    def as_dict(self, lines: bool = True) -> dict:
        return {"rule": self.rule.id, "name": self.rule.name, "category": self.rule.category,
                "breaking": self.rule.breaking, "allowed": self.allowed,
                "subject": self.subject, "message": self.message,
                "consequences": list(self.details),
                "old": _loc_dict(self.old, lines), "new": _loc_dict(self.new, lines)}


def _loc_dict(loc: Loc | None, lines: bool) -> dict | None:
    if loc is None:
        return None
    return loc.as_dict() if lines else {"file": loc.file}


def _loc_text(loc: Loc | None, lines: bool) -> str:
    if loc is None:
        return "-"
    return str(loc) if lines else loc.file


@dataclass
class Report:
    old: str
    new: str
    findings: list[Finding]
    mode: str = "compat"  # compat | versions
    code_diff: str | None = None
    sides: tuple[Side, Side] | None = None  # what was compared (the html view draws it)

    @property
    def breaking(self) -> list[Finding]:
        if self.mode == "versions":
            return []
        return [f for f in self.findings if f.breaking]

    @property
    def exit_code(self) -> int:
        return 1 if self.breaking else 0

    def counts(self) -> dict[str, int]:
        return {c: sum(1 for f in self.findings if f.rule.category == c) for c in dr.CATEGORIES}


def _run(rules: list[dr.Rule], pair: object, out: list[Finding]) -> None:
    for rule in rules:
        for hit in rule.check(pair):
            out.append(Finding(rule, hit.subject, hit.message, hit.old, hit.new,
                               details=hit.details))


# A cause moves what follows it; the moves are its consequences, not findings of their own.
CAUSES = ("W001", "W002", "W003", "W004", "W008", "W006", "W010")
CONSEQUENCES = ("W005", "W011")


def nest(found: list[Finding]) -> list[Finding]:
    """Fold shifted offsets and the changed record size into the first cause found in the
    same layout pair, so one widened field is one finding with its effects listed."""
    cause = next((i for i, f in enumerate(found) if f.rule.id in CAUSES), None)
    if cause is None:
        return found
    effects = [f for f in found if f.rule.id in CONSEQUENCES]
    if not effects:
        return found
    head = found[cause]
    at = head.message.find(" without a version bump")
    where = head.message[at:] if at >= 0 else ""

    def short(msg: str) -> str:  # the cause already says which version it is about
        return msg[: -len(where)] if where and msg.endswith(where) else msg

    details = head.details + tuple(
        f"{f.subject.rsplit('.', 1)[-1] if f.rule.id == 'W005' else 'record'}: "
        f"{short(f.message)}" for f in effects)
    out = []
    for i, f in enumerate(found):
        if f.rule.id in CONSEQUENCES:
            continue
        out.append(Finding(f.rule, f.subject, f.message, f.old, f.new, f.allowed, details)
                   if i == cause else f)
    return out


def _dedupe(findings: list[Finding]) -> list[Finding]:
    """The same cause seen through several version groups is reported once."""
    seen: set[tuple] = set()
    out = []
    for f in findings:
        key = (f.rule.id, f.subject, f.message, f.details)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _empty_family(name: str) -> ir.Family:
    return ir.Family(name=name, title=name, spec="", doc="", endian="le", files=[], digest="",
                     versions=None, enums={}, flags={}, aliases={}, records={})


def compare(old: Side, new: Side, allow: set[str] | None = None) -> Report:
    """Every rule over every pair of families, tables, records, layouts and fields."""
    findings: list[Finding] = []
    for name in _merged(list(old.families), list(new.families)):
        of = old.families.get(name) or _empty_family(name)
        nf = new.families.get(name) or _empty_family(name)
        fp = dr.FamilyPair(dr.SideView(of, old.locate), dr.SideView(nf, new.locate))
        if name not in old.families or name not in new.families:
            _run(dr.of_scope("family"), fp, findings)  # one finding, not one per table
            continue
        compare_family(fp, findings)
    return Report(old.label, new.label, _allow(_dedupe(findings), allow), sides=(old, new))


def _allow(findings: list[Finding], allow: set[str] | None) -> list[Finding]:
    if not allow:
        return findings
    ids = {r.id for r in (dr.find(a) for a in allow) if r is not None}
    return [Finding(f.rule, f.subject, f.message, f.old, f.new, f.rule.id in ids, f.details)
            for f in findings]


def _merged(old: list[str], new: list[str]) -> list[str]:
    return old + [n for n in new if n not in old]


def compare_family(fp: dr.FamilyPair, out: list[Finding]) -> None:
    of, nf = fp.old.family, fp.new.family
    _run(dr.of_scope("registry"), fp, out)
    for kind in ("registries", "enums", "flags"):
        ot, nt = getattr(of, kind), getattr(nf, kind)
        for tname in _merged(list(ot), list(nt)):
            tp = dr.TablePair(fp, kind, tname, ot.get(tname), nt.get(tname))
            _run(dr.of_scope("table"), tp, out)
    for rname in _merged(list(of.records), list(nf.records)):
        rp = dr.RecordPair(fp, of.records.get(rname), nf.records.get(rname))
        _run(dr.of_scope("record"), rp, out)
        if rp.old is not None and rp.new is not None:
            for lp in same_version_pairs(rp):
                compare_layouts(lp, out)


def same_version_pairs(rp: dr.RecordPair) -> list[dr.LayoutPair]:
    """Old and new layouts that hold the same versions, grouped (v2-4 reported once)."""
    groups: dict[tuple[int, int], list[int | None]] = {}
    for i, olay in enumerate(rp.old.layouts):
        for v in (olay.versions or (None,)):
            for j, nlay in enumerate(rp.new.layouts):
                if not _same_order(rp, olay, nlay):
                    continue  # a layout per byte order: each against its own order
                if (nlay.versions is None and v is None) or (
                        nlay.versions and v in nlay.versions):
                    groups.setdefault((i, j), []).append(v)
    pairs = []
    for (i, j), vs in groups.items():
        label = "" if vs == [None] else dr._vlabel(v for v in vs if v is not None)
        label = f"{label} of {rp.name}" if label else ""
        pairs.append(dr.LayoutPair(rp, rp.old.layouts[i], rp.new.layouts[j], label))
    return pairs


def _same_order(rp: dr.RecordPair, olay: ir.Layout, nlay: ir.Layout) -> bool:
    """Whether two layouts read the same byte order (always, when neither record has a
    layout per order: a change of the fixed order shows in the field types)."""
    if not (rp.old.orders or rp.new.orders):
        return True

    def order(rec: ir.Record, lay: ir.Layout, fam: ir.Family) -> str:
        return lay.order or byteorder.fixed_order(rec.endian) or fam.endian
    return order(rp.old, olay, rp.fam.old.family) == order(rp.new, nlay, rp.fam.new.family)


def compare_layouts(lp: dr.LayoutPair, out: list[Finding]) -> None:
    found: list[Finding] = []
    _run(dr.of_scope("layout"), lp, found)
    new = {f.name: f for f in lp.new.fields}
    for f in lp.old.fields:
        name = lp.renames.get(f.name, f.name)
        if name in new:
            _run(dr.of_scope("field"), dr.FieldPair(lp, f, new[name]), found)
    out.extend(nest(found))


def version_steps(side: Side, record: str, family: str | None = None) -> Report:
    """Version N against N+1 (each layout against the previous) of one record."""
    fams = [f for f in side.families.values() if record in f.records
            and (family is None or f.name == family)]
    if not fams:
        raise DiffError(f"no record {record!r}" + (f" in family {family!r}" if family else ""))
    findings: list[Finding] = []
    for fam in fams:
        for _, _, steps in layout_steps(side, fam, fam.records[record]):
            findings.extend(steps)
    return Report(side.label, side.label, findings, mode="versions")


def layout_steps(side: Side, fam: ir.Family, rec: ir.Record
                 ) -> list[tuple[ir.Layout, ir.Layout, list[Finding]]]:
    """For each layout after the first: (previous, this, changes between them)."""
    view = dr.SideView(fam, side.locate)
    fp = dr.FamilyPair(view, view)
    rp = dr.RecordPair(fp, rec, rec)
    out = []
    for prev, lay in zip(rec.layouts, rec.layouts[1:], strict=False):
        label = f"{_vtext(prev)} -> {_vtext(lay)} of {rec.name}"
        found: list[Finding] = []
        compare_layouts(dr.LayoutPair(rp, prev, lay, label, same_version=False), found)
        out.append((prev, lay, found))
    return out


def _vtext(lay: ir.Layout) -> str:
    return dr._vlabel(lay.versions or ())


def modules(side: Side) -> dict[str, str]:
    """The generated modules of ``side``, rendered now unless the load already did."""
    if not side.result.modules:
        for name, family in sorted(side.families.items()):
            side.result.modules[f"{name}.py"] = pipeline.render(family)
    return side.result.modules


def code_diff(old: Side, new: Side) -> str:
    chunks = []
    a_mods, b_mods = modules(old), modules(new)
    for name in _merged(sorted(a_mods), sorted(b_mods)):
        a = a_mods.get(name, "").splitlines(keepends=True)
        b = b_mods.get(name, "").splitlines(keepends=True)
        chunks.extend(difflib.unified_diff(a, b, f"a/generated/{name}", f"b/generated/{name}"))
    return "".join(chunks)


# -- rendering ----------------------------------------------------------------------------

def render_text(report: Report, lines_: bool = True) -> str:
    lines = []
    if report.mode == "versions":
        lines.append(f"version changes in {report.new} (informational: a new version may "
                     "change the layout)")
    else:
        lines.append(f"bytewright diff: {report.old} -> {report.new}")
    if not report.findings:
        lines.append("no changes")
    for f in report.findings:
        flag = " (allowed)" if f.allowed else ""
        lines.append(f"{f.rule.category:<13} {f.rule.id} {f.rule.name}{flag}: "
                     f"{f.subject}: {f.message}")
        for d in f.details:
            lines.append(f"    - {d}")
        lines.append(f"    old: {_loc_text(f.old, lines_)}")
        lines.append(f"    new: {_loc_text(f.new, lines_)}")
    c = report.counts()
    summary = ", ".join(f"{n} {k.lower()}" for k, n in c.items())
    if report.mode == "versions":
        lines.append(f"summary: {summary}")
    elif report.breaking:
        ids = sorted({f.rule.id for f in report.breaking})
        lines.append(f"summary: {summary}; BREAKING (allow with --allow "
                     f"{' --allow '.join(ids)})")
    else:
        lines.append(f"summary: {summary}; no breaking changes")
    text = "\n".join(lines) + "\n"
    if report.code_diff is not None:
        text += "\n" + (report.code_diff or "generated code: no changes\n")
    return text


def render_json(report: Report, lines: bool = True) -> str:
    doc = {"format": "bytewright-diff", "version": FORMAT_VERSION, "mode": report.mode,
           "old": report.old, "new": report.new,
           "findings": [f.as_dict(lines) for f in report.findings],
           "summary": report.counts(), "breaking": bool(report.breaking),
           "exit_code": report.exit_code}
    if report.code_diff is not None:
        doc["code_diff"] = report.code_diff
    return json.dumps(doc, indent=2, sort_keys=False) + "\n"


def _gh_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(s: str) -> str:
    return _gh_data(s).replace(":", "%3A").replace(",", "%2C")


def render_github(report: Report, lines_: bool = True) -> str:
    lines = []
    for f in report.findings:
        if report.mode == "versions":
            level = "notice"
        else:
            level = "error" if f.breaking else "warning" if f.rule.breaking else "notice"
        loc = f.new if f.new is not None and ":" not in f.new.file.split("/")[0] else f.old
        props = []
        if loc is not None:
            props.append(f"file={_gh_prop(loc.file)}")
            if loc.line is not None and lines_:
                props.append(f"line={loc.line}")
        props.append(f"title={_gh_prop(f'{f.rule.category} {f.rule.id} {f.rule.name}')}")
        msg = (f"{f.subject}: {f.message}" + "".join(f"\n  - {d}" for d in f.details)
               + f" (old: {_loc_text(f.old, lines_)}, new: {_loc_text(f.new, lines_)})")
        lines.append(f"::{level} {','.join(props)}::{_gh_data(msg)}")
    c = report.counts()
    lines.append("bytewright diff: " + ", ".join(f"{n} {k.lower()}" for k, n in c.items()))
    text = "\n".join(lines) + "\n"
    if report.code_diff is not None:
        text += report.code_diff
    return text


def render_junit(report: Report, lines: bool = True) -> str:
    """JUnit XML for CI systems: one test case per rule, a failure per breaking finding
    (allowed and non-breaking findings are listed as system-out, not failures)."""
    from xml.sax.saxutils import escape as esc
    from xml.sax.saxutils import quoteattr

    cases = []
    failures = 0
    for rule in dr.RULES:
        hits = [f for f in report.findings if f.rule is rule]
        body = []
        broken = [f for f in hits if f.breaking and report.mode != "versions"]
        for f in broken:
            failures += 1
            text = "\n".join([f"{f.subject}: {f.message}", *(f"  - {d}" for d in f.details),
                              f"old: {_loc_text(f.old, lines)}",
                              f"new: {_loc_text(f.new, lines)}"])
            body.append(f'    <failure type={quoteattr(rule.category)} '
                        f'message={quoteattr(f.subject + ": " + f.message)}>'
                        f"{esc(text)}</failure>")
        rest = [f for f in hits if f not in broken]
        if rest:
            body.append("    <system-out>" + esc("\n".join(
                f"{f.subject}: {f.message}" + (" (allowed)" if f.allowed else "")
                for f in rest)) + "</system-out>")
        name = quoteattr(f"{rule.id} {rule.name}")
        cls = quoteattr(f"bytewright.diff.{rule.category}")
        if body:
            cases.append(f"  <testcase classname={cls} name={name}>\n" + "\n".join(body)
                         + "\n  </testcase>")
        else:
            cases.append(f"  <testcase classname={cls} name={name}/>")
    head = (f'<testsuite name={quoteattr(f"bytewright diff {report.old} -> {report.new}")} '
            f'tests="{len(dr.RULES)}" failures="{failures}" errors="0">')
    return ('<?xml version="1.0" encoding="utf-8"?>\n<testsuites>\n' + head + "\n"
            + "\n".join(cases) + "\n</testsuite>\n</testsuites>\n")


def project_excepts(sections: dict) -> list[str]:
    """Rule ids or names listed in the project file's ``[diff] except = [...]``."""
    table = sections.get("diff") if isinstance(sections, dict) else None
    if not isinstance(table, dict):
        return []
    value = table.get("except", [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DiffError("[diff] except must be a list of rule ids or names")
    unknown = [v for v in value if dr.find(v) is None]
    if unknown:
        raise DiffError(f"[diff] except: unknown rule(s) {', '.join(unknown)}")
    return value


# -- drift explained from the layouts -----------------------------------------------------

def _checked_in_layout(text: str) -> dict | None:
    """The ``LAYOUT`` literal of a checked-in module (data written by the generator)."""
    import ast

    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "LAYOUT"):
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                return None
    return None


def _strip_lines(obj: object) -> object:
    if isinstance(obj, dict):
        return {k: _strip_lines(v) for k, v in obj.items() if k != "line"}
    if isinstance(obj, list):
        return [_strip_lines(v) for v in obj]
    return obj


def drift_records(old_text: str, family: ir.Family | None) -> list[str]:
    """Records whose layout (fields, types, offsets, sizes, versions, docs) differs between
    a checked-in module and the family's IR; YAML line moves alone do not count. Empty
    when the layouts agree (the drift is then in generated code, not in a layout)."""
    if family is None:
        return []
    new = _strip_lines(pipeline.layout_data(family))
    old = _checked_in_layout(old_text)
    old = _strip_lines(old) if isinstance(old, dict) else {}
    return sorted(name for name in set(new) | set(old) if new.get(name) != old.get(name))


RENDERERS = {"text": render_text, "json": render_json, "github": render_github,
             "junit": render_junit}
"""Text renderers of a report; ``docs.render_diff_html`` draws the HTML view (it needs the
docs' record model, and docs builds on this module)."""
