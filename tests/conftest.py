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
