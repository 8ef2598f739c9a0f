"""Deriving one constraint from a response template and a request's tools.

Theory of operation
-------------------
The template is the parser's description of the output; the constraint is the generator's. Both
must agree: every string the constraint accepts must parse, with the same template, into exactly
the calls the constraint allowed. The derivation therefore builds the output language from the
template's own parts:

* each tool call is the tool field's opener (its `name` group replaced by the tool's name), a
  body written by the field's content parser (`json` with its dialect options, `xml-inline` with
  its tag pattern, `python-call-list`) carrying the tool's arguments as its JSON schema allows,
  and the closer; where a transform reads the name and arguments decides where they go;
* free text (content, reasoning, raw string values) excludes the literals every match of each
  delimiter the parser watches at that point contains (`_regex.necessary`), so text can never be
  taken for a marker; where a delimiter reads past its marker (a lookahead, a tag's tail after a
  raw value), reasoning and raw values exclude only the matches (`_regex.as_match_pattern`,
  `Grammar.text_avoiding`), so a marker quoted in prose stays writable; a tag pattern with several
  `value` groups (CDATA or bare) is written once per group (`_value_variants`);
* `tool_choice`, `parallel_tool_calls` and reasoning decide how many calls, and what else, may be
  written around them.

Parts of a delimiter that only say *where* it may match (a trailing lookahead, a lookbehind
alternative, `\\Z`) are left out of the written language, except a leading lookbehind anchored at
the buffer's start (`(?<=^B)X`, a reasoning opener that holds only before the answer): where the
delimiter is written at the start of the output, B is written before X, which is exactly what makes
it hold (elsewhere it is never written); every derived constraint is then checked
by rendering one sample call per tool and parsing it with the template (`_self_check`). Anything a
grammar cannot express exactly raises `ConstraintError` naming the field.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from typing import Any

import regex

from .._parser import ResponseParser
from .._template import Field, Template
from ._grammar import (
    EMPTY,
    NOTHING,
    WS_CHARS,
    Alt,
    Chars,
    Expr,
    Grammar,
    Lit,
    Rep,
    Seq,
    alt,
    json_scalar_automaton,
    ranges_union,
    rep,
    seq,
    violates_prefix,
    violates_suffix,
)
from ._regex import (
    Emitter,
    Node,
    _has_look,
    _literal_text,
    as_match_pattern,
    cat,
    leading_negative_lookbehinds,
    literal_tree,
    necessary,
    parse,
)
from ._schema import PY_NAME, ConstraintError, SchemaCompiler, _disjoint_by_type, members_rule

REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")
TOOL_FIELD = "tool_calls"
_TOOL_CHOICES = ("auto", "required", "none")
_WORD_KEY = regex.compile(r"\w+")
_LENIENT_KEY = regex.compile(r'[^\s{}\[\]:,"][^{}\[\]:,"]*?')
_PY_NAME = regex.compile(PY_NAME)


@dataclass
class Request:
    """The request options a constraint depends on (normalised)."""

    tools: list[dict[str, Any]]
    tool_choice: str  # auto | required | none | named
    named: str | None
    parallel: bool
    reasoning: bool | None
    strict: bool | None


@dataclass
class CallForms:
    """The ways one tool call can be written."""

    tool: str
    opener: Expr
    body: Expr
    closer: Expr | None  # None: the call has no written closer
    closes_at_eos: bool  # the call may be the last thing in the output without its closer
    chain_prefix: str | None  # the call may be closed by the next call starting with this literal
    sample: str = ""
    opener_repeat: int | None = -1  # the opener's repetition cap (-1: max_whitespace; 0: none)
    alone: Expr | None = None  # a whole call without body or closer (DSML's `<invoke name="x"/>`)


@dataclass
class Derivation:
    """Everything `Constraint` renders, built once."""

    grammar: Grammar
    request: Request
    template: Template
    calls: list[CallForms]
    text_forbidden: tuple[str, ...] | None
    reasoning_open: tuple[str, str, tuple[str, ...]] | None  # (opener literal, closer literal, excludes)
    reasoning_mode: str  # "none" | "optional" | "required" | "inside"
    json_schema: dict[str, Any] | None = None
    json_schema_reason: str | None = None
    tag_reason: str | None = None
    notes: list[str] = field(default_factory=list)


def _tool_list(tools: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if tools is None:
        return out
    if not isinstance(tools, list):
        raise ConstraintError(f"tools must be a list, got {type(tools).__name__}")
    seen = set()
    for i, t in enumerate(tools):
        fn = t.get("function", t) if isinstance(t, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise ConstraintError(f"tools[{i}] has no function name")
        if fn["name"] in seen:
            raise ConstraintError(f"tools[{i}]: the tool {fn['name']!r} is offered twice")
        seen.add(fn["name"])
        params = fn.get("parameters")
        if params is None:
            params = {"type": "object", "properties": {}}
        if not isinstance(params, dict):
            raise ConstraintError(f"tools[{i}] ({fn['name']}): 'parameters' must be an object")
        out.append({"name": fn["name"], "parameters": params, "strict": fn.get("strict")})
    return out


def normalise_request(
    tools: Any, tool_choice: Any, parallel_tool_calls: Any, reasoning: Any, strict: Any
) -> Request:
    tl = _tool_list(tools)
    named = None
    if isinstance(tool_choice, dict):
        fn = tool_choice.get("function") if tool_choice.get("type", "function") == "function" else None
        name = fn.get("name") if isinstance(fn, dict) else tool_choice.get("name")
        if not isinstance(name, str):
            raise ConstraintError(
                "tool_choice: a named choice needs {'type': 'function', 'function': {'name': ...}}"
            )
        named, choice = name, "named"
    elif tool_choice is None:
        choice = "auto"
    elif isinstance(tool_choice, str) and tool_choice in _TOOL_CHOICES:
        choice = tool_choice
    else:
        raise ConstraintError(
            f"tool_choice must be 'auto', 'required', 'none' or a named function, got {tool_choice!r}"
        )
    if choice in ("required", "named") and not tl:
        raise ConstraintError(f"tool_choice {choice!r} needs at least one tool")
    if named is not None and named not in {t["name"] for t in tl}:
        raise ConstraintError(f"tool_choice names {named!r}, which is not among the offered tools")
    if parallel_tool_calls is None:
        parallel_tool_calls = True
    if not isinstance(parallel_tool_calls, bool):
        raise ConstraintError("parallel_tool_calls must be a boolean")
    if reasoning is not None and not isinstance(reasoning, bool):
        raise ConstraintError("reasoning must be True, False or None")
    if strict is not None and not isinstance(strict, bool):
        raise ConstraintError("strict must be a boolean or None")
    return Request(tl, choice, named, parallel_tool_calls, reasoning, strict)


class Deriver:
    def __init__(
        self,
        template: Template,
        request: Request,
        *,
        prefix: str | None,
        stop: tuple[str, ...],
        max_whitespace: int | None,
        key_order: str = "any",
    ) -> None:
        self.t = template
        self.req = request
        self.key_order = key_order
        self.reasoning_closed_by_call = False  # a call opener may end the reasoning (no closer)
        self._vtext_cache: dict[
            tuple[str, Node, tuple[str, ...]], tuple[Expr, Expr | None, Expr | None] | None
        ] = {}
        self.prefix = prefix if prefix is not None else ""
        self.stop = stop
        self.max_ws = max_whitespace
        self.g = Grammar()
        self.ws: Expr = rep(WS_CHARS, 0, max_whitespace)
        self.notes: list[str] = []
        truncated = template.truncate_past_last_anchor(self.prefix) if prefix is not None else ""
        self.at_start = truncated == ""
        self.tool_field = template.fields.get(TOOL_FIELD)
        self.reasoning_field = next(
            (template.fields[n] for n in REASONING_FIELDS if n in template.fields), None
        )
        self.open_at_start = self._initial_open()
        self.next_openers: dict[str, Expr] = {}  # tool -> opener of a call right after another
        self.json_prefix = ""  # content_args.prefix of a JSON tool field
        self.single_key = False  # content_args.single_key_objects: {NAME: ARGS} list items
        self.first_items: dict[str, Expr] = {}  # tool -> the first list item where a lookahead reads it

    # -- helpers ---------------------------------------------------------------------------------

    def _initial_open(self) -> str | None:
        parser = ResponseParser(self.t, prefix=self.prefix)
        open_field = None
        # An opener at the very end of the prompt may still be pending (`<think>(?:\s*<think>)?`
        # waits to see whether the output extends it): a probe character that extends no
        # delimiter settles it, as any output not extending the opener would.
        events = list(parser.initial_events) + list(parser.feed("\x00"))
        for e in events:
            if e["type"] == "region_open":
                open_field = e["field"]
            elif e["type"] in ("region_close", "region_malformed"):
                open_field = None
        if open_field is not None and open_field == self.t.implicit:
            return None
        return open_field

    def _tree(self, f: Field, which: str) -> Node | None:
        d = f.opener if which == "open" else f.closer
        if d is None:
            return None
        if d.literals is not None:
            return literal_tree(d.literals)
        return leading_negative_lookbehinds(parse(d.source))[0]

    def _not_behind(self, f: Field) -> set[str]:
        """Literals free text must not contain so that no leading `(?<!B)` of f's opener fails."""
        d = f.opener
        if d is None or d.literals is not None:
            return set()
        out: set[str] = set()
        for body in leading_negative_lookbehinds(parse(d.source))[1]:
            lits = necessary(body)
            if not lits:
                raise ConstraintError(
                    f"{self._where(f, 'open')}: a negative lookbehind that can match text without a "
                    "fixed marker, so free text before the opener cannot be kept from satisfying it"
                )
            out |= lits
        return out

    def _where(self, f: Field, which: str) -> str:
        d = f.opener if which == "open" else f.closer
        key = ("open" if which == "open" else "close") + (
            "" if d is not None and d.literals is not None else "_pattern"
        )
        return f"Field '{f.name}': '{key}'"

    def _necessary(self, f: Field, which: str) -> set[str]:
        tree = self._tree(f, which)
        if tree is None:
            return set()
        avoid: frozenset[str] = frozenset()
        implicit = self.t.implicit
        if f is self.tool_field and which == "open" and implicit is not None and implicit != f.name:
            # the implicit field's closers are written between calls as section markers: a call
            # marker among them (Kimi K2 drops a stray `<|tool_call_argument_begin|>`) cannot be
            # the one free text is kept free of
            sec = self._tree(self.t.fields[implicit], "close")
            avoid = frozenset(necessary(sec) or ()) if sec is not None else frozenset()
        lits = necessary(tree, avoid)
        if lits is None:
            raise ConstraintError(
                f"{self._where(f, which)} can match text that contains no fixed marker, so free text "
                "next to it cannot be kept from being read as that delimiter"
            )
        return lits

    def _compiler(self, dialect: str, forbidden: tuple[str, ...], root: Any) -> SchemaCompiler:
        """A schema compiler for values in `dialect` (`json`, `raw`, `python`) next to this
        derivation's markers, whitespace cap and key order."""
        return SchemaCompiler(
            self.g, dialect, forbidden=forbidden, ws=self.ws, root_schema=root, key_order=self.key_order
        )

    def text_pattern(self, f: Field, which: str) -> Expr | None:
        """The strings whose presence in free text would let f's delimiter match there (its
        alternatives with what their lookarounds read, `as_match_pattern`), for
        `Grammar.text_avoiding`: reasoning may quote `<tool_calls>` where the closer watches
        `(?=<tool_calls>\\s{0,16}\\[)`. Alternatives that match only at an edge of the text (`^`)
        are left out, as `necessary` leaves them out. None: not readable so."""
        tree = self._tree(f, which)
        if tree is None:
            return None
        while tree.op == "group" and tree.args[0] is None and tree.kids:
            tree = tree.kids[0]
        parts = []
        for b in tree.kids if tree.op == "alt" else (tree,):
            if necessary(b) == set():
                continue
            p = as_match_pattern(b)
            if p is None:
                return None
            parts.append(p)
        return _match_core(self.g, alt(*parts)) if parts else None

    def _emit(
        self,
        f: Field,
        which: str,
        subst: dict[str, Expr] | None = None,
        at_start: bool = False,
        max_repeat: int | None = -1,
        behind: str | None = None,
    ) -> tuple[Expr, set[str]]:
        tree = self._tree(f, which)
        assert tree is not None
        drop = self._self_closing_parts(f) if which == "open" else ()
        em = Emitter(
            self.g,
            self._where(f, which),
            subst=subst,
            at_start=at_start,
            max_repeat=self.max_ws if max_repeat == -1 else max_repeat,
            drop_optional=drop,
            behind=behind,
        )
        e = em.emit(tree)
        if which == "open":
            for tail in self._self_closing_tails(f):
                if self.g.can_end_with(e, tail):
                    raise ConstraintError(
                        f"{self._where(f, 'close')}: its lookbehind alternative can match the end of an "
                        f"opener the grammar writes (ending in {tail!r}), which would close the call "
                        "before its arguments"
                    )
        return e, em.used

    def _self_closing_tails(self, f: Field) -> tuple[str, ...]:
        """The fixed endings of the closer's lookbehind alternatives (`(?<=... />)` -> `/>`).

        Such an alternative closes a call that has no body (DSML's `<invoke name="x"/>`). The grammar
        always writes a body and a written closer, so the opener it writes must never end that way.
        """
        if f.closer is None or f.closer.literals is not None:
            return ()
        tree = parse(f.closer.source)
        out = []
        for b in tree.kids if tree.op == "alt" else [tree]:
            while b.op == "group" and b.args[0] is None:
                b = b.kids[0]
            if b.op == "look" and not b.args[0] and not b.args[1]:
                tail = _trailing_literal(b.kids[0])
                if not tail:
                    raise ConstraintError(
                        f"{self._where(f, 'close')}: a lookbehind alternative without a fixed ending"
                    )
                out.append(tail)
        return tuple(out)

    def _self_closing_parts(self, f: Field) -> tuple[str, ...]:
        """Optional literals of the opener that are a prefix of a self-closing ending (`/` of `/>`)."""
        tails = self._self_closing_tails(f)
        return tuple(t[:i] for t in tails for i in range(1, len(t)))

    def _is_stop(self, lit: str) -> bool:
        return lit in self.stop

    # -- free text ---------------------------------------------------------------------------

    def implicit_forbidden(self) -> tuple[str, ...]:
        lits: set[str] = set()
        for f in self.t.fields.values():
            if f.opener is not None:
                lits |= self._necessary(f, "open") | self._not_behind(f)
        if self.t.implicit is not None:
            lits |= self._necessary(self.t.fields[self.t.implicit], "close")
        return tuple(sorted(lits))

    def _start_restriction(self) -> tuple[tuple[int, int], ...]:
        """Characters text at buffer position 0 may not start with (a `^` opener alternative)."""
        bad: tuple[tuple[int, int], ...] = ()
        if not self.at_start:
            return bad
        for f in self.t.fields.values():
            if f.opener is None or f.opener.literals is not None:
                continue
            tree = leading_negative_lookbehinds(parse(f.opener.source))[0]
            em = Emitter(self.g, self._where(f, "open"), at_start=True, peek=True)
            with_start = em.emit(tree)
            em2 = Emitter(self.g, self._where(f, "open"), at_start=False, peek=True)
            without = em2.emit(tree)
            if with_start == without:
                continue
            first, nullable = self.g.first_chars(with_start)
            if nullable and f is not self.reasoning_field:
                raise ConstraintError(
                    f"{self._where(f, 'open')} matches the empty string at the start of the output"
                )
            bad = ranges_union(bad, first)
        return bad

    # -- calls ---------------------------------------------------------------------------------

    def _transform_paths(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(path of the name, path of the arguments) in the transform's scope."""
        f = self.tool_field
        assert f is not None
        tr = f.transform
        if tr is None:
            return ("content", "name"), ("content", "arguments")
        fn = tr.get("function") if isinstance(tr, dict) else None

        def ph(v: Any, what: str) -> tuple[str, ...]:
            m = regex.fullmatch(r"\{(\w+(?:\.\w+)*)\}", v) if isinstance(v, str) else None
            if m is None:
                raise ConstraintError(
                    f"Field '{f.name}': 'transform' must take the call's {what} from a placeholder"
                )
            return tuple(m.group(1).split("."))

        if isinstance(fn, str):
            base = ph(fn, "function")
            return (*base, "name"), (*base, "arguments")
        if isinstance(fn, dict):
            return ph(fn.get("name"), "name"), ph(fn.get("arguments"), "arguments")
        raise ConstraintError(f"Field '{f.name}': 'transform' has no 'function' the calls can be read from")

    def build_calls(self, tools: list[dict[str, Any]]) -> list[CallForms]:
        f = self.tool_field
        if f is None:
            raise ConstraintError("the template has no 'tool_calls' field: it cannot express tool calls")
        if f.opener is None:
            raise ConstraintError(f"Field '{f.name}' has no opener: calls cannot be told from text")
        name_path, args_path = self._transform_paths()
        for p in (name_path, args_path):
            if f.transform_each and p[0] == "content":
                raise ConstraintError(f"Field '{f.name}': 'transform_each' reads the call from list items")
        out = []
        for tool in tools:
            out.append(self._call(f, tool, name_path, args_path))
        return out

    def _body_forbidden(self, f: Field) -> tuple[str, ...]:
        if f.closer is None:
            return ()
        if f.string_guard is not None:
            return ()  # JSON-aware closing: the closer is not searched inside strings
        return tuple(sorted(self._necessary(f, "close")))

    def _call(
        self, f: Field, tool: dict[str, Any], name_path: tuple[str, ...], args_path: tuple[str, ...]
    ) -> CallForms:
        name = tool["name"]
        tool["parameters"]
        where = f"tool {name!r}"
        captures: dict[str, Expr] = {}
        if len(name_path) == 1 and not f.transform_each:
            captures[name_path[0]] = Lit(name)
        for extra in ("id",):
            if extra in _transform_placeholders(f.transform) and extra not in captures:
                # an id the model writes (Kimi's `functions.NAME:IDX`): its own group structure is written
                pass
        opener, used = self._emit(f, "open", subst=captures)
        if captures and not used & set(captures):
            raise ConstraintError(
                f"Field '{f.name}': the transform reads '{name_path[0]}', which the opener does not capture"
            )
        forbidden = self._body_forbidden(f)
        body = self._body(f, tool, name_path, args_path, forbidden, where)
        fits = self._lookahead_check()
        if fits is not None and not f.transform_each and not fits(body):
            raise ConstraintError(
                f"{self._where(f, 'open')}: its lookahead does not hold for every call the grammar "
                f"writes for {name!r}"
            )
        closer: Expr | None = None
        closes_at_eos = False
        chain: str | None = None
        opener_repeat: int | None = -1
        if f.closer is None:
            closes_at_eos = True
        elif f.closer.literals is not None:
            written = [lit for lit in f.closer.literals if not self._is_stop(lit)]
            closes_at_eos = len(written) < len(f.closer.literals)
            closer = alt(*(Lit(x) for x in written)) if written else None
        elif self.closer_tails() is not None:
            tails = self.closer_tails()
            assert tails is not None
            closer = Emitter(self.g, self._where(f, "close"), max_repeat=self.max_ws).emit(tails[0])
        else:
            tree = parse(f.closer.source)
            branches = tree.kids if tree.op == "alt" else [tree]
            written_exprs = []
            behind: list[tuple[Expr, Expr]] = []  # (what must precede, the closer) of `(?<=L)X`
            for b in branches:
                lt = _look_literal(b)
                if lt is not None:
                    chain = lt
                    continue
                lb = _lookbehind_form(b, tuple(x for x in branches if x is not b))
                if lb is not None:
                    where_c = self._where(f, "close")
                    behind.append(
                        (
                            Emitter(self.g, where_c, peek=True).emit(lb[0]),
                            Emitter(self.g, where_c, max_repeat=self.max_ws).emit(lb[1]),
                        )
                    )
                    continue
                if _has_look(b) and len(branches) > 1:
                    continue  # written only where what follows satisfies it: not a closer the grammar writes
                lit = _literal_of(b)
                if lit is not None and self._is_stop(lit):
                    closes_at_eos = True
                    continue
                stops = _ws_then_literals(b)
                if stops and all(self._is_stop(x) for x in stops):
                    # `\s*(?:<|eot_id|>|<|im_end|>)` (xLAM): the engine's stop ends the call
                    closes_at_eos = True
                    continue
                em = Emitter(self.g, self._where(f, "close"), max_repeat=self.max_ws)
                e = em.emit(b)
                if e != NOTHING:
                    written_exprs.append(e)
            if not written_exprs and behind:
                # `(?<=L)X`: X closes the call only after L; every call written must end with L.
                # Failing that, try the opener without its optional repetitions (GLM's
                # `<tool_call>\s*NAME`: `<tool_call>NAME` is what `(?<=<tool_call>[^<\s]+)` reads).
                if f.transform_each:
                    raise ConstraintError(f"{self._where(f, 'close')}: a lookbehind closer after a call list")
                tight, _ = self._emit(f, "open", subst=captures, max_repeat=0)
                for op, reps in ((opener, -1), (tight, 0)):
                    ok = [x for lb_re, x in behind if not violates_suffix(self.g, seq(op, body), lb_re)]
                    if ok:
                        opener, written_exprs, opener_repeat = op, ok, reps
                        break
                else:
                    raise ConstraintError(
                        f"{self._where(f, 'close')}: its lookbehind does not hold after every call the "
                        f"grammar writes for {name!r}, and its other forms depend on what follows"
                    )
            elif written_exprs and behind and not f.transform_each:
                # a lookbehind form next to plain ones (Qwen3-Coder's bare `</function>`): written too
                # where every call the grammar writes ends with what it looks behind for
                written_exprs += [
                    x for lb_re, x in behind if not violates_suffix(self.g, seq(opener, body), lb_re)
                ]
            closer = alt(*written_exprs) if written_exprs else None
        if f.value_close and f.content in ("json", "python-call-list"):
            # `close_after_value`: the call also ends right after its bracketed value, and what
            # follows is the answer's text again (Mistral's `[ARGS]{...} I am checking`)
            closer = alt(closer, EMPTY) if closer is not None else EMPTY
        if closer is None and not closes_at_eos and chain is None:
            raise ConstraintError(f"{self._where(f, 'close')}: no closer the model can write")
        return CallForms(
            name,
            opener,
            body,
            closer,
            closes_at_eos,
            chain,
            opener_repeat=opener_repeat,
            alone=self._self_closed(f, tool, opener, captures),
        )

    def _self_closed(
        self, f: Field, tool: dict[str, Any], opener: Expr, captures: dict[str, Expr]
    ) -> Expr | None:
        """The call written as a self-closing opener (`<invoke name="x"/>`), which the closer's
        lookbehind alternative ends with no body: only for a tool whose arguments may be empty, and
        only where that lookbehind holds after every string of it (checked)."""
        tails = self._self_closing_tails(f)
        params = tool["parameters"]
        if not tails or params.get("required") or f.content != "xml-inline":
            return None
        assert f.closer is not None
        # the opener as written, else with its whitespace runs capped as the lookbehind reads them
        forms = [opener] + [self._emit(f, "open", subst=captures, max_repeat=cap)[0] for cap in (8, 0)]
        forms = [op for op in forms if isinstance(op, Seq) and op.items and op.items[-1] == Lit(">")]
        tree = parse(f.closer.source)
        for b in tree.kids if tree.op == "alt" else [tree]:
            while b.op == "group" and b.args[0] is None:
                b = b.kids[0]
            if b.op != "look" or b.args[:2] != (False, False):
                continue
            behind = Emitter(self.g, self._where(f, "close"), peek=True).emit(b.kids[0])
            for tail in tails:
                for op in forms:
                    assert isinstance(op, Seq)
                    if not tail.endswith(">"):
                        continue
                    alone = seq(*op.items[:-1], Lit(tail))
                    if not violates_suffix(self.g, alone, behind):
                        return alone
        return None

    def _body(
        self,
        f: Field,
        tool: dict[str, Any],
        name_path: tuple[str, ...],
        args_path: tuple[str, ...],
        forbidden: tuple[str, ...],
        where: str,
    ) -> Expr:
        params = tool["parameters"]
        content = f.content
        args = f.content_args if isinstance(f.content_args, dict) else {}
        if content == "json":
            sko = args.get("single_key_objects")
            if sko and not (
                f.transform_each
                and isinstance(sko, list)
                and len(sko) == 2
                and (name_path, args_path) == ((sko[0],), (sko[1],))
            ):
                raise ConstraintError(
                    f"Field '{f.name}': content_args 'single_key_objects' {sko!r} cannot be written exactly "
                    "(only as a call list's [name, arguments])"
                )
            self.single_key = bool(sko)
            for k in ("suffix", "allow_non_json"):
                if args.get(k):
                    raise ConstraintError(f"Field '{f.name}': content_args '{k}' cannot be written exactly")
            self.json_prefix = args.get("prefix") or ""
            if self.json_prefix == "[" and f.transform_each:
                pass  # xLAM: the opener wrote the call list's bracket (`_constraint` leaves it out)
            elif self.json_prefix not in ("", "{"):
                raise ConstraintError(
                    f"Field '{f.name}': content_args 'prefix' {self.json_prefix!r} cannot be written exactly"
                )
            delims = args.get("string_delims") or []
            uq = args.get("unquoted_keys")
            if delims or uq:
                if not (delims and uq) or len(delims) != 1 or delims[0][0] != delims[0][1]:
                    raise ConstraintError(
                        f"Field '{f.name}': this JSON dialect (unquoted_keys={uq!r}, string_delims={delims!r}) "
                        "cannot be written exactly"
                    )
                sc = SchemaCompiler(
                    self.g,
                    "delimited",
                    forbidden=forbidden,
                    ws=self.ws,
                    delimiter=delims[0][0],
                    key_pattern=_LENIENT_KEY if uq == "lenient" else _WORD_KEY,
                    root_schema=params,
                    key_order=self.key_order,
                    key_forbidden=tuple(sorted(self._necessary(f, "close"))),
                )
            else:
                sc = self._compiler("json", forbidden, params)
            return seq(self.ws, self._json_body(f, tool, sc, name_path, args_path, where), self.ws)
        if content == "xml-inline":
            if len(name_path) != 1 or f.transform_each:
                raise ConstraintError(
                    f"Field '{f.name}': xml-inline calls need the name from an opener capture"
                )
            if args_path != ("content",):
                raise ConstraintError(f"Field '{f.name}': xml-inline calls need 'arguments': '{{content}}'")
            return self._xml_body(f, tool, forbidden, where)
        if content == "python-call-list":
            if not f.transform_each or name_path != ("name",) or args_path != ("arguments",):
                raise ConstraintError(
                    f"Field '{f.name}': python-call-list needs a transform_each reading 'name' and 'arguments'"
                )
            return self._python_body(f, tool, forbidden, where)
        raise ConstraintError(f"Field '{f.name}': content '{content}' cannot carry tool calls exactly")

    def _object_with(
        self,
        sc: SchemaCompiler,
        keys: list[tuple[str | tuple[str, ...], Expr]],
        where: str,
        lead_first: bool = False,
    ) -> Expr:
        """A call object: `keys` (the name and arguments the transform reads) in any order, and at
        most one of the keys models add that the transform ignores (`IGNORED_CALL_KEYS`)."""
        colon = seq(self.ws, Lit(":"), self.ws)
        comma = seq(self.ws, Lit(","), self.ws)
        members: list[tuple[Expr, bool]] = [
            (alt(*(seq(sc.key(n, where), colon, v) for n in ((k,) if isinstance(k, str) else k))), True)
            for k, v in keys
        ]
        read = {n for k, _ in keys for n in ((k,) if isinstance(k, str) else k)}
        read |= _transform_placeholder_keys(self.tool_field)
        tr = self.tool_field.transform if self.tool_field is not None else None
        if isinstance(tr, dict) and isinstance(tr.get("function"), str):
            read = set(IGNORED_CALL_KEYS)  # `"function": "{content}"` copies every key: none is ignored
        extra = []
        for k, schema in IGNORED_CALL_KEYS.items():
            if k in read:
                continue
            try:
                value = sc.value({**schema, "maxLength": IGNORED_ID_MAX} if "type" in schema else schema, k)
            except ConstraintError:  # a bounded string is not exact next to excluded markers
                value = sc.value(schema, f"{where}.{k}")
            extra.append(seq(sc.key(k, where), colon, value))
        if extra and self.key_order == "any":
            members.append((alt(*extra), False))
        # `content_args.prefix` "{" (Llama 4): the opener wrote the brace, the parser puts it back
        open_ = self.ws if self.json_prefix == "{" else seq(Lit("{"), self.ws)
        # an opener lookahead reads the call object only where the object follows the opener
        each = self.tool_field.transform_each  # type: ignore[union-attr]
        lead = self._lookahead_check() if (not each or lead_first) else None
        if lead is not None and lead_first:
            check = lead
            lead = lambda e: check(seq(self.ws, e))  # noqa: E731 (whitespace before the first item)
        first_ok = None
        if lead is not None:

            def first_ok(i: int) -> Expr:
                m = members[i][0]
                forms = m.items if isinstance(m, Alt) else (m,)
                return alt(*(x for x in forms if lead(seq(open_, x))))

            if all(first_ok(i) == NOTHING for i in range(len(members))):
                # the lookahead reads past the first key (Llama 4: `"name": "...", "parameters":`):
                # the keys the transform reads, in its order, and nothing else
                fixed = members_rule(self.g, members[: len(keys)], comma, f"{where}-call", order="schema")
                if lead(seq(open_, fixed)):
                    return seq(open_, fixed, self.ws, Lit("}"))
        body = members_rule(self.g, members, comma, f"{where}-call", order=self.key_order, first_ok=first_ok)
        return seq(open_, body, self.ws, Lit("}"))

    # -- a closer's trailing lookahead ---------------------------------------------------------

    def closer_lookahead(self) -> tuple[Expr, bool, str] | None:
        if not hasattr(self, "_closer_la"):
            self._closer_la = self._find_closer_lookahead()
        return self._closer_la

    def closer_tails(self) -> tuple[Node, Expr] | None:
        """For a closer written `X(?:A|(?=LA))` (K2 Horizon's `</ifm|tool_call>(?:\\s*</ifm|tool_calls>|
        (?=\\s{0,16}<ifm|tool_call>...))`, Step 3's): X's node and A as an expression. The call then
        ends with X, and after it comes A (the section's end) or what satisfies LA (the next call
        in the same section)."""
        if not hasattr(self, "_closer_tails"):
            self._closer_tails = self._find_closer_tails()
        return self._closer_tails

    def _split_closer_tails(self) -> tuple[Node, list[Node], Node] | None:
        f = self.tool_field
        if f is None or f.closer is None or f.closer.literals is not None:
            return None
        tree = parse(f.closer.source)
        while tree.op == "group" and tree.args[0] is None and tree.kids:
            tree = tree.kids[0]
        if tree.op != "cat" or len(tree.kids) < 2:
            return None
        last = tree.kids[-1]
        while last.op == "group" and last.args[0] is None and last.kids:
            last = last.kids[0]
        if last.op != "alt":
            return None
        looks = [k for k in last.kids if k.op == "look" and k.args[:2] == (True, False)]
        plain = [k for k in last.kids if not _has_look(k)]
        head = cat(tree.kids[:-1])
        if len(looks) != 1 or not plain or len(looks) + len(plain) != len(last.kids) or _has_look(head):
            return None
        return head, plain, looks[0]

    def _find_closer_tails(self) -> tuple[Node, Expr] | None:
        split = self._split_closer_tails()
        if split is None:
            return None
        head, plain, _look = split
        where = self._where(self.tool_field, "close")  # type: ignore[arg-type]
        tails = alt(*(Emitter(self.g, where, max_repeat=self.max_ws).emit(k) for k in plain))
        return head, tails

    def _find_closer_lookahead(self) -> tuple[Expr, bool, str] | None:
        """For a tool closer written as `X(?=LA)` (MiniMax M2's `</invoke>(?=\\s{0,64}(?:<invoke
        name=|</minimax:tool_call>|\\Z))`): (LA as an expression, whether LA admits the end of
        the text, X as literal text), else None. What follows a call must then satisfy LA."""
        f = self.tool_field
        if f is None or f.closer is None or f.closer.literals is not None:
            return None
        split = self._split_closer_tails()
        if split is not None:
            head, _plain, look = split
            where = self._where(f, "close")
            la = Emitter(self.g, where, peek=True).emit(look.kids[0])
            return la, _admits_end(look.kids[0]), _literal_text(head) or ""
        tree = parse(f.closer.source)
        branches = tree.kids if tree.op == "alt" else (tree,)
        found = None
        for b in branches:
            while b.op == "group" and b.args[0] is None and b.kids:
                b = b.kids[0]
            if b.op != "cat" or not b.kids:
                continue
            last = b.kids[-1]
            if last.op != "look" or last.args[:2] != (True, False) or _look_literal(b) is not None:
                continue
            if any(_has_look(k) for k in b.kids[:-1]):
                continue
            # X's text, where it is one literal (lookbehind forms of the next opener may read it);
            # X with optional parts (Hy3's `</tool_call(?::[a-z]+)?>`): "", no lookbehind holds
            x = _literal_text(cat(b.kids[:-1])) or ""
            plain = [k for k in branches if not _has_look(k)]
            if plain or any(_lookbehind_form(k) is not None for k in branches):
                return None  # a plain form is written instead, or one whose lookbehind holds
            where = self._where(f, "close")
            la = Emitter(self.g, where, peek=True).emit(last.kids[0])
            found = (la, _admits_end(last.kids[0]), x)
        return found

    # -- an opener's trailing lookahead ------------------------------------------------------

    def _lookahead_check(self) -> Any:
        """For a tool opener ending in a lookahead (`\\s*(?=\\{\\s*"name")`): a test that every string of
        a body expression satisfies it (exact, `violates_prefix`), or None without one."""
        f = self.tool_field
        if f is None or f.opener is None or f.opener.literals is not None:
            return None
        tree = parse(f.opener.source)
        kids = tree.kids if tree.op == "cat" else [tree]
        if not kids or kids[-1].op != "look" or kids[-1].args[:2] != (True, False):
            if _has_trailing_look(tree):
                raise ConstraintError(
                    f"{self._where(f, 'open')}: a lookahead at the end of only some alternatives"
                )
            return None
        tail: list[Node] = []
        for k in reversed(kids[:-1]):
            if _literal_text(k) is not None or k.op == "look" or k.op == "assert":
                break
            tail.insert(0, k)
        where = self._where(f, "open")
        tail_node = cat(tail)
        written_tail = Emitter(self.g, where, max_repeat=self.max_ws).emit(tail_node)
        tail_re = Emitter(self.g, where).emit(tail_node)
        look = Emitter(self.g, where, peek=True).emit(kids[-1].kids[0])
        pattern = seq(tail_re, look)

        def fits(e: Expr) -> bool:
            try:
                return not violates_prefix(self.g, seq(written_tail, e), pattern)
            except ValueError as err:
                raise ConstraintError(f"{where}: the lookahead cannot be checked ({err})") from None

        return fits

    def _args_expr(self, sc: SchemaCompiler, tool: dict[str, Any], where: str) -> Expr:
        params = tool["parameters"]
        if params.get("type", "object") != "object":
            raise ConstraintError(f"{where}: 'parameters' must describe an object")
        return sc.value(
            {**params, "type": "object", "properties": params.get("properties", {})}, f"{where}.parameters"
        )

    def _json_body(
        self, f: Field, tool: dict[str, Any], sc: SchemaCompiler, name_path, args_path, where: str
    ) -> Expr:
        name = tool["name"]
        args_expr = self._args_expr(sc, tool, where)
        name_lit = sc._literal_value(name, where)
        if f.transform_each:
            # content is a list of objects; the name and arguments are keys of each item
            if len(name_path) != 1 or len(args_path) != 1:
                raise ConstraintError(
                    f"Field '{f.name}': transform_each items must hold the name and arguments"
                )
            if self.single_key:
                # Apertus: `{"NAME": ARGS}`, reshaped by the parser into {name, arguments}
                return seq(
                    Lit("{"),
                    self.ws,
                    sc.key(name, where),
                    self.ws,
                    Lit(":"),
                    self.ws,
                    args_expr,
                    self.ws,
                    Lit("}"),
                )
            keys = [(name_path[0], name_lit), (args_path[0], args_expr)]
            if self.json_prefix == "[":
                # the opener's lookahead reads the first item (`\[(?=\s*\{\s*"name"\s*:)`): its
                # keys in the order that satisfies it
                self.first_items[name] = self._object_with(sc, keys, where, lead_first=True)
            return self._object_with(sc, keys, where)
        root = "content"
        if len(name_path) == 1 and name_path[0] != root:
            # the name is an opener capture; the arguments are (a key of) the content
            if args_path == (root,):
                if self.json_prefix:
                    raise ConstraintError(f"Field '{f.name}': content_args 'prefix' before the arguments")
                return args_expr
            if len(args_path) == 2 and args_path[0] == root:
                return self._object_with(sc, [(args_path[1], args_expr)], where)
            raise ConstraintError(f"Field '{f.name}': arguments path {'.'.join(args_path)} is not supported")
        if name_path[0] == root and args_path[0] == root and len(name_path) == len(args_path) == 2:
            args_key: str | tuple[str, ...] = args_path[1]
            tr = f.transform
            if isinstance(tr, dict) and isinstance(tr.get("function"), str):
                # the whole object is the call: its arguments are read from `arguments` or, as
                # models also write them, `parameters` (`chatparse.openai` reads both)
                args_key = ("arguments", "parameters")
            return self._object_with(sc, [(name_path[1], name_lit), (args_key, args_expr)], where)
        raise ConstraintError(f"Field '{f.name}': the transform's name/arguments paths are not supported")

    def _xml_body(self, f: Field, tool: dict[str, Any], forbidden: tuple[str, ...], where: str) -> Expr:
        args = f.content_args
        pattern = args.get("tag_pattern")
        if not isinstance(pattern, str):
            raise ConstraintError(f"Field '{f.name}': xml-inline needs a 'tag_pattern'")
        if args.get("merge_duplicates"):
            raise ConstraintError(f"Field '{f.name}': 'merge_duplicates' cannot be written exactly")
        type_parsers = args.get("type_parsers") or None
        tree = parse(pattern)
        tail_lits = _after_group(tree, "value")
        if tail_lits is None:
            raise ConstraintError(
                f"Field '{f.name}': the tag_pattern's value is not followed by a fixed marker"
            )
        value_forbidden = tuple(
            sorted(set(forbidden) | tail_lits | self._necessary(f, "close") | _necessary_tree(tree))
        )
        params = tool["parameters"]
        props = params.get("properties", {}) or {}
        required = params.get("required", []) or []
        if not isinstance(props, dict) or any(r not in props for r in required):
            raise ConstraintError(f"{where}: 'required' names undeclared properties")
        if params.get("additionalProperties") not in (None, False) and props:
            raise ConstraintError(f"{where}: 'additionalProperties' cannot be enforced exactly")
        members = []
        xml_ws = rep(WS_CHARS, 0, 16 if self.max_ws is None else min(16, self.max_ws))
        if type_parsers and _find_group(tree, "type") is None:
            raise ConstraintError(f"Field '{f.name}': content_args 'type_parsers' without a 'type' group")
        where_tag = f"Field '{f.name}': content_args 'tag_pattern'"
        variants = _value_variants(tree, where_tag)
        for key, schema in props.items():
            forms = [
                self._xml_tag(f, variant, leads, key, schema, params, value_forbidden, where)
                for variant, leads in variants
            ]
            members.append((alt(*forms), key in required))
        # around the parameters, at most 16 whitespace characters in all when none is written
        # (what GLM's `(?<=<tool_call>NAME\s{0,16})` closer reads)
        edge = rep(WS_CHARS, 0, 8 if self.max_ws is None else min(8, self.max_ws))
        if not members:
            out = xml_ws
        else:
            body = members_rule(self.g, members, xml_ws, f"{where}-params", order=self.key_order)
            out = seq(edge, body, edge)
        if args.get("json_body"):
            # `json_body`: the arguments as one JSON object instead of tags (DeepSeek DSML's
            # `<invoke name="f">{"a": 1}</invoke>`)
            sc = self._compiler("json", value_forbidden, params)
            out = alt(out, seq(edge, self._args_expr(sc, tool, where), edge))
        return out

    def _xml_tag(
        self,
        f: Field,
        tree: Node,
        leads: tuple[str, ...],
        key: str,
        schema: Any,
        params: Any,
        value_forbidden: tuple[str, ...],
        where: str,
    ) -> Expr:
        """The tag of parameter `key` as `tree` (one variant of the tag pattern) writes it."""
        args = f.content_args
        type_parsers = args.get("type_parsers") or None
        vp = args.get("value_parser")
        type_group = _find_group(tree, "type") if type_parsers else None
        where_tag = f"Field '{f.name}': content_args 'tag_pattern'"
        vtext = self._value_text(f, tree, key, leads)
        if type_parsers:
            assert type_group is not None
            # The tag's `type` group chooses the value's parser (GigaChat 3.5's
            # string="true|false", K2 Horizon's <ifm|arg_type>integer</ifm|arg_type>): every type
            # text is written together with a value in the form its parser reads, always with
            # the type written (the group's optional wrapper is not left out).
            forms = []
            for tname in self._type_names(type_group, schema):
                parser = type_parsers.get(tname, vp)
                value = self._value_for(f, parser, schema, params, value_forbidden, f"{where}.{key}", vtext)
                em = Emitter(
                    self.g,
                    where_tag,
                    subst={"key": Lit(key), "value": value, "type": Lit(tname), _OTHER_VALUE: NOTHING},
                    max_repeat=self.max_ws,
                    force_group="type",
                )
                tag = em.emit(tree)
                if "type" not in em.used:
                    raise ConstraintError(f"Field '{f.name}': the tag_pattern's 'type' group is not written")
                forms.append(tag)
            # where the type may be left out (K2 Horizon's optional <ifm|arg_type>), the value
            # without one is read by `value_parser`
            em = Emitter(
                self.g,
                where_tag,
                subst={
                    "key": Lit(key),
                    "value": self._value_for(f, vp, schema, params, value_forbidden, f"{where}.{key}", vtext),
                    "type": NOTHING,  # a form that writes the type is not this one
                    _OTHER_VALUE: NOTHING,
                },
                max_repeat=self.max_ws,
                omit_group="type",
            )
            untyped = em.emit(tree)
            if untyped != NOTHING:
                forms.append(untyped)
            if not forms:
                raise ConstraintError(
                    f"{where}.{key}: no text of the tag's 'type' group reads a value of this schema"
                )
            return alt(*forms)
        if _is_text_parser(vp):
            # Step 3's `text`: the raw value, stripped; a stripped string still has the schema's
            # type, but not its length bounds or an enum value with edge whitespace
            if ((vp or {}).get("args") or {}).get("strip", True) and _strip_matters(schema):
                raise ConstraintError(
                    f"{where}.{key}: a length bound or enum with edge whitespace cannot be kept "
                    "exactly by a value the 'text' value_parser strips"
                )
            value = self._raw_value(schema, value_forbidden, params, f"{where}.{key}", vtext)
        elif vp is not None:
            vargs = vp.get("args") or {} if isinstance(vp, dict) else {}
            if (
                not (isinstance(vp, dict) and vp.get("name") == "json")
                or not isinstance(vargs, dict)
                or set(vargs) - {"allow_non_json", "strip"}
            ):
                raise ConstraintError(f"Field '{f.name}': value_parser {vp!r} cannot be written exactly")
            sc = self._compiler("json", value_forbidden, params)
            value = sc.value(schema, f"{where}.{key}")
            if vargs.get("allow_non_json"):
                # text that is not JSON is kept as written (Kimi K3 writes `Paris`, not `"Paris"`)
                if _plain_string(schema):
                    value = alt(value, _non_json_text(self.g, value_forbidden, vtext))
                elif (
                    isinstance(schema, dict)
                    and isinstance(schema.get("enum"), list)
                    and schema.get("type", "string") == "string"
                ):
                    value = alt(value, *_raw_enum(schema["enum"], value_forbidden))
        else:
            value = self._raw_value(schema, value_forbidden, params, f"{where}.{key}", vtext)
        key_forms = [Lit(key)]
        if args.get("unescape_keys"):
            if html.unescape(key) != key:
                raise ConstraintError(
                    f"{where}.{key}: the parameter name reads differently once unescaped (unescape_keys)"
                )
            escaped = html.escape(key, quote=True)
            if escaped != key:
                key_forms.append(Lit(escaped))  # `q&amp;a`: what an XML writer puts in the attribute
        em = Emitter(
            self.g,
            where_tag,
            subst={"key": alt(*key_forms), "value": value, _OTHER_VALUE: NOTHING},
            max_repeat=self.max_ws,
        )
        tag = em.emit(tree)
        if tag == NOTHING:
            raise ConstraintError(f"Field '{f.name}': the tag_pattern cannot be written for {key!r}")
        return tag

    _TYPE_NAMES = ("string", "integer", "number", "boolean", "array", "object", "null")

    def _type_names(self, group: Node, schema: Any) -> list[str]:
        """The texts written for a tag's `type` group: a group of literal alternatives gives them all
        (each with its own value form); any other group gives the schema's JSON type names it
        matches (a string parameter is written with `string`)."""
        body = group.kids[0]
        while body.op == "group" and body.args[0] is None:
            body = body.kids[0]
        lits = [_literal_text(k) for k in (body.kids if body.op == "alt" else [body])]
        if lits and all(x for x in lits):
            return [x for x in lits if x]
        types = _json_types(schema) or list(self._TYPE_NAMES)
        pattern = regex.compile(_node_source(body))
        return [t for t in dict.fromkeys(types) if pattern.fullmatch(t)]

    def _value_for(
        self,
        f: Field,
        parser: Any,
        schema: Any,
        params: Any,
        forbidden: tuple[str, ...],
        path: str,
        vtext: tuple[Expr, Expr | None, Expr | None] | None = None,
    ) -> Expr:
        """A value in the form `parser` reads back as a schema-valid value (raw text or JSON)."""
        if parser is None:
            return self._raw_value(schema, forbidden, params, path, vtext)
        pargs = parser.get("args") or {} if isinstance(parser, dict) else {}
        if (
            not isinstance(parser, dict)
            or parser.get("name") != "json"
            or not isinstance(pargs, dict)
            or set(pargs) - {"allow_non_json", "strip"}
        ):
            raise ConstraintError(f"Field '{f.name}': value parser {parser!r} cannot be written exactly")
        sc = self._compiler("json", forbidden, params)
        return sc.value(schema, path)

    def _value_text(
        self, f: Field, tree: Node, key: str, leads: tuple[str, ...] = ()
    ) -> tuple[Expr, Expr | None, Expr | None] | None:
        """(pattern, context, follow) for a raw value of `key`: the text may hold no match of what
        would end it (the tag pattern's part after the value, lookaheads included) or end the call
        (the closer, lookarounds included); `context` is what the tag writes right before the
        value. Markers matched only in context (`</parameter>` followed by prose) stay writable.
        `leads`: literals the value may not start with (`_value_variants`), kept out as matches
        of `BEGIN_MARK` + literal with `BEGIN_MARK` closing the context. None: the patterns cannot
        be read so (the caller keeps every marker literal out instead)."""
        if f.closer is None or f.string_guard is not None:
            return None
        cache = self._vtext_cache
        ck = (key, tree, leads)
        if ck in cache:
            return cache[ck]
        subst: dict[str, Expr] = {"key": Lit(key)}
        parts = []
        follows: list[Expr | None] = []
        for rest in _after_group_nodes(tree, "value"):
            parts.append(as_match_pattern(rest, subst))
            try:
                follows.append(Emitter(self.g, "follow", subst=subst, max_repeat=self.max_ws).emit(rest))
            except ConstraintError:
                follows.append(None)
        follow = alt(*(x for x in follows if x is not None)) if follows and None not in follows else None
        close_tree = self._tree(f, "close")
        parts.append(as_match_pattern(close_tree, subst) if close_tree is not None else None)
        parts.extend(seq(Lit(BEGIN_MARK), Lit(lead)) for lead in leads)
        out: tuple[Expr, Expr | None, Expr | None] | None = None
        if parts and all(p is not None for p in parts):
            pattern = _match_core(self.g, alt(*(p for p in parts if p is not None)))
            if pattern is not None:
                context: Expr | None = None
                before = _before_group_nodes(tree, "value")
                if before is not None:
                    try:
                        context = Emitter(self.g, "context", subst=subst, peek=True).emit(before)
                    except ConstraintError:
                        context = None
                if context is not None or before is None:
                    if leads:
                        context = seq(context if context is not None else EMPTY, Lit(BEGIN_MARK))
                    out = (pattern, context, follow)
        cache[ck] = out
        return out

    def _raw_value(
        self,
        schema: Any,
        forbidden: tuple[str, ...],
        root: Any,
        path: str,
        vtext: tuple[Expr, Expr | None, Expr | None] | None = None,
    ) -> Expr:
        if not isinstance(schema, dict):
            raise ConstraintError(f"{path}: a schema must be an object")
        t = schema.get("type")
        if "enum" in schema or "const" in schema:
            values = schema["enum"] if "enum" in schema else [schema["const"]]
            out = []
            for v in values:
                if isinstance(v, str):
                    if v != v.strip() or any(x in v for x in forbidden):
                        raise ConstraintError(
                            f"{path}: the enum value {v!r} cannot be written as a tag value"
                        )
                    out.append(Lit(v))
                else:
                    out.append(Lit(json.dumps(v, ensure_ascii=False)))
            return alt(*out)
        if t == "string" and set(schema) - {"type", "description", "title", "default", "examples"}:
            raise ConstraintError(
                f"{path}: string keywords {sorted(set(schema) - {'type', 'description', 'title'})} cannot be enforced in a text value"
            )
        if t == "string" or _any_text_valid(schema):
            # verbatim: the tool coercion keeps a string value's text as written, whitespace too;
            # a typeless schema, or a union of plain types with `string`, takes any text (what the
            # coercion casts is valid for the type it cast to, the rest stays a string)
            if vtext is not None:
                return self.g.text_avoiding(vtext[0], context=vtext[1], follow=vtext[2], hint="value")
            return self.g.text_excluding(forbidden, follow=None, hint="value")
        sc = self._compiler(
            "raw" if t in ("integer", "number", "boolean", "null") else "json", forbidden, root
        )
        if t in ("object", "array"):
            return sc.value(schema, path)
        return sc.value(schema, path)

    def _python_body(self, f: Field, tool: dict[str, Any], forbidden: tuple[str, ...], where: str) -> Expr:
        name = tool["name"]
        if not _PY_NAME.fullmatch(name):
            raise ConstraintError(f"{where}: the name {name!r} cannot be written as a Python call")
        params = tool["parameters"]
        sc = self._compiler("python", forbidden, params)
        props = params.get("properties", {}) or {}
        required = params.get("required", []) or []
        members = []
        for key, schema in props.items():
            if not regex.fullmatch(PY_NAME, key):
                raise ConstraintError(
                    f"{where}.{key}: the parameter name cannot be a Python keyword argument"
                )
            members.append(
                (
                    seq(Lit(key), self.ws, Lit("="), self.ws, sc.value(schema, f"{where}.{key}")),
                    key in required,
                )
            )
        comma = seq(self.ws, Lit(","), self.ws)
        inner = (
            members_rule(self.g, members, comma, f"{where}-kwargs", order=self.key_order)
            if members
            else EMPTY
        )
        # no whitespace between the name and "(": openers look ahead for `name(` (pythonic, lfm2)
        return seq(Lit(name), Lit("("), self.ws, inner, self.ws, Lit(")"))


IGNORED_CALL_KEYS: dict[str, dict[str, Any]] = {
    "id": {"type": "string"},
    "tool_call_id": {"type": "string"},
    "call_id": {"type": "string"},
    "type": {"const": "function"},
}
"""Keys models write in a JSON call object next to the name and arguments, which a transform
that does not read them ignores (Cohere's `tool_call_id`, Mistral's `id`, Llama's `type`). A call
object admits at most one of them, anywhere (with `key_order="any"`); an id is at most
`IGNORED_ID_MAX` characters where the format allows a bound (real ids are short, and a bound keeps
a sampling model from spending its budget there)."""
IGNORED_ID_MAX = 40


def _transform_placeholder_keys(f: Field | None) -> set[str]:
    """The last path segments of the transform's placeholders (keys of the call object it reads)."""
    out: set[str] = set()

    def walk(t: Any) -> None:
        if isinstance(t, dict):
            for v in t.values():
                walk(v)
        elif isinstance(t, list):
            for v in t:
                walk(v)
        elif isinstance(t, str):
            for m in regex.finditer(r"\{(\w+(?:\.\w+)*)\}", t):
                out.add(m.group(1).split(".")[-1])

    if f is not None:
        walk(f.transform)
    return out


_ANNOTATION_KEYS = {"description", "title", "default", "examples", "deprecated", "$comment"}


def _admits_end(node: Node) -> bool:
    """Whether a lookahead body can match at the end of the text (a `\\Z` alternative)."""
    if node.op == "assert" and node.args[0] in ("eos", "Z"):
        return True
    if node.op == "alt":
        return any(_admits_end(k) for k in node.kids)
    if node.op in ("group", "atomic") and node.kids:
        return _admits_end(node.kids[0])
    if node.op == "cat":
        return all(_admits_end(k) or k.op == "rep" and k.args[0] == 0 for k in node.kids)
    return False


def _plain_types(schema: Any) -> list[str] | None:
    """The types of a schema made only of plain `type`s (lists, `anyOf`, disjoint `oneOf`,
    `nullable`), or None if it constrains anything further."""
    if not isinstance(schema, dict):
        return None
    keys = set(schema) - _ANNOTATION_KEYS
    out: list[str] = []
    t = schema.get("type")
    if t is not None:
        if isinstance(t, str):
            out.append(t)
        elif isinstance(t, list) and all(isinstance(x, str) for x in t):
            out.extend(t)
        else:
            return None
    for union in ("anyOf", "oneOf"):
        if union in schema:
            branches = schema[union]
            if not isinstance(branches, list) or not branches:
                return None
            if union == "oneOf" and not _disjoint_by_type(branches):
                return None
            for b in branches:
                sub = _plain_types(b)
                if sub is None or not sub:
                    return None
                out.extend(sub)
    if schema.get("nullable") is True:
        out.append("null")
    if keys - {"type", "anyOf", "oneOf", "nullable"}:
        return None
    return out


def _any_text_valid(schema: Any) -> bool:
    """Every text is valid for this schema once the tool coercion has read it."""
    types = _plain_types(schema)
    return types is not None and (not types or "string" in types)


def _plain_string(schema: Any) -> bool:
    """A schema every string satisfies, and nothing else (`{"type": "string"}` with annotations)."""
    if not isinstance(schema, dict) or schema.get("type") != "string":
        return False
    return not set(schema) - {"type", "description", "title", "default", "examples", "deprecated"}


def _non_json_text(
    g: Grammar, forbidden: tuple[str, ...], vtext: tuple[Expr, Expr | None, Expr | None] | None = None
) -> Expr:
    """Text `json.loads` refuses, so that a value parser with `allow_non_json` keeps it verbatim.

    Exact (an automaton of the JSON scalars runs beside the text), except that text starting with
    `{` or `[` (after whitespace) is never written raw: objects and arrays are not regular. Such a
    value can still be written as a JSON string.
    """
    if vtext is not None:
        return g.text_avoiding(
            vtext[0], context=vtext[1], follow=vtext[2], avoid=json_scalar_automaton(), hint="rawtext"
        )
    return g.text_excluding(forbidden, avoid=json_scalar_automaton(), hint="rawtext")


def _raw_enum(values: list[Any], forbidden: tuple[str, ...]) -> list[Expr]:
    """The enum's strings that `json.loads` refuses and hold no marker: written as they are."""
    out: list[Expr] = []
    for v in values:
        if not isinstance(v, str) or any(x in v for x in forbidden if x):
            continue
        try:
            json.loads(v)
        except ValueError:
            out.append(Lit(v))
    return out


def _has_trailing_look(node: Node) -> bool:
    if node.op == "look" and node.args[0]:
        return True
    if node.op in ("alt",):
        return any(_has_trailing_look(k) for k in node.kids)
    if node.op in ("group", "atomic") and node.kids:
        return _has_trailing_look(node.kids[0])
    if node.op == "cat" and node.kids:
        return _has_trailing_look(node.kids[-1])
    return False


def _transform_placeholders(t: Any) -> set[str]:
    out: set[str] = set()
    if isinstance(t, dict):
        for v in t.values():
            out |= _transform_placeholders(v)
    elif isinstance(t, list):
        for v in t:
            out |= _transform_placeholders(v)
    elif isinstance(t, str):
        m = regex.fullmatch(r"\{(\w+)(?:\.\w+)*\}", t)
        if m:
            out.add(m.group(1))
    return out


def _look_literal(node: Node) -> str | None:
    """`(?=LIT)`, or `\\s*(?=LIT)` (the next call's opener writes the whitespace) -> LIT."""
    while node.op == "group" and node.args[0] is None:
        node = node.kids[0]
    if node.op == "cat" and len(node.kids) == 2 and _is_ws_star(node.kids[0]):
        node = node.kids[1]
    if node.op == "look" and node.args[:2] == (True, False):
        return _literal_text(node.kids[0])
    return None


def _ws_then_literals(node: Node) -> list[str] | None:
    r"""`\s*(?:A|B)` -> [A, B] (literal alternatives after optional whitespace), else None."""
    while node.op == "group" and node.args[0] is None and node.kids:
        node = node.kids[0]
    if node.op != "cat" or len(node.kids) != 2 or not _is_ws_star(node.kids[0]):
        return None
    rest = node.kids[1]
    while rest.op == "group" and rest.args[0] is None and rest.kids:
        rest = rest.kids[0]
    lits = [_literal_text(k) for k in (rest.kids if rest.op == "alt" else [rest])]
    return [x for x in lits if x] if all(lits) else None


def _is_ws_star(node: Node) -> bool:
    if node.op != "rep" or node.args[0] != 0 or node.args[1] is not None or not node.kids:
        return False
    k = node.kids[0]
    return k.op == "cls" and k.args[0] in ("\\s", "[\\s]")


def _trailing_literal(node: Node) -> str:
    """The literal characters every match of `node` ends with (a cat's last literal run)."""
    from ._regex import _literal_text

    while node.op == "group" and node.args[0] is None and node.kids:
        node = node.kids[0]
    kids = node.kids if node.op == "cat" else [node]
    run = ""
    for k in reversed(kids):
        lt = _literal_text(k)
        if lt is None:
            break
        run = lt + run
    return run


def _lookbehind_form(node: Node, others: tuple[Node, ...] = ()) -> tuple[Node, Node] | None:
    """`(?<=L)X` with no other lookaround -> (L, X). `(?<=L)X(?!N)` too where another of the
    closer's alternatives (`others`) is `XN` (Qwen3-Coder's bare `</function>(?!\\s*</tool_call>)`
    next to `</function>\\s*</tool_call>`): where N follows, that one closes the call at the same
    place."""
    while node.op == "group" and node.args[0] is None and node.kids:
        node = node.kids[0]
    if node.op != "cat" or len(node.kids) < 2:
        return None
    first, rest = node.kids[0], node.kids[1:]
    if first.op != "look" or first.args[:2] != (False, False):
        return None
    last = rest[-1]
    if last.op == "look" and last.args[:2] == (True, True) and len(rest) > 1:
        x = rest[:-1]
        covered = _flat(cat(x + (last.kids[0],)))
        if not any(_flat(o) == covered for o in others):
            return None
        rest = x
    tail = cat(rest)
    return (first.kids[0], tail) if not _has_look(tail) else None


def _flat(node: Node) -> tuple[Node, ...]:
    """A node's sequence of items with nested `cat`s and plain groups flattened."""
    while node.op == "group" and node.args[0] is None and node.kids:
        node = node.kids[0]
    if node.op == "cat":
        return tuple(x for k in node.kids for x in _flat(k))
    return (node,)


def _literal_of(node: Node) -> str | None:
    from ._regex import _literal_text

    return _literal_text(node)


def _necessary_tree(tree: Node) -> set[str]:
    # literals of the tag pattern itself (a value containing an opening tag would start a new tag)
    first = _first_lit(tree)
    return {first} if first else set()


def _first_lit(node: Node) -> str:
    from ._regex import _literal_text

    if node.op == "cat":
        run = ""
        for k in node.kids:
            lt = _literal_text(k)
            if lt is None:
                break
            run += lt
        return run
    lt = _literal_text(node)
    return lt or ""


def _after_group(tree: Node, group: str) -> set[str] | None:
    """Necessary literals of what follows each occurrence of `group` (None: one is not followed
    by a fixed marker, or the group does not occur)."""
    found = [necessary(rest) for rest in _after_group_nodes(tree, group)]
    if not found or any(x is None for x in found):
        return None
    return set().union(*(x for x in found if x is not None))


def _after_group_nodes(tree: Node, group: str) -> list[Node]:
    """What follows each occurrence of `group` in `tree`, as one node each."""
    found: list[Node] = []

    def walk(node: Node, rest: tuple[Node, ...]) -> None:
        if node.op == "group" and node.args[0] == group:
            found.append(cat(rest))
        elif node.op == "cat":
            for i, k in enumerate(node.kids):
                walk(k, node.kids[i + 1 :] + rest)
        elif node.op == "alt":
            for k in node.kids:
                walk(k, rest)
        elif node.op in ("group", "atomic") and node.kids:
            walk(node.kids[0], rest)
        elif node.op == "rep" and node.kids:
            walk(node.kids[0], (node, *rest))

    walk(tree, ())
    return found


def _before_group_nodes(tree: Node, group: str) -> Node | None:
    """What precedes the one occurrence of `group` in a tree of `cat`s, plain groups and
    alternations (None: another shape, or the group is not there)."""
    if tree.op == "group" and tree.args[0] == group:
        return cat(())
    if tree.op in ("group", "atomic") and tree.kids:
        return _before_group_nodes(tree.kids[0], group)
    if tree.op == "alt":
        found = [x for x in (_before_group_nodes(k, group) for k in tree.kids) if x is not None]
        return found[0] if len(found) == 1 else None
    if tree.op == "cat":
        for i, k in enumerate(tree.kids):
            inner = _before_group_nodes(k, group)
            if inner is not None:
                return cat((*tree.kids[:i], inner))
    return None


_OTHER_VALUE = "__chatparse_other_value"  # a value occurrence a variant does not write
BEGIN_MARK = chr(0x10FFFE)  # stands, in a value's pattern of matches, for the value's start


def _value_variants(tree: Node, where: str) -> list[tuple[Node, tuple[str, ...]]]:
    """One tag pattern per occurrence of the `value` group (MiniCPM 5 reads a value inside
    `<![CDATA[...]]>` or bare), with the other occurrences renamed so that the variant writes
    only its own: each form's value then keeps out only what ends that form. With each variant,
    the leading literals of the alternatives the regex tries before it at the value's position
    (`<![CDATA[`): a bare value starting with one would be read by the earlier alternative (or
    none), so it may not start so. An occurrence that does not start its alternative, or an
    earlier alternative without a leading literal, cannot be kept apart: ConstraintError."""
    total = len(_after_group_nodes(tree, "value"))
    if total <= 1:
        return [(tree, ())]
    out = []
    for k in range(total):
        seen = [0]
        leads: list[str] = []

        def go(n: Node, k: int = k, seen: list[int] = seen, leads: list[str] = leads) -> Node:
            if n.op == "group" and n.args[0] == "value":
                i = seen[0]
                seen[0] += 1
                return n if i == k else Node("group", (_OTHER_VALUE,), n.kids)
            if n.op == "alt":
                kids = []
                for j, kid in enumerate(n.kids):
                    before = seen[0]
                    new = go(kid)
                    if before <= k < seen[0] and j > 0:
                        if not _value_first(kid):
                            raise ConstraintError(
                                f"{where}: a 'value' group in an alternative after others, not at its "
                                "start, cannot be kept from being read by the earlier alternative"
                            )
                        for prev in n.kids[:j]:
                            lead = _first_lit(_flat_cat(prev))
                            if not lead:
                                raise ConstraintError(
                                    f"{where}: an alternative before the 'value' group's has no "
                                    "leading literal, so a value cannot be kept from matching it"
                                )
                            leads.append(lead)
                    kids.append(new)
                return Node("alt", n.args, tuple(kids))
            if n.kids:
                return Node(n.op, n.args, tuple(go(x) for x in n.kids))
            return n

        out.append((go(tree), tuple(dict.fromkeys(leads))))
    return out


def _value_first(node: Node) -> bool:
    """Whether the `value` group is the first thing `node` matches."""
    items = _flat(node)
    return bool(items) and items[0].op == "group" and items[0].args[0] == "value"


def _flat_cat(node: Node) -> Node:
    return cat(_flat(node))


def _match_core(g: Grammar, e: Expr) -> Expr | None:
    """A smaller pattern contained in the same texts as `e`: optional parts at a match's start or
    end are dropped (text holds a match of `\\n?</p>` exactly where it holds `</p>`), so the
    text may end after a newline. None: `e` matches the empty string (nothing avoids it)."""

    def nullable(x: Expr) -> bool:
        if isinstance(x, Lit):
            return x.text == ""
        if isinstance(x, Chars):
            return False
        if isinstance(x, Seq):
            return all(nullable(i) for i in x.items)
        if isinstance(x, Alt):
            return any(nullable(i) for i in x.items)
        if isinstance(x, Rep):
            return x.lo == 0 or nullable(x.item)
        return g.shortest(x) == ""

    def lead(x: Expr) -> Expr:
        if isinstance(x, Alt):
            return alt(*(lead(i) for i in x.items))
        if isinstance(x, Seq):
            items = list(x.items)
            while len(items) > 1 and nullable(items[0]):
                items.pop(0)
            return seq(lead(items[0]), *items[1:])
        return x

    def trail(x: Expr) -> Expr:
        if isinstance(x, Alt):
            return alt(*(trail(i) for i in x.items))
        if isinstance(x, Seq):
            items = list(x.items)
            while len(items) > 1 and nullable(items[-1]):
                items.pop()
            return seq(*items[:-1], trail(items[-1]))
        return x

    out = trail(lead(e))
    if out == NOTHING or nullable(out):
        return None
    return out


def _find_group(tree: Node, name: str) -> Node | None:
    if tree.op == "group" and tree.args[0] == name:
        return tree
    for k in tree.kids:
        hit = _find_group(k, name)
        if hit is not None:
            return hit
    return None


def _node_source(node: Node) -> str:
    """A `regex` source for a lookaround-free node of literals, classes and repetitions."""
    op = node.op
    if op == "lit":
        return regex.escape(node.args[0])
    if op == "cls":
        return str(node.args[0])
    if op == "any":
        return "(?s:.)" if node.args[0] else "."
    if op == "cat":
        return "".join(_node_source(k) for k in node.kids)
    if op == "alt":
        return "(?:" + "|".join(_node_source(k) for k in node.kids) + ")"
    if op in ("group", "atomic"):
        return "(?:" + _node_source(node.kids[0]) + ")"
    if op == "rep":
        lo, hi, _kind = node.args
        return "(?:" + _node_source(node.kids[0]) + "){" + f"{lo},{'' if hi is None else hi}" + "}"
    if op == "empty":
        return ""
    raise ConstraintError(f"a 'type' group with {op!r} cannot be matched against type names")


def _json_types(schema: Any) -> list[str]:
    """The JSON type names a schema's values can have, as far as its keywords say (empty: any)."""
    if not isinstance(schema, dict):
        return []
    t = schema.get("type")
    if isinstance(t, str):
        out = [t]
    elif isinstance(t, list):
        out = [x for x in t if isinstance(x, str)]
    elif any(k in schema for k in ("anyOf", "oneOf")):
        out = []
        for k in ("anyOf", "oneOf"):
            for b in schema.get(k) or []:
                sub = _json_types(b)
                if not sub:
                    return []
                out.extend(sub)
    elif "enum" in schema or "const" in schema:
        vals = schema["enum"] if "enum" in schema else [schema["const"]]
        names = {
            bool: "boolean",
            int: "integer",
            float: "number",
            str: "string",
            list: "array",
            dict: "object",
        }
        out = ["null" if v is None else names.get(type(v), "string") for v in vals]
    elif "properties" in schema:
        out = ["object"]
    elif "items" in schema or "prefixItems" in schema:
        out = ["array"]
    else:
        return []
    if schema.get("nullable") is True:
        out.append("null")
    return list(dict.fromkeys(out))


def _is_text_parser(vp: Any) -> bool:
    """A `text` value parser with at most `strip` (no prefix or suffix to strip)."""
    if not isinstance(vp, dict) or vp.get("name") != "text":
        return False
    args = vp.get("args") or {}
    return isinstance(args, dict) and not set(args) - {"strip"}


def _strip_matters(schema: Any) -> bool:
    """Whether stripping a raw value can change its validity (length bounds, edge-space enums)."""
    if not isinstance(schema, dict):
        return True
    if any(k in schema for k in ("minLength", "maxLength")):
        return True
    values = schema.get("enum", []) + ([schema["const"]] if "const" in schema else [])
    if any(isinstance(v, str) and v != v.strip() for v in values):
        return True
    return any(_strip_matters(b) for k in ("anyOf", "oneOf", "allOf") for b in schema.get(k) or [])
