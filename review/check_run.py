"""The whole of ``bytewright check`` as data: drift per family, then the fixtures.

``run`` reads the schemas into families (layouts only), compares each family's checked-in
module with a fresh emission (skipped when ``check_cache`` knows the exact inputs were
found clean before), and, when nothing drifted, runs the golden fixtures. The report
renders as JSON (one document) and as JUnit XML; ``cli/check.py`` prints the text form.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..generator import pipeline, project
from ..generator.problems import Problem, Problems
from . import check_cache, checks

FORMAT_VERSION = 1
EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


class UnknownFamily(ValueError):
    """``--family`` names no family of the project; the message is one line."""


@dataclass
class FixtureFailure:
    """A fixture file that could not be run (unreadable, or in a folder of no family)."""

    name: str
    message: str


@dataclass
class FamilyReport:
    name: str
    drift: checks.FamilyDrift | None = None
    fixtures: list[checks.FixtureResult] = field(default_factory=list)
    broken: list[FixtureFailure] = field(default_factory=list)
    fixtures_run: bool = False

    @property
    def failed(self) -> int:
        return sum(not r.ok for r in self.fixtures) + len(self.broken)


@dataclass
class Report:
    project: str
    output: str  # the output folder as shown (relative to the project)
    families: dict[str, FamilyReport] = field(default_factory=dict)
    orphans: list[checks.Drift] = field(default_factory=list)
    strays: list[FixtureFailure] = field(default_factory=list)  # folders of no family
    problems: list[Problem] = field(default_factory=list)

    @property
    def drifted(self) -> list[checks.FamilyDrift]:
        return [f.drift for f in self.families.values()
                if f.drift is not None and f.drift.drift is not None]

    @property
    def exit_code(self) -> int:
        if any(p.severity == "error" for p in self.problems):
            return EXIT_USAGE
        if self.drifted or self.orphans or self.strays \
                or any(f.failed for f in self.families.values()):
            return EXIT_FINDINGS
        return EXIT_OK

    def totals(self) -> dict[str, int]:
        fams = self.families.values()
        return {"families": len(self.families),
                "drift": len(self.drifted) + len(self.orphans),
                "fixtures_passed": sum(sum(r.ok for r in f.fixtures) for f in fams),
                "fixtures_failed": sum(f.failed for f in fams) + len(self.strays)}


def fixture_name(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def failure_message(r: checks.FixtureResult) -> str:
    """Why a fixture failed, in one line."""
    if r.error:
        return r.error
    bad = [k for k, v in r.checks.items() if not v]
    return "failed: " + ", ".join(bad)


def run(proj: project.Project, *, family: str | None = None, compiled: bool = True,
        use_cache: bool = True, progress: Callable[[str], None] | None = None) -> Report:
    """Check ``proj`` (or only ``family`` of it: its drift and its fixtures).

    Raises ``project.ProjectError`` for an unusable project and ``UnknownFamily``."""
    say = progress or (lambda _step: None)
    report = Report(str(proj.file or proj.root), proj.display(proj.output))
    proj.activate()
    say("reading schemas")
    result = pipeline.run(proj.schema_files(), base=proj.root, render_modules=False,
                          progress=say)
    report.problems = list(result.problems)
    if result.problems:
        return report
    if family is not None and family not in result.families:
        raise UnknownFamily(f"no family {family!r} in this project; families: "
                            f"{', '.join(sorted(result.families)) or '(none)'}")
    names = [family] if family is not None else sorted(result.families)
    cache = check_cache.CheckCache(proj.root, read=use_cache)
    context = check_cache.generator_digest() + check_cache.plugins_digest(proj)
    problems = Problems()
    for name in names:
        report.families[name] = FamilyReport(name, checks.family_drift(
            result.families[name], proj.output, problems, cache, context, say))
    cache.save()
    report.problems = list(problems)
    if family is None:
        report.orphans = checks.orphan_drifts(result.families, proj.output)
    if report.problems or report.drifted or report.orphans:
        return report  # fixtures would run against stale code
    for path in checks.fixture_paths(family, proj.fixtures):
        owner = report.families.get(path.parent.name)
        if owner is None:
            report.strays.append(FixtureFailure(
                fixture_name(path), f"folder {path.parent.name!r} is not a family of this "
                                    f"project ({', '.join(sorted(result.families))})"))
            continue
        say(f"fixture {fixture_name(path)}")
        try:
            fx = checks.parse_fixture(path)
        except checks.FixtureFileError as exc:
            owner.broken.append(FixtureFailure(fixture_name(path), str(exc)))
            continue
        owner.fixtures.append(checks.check_fixture(fx, compiled=compiled,
                                                   module=proj.load_module))
    for fam in report.families.values():
        fam.fixtures_run = True
    return report


# -- machine-readable forms ---------------------------------------------------------------

def as_dict(report: Report) -> dict:
    families = {}
    for name, fam in report.families.items():
        d = fam.drift
        drift = None if d is None else {
            "ok": d.drift is None, "module": f"{report.output}/{d.module}",
            "cached": d.cached, "missing": d.missing,
            "records": d.drift.records if d.drift is not None else [],
            "diff": d.drift.diff[:20000] if d.drift is not None else ""}
        families[name] = {
            "drift": drift,
            "fixtures": {
                "run": fam.fixtures_run,
                "passed": [fixture_name(r.fixture.path) for r in fam.fixtures if r.ok],
                "failed": [{"name": fixture_name(r.fixture.path), "record": r.fixture.record,
                            "message": failure_message(r), "checks": r.checks}
                           for r in fam.fixtures if not r.ok]
                + [{"name": b.name, "record": None, "message": b.message, "checks": {}}
                   for b in fam.broken]}}
    return {"format": FORMAT_VERSION, "project": report.project, "ok": report.exit_code == 0,
            "exit_code": report.exit_code, "families": families,
            "orphans": [{"module": f"{report.output}/{o.module}", "message": o.diff.strip()}
                        for o in report.orphans],
            "stray_fixtures": [{"name": s.name, "message": s.message} for s in report.strays],
            "problems": [str(p) for p in report.problems], "totals": report.totals()}


def render_json(report: Report) -> str:
    return json.dumps(as_dict(report), indent=2) + "\n"


def render_junit(report: Report) -> str:
    """JUnit XML: one test case per drift check and per fixture (a suite per family)."""
    suites = ET.Element("testsuites", name="bytewright check")

    def suite(name: str) -> ET.Element:
        return ET.SubElement(suites, "testsuite", name=name)

    def case(parent: ET.Element, classname: str, name: str, failure: str | None = None,
             skipped: str | None = None, error: str | None = None) -> None:
        tc = ET.SubElement(parent, "testcase", classname=classname, name=name)
        if failure is not None:
            ET.SubElement(tc, "failure", message=failure.splitlines()[0] if failure
                          else "failed").text = failure
        if error is not None:
            ET.SubElement(tc, "error", message=error.splitlines()[0]).text = error
        if skipped is not None:
            ET.SubElement(tc, "skipped", message=skipped)

    if report.problems:
        s = suite("schemas")
        case(s, "schemas", "schema problems",
             error="\n".join(str(p) for p in report.problems))
    for name, fam in report.families.items():
        s = suite(name)
        d = fam.drift
        if d is not None:
            msg = None
            if d.drift is not None:
                msg = (f"{report.output}/{d.module}: not generated yet" if d.missing else
                       f"{report.output}/{d.module}: records changed in the schema but not "
                       f"regenerated: {', '.join(d.drift.records) or '(module-level)'}\n"
                       + d.drift.diff[:20000])
            case(s, name, f"drift {report.output}/{d.module}", failure=msg)
        for r in fam.fixtures:
            case(s, name, fixture_name(r.fixture.path),
                 failure=None if r.ok else failure_message(r))
        for b in fam.broken:
            case(s, name, b.name, failure=b.message)
        if not fam.fixtures_run:
            case(s, name, "fixtures", skipped="not run: generated code drifted or the "
                                                "schemas have problems")
    if report.orphans or report.strays:
        s = suite("project")
        for o in report.orphans:
            case(s, "project", f"drift {report.output}/{o.module}", failure=o.diff.strip())
        for st in report.strays:
            case(s, "project", st.name, failure=st.message)
    for s in suites:
        cases = s.findall("testcase")
        s.set("tests", str(len(cases)))
        s.set("failures", str(sum(c.find("failure") is not None for c in cases)))
        s.set("errors", str(sum(c.find("error") is not None for c in cases)))
        s.set("skipped", str(sum(c.find("skipped") is not None for c in cases)))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(
        suites, encoding="unicode") + "\n"
