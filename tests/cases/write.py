"""Write every fixture case to fixtures/<family>/<name>.hex (run after changing a case).

Usage: python -m bytewright.tests.cases.write  (or: python tests/cases/write.py)
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from bytewright.generated import htt, kladde, ze
from bytewright.generator.checks import FIXTURE_DIR, fixture_text

HERE = Path(__file__).resolve().parent


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


FAMILIES = {"htt": (htt, "htt_cases"), "kladde": (kladde, "kladde_cases"), "ze": (ze, "ze_cases")}


def main() -> int:
    for family, (codec, cases_name) in FAMILIES.items():
        out_dir = FIXTURE_DIR / family
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, record, params, value, doc in _load(cases_name).cases():
            data = codec.ENCODERS[record](value, **params)
            (out_dir / f"{name}.hex").write_text(fixture_text(record, params, data, doc))
            print(f"{family}/{name}.hex {len(data)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
