"""Emitter for located fields (``at:``): the module block that gives the records holding
them their public decoders and encoders on both codec paths, through
``bytewright.runtime.located``. Records without located fields are emitted unchanged."""

from __future__ import annotations

from . import ir
from .model import camel

IMPORTS = ("from dataclasses import field as _dc_field\n"
           "from bytewright.runtime import located as _located")


def used(family: ir.Family) -> bool:
    return any(r.located for r in family.records.values())


def closure(family: ir.Family) -> list[str]:
    """Records read through the located runtime: holders and what they locate."""
    out: list[str] = []
    todo = [r.name for r in family.records.values() if r.located]
    while todo:
        name = todo.pop(0)
        if name in out:
            continue
        out.append(name)
        todo += [loc.target for loc in family.records[name].located
                 if loc.target != "bytes"]
    return [n for n in family.records if n in out]


def model_extra(rec: ir.Record, family: ir.Family) -> list[dict]:
    """Dataclass attributes of the located fields (after every other one)."""
    out = []
    for loc in rec.located:
        cls = "bytes" if loc.target == "bytes" else camel(loc.target)
        ann = f"list[{cls}]" if loc.how == "each" or loc.count is not None or loc.eos else cls
        out.append({"name": loc.name, "annotation": f"{ann} | None", "default": "None"})
    return out


def item_source(rec: ir.Record, loc: ir.Located) -> str:
    parts = [repr(loc.name), repr(loc.target), repr(loc.how)]
    if loc.where is not None:
        parts.append(f"where=lambda _v: {_render(loc.where)}")
    if loc.base is not None and loc.base in {f.name for f in rec.fields}:
        parts.append("base='_start'")  # a field at a fixed offset: from the record's start
        if loc.base_shift:
            parts.append(f"shift={loc.base_shift}")
    elif loc.base is not None:
        parts.append(f"base={loc.base!r}")
    if loc.how == "find_last":
        parts += [f"signature={loc.signature!r}", f"within={loc.within}"]
    if loc.each is not None:
        parts.append(f"each={loc.each!r}")
    if loc.count is not None:
        parts.append(f"count=lambda _v: {_render(loc.count)}")
    if loc.eos:
        parts.append("eos=True")
    if loc.size is not None:
        parts.append(f"size=lambda _v: {_render(loc.size)}")
    if not loc.lazy:
        parts.append("lazy=False")
    if loc.cond is not None:
        parts.append(f"cond=lambda _v: {_render(loc.cond)}")
    if loc.fills:
        parts.append(f"fills={loc.fills!r}")
    return f"_located.Item({', '.join(parts)})"


_RUNS = ("iter", "decode_many", "decode_prefix", "decode_rows", "encode_many")


def _render(e) -> str:
    return e.render(lambda n: f"_v.{n}")


def block(family: ir.Family) -> str:
    """The module block: Construct readers that say where a record ends, the located
    runtime over both paths' sequential codecs, and the holders' public functions."""
    names = closure(family)
    lines = ["# -- random access (at:): located fields on both codec paths " + "-" * 20, ""]
    for n in names:
        lines += [
            f"def _lc_{n}(buf, offset, compiled):",
            "    _construct()  # the Construct path is built on first use",
            f"    con = _compiled({n!r}) if compiled else C_{n}",
            "    try:",
            "        stream = io.BytesIO(buf if isinstance(buf, bytes) else bytes(buf))",
            "        stream.seek(offset)",
            "        c = con.parse_stream(stream)",
            f"        return _c2m_{n}(c), stream.tell()",
            "    except Exception as exc:  # Construct raises many types; map them all",
            "        if compiled:  # named and placed as the interpreted parser does",
            f"            raise _compiled_failure(_construct_error(exc, {n!r}), "
            f"lambda b, o: _lc_{n}(b, o, False), buf, offset) from None",
            f"        raise _construct_error(exc, {n!r}) from None",
            "",
        ]
    lines.append("_LOCATED = _located.Codecs(")
    lines.append("    {")
    for rec in family.records.values():
        if rec.located:
            items = ", ".join(item_source(rec, loc) for loc in rec.located)
            lines.append(f"        {rec.name!r}: ({items},),")
    lines.append("    },")
    lines.append("    {" + ", ".join(f"{n!r}: (decode_{n}, encode_{n})" for n in names) + "},")
    lines.append("    {" + ", ".join(
        f"{n!r}: (_lc_{n}, lambda v, compiled, _f=construct_encode_{n}: _f(v, compiled=compiled))"
        for n in names) + "},")
    lines.append(")")
    for rec in family.records.values():
        if not rec.located:
            continue
        n, cls = rec.name, camel(rec.name)
        lines += [
            "",
            "",
            f"def decode_{n}(buf, offset: int = 0) -> tuple[{cls}, int]:",
            f'    """Decode one `{n}` at ``offset``: its located fields decode on first use',
            "    (offsets from ``offset``); returns (value, end of its sequential content).\"\"\"",
            f"    return _LOCATED.decode({n!r}, buf, offset)",
            "",
            "",
            f"def encode_{n}(value: {cls}) -> bytes:",
            f'    """Encode one `{n}`: its located structures placed, their offsets, counts',
            '    and sizes filled."""',
            f"    return _LOCATED.encode({n!r}, value)",
            "",
            "",
            f"def construct_decode_{n}(buf, offset: int = 0, *, compiled: bool = False) -> {cls}:",
            '    """Decode through the Construct definitions (the reference path)."""',
            f"    return _LOCATED.decode({n!r}, buf, offset, construct=True, "
            "compiled=compiled)[0]",
            "",
            "",
            f"def construct_encode_{n}(value: {cls}, *, compiled: bool = False) -> bytes:",
            '    """Encode through the Construct definitions (the reference path)."""',
            f"    return _LOCATED.encode({n!r}, value, construct=True, compiled=compiled)",
            "",
            "",
            "# its structures lie anywhere in the buffer: no runs of such records",
            *(f"globals().pop({fn + '_' + n!r}, None)" for fn in _RUNS),
        ]
    return "\n".join(lines)
