"""Graph node blocks (region kind 7, family 12) as a zero-copy fixed-stride numpy view.

The trailer and its checksum are decoded by the generated ``graph_node_blocks_region``
(stride formula, length and reserved rules are schema asserts); the view maps the block
fields of ``graph_node_block`` at their offsets for the trailer's stride, and every block
invariant is checked vectorised before the view is returned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...generated import ze
from ..errors import ConstraintError
from . import seals

if TYPE_CHECKING:  # numpy is imported where a value needs it
    import numpy as np

UNUSED = 0xFFFFFFFF


_BLOCK = [f for f in ze.LAYOUT["graph_node_block"]["layouts"][0]["fields"]
          if f["type"] != "padding"]
# numpy formats of the block fields; their offsets and sizes come from the schema's LAYOUT
_FORMATS = {"factors": ("<f4", (3,)), "degree": "u1", "flags": "u1", "reserved": "<u2"}


def block_offsets(padded_dims: int, max_degree: int) -> dict[str, int]:
    """Each block field's offset (and ``end``: where the zero padding starts), laid out as
    ``graph_node_block`` declares: the two param-sized fields take ``code_bytes`` and
    ``4 * max_degree`` bytes."""
    sized = {"codes": (padded_dims + 1) // 2, "neighbours": 4 * max_degree}
    out, pos = {}, 0
    for f in _BLOCK:
        out[f["name"]] = pos
        pos += f["size"] if f["size"] is not None else sized[f["name"]]
    out["end"] = pos
    return out


def block_dtype(padded_dims: int, max_degree: int, stride: int) -> np.dtype:
    import numpy as np

    cb = (padded_dims + 1) // 2
    at = block_offsets(padded_dims, max_degree)
    names = [f["name"] for f in _BLOCK]
    formats = {**_FORMATS, "codes": ("u1", (cb,)), "neighbours": ("<u4", (max_degree,))}
    return np.dtype({"names": names, "formats": [formats[n] for n in names],
                     "offsets": [at[n] for n in names], "itemsize": stride})


@dataclass(eq=False)
class GraphBlocks:
    trailer: ze.GraphNodeBlocksRegion
    view: np.ndarray  # structured, one row per node, zero-copy over the region bytes

    @property
    def node_count(self) -> int:
        return self.trailer.node_count

    def neighbours(self, i: int) -> np.ndarray:
        row = self.view[i]
        return row["neighbours"][:row["degree"]]


def open_blocks(region, *, dims: int | None = None, rows: int | None = None,
                check: bool = True) -> GraphBlocks:
    import numpy as np

    mv = region if isinstance(region, memoryview) else memoryview(region)
    seals.graph_trailer(mv)  # the trailer checksum before the trailer and block fields
    tr, _ = ze.decode_graph_node_blocks_region(mv, region_len=len(mv))
    if dims is not None and tr.dims != dims:
        raise ConstraintError("graph dims must equal the segment dims", path="dims",
                              expected=dims, found=tr.dims)
    if rows is not None and tr.node_count != rows:
        raise ConstraintError("graph node count must equal the segment row count",
                              path="node_count", expected=rows, found=tr.node_count)
    dt = block_dtype(tr.padded_dims, tr.max_degree, tr.stride)
    view = np.frombuffer(mv, dtype=dt, count=tr.node_count, offset=0)
    if check:
        _check(view, tr, mv)
    return GraphBlocks(tr, view)


def _fail(msg: str, node: int, stride: int, field: str, found) -> ConstraintError:
    return ConstraintError(msg, offset=node * stride, path=f"blocks[{node}].{field}", found=found)


def _check(v: np.ndarray, tr, mv: memoryview) -> None:
    import numpy as np

    n, s, md = tr.node_count, tr.stride, tr.max_degree
    if n == 0:
        return
    deg = v["degree"]
    bad = np.nonzero(deg > md)[0]
    if bad.size:
        raise _fail("degree exceeds max_degree", int(bad[0]), s, "degree", int(deg[bad[0]]))
    bad = np.nonzero(v["flags"] & 0xFC)[0]
    if bad.size:
        raise _fail("reserved graph flag bits set", int(bad[0]), s, "flags", int(v["flags"][bad[0]]))
    bad = np.nonzero(v["reserved"])[0]
    if bad.size:
        raise _fail("reserved bytes must be zero", int(bad[0]), s, "reserved", 0)
    if not np.isfinite(v["factors"]).all():
        node = int(np.nonzero(~np.isfinite(v["factors"]).all(axis=1))[0][0])
        raise _fail("Bit4 factors must be finite", node, s, "factors", None)
    slots = v["neighbours"]
    active = np.arange(md)[None, :] < deg[:, None]
    if (slots[active] >= n).any():
        node = int(np.nonzero(((slots >= n) & active).any(axis=1))[0][0])
        raise _fail("neighbour id out of range", node, s, "neighbours", None)
    if (slots[~active] != UNUSED).any():
        node = int(np.nonzero(((slots != UNUSED) & ~active).any(axis=1))[0][0])
        raise _fail("unused neighbour slots must be 0xFFFFFFFF", node, s, "neighbours", None)
    raw = np.frombuffer(mv, dtype=np.uint8, count=n * s).reshape(n, s)
    cb = (tr.padded_dims + 1) // 2
    tail = raw[:, block_offsets(tr.padded_dims, md)["end"]:]
    if tail.any():
        raise _fail("block padding must be zero", int(np.nonzero(tail.any(axis=1))[0][0]), s,
                    "pad", None)
    logical = (tr.dims + 1) // 2
    codes = raw[:, :cb]
    if (codes[:, logical:] != 0).any() or (tr.dims % 2 and (codes[:, logical - 1] & 0x0F).any()):
        raise _fail("code nibbles past dims must be zero", 0, s, "codes", None)


def build_blocks(dims: int, padded_dims: int, max_degree: int, nodes) -> bytes:
    """Encode blocks + trailer; ``nodes`` are ``ze.GraphNodeBlock`` values."""
    cb = (padded_dims + 1) // 2
    stride = (block_offsets(padded_dims, max_degree)["end"] + 127) // 128 * 128
    body = b"".join(ze.encode_graph_node_block(nd, code_bytes=cb, max_degree=max_degree)
                    for nd in nodes)
    value = ze.GraphNodeBlocksRegion(body, dims, padded_dims, max_degree, stride, len(nodes))
    return ze.encode_graph_node_blocks_region(value, region_len=len(body) + 128)
