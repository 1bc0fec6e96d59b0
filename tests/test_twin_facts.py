"""The optimistic twins' proofs (generator/fast/facts.py): each rewrite drops work only
where the decoder's own fields prove it moot, and the rewritten code computes the same
values (or fails where the original fails) on every input tried."""

from __future__ import annotations

import ast
import itertools
import textwrap

from bytewright.generator.fast import facts
from bytewright.generator.fast.optimist import Optimist


class _Bad(Exception):
    pass


def _fn(src: str) -> ast.FunctionDef:
    return ast.parse(textwrap.dedent(src)).body[0]


def _compile(fn: ast.FunctionDef):
    ns = {"_Bad": _Bad, "_new": object.__new__}
    exec(compile(ast.fix_missing_locations(ast.Module([fn], [])), "<t>", "exec"), ns)
    return ns[fn.name]


def _outcome(f, *args):
    try:
        return f(*args)
    except _Bad:
        return "error"


# a sized section of ``span`` 256-byte blocks (64 of them read before it): a 192-byte head,
# ``length`` payload bytes, padding to 256 and the section's size check
_SECTION = """
def dec(span, length, pos, end):
    pos += 64
    n = span * 256 - 64
    o = end
    end = pos + n
    pos += 192
    {assert_}
    m = pos
    payload = (pos, pos + length)
    pos += length
    x = -(pos - m) % 256
    pos += x
    if pos != end:
        raise _Bad
    end = o
    return (payload, pos, end)
"""
_ASSERT = "if not span == 1 + (length + 255) // 256:\n        raise _Bad"


def test_section_end_proven_by_the_assert_drops_check_and_padding() -> None:
    before = _fn(_SECTION.format(assert_=_ASSERT))
    after = _fn(_SECTION.format(assert_=_ASSERT))
    facts.proven_section_ends(after)
    text = ast.unparse(after)
    assert "pos != end" not in text and "% 256" not in text and "pos = end" in text
    f, g = _compile(before), _compile(after)
    for span, length, pos in itertools.product(range(0, 6), [0, 1, 255, 256, 257, 700, 1024],
                                               [0, 3, 512]):
        assert _outcome(f, span, length, pos, 10**6) == _outcome(g, span, length, pos, 10**6)


def test_section_end_without_a_proof_keeps_its_check() -> None:
    fn = _fn(_SECTION.format(assert_="pass"))  # nothing ties span to length
    facts.proven_section_ends(fn)
    text = ast.unparse(fn)
    assert "pos != end" in text and "% 256" in text


def test_fields_read_from_locals_only_while_the_local_holds() -> None:
    fn = _fn("""
    def f(a, b):
        o = _new(C)
        o.x = a
        p = o
        y = p.x
        a = b
        z = o.x
        return (y, z)
    """)
    facts.fields_from_locals(fn)
    body = [ast.unparse(s) for s in fn.body]
    assert "y = a" in body  # through the copy ``p`` of ``o``
    assert "z = o.x" in body  # ``a`` was stored again: the object is read


def _twin(src: str) -> str:
    fn = _fn(src)
    Optimist({}).transform(fn)
    return ast.unparse(fn)


_SIGN = """
def _d_r(mv, pos, end):
    span = int.from_bytes(mv[pos:pos + 4], 'little', signed=True)
    pos += 4
    if not span >= {low}:
        raise ValueError('span')
    n = span * 256 - 64
    if n < 0:
        raise ValueError('negative size')
    body = mv[pos:pos + n]
    pos += n
    return (body, pos)
"""


def test_size_bounded_by_an_assert_needs_no_sign_test() -> None:
    assert "n < 0" not in _twin(_SIGN.format(low=1))  # n >= 1 * 256 - 64
    assert "n < 0" in _twin(_SIGN.format(low=0))  # n may be -64


def test_twin_errors_keep_class_and_message_only() -> None:
    text = _twin(_SIGN.format(low=1).replace("ValueError('span')",
                                             "ValueError('span', offset=pos, path='span')"))
    assert "raise ValueError('span')" in text and "offset" not in text


_SWITCH = """
def f(tag, n, pos, end):
    rp, re_ = (pos, end)
    pos += 48
    if pos + n > end:
        raise _Bad
    o = end
    end = pos + n
    if tag == 1:
        pos += 10
        pos = end
        end = o
        return ('in line', pos, end)
    else:
        pos, end = (rp, re_)
        return ('restart', pos, end)
"""


def test_restart_and_section_end_without_saves() -> None:
    before, after = _fn(_SWITCH), _fn(_SWITCH)
    facts.sunk_restarts(after)
    facts.local_section_ends(after)
    text = ast.unparse(after)
    assert "rp" not in text and "pos -= 48" in text
    then = ast.unparse(ast.Module(after.body[-1].body, []))
    # the case read in line leaves end alone, and its section's size is tested by the
    # twin's final ``pos <= end`` instead
    assert "end = " not in then and "> end" not in then
    f, g = _compile(before), _compile(after)
    for tag, n, pos, end in itertools.product([1, 2], [0, 64, 300], [0, 17], [100, 10**6]):
        want, got = _outcome(f, tag, n, pos, end), _outcome(g, tag, n, pos, end)
        if want == "error" and got != "error":
            assert got[1] > end  # ran past the end: the checked decoder re-runs
        else:
            assert want == got
