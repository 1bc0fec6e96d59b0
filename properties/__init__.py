"""Property-based checks of generated codecs: valid values drawn from the schema IR must
round-trip identically through every codec path, near-valid ones must be refused alike.

``check_project(path)`` runs them on a user's project; ``bytewright check --properties``
does the same from the command line (see docs/properties.md).
"""

from __future__ import annotations

from .check import (
    PropertyFailure,
    RecordResult,
    Report,
    check_near,
    check_project,
    check_valid,
    project_builders,
    run_record,
)
from .strategies import Builder, Case, Site, Unsupported

__all__ = ["Builder", "Case", "PropertyFailure", "RecordResult", "Report", "Site",
           "Unsupported", "check_near", "check_project", "check_valid", "project_builders",
           "run_record"]
