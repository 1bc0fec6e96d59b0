"""The Construct ``Struct`` and ``Switch`` the generated records use: field and rule
checks with the fast path's messages, and the compiler that fuses fixed runs and inlines
switch cases and sub-records into one function per record.
"""


from __future__ import annotations

import re
import struct
import threading
from typing import Any

import construct as cs

from .construct_checked import (
    Array,
    BitFlags,
    Checksum,
    FixedSized,
    Prefixed,
    _fixed_part,
    _inner,
    _items_source,
    _joined,
)
from .construct_support import (
    ClosedEnum,
    Code,
    CompileState,
    Converted,
    Leb128,
    NumpyArray,
    TerminatedBytes,
    WithParams,
    ZeroPadding,
    _bind,
    _bw,
    _link,
    _params_for,
    _read_exact,
    _stream_end,
)
from .errors import (
    ConstraintError,
    EncodeError,
    TruncatedError,
    UnsupportedError,
)
from .truth import note


# Decompressed sections without a declared size (WAL blocks) are capped here.
class Switch(cs.Switch):
    """Construct's ``Switch``; compiled, a case that is one parser call is stored as that
    parser (Construct wraps every case in a lambda: one more call per item)."""

    def _emitparse(self, code):
        fname = f"switch_cases_{code.allocateId()}"
        code.append(f"{fname} = {{}}")
        for key, sc in self.cases.items():
            expr = sc._compileparse(code)
            m = re.fullmatch(r"(\w+)\(io, this\)", expr)
            code.append(f"{fname}[{key!r}] = " + (m.group(1) if m else
                                                  f"lambda io,this: {expr}"))
        default = self.default._compileparse(code)
        m = re.fullmatch(r"(\w+)\(io, this\)", default)
        dname = f"switch_defaultcase_{code.allocateId()}"
        code.append(f"{dname} = " + (m.group(1) if m else f"lambda io,this: {default}"))
        return f"{fname}.get({self.keyfunc!r}, {dname})(io, this)"


_PARAMS_ONLY = re.compile(r"this\['_params'\]")


def _reads_only_params(sc: Any) -> bool:
    """``sc`` parses in its caller's context without reading or writing the caller's
    fields: its expressions read only ``this['_params']`` (records below make their
    own context). Unknown classes are assumed to need the context."""
    if isinstance(sc, Code):
        return "this" not in _PARAMS_ONLY.sub("", sc.source)
    if isinstance(sc, (int, bytes, str, type(None))):
        return True
    if isinstance(sc, Struct):
        return True
    if isinstance(sc, (cs.Renamed, ClosedEnum, BitFlags, cs.Const, Prefixed, cs.StringEncoded)):
        return _reads_only_params(sc.subcon)
    if isinstance(sc, (cs.FormatField, Leb128, type(cs.GreedyBytes), type(cs.Pass))) \
            or sc is cs.Error:
        return True
    if isinstance(sc, (cs.Bytes, cs.BytesInteger)):
        return _reads_only_params(sc.length)
    if isinstance(sc, WithParams):
        return all(_reads_only_params(v) for v in sc.args.values())
    if isinstance(sc, cs.Switch):
        return _reads_only_params(sc.keyfunc) and _reads_only_params(sc.default) and \
            all(_reads_only_params(c) for c in sc.cases.values())
    if isinstance(sc, cs.IfThenElse):
        return all(_reads_only_params(x) for x in (sc.condfunc, sc.thensubcon,
                                                   sc.elsesubcon))
    if isinstance(sc, cs.Array):
        return _reads_only_params(sc.count) and _reads_only_params(sc.subcon)
    return False


# What a record's own context holds besides its fields, as a local expression.
_CTX_LOCALS = {"_io": "io", "_parsing": "True", "_building": "False", "_sizing": "False"}


def _localize(src: str, local: dict[str, str]) -> tuple[str, bool] | None:
    """``src`` (compiled source) with reads ``this['k']`` of the record's fields replaced
    by their locals; (source, needs the record's context), or None when ``src`` binds
    its own ``this`` (a lambda's parameter: its reads are not the record's)."""
    import ast
    import io
    import tokenize

    lead = src[:len(src) - len(src.lstrip())]
    body = src.lstrip()
    if "this" not in body:
        return src, False
    try:
        toks = [t for t in tokenize.generate_tokens(io.StringIO(body).readline)
                if t.type not in (tokenize.NL, tokenize.COMMENT)]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    if "\n" in body.rstrip("\n"):
        return None  # one logical line only (columns index the text below)
    edits: list[tuple[int, int, str]] = []
    needs = False
    for i, t in enumerate(toks):
        if t.type == tokenize.NAME and t.string == "lambda":
            j = i + 1
            while j < len(toks) and toks[j].string != ":":
                if toks[j].string == "this":
                    return None
                j += 1
        if t.type != tokenize.NAME or t.string != "this":
            continue
        key = None
        if i + 3 < len(toks) and toks[i + 1].string == "[" and \
                toks[i + 2].type == tokenize.STRING and toks[i + 3].string == "]":
            try:
                key = ast.literal_eval(toks[i + 2].string)
            except (ValueError, SyntaxError):
                key = None
        if key in local or key in _CTX_LOCALS:
            edits.append((t.start[1], toks[i + 3].end[1],
                          local.get(key) or _CTX_LOCALS[key]))
        elif key == "_params":
            continue  # the caller's context holds the same parameters
        else:
            needs = True
            edits.append((t.start[1], t.end[1], "_ctx"))
    for a, b, new in sorted(edits, reverse=True):
        body = body[:a] + new + body[b:]
    return lead + body, needs


def _rename(src: str, old: str, new: str) -> str | None:
    """``src`` with every name ``old`` (not inside strings) spelled ``new``; None if
    ``src`` already uses ``new``."""
    import io
    import tokenize

    try:
        toks = list(tokenize.generate_tokens(io.StringIO(src).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    if "\n" in src.rstrip("\n") or any(t.string == new for t in toks):
        return None
    for t in reversed(toks):
        if t.type == tokenize.NAME and t.string == old:
            src = src[:t.start[1]] + new + src[t.end[1]:]
    return src


def _retoken(src: str, fn) -> str | None:
    """``src`` (one line) with each name ``n`` (not inside strings) for which ``fn(n)``
    is a string spelled so; None if ``src`` cannot be tokenized."""
    import io
    import tokenize

    lead = src[:len(src) - len(src.lstrip())]
    body = src.lstrip()
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(body).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    if "\n" in body.rstrip("\n"):
        return None
    for t in reversed(toks):
        if t.type == tokenize.NAME:
            new = fn(t.string)
            if new is not None:
                body = body[:t.start[1]] + new + body[t.end[1]:]
    return lead + body


_PARAM_READ = re.compile(r"this\['_params'\]\['(\w+)'\]")


def _params_read(lines: list[str]) -> frozenset | None:
    """The parameters a record's compiled statements read by name, or None if they hand
    their context (or its parameters) on, or read them otherwise."""
    text = "\n".join(lines)
    keys = frozenset(_PARAM_READ.findall(text))
    return None if re.search(r"\bthis\b", _PARAM_READ.sub("", text)) else keys


# The record's caller's context in statements (``this`` once emitted): calls that read
# only parameters get it as it is, not a context of the record's fields.
_CALLER = "_bw_caller_"


def _switch_lines(sw: Any, code: Any, io_name: str, target: str) -> list[str] | None:
    """A switch in the statements of its record, when its cases are records: those
    without parameters of their own called with the caller's context (which holds the
    same parameters), those with the same parameter replacements (and the default) with
    the replacements set once -- no helper per case, no context built for them."""
    if not isinstance(sw, cs.Switch):
        return None
    args = None
    plain, withp = [], []
    for key, case in sw.cases.items():
        if case is cs.Pass:
            plain.append((key, "lambda io, this: None"))
        elif isinstance(case, Struct):
            plain.append((key, case))
        elif isinstance(case, WithParams) and isinstance(case.subcon, Struct):
            src = {k: repr(v) for k, v in case.args.items()}
            if args is not None and src != args:
                return None
            args = src
            withp.append((key, case.subcon))
        else:
            return None
    dflt = sw.default
    if isinstance(dflt, WithParams) and isinstance(dflt.subcon, Struct):
        src = {k: repr(v) for k, v in dflt.args.items()}
        if args is not None and src != args:
            return None
        args = src
    elif not _reads_only_params(dflt):
        return None
    if args is None and not plain:
        return None

    def parser(case: Any) -> str | None:
        if isinstance(case, str):
            return case
        m = re.fullmatch(r"(\w+)\(io, this\)", case._compileparse(code))
        return m.group(1) if m else None

    tid = code.allocateId()
    tables = {}
    for name, rows in (("plain", plain), ("params", withp)):
        tname = f"switch_{name}_{tid}"
        code.append(f"{tname} = {{}}")
        for key, case in rows:
            fn = parser(case)
            if fn is None:
                return None
            code.append(f"{tname}[{key!r}] = {fn}")
        tables[name] = tname
    callees = [c for _, c in withp]
    if isinstance(dflt, WithParams):
        fn = parser(dflt.subcon)
        if fn is None:
            return None
        callees.append(dflt.subcon)
        dcall = f"{fn}({io_name}, {{'_params': _q}})"
    else:
        dname = f"switch_default_{tid}"
        code.append(f"{dname} = lambda io, this: {dflt._compileparse(code)}")
        dcall = f"{dname}({io_name}, {_CALLER})"
    fresh = all(_params_for(c, args or {}) == "{}" for c in callees)
    sets = (["_q = {}" if fresh else "_q = dict(this['_params'])"]
            + [f"_q[{k!r}] = {v}" for k, v in (args or {}).items()])
    out = [f"_k = {sw.keyfunc!r}",
           f"_c = {tables['plain']}.get(_k)",
           "if _c is not None:",
           f"    {target}_c({io_name}, {_CALLER})",
           "else:",
           f"    _c = {tables['params']}.get(_k)"]
    out += ["    " + x for x in sets]
    out += ["    if _c is not None:",
            f"        {target}_c({io_name}, {{'_params': _q}})" if withp else
            f"        {target}None",
            "    else:",
            f"        {target}{dcall}"]
    return out


def _pure(sc: Any) -> bool:
    """``sc``'s compiled parse may read its context but never writes into it (records
    below make their own), so a dict of the record's fields so far can stand in for it.
    Unknown classes are assumed to write."""
    if isinstance(sc, (Code, int, bytes, str, type(None))):
        return True
    if isinstance(sc, Struct):
        return True
    if isinstance(sc, (cs.Renamed, ClosedEnum, BitFlags, cs.Const, Prefixed,
                       cs.StringEncoded, Converted, cs.Rebuild)):
        return _pure(sc.subcon)
    if isinstance(sc, cs.FixedSized):
        return _pure(sc.length) and _pure(sc.subcon)
    if isinstance(sc, (cs.FormatField, Leb128, TerminatedBytes, type(cs.GreedyBytes),
                       type(cs.Pass))) or sc is cs.Error:
        return True
    if isinstance(sc, (cs.Bytes, cs.BytesInteger)):
        return _pure(sc.length)
    if isinstance(sc, NumpyArray):
        return _pure(sc.count)
    if isinstance(sc, WithParams):
        return all(_pure(v) for v in sc.args.values()) and _pure(sc.subcon)
    if isinstance(sc, cs.Switch):
        return _pure(sc.keyfunc) and _pure(sc.default) and \
            all(_pure(c) for c in sc.cases.values())
    if isinstance(sc, cs.IfThenElse):
        return all(_pure(x) for x in (sc.condfunc, sc.thensubcon, sc.elsesubcon))
    if isinstance(sc, cs.Array):
        return _pure(sc.count) and _pure(sc.subcon)
    if isinstance(sc, Checksum):
        return _pure(sc.checksumfield) and _pure(sc.hashfunc) and _pure(sc.bytesfunc)
    return False


class Compiled(cs.Compiled):
    """What ``compile()`` returns for a record: Construct's ``Compiled`` whose
    ``parse_stream`` calls the compiled parser directly (the same root context, without
    the per-call attribute hooks of the generic entry)."""

    def parse_stream(self, stream, **contextkw):
        # a fresh plain dict: compiled code reads contexts by item only
        context = contextkw
        context["_parsing"] = True
        context["_building"] = False
        context["_sizing"] = False
        context["_params"] = context
        try:
            return self.parsefunc(stream, context)
        except cs.CancelParsing:
            return None


_COMPILING = threading.RLock()  # Struct.compile's state is per compile


class VersionCheck(cs.Check):
    """A record's version range: outside it the bytes are unsupported, not malformed
    (the fast path's dispatcher raises the same)."""

    def __init__(self, func, record: str, field: str, accepted: str,
                 message: str | None = None) -> None:
        super().__init__(func)
        self.record, self._bw_field, self.accepted = record, field, accepted
        self.message = message or f"unsupported {record} version"
        self.dispatch = message is None  # the record's range, not a field's own rule

    def error(self) -> UnsupportedError:
        return UnsupportedError(self.message, path=self._bw_field, expected=self.accepted)

    def _parse(self, stream, context, path):
        if not cs.evaluate(self.func, context):
            raise self.error()

    def _emitparse(self, code):
        return f"(None if {self.func!r} else {_check_raise(self, code, expr=True)})"


class FieldCheck(cs.Check):
    """A check that belongs to ``field`` (reported there, wherever it sits)."""

    def __init__(self, func, field: str) -> None:
        super().__init__(func)
        self._bw_field = field


class RuleCheck(FieldCheck):
    """A field's ``assert`` rule: a failure is the fast path's error (the rule's message,
    the rule as expected, the field's value as found), not Construct's bare CheckError.
    Compiled parsers raise CheckError; their failures are re-read interpreted."""

    def __init__(self, func, field: str, rule: str, message: str) -> None:
        super().__init__(func, field)
        self.rule, self.message = rule, message

    def _parse(self, stream, context, path):
        if not cs.evaluate(self.func, context):
            raise ConstraintError(self.message, path=self._bw_field, expected=self.rule,
                                  found=context.get(self._bw_field))

    def _build(self, obj, stream, context, path):
        if not cs.evaluate(self.func, context):
            raise EncodeError(self.message, path=self._bw_field)


def _check_raise(sc: cs.Check, code, expr: bool = False) -> str:
    """Compiled source raising a failed check's error (a version check's own)."""
    if isinstance(sc, VersionCheck):
        _bw(code)
        return f"{'_bw.throw(' if expr else 'raise '}{_link(code, sc)}.error(){')' if expr else ''}"
    return "raise CheckError('check failed during parsing')"


def throw(exc: BaseException) -> Any:
    raise exc


class Struct(cs.Struct):
    """Construct's ``Struct``; compiled, it is tighter than Construct's own emission.

    Parsed it is the same Struct. Compiled: one context per record that is also the
    result (no parent link: generated expressions read only ``_params``, ``_parsing``,
    ``_io`` and this record's fields), and each run of fixed-size members -- integers,
    fixed bytes, constants, closed enums, Tell markers, and the length prefix of a string,
    byte string or array that ends the run -- read with one checked ``unpack``. Checks
    keep their place (a run never crosses a ``Check``), constants and enums raise the
    same errors as interpreted, at the member's offset.

    A record whose generated module gives it a model builder (``_bw_model``: the
    converter's conversions as a function of the field values, set only where they cannot
    fail) returns the model object itself where no compiled code reads its value as a
    Container -- as the compiled root, as an opaque record, or as a nested record whose
    members its parent reads as the locals they are -- so ``_c2m_`` has nothing left to do.
    """

    # While a compile runs: the record compiled (its value is the caller's alone) and the
    # model builders its source names (bound into the compiled module afterwards).
    _bw_light_params = True  # a compiled record reads only ``_params`` of its caller

    def _parse(self, stream, context, path):
        # Construct's own loop, noting the member (and its offset) a failure leaves
        # through; an unnamed check belongs to the named member before it
        obj = cs.Container()
        obj._io = stream
        context = cs.Container(_=context, _params=context._params, _root=None,
                               _parsing=context._parsing, _building=context._building,
                               _sizing=context._sizing, _subcons=self._subcons, _io=stream,
                               _index=context.get("_index", None))
        context._root = context._.get("_root", context)
        last, last_at = None, 0
        fast = getattr(self, "_bw_fast_runs", None)  # set by the generated module
        runs = self.__dict__.get("_bw_runs")
        if runs is None:
            runs = self._bw_runs = self._runs() if fast is None else {
                i: fast[sc.name] for i, sc in enumerate(self.subcons) if sc.name in fast}
        version = getattr(self, "_bw_version_at", None)  # read first by the fast path
        if version is not None:
            self._check_version(version, stream, context)
        for i, sc in enumerate(self.subcons):
            start = stream.tell()
            name = sc.name if sc.name and not sc.name.startswith("_") else None
            if i in runs:  # a fixed run is read whole, as on the fast path
                self._check_run(runs[i], stream, start)
            try:
                subobj = sc._parsereport(stream, context, path)
            except cs.StopFieldError:
                break
            except Exception as exc:
                if isinstance(sc, VersionCheck) and sc.dispatch:
                    # the fast path's dispatcher: at the record's start
                    name, start = sc._bw_field, context.get("_o_start", start)
                elif isinstance(sc, VersionCheck):  # an ``unsupported`` assert of a field
                    name = sc._bw_field
                    start = last_at if name == last else start
                elif isinstance(sc, FieldCheck) and last is not None:
                    # a rule reported on another name (a bit field): at the member it follows
                    name, start = sc._bw_field, last_at
                elif name is None and sc.name is None and last is not None:
                    name, start = last, last_at
                note(exc, start, name)
                raise
            if sc.name:
                obj[sc.name] = subobj
                context[sc.name] = subobj
            if name is not None:
                last, last_at = name, start
        return obj

    def _build(self, obj, stream, context, path):
        # Construct's own loop, noting the member a failure leaves through (an unnamed
        # check belongs to the named member before it), as ``_parse`` does
        if obj is None:
            obj = cs.Container()
        context = cs.Container(_=context, _params=context._params, _root=None,
                               _parsing=context._parsing, _building=context._building,
                               _sizing=context._sizing, _subcons=self._subcons, _io=stream,
                               _index=context.get("_index", None))
        context._root = context._.get("_root", context)
        context.update(obj)
        last = None
        for sc in self.subcons:
            name = sc.name if sc.name and not sc.name.startswith("_") else None
            try:
                subobj = obj.get(sc.name, None) if sc.flagbuildnone else obj[sc.name]
                if sc.name:
                    context[sc.name] = subobj
                buildret = sc._build(subobj, stream, context, path)
                if sc.name:
                    context[sc.name] = buildret
            except cs.StopFieldError:
                break
            except Exception as exc:
                field = getattr(sc, "_bw_field", None)
                note(exc, 0, field or (name if name is not None or sc.name else last))
                raise
            if name is not None:
                last = name
        return context

    def _runs(self) -> dict[int, tuple[int, list]]:
        """The fixed runs the compiled parse reads in one unpack: first member -> (size,
        [(field path, offset, size)]); a length prefix that ends a run is ``name.length``."""
        out: dict[int, tuple[int, list]] = {}
        subs = list(self.subcons)
        i = 0
        while i < len(subs):
            first, parts, codes, off = i, [], [], 0
            while i < len(subs):
                part = _fixed_part(subs[i])
                if part is None or (part[2] and _joined(codes + [part[1]]) is None):
                    break
                if part[2]:
                    codes.append(part[1])
                    name = subs[i].name or ""
                    if part[0] in ("pascal", "prefixed", "parray"):
                        name += ".length"
                    parts.append((name, off, part[2]))
                    off += part[2]
                i += 1
                if part[0] in ("pascal", "prefixed", "parray"):
                    break
            if parts:
                out[first] = (off, parts)
            if i == first:
                i += 1
        return out

    def _check_version(self, version: tuple, stream, context) -> None:
        """The version field, read and checked before the rest as the fast path's
        dispatcher does: (field, offset, size, struct code, known versions, range,
        record)."""
        name, off, size, code, known, accepted, record = version
        at = stream.tell()
        if _stream_end(stream) - at < off + size:
            exc = TruncatedError("version truncated", offset=at)
        else:
            stream.seek(at + off)
            ver = struct.unpack(code, stream.read(size))[0]
            stream.seek(at)
            if ver in known:
                return
            exc = UnsupportedError(f"unsupported {record} version", offset=at,
                                   expected=accepted, found=ver)
        note(exc, at, name)
        raise exc

    @staticmethod
    def _check_run(run: tuple[int, list], stream, start: int) -> None:
        size, parts = run
        have = _stream_end(stream) - start
        if have >= size:
            return
        for name, off, n in parts:
            if off + n > have:
                exc = TruncatedError("field truncated", offset=start + off, expected=n,
                                     found=max(have - off, 0))
                note(exc, start + off, name)
                raise exc

    def compile(self, filename=None):
        """Construct's ``compile()``; records with a model builder (``_bw_model``, set by
        the generated module) build the model objects in the compiled parse."""
        with _COMPILING:
            CompileState.root, CompileState.pending = self, {}
            try:
                compiled = super().compile(filename)
            finally:
                pending = CompileState.pending
                CompileState.root, CompileState.pending = None, None
        compiled.module.__dict__.update(pending)
        return compiled

    def _model_expr(self, code, local: dict[str, str], root: bool) -> str | None:
        """Source building this record's model from its field locals (and parameters),
        when it has a builder and nothing reads its value as a Container: as the root of
        the compile (or a member its parent keeps to itself, see :meth:`_flat_body`), or
        as an opaque record (no expression reads its members)."""
        model = getattr(self, "_bw_model", None)
        pending = CompileState.pending
        if model is None or pending is None:
            return None
        fn, names, params, opaque = model
        if not (root or opaque) or any(n not in local for n in names):
            return None
        name = _bind(pending, "bwmodel", fn)
        args = [local[n] for n in names] + [f"this['_params'][{p!r}]" for p in params]
        return f"{name}({', '.join(args)})"

    def _emitparse(self, code):
        fid = code.allocateId()
        fname = f"parse_record_{fid}"
        _read_exact(code)
        _bw(code)
        code.append("from bytewright.runtime.codec import Compiled")  # see Compiled
        root = CompileState.root is self
        if root:
            CompileState.root = None
        subs = list(self.subcons)
        if self._context_free(subs):
            flat = self._emit_flat(code, fid, subs, root)
            if flat is not None:
                return flat
        body: list[str] = [
            "this = Container(_params=this['_params'], _parsing=True, _building=False, "
            "_sizing=False, _io=io)"]
        i = 0
        while i < len(subs):
            run = []
            while i < len(subs):
                part = _fixed_part(subs[i])
                if part is None:
                    break
                trial = [p for _, p in run] + [part]
                if _joined([p[1] for p in trial if p[2]]) is None:
                    break
                run.append((subs[i], part))
                i += 1
                if part[0] in ("pascal", "prefixed", "parray"):
                    break
            if any(p[2] for _, p in run):
                body += self._emit_run(code, fid, run)
            elif run:  # Tell markers alone
                body += [f"this[{sc.name!r}] = io.tell()" for sc, _ in run if sc.name]
            if i < len(subs) and (not run or _fixed_part(subs[i]) is None):
                sc = subs[i]
                inline = self._inline(sc, code)
                if isinstance(sc, cs.Check):  # inline: Check's own error, no call
                    body += [f"if not ({sc.func!r}):", "    " + _check_raise(sc, code)]
                elif inline is not None:
                    body += [x.replace(_CALLER, "this") for x in inline]
                else:
                    expr = sc._compileparse(code)
                    body.append(f"this[{sc.name!r}] = {expr}" if sc.name else expr)
                i += 1
        body.append("return this")
        code.append(f"def {fname}(io, this):\n" + "\n".join("    " + b for b in body))
        return f"{fname}(io, this)"

    @staticmethod
    def _inline(sc: cs.Construct, code: Any = None) -> list[str] | None:
        """Statements parsing ``sc`` in the record's function, for the members common
        enough to be worth it (their helpers' checks and errors, without the call).
        Without ``code``, only whether it would (an empty list for members whose
        statements need ``code``)."""
        inner = sc.subcon if isinstance(sc, cs.Renamed) else sc
        target = f"this[{sc.name!r}] = " if sc.name else ""
        if isinstance(inner, WithParams) and isinstance(inner.subcon, Struct):
            # the callee's parameters set here: no helper call, no context for it
            if code is None:
                return []
            m = re.fullmatch(r"(\w+)\(io, this\)", inner.subcon._compileparse(code))
            if m is None:
                return None
            return ([f"_q = {_params_for(inner.subcon, inner.args)}"]
                    + [f"_q[{k!r}] = {v!r}" for k, v in inner.args.items()]
                    + [f"{target}{m.group(1)}(io, {{'_params': _q}})"])
        if isinstance(inner, cs.Switch) and code is not None:
            return _switch_lines(inner, code, "io", target)
        if isinstance(inner, FixedSized):
            # the section read once, parsed from its own stream, which it must fill
            if code is None:
                return []
            sub = _switch_lines(inner.subcon, code, "_fs", target)
            if sub is None:
                sub = _rename(inner.subcon._compileparse(code), "io", "_fs")
                if sub is None:
                    return None
                sub = [target + sub]
            return [f"_n = {inner.length!r}",
                    "_b = io.read(_n)",
                    "if len(_b) != _n:",
                    "    raise _bw.short_read(_n, _b)",
                    "_fs = BytesIO(_b)",
                    *sub,
                    "if _fs.tell() != _n:",
                    "    raise StreamError('section size mismatch: %d of %d bytes used' "
                    "% (_fs.tell(), _n))"]
        if isinstance(inner, Array):
            many = _items_source(inner.subcon, f"({inner.count!r})", code,
                                 getattr(inner, "_bw_packed", None))
            return None if many is None else [target + many]
        if isinstance(inner, cs.Bytes) and not isinstance(inner.length, int):
            return [f"_n = {inner.length!r}",
                    "_b = io.read(_n)",
                    "if len(_b) != _n:",
                    "    raise _bw.short_read(_n, _b)",
                    target + "_b"]
        if isinstance(inner, Leb128) and inner.kind == "uleb128":
            # one byte below 0x80 is the whole varint; else Leb128's own decoding
            return ["_b = io.read(1)",
                    "if _b and _b[0] < 0x80:",
                    f"    {target}_b[0]",
                    "else:",
                    f"    {target}_bw.leb128_rest(io, _b, 'uleb128')"]
        if isinstance(inner, ZeroPadding):
            out = [f"_n = {inner.length!r}",
                   "_p = io.tell()",
                   "_b = io.read(_n)",
                   "if len(_b) != _n:",
                   "    raise _bw.short_read(_n, _b)"]
            if not inner.arbitrary:
                out += ["if _b.count(0) != _n:",
                        "    raise _bw.ConstraintError('padding must be zero', offset=_p, "
                        "path='')"]
            return out + ([target + "None"] if target else [])
        return None

    @classmethod
    def _context_free(cls, subs: list) -> bool:
        """The record needs no context of its own: its fields become locals of its
        parser (expressions inlined in it read them), members parsed by a call read only
        ``_params`` (they get the caller's context, which holds the same) or write nothing
        into the context (they get a dict of the fields so far), and its result is built
        once at the end."""
        for sc in subs:
            part = _fixed_part(sc)
            if part is None:
                if isinstance(sc, cs.Check) or cls._inline(sc):  # [] needs the checks below
                    continue
                if not (_reads_only_params(sc) or _pure(sc)):
                    return False
                continue
            if part[0] == "parray":
                item = _inner(sc)._bw_item
                if not isinstance(item, (Struct, cs.FormatField)):
                    return False
        return True

    def _emit_flat(self, code, fid: int, subs: list, root: bool = False) -> str | None:
        """The record's parser with its fields in locals (see :meth:`_context_free`), or
        None if some member's source cannot be rewritten so."""
        got = self._flat_body(code, fid, subs, 0, root)
        if got is None:
            return None
        body, fields, model, _ = got
        body.append(f"return {model}" if model else
                    f"return Container({{{', '.join(fields)}}})")
        self._bw_params_read = _params_read(body)
        fname = f"parse_record_{fid}"
        code.append(f"def {fname}(io, this):\n" + "\n".join("    " + b for b in body))
        return f"{fname}(io, this)"

    # nested records are flattened into their parent this deep at most (code size)
    _FLATTEN_DEPTH = 4
    _FLATTEN_LINES = 400

    def _flat_child(self, code, sc: cs.Construct, depth: int) -> tuple | None:
        """A member that is a nested record (maybe with parameters of its own), flattened:
        (statements preparing its context, its statements, its result), or None."""
        inner = sc.subcon if isinstance(sc, cs.Renamed) else sc
        args = None
        if isinstance(inner, WithParams):
            args, inner = inner.args, inner.subcon
        if not isinstance(inner, Struct) or depth >= self._FLATTEN_DEPTH:
            return None
        subs = list(inner.subcons)
        if not inner._context_free(subs):
            return None
        cid = code.allocateId()
        got = inner._flat_body(code, cid, subs, depth + 1)
        if got is None or len(got[0]) > self._FLATTEN_LINES:
            return None
        cbody, cfields, model, clocal = got
        result = [model] if model else [f"Container({{{', '.join(cfields)}}})"]
        # not opaque: still a model if its parent reads none of its members (see
        # _flat_body), which the parent knows once it is emitted
        late = None if model else inner._model_expr(code, clocal, True)
        keys = list(clocal)
        result += [late or "None"] + [clocal[k] for k in keys]
        ctx = "this"
        pre: list[str] = []
        if args is not None:  # its parameters: the caller's with these replaced
            ctx = f"_t{cid}"
            pre = (["_q = dict(this['_params'])"]
                   + [f"_q[{k!r}] = {v!r}" for k, v in args.items()]
                   + [f"{ctx} = {{'_params': _q}}"])

        def own(name: str) -> str | None:  # its locals renamed apart from the parent's
            if name == "this":
                return ctx
            return f"{name}_{cid}" if re.fullmatch(r"_f\d+", name) else None

        out = [_retoken(x, own) for x in cbody + result]
        if any(x is None for x in out):
            return None
        if args is not None:
            # parameters it reads by name become locals; the copied parameters are
            # needed only if something still reads its context
            names = {k: f"_a{cid}_{n}" for n, k in enumerate(args)}
            param = re.compile(re.escape(ctx) + r"\['_params'\]\[('\w+')\]")

            def sub(m: re.Match) -> str:
                return names.get(m.group(1)[1:-1], m.group(0))

            out = [param.sub(sub, x) for x in out]
            binds = [f"{names[k]} = {v!r}" for k, v in args.items()]
            if any(re.search(rf"\b{ctx}\b", x) for x in out):
                pre = binds + pre
            else:
                pre = binds + ["pass"]  # the last statement is not taken: see caller
        n = len(cbody)
        fieldmap = dict(zip(keys, out[n + 2:], strict=True))
        late = out[n + 1] if late else None
        return pre, out[:n], out[n], late, fieldmap

    def _flat_body(self, code, fid: int, subs: list, depth: int,
                   root: bool = False) -> tuple | None:
        """(statements, ``'name': local`` of each field, source of the model built from
        them or None, the field locals) of the record's parse with its fields in locals."""
        import ast

        body: list[str] = []
        fields: list[str] = []
        local: dict[str, str] = {}
        nested: list[tuple] = []  # (its local, result, model or None, its field locals)
        assign = re.compile(r"(\s*)this\[('(?:[^'\\]|\\.)*')\] = (.*)$", re.S)

        def take(lines: list[str], params_only: bool = False) -> bool:
            for line in lines:
                m = assign.match(line)
                if m:
                    indent, key, rhs = m.groups()
                    line = indent + rhs
                # a call reading only parameters gets the caller's context as it is
                got = (line, False) if params_only else _localize(line, local)
                if got is None:
                    return False
                line, needs = got
                line = line.replace(_CALLER, "this")
                if needs:  # a call that reads fields: hand it them in a context
                    items = "".join(f", {k!r}: {v}" for k, v in local.items())
                    lead = line[:len(line) - len(line.lstrip())]
                    # a plain dict: compiled code reads contexts by item only
                    body.append(f"{lead}_ctx = {{'_params': this['_params'], "
                                f"'_parsing': True, '_building': False, '_sizing': False, "
                                f"'_io': io{items}}}")
                if m:
                    name = ast.literal_eval(key)
                    var = local.get(name)
                    if var is None:
                        var = local[name] = f"_f{len(fields)}"
                        fields.append(f"{key}: {var}")
                    rhs = line.lstrip()
                    line = line[:len(line) - len(rhs)] + f"{var} = {rhs}"
                body.append(line)
            return True

        i = 0
        while i < len(subs):
            if _fixed_part(subs[i]) is None:
                sc = subs[i]
                if isinstance(sc, cs.Check):
                    lines = [f"if not ({sc.func!r}):", "    " + _check_raise(sc, code)]
                else:
                    child = self._flat_child(code, sc, depth)
                    if child is not None:
                        pre, cbody, result, late, fieldmap = child
                        # the preparation reads this record's fields; the child's own
                        # statements read only its context and locals
                        if not take(pre[:-1]):
                            return None
                        body.extend([x for x in pre[-1:] if x != "pass"] + cbody)
                        if not take([f"this[{sc.name!r}] = {result}" if sc.name else result],
                                    params_only=True):
                            return None
                        if sc.name:
                            nested.append((local[sc.name], result, late, fieldmap))
                        i += 1
                        continue
                    lines = self._inline(sc, code)
                    if lines is None:
                        expr = sc._compileparse(code)
                        lines = [f"this[{sc.name!r}] = {expr}" if sc.name else expr]
                        if _reads_only_params(sc):
                            if not take(lines, params_only=True):
                                return None
                            i += 1
                            continue
                if not take(lines):
                    return None
                i += 1
                continue
            run = []
            while i < len(subs):
                part = _fixed_part(subs[i])
                if part is None:
                    break
                trial = [p for _, p in run] + [part]
                if _joined([p[1] for p in trial if p[2]]) is None:
                    break
                run.append((subs[i], part))
                i += 1
                if part[0] in ("pascal", "prefixed", "parray"):
                    break
            lines = self._emit_run(code, fid, run) if any(p[2] for _, p in run) else \
                [f"this[{sc.name!r}] = io.tell()" for sc, _ in run if sc.name]
            if not take(lines):
                return None
        model = self._model_expr(code, local, root)
        for var, result, late, fieldmap in nested:
            # a member of a nested record read here is that record's local
            item = re.compile(rf"\b{var}\[('(?:[^'\\]|\\.)*')\]")

            def member(m: re.Match, fieldmap: dict = fieldmap) -> str:
                return fieldmap.get(ast.literal_eval(m.group(1)), m.group(0))

            made = f"{var} = {result}"
            body = [x if x.strip() == made else item.sub(member, x) for x in body]
            if model is not None and late is not None and not any(
                    re.search(rf"\b{var}\b", x) for x in body if x.strip() != made):
                # only this record's model holds it: the nested record's model too
                body = [x.replace(made, f"{var} = {late}") if x.strip() == made else x
                        for x in body]
        return body, fields, model, local

    def _emit_run(self, code, fid: int, run: list) -> list[str]:
        sized = [(sc, p) for sc, p in run if p[2]]
        fmt = _joined([p[1] for _, p in sized])
        sname = f"run_{fid}_{code.allocateId()}"
        code.append(f"{sname} = struct.Struct({fmt!r})")
        size = sum(p[2] for _, p in sized)
        names = [f"_v{k}" for k in range(len(sized))]
        need_p = any(p[0] in ("tell", "enum") for _, p in run)
        out = ["_p = io.tell()"] if need_p else []
        out += [f"_b = io.read({size})",
               f"if len(_b) != {size}:",
               f"    raise _bw.short_read({size}, _b)",
               # one unsigned byte is read by index, one byte string is the read itself
               # (no unpack call)
               f"{names[0]} = _b[0]" if fmt[1:] == "B" else
               f"{names[0]} = _b" if re.fullmatch(r"\d*s", fmt[1:]) else
               f"{', '.join(names)}, = {sname}.unpack(_b)"]
        off = 0
        k = 0
        for sc, (kind, _, n) in run:
            name = sc.name
            if kind == "tell":
                if name:
                    out.append(f"this[{name!r}] = _p + {off}")
                continue
            v = names[k]
            k += 1
            inner = _inner(sc)
            if kind == "bigint":
                order = "little" if inner.swapped else "big"
                v = f"int.from_bytes({v}, {order!r}, signed={inner.signed})"
            elif kind == "const":
                out.append(f"if {v} != {inner.value!r}:")
                out.append(f"    raise ConstError('parsing expected %r but parsed %r' % "
                           f"({inner.value!r}, {v}))")
            elif kind == "flags":
                check, v = inner.split_source(v)
                out += check.split("\n")
            elif kind == "enum":
                out.append(f"if {v} not in {set(inner.values)!r}:")
                out.append(f"    raise {_link(code, inner)}.refuse({v}, _p + {off}, {name or ''!r})")
            elif kind in ("pascal", "prefixed"):
                out += [f"_b = io.read({v})",
                        f"if len(_b) != {v}:",
                        f"    raise _bw.short_read({v}, _b)"]
                v = "_b" if kind == "prefixed" else f"_b.decode({inner._bw_encoding!r})"
            elif kind == "parray":
                v = _items_source(inner._bw_item, v, code,
                                  getattr(inner, "_bw_packed", None)) or (
                    f"ListContainer([{inner._bw_item._compileparse(code)} "
                    f"for i in range({v})])")
            off += n
            if name:
                out.append(f"this[{name!r}] = {v}")
            elif kind in ("pascal", "prefixed", "parray"):
                out.append(v)
        return out


