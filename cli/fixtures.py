"""``bytewright fixtures``: list the golden fixtures, or write them from their cases.

Cases live in the project's ``cases`` folder as ``<family>_cases.py``, one module per
family of the project's schemas, each with ``cases()`` (or ``cases(module)``, handed the
family's generated module) yielding ``(name, record, params, value, doc)``. ``write``
encodes each value into ``<fixtures>/<family>/<name>.hex``. Fixture bytes are the byte
authority: when the bytes of an existing fixture would change, ``write`` lists them and
refuses (exit 1) unless ``--bless`` is given; comments and new fixtures are written freely.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import yaml

from ..generator import project as project_mod
from ..review import checks
from . import _cases_file, common


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fixtures", help="list golden fixtures, or write them from their cases")
    verbs = p.add_subparsers(dest="fixtures_verb", metavar="ACTION")
    verbs.required = True
    w = verbs.add_parser(
        "write", help="encode every case into its .hex fixture",
        description="Encode every case of <cases>/<family>_cases.py into "
                    "<fixtures>/<family>/<name>.hex. Refuses (exit 1) when bytes of an "
                    "existing fixture would change, listing them, unless --bless.")
    w.add_argument("--family", help="only this family")
    w.add_argument("--bless", action="store_true",
                   help="accept changed bytes of existing fixtures (a wire change: bump the "
                        "version)")
    w.add_argument("--dry-run", action="store_true", help="say what would change; write nothing")
    common.add_project_arg(w)
    w.set_defaults(func=run_write)
    ls = verbs.add_parser("list", help="list the fixtures of the project")
    ls.add_argument("--family", help="only this family")
    common.add_project_arg(ls)
    ls.set_defaults(func=run_list)


def families_of(proj: project_mod.Project) -> list[str]:
    """Family names declared by the project's schemas (read cheaply, not generated)."""
    names = []
    for path in proj.schema_files():
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise common.Findings(f"{proj.display(path)}: cannot read the family name: "
                                  f"{exc}") from exc
        family = data.get("family") if isinstance(data, dict) else None
        if isinstance(family, str) and family not in names:
            names.append(family)
    return names


def _pick(proj: project_mod.Project, family: str | None) -> list[str]:
    try:
        names = families_of(proj)
    except project_mod.ProjectError as exc:
        raise common.project_error(exc) from exc
    if family is None:
        return names
    if family not in names:
        raise common.UsageError(f"no family {family!r} in this project; families: "
                                f"{', '.join(names) or '(none)'}")
    return [family]


def run_list(args: argparse.Namespace) -> int:
    proj = common.project(args)
    common.announce(proj)
    for family in _pick(proj, args.family):
        for path in checks.fixture_paths(family, proj.fixtures):
            print(proj.display(path))
    return 0


@dataclass
class Planned:
    path: Path
    text: str
    data: bytes
    state: str  # new | same | text (comments/params only) | bytes (the bytes change)


def load_cases(proj: project_mod.Project, family: str) -> ModuleType | None:
    """The ``<family>_cases.py`` module of the project, or None when it has none."""
    if proj.cases is None:
        return None
    path = proj.cases / f"{family}_cases.py"
    if not path.is_file():
        return None
    key = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(f"_bytewright_cases_{key}_{family}", path)
    if spec is None or spec.loader is None:
        raise common.InputError(f"{path}: cannot load")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses in a cases module look themselves up
    with _cases_file.blame(path, proj.display(path)):
        spec.loader.exec_module(module)
    return module


def plan(proj: project_mod.Project, family: str) -> list[Planned] | None:
    """What ``write`` would do for ``family`` (None: no cases module)."""
    cases_mod = load_cases(proj, family)
    if cases_mod is None:
        return None
    codec = proj.load_module(family)
    src = Path(str(cases_mod.__file__))
    shown = proj.display(src)
    func = getattr(cases_mod, "cases", None)
    if not callable(func):
        raise common.UsageError(f"{shown}: defines no cases() function")
    with _cases_file.blame(src, shown):
        items = list(func(codec) if inspect.signature(func).parameters else func())
    out: list[Planned] = []
    seen: set[str] = set()
    fixtures = proj.fixtures or proj.root / "fixtures"
    for item in items:
        name, record, params, value, doc = _cases_file.unpack(item, shown)
        if name in seen:
            raise common.UsageError(f"{shown}: two cases named {name!r}")
        seen.add(name)
        if record not in codec.ENCODERS:
            raise common.UsageError(f"{shown}: case {name!r}: {family} has no record "
                                    f"{record!r}")
        _cases_file.check_params(codec.ENCODERS[record], item, shown)
        with _cases_file.blame(src, shown, name):
            data = codec.ENCODERS[record](value, **params)
        text = checks.fixture_text(record, params, data, doc)
        path = fixtures / family / f"{name}.hex"
        out.append(Planned(path, text, data, _state(path, text, data)))
    return out


def _state(path: Path, text: str, data: bytes) -> str:
    if not path.exists():
        return "new"
    try:
        old_text = path.read_text(encoding="utf-8")
        old = checks.parse_fixture(path, old_text)
    except (OSError, UnicodeDecodeError, checks.FixtureFileError):
        return "bytes"  # unreadable today: replacing it is a change of bytes
    if old.data != data:
        return "bytes"
    return "same" if old_text == text else "text"


def run_write(args: argparse.Namespace) -> int:
    proj = common.project(args, fallback=False)
    common.announce(proj)
    if proj.fixtures is None:
        raise common.UsageError("this project has no fixtures folder")
    plans: dict[str, list[Planned]] = {}
    for family in _pick(proj, args.family):
        planned = plan(proj, family)
        if planned is None:
            where = proj.display(proj.cases) if proj.cases else "(no cases folder)"
            print(f"{family}: no {family}_cases.py in {where}; skipped")
            continue
        plans[family] = planned
    changed = [p for ps in plans.values() for p in ps if p.state == "bytes"]
    for p in changed:  # the report, on stdout; the refusal below is the one error line
        print(f"BYTES CHANGE {proj.display(p.path)} ({len(p.data)} bytes)")
    if changed and not args.bless:
        raise common.Findings(
            f"refused: the bytes of {len(changed)} existing fixture(s) would change (listed "
            "above); fixtures are the byte authority. If the format changed on purpose, "
            "bump its version, then rerun with --bless")
    counts = {"new": 0, "same": 0, "text": 0, "bytes": 0}
    for family, planned in plans.items():
        for p in planned:
            counts[p.state] += 1
            if p.state == "same":
                continue
            print(f"{'would write' if args.dry_run else 'wrote'} {family}/{p.path.name} "
                  f"({p.state}, {len(p.data)} bytes)")
            if args.dry_run:
                continue
            try:
                p.path.parent.mkdir(parents=True, exist_ok=True)
                p.path.write_text(p.text, encoding="utf-8")
            except OSError as exc:
                raise common.InputError(common.io_message(p.path, exc)) from exc
    print(f"fixtures: {counts['new']} new, {counts['bytes']} bytes changed (blessed), "
          f"{counts['text']} comments/params only, {counts['same']} unchanged"
          + (" (dry run: nothing written)" if args.dry_run else ""))
    return 0
