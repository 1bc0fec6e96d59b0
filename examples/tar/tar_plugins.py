"""tar's header checksum, registered as a bytewright plug-in.

The checksum is the unsigned sum of the header's 512 bytes, its own eight bytes counted as
spaces. The schema stores it as an ASCII octal number (six digits, a NUL and a space, as
GNU tar and Python's tarfile write it), compared as a number. The header's first 100 bytes
(the member name) are read by the enclosing record, which passes their sum as the seed;
the checksum covers the other 412.
"""

from __future__ import annotations


def header_sum(data: bytes, seed: int | None = None) -> int:
    """The unsigned byte sum of ``data`` plus ``seed`` (the sum of the bytes before it)."""
    return (seed or 0) + sum(bytes(data))


def register(reg) -> None:
    reg.add_checksum("tar_header_sum", bits=32, seeded=True, safe=True, func=header_sum,
                     doc="tar header checksum: the unsigned byte sum, seeded with the sum of "
                         "the bytes before the covered ones")
