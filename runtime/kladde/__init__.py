"""kladde address table runtime: open, walk, resolve, validate, write and flush.

Built on the generated codecs in ``generated/kladde.py``; see ``reader`` (header-slot
choice, tree walk, cursor rules, conflict resolution), ``validate`` (same-epoch
no-conflict rules) and ``writer`` (page encoding, the ``Store`` whose edits commit to the journal and flush as
epochs) and ``journal`` (recovery, the CRC chain, replay: the current state).
"""

from __future__ import annotations

from .errors import (
    Corrupt,
    DanglingPointer,
    KladdeError,
    NotKladde,
    OutOfBounds,
    Poisoned,
    UnsupportedVersion,
)
from .journal import CurrentState, Journal, ReplayLimit, Transaction, recover, salvage
from .limits import Limits
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
    "Allocation", "Conflict", "Corrupt", "CurrentState", "DanglingPointer", "Journal",
    "KladdeError", "KladdeFile", "Limits", "NotKladde", "OutOfBounds", "PAGE_SIZE",
    "Poisoned", "ReplayLimit", "Stmt", "Store", "Transaction", "UnsupportedVersion",
    "check_no_conflicts", "conflicts", "empty_file", "encode_table", "load", "open_file",
    "pack_tables", "pick_header", "recover", "resolve_statements", "salvage", "statements_of",
]
