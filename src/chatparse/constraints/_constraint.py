"""`derive()` and `Constraint`: the whole output language, and its renderings."""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import threading
from collections import OrderedDict
from typing import Any

from .._parser import parse_response
from .._template import Template, load_response_template
from ..tools import build_tool_table
from . import _budget
from ._derive import REASONING_FIELDS, CallForms, Deriver, Request, normalise_request
from ._grammar import (
    EMPTY,
    NOTHING,
    WS_CHARS,
    Alt,
    Chars,
    Expr,
    Grammar,
    Lit,
    Ref,
    Rep,
    Seq,
    alt,
    class_ranges,
    opt,
    ranges_minus,
    rep,
    seq,
    violates_prefix,
)
from ._regex import Emitter, first_literal, parse
from ._schema import KEY_ORDERS, ConstraintError

__all__ = ["Constraint", "ConstraintError", "derive"]


class Constraint:
    """A generation constraint derived from a response template and a request's tools.

    Render it for the engine at hand: `structural_tag()` (vLLM / SGLang `structural_tag`
    response format, XGrammar 0.2.7+), `gbnf()` (llama.cpp `grammar`), `lark()` (llguidance),
    `json_schema()` / `ollama_format()` (only where the whole output is one JSON document).
    Everything a rendering accepts parses, with the same template, into calls to offered tools
    whose arguments match their schemas, within the request's `tool_choice` and
    `parallel_tool_calls`.
    """

    def __init__(self, parts: dict[str, Any]) -> None:
        self._p = parts
        self.template: Template = parts["template"]
        self.tool_choice: str = parts["tool_choice"]
        self.tools: list[str] = parts["tools"]
        self.parallel_tool_calls: bool = parts["parallel"]

    def gbnf(self) -> str:
        """A GBNF grammar for the whole output (llama.cpp `grammar`; XGrammar's EBNF too)."""
        return str(self._p["gbnf"])

    def ebnf(self) -> str:
        """The same grammar, for XGrammar's `Grammar.from_ebnf` (XGrammar reads GBNF)."""
        return str(self._p["gbnf"])

    def lark(self) -> str:
        """The same language as a Lark grammar for llguidance."""
        return str(self._p["lark"])

    def structural_tag(self) -> dict[str, Any]:
        """An XGrammar structural tag: `{"type": "structural_tag", "format": {...}}`.

        Where the template allows it, free text is left to the engine and the calls are tags
        entered at their opener (`triggered_tags`); otherwise the format is the whole grammar.
        """
        return copy.deepcopy(self._p["structural_tag"])

    def json_schema(self) -> dict[str, Any]:
        """A JSON schema equivalent to the constraint; raises `ConstraintError` where none is exact."""
        schema = self._p["json_schema"]
        if schema is None:
            raise ConstraintError(self._p["json_schema_reason"])
        return copy.deepcopy(schema)

    def ollama_format(self) -> dict[str, Any]:
        """Ollama's `format` (a JSON schema); raises `ConstraintError` where a schema is not exact."""
        return self.json_schema()

    def render(self, fmt: str) -> Any:
        """`fmt` in `structural-tag`, `json-schema`, `gbnf`, `lark`, `ollama` (CLI names)."""
        renderers = {
            "structural-tag": self.structural_tag,
            "json-schema": self.json_schema,
            "gbnf": self.gbnf,
            "lark": self.lark,
            "ollama": self.ollama_format,
        }
        if fmt not in renderers:
            raise ValueError(f"unknown constraint format {fmt!r}; choose one of {sorted(renderers)}")
        return renderers[fmt]()

    @property
    def sample_calls(self) -> list[str]:
        """One rendered call per tool (what the derivation checked against the template)."""
        return list(self._p["samples"])

    @property
    def sample_lead(self) -> str:
        """What an output starts with before its first call: the closer of a region the prompt left
        open (`</think>` after a prompt ending in `<think>`), else "". `sample_lead + call` for a
        call of `sample_calls` is a whole output the template parses into that call."""
        return str(self._p["lead"])

    def __repr__(self) -> str:
        return f"Constraint(tool_choice={self.tool_choice!r}, tools={self.tools!r}, parallel={self.parallel_tool_calls})"


# --------------------------------------------------------------------------------------------------


SEP_RUN = 2
"""Section markers written in a row where no text is allowed (`required`, named tool)."""

_CACHE: OrderedDict[str, Constraint] = OrderedDict()
_CACHE_SIZE = 256
_LOCK = threading.Lock()


DEFAULT_MAX_WHITESPACE = 32
"""`derive`'s default cap on a whitespace run inside a call (between tokens and in delimiters)."""


def derive(
    template: Any,
    tools: list[Any] | None = None,
    *,
    tool_choice: Any = "auto",
    parallel_tool_calls: bool | None = True,
    reasoning: bool | None = None,
    strict: bool | None = None,
    prefix: str | None = None,
    stop: list[str] | tuple[str, ...] | None = None,
    max_whitespace: int | None = DEFAULT_MAX_WHITESPACE,
    key_order: str = "any",
    time_budget: float | None = None,
) -> Constraint:
    """Derive the constraint for one request.

    `template`: a catalog name, a `response_template` dict or a loaded `Template`.
    `tools`: the request's tools (OpenAI shape or bare function dicts). `tool_choice`: `"auto"`,
    `"required"`, `"none"` or `{"type": "function", "function": {"name": ...}}` (exactly one call
    to that tool). `parallel_tool_calls=False`: at most one call. `reasoning`: `True` the output
    starts with reasoning, `False` it has none, `None` it may. `strict`: accepted for the request's
    semantics (schemas are always enforced). `prefix`: the rendered prompt, so that a region the
    prompt opened (a pre-written `<think>`) is continued. `stop`: strings the engine stops on,
    never written (default: the catalog entry's). `max_whitespace`: the longest run of whitespace
    written between the tokens of a call (JSON, Python literals, tags) and inside delimiters
    (`DEFAULT_MAX_WHITESPACE`, 32: room for pretty-printed JSON; None: unbounded), so a model under
    the grammar cannot spin on whitespace; free text and raw string values are not capped.
    `key_order`: `"any"` (default) lets object members and call keys come in any order, each at
    most once with every required one present, for objects of up to
    `ANY_ORDER_MAX_MEMBERS` (6) members; `"schema"` keeps the schema's order everywhere (the
    smallest grammar). `time_budget`: seconds the derivation may take (checked as it builds each
    rule and automaton step); past it `ConstraintTimeout` is raised and nothing is cached.

    Results are cached by all arguments but `time_budget` (a loaded `Template` by its spec). Raises `ConstraintError` naming the template field or
    schema keyword that cannot be expressed exactly.

    >>> c = derive("qwen3", [{"type": "function", "function": {"name": "ping", "parameters": {}}}],
    ...            tool_choice="required")
    >>> c.structural_tag()["format"]["type"]
    'triggered_tags'
    """
    try:
        key = json.dumps(
            [
                template if not isinstance(template, Template) else ["loaded", template.spec],
                tools,
                tool_choice,
                parallel_tool_calls,
                reasoning,
                strict,
                _prefix_key(template, prefix),
                stop,
                max_whitespace,
                key_order,
            ],
            sort_keys=True,
            default=str,
        )
    except (TypeError, ValueError):
        key = None
    if key is not None:
        with _LOCK:
            hit = _CACHE.get(key)
            if hit is not None:
                _CACHE.move_to_end(key)
                return hit
    if key_order not in KEY_ORDERS:
        raise ConstraintError(f"key_order must be one of {list(KEY_ORDERS)}, got {key_order!r}")
    with _budget.within(time_budget):
        c = _derive(
            template,
            tools,
            tool_choice,
            parallel_tool_calls,
            reasoning,
            strict,
            prefix,
            stop,
            max_whitespace,
            key_order,
        )
    if key is not None:
        with _LOCK:
            _CACHE[key] = c
            if len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
    return c


@functools.lru_cache(maxsize=64)
def _catalog_template(name: str) -> Template:
    from .. import catalog

    return load_response_template(catalog.get(name))


def _prefix_key(template: Any, prefix: str | None) -> str | None:
    """What of `prefix` the derivation depends on: the parser reads only the text after the last
    start-anchor match, so prompts that end alike (`...<|im_start|>assistant\n<think>\n`) share
    one cached constraint."""
    if not prefix:
        return None if prefix is None else ""
    try:
        if isinstance(template, Template):
            t = template
        elif isinstance(template, str):
            t = _catalog_template(template)
        else:
            return prefix
        return "tail:" + t.truncate_past_last_anchor(prefix)
    except (KeyError, ValueError):
        return prefix  # the derivation reports the problem


def _load(template: Any) -> tuple[Template, tuple[str, ...], str | None]:
    if isinstance(template, str):
        from .. import catalog

        entry = catalog.describe(template)
        return load_response_template(catalog.get(template)), tuple(entry.get("stop") or ()), template
    if isinstance(template, Template):
        return template, (), None
    if isinstance(template, dict):
        return load_response_template(template), (), None
    raise ConstraintError(
        f"template must be a catalog name, a dict or a Template, got {type(template).__name__}"
    )


def _derive(
    template, tools, tool_choice, parallel, reasoning, strict, prefix, stop, max_ws, key_order
) -> Constraint:
    tpl, catalog_stop, _name = _load(template)
    req = normalise_request(tools, tool_choice, parallel, reasoning, strict)
    stops = tuple(stop) if stop is not None else catalog_stop
    d = Deriver(tpl, req, prefix=prefix, stop=stops, max_whitespace=max_ws, key_order=key_order)
    return _assemble(d, req)


def _assemble(d: Deriver, req: Request) -> Constraint:
    g = d.g
    t = d.t
    offered = [x for x in req.tools if req.named is None or x["name"] == req.named]
    if req.tool_choice == "none":
        offered = []
    lo_calls = 1 if req.tool_choice in ("required", "named") else 0
    hi_calls: int | None = (
        0 if req.tool_choice == "none" else (1 if (not req.parallel or req.named) else None)
    )
    calls = d.build_calls(offered) if offered else []
    f = d.tool_field
    each = bool(f is not None and f.transform_each)
    text_allowed = req.tool_choice in ("auto", "none")

    # ---- free text and blocks in the implicit / null region
    implicit = t.implicit
    content_like = implicit is not None and implicit != "tool_calls" and implicit not in REASONING_FIELDS
    forbidden = d.implicit_forbidden() if t.implicit is not None or t.fields else ()
    start_bad = d._start_restriction()
    blocks: list[Expr] = []
    open_ends: list[Expr] = []  # blocks that may end the output without their closer
    tag_blocks: list[Expr] = []  # the structural tag leaves reasoning first only (a subset)
    for name, fld in t.fields.items():
        if fld.opener is None or name == "tool_calls":
            continue
        is_reasoning = fld is d.reasoning_field
        if is_reasoning and req.reasoning is False:
            continue
        if fld.content != "text" or fld.transform is not None:
            continue  # a field the answer text does not go to: not written
        opener, _ = d._emit(fld, "open")
        text = g.text_excluding(tuple(sorted(d._necessary(fld, "close"))), hint=f"{name}-text")
        closer = _written_closer(d, fld)
        if closer is None:
            continue
        blocks.append(seq(opener, text, closer))
        if not is_reasoning:
            tag_blocks.append(blocks[-1])
        if fld.closer is not None and any(d._is_stop(x) for x in fld.closer.literals or ()):
            # a closer that is a stop string (gpt-oss's final message ends with `<|return|>`):
            # the engine stops there without writing it, so the block may end the output unclosed
            open_ends.append(seq(opener, text))
    # a reasoning block after text (`\n<think>...`) or after another one (Inkling): the parser
    # reads it wherever its opener appears
    B = alt(*blocks) if blocks else NOTHING
    B_tag = alt(*tag_blocks) if tag_blocks else NOTHING
    # section markers: the implicit field's written closers (DeepSeek's and Kimi's call sections)
    SEP: Expr = NOTHING
    if implicit is not None and content_like and t.fields[implicit].closer is not None:
        seps = _written_closer(d, t.fields[implicit])
        if seps is not None:
            # a marker that also opens a field (Apertus's `<|tools_prefix|>` ends the content and
            # opens the call list) is not a stray section marker: it is not written as one
            opens = set().union(*(d._necessary(x, "open") for x in t.fields.values() if x.opener is not None))
            seps = _without_literals(seps, opens)
        if seps is not None and seps != NOTHING:
            SEP = g.rule("section", seps)

    # ---- call regions
    def call_forms(c: CallForms, opener: Expr) -> tuple[Expr, Expr, Expr]:
        if opener == NOTHING:  # an opener only at the start of the output (`^`), asked elsewhere
            return NOTHING, NOTHING, NOTHING
        body = g.rule(f"call-{c.tool}", seq(opener, c.body))
        C: Expr = g.rule(f"call-{c.tool}-closed", seq(body, c.closer)) if c.closer is not None else NOTHING
        if c.alone is not None and opener == c.opener:
            C = alt(C, c.alone)
        L = body if c.closes_at_eos else NOTHING
        K = body if c.chain_prefix is not None else NOTHING
        return C, K, L

    samples: list[str] = []
    if each and calls:
        assert f is not None
        opener_n, _ = d._emit(f, "open")
        opener_s, _ = d._emit(f, "open", at_start=True) if d.at_start else (opener_n, None)
        item = alt(*(c.body for c in calls))
        comma = _list_sep(d)
        lo_i, hi_i = max(lo_calls, 1), hi_calls
        first = alt(*(d.first_items.get(c.tool, c.body) for c in calls))
        items = seq(first, rep(seq(comma, item), lo_i - 1, None if hi_i is None else hi_i - 1))
        open_b, close_b = _brackets(d)
        if d.json_prefix == "[":
            open_b = EMPTY  # the opener wrote it (xLAM's `\[(?=...)`; the parser puts it back)
        listx = seq(open_b, d.ws, items, d.ws, close_b, d.ws)
        fits = d._lookahead_check()
        if fits is None or fits(seq(d.ws, open_b)):
            listx = seq(d.ws, listx)  # the JSON parser strips whitespace around the list
        if fits is not None and not fits(listx):
            raise ConstraintError(
                "Field 'tool_calls': its opener's lookahead does not hold for the call list"
            )
        c0 = calls[0]
        regions = []
        for opener in (opener_n, opener_s):
            cf = CallForms("*", opener, listx, c0.closer, c0.closes_at_eos, None)
            regions.append(call_forms(cf, opener))
        (Cn, Kn, Ln), (Cs, Ks, Ls) = regions
        lo_r, hi_r = lo_calls, (0 if hi_calls == 0 else 1)  # type: int, int | None

        def first_fitting(fits: Any) -> tuple[Expr, Expr, Expr]:
            op = _fitting(_strip_ws_run(g, _deref(g, opener_n)), lambda e: fits(seq(e, listx)))
            if op == NOTHING:
                return NOTHING, NOTHING, NOTHING
            return call_forms(CallForms("*", op, listx, c0.closer, c0.closes_at_eos, None), op)
    else:
        Cn_l, Kn_l, Ln_l = [], [], []
        for c in calls:
            C1, K1, L1 = call_forms(c, c.opener)
            Cn_l.append(C1)
            Kn_l.append(K1)
            Ln_l.append(L1)
        Cn, Kn, Ln = (
            alt(*Cn_l) if Cn_l else NOTHING,
            alt(*Kn_l) if Kn_l else NOTHING,
            alt(*Ln_l) if Ln_l else NOTHING,
        )
        if f is not None and calls and d.at_start:
            Cs_l, Ks_l, Ls_l = [], [], []
            for c in calls:
                op_s, _ = d._emit(
                    f, "open", subst={"name": Lit(c.tool)}, at_start=True, max_repeat=c.opener_repeat
                )
                C1, K1, L1 = call_forms(c, op_s)
                Cs_l.append(C1)
                Ks_l.append(K1)
                Ls_l.append(L1)
            Cs, Ks, Ls = alt(*Cs_l), alt(*Ks_l), alt(*Ls_l)
        else:
            Cs, Ks, Ls = Cn, Kn, Ln
        lo_r, hi_r = lo_calls, hi_calls
        if f is not None and not f.repeats and hi_r != 0:
            hi_r = 1
        # a call right after another through the opener's lookbehind form (MiniMax M3's
        # `(?<=</invoke>)\s*<invoke name=...>`: the second call needs no section opener)
        chained = []
        if f is not None and f.repeats and hi_r is None:
            for c in calls:
                if not isinstance(c.closer, Lit):
                    continue
                op, _ = d._emit(
                    f, "open", subst={"name": Lit(c.tool)}, behind=c.closer.text, max_repeat=c.opener_repeat
                )
                if op != c.opener and op != NOTHING:
                    chained.append(call_forms(c, op)[0])
                    d.next_openers.setdefault(c.tool, op)
        C_chain = alt(*chained) if chained else NOTHING
        if C_chain != NOTHING:
            Cn = seq(Cn, rep(C_chain, 0, None))
            Cs = seq(Cs, rep(C_chain, 0, None))

        def first_fitting(fits: Any) -> tuple[Expr, Expr, Expr]:
            forms = []
            for c in calls:
                assert f is not None
                # the opener as written, then with its whitespace runs capped as the lookahead may
                # need (`<tool_call>\s{0,16}<function=`), then without any; the body likewise
                openers = [c.opener] + [
                    d._emit(f, "open", subst={"name": Lit(c.tool)}, max_repeat=cap)[0]
                    for cap in _tighter_caps(d, c)
                ]
                for op0 in dict.fromkeys(openers):
                    for cap in (None, 16, 0):
                        b = _cap_leading_ws(g, c.body, cap)
                        op = _fitting(_strip_ws_run(g, _deref(g, op0)), lambda e, b=b: fits(seq(e, b)))
                        if op != NOTHING:
                            forms.append(call_forms(dataclasses.replace(c, opener=op, body=b), op))
                            break
            if not forms:
                return NOTHING, NOTHING, NOTHING
            C1, K1, L1 = (alt(*(x[i] for x in forms)) for i in range(3))
            if C_chain != NOTHING and C1 != NOTHING:
                C1 = seq(C1, rep(C_chain, 0, None))
            return C1, K1, L1

        for c in calls:
            if c.chain_prefix is not None and not first_literal(_strip_ws_prefix(c.opener)).startswith(
                c.chain_prefix
            ):
                raise ConstraintError(
                    f"Field 'tool_calls': the closer's lookahead {c.chain_prefix!r} does not match the opener"
                )

    region_items = [x for x in (Cn, Kn, Ln) if x != NOTHING]
    first_of = alt(*region_items, B) if (region_items or B != NOTHING) else EMPTY
    follow, _ = g.first_chars(first_of) if first_of not in (EMPTY, NOTHING) else ((), True)

    # Where no text is allowed, at most SEP_RUN section markers in a row (a section's end and the
    # next one's begin): the parser drops stray ones, but a model left free to repeat them (a
    # random one under llama.cpp) may never reach the call.
    def stretch(at_start: bool) -> Expr:
        if not text_allowed:
            return rep(SEP, 0, SEP_RUN) if SEP != NOTHING else EMPTY
        mid = alt(B, SEP) if SEP != NOTHING else B
        # free text: content, or text in a null region, which the parser drops (Cohere, Kimi K3's
        # `<|open|>tools<|sep|>` wrapper): it never holds a marker, so it never changes the calls
        T = g.text_excluding(forbidden, follow=follow or None, hint="content")
        T0 = (
            g.text_excluding(forbidden, follow=follow or None, lead=start_bad or None, hint="content")
            if at_start
            else T
        )
        if mid == NOTHING:
            return T0
        return seq(T0, rep(seq(mid, T), 0, None))

    S_later = stretch(False)
    gap = S_later
    tail_gap = rep(SEP, 0, SEP_RUN) if SEP != NOTHING else EMPTY
    # what may end the output after free text: nothing, or a block left open at a stop string
    end = opt(g.rule("open-end", alt(*open_ends))) if open_ends and text_allowed else EMPTY

    def or_end(x: Expr) -> Expr:
        return _or_end(x, end)

    def plain_body(lo_r: int) -> Any:
        def body(lead: Expr, C0: Expr, K0: Expr, L0: Expr, C: Expr, K: Expr, L: Expr) -> Expr:
            if hi_r == 0:
                return seq(lead, end)
            if hi_r == 1:
                inner = alt(seq(C0, seq(gap, end) if text_allowed else tail_gap), L0)
                return seq(lead, inner) if lo_r else seq(lead, or_end(inner))
            Ks = rep(K, 0, None)
            first_closed = alt(seq(K0, Ks, C), C0)
            first_tail = alt(seq(K0, Ks, L), L0)
            closed_run = seq(Ks, C)
            tail_run = seq(Ks, L)
            more = seq(gap, rep(seq(closed_run, gap), 0, None), or_end(tail_run))
            if not text_allowed:
                more = seq(tail_gap, rep(seq(closed_run, tail_gap), 0, None), opt(tail_run))
            inner = alt(seq(first_closed, more), first_tail)
            return seq(lead, inner) if lo_r else seq(lead, or_end(inner))

        return body

    body = plain_body(lo_r)
    forced_body = plain_body(1)  # at least one call: what follows reasoning a call opener closed
    la = d.closer_lookahead() if calls and not each else None
    if la is not None:
        body, forced_body = (
            _follow_checked_body(
                d, calls, la, SEP, implicit, gap if text_allowed else tail_gap, lo, hi_r, call_forms, end
            )
            for lo in (lo_r, 1)
        )
    rest_later = body(S_later, Cn, Kn, Ln, Cn, Kn, Ln)
    if d.at_start:
        S0 = stretch(True)
        rest_start = alt(body(S0, Cn, Kn, Ln, Cn, Kn, Ln), body(EMPTY, Cs, Ks, Ls, Cn, Kn, Ln))
    else:
        rest_start = rest_later

    # ---- reasoning
    R = d.reasoning_field
    mode = "none"
    reasoning_tag: tuple[str, str, tuple[str, ...]] | None = None
    root: Expr
    opened = t.fields.get(d.open_at_start) if d.open_at_start is not None else None
    if opened is not None and opened is not R:
        # the prompt opened a text field (Kimi K3's no-thinking prefill opens the response):
        # its text continues, then its closer, then the rest
        o_close = _written_closer(d, opened)
        if opened.content != "text" or opened.transform is not None or o_close is None:
            raise ConstraintError(
                f"the prompt leaves the field {opened.name!r} open; a constraint cannot continue it"
            )
        if req.reasoning:
            raise ConstraintError(f"reasoning=True, but the prompt opened {opened.name!r}")
        o_text = g.text_excluding(tuple(sorted(d._necessary(opened, "close"))), hint=f"{opened.name}-text")
        root = seq(o_text if text_allowed else EMPTY, o_close, rest_later)
    elif R is None:
        if req.reasoning:
            raise ConstraintError("reasoning=True, but the template has no reasoning field")
        root = rest_start
    else:
        r_forbidden = tuple(sorted(d._necessary(R, "close")))
        r_close = _written_closer(d, R)
        if r_close is None:
            raise ConstraintError(f"Field '{R.name}': no closer the model can write")
        # a call (or call section) may start inside the reasoning where the reasoning's closer
        # looks ahead for it (`</think>|(?=<tool_call>)`): the parser closes the reasoning there
        implicit_end: Expr = NOTHING
        if calls and hi_r != 0:
            for look in _lookahead_closers(d, R):

                def fits(e: Expr, look: Expr = look) -> bool:
                    return not violates_prefix(g, e, look)

                Cf, Kf, Lf = first_fitting(fits)
                starts = []
                if (Cf, Kf, Lf) != (NOTHING, NOTHING, NOTHING):
                    starts.append(forced_body(EMPTY, Cf, Kf, Lf, Cn, Kn, Ln))
                if SEP != NOTHING:
                    sep_fit = _fitting(_strip_ws_run(g, _deref(g, SEP)), fits)
                    if sep_fit != NOTHING:
                        starts.append(seq(sep_fit, rest_later))
                if starts:
                    implicit_end = alt(implicit_end, *starts)
        d.reasoning_closed_by_call = implicit_end != NOTHING
        # Reasoning text keeps out what would close it. Where the closer is literal markers, those;
        # where an alternative reads past its marker (`(?=<tool_calls>\s{0,16}\[)`), only the
        # matches: the marker quoted in prose (`put it in a <tool_calls> block`) stays writable,
        # and the text may end wherever what follows (the closer, or a call the lookahead reads)
        # completes no match under way.
        r_pattern = d.text_pattern(R, "close")
        r_literal = r_pattern is None or all(
            isinstance(x, Lit) for x in (r_pattern.items if isinstance(r_pattern, Alt) else (r_pattern,))
        )
        if r_literal or r_pattern is None:
            r_text = g.text_excluding(r_forbidden, hint="reasoning")
        else:
            r_follow = alt(r_close, implicit_end) if implicit_end != NOTHING else r_close
            r_text = g.text_avoiding(r_pattern, follow=r_follow, hint="reasoning")
        if d.open_at_start == R.name:
            if req.reasoning is False:
                raise ConstraintError("reasoning=False, but the prompt opened the reasoning region")
            mode = "inside"
            root = alt(seq(r_text, r_close, rest_later), seq(r_text, implicit_end))
        else:
            r_open_s, _ = d._emit(R, "open", at_start=d.at_start)
            r_open_n, _ = d._emit(R, "open")
            _, nullable = g.first_chars(r_open_s)
            block = seq(r_open_s, r_text, r_close)
            if implicit_end != NOTHING:
                # the reasoning block, or reasoning a call closes (then the calls and what follows);
                # GLM 4.5 writes a line break before `<think>` (content the parser strips)
                rest_later = alt(seq(r_close, rest_later), implicit_end)
                if text_allowed and not start_bad and r_open_s == r_open_n:
                    r_open_s = seq(rep(WS_CHARS, 0, 16 if d.max_ws is None else min(16, d.max_ws)), r_open_n)
                block = seq(r_open_s, r_text)
            if nullable and d.at_start:
                if req.reasoning is False:
                    raise ConstraintError(
                        f"Field '{R.name}' opens at the start of every output; reasoning=False cannot hold"
                    )
                mode = "required"
                root = seq(block, rest_later)
            elif req.reasoning is True:
                mode = "required"
                root = seq(block, rest_later)
            elif req.reasoning is False:
                root = rest_start
            else:
                mode = "optional"
                root = alt(seq(block, rest_later), rest_start)
            del r_open_n
        if isinstance(r_close, Lit) and r_literal:
            lit_open = first_literal(d._emit(R, "open")[0])
            if lit_open and mode in ("optional", "required"):
                reasoning_tag = (lit_open, r_close.text, r_forbidden)
            elif mode == "inside":
                reasoning_tag = ("", r_close.text, r_forbidden)

    g.root = g.rule("root", root).name
    if g.root in (None,):
        raise ConstraintError("empty constraint")
    # the root must be its own rule for the renderers
    gbnf = g.gbnf()
    lark = g.lark()

    # ---- self check: one sample call per tool must parse back into that call
    samples, lead = _self_check(d, calls, each, offered)

    tag = _structural_tag(
        d,
        calls,
        each,
        offered,
        req,
        text_allowed,
        content_like,
        B_tag,
        forbidden,
        mode,
        reasoning_tag,
        gbnf,
        lo_calls,
        hi_calls,
    )
    js, js_reason = _json_schema(d, calls, each, offered, req)
    return Constraint(
        {
            "template": d.t,
            "tool_choice": req.tool_choice if req.named is None else req.named,
            "tools": [x["name"] for x in offered],
            "parallel": req.parallel,
            "gbnf": gbnf,
            "lark": lark,
            "structural_tag": tag,
            "json_schema": js,
            "json_schema_reason": js_reason,
            "samples": samples,
            "lead": lead,
            "grammar": g,
        }
    )


def _strip_ws_run(g: Grammar, e: Expr) -> Expr:
    """Drop a leading run of whitespace only (not another optional part)."""
    e = _deref(g, e)
    if isinstance(e, Alt):
        return alt(*(_strip_ws_run(g, i) for i in e.items))
    if isinstance(e, Seq) and e.items:
        head = _deref(g, e.items[0])
        if (
            isinstance(head, Rep)
            and head.lo == 0
            and isinstance(head.item, Chars)
            and not ranges_minus(head.item.ranges, class_ranges(r"\s", 0))
        ):
            return seq(*e.items[1:])
        if isinstance(head, Alt):
            return seq(_strip_ws_run(g, head), *e.items[1:])
    return e


def _deref(g: Grammar, e: Expr) -> Expr:
    while isinstance(e, Ref):
        e = g.rules[e.name]
    return e


def _cap_leading_ws(g: Grammar, e: Expr, cap: int | None) -> Expr:
    """`e` with the whitespace run it starts with capped at `cap` (None: unchanged)."""
    if cap is None:
        return e
    e = _deref(g, e)
    if isinstance(e, Seq) and e.items:
        head = _deref(g, e.items[0])
        if isinstance(head, Rep) and head.lo == 0 and (head.hi is None or head.hi > cap):
            return seq(rep(head.item, 0, cap), *e.items[1:])
        return seq(_cap_leading_ws(g, head, cap), *e.items[1:])
    return e


def _lookahead_closers(d: Deriver, fld: Any) -> list[Expr]:
    """What the zero-width alternatives `(?=X)` of a field's closer look ahead for, as expressions."""
    if fld.closer is None or fld.closer.literals is not None:
        return []
    tree = parse(fld.closer.source)
    out = []
    for b in tree.kids if tree.op == "alt" else [tree]:
        while b.op == "group" and b.args[0] is None:
            b = b.kids[0]
        if b.op == "look" and b.args[0] and not b.args[1]:
            try:
                out.append(Emitter(d.g, d._where(fld, "close"), peek=True).emit(b.kids[0]))
            except ConstraintError:
                continue
    return out


def _or_end(x: Expr, end: Expr) -> Expr:
    """`x`, or what may end the output instead (`end`: nothing, or an optional open block)."""
    return opt(x) if end == EMPTY else alt(x, end)


def _tighter_caps(d: Deriver, c: CallForms) -> tuple[int, ...]:
    """Whitespace caps (16, 0) for re-emitting a call's opener where a lookahead needs less room,
    never looser than the cap the call was built with: GLM's `<tool_call>NAME` for a tool without
    arguments is written with no whitespace, since its closer's lookbehind reads
    `<tool_call>[^<\\s]+` (a gap there would leave the call unclosed)."""
    cap = d.max_ws if c.opener_repeat == -1 else c.opener_repeat
    return tuple(x for x in (16, 0) if cap is None or x <= cap)


def _written_closer(d: Deriver, fld: Any, max_repeat: int | None = -1) -> Expr | None:
    if fld.closer is None:
        return None
    if fld.closer.literals is not None:
        written = [x for x in fld.closer.literals if not d._is_stop(x)]
        return alt(*(Lit(x) for x in written)) if written else None
    e, _ = d._emit(fld, "close", max_repeat=max_repeat)
    e = _drop_stops(e, d.stop)
    return None if e == NOTHING else e


def _follow_checked_body(
    d: Deriver,
    calls: list[CallForms],
    la: tuple[Expr, bool, str],
    SEP: Expr,
    implicit: str | None,
    gap: Expr,
    lo_r: int,
    hi_r: int | None,
    call_forms: Any,
    open_end: Expr = EMPTY,
) -> Any:
    """The call sequence for a closer `X(?=LA)`: right after each call comes only what satisfies
    LA (exact, `violates_prefix`): the end of the output where LA admits it, the next call through
    its opener's form for "right after X" (MiniMax's `(?<=</invoke>)`), or a section marker written
    tight; after a section marker, the usual text and calls."""
    g = d.g
    la_expr, end_ok, closer_text = la
    f = d.tool_field
    assert f is not None
    if any(c.chain_prefix is not None for c in calls):
        raise ConstraintError("Field 'tool_calls': a closer lookahead next to a chained closer")

    def fits(e: Expr) -> bool:
        return not violates_prefix(g, e, la_expr)

    end_ok = end_ok or any(fits(Lit(s)) for s in d.stop if s)
    nexts = []
    for c in calls:
        for reps in (c.opener_repeat, *_tighter_caps(d, c)):  # whitespace capped as the lookahead needs
            op, _ = d._emit(
                f, "open", subst={"name": Lit(c.tool)}, max_repeat=reps, behind=closer_text or None
            )
            op = _fitting(op, fits) if op != NOTHING else NOTHING  # forms that open no new section
            if op != NOTHING:
                nexts.append(call_forms(c, op)[0])
                d.next_openers[c.tool] = op
                break
    C_next = alt(*nexts) if nexts else NOTHING
    sep_fit: Expr = NOTHING
    if SEP != NOTHING and implicit is not None:
        for reps in (-1, 16, 0):
            tight = _written_closer(d, d.t.fields[implicit], max_repeat=reps)
            # the forms of the section marker that satisfy the lookahead (Hy3: `</tool_calls:x>`
            # does, `<tool_calls:x>` does not)
            kept = _fitting(tight, fits) if tight is not None else NOTHING
            if kept != NOTHING:
                sep_fit = kept
                break
    # `X(?:A|(?=LA))`: after X, A (the section's end) and then the usual text and calls
    ct = d.closer_tails()
    tail: Expr = ct[1] if ct is not None else NOTHING
    if not end_ok and C_next == NOTHING and sep_fit == NOTHING and tail == NOTHING:
        raise ConstraintError(
            f"{d._where(f, 'close')}: nothing the grammar writes after a call satisfies its lookahead"
        )
    end = EMPTY if end_ok else NOTHING

    def body(lead: Expr, C0: Expr, K0: Expr, L0: Expr, C: Expr, K: Expr, L: Expr) -> Expr:
        del K0, K
        if hi_r == 0:
            return seq(lead, open_end)
        if hi_r == 1:
            after1 = alt(end, seq(sep_fit, gap, open_end), seq(tail, gap, open_end))
            inner = alt(seq(C0, after1), L0)
            return seq(lead, inner) if lo_r else seq(lead, _or_end(inner, open_end))
        name = g.declare("after-call")
        after = Ref(name)
        again = alt(open_end, seq(C, after), L)  # after text: possibly another call
        g.define(
            name,
            alt(
                end,
                seq(C_next, after),
                seq(sep_fit, gap, again),
                seq(tail, gap, again),
                L if end_ok else NOTHING,
            ),
        )
        inner = alt(seq(C0, after), L0)
        return seq(lead, inner) if lo_r else seq(lead, _or_end(inner, open_end))

    return body


def _bare_list(d: Deriver) -> bool:
    """`python-call-list` with `brackets: false` (Olmo 3): calls without the surrounding list."""
    f = d.tool_field
    args = f.content_args if f is not None and isinstance(f.content_args, dict) else {}
    return f is not None and f.content == "python-call-list" and args.get("brackets", True) is False


def _without_literals(e: Expr, lits: set[str]) -> Expr:
    """`e` without its literal alternatives that contain one of `lits` (through a sequence's last
    item and alternations; anything else is kept as it is)."""
    if isinstance(e, Lit):
        return NOTHING if any(x in e.text for x in lits) else e
    if isinstance(e, Alt):
        return alt(*(x for x in (_without_literals(i, lits) for i in e.items) if x != NOTHING))
    if isinstance(e, Seq) and e.items:
        last = _without_literals(e.items[-1], lits)
        return NOTHING if last == NOTHING else seq(*e.items[:-1], last)
    return e


def _brackets(d: Deriver) -> tuple[Expr, Expr]:
    return (EMPTY, EMPTY) if _bare_list(d) else (Lit("["), Lit("]"))


def _list_sep(d: Deriver) -> Expr:
    """Between two calls of a call list: a comma; in a bare list also a line break alone."""
    comma = seq(d.ws, Lit(","), d.ws)
    return alt(comma, Lit("\n")) if _bare_list(d) else comma


def _fitting(e: Expr, fits: Any, depth: int = 4) -> Expr:
    """The alternatives of `e` (expanded through sequences, `depth` levels) whose every string
    `fits`; NOTHING if none."""
    if fits(e):
        return e
    if depth == 0:
        return NOTHING
    if isinstance(e, Alt):
        return alt(*(_fitting(i, fits, depth - 1) for i in e.items))
    if isinstance(e, Seq):
        for i, it in enumerate(e.items):
            if isinstance(it, Rep) and it.lo == 0 and it.hi == 1:
                it = Alt((EMPTY, it.item))  # an optional part: with it, or without
            if isinstance(it, Alt):
                rest = e.items[i + 1 :]
                return alt(*(_fitting(seq(*e.items[:i], a, *rest), fits, depth - 1) for a in it.items))
    return NOTHING


def _drop_stops(e: Expr, stops: tuple[str, ...]) -> Expr:
    """Remove the alternatives that are stop strings: the engine ends the output there."""
    if isinstance(e, Lit):
        return NOTHING if e.text in stops else e
    if isinstance(e, Alt):
        return alt(*(x for x in (_drop_stops(i, stops) for i in e.items) if x != NOTHING)) if e.items else e
    if isinstance(e, Seq):
        return seq(
            *(_drop_stops(i, stops) if isinstance(i, (Alt, Lit)) and i is e.items[-1] else i for i in e.items)
        )
    return e


# --------------------------------------------------------------------------------------------------
# sample calls


def _shortest(g: Grammar, e: Expr) -> str:
    """A shortest string of `e` (for self-checks)."""
    out = g.shortest(e)
    if out is None:
        raise ConstraintError("the derived grammar accepts no string")
    return out


def _self_check(
    d: Deriver, calls: list[CallForms], each: bool, offered: list[dict[str, Any]]
) -> tuple[list[str], str]:
    out: list[str] = []
    if not calls:
        return out, ""
    g = d.g
    table = build_tool_table([{"name": x["name"], "parameters": x["parameters"]} for x in offered])
    prefix = d.prefix
    lead = ""
    if d.open_at_start is not None:
        lead = _shortest(g, _written_closer(d, d.t.fields[d.open_at_start]) or EMPTY)
    f = d.tool_field
    assert f is not None
    for c in calls:
        end = c.closer if c.closer is not None else EMPTY
        if each:
            opener, _ = d._emit(f, "open")
            if opener == NOTHING and d.at_start:
                opener, _ = d._emit(f, "open", at_start=True)  # an opener only at the start (`^`)
            open_b, close_b = _brackets(d)
            if d.json_prefix == "[":
                open_b = EMPTY  # written by the opener
            first = d.first_items.get(c.tool, c.body)
            text = _shortest(g, seq(opener, open_b, first, close_b, end))
            two = _shortest(g, seq(opener, open_b, first, Lit(", "), c.body, close_b, end))
        else:
            text = _shortest(g, seq(c.opener, c.body, end))
            two = text + text if f.repeats and c.closer is not None else text
            if d.closer_lookahead() is not None:  # the second call is written the way the grammar does
                nxt = d.next_openers.get(c.tool)
                two = text + _shortest(g, seq(nxt, c.body, end)) if nxt is not None and f.repeats else text
        out.append(text)
        for sample, n in ((text, 1), (two, 2 if two != text else 1)):
            try:
                msg = parse_response(
                    lead + sample,
                    d.t,
                    prefix=prefix,
                    tools=[
                        {"type": "function", "function": {"name": x["name"], "parameters": x["parameters"]}}
                        for x in offered
                    ],
                )
            except ValueError as e:
                raise ConstraintError(
                    f"the derived call for {c.tool!r} does not parse with the template ({e}); sample {sample!r}"
                ) from None
            got = _calls_of(msg.get("tool_calls"))
            if len(got) != n or any(name != c.tool for name, _ in got):
                raise ConstraintError(
                    f"the derived call for {c.tool!r} parses as {got!r}, not as {n} call(s) to it; sample {sample!r}"
                )
    del table
    return out, lead


def _calls_of(value: Any) -> list[tuple[str, Any]]:
    from ..openai._calls import calls_from_value

    out = []
    items = value if isinstance(value, list) else ([] if value is None else [value])
    flat: list[Any] = []
    for it in items:
        flat.extend(it if isinstance(it, list) else [it])
    for call, _err in calls_from_value(flat) if flat else []:
        if call is not None:
            out.append((call["name"], call["arguments"]))
    return out


# --------------------------------------------------------------------------------------------------
# structural tag and JSON schema


def _ebnf_of(d: Deriver, e: Expr) -> str:
    g = d.g
    saved = g.root
    name = g.rule("tag-content", e).name if not isinstance(e, type(None)) else None
    g.root = name
    try:
        return g.gbnf()
    finally:
        g.root = saved


def _strip_ws_prefix(e: Expr) -> Expr:
    """Drop a leading whitespace repetition (free text before a trigger may hold it)."""
    if isinstance(e, Seq) and e.items and isinstance(e.items[0], Rep) and e.items[0].lo == 0:
        return seq(*e.items[1:])
    if isinstance(e, Alt):
        return alt(*(_strip_ws_prefix(i) for i in e.items))
    return e


def _split_begin(e: Expr) -> tuple[str, Expr] | None:
    e = _strip_ws_prefix(e)
    if isinstance(e, Lit) and e.text:
        return e.text, EMPTY
    if isinstance(e, Seq) and isinstance(e.items[0], Lit):
        return e.items[0].text, seq(*e.items[1:])
    return None


def _structural_tag(
    d, calls, each, offered, req, text_allowed, content_like, B, forbidden, mode, reasoning_tag, gbnf, lo, hi
) -> dict[str, Any]:
    whole = {"type": "structural_tag", "format": {"type": "grammar", "grammar": gbnf}}
    if req.tool_choice == "none" and content_like and B == NOTHING and mode == "none":
        return {"type": "structural_tag", "format": {"type": "any_text", "excludes": list(forbidden)}}
    if (
        not calls
        or not content_like
        or B != NOTHING
        or (mode == "inside" and reasoning_tag is None)
        or d.reasoning_closed_by_call
        or _has_sections(d)
    ):
        return whole
    f = d.tool_field
    tags = []
    triggers: list[str] = []
    if each:
        opener, _ = d._emit(f, "open")
        if d.at_start and d._emit(f, "open", at_start=True)[0] != opener:
            return whole
        split = _split_begin(opener)
        c0 = calls[0]
        if split is None or c0.closer is None or c0.closes_at_eos:
            return whole
        comma = _list_sep(d)
        item = alt(*(c.body for c in calls))
        lo_i, hi_i = max(lo, 1), hi
        items = seq(item, rep(seq(comma, item), lo_i - 1, None if hi_i is None else hi_i - 1))
        begin, rest = split
        end = c0.closer.text if isinstance(c0.closer, Lit) else ""
        open_b, close_b = _brackets(d)
        content = seq(rest, open_b, d.ws, items, d.ws, close_b, EMPTY if end else c0.closer)
        tags.append(
            {
                "type": "tag",
                "begin": begin,
                "content": {"type": "grammar", "grammar": _ebnf_of(d, content)},
                "end": end,
            }
        )
        triggers.append(begin)
        stop_after_first = True
    else:
        for c in calls:
            split = _split_begin(c.opener)
            if split is None or c.closer is None or c.closes_at_eos or c.chain_prefix:
                return whole
            if d.at_start:
                op_s, _ = d._emit(
                    f, "open", subst={"name": Lit(c.tool)}, at_start=True, max_repeat=c.opener_repeat
                )
                if op_s != c.opener:
                    return whole
            begin, rest = split
            end = c.closer.text if isinstance(c.closer, Lit) else ""
            content = seq(rest, c.body, EMPTY if end else c.closer)
            tags.append(
                {
                    "type": "tag",
                    "begin": begin,
                    "content": {"type": "grammar", "grammar": _ebnf_of(d, content)},
                    "end": end,
                }
            )
            if begin not in triggers:
                triggers.append(begin)
        stop_after_first = hi == 1
    # The triggers are the opener's own markers (every match contains one): free text can then
    # never hold a call opener, and a marker is always followed by one of the tags.
    markers = sorted(d._necessary(f, "open"), key=len)
    common: list[str] = []
    for b in triggers:
        m = next((x for x in markers if b.startswith(x)), None)
        if m is None:
            return whole
        if m not in common:
            common.append(m)
    if any(not any(b.startswith(x) for b in triggers) for x in markers):
        return whole
    excludes = [x for x in forbidden if not any(x.startswith(tg) or tg.startswith(x) for tg in common)]
    fmt: dict[str, Any] = {
        "type": "triggered_tags",
        "triggers": common,
        "tags": tags,
        "at_least_one": lo >= 1,
        "stop_after_first": stop_after_first,
    }
    if excludes:
        fmt["excludes"] = excludes
    if stop_after_first and text_allowed:
        # At most one call, then text again: not as `sequence[triggered_tags, any_text]`, whose
        # boundary XGrammar may place inside a marker (`x<` | `TOOLCALL>...`), so that the text
        # holds a second call after all; the whole grammar is exact.
        return whole
    if mode in ("optional", "required", "inside") and reasoning_tag is not None:
        r_open, r_close, r_ex = reasoning_tag
        ex = [x for x in r_ex if x != r_close]
        any_text: dict[str, Any] = {"type": "any_text"}
        if ex:
            any_text["excludes"] = ex
        if mode == "inside":
            block: dict[str, Any] = {
                "type": "sequence",
                "elements": [any_text, {"type": "const_string", "value": r_close}],
            }
        else:
            block = {"type": "tag", "begin": r_open, "content": any_text, "end": r_close}
        if mode == "optional":
            return whole  # an optional reasoning block before free text is not a structural-tag shape
        fmt = {"type": "sequence", "elements": [block, fmt]}
    elif mode != "none":
        return whole
    return {"type": "structural_tag", "format": fmt}


def _json_schema(d, calls, each, offered, req) -> tuple[dict[str, Any] | None, str]:
    reason = (
        "no JSON schema is exact for this template: its calls are written with markers around them "
        "(use the structural tag, GBNF or Lark form)"
    )
    f = d.tool_field
    if (
        not calls
        or f is None
        or req.tool_choice not in ("required", "named")
        or d.reasoning_field is not None
        and req.reasoning is not False
        and d.open_at_start is None
        and not _reasoning_absent(d, req)
    ):
        return None, reason
    if not each or f.content != "json" or not d.at_start or d.single_key or d.json_prefix:
        return None, reason
    opener_s, _ = d._emit(f, "open", at_start=True)
    _, nullable = d.g.first_chars(_strip_ws_prefix(opener_s))
    if not nullable or (calls[0].closer is not None and not calls[0].closes_at_eos):
        return None, reason
    args = f.content_args or {}
    if any(args.get(k) for k in ("string_delims", "unquoted_keys", "prefix", "suffix")):
        return None, reason
    name_key, args_key = _each_keys(d)
    items = []
    for x in offered:
        params = x["parameters"]
        items.append(
            {
                "type": "object",
                "properties": {name_key: {"const": x["name"]}, args_key: params},
                "required": [name_key, args_key],
                "additionalProperties": False,
            }
        )
    schema: dict[str, Any] = {
        "type": "array",
        "items": items[0] if len(items) == 1 else {"anyOf": items},
        "minItems": 1,
    }
    if not req.parallel or req.named:
        schema["maxItems"] = 1
    return schema, ""


def _has_sections(d: Deriver) -> bool:
    imp = d.t.implicit
    return (
        imp is not None
        and d.t.fields[imp].closer is not None
        and _written_closer(d, d.t.fields[imp]) is not None
    )


def _reasoning_absent(d: Deriver, req: Request) -> bool:
    return req.reasoning is False


def _each_keys(d: Deriver) -> tuple[str, str]:
    tr = d.tool_field.transform  # type: ignore[union-attr]
    fn = tr["function"]
    return fn["name"][1:-1], fn["arguments"][1:-1]
