"""runtime/cut.py: the one place a file is shortened, and what it keeps."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from bytewright.runtime import cut

ROOT = Path(__file__).resolve().parents[1]


def _file(tmp_path, data: bytes) -> tuple[str, int]:
    p = tmp_path / "f.log"
    p.write_bytes(data)
    return str(p), os.open(p, os.O_RDWR)


def test_cut_keeps_every_removed_byte_before_truncating(tmp_path):
    p, fd = _file(tmp_path, b"A" * 100 + b"B" * 50)
    try:
        c = cut.cut(p, fd, 100, reason="torn tail")
    finally:
        os.close(fd)
    assert Path(p).read_bytes() == b"A" * 100
    assert c.length == 50 and c.offset == 100 and c.reason == "torn tail"
    assert c.side == f"{p}.discarded-100"
    assert Path(c.side).read_bytes() == b"B" * 50
    assert cut.side_files(p) == [c.side]


def test_cut_reads_from_the_data_the_caller_holds(tmp_path):
    data = b"0123456789"
    p, fd = _file(tmp_path, data)
    try:
        c = cut.cut(p, fd, 4, reason="x", data=memoryview(data))
    finally:
        os.close(fd)
    assert Path(c.side).read_bytes() == b"456789"


def test_cut_at_the_end_removes_nothing_and_keeps_no_file(tmp_path):
    p, fd = _file(tmp_path, b"abc")
    try:
        c = cut.cut(p, fd, 3, reason="clean")
    finally:
        os.close(fd)
    assert c.side is None and c.length == 0 and cut.side_files(p) == []


def test_cut_outside_the_file_is_refused(tmp_path):
    p, fd = _file(tmp_path, b"abc")
    try:
        with pytest.raises(ValueError):
            cut.cut(p, fd, 4, reason="x")
    finally:
        os.close(fd)
    assert Path(p).read_bytes() == b"abc"


def test_a_second_cut_at_the_same_offset_never_overwrites_the_first(tmp_path):
    p, fd = _file(tmp_path, b"head" + b"one")
    try:
        first = cut.cut(p, fd, 4, reason="x")
        os.pwrite(fd, b"two!", 4)
        second = cut.cut(p, fd, 4, reason="x")
    finally:
        os.close(fd)
    assert first.side != second.side
    assert Path(first.side).read_bytes() == b"one"
    assert Path(second.side).read_bytes() == b"two!"
    assert cut.side_files(p) == sorted([first.side, second.side])


def test_keeping_the_same_bytes_twice_reuses_the_side_file(tmp_path):
    # a crash between keeping and cutting, then the same cut again: one side file
    p = str(tmp_path / "f")
    a = cut.keep(p, b"xyz", 7)
    b = cut.keep(p, b"xyz", 7)
    assert a == b and Path(a).read_bytes() == b"xyz"


def test_a_crash_between_keeping_and_truncating_leaves_the_file_whole(tmp_path):
    class Crash(Exception):
        pass

    class Steps:
        def ftruncate(self, fd, size):
            raise Crash

        def fsync(self, fd):
            os.fsync(fd)

    p, fd = _file(tmp_path, b"keep" + b"tail")
    try:
        with pytest.raises(Crash):
            cut.cut(p, fd, 4, reason="x", io=Steps())
    finally:
        os.close(fd)
    assert Path(p).read_bytes() == b"keeptail"
    assert Path(f"{p}.discarded-4").read_bytes() == b"tail"


def test_keep_overwritten_uses_its_own_label(tmp_path):
    p = str(tmp_path / "f")
    c = cut.keep_overwritten(p, b"old header", 0, reason="damaged header slot")
    assert c.side == f"{p}.overwritten-0"
    assert Path(c.side).read_bytes() == b"old header"
    assert cut.side_files(p) == [c.side]


def test_grow_extends_and_refuses_to_shorten(tmp_path):
    p, fd = _file(tmp_path, b"abc")
    try:
        cut.grow(fd, 10)
        assert os.fstat(fd).st_size == 10
        with pytest.raises(ValueError):
            cut.grow(fd, 2)
        assert os.fstat(fd).st_size == 10
    finally:
        os.close(fd)


def _truncating_calls(path: Path) -> list[int]:
    """Lines of ``path`` that call ``ftruncate`` or ``.truncate(`` (a shortening write),
    other than inside a method named ``ftruncate``: a write-step object's own step, which
    ``cut(io=...)`` calls after keeping the bytes."""
    tree = ast.parse(path.read_text(), str(path))
    lines = []

    def visit(node: ast.AST, inside_step: bool) -> None:
        for child in ast.iter_child_nodes(node):
            step = inside_step or (isinstance(child, ast.FunctionDef) and child.name == "ftruncate")
            if isinstance(child, ast.Call) and not step:
                f = child.func
                name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                if name in {"ftruncate", "truncate"}:
                    lines.append(child.lineno)
            visit(child, step)

    visit(tree, False)
    return lines


def test_no_module_but_cut_truncates_a_file():
    offenders = []
    for folder in ("runtime", "cli", "generator"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == ROOT / "runtime" / "cut.py":
                continue
            for line in _truncating_calls(path):
                offenders.append(f"{path.relative_to(ROOT)}:{line}")
    assert offenders == [], "truncate only through bytewright.runtime.cut: " + ", ".join(offenders)


def test_a_side_file_appears_whole_or_not_at_all(tmp_path, monkeypatch):
    p = str(tmp_path / "f")
    real_fsync = os.fsync

    def failing_fsync(fd):
        raise OSError(5, "EIO")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError):
        cut.keep(p, b"bytes", 3)
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert cut.side_files(p) == []
    assert os.listdir(tmp_path) == []


def test_format_info_verbs_list_the_side_files(tmp_path):
    """After a repair cut, `info` names the side file that holds the removed bytes."""
    import subprocess
    import sys

    from bytewright.runtime.ze.files import WalAppender

    p = tmp_path / "w.wal"
    app = WalAppender(p)
    app.append(1, b"x" * 10)
    app.append(1, b"y" * 10)
    os.close(app.fd)
    data = p.read_bytes()
    p.write_bytes(data[:-5])  # a torn tail
    bw = [sys.executable, "-m", "bytewright"]
    subprocess.run(bw + ["ze", "repair", str(p)], check=True, capture_output=True)
    sides = cut.side_files(p)
    assert len(sides) == 1
    out = subprocess.run(bw + ["ze", "info", str(p)], capture_output=True, text=True).stdout
    assert sides[0] in out and f"({os.path.getsize(sides[0])} bytes)" in out
