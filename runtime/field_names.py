"""The names of Construct's number fields the generated modules import (``Int32ul``,
``Float64b``, ...) with the ``struct`` format each reads. Kept apart from the Construct
classes so that the generator can name them without importing Construct or numpy."""

from __future__ import annotations

FIELD_NAMES: dict[str, str] = {}
for _bits, _code in ((8, "b"), (16, "h"), (32, "l"), (64, "q")):
    for _sign, _c in (("u", _code.upper()), ("s", _code)):
        for _end, _order in (("b", ">"), ("l", "<")):
            FIELD_NAMES[f"Int{_bits}{_sign}{_end}"] = _order + _c
for _bits, _c in ((32, "f"), (64, "d")):
    for _end, _order in (("b", ">"), ("l", "<")):
        FIELD_NAMES[f"Float{_bits}{_end}"] = _order + _c
del _bits, _code, _sign, _c, _end, _order
