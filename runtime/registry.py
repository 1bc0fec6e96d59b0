"""The public registry of checksums, compression codecs and numeric conversions.

Stability: this module is public API (``bytewright.runtime.registry``). Generated modules
look algorithms up here by name, so a user's format can name its own algorithms.

A plug-in is a ``module:function`` string; :func:`load_plugin` imports the module and
calls ``function(registry)`` once (loading the same spec again does nothing). The
built-ins (crc32, crc32c, xxh3_64, blake3; zstd, zlib, deflate, lz4; q64.64, tq1.9,
zigzag) register themselves through exactly this mechanism, from
:data:`BUILTIN_PLUGINS`. A plug-in registers what the generator needs to validate a
schema: a checksum's width in bits, whether it takes a seed (so it can be seeded from a
field or chained from the previous record) and which keyword parameters it accepts; a
codec's compress/decompress with a hard output cap and whether its stream is
self-terminating; a numeric conversion's decode/encode pair.

Example plug-in::

    def register(reg):
        reg.add_checksum("sum16", bits=16, func=lambda data, seed=0: (seed + sum(data)) & 0xFFFF,
                         seeded=True)
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import BytewrightError, ConstraintError, EncodeError, UnsupportedError

Buffer = bytes | bytearray | memoryview

# Plug-ins of the package itself, loaded when this module is first imported.
BUILTIN_PLUGINS = (
    "bytewright.runtime.checksums:register",
    "bytewright.runtime.compression:register",
    "bytewright.runtime.fixedpoint:register",
    "bytewright.runtime.numbers:register",
)


class CodecFailure(Exception):
    """Raised by a codec's decompress function; the runtime turns it into a DecodeError
    (a :class:`~bytewright.runtime.errors.TruncatedError` when ``truncated``)."""

    def __init__(self, why: str, *, truncated: bool = False) -> None:
        super().__init__(why)
        self.why = why
        self.truncated = truncated


@dataclass(frozen=True)
class ChecksumSpec:
    """A registered checksum.

    ``func(data, seed=None, **params)`` returns an int below ``2**bits`` (``digest=False``)
    or ``bits // 8`` bytes (``digest=True``). ``seeded`` says whether a seed is accepted
    (seeded from a field, or chained from the previous record of a repeat); ``params``
    names the keyword parameters a schema may pass (as expressions).
    """

    name: str
    bits: int
    func: Callable[..., int | bytes]
    seeded: bool = False
    params: tuple[str, ...] = ()
    digest: bool = False
    doc: str = ""
    safe: bool = False  # never raises on any bytes (else failures become DecodeErrors)
    # the same checksum as ``func(data)`` with no seed and no params, as a C callable
    # generated modules may bind directly (no Python frame per checksum)
    fast: Callable[[Buffer], int | bytes] | None = None
    # a checksum whose width is one of its params (a parametrised CRC): the schema's
    # constant value of this param is the width the stored field is held to
    width_param: str | None = None

    def bind(self, store_bits: int | None = None) -> Callable[..., int | bytes]:
        """The callable generated code uses: the function itself, or one keeping the low
        ``store_bits`` bits (a checksum stored truncated); a plug-in function not declared
        ``safe`` is wrapped so that whatever it raises is the project's error."""
        if not self.safe:
            return dataclasses.replace(self, safe=True, func=_guarded(self.name, self.func)) \
                .bind(store_bits)
        if store_bits is None or store_bits >= self.bits:
            return self.func
        if self.digest:
            nbytes = store_bits // 8
            func = self.func

            def truncated_digest(data: Buffer, *args: Any, **kw: Any) -> bytes:
                return bytes(func(data, *args, **kw))[:nbytes]
            return truncated_digest
        mask = (1 << store_bits) - 1
        func = self.func

        def truncated(data: Buffer, *args: Any, **kw: Any) -> int:
            return int(func(data, *args, **kw)) & mask
        return truncated


def _guarded(name: str, func: Callable[..., int | bytes]) -> Callable[..., int | bytes]:
    def guarded(data: Buffer, *args: Any, **kw: Any) -> int | bytes:
        try:
            return func(data, *args, **kw)
        except BytewrightError:
            raise
        except Exception as exc:  # noqa: BLE001 - a plug-in's failure is a decode error
            raise ConstraintError(f"{name} checksum failed: {type(exc).__name__}: {exc}") \
                from None
    return guarded


@dataclass(frozen=True)
class CodecSpec:
    """A registered compression codec.

    ``decompress(data, limit)`` turns exactly one whole stream into at most ``limit``
    bytes, raising :class:`CodecFailure` otherwise; it must never allocate much more than
    ``limit`` (or than a small multiple of ``len(data)``). A ``self_terminating`` codec
    also has ``decompress_prefix(data, limit) -> (plain, consumed)``, which finds the end
    of a stream that is followed by other bytes (a region with no length prefix).
    """

    name: str
    compress: Callable[[bytes], bytes]
    decompress: Callable[[bytes, int], bytes]
    self_terminating: bool = False
    decompress_prefix: Callable[[bytes, int], tuple[bytes, int]] | None = None
    doc: str = ""


@dataclass(frozen=True)
class NumericSpec:
    """A registered numeric conversion between a stored integer and a model value.

    ``decode(raw) -> value`` and ``encode(value) -> raw``; both may raise the project's
    errors for values outside their domain. ``raw_model`` marks a kind whose object model
    keeps the raw integer (``fixed_point:`` types such as Q64.64), converted by helpers.
    """

    name: str
    decode: Callable[[int], Any]
    encode: Callable[[Any], int]
    signed: bool | None = None  # the stored integer's signedness this kind needs, if any
    raw_model: bool = False
    doc: str = ""
    annotation: str = "object"  # the model's type annotation for converted fields


@dataclass(frozen=True)
class IntegerKindSpec:
    """A registered integer kind: how one integer is read from and written to bytes.

    ``decode(buf, offset, *, path, **params) -> (value, end)`` reads one integer at
    ``offset`` (``buf`` ends where the enclosing region ends) and raises the project's
    decode errors with absolute offsets; ``encode(value, **params) -> bytes`` writes the
    canonical form or raises :class:`~bytewright.runtime.errors.EncodeError`. ``max_bytes``
    (an int, or a function of the params) bounds how far a read looks ahead; ``params``
    names the keyword parameters a schema may give (``required`` must be given);
    ``check(**params)`` raises ``ValueError`` for params the kind cannot honour;
    ``bounds`` (a pair, or a function of the params) is the inclusive range of values it
    can write (default: unsigned or signed 64-bit); ``fixed_width`` kinds always take
    exactly ``max_bytes`` bytes (they may then hold a checksum or a size patched later).
    """

    name: str
    decode: Callable[..., tuple[int, int]]
    encode: Callable[..., bytes]
    max_bytes: int | Callable[..., int]
    signed: bool = False
    params: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    check: Callable[..., None] | None = None
    doc: str = ""
    bounds: tuple[int, int] | Callable[..., tuple[int, int]] | None = None
    fixed_width: bool = False  # always exactly ``max_bytes`` bytes (ASCII digits)


class IntegerCodec:
    """One integer kind with its params bound: what generated modules call on both codec
    paths (``decode(mv, pos, end, path)``, ``encode(value)``)."""

    def __init__(self, spec: IntegerKindSpec, params: dict[str, Any]) -> None:
        self.spec = spec
        self.name = spec.name
        self.params = params
        self.signed = spec.signed
        mb = spec.max_bytes
        self.max_bytes = int(mb(**params) if callable(mb) else params.get("max_bytes", mb))
        self._decode = spec.decode
        self._encode = spec.encode
        b = spec.bounds
        if b is None:
            b = (-(1 << 63), (1 << 63) - 1) if spec.signed else (0, (1 << 64) - 1)
        self.bounds: tuple[int, int] = tuple(b(**params) if callable(b) else b)
        # the exact width of a fixed-width kind (patched in place like a binary integer)
        self.fixed: int | None = self.max_bytes if spec.fixed_width else None

    def decode(self, mv: Buffer, pos: int, end: int, path: str) -> tuple[int, int]:
        if end != len(mv):
            mv = (mv if isinstance(mv, memoryview) else memoryview(mv))[:end]
        try:
            return self._decode(mv, pos, path=path, **self.params)
        except BytewrightError:
            raise
        except Exception as exc:  # noqa: BLE001 - a plug-in's failure is a decode error
            raise ConstraintError(f"{self.name} integer failed: {type(exc).__name__}: {exc}",
                                  offset=pos, path=path) from None

    def encode(self, value: Any) -> bytes:
        try:
            return bytes(self._encode(value, **self.params))
        except BytewrightError:
            raise
        except Exception as exc:  # noqa: BLE001 - a plug-in's failure is an encode error
            raise EncodeError(f"{self.name} integer failed: {type(exc).__name__}: {exc}") \
                from None


class Registry:
    """Named checksums, codecs and numeric conversions, and the plug-ins that added them."""

    def __init__(self) -> None:
        self.checksums: dict[str, ChecksumSpec] = {}
        self.codecs: dict[str, CodecSpec] = {}
        self.numerics: dict[str, NumericSpec] = {}
        self.integer_kinds: dict[str, IntegerKindSpec] = {}
        self._int_codecs: dict[tuple, IntegerCodec] = {}
        self.plugins: list[str] = []
        self._binds: dict[tuple[str, int | None], Callable[..., int | bytes]] = {}

    # -- registration -------------------------------------------------------------
    def add_checksum(self, name: str, *, bits: int, func: Callable[..., int | bytes],
                     seeded: bool = False, params: tuple[str, ...] | list[str] = (),
                     digest: bool = False, doc: str = "", safe: bool = False,
                     fast: Callable[[Buffer], int | bytes] | None = None,
                     width_param: str | None = None) -> ChecksumSpec:
        """Register a checksum (re-registering the same name replaces it). ``safe``
        declares that ``func`` never raises; otherwise its exceptions are translated.
        ``fast`` is an optional equivalent of ``func(data)`` (no seed, no params).
        ``width_param`` names the param giving the width in bits (``bits`` is then the
        widest it may be)."""
        if bits <= 0 or (digest and bits % 8):
            raise ValueError(f"checksum {name!r}: bad width {bits} bits")
        if width_param is not None and width_param not in params:
            raise ValueError(f"checksum {name!r}: width_param {width_param!r} is not a param")
        spec = ChecksumSpec(name, bits, func, seeded, tuple(params), digest, doc, safe, fast,
                            width_param)
        self.checksums[name] = spec
        self._binds = {k: v for k, v in self._binds.items() if k[0] != name}
        return spec

    def add_codec(self, name: str, *, compress: Callable[[bytes], bytes],
                  decompress: Callable[[bytes, int], bytes], self_terminating: bool = False,
                  decompress_prefix: Callable[[bytes, int], tuple[bytes, int]] | None = None,
                  doc: str = "") -> CodecSpec:
        """Register a compression codec (self-terminating ones need ``decompress_prefix``)."""
        if self_terminating and decompress_prefix is None:
            raise ValueError(f"codec {name!r}: a self-terminating codec needs decompress_prefix")
        spec = CodecSpec(name, compress, decompress, self_terminating, decompress_prefix, doc)
        self.codecs[name] = spec
        return spec

    def add_numeric(self, name: str, *, decode: Callable[[int], Any],
                    encode: Callable[[Any], int], signed: bool | None = None,
                    raw_model: bool = False, doc: str = "",
                    annotation: str = "object") -> NumericSpec:
        """Register a numeric conversion (raw stored integer <-> model value)."""
        spec = NumericSpec(name, decode, encode, signed, raw_model, doc, annotation)
        self.numerics[name] = spec
        return spec

    def add_integer_kind(self, name: str, *, decode: Callable[..., tuple[int, int]],
                         encode: Callable[..., bytes], max_bytes: int | Callable[..., int],
                         signed: bool = False, params: tuple[str, ...] | list[str] = (),
                         required: tuple[str, ...] | list[str] = (),
                         check: Callable[..., None] | None = None, doc: str = "",
                         bounds: tuple[int, int] | Callable[..., tuple[int, int]] | None = None,
                         fixed_width: bool = False) -> IntegerKindSpec:
        """Register an integer kind (see :class:`IntegerKindSpec`); a schema then names it
        wherever an integer encoding is accepted."""
        if not callable(max_bytes) and (not isinstance(max_bytes, int) or max_bytes < 1):
            raise ValueError(f"integer kind {name!r}: max_bytes must be a positive int")
        if not set(required) <= set(params):
            raise ValueError(f"integer kind {name!r}: required params must be params")
        spec = IntegerKindSpec(name, decode, encode, max_bytes, signed, tuple(params),
                               tuple(required), check, doc, bounds, fixed_width)
        self.integer_kinds[name] = spec
        self._int_codecs = {k: v for k, v in self._int_codecs.items() if k[0] != name}
        return spec

    # -- plug-ins -------------------------------------------------------------------
    def load_plugin(self, spec: str) -> None:
        """Import ``module:function`` and call ``function(self)``, once per spec."""
        if spec in self.plugins:
            return
        module_name, sep, func_name = spec.partition(":")
        if not sep or not module_name or not func_name:
            raise ValueError(f"plug-in {spec!r} must look like 'module:function'")
        module = importlib.import_module(module_name)
        func = getattr(module, func_name, None)
        if not callable(func):
            raise ValueError(f"plug-in {spec!r}: {module_name} has no function {func_name!r}")
        # Recorded first so a plug-in that (indirectly) loads itself does not recurse.
        self.plugins.append(spec)
        try:
            func(self)
        except BaseException:
            self.plugins.remove(spec)
            raise

    # -- look-ups -------------------------------------------------------------------
    def checksum(self, name: str) -> ChecksumSpec:
        try:
            return self.checksums[name]
        except KeyError:
            raise UnsupportedError(f"unknown checksum algorithm {name!r}",
                                   expected=sorted(self.checksums), found=name) from None

    def codec(self, name: str, *, offset: int | None = None, path: str = "") -> CodecSpec:
        try:
            return self.codecs[name]
        except KeyError:
            raise UnsupportedError(f"unknown compression algorithm {name!r}", offset=offset,
                                   path=path, expected=sorted(self.codecs),
                                   found=name) from None

    def numeric(self, name: str) -> NumericSpec:
        try:
            return self.numerics[name]
        except KeyError:
            raise UnsupportedError(f"unknown numeric conversion {name!r}",
                                   expected=sorted(self.numerics), found=name) from None

    def integer_kind(self, name: str) -> IntegerKindSpec:
        try:
            return self.integer_kinds[name]
        except KeyError:
            raise UnsupportedError(f"unknown integer kind {name!r}",
                                   expected=sorted(self.integer_kinds), found=name) from None

    def integer_codec(self, name: str, params: dict[str, Any] | None = None) -> IntegerCodec:
        """The bound kind generated modules keep (one per kind and params)."""
        params = dict(params or {})
        key = (name, tuple(sorted(params.items())))
        codec = self._int_codecs.get(key)
        if codec is None:
            codec = self._int_codecs[key] = IntegerCodec(self.integer_kind(name), params)
        return codec

    def checksum_func(self, name: str, store_bits: int | None = None, *,
                      fast: bool = False) -> Callable[..., Any]:
        """The bound checksum callable generated modules keep (cached per width).
        ``fast=True`` (every call site passes only the data) returns the spec's ``fast``
        callable when it has one, is safe and is stored untruncated."""
        spec = self.checksum(name)
        if fast and spec.fast is not None and spec.safe \
                and (store_bits is None or store_bits >= spec.bits):
            return spec.fast
        key = (name, store_bits)
        fn = self._binds.get(key)
        if fn is None:
            fn = self._binds[key] = spec.bind(store_bits)
        return fn


REGISTRY = Registry()
"""The process-wide registry generated modules and the runtime use."""


def load_plugin(spec: str) -> None:
    """Load a ``module:function`` plug-in into :data:`REGISTRY` (idempotent)."""
    REGISTRY.load_plugin(spec)


def checksum(name: str) -> ChecksumSpec:
    return REGISTRY.checksum(name)


def codec(name: str) -> CodecSpec:
    return REGISTRY.codec(name)


def numeric(name: str) -> NumericSpec:
    return REGISTRY.numeric(name)


def integer_codec(name: str, params: dict[str, Any] | None = None) -> IntegerCodec:
    return REGISTRY.integer_codec(name, params)


def checksum_func(name: str, store_bits: int | None = None, *,
                  fast: bool = False) -> Callable[..., Any]:
    return REGISTRY.checksum_func(name, store_bits, fast=fast)


for _spec in BUILTIN_PLUGINS:
    REGISTRY.load_plugin(_spec)
