"""The generator, as named passes run in order (Kaitai-style):

1. ``load``      read YAML, keeping a line for every YAML path
2. ``validate``  check each file against the published JSON Schema
3. ``resolve``   build the typed IR (names, expressions, derived fields)
4. ``layout``    one concrete layout per record version; fixed sizes and offsets
5. ``emit``      fast-path and Construct source from the IR
6. ``render``    Jinja2 template -> one deterministic module per family

Each pass returns problems as values; the pipeline stops after a pass that found errors.
"""

from __future__ import annotations

import functools
import hashlib
import json
import pprint
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import jsonschema
import yaml

from . import absent, bitfields, byteorder, defaults, emit_located, imports, ir, layout, project
from .checksum_cover import any_late
from .emit_construct import ConstructEmitter
from .emit_fast import FastEmitter
from .fast import bulk
from .model import annotation, camel, enum_class, flags_class
from .problems import Problems
from .resolve import Resolver
from .runtime_names import checksum_bindings, intkind_bindings, numeric_bindings
from .yamlsource import Source, load_text

PACKAGE_ROOT = project.PACKAGE_ROOT
# The schema language's own JSON Schema: part of the tool, not of any project.
META_SCHEMA = PACKAGE_ROOT / "schemas" / "bytewright.schema.json"
TEMPLATES = Path(__file__).resolve().parent / "templates"


def _package_dirs() -> tuple[Path, Path]:
    """Schema and output folders of the package's own project (from its project file)."""
    try:
        own = project.package_project()
    except project.ProjectError:  # a broken install must still import; verbs report it
        return PACKAGE_ROOT / "schemas", PACKAGE_ROOT / "generated"
    return own.schemas[0], own.output


# Kept for callers that predate projects; verbs use the project they were given.
SCHEMA_DIR, GENERATED_DIR = _package_dirs()


@dataclass
class Result:
    """What a generator run produced: modules by file name, families, and problems."""

    modules: dict[str, str] = field(default_factory=dict)
    families: dict[str, ir.Family] = field(default_factory=dict)
    problems: Problems = field(default_factory=Problems)
    # every loaded schema source (imported parts included): readers look lines up here
    sources: list[Source] = field(default_factory=list)


def schema_files(schema_dir: Path = SCHEMA_DIR) -> list[Path]:
    return sorted(p for p in schema_dir.glob("*.yaml"))


# -- pass 1 + 2 -------------------------------------------------------------------------

def load(paths: list[Path], problems: Problems, texts: dict[str, str] | None = None,
         base: Path | None = None) -> list[Source]:
    sources = []
    for path in paths:
        name = _display(path, base)
        try:
            if texts is not None and str(path) in texts:
                src = load_text(texts[str(path)], name)
            else:
                src = load_text(path.read_text(encoding="utf-8"), name)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            problems.add(name, mark.line + 1 if mark else None, "", f"YAML syntax: {exc}")
            continue
        except UnicodeDecodeError as exc:
            problems.add(name, None, "", f"not UTF-8 text (byte {exc.start}): is this a schema?")
            continue
        except IsADirectoryError:
            problems.add(name, None, "", "is a folder, not a schema file")
            continue
        except OSError as exc:
            problems.add(name, None, "", f"cannot read: {exc.strerror or exc}")
            continue
        except TypeError as exc:  # e.g. a YAML mapping used as a key ("unhashable")
            problems.add(name, None, "", f"YAML: unsupported structure: {exc}")
            continue
        if src.data is None:
            problems.add(name, 1, "", "empty schema file")
            continue
        src.path = path
        sources.append(src)
    return sources


def _importer(sources: list[Source], problems: Problems, texts: dict[str, str] | None,
              base: Path | None):  # noqa: ANN202 - a loader for imports.expand
    """Load an imported file once (validated), or None when there is no such file."""
    known = {str(s.path.resolve()): s for s in sources if s.path is not None}

    def get(path: Path) -> Source | None:
        key = str(path.resolve())
        if key in known:
            return known[key]
        if not (texts is not None and str(path) in texts) and not path.is_file():
            return None
        got = validate(load([path], problems, texts, base), problems)
        known[key] = got[0] if got else None  # type: ignore[assignment]
        return known[key]

    return get


def _display(path: Path, base: Path | None) -> str:
    try:
        return str(path.resolve().relative_to((base or PACKAGE_ROOT).resolve()))
    except ValueError:
        return str(path)


def validate(sources: list[Source], problems: Problems) -> list[Source]:
    schema = json.loads(META_SCHEMA.read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    good = []
    for src in sources:
        errors = sorted(validator.iter_errors(src.data), key=lambda e: list(e.absolute_path))
        for err in errors:
            path = ""
            for part in err.absolute_path:
                path = f"{path}[{part}]" if isinstance(part, int) else (
                    f"{path}.{part}" if path else str(part))
            problems.add(src.file, src.line(path), path, _schema_message(err))
        if not errors:
            good.append(src)
    return good


def _schema_message(err: jsonschema.ValidationError) -> str:
    if err.validator == "additionalProperties":
        return err.message.replace("Additional properties are not allowed",
                                   "unknown key(s) not in the schema language")
    if isinstance(err.instance, bool) and err.validator in ("type", "pattern"):
        # YAML 1.1 reads an unquoted on/off/yes/no/true/false as a bool
        spelled = "on, yes or true" if err.instance else "off, no or false"
        return (f"{err.message}: YAML reads an unquoted {spelled} as the boolean "
                f"{str(err.instance).lower()}; quote it, e.g. \"on\"")
    return err.message


# -- pass 3..6 ---------------------------------------------------------------------------

def digest_of(sources: list[Source]) -> str:
    h = hashlib.sha256()
    for src in sources:
        h.update(Path(src.file).name.encode() + b"\0" + src.text.encode("utf-8") + b"\0")
    return "sha256:" + h.hexdigest()


def run(paths: list[Path] | None = None, *, texts: dict[str, str] | None = None,
        base: Path | None = None, proj: project.Project | None = None,
        render_modules: bool = True,
        progress: Callable[[str], None] | None = None) -> Result:
    """Run every pass over ``paths`` (default: the schemas of ``proj``, else of the
    package's own project); file names are shown relative to ``base`` (default the
    project's folder). ``render_modules=False`` stops after the layout pass: callers
    that only read the families (doc, diff, inspect, export) skip the emitters, by far
    the slowest pass. ``progress`` is told each step as it starts (a verb shows it)."""
    say = progress or (lambda _step: None)
    result = Result()
    problems = result.problems
    if paths is None:
        proj = proj or project.package_project()
        paths = proj.schema_files()
    if base is None and proj is not None:
        base = proj.root
    loaded = load(paths, problems, texts, base)
    result.sources = loaded
    sources = validate(loaded, problems)
    if problems:
        return result
    sources = imports.expand(sources, problems, _importer(sources, problems, texts, base))
    result.sources = [*loaded, *(s for s in sources if not any(s is x for x in loaded))]
    if problems:
        return result
    by_family: dict[str, list[Source]] = {}
    for src in sources:
        by_family.setdefault(src.data["family"], []).append(src)
    for name, srcs in sorted(by_family.items()):
        say(f"reading family {name}")
        family = Resolver(srcs, problems, digest_of(srcs)).run()
        if problems or family is None:
            continue
        layout.run(family, problems)
        if problems:
            continue
        result.families[name] = family
        if render_modules:
            say(f"generating {name}.py")
            result.modules[f"{name}.py"] = render(family, problems)
    return result


@functools.cache
def _module_template() -> jinja2.Template:
    """The module template, compiled once per process (every family renders it)."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined)
    return env.get_template("module.py.j2")


def render(family: ir.Family, problems: Problems | None = None, *,
           all_twins: bool = False) -> str:
    """The generated module of ``family``; what a schema asks that the emitter cannot
    give (``rows`` on a record without a loop) goes to ``problems``. ``all_twins``
    gives every record its one-loop twins, not only the records read in runs
    (``generator/fast/bulk.py``): what ``bench/twins.py`` compares against."""
    from .emit_index import context as index_data  # plain data read without importing

    fast = FastEmitter(family)
    fast.all_twins = all_twins
    con = ConstructEmitter(family)
    blocks: list[str] = []
    for rec in family.records.values():
        for lay in rec.layouts:
            blocks.append("\n".join(fast.decoder(rec, lay)))
            blocks.append("\n".join(fast.encoder(rec, lay)))
        if rec.orders:  # byte order as data: the order first, then the version
            if rec.version_range is not None:
                blocks += byteorder.version_dispatchers(rec, dispatcher)
            blocks.append(byteorder.fast_dispatcher(rec, "d", family))
            blocks.append(byteorder.fast_dispatcher(rec, "e", family))
            if rec.version_range is None and fast.twin_wanted(rec.name) \
                    and fast.has_twin(rec.name):
                blocks.append(byteorder.fast_twin(rec, family, fast.read_in_runs(rec.name)))
        elif rec.version_range is not None:
            blocks.append(dispatcher(rec, "d"))
            blocks.append(dispatcher(rec, "e"))
    blocks = bulk.drop_unreferenced(blocks, frozenset(
        r for r in family.records if fast.read_in_runs(r)))
    for rec in family.records.values():
        if rec.rows and not any(f"\ndef _r_{rec.name}(" in b for b in blocks) \
                and not any(r is rec for r, _ in fast.problems):
            fast.problems.append((rec, "rows: true, but the record has no one-loop decoder "
                                       "(too large, or a layout the loop cannot read)"))
    if problems is not None:
        for rec, message in fast.problems:
            problems.add(rec.file, rec.line, f"records.{rec.name}.rows", message)
    cblocks: list[str] = []
    for rec in con.order():
        cblocks.append("\n".join(con.record_c(rec)))
    for fd in family.flags.values():
        cblocks.append("\n".join(con.flags_conv(fd)))
    for rec in family.records.values():
        cblocks.append("\n".join(con.c2m(rec)))
        cblocks.append("\n".join(con.m2c(rec)))
    text = _module_template().render(
        family=family.name, title=family.title, doc=family.doc.strip() or family.title,
        spec=family.spec, files=[Path(f).as_posix() for f in family.files],
        digest=family.digest, registry=family.versions,
        registries=[registry_ctx(e) for e in family.registries.values()],
        enums=[enum_ctx(e) for e in family.enums.values()],
        flags=[flags_ctx(fd, family) for fd in family.flags.values()],
        records=[record_ctx(r, family) for r in family.records.values()],
        consts=fast.consts, fast=blocks, construct=cblocks, dtypes=dtypes(family),
        plugins=family.plugins, checksums=checksum_bindings(family),
        numerics=numeric_bindings(family), intkinds=intkind_bindings(family),
        bitfields=bitfields.uses(family),
        absents=any(absent.sentinel(f) is not None for r in family.records.values()
                    for f in r.fields),
        late_checksums=any_late(family),
        int_calls=any("_int_of(" in b for b in blocks),
        field_defaults=any(f.has_default for r in family.records.values() for f in r.fields),
        layout=pprint.pformat(layout_data(family), width=100, sort_dicts=False),
        located_imports=emit_located.IMPORTS if emit_located.used(family) else "",
        located=emit_located.block(family) if emit_located.used(family) else "",
        **index_data(family),
    )
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


def dtypes(family: ir.Family) -> list[tuple[str, str]]:
    """numpy dtypes of the records used as ``view: numpy`` elements."""
    out = []
    used = {f.type.target for r in family.records.values() for f in r.fields
            if f.view == "numpy" and isinstance(f.type, ir.RefT) and f.type.kind == "record"}
    for name in sorted(used):
        spec = layout.record_dtype(family.records[name], family)
        if spec is not None:
            out.append((camel(name), repr(spec)))
    return out


def dispatcher(rec: ir.Record, kind: str) -> str:
    params = "".join(f", p_{p}" for p in rec.params)
    head = "mv, pos, end" if kind == "d" else "out, v"
    lines = [f"def _{kind}_{rec.name}({head}{params}):"]
    src = rec.version_from
    if src in rec.params:
        lines.append(f"    _ver = p_{src}")
    elif kind == "d":
        lay0 = rec.layouts[0]
        f = next(x for x in lay0.fields if x.name == src)
        it = f.type if isinstance(f.type, ir.IntT) else None
        code = (it.code if it else "B")
        lines += [f"    if pos + {lay0.offsets[src] + (it.size if it else 1)} > end:",
                  f"        raise TruncatedError('version truncated', offset=pos, path={src!r})",
                  f"    _ver = struct.unpack_from({'<' + code!r}, mv, pos + {lay0.offsets[src]})[0]"]
    else:
        lines.append(f"    _ver = v.{src}")
    for lay in rec.layouts:
        vs = lay.versions
        lines.append(f"    if _ver in {tuple(vs)!r}:")
        lines.append(f"        return _{kind}_{rec.name}{lay.suffix}({head}{params})")
    lo, hi = rec.version_range
    err = "UnsupportedError" if kind == "d" else "EncodeError"
    if kind == "d":
        lines.append(f"    raise UnsupportedError('unsupported {rec.name} version', offset=pos, "
                     f"path={src!r}, expected='{lo}..{hi}', found=_ver)")
    else:
        lines.append(f"    raise {err}('unsupported {rec.name} version ' + repr(_ver), "
                     f"path={src!r})")
    return "\n".join(lines)


def enum_ctx(e: ir.EnumDef) -> dict:
    return {"name": e.name, "cls": enum_class(e.name), "doc": e.doc,
            "members": [{"name": m.name, "value": m.value, "doc": m.doc} for m in e.members]}


def registry_ctx(e: ir.EnumDef) -> dict:
    """A ``registries:`` table as data: id -> (name, current, accepted) plus retired ids."""
    rows = {m.value: (m.name, m.current, m.accepted) for m in e.members}
    return {"name": e.name, "rows": pprint.pformat(rows, width=96, sort_dicts=False),
            "retired": tuple(e.retired)}


def flags_ctx(fd: ir.FlagsDef, family: ir.Family) -> dict:
    bits = []
    for b in fd.bits:
        raw = f"(raw >> {b.lo}) & {(1 << b.width) - 1}" if b.lo else f"raw & {(1 << b.width) - 1}"
        if b.enum:
            cls = enum_class(b.enum)
            ann, default = cls, f"{cls}({family.enums[b.enum].members[0].value})"
            dec = f"{cls}({raw})"
            enc = f"(int(self.{b.name}) << {b.lo})"
        elif b.width == 1:
            ann, default, dec = "bool", "False", f"bool({raw})"
            enc = f"(int(self.{b.name}) << {b.lo})"
        else:
            ann, default, dec = "int", "0", f"({raw})"
            enc = f"((self.{b.name} & {(1 << b.width) - 1}) << {b.lo})"
        bits.append({"name": b.name, "lo": b.lo, "width": b.width, "annotation": ann,
                     "default": default, "decode": dec, "encode": enc, "enum": b.enum})
    return {"name": fd.name, "cls": flags_class(fd.name), "doc": fd.doc, "bits": bits}


def record_ctx(rec: ir.Record, family: ir.Family) -> dict:
    sig_parts, convs = [], []
    for p in rec.params.values():
        ann = {"int": "int", "bool": "bool", "str": "str", "bytes": "bytes"}.get(
            p.type, enum_class(p.type))
        sig_parts.append(f"{p.name}: {ann}" + (f" = {p.default!r}" if p.default is not None else ""))
        if p.type in family.enums:
            cls = enum_class(p.type)
            convs.append(f"if {p.name}.__class__ is not {cls}:")
            convs.append(f"    {p.name} = {cls}({p.name})")
    sig_nostar = "".join(f", {s}" for s in sig_parts)
    return {
        "name": rec.name, "cls": camel(rec.name), "doc": rec.doc.strip() or rec.name,
        "spec": rec.spec,
        "model": model_defaults(rec, family),
        "arrays": [f.name for f in rec.model_fields if f.view == "numpy"],
        "sig": (", *" + sig_nostar) if sig_parts else "", "sig_nostar": sig_nostar,
        "call": "".join(f", {p}" for p in rec.params),
        "kwcall": "".join(f", {p}={p}" for p in rec.params),
        "convs": convs,
        "row": ", ".join(f.name for f in rec.model_fields) or "no fields",
    }


def optional(f: ir.Field) -> bool:
    """A model field a value may leave out (``None``): conditional, version-bound or with
    an absent sentinel."""
    return f.cond is not None or f.since is not None or f.until is not None \
        or absent.sentinel(f) is not None


def model_defaults(rec: ir.Record, family: ir.Family) -> list[dict]:
    """The model's fields; optional ones default to None. A required field after an
    optional one keeps its place (positional calls stay valid) with a marker default
    that ``__post_init__`` refuses, so only optional fields may be left out."""
    fields = rec.model_fields
    # a declared ``default:`` makes the field keyword-only (out of the positional order)
    positional = [f for f in fields if not f.has_default and not f.filled]
    first = next((i for i, f in enumerate(positional) if optional(f)), len(positional))
    after = {id(f) for f in positional[first:]}
    out = []
    for f in fields:
        if f.filled:  # where a located structure is: filled by the encoder, not compared
            default = "_dc_field(default=0, compare=False)"
        elif f.has_default:
            default = f"field(default={defaults.code(f, family)}, kw_only=True)"
        elif id(f) in after:
            default = "None" if optional(f) else "_REQUIRED"
        else:
            default = None
        out.append({"name": f.name, "annotation": annotation(f, family), "default": default})
    return out + emit_located.model_extra(rec, family)


def type_label(t: ir.Type) -> str:
    if isinstance(t, ir.BytesT):
        if t.prefix is not None:
            return f"{t.name}[{t.prefix.name} length]"
        if t.eos:
            return f"{t.name}[to end]"
        if t.terminator is not None:
            return f"{t.name}[until {t.terminator.hex()}]"
        return f"{t.name}[{t.size.source}]"
    if isinstance(t, ir.SwitchT):
        return f"switch({t.on.source})"
    if isinstance(t, ir.RefT):
        return t.target
    return t.name


def field_data(f: ir.Field, lay: ir.Layout) -> dict:
    d: dict = {"name": f.name, "type": type_label(f.type),
               "offset": lay.offsets.get(f.name), "size": lay.sizes.get(f.name)}
    if f.repeat is not None:
        rp = f.repeat
        d["repeat"] = (rp.count.source if rp.count is not None else
                       f"{rp.prefix.name} count" if rp.prefix is not None else
                       f"until {rp.until}" if rp.until is not None else
                       f"until_item {rp.until_item.source}" if rp.until_item is not None else
                       "eos, stop_on_error" if rp.stop_on_error else "eos")
    if f.cond is not None:
        d["if"] = f.cond.source
    if f.const is not None:
        d["const"] = f.const.hex() if isinstance(f.const, bytes) else f.const
    if f.reserved:
        d["reserved"] = "zero"
    if f.valid is not None:
        d["valid"] = list(f.valid)
    if f.size is not None:
        d["size_expr"] = f.size.source
    if f.checksum is not None:
        d["checksum"] = {"algorithm": f.checksum.algorithm,
                         "covers": list(f.checksum.covers) if f.checksum.covers else (
                             [] if f.checksum.ranges else "preceding"),
                         **({"ranges": [list(r) for r in f.checksum.ranges]}
                            if f.checksum.ranges else {}),
                         "except": list(f.checksum.excluded)}
        if f.checksum.scope:
            d["checksum"]["covers"] = f.checksum.scope
        if f.checksum.files:
            d["checksum"]["files"] = [[a.source, b.source] for a, b in f.checksum.files]
        if f.checksum.filler != 0:
            d["checksum"]["filler"] = (f.checksum.filler.hex() if isinstance(
                f.checksum.filler, bytes) else f.checksum.filler)
    if f.compressed is not None:
        c = f.compressed
        d["compressed"] = {"algorithm": c.algorithm.source,
                           "length": c.length.name if c.length else None,
                           "when": c.when.source if c.when is not None else None}
        if c.codecs:
            d["compressed"]["codecs"] = dict(c.codecs)
    if f.derived_from is not None:
        d["derived"] = f"{f.derived_from[0]} of {f.derived_from[1]}"
    if isinstance(f.type, ir.SwitchT):
        d["cases"] = {lbl: tgt for _, lbl, tgt in f.type.cases}
    d["doc"] = f.doc.strip()
    d["spec"] = f.spec
    d["line"] = f.line
    return d


def layout_data(family: ir.Family) -> dict:
    out = {}
    for rec in family.records.values():
        out[rec.name] = {
            "doc": rec.doc.strip(), "spec": rec.spec, "line": rec.line,
            "params": list(rec.params),
            "versions": list(rec.version_range) if rec.version_range else None,
            "layouts": [{"versions": list(lay.versions) if lay.versions else None,
                         "fixed_size": lay.fixed_size,
                         "fields": [field_data(f, lay) for f in lay.fields]}
                        for lay in rec.layouts],
        }
    return out
