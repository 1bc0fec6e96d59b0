"""Emitter hooks for framed fields (``framing:``): the runtime spec constant shared by
both codec paths, and the lines each path calls (``bytewright.runtime.framing``)."""

from __future__ import annotations

import ast
from typing import Any

from . import ir
from .model import camel, enum_class

IMPORT = "from bytewright.runtime import framing as _framing"


def spec(fast: Any, f: ir.Field) -> str:
    """The fast path's module constant describing ``f``'s framing (made once)."""
    if IMPORT not in fast.consts:
        fast.consts.append(IMPORT)
    return fast.const("FR", spec_source(f))


def construct_spec(rec: ir.Record, f: ir.Field) -> str:
    """The Construct path's own constant for ``f``'s framing (its converters differ)."""
    return f"_CFR_{rec.name}_{f.name}"


def spec_source(f: ir.Field) -> str:
    """``bytewright.runtime.framing.Spec`` of ``f``, as source."""
    fr = f.framing
    parts = [f"piece={fr.piece!r}", f"fragment={camel(fr.fragment)}",
             f"after_piece={fr.after_piece}"]
    if fr.block_size is not None:
        kinds = tuple(v for _, v in fr.kinds)
        parts += [f"block_size={fr.block_size}", f"tail={fr.tail!r}", f"kind={fr.kind!r}",
                  f"kinds={kinds!r}", f"header={fr.header}"]
        if fr.kind_enum is not None:
            parts.append(f"kind_cls={enum_class(fr.kind_enum)}")
    else:
        cont = fr.continued.render(lambda n: f"_f.{n}")
        parts += [f"lacing={fr.lacing!r}", f"continued=lambda _f: {cont}"]
        where = attribute_path(fr.continued.tree)
        if where is not None:  # a stored flag: encode sets it from the packets
            parts.append(f"continued_at={where!r}")
    return f"_framing.Spec({', '.join(parts)})"


def attribute_path(tree: ast.expr) -> tuple[str, ...] | None:
    """``('header_type', 'continued')`` for ``header_type.continued`` (a name or a chain
    of attributes), else None (an expression encode can only check)."""
    names: list[str] = []
    while isinstance(tree, ast.Attribute):
        names.insert(0, tree.attr)
        tree = tree.value
    if not isinstance(tree, ast.Name):
        return None
    return (tree.id, *names)


def decode_lines(fast: Any, f: ir.Field) -> list[str]:
    """Fast path: the field's records read through the fragment's and the logical
    record's checked decoders; errors get the field's name."""
    return ["try:",
            f"    f_{f.name}, pos = _framing.fast_decode({spec(fast, f)}, mv, pos, end, "
            f"_d_{f.framing.fragment}, _d_{f.type.target})",
            "except DecodeError as _exc:",
            f"    raise _exc.prefixed({f.name!r}) from None"]


def encode_lines(fast: Any, f: ir.Field, val: str) -> list[str]:
    """Fast path: the records written framed, through the generated encoders."""
    return [f"_framing.fast_encode({spec(fast, f)}, out, {val}, _e_{f.framing.fragment}, "
            f"_e_{f.type.target})"]


def construct_prelude(rec: ir.Record) -> list[str]:
    """Lines before ``C_<rec>``: the Construct path's spec of each framed field."""
    out = []
    for f in rec.fields:
        if f.framing is not None:
            out += [IMPORT, f"{construct_spec(rec, f)} = {spec_source(f)}"]
    return out


def construct_member(rec: ir.Record, f: ir.Field) -> str:
    """Construct path: the adapter over the fragment's and the record's definitions."""
    return (f"_framing.Framed(C_{f.framing.fragment}, C_{f.type.target}, "
            f"{construct_spec(rec, f)}, {f.name!r})")


def construct_bindings(rec: ir.Record) -> list[str]:
    """The Construct path's converters, handed to the specs once they exist (looked up
    when called, so the order the converters are defined in does not matter)."""
    out = []
    for f in rec.fields:
        if f.framing is not None:
            out += _bindings(construct_spec(rec, f), f)
    return out


def _bindings(name: str, f: ir.Field) -> list[str]:
    frag, item = f.framing.fragment, f.type.target
    return [f"{name}.frag_from_construct = lambda c: _c2m_{frag}(c)",
            f"{name}.frag_to_construct = lambda v: _m2c_{frag}(v)",
            f"{name}.item_from_construct = lambda c: _c2m_{item}(c)"]


def m2c_value(f: ir.Field, val: str) -> str:
    """Construct path, model -> Container: the records converted, the fragments (kept
    pages) handed on as model objects."""
    return (f"None if {val} is None else _framing.FramedList([_m2c_{f.type.target}(_x) "
            f"for _x in {val}], getattr({val}, 'fragments', None))")
