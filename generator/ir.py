"""The typed intermediate representation: what every later pass works on.

The resolve pass turns YAML data into these objects; the layout pass adds fixed sizes and
offsets; the emitters and ``doc``/``diff`` read them. Nothing here knows about YAML,
Jinja or Construct.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .expr import Expr

_STRUCT_CODES = {(8, False): "B", (8, True): "b", (16, False): "H", (16, True): "h",
                 (32, False): "I", (32, True): "i", (64, False): "Q", (64, True): "q"}


@dataclass(frozen=True)
class IntT:
    """A fixed-width integer; widths without a ``struct`` code (24, 128) use int.from_bytes."""

    bits: int
    signed: bool
    endian: str = "le"
    # written without a suffix (u32): a data-chosen byte order governs it
    governed: bool = field(default=False, compare=False, repr=False)

    @property
    def size(self) -> int:
        return self.bits // 8

    @property
    def code(self) -> str | None:
        return _STRUCT_CODES.get((self.bits, self.signed))

    @property
    def name(self) -> str:
        return f"{'i' if self.signed else 'u'}{self.bits}" + ("be" if self.endian == "be" else "")

    @property
    def lo(self) -> int:
        return -(1 << (self.bits - 1)) if self.signed else 0

    @property
    def hi(self) -> int:
        return (1 << (self.bits - 1)) - 1 if self.signed else (1 << self.bits) - 1


@dataclass(frozen=True)
class FloatT:
    bits: int
    endian: str = "le"
    governed: bool = field(default=False, compare=False, repr=False)

    @property
    def size(self) -> int:
        return self.bits // 8

    @property
    def code(self) -> str:
        return "f" if self.bits == 32 else "d"

    @property
    def name(self) -> str:
        return f"f{self.bits}" + ("be" if self.endian == "be" else "")


@dataclass(frozen=True)
class BytesT:
    """Raw bytes: fixed ``size``, an expression size, a length ``prefix`` or to end (eos)."""

    size: Expr | None = None
    prefix: IntT | VarintT | None = None  # any integer encoding, varints included
    eos: bool = False
    text: str | None = None  # encoding when this is a string
    terminator: bytes | None = None  # ends at this byte sequence (consumed, not in the value)

    @property
    def name(self) -> str:
        return "str" if self.text else "bytes"


@dataclass(frozen=True)
class VarintT:
    """An integer in a registered integer kind (``bytewright.runtime.numbers``): the
    LEB128 family (``uleb128``, ``sleb128``, ``zigzag``: minimal on write, 64-bit), big-endian
    groups, prefix-length varints, ASCII digits or a plug-in's kind. ``params`` are the
    kind's params (a named type of the schema gives them, ``alias`` is its name)."""

    max_bytes: int = 10
    kind: str = "uleb128"
    params: tuple[tuple[str, object], ...] = ()
    alias: str | None = None
    is_signed: bool | None = None  # from the registry (None: the LEB128 rule)
    fixed: int | None = None  # a fixed-width kind's exact size (ASCII digits)

    @property
    def name(self) -> str:
        return self.alias or self.kind

    @property
    def size(self) -> int:
        return 1  # the smallest encoding (used as a lower bound only)

    @property
    def signed(self) -> bool:
        if self.is_signed is not None:
            return self.is_signed
        return self.kind != "uleb128"

    @property
    def legacy(self) -> bool:
        """One of the LEB128 kinds with no params (emitted with their own inline code)."""
        return self.kind in ("uleb128", "sleb128", "zigzag") and not self.params \
            and self.alias is None


@dataclass(frozen=True)
class PaddingT:
    """Zero bytes up to ``align`` (relative to the record start)."""

    align: int
    name: str = "padding"
    arbitrary: bool = False  # bytes are not verified on decode (written as zeros)


@dataclass
class EnumMember:
    name: str
    value: int
    doc: str = ""
    current: int | None = None  # registries: the id's current version
    accepted: tuple[int, int] | None = None  # registries: inclusive accepted versions


@dataclass
class EnumDef:
    name: str
    base: IntT
    members: list[EnumMember]
    doc: str = ""
    spec: str = ""
    open: bool = False
    retired: list[int] = field(default_factory=list)
    line: int | None = None

    def value_of(self, member: str) -> int | None:
        for m in self.members:
            if m.name == member:
                return m.value
        return None


@dataclass
class FlagBit:
    name: str
    lo: int
    width: int
    enum: str | None = None
    doc: str = ""

    @property
    def mask(self) -> int:
        return ((1 << self.width) - 1) << self.lo


@dataclass
class FlagsDef:
    name: str
    base: IntT
    bits: list[FlagBit]
    doc: str = ""
    spec: str = ""
    line: int | None = None

    @property
    def known_mask(self) -> int:
        mask = 0
        for b in self.bits:
            mask |= b.mask
        return mask


@dataclass
class AliasDef:
    """A named integer type with a meaning, e.g. Q64.64 stored as i128."""

    name: str
    base: IntT
    fixed_point: str | None = None
    doc: str = ""
    line: int | None = None
    convert: str | None = None  # numeric conversion fields of this type apply


@dataclass(frozen=True)
class RefT:
    """A reference to an enum, flags, alias or record by name (``args`` for records)."""

    kind: str  # enum | flags | alias | record
    target: str
    args: tuple[tuple[str, Expr], ...] = ()
    # byte order as data: an enum/flags/alias base's order, or the order a record
    # inheriting one is called in (None: the file's order)
    order: str | None = None

    @property
    def name(self) -> str:
        return self.target


@dataclass(frozen=True)
class SwitchT:
    """Pick a record by a tag expression; ``cases`` keys are ints (enum names resolved)."""

    on: Expr
    cases: tuple[tuple[int | bool | bytes, str, str | None], ...]  # (key, label, record or None)
    default: str  # "error" | "bytes" | record name
    args: tuple[tuple[str, Expr], ...] = ()
    name: str = "switch"
    order: str | None = None  # the order inheriting case records are called in


@dataclass(frozen=True)
class Repeat:
    count: Expr | None = None
    prefix: IntT | VarintT | None = None
    eos: bool = False
    until: int | None = None  # items end at an item equal to this terminator (consumed)
    until_item: Expr | None = None  # items end after the first one for which this holds
    stop_on_error: bool = False  # eos: the first item that fails to decode ends the list
    absent: int | None = None  # a count prefix equal to this is a list of None


@dataclass(frozen=True)
class Compressed:
    """A compressed region; ``length`` None = self-terminating (end found by decoding);
    ``codecs`` maps the algorithm value (enum member name or string) to registry names."""

    algorithm: Expr
    length: IntT | VarintT | None
    when: Expr | None = None
    limit: Expr | None = None
    codecs: tuple[tuple[str, str], ...] | None = None
    stored: str | None = None  # an earlier field holding the compressed byte count


@dataclass(frozen=True)
class Chain:
    """A repeat of records whose param ``param`` is ``first`` for the first item and then
    the value of the previous item's field ``source``: its stored bytes at a fixed offset
    (a chained checksum), or its decoded value (``decoded``: a field of the item's model,
    an optional field or a value with no type; running status)."""

    param: str
    source: str
    first: Expr
    decoded: bool = False


@dataclass
class Framing:
    """A repeat whose logical records are carried in physical fragments (``framing:``):
    fixed-size ``blocks`` of fragments marked full/first/middle/last, or pages whose
    ``lacing`` table splits their piece into packet pieces. Completed by resolve."""

    fragment: str  # the fragment record
    piece: str  # the fragment field carrying the bytes
    block_size: int | None = None  # blocks: size of a block
    tail: str = "zero"  # blocks: a tail shorter than a header is zero (checked) or any
    kind: str | None = None  # blocks: the fragment field saying full/first/middle/last
    kinds: tuple[tuple[str, int], ...] = ()  # blocks: (full|first|middle|last, value)
    kind_enum: str | None = None  # blocks: the kind field's enum, when it has one
    lacing: str | None = None  # pages: the u8 list splitting the piece into segments
    continued: Expr | None = None  # pages: true when the first piece continues a packet
    header: int = 0  # blocks: the fragment's fixed size without its piece
    after_piece: int = 0  # bytes of the fragment after its piece (fixed)


@dataclass(frozen=True)
class Checksum:
    algorithm: str  # a registry name (built-in or plug-in)
    covers: tuple[str, ...] | None  # None = every preceding field
    excluded: tuple[str, ...] = ()
    store_bits: int | None = None  # stored truncated: the low bits of the full value
    seed: Expr | None = None  # seeded from an earlier field / param (chains use a param)
    params: tuple[tuple[str, Expr], ...] = ()  # keyword parameters of the algorithm
    bits: int = 0  # the algorithm's full width (from the registry)
    digest: bool = False  # a byte-string digest rather than an integer
    ranges: tuple[tuple[int, int], ...] = ()  # record-relative [a, b) byte ranges, in order
    # with ``covers`` None: "preceding" (""), "following" or "all" (the checksum included)
    scope: str = ""
    filler: int | bytes = 0  # what the checksum's own bytes read as when it covers itself
    files: tuple[tuple[Expr, Expr], ...] = ()  # absolute [start, end) of the user's buffer
    spans: tuple[tuple[str, str | None], ...] = ()  # {from, to} as written (resolve expands)


@dataclass
class Located:
    """A field found elsewhere than after the previous one (``at:``): at an offset from
    the outermost record's start, relative to the record's start or another located
    field, by a signature searched back from the end, at a distance from the end, or one
    record per item of a list of offsets. Takes no bytes of the sequential layout."""

    name: str
    target: str  # the record found there
    how: str  # at | find_last | from_end | each
    where: Expr | None = None  # at: the offset; from_end: the distance from the end
    base: str | None = None  # at: "_start", a located field or a fixed-offset field
    base_shift: int = 0  # a sequential base field: its fixed offset in the record
    signature: bytes = b""
    within: int = 0
    each: str | None = None  # each: the list field whose items hold the offsets
    each_offset: str | None = None  # each: the item field holding the offset
    count: Expr | None = None  # a run of records: how many
    eos: bool = False  # a run of records filling ``size`` bytes
    size: Expr | None = None
    lazy: bool = True
    cond: Expr | None = None  # present only when true (absent = None; its offset filled 0)
    doc: str = ""
    fills: tuple[tuple[str, tuple[str, ...]], ...] = ()  # set by resolve
    line: int | None = None
    path: str = ""

    @property
    def many(self) -> bool:
        """A run of records (a list), not one record."""
        return self.count is not None or self.eos


@dataclass(frozen=True)
class Assert:
    """A decode-time rule: ``check`` must hold once the field is read (else ``error``)."""

    check: Expr
    message: str
    error: str = "constraint"  # constraint | unsupported
    path: str = ""  # the field it is reported on, when not its own (a bit field's)


@dataclass
class BitPart:
    """A named range of bits of an integer field (``bits:``), a field of the record's
    model; ``lo`` numbers from the least significant bit whatever the schema's order."""

    name: str
    lo: int
    width: int
    enum: str | None = None
    boolean: bool = False  # a single ``bit:``: the model holds a bool
    valid: tuple[int | None, int | None] | None = None
    const: int | None = None  # not in the model: always this value
    field: Field | None = None  # the model field standing for it (resolve makes it)
    value: Expr | None = None  # not in the model: derived on encode from this expression

    @property
    def mask(self) -> int:
        return ((1 << self.width) - 1) << self.lo


Type = IntT | FloatT | BytesT | VarintT | PaddingT | RefT | SwitchT


def referenced_records(t: Type) -> list[str]:
    """The records a field's type names: a record reference, or a switch's case and default
    records (``empty`` cases and the ``error``/``bytes`` defaults name none)."""
    if isinstance(t, RefT) and t.kind == "record":
        return [t.target]
    if isinstance(t, SwitchT):
        out = [r for _, _, r in t.cases if r]
        if t.default not in ("error", "bytes"):
            out.append(t.default)
        return out
    return []


@dataclass
class Field:
    """One field of a record, as written in the schema (all versions)."""

    name: str
    type: Type
    doc: str = ""
    spec: str = ""
    cond: Expr | None = None
    since: int | None = None
    until: int | None = None
    const: int | bytes | None = None
    reserved: bool = False
    valid: tuple[int | None, int | None] | None = None
    size: Expr | None = None  # exact byte size the field occupies
    repeat: Repeat | None = None
    view: str | None = None
    compressed: Compressed | None = None
    checksum: Checksum | None = None
    value: Expr | None = None
    derived_from: tuple[str, str] | None = None  # ("count"|"size", field) set by resolve
    asserts: tuple[Assert, ...] = ()
    convert: str | None = None  # numeric conversion (registry name) applied both ways
    chain: Chain | None = None  # repeat items get the previous item's stored value
    framing: Framing | None = None  # the repeat's records travel in blocks or pages
    derived_offset: int = 0  # size-derived from ``name - k``: encode writes measured + k
    endian: Expr | None = None  # field-level byte order chosen by data ('le' or 'be')
    # where a located structure is, how many records or bytes it holds: filled on encode
    # (the object model keeps it as a keyword with a default, not compared)
    filled: str = ""
    # ``default:``: the model's value when the field is absent (and the constructor's)
    has_default: bool = False
    default: object = None  # int, bool, float, str or bytes (an enum member as its int)
    line: int | None = None
    path: str = ""
    bits: tuple[BitPart, ...] = ()  # named bit ranges: the model holds these instead
    bit_of: str | None = None  # a bit range's model field: the integer field holding it
    absent: int | None = None  # a length prefix equal to this is a value of None
    peek: bool = False  # read at the current position without consuming it; never written

    @property
    def in_model(self) -> bool:
        """Whether the object model carries this field (derived values are recomputed)."""
        return not (self.checksum or self.derived_from or self.value is not None
                    or self.const is not None or self.reserved or self.peek
                    or isinstance(self.type, PaddingT))

    def in_version(self, version: int | None) -> bool:
        if version is None:
            return True
        if self.since is not None and version < self.since:
            return False
        return not (self.until is not None and version > self.until)


@dataclass
class Param:
    name: str
    type: str = "int"
    default: object = None
    doc: str = ""


@dataclass
class Layout:
    """One concrete layout of a record: the fields present in ``versions``."""

    versions: tuple[int, ...] | None  # None for an unversioned record
    fields: list[Field]
    fixed_size: int | None = None
    offsets: dict[str, int] = field(default_factory=dict)  # fixed-offset prefix
    sizes: dict[str, int] = field(default_factory=dict)
    order: str | None = None  # the byte order of a record whose order is data

    @property
    def suffix(self) -> str:
        return (f"_v{self.versions[0]}" if self.versions else "") + \
            (f"_{self.order}" if self.order else "")


@dataclass
class Record:
    name: str
    fields: list[Field]
    doc: str = ""
    spec: str = ""
    params: dict[str, Param] = field(default_factory=dict)
    version_from: str | None = None
    # ``rows: true``: also emit ``decode_rows_<record>`` (tuples instead of objects)
    rows: bool = False
    # ``many:``: one-loop twins for decode_many_/encode_many_ (True), none (False), or
    # decided by whether the record is read in runs (None; see generator/fast/bulk.py)
    many: bool | None = None
    version_range: tuple[int, int] | None = None
    layouts: list[Layout] = field(default_factory=list)
    line: int | None = None
    file: str = ""
    # byte order as data: the record's own ``endian:`` expression (None: fixed or
    # inherited), and the orders it has a concrete layout for (() = the fixed order only)
    endian: Expr | None = None
    orders: tuple[str, ...] = ()
    endian_scope: str = "record"  # "fields": only the fields carrying the expression
    # values with no bytes of their own: computed on decode from the fields (``value:``
    # without a type), held by the model; fields' ``value:`` derive from them on encode
    virtuals: list[Field] = field(default_factory=list)
    located: list[Located] = field(default_factory=list)  # fields found at offsets (at:)

    @property
    def class_name(self) -> str:
        return "".join(p.capitalize() for p in self.name.split("_"))

    @property
    def model_fields(self) -> list[Field]:
        seen: dict[str, Field] = {}
        for f in self.fields:
            if f.in_model and f.name not in seen:
                seen[f.name] = f
            for part in f.bits:  # an integer of bit ranges: the ranges are the fields
                if part.field is not None and part.name not in seen:
                    seen[part.name] = part.field
        for v in self.virtuals:
            seen.setdefault(v.name, v)
        # filled fields have defaults: they come after every field without one
        return [f for f in seen.values() if not f.filled] + \
            [f for f in seen.values() if f.filled]

    @property
    def bit_parts(self) -> dict[str, tuple[Field, BitPart]]:
        """Bit ranges that have a value (the model's, or derived by ``value:``) by name:
        (the integer field holding it, the range)."""
        return {p.name: (f, p) for f in self.fields for p in f.bits if p.const is None}


@dataclass
class Registry:
    current: int
    accepted: tuple[int, int]
    retired: list[int] = field(default_factory=list)
    doc: str = ""


@dataclass(frozen=True)
class Detect:
    """How ``inspect`` recognises a file of a family: ``magic`` bytes at offset ``at``
    select ``record``; ``repeat`` = the file is a sequence of such records."""

    record: str
    magic: bytes
    at: int = 0
    repeat: bool = False
    params: tuple[tuple[str, object], ...] = ()
    then: str | None = None  # the rest of the file is a sequence of these records
    tags: str | None = None  # match any bytes case label of this switch field instead


@dataclass
class Family:
    name: str
    title: str
    spec: str
    doc: str
    endian: str
    files: list[str]
    digest: str
    versions: Registry | None
    enums: dict[str, EnumDef]
    flags: dict[str, FlagsDef]
    aliases: dict[str, AliasDef]
    records: dict[str, Record]
    registries: dict[str, EnumDef] = field(default_factory=dict)
    plugins: list[str] = field(default_factory=list)  # module:function, loaded on import
    detect: list[Detect] = field(default_factory=list)  # file detection (inspect FILE)
    endian_expr: Expr | None = None  # a file-level byte order chosen by params
