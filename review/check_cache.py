"""What ``bytewright check`` remembers between runs: families found free of drift.

A family's generated module is a function of its schema sources (imported parts
included: ``Family.digest``), of the generator's own source and of the plug-ins that
name checksums and codecs. When all of those and the checked-in module are byte for byte
what they were at a check that found no drift, emitting the module again would give the
same text: the check can say "no drift" without running the emitters. Any change to one
of them misses the cache and the family is emitted and compared as in a full check.

The cache lives in ``.bytewright-cache/check.json`` under the project folder, next to a
``.gitignore`` that keeps git away from it. A cache that cannot be read is ignored and
one that cannot be written is not kept: the check never depends on it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from pathlib import Path

from ..generator import ir, project

CACHE_DIR = ".bytewright-cache"
CACHE_FILE = "check.json"
FORMAT = 1
# Source folders of the package whose text decides what a generated module looks like:
# the generator and the runtime names it binds (checksums, codecs, field names).
_SOURCE_DIRS = ("generator", "runtime")


def _tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for sub in _SOURCE_DIRS:
        base = root / sub
        for path in sorted(base.rglob("*")):
            if "__pycache__" in path.parts or not path.is_file() \
                    or path.suffix not in (".py", ".j2", ".json"):
                continue
            h.update(path.relative_to(root).as_posix().encode() + b"\0")
            h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


_GENERATOR: list[str] = []


def generator_digest() -> str:
    """A digest of the generator's own source (computed once per process), the Python
    version and the libraries that shape the emitted text."""
    if not _GENERATOR:
        import jinja2

        h = hashlib.sha256(_tree_digest(project.PACKAGE_ROOT).encode())
        h.update(f"{sys.version_info[:2]} jinja2 {jinja2.__version__}".encode())
        _GENERATOR.append(h.hexdigest())
    return _GENERATOR[0]


def plugins_digest(proj: project.Project) -> str:
    """The project's plug-in entries and the source files of their modules."""
    h = hashlib.sha256()
    for spec in proj.plugins:
        h.update(spec.encode() + b"\0")
        module = spec.partition(":")[0]
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            found = None
        origin = getattr(found, "origin", None)
        if origin and os.path.isfile(origin):
            h.update(Path(origin).read_bytes())
    return h.hexdigest()


def family_key(family: ir.Family, module: Path, context: str) -> str:
    """The key of one family's drift check: its schema sources, the checked-in module
    (or its absence) and ``context`` (generator and plug-ins digests)."""
    h = hashlib.sha256(f"{FORMAT}\0{context}\0{family.name}\0{family.digest}\0".encode())
    try:
        h.update(b"module\0" + module.read_bytes())
    except OSError:
        h.update(b"no module")
    return h.hexdigest()


class CheckCache:
    """Per family, the key of the last check that found its module free of drift."""

    def __init__(self, root: Path, read: bool = True) -> None:
        """``read=False`` (``check --no-cache``): every family is emitted and compared;
        what that finds is still written for the next run."""
        self.folder = root / CACHE_DIR
        self.use = read
        self.clean: dict[str, str] = {}
        self.changed = False
        self._read()  # kept for the families this run does not check

    def _read(self) -> None:
        try:
            data = json.loads((self.folder / CACHE_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if isinstance(data, dict) and data.get("format") == FORMAT \
                and isinstance(data.get("clean"), dict):
            self.clean = {k: v for k, v in data["clean"].items() if isinstance(v, str)}

    def hit(self, family: str, key: str) -> bool:
        return self.use and self.clean.get(family) == key

    def remember(self, family: str, key: str) -> None:
        if self.clean.get(family) != key:
            self.clean[family] = key
            self.changed = True

    def forget(self, family: str) -> None:
        if self.clean.pop(family, None) is not None:
            self.changed = True

    def save(self) -> None:
        """Write the cache (atomically); a folder that cannot be written keeps none."""
        if not self.changed:
            return
        try:
            self.folder.mkdir(exist_ok=True)
            ignore = self.folder / ".gitignore"
            if not ignore.exists():
                ignore.write_text("# written by bytewright check: never commit\n*\n",
                                  encoding="utf-8")
            tmp = self.folder / f"{CACHE_FILE}.{os.getpid()}.tmp"
            tmp.write_text(json.dumps({"format": FORMAT, "clean": self.clean},
                                      indent=1, sort_keys=True) + "\n", encoding="utf-8")
            os.replace(tmp, self.folder / CACHE_FILE)
        except OSError:
            return
