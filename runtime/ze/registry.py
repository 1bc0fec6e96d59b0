"""Registry-checked version acceptance for every ZE family (data from schemas/ze.yaml)."""

from __future__ import annotations

from ...generated import ze
from ..errors import ConstraintError, TruncatedError, UnsupportedError

FAMILIES: dict[int, tuple[str, int, tuple[int, int]]] = ze.REGISTRIES["ze_family"]
REGION_KINDS: dict[int, tuple[str, None, None]] = ze.REGISTRIES["region_kind"]
BY_NAME = {name: fid for fid, (name, _, _) in FAMILIES.items()}

# Region kind -> the family whose registry versions the region (facts §5 "Region kinds").
# Reserved kinds 8, 9, 10 and 4096 have no family, so their versions are not checked.
REGION_FAMILY = {1: 6, 2: 7, 3: 3, 4: 4, 5: 5, 6: 8, 7: 12, 11: 9, 12: 13, 13: 14, 14: 16}


def current_version(family_id: int) -> int:
    return FAMILIES[family_id][1]


def check_version(family_id: int, version: int, *, offset: int | None = None,
                  path: str = "family_version") -> None:
    """Refuse an unknown family id or a version outside its accepted inclusive range."""
    if family_id not in FAMILIES:
        raise UnsupportedError("unknown family id (UnknownFamily)", offset=offset, path=path,
                               expected=sorted(FAMILIES), found=family_id)
    name, _cur, (lo, hi) = FAMILIES[family_id]
    if not lo <= version <= hi:
        raise UnsupportedError(f"unsupported {name} version (UnsupportedVersion)", offset=offset,
                               path=path, expected=f"{lo}..{hi}", found=version)


def check_scheme(scheme: int, *, path: str = "scheme") -> None:
    """Quantization scheme ids: 0, 1, 2, 4 live; 3 and 5 retired (distinct error)."""
    if scheme in ze.QuantScheme._value2member_map_:
        return
    if scheme in (3, 5):
        raise ConstraintError("retired quant_scheme value (permanently retired, never reused)",
                              path=path, found=scheme)
    raise ConstraintError("unknown quant_scheme value", path=path, found=scheme)


def read_header(buf, expected_family: int | None = None) -> ze.ZeHeader:
    """The shared 32-byte header, checked in the upstream order: length, magic, family,
    registry version, header_length."""
    if len(buf) < 32:
        raise TruncatedError("file shorter than the 32-byte shared header", offset=0,
                             path="ze_header", expected=32, found=len(buf))
    ident, _ = ze.decode_ze_header_ident(buf)  # magic first
    if expected_family is not None and ident.family_id != expected_family:
        raise ConstraintError("wrong family id", offset=8, path="ze_header.family_id",
                              expected=expected_family, found=ident.family_id)
    check_version(ident.family_id, ident.family_version, offset=10,
                  path="ze_header.family_version")
    hdr, _ = ze.decode_ze_header(buf)  # header_length >= 32 only after family and version
    return hdr
