"""The in-memory tree and the one implementation of what each WAL op does to it.

Both the writer (API calls) and replay go through :meth:`State.apply`, so the WAL path
and the in-memory state cannot drift. Replay is tolerant (§4): INSERT of an existing key
is skipped, ops on missing keys are skipped, and missing ancestors are synthesized as
directory nodes (files from before explicit ancestor logging).
"""

from __future__ import annotations

import logging

from ...generated.htt import MetaPair, WalEntry, WalOp
from .quantized import TailCodec

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


_DIM = 16  # bytes of one packed raw Q64.64 value (signed, little-endian)


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
    return [int.from_bytes(packed[i:i + _DIM], "little", signed=True)
            for i in range(0, len(packed), _DIM)]


class Node:
    """One live node: payload, the full metadata block (``_`` keys included, in file
    order) and the full-width placement (raw Q64.64 list, or None = not set).

    The placement is held packed (``pack_tail``) and converted on access: the state
    holds every live node, so its size per node is what replay memory is made of."""

    __slots__ = ("key", "data", "meta", "_tail")

    def __init__(self, key: str, data: bytes, meta: list[MetaPair], tail: list[int] | None):
        self.key = key
        self.data = data
        self.meta = meta
        self._tail = pack_tail(tail)

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
        for pair in self.meta:
            if pair.key == name:
                return pair.value
        return None


def _child_index(meta: list[MetaPair]) -> int | None:
    for pair in meta:
        if pair.key == CHILD_INDEX:
            try:
                return int(pair.value)
            except ValueError:
                return None
    return None


class State:
    """Live nodes in parents-first (insertion) order, a child index and the counters."""

    def __init__(self, codec: TailCodec) -> None:
        self.codec = codec
        self.nodes: dict[str, Node] = {}
        self.children: dict[str, dict[str, None]] = {}
        self.counters: dict[str, int] = {}  # parent -> next _child_index (never reused)
        self.epoch = 0
        self.synthesized = 0  # ancestors created by replay rather than by an entry

    # -- building --------------------------------------------------------------------

    def _link(self, node: Node, parent: str | None = None) -> None:
        key = node.key
        if parent is None:
            parent = parent_of(key)
        self.nodes[key] = node
        kids = self.children.get(parent)
        if kids is None:
            self.children[parent] = {key: None}
        else:
            kids[key] = None
        counters = self.counters
        index = _child_index(node.meta)
        if index is None:
            index = counters.get(parent, 0)
            node.meta = sort_meta(node.meta + [MetaPair(CHILD_INDEX, str(index))])
        if index >= counters.get(parent, 0):
            counters[parent] = index + 1

    def next_child_index(self, parent: str) -> int:
        return self.counters.get(parent, 0)

    def add_loaded(self, node: Node) -> None:
        """A snapshot entry (already in parents-first order)."""
        if node.key in self.nodes:
            log.warning("snapshot repeats key %r; keeping the first", node.key)
            return
        self._synthesize_ancestors(node.key)
        self._link(node)

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
        stack = [key]
        while stack:
            k = stack.pop()
            self.nodes.pop(k, None)
            kids = self.children.pop(k, None)
            if kids:
                stack.extend(kids)
        kids = self.children.get(parent_of(key))
        if kids is not None:
            kids.pop(key, None)

    # -- the ops ---------------------------------------------------------------------

    def apply(self, entry: WalEntry) -> None:
        """Apply one decoded entry. Never raises for semantic problems (logs instead);
        a tail that does not decode raises ``DecodeError`` before anything changes."""
        op = entry.op
        key = entry.key
        body = entry.body
        if op is WalOp.INSERT:
            tail = None if body.tail is None else self.codec.from_disk(body.tail)
            nodes = self.nodes
            if key in nodes:
                log.debug("replay: INSERT of existing key %r skipped", key)
                return
            i = key.rfind("/")
            parent = key[:i] if i > 0 else ROOT
            if parent is not ROOT and parent not in nodes:
                self._synthesize_ancestors(key)
            # the entry's own meta list, not a copy: the state never changes a node's
            # list in place (SET_META below replaces it), so sharing it is safe
            meta = body.meta
            if meta.__class__ is not list:
                meta = list(meta)
            self._link(Node(key, bytes(body.data), meta, tail), parent)
        elif op is WalOp.SET_SEMANTIC:
            tail = self.codec.from_disk(body.tail)
            node = self.nodes.get(key)
            if node is None:
                log.debug("replay: SET_SEMANTIC of missing key %r skipped", key)
            else:
                node.tail = tail
        elif op is WalOp.UPDATE:
            node = self.nodes.get(key)
            if node is None:
                log.debug("replay: UPDATE of missing key %r skipped", key)
                return
            meta = list(body.meta)
            given = {p.key for p in meta}
            kept = [p for p in node.meta if p.key.startswith("_") and p.key not in given]
            node.data = bytes(body.data)
            node.meta = sort_meta(meta + kept) if kept else meta
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
            for i, pair in enumerate(node.meta):
                if pair.key == body.key:
                    # a new list: node lists may be shared with the entries they came from
                    meta = list(node.meta)
                    meta[i] = MetaPair(body.key, body.value)
                    node.meta = meta
                    break
            else:
                node.meta = sort_meta(node.meta + [MetaPair(body.key, body.value)])
        elif op is WalOp.EPOCH:
            self.epoch = body.epoch_id

    # -- queries ---------------------------------------------------------------------

    def descendants(self, key: str) -> list[str]:
        """All descendants of ``key``, deepest last in pre-order (parents before kids)."""
        out: list[str] = []
        stack = list(reversed(self.children.get(key, {})))
        while stack:
            k = stack.pop()
            out.append(k)
            stack.extend(reversed(self.children.get(k, {})))
        return out
