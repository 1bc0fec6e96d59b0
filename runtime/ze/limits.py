"""ZE resource limits and format bounds, as named constants.

The spec's bounds (rules.txt, facts.md) are not negotiable; the scan limit is this
implementation's choice. Callers that need more pass their own value where the API takes
one (``wal.replay(..., scan_bytes=...)``).
"""

from __future__ import annotations

#: a complete family-19 envelope (rules: "Envelope bytes are at most 16 MiB")
ENVELOPE_BYTES = 16 * 1024 * 1024
#: mutation changes in one envelope
MAX_MUTATIONS = 16384
#: one ZGOP provenance record inside a Mutation change (facts §4)
ZGOP_BYTES = 8 * 1024 * 1024
#: one graph artifact named by a ZGR3 object row (facts §6, schema review)
MAX_ARTIFACT_BYTES = 4 * 1024 * 1024
#: the smallest graph artifact an object row may name
MIN_OBJECT_BYTES = 104
#: a WAL record's payload_len is a u32 (facts §3.2)
WAL_PAYLOAD_BYTES = (1 << 32) - 1
#: bytes past WAL damage scanned for valid-looking records (implementation choice)
SCAN_BYTES = 16 * 1024 * 1024  # about 0.15 s of vectorised prefilter per 16 MiB
#: frame decodes the scan past WAL damage may attempt (adversarial bytes can make every
#: offset a candidate); a scan cut short counts as damage, never as a torn tail
SCAN_CANDIDATES = 100_000
#: bytes the scan past WAL damage may hash while checking candidates (random bytes declare
#: long frames that fit: about 4.5 MiB of them reach this), beyond which the scan is cut
#: short and counts as damage
SCAN_HASHED_BYTES = 4 * 1024 * 1024 * 1024
