"""Shared test helpers."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def load_cases(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / "cases" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def htt_cases():
    return load_cases("htt_cases").cases()


def build_module(yaml_text: str, tmp_path: Path, name: str = "t"):
    """Generate a module from schema text (not shipped) and import it."""
    import importlib.util as iu

    from bytewright.generator import pipeline

    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml_text)
    result = pipeline.run([path])
    assert not result.problems, [str(p) for p in result.problems]
    (text,) = result.modules.values()
    out = tmp_path / f"gen_{name}.py"
    out.write_text(text)
    spec = iu.spec_from_file_location(f"gen_{name}", out)
    mod = iu.module_from_spec(spec)
    import sys
    sys.modules[spec.name] = mod  # dataclasses look their module up while being built
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def schema_module(tmp_path):
    return lambda text, name="t": build_module(text, tmp_path, name)


# Whole-file helpers the store tests share (kept here, not in each test module).
def read(path) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def write(path, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)
