"""Regression tests for codec and CLI defects: each test fails on the code that had the
defect. Small schemas are generated through the CLI into ``tmp_path``, as a user would;
both codec paths are held to the same bytes and the same errors (class, path, offset).
"""

from __future__ import annotations

import importlib.util
import re
import struct
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from bytewright.cli.main import main
from bytewright.runtime import errors as E

BW = str(Path(sys.executable).with_name("bytewright"))


def generate(root: Path, name: str, text: str) -> subprocess.CompletedProcess:
    src = root / f"{name}.yaml"
    src.write_text(f"bytewright: 1\nfamily: {name}\n" + textwrap.dedent(text))
    out = root / name
    out.mkdir(exist_ok=True)
    return subprocess.run([BW, "generate", str(src), "-o", str(out)], cwd=root,
                          capture_output=True, text=True, timeout=180)


def load(tmp_path: Path, text: str, name: str = "t"):
    run = generate(tmp_path, name, text)
    assert run.returncode == 0, run.stderr
    spec = importlib.util.spec_from_file_location(f"bugs_{name}_{uuid.uuid4().hex[:8]}",
                                                  tmp_path / name / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def encoders(m, rec: str):
    """The fast encoder, the Construct encoder, and the compiled Construct encoder."""
    con = getattr(m, f"construct_encode_{rec}")
    return (("fast", getattr(m, f"encode_{rec}")), ("construct", con),
            ("compiled", lambda v, **p: con(v, compiled=True, **p)))


def decoders(m, rec: str):
    con = getattr(m, f"construct_decode_{rec}")
    return (("fast", lambda d, **p: getattr(m, f"decode_{rec}")(d, **p)[0]),
            ("construct", con), ("compiled", lambda d, **p: con(d, compiled=True, **p)))


def round_trip(m, rec: str, value, expected: bytes, **params) -> None:
    """Every encoder writes ``expected``; every decoder reads it back as ``value``."""
    for name, enc in encoders(m, rec):
        assert enc(value, **params) == expected, name
    for name, dec in decoders(m, rec):
        assert dec(expected, **params) == value, name


def encode_refused(m, rec: str, value, **params) -> list[str | None]:
    """Every encoder raises EncodeError (never writes bytes); the paths it names."""
    got = []
    for name, enc in encoders(m, rec):
        try:
            data = enc(value, **params)
        except E.EncodeError as exc:
            got.append(exc.path)
            continue
        pytest.fail(f"{name} encoder wrote {data.hex()} for {value!r}")
    return got


def decode_errors(m, rec: str, data: bytes, **params) -> list[tuple]:
    out = []
    for name, dec in decoders(m, rec):
        with pytest.raises(E.DecodeError) as info:
            dec(data, **params)
        out.append((name, type(info.value).__name__, info.value.path, info.value.offset))
    return out


# -- 1. generate failed with an internal error -----------------------------------------------

def test_reserved_zero_bytes_to_the_end_generate_and_round_trip(tmp_path):
    run = generate(tmp_path, "eosres", """
        records:
          rec:
            fields:
              - {name: a, type: u8}
              - {name: trailer, type: bytes, size: eos, reserved: zero}
        """)
    assert run.returncode == 0, run.stderr
    m = load(tmp_path, (tmp_path / "eosres.yaml").read_text().split("\n", 2)[2], "eosres")
    round_trip(m, "rec", m.Rec(a=5), b"\x05")
    for name, dec in decoders(m, "rec"):
        assert dec(b"\x05\x00\x00\x00") == m.Rec(a=5), name
    assert [e[1:] for e in decode_errors(m, "rec", b"\x05\x00\x01")] == \
        [("ConstraintError", "rec.trailer", 1)] * 3


# -- 2. a zigzag size read under its own field's condition ----------------------------------

ZZ = """
records:
  rec:
    fields:
      - {name: n, type: zigzag}
      - {name: data, type: bytes, size: n, if: "n >= 0"}
"""


def test_zigzag_size_under_a_condition_encodes(tmp_path):
    m = load(tmp_path, ZZ, "zz")
    # n = 3 derived from the data, zigzag(3) = 6
    round_trip(m, "rec", m.Rec(data=b"abc"), b"\x06abc")
    round_trip(m, "rec", m.Rec(data=b""), b"\x00")
    # n = -1 (zigzag 1) reads as absent
    for name, dec in decoders(m, "rec"):
        assert dec(b"\x01") == m.Rec(data=None), name


# -- 3. a str sized by an earlier field -----------------------------------------------------

STRSIZE = """
records:
  adjacent:
    fields:
      - {name: n, type: u16}
      - {name: name, type: str, size: n}
  apart:
    fields:
      - {name: n, type: u16}
      - {name: m, type: u16}
      - {name: name, type: str, size: n}
      - {name: extra, type: bytes, size: m}
"""


def test_str_sized_by_an_earlier_field_encodes_on_both_paths(tmp_path):
    m = load(tmp_path, STRSIZE, "strsize")
    round_trip(m, "adjacent", m.Adjacent(name="abc"), struct.pack("<H", 3) + b"abc")
    round_trip(m, "apart", m.Apart(name="h\u00e9", extra=b"xy"),
               struct.pack("<HH", 3, 2) + "h\u00e9".encode() + b"xy")


# -- 4. a list sized by an expression: never written to be misread --------------------------

PSIZE = """
records:
  rec:
    params: {n: {type: int}}
    fields:
      - {name: items, type: u8, repeat: eos, size: "n - 1"}
      - {name: tail, type: u8}
"""

REM = """
records:
  a_file:
    fields:
      - {name: blocks, type: blk, repeat: eos}
  blk:
    fields:
      - {name: content, type: inner, size: "min(4, _remaining)"}
  inner:
    fields:
      - {name: items, type: u8, repeat: eos}
"""


def test_list_sized_by_a_parameter_expression(tmp_path):
    m = load(tmp_path, PSIZE, "psize")
    round_trip(m, "rec", m.Rec(items=[1], tail=9), b"\x01\x09", n=2)
    round_trip(m, "rec", m.Rec(items=[1, 2], tail=9), b"\x01\x02\x09", n=3)
    # 3 items where the size says 1 byte: 01020309 would read back as items=[1]
    assert encode_refused(m, "rec", m.Rec(items=[1, 2, 3], tail=9), n=2)[:2] == \
        ["rec.items"] * 2
    # too few items: padding would read as items
    encode_refused(m, "rec", m.Rec(items=[], tail=9), n=3)


def test_list_sized_by_bytes_remaining(tmp_path):
    m = load(tmp_path, REM, "rem")
    fine = m.AFile(blocks=[m.Blk(content=m.Inner(items=[1, 2, 3, 4])),
                           m.Blk(content=m.Inner(items=[5, 6]))])
    round_trip(m, "a_file", fine, bytes([1, 2, 3, 4, 5, 6]))
    # 5 items in a block of at most 4 bytes would read back as two blocks
    lie = m.AFile(blocks=[m.Blk(content=m.Inner(items=[1, 2, 3, 4, 5])),
                          m.Blk(content=m.Inner(items=[6]))])
    encode_refused(m, "a_file", lie)


# -- 5, 6. one decode error contract -------------------------------------------------------

NEGCK = """
records:
  neg:
    fields:
      - {name: head, type: u8}
      - {name: items, type: u16, repeat: {prefix: zigzag}}
  sneg:
    fields:
      - {name: items, type: u16, repeat: {prefix: sleb128}}
  compif:
    params: {flag: {type: int, default: 1}}
    fields:
      - {name: a, type: u32}
      - {name: body, type: bytes, size: 4, compressed: {algorithm: deflate}}
      - {name: chk, type: u32, if: "flag == 1", checksum: {algorithm: crc32, covers: [body]}}
      - {name: tail, type: u32}
"""


def test_negative_zigzag_count_is_one_constraint_error(tmp_path):
    m = load(tmp_path, NEGCK, "negck")
    # zigzag 0x03 = -2 items (the fast path said "needs at least -4 bytes")
    got = decode_errors(m, "neg", b"\x07\x03\x00\x00\x00\x00")
    assert [g[1] for g in got] == ["ConstraintError"] * 3
    assert len({g[2:] for g in got}) == 1, got
    assert got[0][2] == "neg.items"
    assert got[0][3] == 2  # where the items would start, after the count
    for name, dec in decoders(m, "neg"):
        with pytest.raises(E.ConstraintError) as info:
            dec(b"\x07\x03\x00\x00\x00\x00")
        assert info.value.message == "negative count -2", name
    # a signed LEB128 count too (0x7f = -1)
    got = decode_errors(m, "sneg", b"\x7f\x00\x00")
    assert [g[1:] for g in got] == [("ConstraintError", "sneg.items", 1)] * 3


def test_checksum_under_a_condition_reports_its_start_offset(tmp_path):
    import zlib

    m = load(tmp_path, NEGCK, "negck")
    data = bytearray(m.encode_compif(m.Compif(a=1, body=b"abcd", tail=2)))
    at = len(data) - 8  # chk then tail, 4 bytes each
    assert struct.unpack_from("<I", data, at)[0] == zlib.crc32(b"abcd")
    data[at] ^= 1
    got = decode_errors(m, "compif", bytes(data))
    assert [g[1:] for g in got] == [("ChecksumError", "compif.chk", at)] * 3


# -- 7, 8. Construct-path messages and paths -----------------------------------------------

RULES = """
enums:
  kind: {type: u8, values: {A: 1, B: 2}}
records:
  edge:
    fields:
      - {name: head, type: bytes, size: 2}
      - {name: lo, type: u8}
      - {name: hi, type: u8, assert: [{check: "hi > lo", message: "hi must exceed lo"}]}
  item:
    fields:
      - {name: x, type: kind}
      - {name: y, type: u16}
  rec:
    fields:
      - {name: edges, type: edge, repeat: {prefix: u8}}
      - {name: items, type: item, repeat: {prefix: u8}}
      - {name: kinds, type: kind, repeat: {prefix: u8}}
"""


def test_assert_failures_keep_message_and_path(tmp_path):
    m = load(tmp_path, RULES, "rules")
    good = m.Rec(edges=[m.Edge(head=b"ab", lo=1, hi=2)] * 2, items=[], kinds=[])
    data = m.encode_rec(good)
    assert data == b"\x02" + b"ab\x01\x02" * 2 + b"\x00\x00"
    bad = bytearray(data)
    bad[1 + 4 + 3] = 1  # edge 1: hi == lo
    for name, dec in decoders(m, "rec"):
        with pytest.raises(E.ConstraintError) as info:
            dec(bytes(bad))
        assert "hi must exceed lo" in str(info.value), (name, str(info.value))
        assert info.value.path == "rec.edges[1].hi", (name, info.value.path)
        assert info.value.offset == 8, (name, info.value.offset)
    # the rule is held on encode too, at the same place
    broken = m.Rec(edges=[m.Edge(head=b"ab", lo=1, hi=2), m.Edge(head=b"ab", lo=3, hi=3)],
                   items=[], kinds=[])
    assert encode_refused(m, "rec", broken) == ["rec.edges[1].hi"] * 3


@pytest.mark.parametrize("change, path", [
    ({"items": [("A", 1), ("A", 70000)]}, "rec.items[1].y"),
    ({"items": [("A", 1), ("A", 1), (3, 1)]}, "rec.items[2].x"),
    ({"kinds": ["A", 7]}, "rec.kinds[1]"),
    ({"edges": [("ab", 1, 2), ("abc", 1, 2)]}, "rec.edges[1].head"),
])
def test_encode_errors_name_list_indices(tmp_path, change, path):
    m = load(tmp_path, RULES, "rules")

    def kind(k):
        return getattr(m.Kind, k) if isinstance(k, str) else k

    v = {"edges": [], "items": [], "kinds": []}
    v["items"] = [m.Item(x=kind(x), y=y) for x, y in change.get("items", [])]
    v["kinds"] = [kind(k) for k in change.get("kinds", [])]
    v["edges"] = [m.Edge(head=h.encode(), lo=lo, hi=hi) for h, lo, hi in change.get("edges", [])]
    assert encode_refused(m, "rec", m.Rec(**v)) == [path] * 3


# -- 9. generate removes the modules it generated that no schema produces ----------------------

def _cli(argv, capsys) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_generate_removes_its_orphaned_modules_only(tmp_path, capsys):
    root = tmp_path / "proj"
    assert _cli(["init", str(root), "--family", "notes"], capsys)[0] == 0
    schema = root / "schemas" / "notes.yaml"
    other = root / "schemas" / "extra.yaml"
    other.write_text(schema.read_text().replace("family: notes", "family: extra"))
    assert _cli(["generate", "--project", str(root)], capsys)[0] == 0
    out_dir = root / "generated"
    assert (out_dir / "extra.py").is_file()
    hand = out_dir / "helpers.py"
    hand.write_text("# written by hand\nVALUE = 1\n")
    other.unlink()
    code, out, err = _cli(["generate", "--project", str(root)], capsys)
    assert code == 0, err
    assert not (out_dir / "extra.py").exists()
    assert "extra.py" in out  # said, not done silently
    assert hand.read_text() == "# written by hand\nVALUE = 1\n"
    assert (out_dir / "notes.py").is_file()
    code, out, err = _cli(["check", "--project", str(root)], capsys)
    assert code == 0, err


# -- 10. export ksy loads the project's plug-ins -------------------------------------------------

def test_export_ksy_loads_the_project_plugins(tmp_path, capsys, monkeypatch):
    root = tmp_path / "proj"
    assert _cli(["init", str(root), "--family", "notes"], capsys)[0] == 0
    mod = f"sum16k_{uuid.uuid4().hex[:8]}"
    (root / f"{mod}.py").write_text(
        "def register(reg):\n"
        "    reg.add_checksum('sum16_ksy', bits=16,\n"
        "                     func=lambda data, seed=0: (seed + sum(data)) & 0xFFFF)\n")
    toml = root / "bytewright.toml"
    toml.write_text(toml.read_text().replace("plugins = []", f'plugins = ["{mod}:register"]'))
    schema = root / "schemas" / "notes.yaml"
    text = schema.read_text()
    assert "{name: crc, type: u32, checksum: {algorithm: crc32," in text
    schema.write_text(text.replace("{name: crc, type: u32, checksum: {algorithm: crc32,",
                                   "{name: crc, type: u16, checksum: {algorithm: sum16_ksy,"))
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "ksy"
    code, stdout, err = _cli(["export", "ksy", "--project", str(root), "--out", str(out)],
                             capsys)
    assert code == 0, err
    assert (out / "notes.ksy").is_file() and "wrote" in stdout


# -- 11. inspect tells what it verified and stops where the log stops ----------------------

NOCK = """
records:
  rec:
    fields:
      - {name: a, type: u16}
      - {name: b, type: bytes, size: 2}
"""

LOG = """
records:
  log:
    fields:
      - {name: entries, type: entry, repeat: {eos: true, stop_on_error: true}}
  entry:
    fields:
      - {name: len, type: u8}
      - {name: data, type: bytes, size: len}
      - {name: crc, type: u32, checksum: {algorithm: crc32, covers: [len, data]}}
"""


def _project(tmp_path: Path, family: str, text: str) -> Path:
    root = tmp_path / f"p_{family}"
    (root / "schemas").mkdir(parents=True)
    (root / "schemas" / f"{family}.yaml").write_text(
        f"bytewright: 1\nfamily: {family}\n" + textwrap.dedent(text))
    (root / "bytewright.toml").write_text(f'name = "{family}"\n')
    return root


def test_inspect_claims_no_checksum_a_format_lacks(tmp_path, capsys):
    root = _project(tmp_path, "nock", NOCK)
    assert _cli(["generate", "--project", str(root)], capsys)[0] == 0
    f = tmp_path / "x.bin"
    f.write_bytes(b"\x01\x00ab")
    code, out, err = _cli(["inspect", str(f), "--project", str(root), "--format", "nock",
                           "--record", "rec"], capsys)
    assert code == 0, err
    assert "every checksum verified" not in out, out
    assert out.rstrip().endswith("ok: 1 record(s), no checksum to verify")


def test_inspect_lists_no_entries_past_a_log_stop(tmp_path, capsys):
    import zlib

    root = _project(tmp_path, "logck", LOG)
    assert _cli(["generate", "--project", str(root)], capsys)[0] == 0

    def entry(data: bytes) -> bytes:
        head = bytes([len(data)]) + data
        return head + struct.pack("<I", zlib.crc32(head))

    good = entry(b"abc") + entry(b"de")
    bad = bytearray(entry(b"xyz"))
    bad[-1] ^= 0xFF
    f = tmp_path / "log.bin"
    f.write_bytes(good + bytes(bad) + entry(b"after"))
    code, out, err = _cli(["inspect", str(f), "--project", str(root), "--format", "logck",
                           "--record", "log"], capsys)
    assert code == 0, err  # the decoders accept it: the log ends at the bad entry
    items = [line.split()[-1] for line in out.splitlines()
             if re.fullmatch(r"\s+\d+\s+\d*\s+\[\d+\].*", line)]
    assert items[:3] == ["[0]", "[1]", "ChecksumError]"], out
    assert not any("[3]" in line for line in out.splitlines()), out  # past the stop
    at = len(good)
    assert f"note: log.entries: the log ends at offset {at} (checksum" in out, out
    assert "every checksum verified" not in out, out
    assert "ok: 1 record(s), 2 checksum(s) verified" in out
    # the decoders agree: two entries, the log's end at the same offset
    m = load(tmp_path, LOG, "logck2")
    value = m.decode_log(f.read_bytes())[0]
    assert len(value.entries) == 2 and value.entries.stop.offset == at
    assert value.entries.stop.reason == "checksum"


def test_a_failure_inside_a_measured_field_names_that_field_not_its_size(tmp_path):
    """A size derived on encode builds the sized field ahead to measure it: a bad value in
    it is the sized field's error (``frame.body.n``), never the size's (``body_len.n``)."""
    m = load(tmp_path, """
        endian: le
        records:
          frame:
            fields:
              - {name: body_len, type: uleb128}
              - {name: body, type: inner, size: body_len}
              - {name: parts_len, type: u16}
              - {name: parts, type: inner, repeat: eos, size: parts_len}
          inner:
            fields:
              - {name: n, type: uleb128}
              - {name: text, type: str, length: u8}
        """, "measured")
    ok = m.Inner(n=1, text="a")
    for field, value in (("body", m.Frame(body=m.Inner(n=-1, text="a"), parts=[ok])),
                         ("parts[1]", m.Frame(body=ok, parts=[ok, m.Inner(n=-1, text="a")]))):
        for name, enc in encoders(m, "frame"):
            with pytest.raises(E.EncodeError) as caught:
                enc(value)
            assert caught.value.path == f"frame.{field}.n", (name, caught.value.path)
    for name, enc in encoders(m, "frame"):  # Construct's own text names the reason
        with pytest.raises(E.EncodeError) as caught:
            enc(m.Frame(body=m.Inner(n=1, text=5), parts=[]))
        assert caught.value.path == "frame.body.text", name
        assert "Error in path" not in caught.value.message, name
