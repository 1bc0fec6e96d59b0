"""Codec parameters derived from a file header (one place, so no module guesses them)."""

from __future__ import annotations

from dataclasses import dataclass

from ...generated.htt import (
    LAYOUT,
    CompressionAlgorithm,
    FileHeader,
    HeaderFlags,
    SemTailLayout,
)

USER_DIM_START = 16  # dims 0-15 are reserved (§7.1); 16+ are user-defined


def fixed_size(record: str) -> int:
    """Byte size of a fixed-size record, from the generated layout data (so a layout
    change in the schema cannot leave the runtime behind)."""
    sizes = {layout["fixed_size"] for layout in LAYOUT[record]["layouts"]}
    if len(sizes) != 1 or None in sizes:
        raise TypeError(f"{record} is not one fixed size: {sizes}")
    return sizes.pop()


def field_offset(record: str, name: str) -> int:
    """Fixed offset of a field within its record, from the generated layout data."""
    offsets = {f["offset"] for layout in LAYOUT[record]["layouts"]
               for f in layout["fields"] if f["name"] == name}
    if len(offsets) != 1 or None in offsets:
        raise TypeError(f"{record}.{name} has no single fixed offset: {offsets}")
    return offsets.pop()


HEADER_SIZE = fixed_size("file_header")
WAL_HEADER_SIZE = fixed_size("wal_header")
BOUND_PAIR_SIZE = fixed_size("bound_pair")


def tail_layout_of(flags: HeaderFlags) -> SemTailLayout:
    if flags.quantized:
        return SemTailLayout.quantized_gacl if flags.gacl else SemTailLayout.quantized
    return SemTailLayout.full


def version_for(flags: HeaderFlags) -> int:
    """The highest version the enabled features need (§6 Create): 4 > 3 > 2."""
    if flags.quantized:
        return 4
    if flags.meaning_addressed:
        return 3
    return 2


@dataclass(frozen=True)
class FileLayout:
    """What every codec call needs to know about one file."""

    version: int
    flags: HeaderFlags
    semantic_dims: int
    tail_layout: SemTailLayout

    @classmethod
    def of(cls, header: FileHeader) -> FileLayout:
        return cls(header.version, header.flags, header.semantic_dims,
                   tail_layout_of(header.flags))

    @property
    def algorithm(self) -> CompressionAlgorithm:
        return self.flags.algorithm

    @property
    def block_compressed(self) -> bool:
        return self.flags.wal_block_compressed

    @property
    def user_dims(self) -> int:
        return max(self.semantic_dims - USER_DIM_START, 0)

    def entry_params(self) -> dict:
        return {"semantic_dims": self.semantic_dims, "tail_layout": self.tail_layout}

    def block_params(self) -> dict:
        return {"algorithm": self.flags.algorithm, "semantic_dims": self.semantic_dims,
                "tail_layout": self.tail_layout}

    def snapshot_params(self, version: int | None = None) -> dict:
        return {"version": self.version if version is None else version,
                "compressed": self.flags.compressed, "algorithm": self.flags.algorithm,
                "semantic_dims": self.semantic_dims, "tail_layout": self.tail_layout}
