"""canitoolcall corpus replay through chatparse's OpenAI layer (shared by the test and the benchmark).

Per fixture:

* template: ``chatparse.catalog.resolve_name(model=fixture.models[0])``; when the catalog does not know
  the model, a family/model/tag mapping (:data:`FALLBACK`) picks the template and the case records
  ``how="fallback"``;
* prefix: what the generation prompt pre-wrote (see :func:`prefix_for`);
* ``tools=fixture.tools``; ``finish_reason="length"`` for fixtures tagged ``truncated`` (else ``"stop"``);
* non-streaming: ``chatparse.openai.parse_message``; streaming: ``chatparse.openai.ChatParser`` fed
  chunk by chunk, every delta merged with canitoolcall's own ``StreamAccumulator`` (an OpenAI client's
  ``accumulate_delta``), then ``finish()``'s deltas;
* verdicts: canitoolcall's own ``checks.run_checks`` (expected_match / expected_error, no_leakage,
  arguments_json, arguments_schema, parallel_order, stream_equals_nonstream, split_invariance) with its
  ``soft-v1`` normalisation.  Nothing is re-implemented here.

Chunkings (character level; the corpus's token-id strategies need the models' tokenizers, which are
not available offline, and character splits are a superset: any token split is a character split,
while character splits also cut special tokens, which no engine does):

* ``one``: the whole output as one feed;
* ``char:0``: one character per feed; ``char:1`` .. ``char:3``: seeded groups of 1-8 characters
  (``canitoolcall.chunking.split_text``, ``random.Random(seed)``);
* ``marker:0``: cut exactly at both ends of every family-marker occurrence (the text analogue of
  canitoolcall's ``special`` strategy: markers atomic);
* ``marker:1``: cut one character before, at, and one character after both ends of every marker
  occurrence (markers split one character in, and one character of neighbouring text on its own).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from canitoolcall import checks
from canitoolcall.chunking import ChunkStrategy, split_text
from canitoolcall.fixtures import Family, Fixture, load_families, load_fixtures
from canitoolcall.results import (
    CheckResult,
    Observation,
    ParsedToolCall,
    ParseResult,
    Status,
    StreamAccumulator,
    worst_status,
)

STRATEGIES: tuple[str, ...] = ("one", "char:0", "char:1", "char:2", "char:3", "marker:0", "marker:1")
"""Streaming chunkings, in report order (``nonstream`` is reported first, separately)."""

COLUMNS: tuple[str, ...] = (checks.NONSTREAM, *STRATEGIES)

TARGET_STRICT = 0.97
"""Target share of fixtures with strict ``pass`` in every chunking."""
TARGET_PASS_OR_SOFT = 1.0
"""Target share of fixtures with ``pass`` or ``soft_pass`` in every chunking."""

# Published results of the engines on this corpus (canitoolcall 0.1.1 README, snapshot 2026-09-25):
# (engine, version, fixtures supported, pass, soft pass, fail).
ENGINES: tuple[tuple[str, str, int, int, int, int], ...] = (
    ("vLLM", "0.30.0", 469, 268, 86, 115),
    ("SGLang", "0.5.20", 448, 189, 62, 197),
    ("llama.cpp", "a25c9865", 438, 278, 46, 114),
    ("Ollama", "7af39318", 261, 224, 10, 27),
    ("HF transformers", "5.17.0", 48, 33, 7, 8),
)

# Catalog template by family / model / tag, used only when chatparse.catalog.resolve_name does not know
# the model (families.md §0, §21, §22).  First matching rule wins: (family, model substring, tag or None).
FALLBACK: tuple[tuple[str, str, str | None, str], ...] = (
    ("deepseek", "DeepSeek-V3-0324", None, "deepseek_v3"),
    ("deepseek", "DeepSeek-V3.1", None, "deepseek_v31"),
    ("deepseek", "", None, "deepseek_dsml"),
    ("gemma4", "", None, "gemma4"),
    ("glm", "", None, "glm"),
    ("gpt-oss", "", None, "gpt_oss"),
    ("kimi", "Kimi-K2", None, "kimi_k2"),
    ("kimi", "Kimi-K3", None, "kimi_k3"),
    ("llama", "Llama-4", None, "pythonic"),
    ("llama", "", "x-arguments-key", "llama3_json_args"),
    ("llama", "", None, "llama3_json"),
    ("mistral", "", "x-v3-json-array", "mistral_v3"),
    ("mistral", "", "x-v11-args", "mistral_v11"),
    ("mistral", "", "x-v11-call-id", "mistral_v11_call_id"),
    ("mistral", "", "x-v13-compact", "mistral_v13"),
    ("mistral", "Mistral-7B", None, "mistral_v3"),
    ("mistral", "Mistral-Small-3.2", None, "mistral_v11"),
    ("mistral", "Devstral-Small-2507", None, "mistral_v11"),
    ("mistral", "Magistral-Small-2506", None, "mistral_v11"),
    ("mistral", "", None, "mistral_v13"),
    ("qwen3-hermes", "", None, "qwen3"),
    ("qwen3-xml", "", None, "qwen3_xml"),
)


class Unsupported(Exception):
    """No chatparse template for this fixture's model (neither catalog nor fallback)."""


# --------------------------------------------------------------------------- the layer under test


@dataclass
class Layer:
    """The chatparse entry points the harness drives (real modules, or stand-ins in the self-test)."""

    resolve_name: Callable[..., str | None]
    describe: Callable[[str], Any]
    parse_message: Callable[..., Mapping[str, Any]]
    chat_parser: Callable[..., Any]
    template_for: Callable[[str], Any] | None = None
    """Name -> template (dict or name) for fallback templates; default: pass the name."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """Extra keyword options for ``parse_message`` / ``ChatParser`` (e.g. ``stream_tool_calls``)."""


def load_layer(**options: Any) -> Layer:
    """The real ``chatparse.catalog`` / ``chatparse.openai``; raises ImportError/AttributeError if absent.

    ``options`` go to every ``parse_message`` / ``ChatParser`` call (default: none, the library's
    defaults are what is measured).
    """
    from chatparse import catalog, openai

    return Layer(
        resolve_name=catalog.resolve_name,
        describe=catalog.describe,
        parse_message=openai.parse_message,
        chat_parser=openai.ChatParser,
        options=options,
    )


def missing_layer_reason() -> str | None:
    """Why the real layer cannot be used, or None when it can."""
    try:
        layer = load_layer()
    except (ImportError, AttributeError) as e:
        return f"chatparse.catalog / chatparse.openai not available yet ({type(e).__name__}: {e})"
    del layer
    return None


# --------------------------------------------------------------------------- per-fixture config


@dataclass(frozen=True)
class Config:
    template_name: str
    how: str
    """``catalog`` (resolve_name knew the model) or ``fallback`` (family mapping)."""
    kwargs: Mapping[str, Any]
    """``model=``/``template=``, ``prefix=``, ``tools=`` for parse_message / ChatParser."""
    finish_reason: str


def _entry_field(entry: Any, key: str) -> Any:
    if isinstance(entry, Mapping):
        return entry.get(key)
    return getattr(entry, key, None)


def fallback_name(fx: Fixture) -> str | None:
    model = fx.reference_model
    for family, needle, tag, name in FALLBACK:
        if fx.family == family and needle in model and (tag is None or tag in fx.tags):
            return name
    return None


def prefix_for(fx: Fixture, families: Mapping[str, Family], catalog_prompt: str | None) -> str:
    """What the prompt pre-wrote before ``raw_output`` (the parser must see it).

    The fixture's ``generation_prompt`` is the complete text ``add_generation_prompt`` appended
    (role header included, e.g. ``<|im_start|>assistant\\n<think>\\n``), so it is the prefix when
    given, including an explicit ``""`` (a continuation after a tool result).  Otherwise the family's
    ``default_generation_prompt`` for ``models[0]``; otherwise the catalog entry's
    ``generation_prompt``.  Concatenating the catalog's prompt in front would repeat the role header;
    with a start anchor the parser cuts after the last anchor anyway, so that choice only matters for
    templates without an anchor (measured equal, see docs/conformance.md).
    """
    if fx.generation_prompt is not None:
        return fx.generation_prompt
    fam = families.get(fx.family)
    ref = fam.reference_for(fx.reference_model) if fam is not None else None
    if ref is not None and ref.default_generation_prompt is not None:
        return ref.default_generation_prompt
    return catalog_prompt or ""


def config_for(fx: Fixture, layer: Layer, families: Mapping[str, Family]) -> Config:
    model = fx.reference_model
    how = "catalog"
    try:
        name = layer.resolve_name(model=model)
    except (LookupError, ValueError):
        name = None
    if not name:
        name = fallback_name(fx)
        if name is None:
            raise Unsupported(f"no chatparse template for {model}")
        how = "fallback"
    # The catalog name is passed explicitly (what ChatParser(model=...) resolves to anyway).
    kwargs: dict[str, Any] = {
        "model": model,
        "template": layer.template_for(name) if layer.template_for else name,
    }
    try:
        catalog_prompt = _entry_field(layer.describe(name), "generation_prompt")
    except (LookupError, ValueError):
        catalog_prompt = None
    kwargs["prefix"] = prefix_for(fx, families, catalog_prompt)
    kwargs["tools"] = [dict(t) for t in fx.tools]
    kwargs.update(layer.options)
    return Config(name, how, kwargs, "length" if fx.truncated else "stop")


# --------------------------------------------------------------------------- chunkings


def marker_cuts(text: str, markers: Iterable[str], around: int) -> list[int]:
    """Cut positions at both ends of every marker occurrence, ``±around`` characters."""
    cuts: set[int] = set()
    for m in markers:
        if not m:
            continue
        start = text.find(m)
        while start != -1:
            for edge in (start, start + len(m)):
                for d in range(-around, around + 1):
                    cuts.add(edge + d)
            start = text.find(m, start + 1)
    return sorted(c for c in cuts if 0 < c < len(text))


def chunks_for(text: str, strategy: str, markers: Sequence[str]) -> list[str]:
    if strategy.startswith("marker:"):
        cuts = [0, *marker_cuts(text, markers, int(strategy.split(":", 1)[1])), len(text)]
        return [text[a:b] for a, b in zip(cuts, cuts[1:]) if b > a]
    return split_text(text, ChunkStrategy.parse(strategy))


# --------------------------------------------------------------------------- parsing


def _exception(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def as_result(message: Mapping[str, Any], exception: str | None = None) -> ParseResult:
    """An OpenAI assistant message -> canitoolcall ``ParseResult`` (arguments kept as returned)."""
    calls = tuple(
        ParsedToolCall(
            (tc.get("function") or {}).get("name") or "", (tc.get("function") or {}).get("arguments")
        )
        for tc in message.get("tool_calls") or ()
    )
    reasoning = message.get("reasoning_content")
    if reasoning is None:
        reasoning = message.get("reasoning")
    return ParseResult(
        content=message.get("content") or None,
        reasoning_content=reasoning or None,
        tool_calls=calls,
        exception=exception,
    )


def parse_nonstream(fx: Fixture, cfg: Config, layer: Layer) -> ParseResult:
    try:
        msg = layer.parse_message(fx.raw_output, finish_reason=cfg.finish_reason, **cfg.kwargs)
    except Exception as e:  # a parse outcome (expected_error may accept it), not a harness error
        return ParseResult(exception=_exception(e))
    return as_result(msg)


@dataclass
class StreamOutcome:
    result: ParseResult
    final_message: ParseResult | None
    """``finish()``'s message, to compare with the merged deltas (None when the parse raised)."""


def parse_stream(fx: Fixture, cfg: Config, layer: Layer, chunks: Sequence[str]) -> StreamOutcome:
    acc = StreamAccumulator()
    try:
        parser = layer.chat_parser(**cfg.kwargs)
        for chunk in chunks:
            for delta in parser.feed(chunk):
                acc.add_openai_delta(delta)
        message, deltas, _reason = parser.finish(finish_reason=cfg.finish_reason)
        for delta in deltas:
            acc.add_openai_delta(delta)
    except Exception as e:  # deltas already sent stay sent (canitoolcall: a partial call still fails)
        return StreamOutcome(acc.result(exception=_exception(e)), None)
    return StreamOutcome(acc.result(), as_result(message))


# --------------------------------------------------------------------------- cases


@dataclass
class Case:
    fixture: Fixture
    config: Config | None
    observation: Observation | None
    rows: list[CheckResult] = field(default_factory=list)
    column_status: dict[str, Status] = field(default_factory=dict)
    """Per column (``nonstream`` and every strategy): worst of that parse's checks, including
    ``stream_equals_nonstream`` for streams."""
    status: Status = Status.UNSUPPORTED
    """Worst over every row, every chunking counted (chatparse promises split invariance)."""
    official_status: Status = Status.UNSUPPORTED
    """canitoolcall's ``case_status`` (``char:*`` rows left out, as for engines)."""
    message_mismatch: list[str] = field(default_factory=list)
    """Strategies where finish()'s message differs from the merged deltas."""
    reason: str | None = None

    @property
    def id(self) -> str:
        return self.fixture.id

    def failing(self) -> list[CheckResult]:
        return [r for r in self.rows if r.status in (Status.FAIL, Status.ERROR)]

    def leaked(self) -> bool:
        return any(r.check == "no_leakage" and r.status is Status.FAIL for r in self.rows)


def run_case(fx: Fixture, layer: Layer, families: Mapping[str, Family]) -> Case:
    try:
        cfg = config_for(fx, layer, families)
    except Unsupported as e:
        return Case(fx, None, None, reason=str(e))
    fam = families.get(fx.family)
    markers = fam.markers if fam is not None else ()
    nonstream = parse_nonstream(fx, cfg, layer)
    streams: dict[str, ParseResult] = {}
    mismatch: list[str] = []
    for sid in STRATEGIES:
        out = parse_stream(fx, cfg, layer, chunks_for(fx.raw_output, sid, markers))
        streams[sid] = out.result
        if out.final_message is not None and checks.compare(out.final_message, out.result) is not Status.PASS:
            mismatch.append(sid)
    obs = Observation(nonstream=nonstream, streams=streams)
    rows = checks.run_checks(fx, fam, obs)
    col: dict[str, Status] = {}
    for c in COLUMNS:
        col[c] = worst_status(r.status for r in rows if r.strategy == c)
    return Case(
        fx,
        cfg,
        obs,
        rows,
        col,
        status=worst_status(r.status for r in rows),
        official_status=checks.case_status(rows),
        message_mismatch=mismatch,
    )


@dataclass
class Run:
    cases: list[Case]
    seconds: float

    def supported(self) -> list[Case]:
        return [c for c in self.cases if c.config is not None]

    def case(self, fixture: Fixture, layer: Layer) -> Case:
        """The case of ``fixture`` (run now if the corpus run did not include it, e.g. with
        ``--canitoolcall-fixtures PATH``)."""
        found = next((c for c in self.cases if c.id == fixture.id and c.fixture == fixture), None)
        return found if found is not None else run_case(fixture, layer, load_families())


def run_corpus(layer: Layer, fixtures: Sequence[Fixture] | None = None) -> Run:
    fams = load_families()
    fxs = list(fixtures) if fixtures is not None else load_fixtures()
    t0 = time.perf_counter()
    cases = [run_case(fx, layer, fams) for fx in fxs]
    return Run(cases, time.perf_counter() - t0)


# --------------------------------------------------------------------------- reporting


def counts(statuses: Iterable[Status]) -> Counter[Status]:
    return Counter(statuses)


def family_table(run: Run) -> list[dict[str, Any]]:
    """Rows: family, fixtures, supported, and per column ``pass``/``soft``/``fail`` (+ overall)."""
    by_fam: dict[str, list[Case]] = {}
    for c in run.cases:
        by_fam.setdefault(c.fixture.family, []).append(c)
    rows = []
    for fam, cases in [*sorted(by_fam.items()), ("total", run.cases)]:
        sup = [c for c in cases if c.config is not None]
        row: dict[str, Any] = {"family": fam, "fixtures": len(cases), "supported": len(sup)}
        for colname in (*COLUMNS, "all", "official"):
            if colname == "all":
                st = [c.status for c in sup]
            elif colname == "official":
                st = [c.official_status for c in sup]
            else:
                st = [c.column_status[colname] for c in sup]
            n = counts(st)
            row[colname] = (n[Status.PASS], n[Status.SOFT_PASS], n[Status.FAIL] + n[Status.ERROR])
        row["leaks"] = sum(c.leaked() for c in sup)
        rows.append(row)
    return rows


def format_table(run: Run) -> str:
    table = family_table(run)
    cols = (*COLUMNS, "all")
    head = ["family", "n", "sup"] + [f"{c} p/s/f" for c in cols] + ["leak"]
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in table:
        cells = [r["family"], str(r["fixtures"]), str(r["supported"])]
        cells += ["{}/{}/{}".format(*r[c]) for c in cols]
        cells.append(str(r["leaks"]))
        lines.append(" | ".join(cells))
    return "\n".join("| " + ln + " |" for ln in lines)


def format_engines(run: Run) -> str:
    tot = family_table(run)[-1]
    lines = [
        "| engine | version | fixtures supported | pass | soft pass | fail |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for name, ver, n, p, s, f in ENGINES:
        lines.append(f"| {name} | {ver} | {n} | {p} | {s} | {f} |")
    p, s, f = tot["all"]
    lines.append(f"| **chatparse** (every chunking counted) | 0.1.0 | {tot['supported']} | {p} | {s} | {f} |")
    p, s, f = tot["official"]
    lines.append(
        f"| chatparse (canitoolcall case status: char:* not counted) | 0.1.0 | {tot['supported']} | {p} | {s} | {f} |"
    )
    return "\n".join(lines)


def failure_causes(run: Run) -> list[tuple[str, list[str]]]:
    """Failing (check, strategy-kind) signatures -> fixture ids, most frequent first."""
    sig: dict[str, list[str]] = {}
    for c in run.supported():
        keys = set()
        for r in c.failing():
            kind = r.strategy.split(":")[0]
            keys.add(f"{r.check} [{kind}]")
        for k in sorted(keys):
            sig.setdefault(k, []).append(c.id)
    return sorted(sig.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def describe_case(c: Case) -> str:
    """One failing case: its failing rows (identical details across chunkings merged) and the
    non-streaming result."""
    out = [f"{c.id}  [{c.config.template_name if c.config else '-'}; {classify(c)}]"]
    merged: dict[tuple[str, str | None], list[str]] = {}
    for r in c.failing():
        merged.setdefault((r.check, r.detail), []).append(r.strategy)
    for (check, detail), where in list(merged.items())[:6]:
        out.append(f"  {check} @ {','.join(where)}: {(detail or '')[:300]}")
    if c.observation is not None:
        ns = c.observation.nonstream
        out.append("  nonstream: " + json.dumps(ns.to_dict(), ensure_ascii=False)[:400])
    return "\n".join(out)


# Failure causes (docs/conformance.md, "Known failures").  The rules below only sort the failures of
# this corpus version into those causes for the report; the verdicts themselves are canitoolcall's.
CAUSES: dict[str, str] = {
    "streamed-then-dropped": "a cut-off or malformed call was announced while streaming (stream_tool_calls='early') "
    "and dropped at finish; a client cannot take it back",
    "kimi-k3": "kimi_k3 template: <|open|>response / tools sections, typed <argument type=...> and XTML "
    "attribute escapes not modelled",
    "marker-in-string": "a closing marker inside an argument string ends the call (JSON/value-aware closing, D17)",
    "llama-arguments-key": "Llama 3.3 resolves to llama3_json ('parameters'); the output uses 'arguments'",
    "gemma-key-spaces": "Gemma 4 unquoted keys containing spaces (D12)",
    "coder-no-opener": "Qwen3-Coder omits the <tool_call> opener (bare <function=...>)",
    "missing-value-closer": "missing </parameter> or </arg_value>",
    "stop-at-opener": "output stopped right after a call opener: the marker is released as content",
    "call-in-think": "tool call written inside <think> stays reasoning",
    "dsml-self-closing": "DSML self-closing <invoke .../> (no parameters) not recognised",
    "kimi-k2-policy": "Kimi K2 text inside the tool section / whitespace around it",
    "unclassified": "not classified yet",
}


def classify(c: Case) -> str:
    """The cause key (see :data:`CAUSES`) of a failing case."""
    fx = c.fixture
    fid, tags = fx.id, set(fx.tags)
    if fx.family == "kimi" and "Kimi-K3" in fx.reference_model and "truncated" not in tags:
        return "kimi-k3"
    if "marker-in-arguments" in fid or "marker-terminator" in fid:
        return "marker-in-string"
    obs = c.observation
    nonstream_ok = c.column_status.get(checks.NONSTREAM) in (Status.PASS, Status.SOFT_PASS)
    if (
        obs is not None
        and nonstream_ok
        and any(len(r.tool_calls) > len(obs.nonstream.tool_calls) for r in obs.streams.values())
    ):
        return "streamed-then-dropped"
    rules = (
        ("x-arguments-key", "llama-arguments-key"),
        ("x-stop-at-open-marker", "stop-at-opener"),
    )
    for tag, key in rules:
        if tag in tags:
            return key
    id_rules = (
        ("key-with-space", "gemma-key-spaces"),
        ("bare-function", "coder-no-opener"),
        ("missing-tool-call-opener", "coder-no-opener"),
        ("missing-close", "missing-value-closer"),
        ("missing-last-close", "missing-value-closer"),
        ("call-inside-think", "call-in-think"),
        ("self-closing", "dsml-self-closing"),
        ("kimi/k2i-", "kimi-k2-policy"),
    )
    for needle, key in id_rules:
        if needle in fid:
            return key
    return "unclassified"


def cause_table(run: Run) -> list[tuple[str, list[str]]]:
    """Cause key -> failing fixture ids, most frequent first."""
    out: dict[str, list[str]] = {}
    for c in run.cases:
        if c.config is not None and conformance_problem(c) is not None:
            out.setdefault(classify(c), []).append(c.id)
    return sorted(out.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def conformance_problem(c: Case) -> str | None:
    """Why ``c`` does not conform, with canitoolcall's own assertions, or None.

    Every parse (non-streaming and each chunking) must pass ``assert_conforms`` with ``soft=True``,
    every stream must equal the non-streaming parse (``assert_equivalent``, soft), and ``finish()``'s
    message must equal the merged deltas.
    """
    from canitoolcall.pytest_plugin import assert_conforms, assert_equivalent, family_for

    if c.observation is None:
        return f"unsupported: {c.reason}"
    fam = family_for(c.fixture)
    problems: list[str] = []
    try:
        assert_conforms(c.fixture, c.observation.nonstream, soft=True, family=fam)
    except AssertionError as e:
        problems.append(f"[nonstream] {e}")
    for sid, got in c.observation.streams.items():
        try:
            assert_conforms(c.fixture, got, soft=True, family=fam)
            assert_equivalent(c.observation.nonstream, got, soft=True)
        except AssertionError as e:
            problems.append(f"[{sid}] {e}")
    if c.message_mismatch:
        problems.append(f"finish() message != merged deltas in {c.message_mismatch}")
    return "\n\n".join(problems) or None


def stream_differences(c: Case) -> list[str]:
    """Chunkings whose result is not strictly equal to the non-streaming one."""
    return [
        r.strategy for r in c.rows if r.check == "stream_equals_nonstream" and r.status is not Status.PASS
    ]


def measured(run: Run) -> dict[str, Any]:
    """The numbers the ratchet test asserts (see tests/conformance/canitoolcall_baseline.py)."""
    tot = family_table(run)[-1]
    strict = {c: tot[c][0] for c in (*COLUMNS, "all")}
    ok = {c: tot[c][0] + tot[c][1] for c in (*COLUMNS, "all")}
    return {
        "supported": tot["supported"],
        "strict": strict,
        "pass_or_soft": ok,
        "leaks": sorted(c.id for c in run.supported() if c.leaked()),
        "stream_differences": sorted(
            c.id
            for c in run.supported()
            if c.column_status[checks.NONSTREAM] in (Status.PASS, Status.SOFT_PASS) and stream_differences(c)
        ),
    }
