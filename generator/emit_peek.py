"""Code for lookahead fields (``peek: true``) and for repeats chained by a decoded
value (``chain:`` naming a model field of the item), on both codec paths.

A lookahead reads an integer where the decoder stands without moving it; the encoder
writes nothing for it, and a later field whose ``if:`` reads it is present on encode
exactly when the model holds a value for it (see ``peek_check``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from . import ir
from .expr import parse
from .fast.base import Item
from .peek_check import peeked

# The emitters call in here and pass themselves; typed loosely so that this module does
# not import the emitters that import it.
FastEmitter = Any  # generator.fast.emitter.FastEmitter
ConstructEmitter = Any  # generator.emit_construct.ConstructEmitter

__all__ = ["construct_chain", "construct_member", "construct_prelude", "decode_lines",
           "peeked"]

IMPORT = ("from bytewright.runtime.peek import ChainedValues as _ChainedValues, "
          "Peek as _Peek, chain_models as _chain_models")


def decode_lines(em: FastEmitter, rec: ir.Record, f: ir.Field) -> list[str]:
    """Fast path: read ``f`` at ``pos`` into ``f_<name>``; ``pos`` stays where it is.

    The bound test is written ``end < pos + n`` so the optimistic twin keeps it: its
    dropped bound tests rely on ``pos`` moving past ``end``, which a lookahead never does.
    """
    code, size, endian = em.scalar_code(f.type)
    st = em.const("S", f"struct.Struct({('<' if endian == 'le' else '>') + code!r})")
    out = [f"if end < pos + {size}:",
           f"    raise TruncatedError('field truncated', offset=pos, path={f.name!r}, "
           f"expected={size}, found=end - pos)",
           f"f_{f.name} = {st}.unpack_from(mv, pos)[0]"]
    return out + em.post_scalar(rec, f, Item(f, "value", code, size, f"f_{f.name}"), "pos")


def construct_member(ce: ConstructEmitter, f: ir.Field, base: str) -> str:
    """Construct path: the field's construct, read without consuming, never built."""
    return f"_Peek({base}, {ce.fast.scalar_code(f.type)[1]})"


def construct_chain(ce: ConstructEmitter, f: ir.Field, rec: ir.Record) -> str:
    """Construct path: a repeat whose items get the previous item's decoded ``from``."""
    args = tuple(a for a in f.type.args if a[0] != f.chain.param) + (
        (f.chain.param, parse("_chain")),)
    elem = ce.with_params(f.type.target, args, rec, f.type.order)
    count = ce.lam(f.repeat.count, rec) if f.repeat.count is not None else "None"
    stop = ", stop_on_error=True" if getattr(f.repeat, "stop_on_error", False) else ""
    callee = ce.family.records[f.type.target]
    virtual = next((v for v in callee.virtuals if v.name == f.chain.source), None)
    compute = "None"
    if virtual is not None:  # computed from the item's members and the param it was given
        body = virtual.value.render(
            lambda n: "_p" if n == f.chain.param else f"_c[{n!r}]")
        compute = f"lambda _c, _p: {body}"
    return (f"_ChainedValues({elem}, {count}, {ce.lam(f.chain.first, rec)}, "
            f"{f.chain.source!r}, {compute}, {max(ce.fast.type_min(f.type), 1)}{stop})")


def c2m_chain(ce: ConstructEmitter, f: ir.Field, rec: ir.Record, res) -> str:
    """Container items -> models, each converted with the param its item was parsed with
    (the previous model's ``from``), as the fast decoder passes it."""
    args = tuple(a for a in f.type.args if a[0] != f.chain.param) + (
        (f.chain.param, parse("_chain")),)
    item = ce.conv(f, dataclasses.replace(f.type, args=args), "_x", rec,
                   lambda n: "_p" if n == "_chain" else res(n))
    conv = (f"_chain_models(f_{f.name}, {f.chain.first.render(res)}, "
            f"lambda _x, _p: {item}, {f.chain.source!r})")
    if f.repeat.stop_on_error:  # keep why the log ended
        conv = f"_LogList({conv}, f_{f.name}.stop)"
    return conv


def construct_prelude(rec: ir.Record) -> list[str]:
    """The runtime import, for a record that uses either construct."""
    uses = any(f.peek or (f.chain is not None and f.chain.decoded) for f in rec.fields)
    return [IMPORT] if uses else []

