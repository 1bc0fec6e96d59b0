"""Resolving and checking ``framing:`` on a repeat field (records carried in blocks or
pages). Reading the YAML happens while the field is resolved; the checks run once every
record exists and every derived field is known, and report misuse as schema problems."""

from __future__ import annotations

from typing import Any

from . import ir
from .expr import ExprError, parse
from .layout import fixed_size
from .yamlsource import Source, join

KIND_ROLES = ("full", "first", "middle", "last")


def resolve(res: Any, src: Source, path: str, body: dict) -> ir.Framing | None:
    """``framing:`` of the field at ``path`` (names are checked by :func:`check`)."""
    blocks = body.get("blocks")
    fr = ir.Framing(fragment=str(body.get("fragment")), piece=str(body.get("piece")))
    if blocks is not None:
        fr.block_size = int(blocks["size"])
        fr.tail = blocks.get("tail", "zero")
    fr.kind = body.get("kind")
    fr.lacing = body.get("lacing")
    fr_path = join(path, "framing")
    if (fr.block_size is None) == (fr.lacing is None):
        res.err(src, fr_path, "framing needs exactly one of blocks (with kind, kinds) or "
                              "lacing (with continued)")
        return None
    if fr.block_size is not None and (fr.kind is None or body.get("kinds") is None):
        res.err(src, fr_path, "block framing needs kind and kinds")
        return None
    if fr.lacing is not None:
        if "continued" not in body:
            res.err(src, fr_path, "lacing framing needs continued")
            return None
        try:
            fr.continued = parse(body["continued"])
        except ExprError as exc:
            res.err(src, join(fr_path, "continued"), str(exc))
            return None
    fr.raw_kinds = body.get("kinds")  # type: ignore[attr-defined] -- read by check()
    return fr


def _base(res: Any, t: ir.Type) -> ir.Type:
    if isinstance(t, ir.RefT) and t.kind == "alias":
        return res.aliases[t.target].base
    if isinstance(t, ir.RefT) and t.kind == "enum":
        return res.enums[t.target].base
    return t


def check(res: Any, src: Source, f: ir.Field, records: dict[str, ir.Record]) -> None:
    """Every rule of a framed field; problems name ``<field>.framing...``."""
    fr = f.framing
    at = join(f.path, "framing")
    t = f.type
    if f.repeat is None or not f.repeat.eos or f.repeat.stop_on_error or f.chain is not None \
            or not isinstance(t, ir.RefT) or t.kind != "record":
        res.err(src, at, "framing needs a field of a record type with repeat: eos (the "
                         "logical records)")
        return
    if f.cond is not None or f.size is not None or f.compressed is not None or f.view \
            or t.args:
        res.err(src, at, "a framed field takes no if, size, compressed, view or args")
    logical = records[t.target]
    if logical.params or logical.version_from is not None:
        res.err(src, at, f"the logical record {logical.name!r} must take no params and "
                         "have no versions (it is decoded from reassembled bytes alone)")
    frag = records.get(fr.fragment)
    if frag is None:
        res.err(src, join(at, "fragment"), f"unknown fragment record {fr.fragment!r}")
        return
    if frag.params or frag.version_from is not None:
        res.err(src, join(at, "fragment"), f"fragment record {frag.name!r} must take no "
                                           "params and have no versions")
        return
    by_name = {x.name: x for x in frag.fields}
    names = [x.name for x in frag.fields]
    piece = by_name.get(fr.piece)
    if piece is None:
        res.err(src, join(at, "piece"), f"fragment record {frag.name!r} has no field "
                                        f"{fr.piece!r}")
        return
    if not isinstance(piece.type, ir.BytesT) or piece.type.text or piece.repeat \
            or not piece.in_model or piece.cond is not None:
        res.err(src, join(at, "piece"), f"piece {fr.piece!r} must be a plain bytes field "
                                        "of the fragment's object model")
        return
    sizes = {x.name: fixed_size(x, res.aliases, res.enums, res.flagdefs) for x in frag.fields}
    after = names[names.index(fr.piece) + 1:]
    if any(sizes[n] is None for n in after):
        res.err(src, join(at, "piece"), "the fragment's fields after its piece must have "
                                        "fixed sizes")
        return
    fr.after_piece = sum(sizes[n] for n in after)
    model = {x.name for x in frag.fields if x.in_model}
    if fr.block_size is not None:
        _check_blocks(res, src, at, fr, frag, by_name, sizes, model)
    else:
        _check_lacing(res, src, at, fr, frag, by_name, model)


def _check_blocks(res: Any, src: Source, at: str, fr: ir.Framing, frag: ir.Record,
                  by_name: dict, sizes: dict, model: set) -> None:
    kf = by_name.get(fr.kind)
    if kf is None:
        res.err(src, join(at, "kind"), f"fragment record {frag.name!r} has no field {fr.kind!r}")
        return
    base = _base(res, kf.type)
    if not isinstance(base, ir.IntT) or kf.repeat or not kf.in_model:
        res.err(src, join(at, "kind"), f"kind {fr.kind!r} must be a stored integer or enum "
                                       "field of the fragment's object model")
        return
    enum = kf.type.target if isinstance(kf.type, ir.RefT) and kf.type.kind == "enum" else None
    fr.kind_enum = enum
    kinds = []
    raw = getattr(fr, "raw_kinds", None) or {}
    for role in KIND_ROLES:
        v = raw.get(role)
        if isinstance(v, int) and not isinstance(v, bool):
            value = v
            if enum is not None and v not in {m.value for m in res.enums[enum].members}:
                value = None
        elif enum is not None and isinstance(v, str):
            value = res.enums[enum].value_of(v.partition(".")[2] or v)
        else:
            value = None
        if value is None:
            where = f"a member of enum {enum!r}" if enum else "an integer"
            res.err(src, join(at, f"kinds.{role}"), f"kind {v!r} is not {where}")
            return
        kinds.append((role, value))
    if len({v for _, v in kinds}) != len(kinds):
        res.err(src, join(at, "kinds"), "full, first, middle and last need distinct values")
        return
    fr.kinds = tuple(kinds)
    others = sorted(model - {fr.kind, fr.piece})
    if others:
        res.err(src, join(at, "fragment"), f"block fragments are derived on encode: the "
                                           f"fragment's object model may hold only "
                                           f"{fr.kind!r} and {fr.piece!r}, not {others}")
        return
    missing = [n for n in sizes if n != fr.piece and sizes[n] is None]
    if missing:
        res.err(src, join(at, "fragment"), f"a block fragment's header must have a fixed "
                                           f"size: {missing} do not")
        return
    fr.header = sum(s for n, s in sizes.items() if n != fr.piece)
    if fr.block_size <= fr.header:
        res.err(src, join(at, "blocks.size"), f"a block of {fr.block_size} bytes is not "
                                              f"larger than the {fr.header}-byte fragment "
                                              "header")
    if fr.tail not in ("zero", "any"):
        res.err(src, join(at, "blocks.tail"), "tail is zero or any")


def _check_lacing(res: Any, src: Source, at: str, fr: ir.Framing, frag: ir.Record,
                  by_name: dict, model: set) -> None:
    lf = by_name.get(fr.lacing)
    if lf is None:
        res.err(src, join(at, "lacing"), f"fragment record {frag.name!r} has no field "
                                         f"{fr.lacing!r}")
        return
    base = _base(res, lf.type)
    if not (isinstance(base, ir.IntT) and base.bits == 8 and not base.signed) \
            or lf.repeat is None or lf.repeat.count is None and lf.repeat.prefix is None \
            or not lf.in_model or lf.cond is not None or lf.view:
        res.err(src, join(at, "lacing"), f"lacing {fr.lacing!r} must be a counted list of u8 "
                                         "in the fragment's object model")
        return
    unknown = sorted(fr.continued.names - model)
    if unknown:
        res.err(src, join(at, "continued"), f"continued reads {unknown}, not fields of the "
                                            f"fragment {frag.name!r}'s object model")
