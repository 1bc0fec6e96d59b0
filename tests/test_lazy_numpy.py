"""numpy is imported the first time a value needs it, never with a module.

Importing the generated modules and answering ``ze info``, ``htt info``, ``inspect`` and
``verify`` on small files holds no numpy value, so numpy stays out of ``sys.modules``;
decoding a field declared ``view: numpy`` then gives numpy arrays, and a module's dtype
constant read from outside (``ze.Bit4Factors_DTYPE``) is a numpy dtype whichever comes
first. Each check runs in a fresh interpreter and looks at what it holds.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from bytewright.review.checks import FIXTURE_DIR, parse_fixture
from bytewright.runtime.lazy_numpy import LazyNumpy


def _python(code: str, *args: str) -> dict:
    """Run ``code`` in a fresh interpreter; it prints one JSON document last."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _hex(name: str) -> str:
    return parse_fixture(FIXTURE_DIR / "ze" / f"{name}.hex").data.hex()


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> dict[str, str]:
    from bytewright.bench.startup import small_files

    return small_files(str(tmp_path_factory.mktemp("small")))


def test_commands_on_small_files_leave_numpy_out_then_views_bring_it(small):
    got = _python("""
        import contextlib, io, json, sys
        from bytewright.cli.main import main
        from bytewright.generated import htt, kladde, pile, ze
        imported = "numpy" in sys.modules
        codes, out = [], io.StringIO()
        for argv in (["ze", "info", sys.argv[1]], ["inspect", sys.argv[1]],
                     ["htt", "info", sys.argv[2]], ["inspect", sys.argv[2]],
                     ["verify", sys.argv[1], sys.argv[2]]):
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                codes.append(main(argv))
        answered = "numpy" in sys.modules
        factors, _ = ze.decode_vector_factors_region(bytes.fromhex(sys.argv[3]))
        codes_region, _ = ze.decode_vector_codes_region(bytes.fromhex(sys.argv[4]))
        import numpy as np
        dt = ze.Bit4Factors_DTYPE
        print(json.dumps({
            "imported": imported, "answered": answered, "codes": codes,
            "out": out.getvalue(),
            "bit4": [type(factors.bit4).__module__, type(factors.bit4).__name__,
                     factors.bit4.dtype.names, float(factors.bit4[0]["scale"])],
            "codes_region": [isinstance(codes_region.codes, np.ndarray),
                             str(codes_region.codes.dtype)],
            "dtype": [isinstance(dt, np.dtype), dt.names, dt.itemsize,
                      factors.bit4.dtype == dt],
        }))
    """, small["wal"], small["htt"], _hex("vector_factors_bit4_v1"), _hex("vector_codes_odd_v1"))
    assert got["codes"] == [0, 0, 0, 0, 0], got["out"]
    assert not got["imported"]  # importing the four families
    assert not got["answered"]  # and answering on the small files
    assert got["bit4"] == ["numpy", "ndarray",
                           ["scale", "normalized_norm", "normalized_correction"], 1.0]
    assert got["codes_region"] == [True, "uint8"]
    assert got["dtype"] == [True, ["scale", "normalized_norm", "normalized_correction"],
                            12, True]


def test_dtype_constant_read_from_outside_first_then_both_paths_decode():
    got = _python("""
        import json, sys
        from bytewright.generated import ze
        before = "numpy" in sys.modules
        from bytewright.generated.ze import Int8Factors_DTYPE
        import numpy as np
        data = bytes.fromhex(sys.argv[1])
        fast, _ = ze.decode_vector_factors_region(data)
        ref = ze.construct_decode_vector_factors_region(data)
        print(json.dumps({"before": before, "is_dtype": isinstance(Int8Factors_DTYPE, np.dtype),
                          "names": Int8Factors_DTYPE.names,
                          "same_object": ze.Int8Factors_DTYPE is Int8Factors_DTYPE,
                          "fast": [isinstance(fast.int8, np.ndarray),
                                   fast.int8.dtype == Int8Factors_DTYPE],
                          "paths_agree": fast == ref,
                          "again": ze.encode_vector_factors_region(fast) == data}))
    """, _hex("vector_factors_int8_v1"))
    assert not got["before"]
    assert got["is_dtype"] and got["names"] == ["scale", "offset"] and got["same_object"]
    assert got["fast"] == [True, True] and got["paths_agree"] and got["again"]


def test_stand_in_binds_numpy_and_the_constants_on_first_attribute_read():
    ns: dict = {}
    ns["numpy"] = stand_in = LazyNumpy(ns)
    stand_in.dtype_later("_DT0", "<u2")
    assert "_DT0" not in ns and "_DT0" in stand_in.names
    assert stand_in.frombuffer(b"\x01\x00", ns["_DT0"]).tolist() == [1]  # callee first
    assert ns["numpy"] is np and ns["_DT0"] == np.dtype("<u2")
    assert stand_in.load() is np  # a kept copy of the stand-in reaches numpy itself
