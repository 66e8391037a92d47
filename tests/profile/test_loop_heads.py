"""Loops are read from bytecode (:func:`perfkit.collectors.loops._loop_heads`), and bytecode changes with
Python: 3.12 inlines list/set/dict comprehensions (no ``<listcomp>`` code of their own) and ends a ``while``
loop with its condition jumping *out* and an unconditional jump back. On the H200 (Python 3.12) a per-env
``while`` loop was missed and a comprehension reported as a for-loop; the heads must read the same on every
Python (CI runs one; this file runs under any)."""
from __future__ import annotations

import textwrap

from perfkit.collectors.loops import _loop_heads

SRC = textwrap.dedent('''
    def step(self, n, rows):
        vals = [float(i) for i in range(n)]  # L3 comprehension
        i = 0
        while i < n:  # L5 while
            i += 1
        for k in range(n):  # L7 for, with a comprehension inside its body
            row = [k * j for j in rows]  # L8 comprehension
            self.out.append(row)
        keys = {str(j): j for j in range(n)}  # L10 dict comprehension
        while True:  # L11 while True with a break
            n -= 1
            if n < 0:
                break
        return vals, keys
''')


def _heads():
    """The function's loops and, before 3.12, its comprehensions' (code objects of their own)."""
    ns: dict = {}
    exec(compile(SRC, "/program/env.py", "exec"), ns)
    heads, codes = {}, [ns["step"].__code__]
    while codes:
        code = codes.pop()
        heads.update(_loop_heads(code))
        codes.extend(c for c in code.co_consts if hasattr(c, "co_code"))
    return heads


def test_each_loop_is_found_at_its_header_with_its_kind_on_this_python():
    heads = {line: kind for line, (_, _, kind) in _heads().items()}
    assert heads[3] == "comprehension over envs"
    assert heads[5] == "while-loop over envs"
    assert heads[7] == "for-loop over envs"  # a comprehension in its body does not make it one
    assert heads[8] == "comprehension over envs"
    assert heads[10] == "comprehension over envs"
    assert any(kind == "while-loop over envs" and 11 <= line <= 14 for line, kind in heads.items())


def test_a_while_loops_span_holds_its_condition_and_body():
    lo, hi, _ = _heads()[5]
    assert (lo, hi) == (5, 6)
