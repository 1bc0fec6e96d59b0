"""Walking a record part by part: which records allow it, and the expressions it needs.

A record whose fields are all plain record references (optionally ``if``) or a
``repeat: eos`` of one checks nothing of its own, so decoding its parts one at a time
checks exactly what decoding it whole does, and the items of the repeat need never be held
together. ``bytewright verify`` decodes such a file that way and ``bytewright inspect``
shows it that way, in memory bounded by one item whatever the file's size.
"""

from __future__ import annotations

from typing import Any


def stream_plan(fam: Any, name: str) -> tuple | None:
    """How to walk record ``name`` without holding its items: None unless every field is
    a plain record reference (optionally ``if``) or a ``repeat: eos`` of one, and some
    such repeat is reached. Such a composite record checks nothing of its own, so
    decoding its parts one at a time checks exactly what decoding it whole does.

    A plan is plain data (it crosses to --jobs workers): ``(defaults, fields)`` with
    fields ``(name, mode, target, cond source, ((arg, source), ...), sub-plan)`` and
    mode ``whole`` (decode_<target> once), ``eos`` (items one at a time to the end) or
    ``stream`` (recurse with the sub-plan)."""
    from . import ir

    rec = fam.records.get(name)
    if rec is None or rec.version_from or len(rec.layouts) > 1:
        return None
    fields, streams = [], False
    for f in rec.fields:
        t = f.type
        if not isinstance(t, ir.RefT) or t.kind != "record":
            return None
        if (f.checksum or f.size or f.compressed or f.asserts or f.valid or f.reserved
                or f.const is not None or f.value is not None or f.derived_from or f.convert
                or f.chain or f.since is not None or f.until is not None or f.view
                or f.framing):
            return None
        cond = f.cond.source if f.cond is not None else None
        args = tuple((k, e.source) for k, e in t.args)
        # a target's parameter the field does not set is passed on from the enclosing
        # record's parameter of the same name (as the generated code does)
        given = {k for k, _ in t.args}
        target = fam.records.get(t.target)
        args += tuple((k, k) for k in (target.params if target else ())
                      if k not in given and k in rec.params)
        if f.repeat is not None:
            r = f.repeat
            if not r.eos or r.stop_on_error or r.until is not None or r.until_item:
                return None
            fields.append((f.name, "eos", t.target, cond, args, None))
            streams = True
            continue
        sub = stream_plan(fam, t.target)
        fields.append((f.name, "stream" if sub else "whole", t.target, cond, args, sub))
        streams = streams or sub is not None
    if not streams:
        return None
    defaults = {p.name: p.default for p in rec.params.values() if p.default is not None}
    return defaults, tuple(fields)


_EXPR_FUNCS = {"min": min, "max": max, "len": len, "int": int, "bool": bool, "sum": sum}
_CODE: dict[str, Any] = {}


def eval_expr(source: str, env: dict[str, Any]) -> Any:
    """A schema expression (already validated by the generator) over ``env``."""
    code = _CODE.get(source)
    if code is None:
        code = _CODE[source] = compile(source, "<expr>", "eval")
    return eval(code, {"__builtins__": _EXPR_FUNCS}, env)  # noqa: S307 - schema language
