"""Strings of a constraint's grammar, drawn by hypothesis (so failures shrink to short examples).

Every choice is one small draw: an alternative (ordered shortest first), a repetition count, a
character (its set's readable member first). Hypothesis shrinks draws towards zero, so a failing
string shrinks towards the shortest string of the grammar that still fails. Past `budget`
characters every choice takes the shortest way out, so strings stay short and draws few.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from chatparse.constraints._grammar import Alt, Chars, Lit, Ref, Rep, Seq, representative_char

_MAX_STEPS = 200_000


def _ordered(g: Any, memo: dict[int, list[Any]], e: Alt) -> list[Any]:
    opts = memo.get(id(e))
    if opts is None:
        scored = [(len(s), i, x) for i, x in enumerate(e.items) if (s := g.shortest(x)) is not None]
        opts = [x for _, _, x in sorted(scored, key=lambda t: (t[0], t[1]))]
        memo[id(e)] = opts
    return opts


def grammar_strings(constraint: Any, budget: int = 160) -> st.SearchStrategy[str]:
    """A strategy for strings of `constraint`'s grammar (the language every rendering accepts)."""
    g = constraint._p["grammar"]
    memo: dict[int, list[Any]] = {}

    @st.composite
    def build(draw: Any) -> str:
        out: list[str] = []
        size = 0
        stack: list[Any] = [Ref(g.root)]
        steps = 0
        while stack:
            steps += 1
            if steps > _MAX_STEPS:
                raise AssertionError("the sampler did not terminate (a cycle of empty choices)")
            e = stack.pop()
            over = size > budget
            if isinstance(e, Lit):
                out.append(e.text)
                size += len(e.text)
            elif isinstance(e, Chars):
                first = representative_char(e.ranges)
                if over or not draw(st.integers(0, 3)):
                    ch = first
                else:
                    lo, hi = e.ranges[draw(st.integers(0, len(e.ranges) - 1))]
                    ch = chr(draw(st.integers(lo, min(hi, lo + 300))))
                out.append(ch)
                size += 1
            elif isinstance(e, Seq):
                stack.extend(reversed(e.items))
            elif isinstance(e, Alt):
                opts = _ordered(g, memo, e)
                pick = opts[0] if over or len(opts) == 1 else opts[draw(st.integers(0, len(opts) - 1))]
                stack.append(pick)
            elif isinstance(e, Rep):
                top = e.lo + 3 if e.hi is None else min(e.hi, e.lo + 3)
                n = e.lo if over else draw(st.integers(e.lo, top))
                stack.extend([e.item] * n)
            elif isinstance(e, Ref):
                stack.append(g.rules[e.name])
        return "".join(out)

    return build()
