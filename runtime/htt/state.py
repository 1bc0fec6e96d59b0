"""The in-memory tree and the one implementation of what each WAL op does to it.

Both the writer (API calls) and replay go through :meth:`State.apply`, so the WAL path
and the in-memory state cannot drift. Replay is tolerant (§4): INSERT of an existing key
is skipped, ops on missing keys are skipped, and missing ancestors are synthesized as
directory nodes (files from before explicit ancestor logging).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable

from ...generated.htt import MetaPair, SemTailLayout, TailFull, WalEntry, WalOp
from ..errors import DecodeError
from ..packed import PackedArray
from .quantized import PACKED_DIM, TailCodec

log = logging.getLogger("bytewright.htt")

ROOT = "/"
CHILD_INDEX = "_child_index"
CONTENT_TYPE = "content_type"
DIRECTORY_TYPE = "application/x-directory"


def parent_of(key: str) -> str:
    """``/a/b`` -> ``/a``; top-level keys are children of the implicit root ``/``."""
    i = key.rfind("/")
    return key[:i] if i > 0 else ROOT


def ancestors_of(key: str) -> list[str]:
    """Proper ancestors of ``key``, outermost first (the root is not a node)."""
    out = []
    i = key.find("/", 1)
    while i > 0:
        out.append(key[:i])
        i = key.find("/", i + 1)
    return out


def depth_of(key: str) -> int:
    return key.count("/")


def sort_meta(meta: list[MetaPair]) -> list[MetaPair]:
    """Writer order: pairs sorted by UTF-8 key bytes (facts.md §2.5)."""
    return sorted(meta, key=lambda p: p.key.encode("utf-8"))


def directory_meta(index: int) -> list[MetaPair]:
    return [MetaPair(CHILD_INDEX, str(index)), MetaPair(CONTENT_TYPE, DIRECTORY_TYPE)]


_DIM = PACKED_DIM
_UNPACK: dict[int, struct.Struct] = {}  # dims -> one Struct for the whole placement


def pack_tail(raw: list[int] | None) -> bytes | list[int] | None:
    """A placement packed as 16 bytes per dim: ~350 B per node where a list of Python
    ints costs ~935 B. A value outside i128 (not yet validated by an encode) stays a
    list, so the error it causes later is unchanged."""
    if raw is None:
        return None
    try:
        return b"".join([v.to_bytes(_DIM, "little", signed=True) for v in raw])
    except (OverflowError, AttributeError, TypeError):
        return raw if isinstance(raw, list) else list(raw)


def unpack_tail(packed: bytes | list[int] | None) -> list[int] | None:
    """The raw Q64.64 list of a packed placement (a fresh list on each call)."""
    if packed is None or packed.__class__ is not bytes:
        return None if packed is None else list(packed)
    n, rest = divmod(len(packed), _DIM)
    st = _UNPACK.get(n)
    if st is None or rest:
        if rest or n > 255:  # not a placement this module wrote: the general path
            return [int.from_bytes(packed[i:i + _DIM], "little", signed=True)
                    for i in range(0, len(packed), _DIM)]
        st = _UNPACK[n] = struct.Struct("<" + "Qq" * n)
    it = iter(st.unpack(packed))
    return [hi << 64 | lo for lo, hi in zip(it, it, strict=False)]


def pack_meta(pairs, strings: dict[str, str] | None = None) -> tuple[str, ...]:
    """Metadata pairs held flat, ``(key0, value0, key1, value1, ...)``: one tuple per node
    where a list of ``MetaPair`` objects costs a list, an object per pair and four
    tracked objects for the collector (~390 B for two pairs against ~130 B). ``strings``
    shares equal strings between nodes (the same few metadata keys and values repeat on
    every node)."""
    if pairs.__class__ is tuple and (not pairs or pairs[0].__class__ is str):
        return pairs
    if strings is None:
        return tuple([s for p in pairs for s in (p.key, p.value)])
    share = strings.setdefault if len(strings) < _SHARED_STRINGS else strings.get
    out = []
    for p in pairs:
        k = p.key
        v = p.value
        out.append(share(k, k))
        out.append(share(v, v))
    return tuple(out)


def decimal_index(value: str) -> int:
    """A ``_child_index`` value as a number, or -1 when it is not plain ASCII decimal
    digits. Such a value is still the node's own reserved pair: it is kept as stored
    (§3: preserved byte for byte), it just says nothing about the sibling counter."""
    return int(value) if value.isdigit() and value.isascii() else -1


def flat_meta(pairs, share) -> tuple[tuple[str, ...], int]:
    """A replayed INSERT's metadata held flat, equal strings shared through ``share``
    (``strings.get`` or ``strings.setdefault``), and its decimal ``_child_index`` (-1
    when there is none or it is not decimal, ``decimal_index``). ``pairs`` are
    ``(key, value)`` rows (``decode_rows_wal_entry``) or ``MetaPair`` objects. The usual
    two pairs take no loop."""
    index = -1
    if pairs and pairs[0].__class__ is not tuple:
        pairs = [(p.key, p.value) for p in pairs]
    if len(pairs) == 2:
        (ak, av), (bk, bv) = pairs
        meta = (share(ak, ak), share(av, av), share(bk, bk), share(bv, bv))
        digits = av if ak == CHILD_INDEX else bv if bk == CHILD_INDEX else None
        if digits is not None and digits.isdigit() and digits.isascii():
            index = int(digits)  # decimal_index inline: the hot path of a replay
        return meta, index
    flat = []
    for k, v in pairs:
        flat.append(share(k, k))
        flat.append(share(v, v))
    meta = tuple(flat)
    try:
        i = meta.index(CHILD_INDEX)
        index = -1 if i & 1 else decimal_index(meta[i + 1])
    except ValueError:  # no _child_index
        pass
    return meta, index


_SHARED_STRINGS = 4096  # bound of pack_meta's string-sharing table
_LEARN_ENTRIES = 2048  # a replay shares the strings first seen in this many inserts


def unpack_meta(flat: tuple[str, ...]) -> list[MetaPair]:
    """The ``MetaPair`` list of a flat metadata tuple (a fresh list on each call)."""
    it = iter(flat)
    return [MetaPair(k, v) for k, v in zip(it, it, strict=False)]


class Node:
    """One live node: payload, the full metadata block (``_`` keys included, in file
    order) and the full-width placement (raw Q64.64 list, or None = not set).

    ``meta`` and ``tail`` are held packed (a flat string tuple, ``pack_meta``; 16 bytes
    per dim, ``pack_tail``) and converted on access: the state holds every live node, so
    its size per node is what replay memory is made of. The constructor takes either
    form (lists from callers, packed values from replay)."""

    __slots__ = ("key", "data", "_meta", "_tail")

    def __init__(self, key: str, data: bytes, meta: list[MetaPair] | tuple[str, ...],
                 tail: list[int] | bytes | None):
        self.key = key
        self.data = data
        if meta.__class__ is not tuple or (meta and meta[0].__class__ is not str):
            meta = pack_meta(meta)
        self._meta = meta
        self._tail = tail if tail is None or tail.__class__ is bytes else pack_tail(tail)

    @property
    def meta(self) -> list[MetaPair]:
        return unpack_meta(self._meta)

    @meta.setter
    def meta(self, pairs: list[MetaPair]) -> None:
        self._meta = pack_meta(pairs)

    @property
    def tail(self) -> list[int] | None:
        return unpack_tail(self._tail)

    @tail.setter
    def tail(self, raw: list[int] | None) -> None:
        self._tail = pack_tail(raw)

    @property
    def has_tail(self) -> bool:
        """Whether a placement is set, without converting it."""
        return self._tail is not None

    def meta_value(self, name: str) -> str | None:
        m = self._meta
        for i in range(0, len(m), 2):
            if m[i] == name:
                return m[i + 1]
        return None

    def meta_items(self, reserved: bool) -> list[tuple[str, str]]:
        """The (key, value) pairs whose key is reserved (``_``) or not, in file order."""
        m = self._meta
        return [(m[i], m[i + 1]) for i in range(0, len(m), 2)
                if m[i].startswith("_") is reserved]


def _child_index(meta: tuple[str, ...]) -> int | None:
    """None when the node has no ``_child_index``; -1 when it has one that is not
    decimal (kept as it is); else its value."""
    try:
        i = meta.index(CHILD_INDEX)  # C-speed scan; a value spelled the same is rare
    except ValueError:
        return None
    if i & 1:
        for i in range(0, len(meta), 2):
            if meta[i] == CHILD_INDEX:
                break
        else:
            return None
    return decimal_index(meta[i + 1])


_INSERT = WalOp.INSERT
_new = object.__new__


class State:
    """Live nodes in parents-first (insertion) order, a child index and the counters.

    The child index follows from ``nodes`` alone (a node's children, in the order they
    were linked, are the nodes under it in ``nodes`` order), so it is built the first
    time something needs it (``children``: listings, ``descendants``, DELETE) and kept
    up to date from then on. A replay that only inserts, and the readers that never list
    children, pay for none of it (~0.5 us and ~50 B per node).
    """

    def __init__(self, codec: TailCodec) -> None:
        self.codec = codec
        self.nodes: dict[str, Node] = {}
        self._children: dict[str, dict[str, None]] | None = None  # None: not built yet
        self.counters: dict[str, int] = {}  # parent -> next _child_index (never reused)
        self.epoch = 0
        self.synthesized = 0  # ancestors created by replay rather than by an entry
        self.strings: dict[str, str] = {}  # equal metadata strings shared between nodes
        self._learn = _LEARN_ENTRIES  # inserts whose strings still enter ``strings``
        # the parent of the last INSERT, known to exist (DELETE forgets it)
        self._last_parent = ROOT
        self._last_cut = -1
        # the decoder's packed kind once recognised, and the all-zero placement ("not
        # set"): apply's hot path compares against them without calling the codec
        self._kind: object = object()
        self._zero = codec._zero

    @property
    def children(self) -> dict[str, dict[str, None]]:
        children = self._children
        if children is None:
            children = self._children = {}
            for key in self.nodes:
                i = key.rfind("/")
                parent = key[:i] if i > 0 else ROOT
                kids = children.get(parent)
                if kids is None:
                    children[parent] = {key: None}
                else:
                    kids[key] = None
        return children

    def pack_meta(self, pairs) -> tuple[str, ...]:
        return pack_meta(pairs, self.strings)

    # -- building --------------------------------------------------------------------

    def _link(self, node: Node, parent: str | None = None) -> None:
        key = node.key
        if parent is None:
            parent = parent_of(key)
        self.nodes[key] = node
        children = self._children
        if children is not None:
            kids = children.get(parent)
            if kids is None:
                children[parent] = {key: None}
            else:
                kids[key] = None
        counters = self.counters
        index = _child_index(node._meta)
        if index is None:  # none stored (a synthesized or older node): assign the next
            index = counters.get(parent, 0)
            node.meta = sort_meta(node.meta + [MetaPair(CHILD_INDEX, str(index))])
        if index >= counters.get(parent, 0):
            counters[parent] = index + 1

    def next_child_index(self, parent: str) -> int:
        return self.counters.get(parent, 0)

    def add_loaded(self, node: Node) -> None:
        """A snapshot entry (already in parents-first order)."""
        key = node.key
        if key in self.nodes:
            log.warning("snapshot repeats key %r; keeping the first", key)
            return
        parent = parent_of(key)
        if parent is not ROOT and parent not in self.nodes:
            self._synthesize_ancestors(key)
        self._link(node, parent)

    def _synthesize_ancestors(self, key: str) -> None:
        parent = parent_of(key)
        if parent == ROOT or parent in self.nodes:
            return
        for anc in ancestors_of(key):
            if anc not in self.nodes:
                index = self.counters.get(parent_of(anc), 0)
                self._link(Node(anc, b"", directory_meta(index), None))
                self.synthesized += 1

    def _remove_subtree(self, key: str) -> None:
        self._last_cut = -1
        children = self.children
        stack = [key]
        while stack:
            k = stack.pop()
            self.nodes.pop(k, None)
            kids = children.pop(k, None)
            if kids:
                stack.extend(kids)
        kids = children.get(parent_of(key))
        if kids is not None:
            kids.pop(key, None)

    # -- the ops ---------------------------------------------------------------------

    def apply(self, entry: WalEntry) -> None:
        """Apply one decoded entry. Never raises for semantic problems (logs instead);
        a tail that does not decode raises ``DecodeError`` before anything changes."""
        op = entry.op
        key = entry.key
        body = entry.body
        if op is _INSERT:
            nodes = self.nodes
            tail = body.tail
            if tail is not None:
                # validates before anything changes; a full-width tail the decoder kept
                # packed in the state's own form is taken as it is (the hot case)
                dims = tail.dims if tail.__class__ is TailFull else None
                if dims.__class__ is PackedArray and dims.kind is self._kind:
                    tail = dims.raw
                    if tail == self._zero:
                        tail = None
                else:
                    codec = self.codec
                    tail = codec.packed(tail)
                    if codec._kind is not None:
                        self._kind = codec._kind
            if key in nodes:
                log.debug("replay: INSERT of existing key %r skipped", key)
                return
            i = key.rfind("/")
            if i <= 0:
                parent = ROOT
            elif i == self._last_cut and key.startswith(self._last_parent):
                parent = self._last_parent  # a sibling of the last insert: parent exists
            else:
                parent = key[:i]
                if parent not in nodes:
                    self._synthesize_ancestors(key)
                self._last_cut = i
                self._last_parent = parent
            data = body.data
            if data.__class__ is not bytes:
                data = bytes(data)
            # metadata held flat, equal strings shared (flat_meta);
            # the table learns from the first inserts, then only answers (get is a fast
            # call; setdefault is not)
            if self._learn:
                self._learn -= 1
                share = self.strings.setdefault
            else:
                share = self.strings.get
            meta, index = flat_meta(body.meta, share)
            # a Node without the constructor's checks: every field is in its held form
            node = _new(Node)
            node.key = key
            node.data = data
            node._meta = meta
            node._tail = tail
            if index < 0 or self._children is not None:
                # the general case (_link decides what a missing or odd index means)
                self._link(node, parent)
                return
            # _link inlined for the common case (a decimal _child_index; no child index
            # built yet): the hot path of a replay
            nodes[key] = node
            counters = self.counters
            if index >= counters.get(parent, 0):
                counters[parent] = index + 1
        elif op is WalOp.SET_SEMANTIC:
            tail = self.codec.packed(body.tail)
            node = self.nodes.get(key)
            if node is None:
                log.debug("replay: SET_SEMANTIC of missing key %r skipped", key)
            else:
                node._tail = tail
        elif op is WalOp.UPDATE:
            node = self.nodes.get(key)
            if node is None:
                log.debug("replay: UPDATE of missing key %r skipped", key)
                return
            meta = list(body.meta)
            given = {p.key for p in meta}
            kept = [p for p in node.meta if p.key.startswith("_") and p.key not in given]
            node.data = bytes(body.data)
            node._meta = self.pack_meta(sort_meta(meta + kept) if kept else meta)
        elif op is WalOp.DELETE:
            if key in self.nodes:
                self._remove_subtree(key)
            else:
                log.debug("replay: DELETE of missing key %r skipped", key)
        elif op is WalOp.SET_META:
            node = self.nodes.get(key)
            if node is None:
                log.debug("replay: SET_META of missing key %r skipped", key)
                return
            m = node._meta
            name = body.key
            for i in range(0, len(m), 2):
                if m[i] == name:
                    node._meta = m[:i + 1] + (body.value,) + m[i + 2:]
                    break
            else:
                node._meta = self.pack_meta(sort_meta(node.meta + [MetaPair(name,
                                                                            body.value)]))
        elif op is WalOp.EPOCH:
            self.epoch = body.epoch_id

    def apply_rows(self, rows: list[tuple], expected: int,
                   entry_at: Callable[[int], WalEntry]) -> tuple[int, Exception | None]:
        """Replay: apply ``wal_entry`` rows (``decode_rows_wal_entry``: ``(seq, op, key,
        body)`` by position) in order while their seqs continue from ``expected``.
        Returns how many were applied and the error (``DecodeError``/``ValueError``) of
        the row that did not apply, if any; a seq break just stops the run.

        Does exactly what :meth:`apply` does entry by entry. The common INSERT runs
        inline here, reading the row's fields by position with the state's tables held
        in locals: no entry object is built for it. Every other row is read as its entry
        (``entry_at(i)``, the checked decoder at that row's start) and goes to ``apply``,
        the one implementation."""
        apply = self.apply
        nodes = self.nodes
        counters = self.counters
        counter = counters.get
        strings = self.strings
        learned = strings.get
        learning = strings.setdefault
        zero = self._zero
        codec = self.codec
        packed_row = codec.packed_row
        # a full-width tail row holds the placement's packed bytes as they are
        as_is = codec.layout is SemTailLayout.full and codec._rows_packed()
        new = _new
        slow = self._children is not None
        # apply's bookkeeping held in locals, written back around each apply() call
        learn = self._learn
        last_cut = self._last_cut
        last_parent = self._last_parent
        first = expected
        try:
            for seq, op, key, body in rows:
                if seq != expected:
                    break
                if op is not _INSERT or slow:
                    # anything else: the one implementation, on the entry itself
                    entry = entry_at(expected - first)
                    self._learn = learn
                    self._last_cut = last_cut
                    self._last_parent = last_parent
                    apply(entry)
                    learn = self._learn
                    last_cut = self._last_cut
                    last_parent = self._last_parent
                    slow = self._children is not None
                    expected += 1
                    continue
                data, pairs, tail = body
                if tail is not None:  # validated before anything changes, as in apply
                    if as_is:
                        tail = tail[0]
                        if tail == zero:
                            tail = None
                    else:
                        tail = packed_row(tail)
                if key in nodes:
                    log.debug("replay: INSERT of existing key %r skipped", key)
                    expected += 1
                    continue
                i = key.rfind("/")
                if i <= 0:
                    parent = ROOT
                elif i == last_cut and key.startswith(last_parent):
                    parent = last_parent
                else:
                    parent = key[:i]
                    if parent not in nodes:
                        self._synthesize_ancestors(key)
                    last_cut = i
                    last_parent = parent
                if learn:
                    learn -= 1
                    share = learning
                else:
                    share = learned
                if len(pairs) == 2 and pairs[0][0] == CHILD_INDEX:
                    # flat_meta's usual case inline: ``_child_index`` first (the writer
                    # sorts keys) and one other pair; its digits are the node's own
                    (ak, av), (bk, bv) = pairs
                    meta = (CHILD_INDEX, av, share(bk, bk), share(bv, bv))
                    index = int(av) if av.isdigit() and av.isascii() else -1
                else:
                    meta, index = flat_meta(pairs, share)
                node = new(Node)
                node.key = key
                node.data = data
                node._meta = meta
                node._tail = tail
                if index < 0:
                    self._link(node, parent)
                else:
                    nodes[key] = node
                    if index >= counter(parent, 0):
                        counters[parent] = index + 1
                expected += 1
        except (DecodeError, ValueError) as exc:
            return expected - first, exc
        finally:
            self._learn = learn
            self._last_cut = last_cut
            self._last_parent = last_parent
        return expected - first, None

    # -- queries ---------------------------------------------------------------------

    def descendants(self, key: str) -> list[str]:
        """All descendants of ``key``, deepest last in pre-order (parents before kids)."""
        out: list[str] = []
        children = self.children
        stack = list(reversed(children.get(key, {})))
        while stack:
            k = stack.pop()
            out.append(k)
            stack.extend(reversed(children.get(k, {})))
        return out
