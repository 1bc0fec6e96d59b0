"""docs/tutorial.md is a test: its commands run in order in an empty folder and print what
the page shows.

Conventions of the page (stated in its own opening comment):
- a ```console block holds commands (lines starting with ``$ ``), each followed by the
  output it prints (stdout and stderr as a terminal shows them). ``...`` alone on a line
  stands for any lines, ``...`` inside a line for any text; ``/home/me`` is the folder the
  commands run in. Every command must exit 0, except the last of a ```console exit=N block,
  which must exit N. ```console install blocks are shown, not run: the environment running
  this test already has bytewright installed, and ``bytewright`` and ``python`` resolve to
  its venv;
- a fenced block after ``<!-- file: PATH -->`` is the whole content of PATH;
- a ```diff block after ``<!-- patch: PATH -->`` is a change to PATH: each ``@@`` hunk's
  context and ``-`` lines must occur exactly once, and become its context and ``+`` lines.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = ROOT / "docs" / "tutorial.md"
SHOWN_HOME = "/home/me"
DIRECTIVE = re.compile(r"^<!-- (file|patch): (\S+) -->$")
FENCE = re.compile(r"^```(\S*)\s*(.*)$")


@dataclass
class Command:
    line: int  # of the page, for messages
    text: str
    output: list[str] = field(default_factory=list)
    exit: int = 0


@dataclass
class Step:
    kind: str  # console | file | patch
    line: int
    path: str = ""
    body: str = ""
    commands: list[Command] = field(default_factory=list)


def parse(text: str) -> list[Step]:
    """The page's runnable steps, in order."""
    steps: list[Step] = []
    lines = text.splitlines()
    pending: tuple[str, str] | None = None
    i = 0
    while i < len(lines):
        m = DIRECTIVE.match(lines[i].strip())
        if m:
            pending = (m.group(1), m.group(2))
            i += 1
            continue
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        lang, info = fence.group(1), fence.group(2).split()
        start = i + 1
        i = start
        while not lines[i].startswith("```"):
            i += 1
        body = lines[start:i]
        i += 1
        if pending is not None:
            kind, path = pending
            pending = None
            assert kind == "file" or lang == "diff", f"tutorial.md:{start}: a patch is a diff block"
            steps.append(Step(kind, start, path=path, body="\n".join(body) + "\n"))
        elif lang == "console" and "install" not in info:
            step = Step("console", start)
            for n, ln in enumerate(body, start + 1):
                if ln.startswith("$ "):
                    step.commands.append(Command(n, ln[2:]))
                else:
                    assert step.commands, f"tutorial.md:{n}: output before any command"
                    step.commands[-1].output.append(ln)
            exits = [int(w[5:]) for w in info if w.startswith("exit=")]
            if exits:
                step.commands[-1].exit = exits[0]
            steps.append(step)
    return steps


def apply_patch(path: Path, diff: str) -> None:
    text = path.read_text(encoding="utf-8")
    hunks = re.split(r"^@@.*\n", diff, flags=re.M)
    for hunk in (h for h in hunks if h.strip()):
        old, new = [], []
        for ln in hunk.splitlines():
            mark, rest = ln[:1], ln[1:]
            if mark in (" ", "-"):
                old.append(rest)
            if mark in (" ", "+"):
                new.append(rest)
        before = "\n".join(old) + "\n"
        assert text.count(before) == 1, f"{path.name}: the patch's lines occur " \
                                        f"{text.count(before)} times:\n{before}"
        text = text.replace(before, "\n".join(new) + "\n")
    path.write_text(text, encoding="utf-8")


def matches(expected: list[str], actual: list[str]) -> bool:
    parts = []
    for ln in expected:
        ln = ln.rstrip()
        if ln == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*?".join(re.escape(p) for p in ln.split("...")) + r"\n")
    text = "".join(a + "\n" for a in actual)
    return re.fullmatch("".join(parts), text) is not None


def environment(home: Path) -> dict[str, str]:
    venv_bin = Path(sys.executable).parent  # the venv that runs the tests has bytewright
    assert (venv_bin / "bytewright").is_file(), f"no bytewright entry point in {venv_bin}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PYTHON"))}
    env.update({
        "PATH": f"{venv_bin}{os.pathsep}{env.get('PATH', '')}",
        "HOME": str(home),  # no user's git config, and ~ is the shown /home/me
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "me", "GIT_AUTHOR_EMAIL": "me@example.org",
        "GIT_COMMITTER_NAME": "me", "GIT_COMMITTER_EMAIL": "me@example.org",
        "COLUMNS": "200",
    })
    return env


def run_command(cmd: Command, cwd: Path, home: Path, env: dict[str, str]) -> Path:
    """Run one command; return the folder it leaves the shell in (``cd`` carries over)."""
    where = home / ".cwd"
    script = f"{cmd.text}\n__rc=$?\npwd > {where}\nexit $__rc\n"
    proc = subprocess.run(["bash", "-c", script], cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=120)
    out = proc.stdout.replace(str(home), SHOWN_HOME)
    actual = [ln.rstrip() for ln in out.splitlines()]
    while actual and not actual[-1]:
        actual.pop()
    shown = "\n".join(cmd.output)
    assert proc.returncode == cmd.exit, (
        f"tutorial.md:{cmd.line}: `{cmd.text}` exited {proc.returncode}, the page expects "
        f"{cmd.exit}; it printed:\n{out}")
    assert matches(cmd.output, actual), (
        f"tutorial.md:{cmd.line}: `{cmd.text}` printed\n{chr(10).join(actual)}\n"
        f"--- but the page shows ---\n{shown}")
    return Path(where.read_text().strip().replace(SHOWN_HOME, str(home)))


def test_the_tutorial_runs_as_written(tmp_path):
    home = tmp_path.resolve()
    env = environment(home)
    cwd = home
    steps = parse(TUTORIAL.read_text(encoding="utf-8"))
    assert sum(len(s.commands) for s in steps) >= 10, "the page lost its commands"
    for step in steps:
        if step.kind == "console":
            for cmd in step.commands:
                cwd = run_command(cmd, cwd, home, env)
        elif step.kind == "file":
            (cwd / step.path).parent.mkdir(parents=True, exist_ok=True)
            (cwd / step.path).write_text(step.body, encoding="utf-8")
        else:
            apply_patch(cwd / step.path, step.body)


def test_the_parser_reads_the_conventions():
    page = "\n".join([
        "```console install", "$ pip install x", "```",
        "<!-- file: a.txt -->", "```yaml", "k: v", "```",
        "```python", "print(1)", "```",
        "```console exit=1", "$ true", "$ false", "out", "...", "```",
    ])
    steps = parse(page)
    assert [s.kind for s in steps] == ["file", "console"]
    assert steps[0].path == "a.txt" and steps[0].body == "k: v\n"
    first, last = steps[1].commands
    assert (first.text, first.exit, last.text, last.exit) == ("true", 0, "false", 1)
    assert last.output == ["out", "..."]
    assert matches(["a", "...", "z ... end"], ["a", "b", "c", "z 12 end"])
    assert matches(["a", "..."], ["a"]) and not matches(["a"], ["a", "b"])


def test_the_patch_must_match_once(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("a\nb\nc\n")
    apply_patch(f, "@@\n a\n-b\n+B\n")
    assert f.read_text() == "a\nB\nc\n"
    with pytest.raises(AssertionError):
        apply_patch(f, "@@\n-x\n+y\n")


@pytest.mark.parametrize("page", ["docs/tutorial.md", "README.md"])
def test_install_is_from_a_clone_never_a_package_index(page):
    """bytewright is not published on a package index: the pages install from a clone."""
    text = (ROOT / page).read_text(encoding="utf-8")
    assert not re.search(r"pip install (-\S+ )*bytewright\b(?![\w/.-])", text)
    assert "pypi.org" not in text
