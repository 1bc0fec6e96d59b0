"""kladde address table runtime: open, walk, resolve, validate, write and flush.

Built on the generated codecs in ``generated/kladde.py``; see ``reader`` (header-slot
choice, tree walk, cursor rules, conflict resolution), ``validate`` (same-epoch
no-conflict rules) and ``writer`` (page encoding, the ``Store`` whose edits flush as
epochs).
"""

from __future__ import annotations

from .errors import (
    Corrupt,
    DanglingPointer,
    KladdeError,
    NotKladde,
    OutOfBounds,
    UnsupportedVersion,
)
from .model import PAGE_SIZE, Stmt
from .reader import (
    Allocation,
    KladdeFile,
    load,
    open_file,
    pick_header,
    resolve_statements,
    statements_of,
)
from .validate import Conflict, check_no_conflicts, conflicts
from .writer import Store, empty_file, encode_table, pack_tables

__all__ = [
    "Allocation", "Conflict", "Corrupt", "DanglingPointer", "KladdeError", "KladdeFile",
    "NotKladde", "OutOfBounds", "PAGE_SIZE", "Stmt", "Store", "UnsupportedVersion",
    "check_no_conflicts", "conflicts", "empty_file", "encode_table", "load", "open_file",
    "pack_tables", "pick_header", "resolve_statements", "statements_of",
]
