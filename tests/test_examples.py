"""The example user projects under examples/ stay green: each one's `bytewright check`
(no drift, every fixture through both codec paths) and its own tests, run as a user
would run them, in the example's folder and through the installed CLI."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NAMES = sorted(p.name for p in EXAMPLES.iterdir() if (p / "bytewright.toml").is_file())


def _bytewright() -> str:
    return shutil.which("bytewright") or str(Path(sys.executable).with_name("bytewright"))


def test_there_are_at_least_three_examples():
    assert len(NAMES) >= 3, NAMES


@pytest.mark.parametrize("name", NAMES)
def test_example_check_is_green(name):
    r = subprocess.run([_bytewright(), "check"], cwd=EXAMPLES / name, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert " 0 failed" in r.stdout and f"project: {EXAMPLES / name}" in r.stdout + r.stderr


@pytest.mark.parametrize("name", NAMES)
def test_example_own_tests_pass(name):
    # "-n 0": the example's few tests in one process (the repository's pytest settings,
    # found from the example's folder, ask for worker processes)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-n", "0", "tests"], cwd=EXAMPLES / name, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert " passed" in r.stdout and "failed" not in r.stdout
