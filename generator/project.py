"""Projects: what a user owns (schemas, generated modules, fixtures, plug-ins).

A project is described by ``bytewright.toml`` (top-level keys) or by the
``[tool.bytewright]`` table of a ``pyproject.toml``. Relative paths are relative to the
folder holding that file. The formats shipped with bytewright are one such project,
described by the package's own ``bytewright.toml``; nothing here knows their names.

Keys (all optional; defaults in brackets):

``name``      a label for messages [the folder name]
``schemas``   schema files or folders (every ``*.yaml`` in a folder) [``["schemas"]``]
``output``    folder that receives ``<family>.py`` [``"generated"``, or the package's
              dotted path when ``package`` is given]
``package``   dotted name of an importable package that is the output folder; modules are
              then imported as ``package.family`` (otherwise loaded by file path)
``fixtures``  folder of ``<family>/*.hex`` golden fixtures [``"fixtures"``]
``cases``     folder of ``<family>_cases.py`` modules that build the fixtures
``plugins``   ``"module:function"`` entries, each handed to
              ``bytewright.runtime.registry.load_plugin`` (the project folder is put on
              ``sys.path`` first, so a plug-in module next to the project file imports)

Any other *table* (for example ``[diff]``) is kept in ``Project.sections`` for the tool
that owns it; any other plain key is an error, so a typo is not silently ignored.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

PROJECT_FILE = "bytewright.toml"
PYPROJECT_FILE = "pyproject.toml"
PACKAGE_ROOT = Path(__file__).resolve().parent.parent
PACKAGE_PROJECT_FILE = PACKAGE_ROOT / PROJECT_FILE

KEYS = ("name", "schemas", "output", "package", "fixtures", "cases", "plugins")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_PLUGIN = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class ProjectError(Exception):
    """A project file that cannot be used; the message is one line naming the file.

    ``io`` is true when the file could not be read at all (missing, a directory, no
    permission) rather than read and found wrong.
    """

    def __init__(self, message: str, *, io: bool = False) -> None:
        super().__init__(message)
        self.io = io


@dataclass
class Project:
    """A loaded, validated project. Paths are absolute."""

    root: Path
    file: Path | None
    name: str
    schemas: list[Path]
    output: Path
    package: str | None = None
    fixtures: Path | None = None
    cases: Path | None = None
    plugins: list[str] = field(default_factory=list)
    sections: dict[str, Any] = field(default_factory=dict)
    how: str = ""  # how it was chosen, for the first line of output

    @property
    def is_package(self) -> bool:
        """True for the package's own project (the formats bytewright ships)."""
        return self.file is not None and self.file.resolve() == PACKAGE_PROJECT_FILE

    def describe(self) -> str:
        """One line naming the project and how it was found."""
        where = str(self.file) if self.file is not None else f"{self.root} (no project file)"
        return f"project: {where}" + (f" ({self.how})" if self.how else "")

    def schema_files(self) -> list[Path]:
        """Every schema file, folders expanded (``*.yaml``, sorted), duplicates dropped."""
        out: list[Path] = []
        for entry in self.schemas:
            if entry.is_dir():
                found = sorted(p for p in entry.iterdir()
                               if p.suffix in (".yaml", ".yml") and p.is_file())
            elif entry.is_file():
                found = [entry]
            else:
                raise ProjectError(f"{self._label()}: schemas entry {entry} does not exist",
                                   io=True)
            for p in found:
                if p not in out:
                    out.append(p)
        return out

    def display(self, path: Path) -> str:
        """``path`` relative to the project root when inside it (for messages)."""
        try:
            return path.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return str(path)

    def _label(self) -> str:
        return str(self.file) if self.file is not None else str(self.root)

    # -- generated modules -----------------------------------------------------------

    def module_path(self, family: str) -> Path:
        return self.output / f"{family}.py"

    def load_module(self, family: str) -> ModuleType:
        """The generated module of ``family``.

        With ``package`` set it is imported as ``package.family``; otherwise it is loaded
        from its file under a private module name, so a user's family called like a
        standard or installed module (``png``, ``json``) can never shadow or be shadowed.
        """
        if not _IDENT.match(family):
            raise ProjectError(f"{family!r} is not a family name")
        path = self.module_path(family)
        if not path.is_file():
            raise ProjectError(f"{self._label()}: no generated module {self.display(path)} "
                               "(run `bytewright generate`)", io=True)
        if self.package:
            self.activate()
            return importlib.import_module(f"{self.package}.{family}")
        key = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
        modname = f"_bytewright_project_{key}_{family}"
        stamp = path.stat().st_mtime_ns, path.stat().st_size
        cached = sys.modules.get(modname)
        if cached is not None and getattr(cached, "__bytewright_stamp__", None) == stamp:
            return cached
        self.activate()
        spec = importlib.util.spec_from_file_location(modname, path)
        if spec is None or spec.loader is None:
            raise ProjectError(f"cannot load {path}", io=True)
        module = importlib.util.module_from_spec(spec)
        # Registered before running it: dataclasses look their module up in sys.modules.
        sys.modules[modname] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(modname, None)
            raise
        module.__bytewright_stamp__ = stamp
        return module

    # -- plug-ins --------------------------------------------------------------------

    def activate(self) -> None:
        """Put the project folder on ``sys.path`` and load its plug-ins (once each).

        Only when something must import from it (plug-ins, a ``package`` of the user's):
        the package's own root on ``sys.path`` would expose its folders as bare
        top-level packages."""
        if not self.plugins and (self.package is None or self.is_package):
            return
        root = str(self.root)
        if root not in sys.path:
            sys.path.insert(0, root)
        if self.plugins:
            load_plugins(self.plugins)


_LOADED_PLUGINS: set[str] = set()


def load_plugins(specs: list[str]) -> None:
    """Hand each ``module:function`` to the runtime registry, once per process."""
    todo = [s for s in specs if s not in _LOADED_PLUGINS]
    if not todo:
        return
    try:
        from bytewright.runtime import registry
    except ImportError as exc:
        raise ProjectError(f"plug-ins need bytewright.runtime.registry: {exc}") from exc
    for spec in todo:
        try:
            registry.load_plugin(spec)
        except ProjectError:
            raise
        except Exception as exc:  # a plug-in's own failure, reported on one line
            raise ProjectError(f"plug-in {spec}: {type(exc).__name__}: {exc}") from exc
        _LOADED_PLUGINS.add(spec)


# -- loading ---------------------------------------------------------------------------

def _read_toml(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ProjectError(f"{path}: cannot read project file: {exc.strerror or exc}",
                           io=True) from exc
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ProjectError(f"{path}: project file is not UTF-8 text") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ProjectError(f"{path}: not valid TOML: {exc}") from exc


def _table_of(path: Path) -> dict[str, Any] | None:
    """The project table of ``path`` (None for a pyproject.toml without one)."""
    data = _read_toml(path)
    if path.name == PYPROJECT_FILE:
        tool = data.get("tool")
        table = tool.get("bytewright") if isinstance(tool, dict) else None
        if table is None:
            return None
        if not isinstance(table, dict):
            raise ProjectError(f"{path}: [tool.bytewright] must be a table")
        return table
    return data


def from_table(table: dict[str, Any], root: Path, file: Path | None = None) -> Project:
    """Validate a project table (as read from TOML) into a ``Project``."""
    label = str(file) if file is not None else str(root)

    def bad(msg: str) -> ProjectError:
        return ProjectError(f"{label}: {msg}")

    def text(key: str, default: str | None) -> str | None:
        value = table.get(key, default)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise bad(f"{key} must be a non-empty string, not {value!r}")
        return value

    def strings(key: str, default: list[str]) -> list[str]:
        value = table.get(key, default)
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise bad(f"{key} must be a string or a list of strings, not {value!r}")
        return value

    unknown = [k for k, v in table.items() if k not in KEYS and not isinstance(v, dict)]
    if unknown:
        raise bad(f"unknown key(s) {', '.join(sorted(unknown))}; known keys: {', '.join(KEYS)}")
    name = text("name", None) or root.name or "project"
    schemas = [root / s for s in strings("schemas", ["schemas"])]
    package = text("package", None)
    if package is not None and not _DOTTED.match(package):
        raise bad(f"package must be a dotted Python name, not {package!r}")
    # A package without an output folder lives at its dotted path under the project.
    default_output = package.replace(".", "/") if package else "generated"
    output = root / text("output", default_output)
    fixtures = root / text("fixtures", "fixtures")
    cases_text = text("cases", None)
    plugins = strings("plugins", [])
    for spec in plugins:
        if not _PLUGIN.match(spec):
            raise bad(f"plugins entry {spec!r} is not of the form 'module:function'")
    sections = {k: v for k, v in table.items() if k not in KEYS}
    return Project(root=root.resolve(), file=file.resolve() if file else None, name=name,
                   schemas=[p.resolve() for p in schemas], output=output.resolve(),
                   package=package, fixtures=fixtures.resolve(),
                   cases=(root / cases_text).resolve() if cases_text else None,
                   plugins=plugins, sections=sections)


def load(path: Path) -> Project:
    """Load a project file, or the project file inside folder ``path``."""
    path = Path(path)
    if path.is_dir():
        for candidate in (path / PROJECT_FILE, path / PYPROJECT_FILE):
            if candidate.is_file() and _table_of(candidate) is not None:
                path = candidate
                break
        else:
            raise ProjectError(f"{path}: no {PROJECT_FILE} (or pyproject.toml with "
                               "[tool.bytewright]) in this folder", io=True)
    if not path.exists():
        raise ProjectError(f"{path}: no such project file", io=True)
    table = _table_of(path)
    if table is None:
        raise ProjectError(f"{path}: has no [tool.bytewright] table")
    return from_table(table, path.resolve().parent, path)


def find(start: Path) -> Path | None:
    """The nearest project file at or above ``start``."""
    here = start.resolve()
    for folder in (here, *here.parents):
        candidate = folder / PROJECT_FILE
        if candidate.is_file():
            return candidate
        candidate = folder / PYPROJECT_FILE
        if candidate.is_file():
            try:
                if _table_of(candidate) is not None:
                    return candidate
            except ProjectError:
                continue  # a broken pyproject.toml without our table is not ours to judge
    return None


def package_project() -> Project:
    """The package's own project: the formats bytewright ships."""
    return load(PACKAGE_PROJECT_FILE)


class NoProject(ProjectError):
    """No project file was found and the verb does not fall back to the package's own."""


def resolve(explicit: str | Path | None = None, cwd: Path | None = None, *,
            fallback: bool = True) -> Project:
    """The project a verb works on: ``--project``, else the nearest one from ``cwd``,
    else the package's own project. With ``fallback=False`` (verbs that write files or
    read a repository's history) that last step is refused with ``NoProject``: such a
    verb must never act on the installed package's own files by accident."""
    if explicit is not None:
        proj = load(Path(explicit))
        proj.how = "from --project"
        return proj
    found = find(cwd or Path.cwd())
    if found is not None:
        proj = load(found)
        proj.how = "the package's own" if proj.is_package else "found from the current folder"
        return proj
    if not fallback:
        raise NoProject(f"no {PROJECT_FILE} (or pyproject.toml with [tool.bytewright]) in "
                        f"{(cwd or Path.cwd()).resolve()} or above: pass --project PATH "
                        "(a project file or its folder)")
    proj = package_project()
    proj.how = "the package's own: no bytewright.toml found from the current folder"
    return proj


def adhoc(schemas: list[Path], output: Path) -> Project:
    """A project with no file: schema files given on the command line, an output folder."""
    cwd = Path.cwd().resolve()
    return Project(root=cwd, file=None, name=cwd.name, schemas=[p.resolve() for p in schemas],
                   output=output.resolve(), fixtures=None, how="schemas from the command line")
