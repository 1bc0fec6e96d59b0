"""The codec-truth property, run over every record of a project's schemas.

Valid values: the fast and Construct encoders give the same bytes, and the fast decoder,
the interpreted Construct decoder and the compiled Construct decoder all give the value
back. Near-valid values (one change that makes the value invalid): both encoders raise
``EncodeError`` with the same field path.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import math
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import HypothesisWarning, Unsatisfiable

from ..generator import ir, pipeline
from ..generator import project as project_mod
from ..runtime.errors import EncodeError
from ..runtime.located import Lazy, LazyList
from .strategies import Builder, Case, Unsupported, bind_sites


class PropertyFailure(AssertionError):
    """The property does not hold for one drawn value."""

    def __init__(self, stage: str, detail: str) -> None:
        super().__init__(f"{stage}: {detail}")
        self.stage = stage
        self.detail = detail


@dataclass
class RecordResult:
    """The outcome for one record: ``ok``, ``failed`` or ``unsupported``."""

    family: str
    record: str
    kind: str  # valid | near
    status: str
    examples: int = 0
    detail: str = ""
    example: str = ""

    @property
    def key(self) -> str:
        return f"{self.family}.{self.record}"

    def line(self) -> str:
        head = f"{self.kind:5} {self.key}: {self.status}"
        if self.status == "ok":
            return f"{head} ({self.detail or f'{self.examples} examples'})"
        out = f"{head}: {self.detail}"
        if self.example:
            label = "value before the change" if self.kind == "near" else "minimal example"
            out += f"\n      {label}: {self.example}"
        return out


@dataclass
class Report:
    """Every record's result; ``ok`` when none failed."""

    results: list[RecordResult] = field(default_factory=list)

    @property
    def failed(self) -> list[RecordResult]:
        return [r for r in self.results if r.status == "failed"]

    @property
    def unsupported(self) -> list[RecordResult]:
        return [r for r in self.results if r.status == "unsupported"]

    @property
    def ok(self) -> bool:
        return not self.failed

    def summary(self) -> str:
        n = len(self.results)
        passed = sum(r.status == "ok" for r in self.results)
        return (f"{n} checks: {passed} ok, {len(self.failed)} failed, "
                f"{len(self.unsupported)} unsupported")


# -- comparing values ------------------------------------------------------------------

def normalize(v: Any) -> Any:
    """A comparable form of a model value (numpy views and packed arrays as lists)."""
    if isinstance(v, Lazy):  # a located record: compared by what it decodes to
        v = v.get()
    if isinstance(v, LazyList):
        v = list(v)
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        # fields not compared (offsets the encoder fills) are left out
        return (type(v).__name__,
                tuple(normalize(getattr(v, f.name)) for f in dataclasses.fields(v)
                      if f.compare))
    if isinstance(v, enum.Enum):
        return v.value
    if hasattr(v, "tolist") and not isinstance(v, (bytes, str)):
        v = v.tolist()
    if isinstance(v, (list, tuple)):
        return [normalize(x) for x in v]
    if isinstance(v, float):
        return ("f", v) if not math.isnan(v) else ("nan",)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    return v


def _first_difference(a: Any, b: Any, path: str = "") -> str:
    na, nb = normalize(a), normalize(b)
    if na == nb:
        return ""
    if dataclasses.is_dataclass(a) and dataclasses.is_dataclass(b) and type(a) is type(b):
        for f in dataclasses.fields(a):
            d = _first_difference(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
            if d:
                return d
    return f"{path or '(value)'}: {a!r} != {b!r}"


# -- calling the codecs ------------------------------------------------------------------

class Codecs:
    """The five entry points of one record, with the params each accepts."""

    def __init__(self, module: ModuleType, record: str) -> None:
        self.encode = getattr(module, f"encode_{record}")
        self.decode = getattr(module, f"decode_{record}")
        self.c_encode = getattr(module, f"construct_encode_{record}")
        self.c_decode = getattr(module, f"construct_decode_{record}")
        self._accepts: dict[Callable, set[str] | None] = {}

    def args(self, fn: Callable, params: dict[str, Any]) -> dict[str, Any]:
        if fn not in self._accepts:
            sig = inspect.signature(fn)
            if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
                self._accepts[fn] = None
            else:
                self._accepts[fn] = set(sig.parameters)
        names = self._accepts[fn]
        return dict(params) if names is None else {k: v for k, v in params.items()
                                                   if k in names}


def check_valid(codecs: Codecs, case: Case) -> None:
    """The property for a valid value; raises :class:`PropertyFailure`."""
    v, p = case.value, case.params
    try:
        fast = codecs.encode(v, **codecs.args(codecs.encode, p))
    except Exception as exc:  # noqa: BLE001 - every failure is reported, not raised
        raise PropertyFailure("fast encode", _err(exc)) from None
    try:
        slow = codecs.c_encode(v, **codecs.args(codecs.c_encode, p))
    except Exception as exc:  # noqa: BLE001
        raise PropertyFailure("construct encode", _err(exc)) from None
    if fast != slow:
        raise PropertyFailure("encoders disagree",
                              f"fast {fast.hex()} != construct {slow.hex()}")
    try:
        got, end = codecs.decode(fast, **codecs.args(codecs.decode, p))
    except Exception as exc:  # noqa: BLE001
        raise PropertyFailure("fast decode", f"{_err(exc)} (bytes {fast.hex()})") from None
    if end != len(fast):
        raise PropertyFailure("fast decode", f"ends at {end} of {len(fast)} bytes")
    d = _first_difference(got, v)
    if d:
        raise PropertyFailure("fast decode", f"decoded value differs at {d}")
    for compiled in (False, True):
        stage = "compiled construct decode" if compiled else "construct decode"
        try:
            got = codecs.c_decode(fast, compiled=compiled,
                                  **codecs.args(codecs.c_decode, p))
        except Exception as exc:  # noqa: BLE001
            raise PropertyFailure(stage, f"{_err(exc)} (bytes {fast.hex()})") from None
        d = _first_difference(got, v)
        if d:
            raise PropertyFailure(stage, f"decoded value differs at {d}")


def check_near(codecs: Codecs, case: Case, site_index: int) -> str:
    """Break ``case`` at one site; both encoders must raise ``EncodeError`` with the same
    path. Returns a description of the change."""
    bind_sites(case.value, case.sites)
    site = case.sites[site_index % len(case.sites)]
    site.apply()
    what = f"{site.path}: {site.detail}"
    outcomes = []
    for name, fn in (("fast", codecs.encode), ("construct", codecs.c_encode)):
        try:
            out = fn(case.value, **codecs.args(fn, case.params))
        except EncodeError as exc:
            outcomes.append((name, exc.path))
            continue
        except Exception as exc:  # noqa: BLE001
            raise PropertyFailure(f"{name} encode", f"{what}: raised {_err(exc)}, "
                                  "not EncodeError") from None
        raise PropertyFailure(f"{name} encode", f"{what}: accepted, gave {out.hex()}")
    if outcomes[0][1] != outcomes[1][1]:
        raise PropertyFailure("error paths disagree", f"{what}: fast {outcomes[0][1]!r} != "
                              f"construct {outcomes[1][1]!r}")
    return what


def _err(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:300]


# -- running -------------------------------------------------------------------------------

def _settings(max_examples: int, shrink: bool = True) -> settings:
    phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if shrink else [])
    return settings(max_examples=max_examples, derandomize=True, deadline=None, phases=phases,
                    database=None, suppress_health_check=list(HealthCheck),
                    print_blob=False, report_multiple_bugs=False)


def run_record(builder: Builder, record: str, *, max_examples: int = 20,
               kind: str = "valid", shrink: bool = True) -> RecordResult:
    """Run the property (``kind`` ``valid`` or ``near``) on one record; ``shrink=False``
    reports the first failing value instead of a minimal one (faster)."""
    fam = builder.family.name
    res = RecordResult(fam, record, kind, "ok")
    try:
        strat = builder.case_strategy(record)
    except Unsupported as exc:
        res.status, res.detail = "unsupported", str(exc)
        return res
    codecs = Codecs(builder.module, record)
    builder.rejects.clear()
    last: dict[str, Any] = {}
    count = [0]

    if kind == "valid":
        @_settings(max_examples, shrink)
        @given(strat)
        def prop(case: Case) -> None:
            count[0] += 1
            last["case"] = repr(case)
            check_valid(codecs, case)
    else:
        @_settings(max_examples, shrink)
        @given(strat.filter(lambda c: bool(c.sites)), st.integers(0, 1 << 16))
        def prop(case: Case, i: int) -> None:
            count[0] += 1
            last["case"] = repr(case)
            last["change"] = check_near(codecs, case, i)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", HypothesisWarning)  # large reprs of big values
            prop()
    except Unsupported as exc:
        res.status, res.detail = "unsupported", str(exc)
    except Unsatisfiable:
        res.status = "unsupported"
        why = max(builder.rejects, key=builder.rejects.get) if builder.rejects else ""
        if kind == "near" and not why:
            res.status = "ok"  # no field of it can be made invalid from the model
            res.detail = "nothing to break: no field can be made invalid in the model"
        else:
            res.detail = f"no valid value drawn: {why or 'every draw broke a constraint'}"
    except PropertyFailure as exc:
        res.status, res.detail, res.example = "failed", str(exc), last.get("case", "")
    except Exception as exc:  # noqa: BLE001 - a crash in drawing or checking is a failure
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        res.status = "failed"
        res.detail = f"{_err(exc)} at {Path(tb.filename).name}:{tb.lineno}"
        res.example = last.get("case", "")
    res.examples = count[0]
    return res


@dataclass
class Target:
    """One record of one family of a project, with the module that codes it."""

    project: project_mod.Project
    family: ir.Family
    record: str

    @property
    def key(self) -> str:
        return f"{self.family.name}.{self.record}"


def project_builders(proj: project_mod.Project) -> Iterator[Builder]:
    """A builder per family of ``proj`` (schemas resolved, generated modules loaded)."""
    proj.activate()
    result = pipeline.run(proj.schema_files(), base=proj.root)
    if result.problems:
        raise project_mod.ProjectError("; ".join(str(p) for p in result.problems))
    for name in sorted(result.families):
        fam = result.families[name]
        yield Builder(fam, proj.load_module(name))


def check_project(project_path: str | Path | project_mod.Project | None = None, *,
                  max_examples: int = 20,
                  near: bool = True, family: str | None = None,
                  progress: Callable[[RecordResult], None] | None = None) -> Report:
    """Run the property on every record of the project at ``project_path`` (its folder
    or project file, or a loaded project; ``None``: the current folder's project)."""
    proj = (project_path if isinstance(project_path, project_mod.Project)
            else project_mod.resolve(project_path))
    report = Report()
    for builder in project_builders(proj):
        if family is not None and builder.family.name != family:
            continue
        for rec in builder.family.records:
            kinds = ("valid", "near") if near else ("valid",)
            for kind in kinds:
                # a near failure is described by its change: shrinking it only costs time
                r = run_record(builder, rec, max_examples=max_examples, kind=kind,
                               shrink=kind == "valid")
                report.results.append(r)
                if progress is not None:
                    progress(r)
    return report
