#!/usr/bin/env python3
"""The canitoolcall 0.1.1 corpus through chatparse's OpenAI layer: per-family table.

For every family: fixtures, fixtures with a chatparse template, and ``pass``/``soft``/``fail`` per
column -- ``nonstream`` (``parse_message``) and each streamed chunking (``ChatParser``): ``one``,
``char:0`` (one character per feed), ``char:1``..``char:3`` (seeded 1-8 characters), ``marker:0``
(cuts at marker boundaries) and ``marker:1`` (cuts ±1 character around them) -- then ``all`` (the
worst over every column, which is how chatparse is judged) and the marker-leak count.  Verdicts
are canitoolcall's own checks (soft-v1).  The engines' published numbers follow for comparison.

Usage:

  python benchmarks/conformance.py                 # tables
  python benchmarks/conformance.py --failures      # + failure signatures and each failing case
  python benchmarks/conformance.py --family glm    # one family (repeatable)
  python benchmarks/conformance.py --baseline      # print tests/conformance/canitoolcall_baseline.py
  python benchmarks/conformance.py --json out.json # machine-readable results
  python benchmarks/conformance.py --standin       # harness self-test on the core parser (no openai layer)
  python benchmarks/conformance.py --own           # the own fixtures (tests/data/own_fixtures) instead

Method, caveats and the list of failures with causes: docs/conformance.md.
"""

from __future__ import annotations

import argparse
import json
import pprint
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from canitoolcall.fixtures import load_fixtures  # noqa: E402
from tests.conformance import harness as H  # noqa: E402


def baseline_source(run: H.Run, causes: dict[str, str]) -> str:
    m = H.measured(run)
    failing = {
        c.id: causes.get(c.id) or H.CAUSES[H.classify(c)]
        if c.config is not None
        else f"unsupported: {c.reason}"
        for c in run.cases
        if H.conformance_problem(c) is not None
    }
    parts = [
        '"""Measured baseline (ratchet) for tests/conformance/test_canitoolcall.py.',
        "",
        "Regenerate with ``python benchmarks/conformance.py --baseline > F && ruff format F`` after a catalog or OpenAI-layer",
        "change, review the diff, and only ever raise the floors: a fixture leaving ``KNOWN_FAILURES`` is",
        "progress, a fixture entering it is a regression that needs a cause in docs/conformance.md.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        f"# Fixtures (of {len(run.cases)}) with a chatparse template.",
        f"MEASURED_SUPPORTED = {m['supported']}",
        "",
        "# Per column (nonstream, every chunking, all = worst over them): strict ``pass`` / ``pass`` or ``soft_pass``.",
        f"MEASURED_STRICT: dict[str, int] = {pprint.pformat(m['strict'], sort_dicts=False)}",
        f"MEASURED_PASS_OR_SOFT: dict[str, int] = {pprint.pformat(m['pass_or_soft'], sort_dicts=False)}",
        "",
        "# Fixture id -> cause, for fixtures that fail assert_conforms / assert_equivalent in some chunking.",
        f"KNOWN_FAILURES: dict[str, str] = {pprint.pformat(failing, width=110)}",
        "",
        "# Fixtures allowed to leak a family marker, and to stream differently from the non-streaming parse",
        "# even though the non-streaming parse passes (both targets are zero).",
        f"KNOWN_LEAKS: frozenset[str] = frozenset({pprint.pformat(m['leaks'], width=110)})",
        f"KNOWN_STREAM_DIFFERENCES: frozenset[str] = frozenset({pprint.pformat(m['stream_differences'], width=110)})",
        "",
    ]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", action="append", default=[], help="only this family (repeatable)")
    ap.add_argument("--failures", action="store_true", help="list failure signatures and failing cases")
    ap.add_argument("--baseline", action="store_true", help="print the ratchet module")
    ap.add_argument("--json", type=Path, help="write per-case results as JSON")
    ap.add_argument("--standin", action="store_true", help="use the core-parser stand-in layer")
    ap.add_argument(
        "--stream-tool-calls",
        choices=("early", "complete"),
        help="ChatParser stream_tool_calls policy (default: the library default)",
    )
    ap.add_argument("--template", help="force this catalog template for every fixture (diagnostics)")
    ap.add_argument(
        "--own",
        action="store_true",
        help="run the project's own fixtures (tests/data/own_fixtures) instead of the corpus",
    )
    args = ap.parse_args(argv)

    if args.standin:
        from tests.conformance.standin import standin_layer

        layer = standin_layer()
    else:
        reason = H.missing_layer_reason()
        if reason is not None:
            print(reason, file=sys.stderr)
            return 2
        opts = {"stream_tool_calls": args.stream_tool_calls} if args.stream_tool_calls else {}
        layer = H.load_layer(**opts)
        if args.template:
            forced = args.template
            layer.resolve_name = lambda model: forced
    if args.own:
        import time

        from canitoolcall.fixtures import Fixture
        from tests.conformance import test_own_fixtures as own

        t0 = time.perf_counter()
        own_fixtures = [
            Fixture.from_dict(rec, source=path, line=line)
            for path, line, rec in own.RECORDS
            if not args.family or rec["family"] in args.family
        ]
        run = H.Run([H.run_case(fx, layer, own.FAMILY_OBJS) for fx in own_fixtures], time.perf_counter() - t0)
        print(
            f"own fixtures (tests/data/own_fixtures) through chatparse ({len(run.cases)} fixtures, {run.seconds:.1f} s)"
        )
        print("cells: pass/soft/fail; 'all' = worst over non-streaming and every chunking\n")
        print(H.format_table(run))
        if args.failures:
            for c in run.cases:
                if c.config is None or c.status.value not in ("pass",):
                    print(H.describe_case(c) if c.config is not None else f"{c.id}: {c.reason}")
        return 0
    fixtures = load_fixtures(families=args.family or None)
    run = H.run_corpus(layer, fixtures)

    if args.baseline:
        from tests.conformance import canitoolcall_baseline as B

        print(baseline_source(run, B.KNOWN_FAILURES))
        return 0

    print(f"canitoolcall 0.1.1 corpus through chatparse ({len(run.cases)} fixtures, {run.seconds:.1f} s)")
    print("cells: pass/soft/fail; 'all' = worst over non-streaming and every chunking\n")
    print(H.format_table(run))
    print()
    print(H.format_engines(run))
    fallback = sorted(
        {
            (c.fixture.reference_model, c.config.template_name)
            for c in run.supported()
            if c.config and c.config.how == "fallback"
        }
    )
    if fallback:
        print("\ntemplate by family fallback (catalog.resolve_name did not know the model):")
        for model, name in fallback:
            print(f"  {model} -> {name}")
    unsupported = [c for c in run.cases if c.config is None]
    if unsupported:
        print(f"\nunsupported: {len(unsupported)} ({sorted({c.reason or '' for c in unsupported})})")

    causes = H.cause_table(run)
    if causes:
        print("\nfailures by cause (fixtures failing in some column):")
        for key, ids in causes:
            print(f"  {len(ids):3d}  {key}: {H.CAUSES[key]}")
            print(f"       {', '.join(ids)}")
    if args.failures:
        print("\nfailure signatures (check [chunking kind] -> fixtures):")
        for sig, ids in H.failure_causes(run):
            print(f"  {len(ids):3d}  {sig}: {', '.join(ids[:6])}{' ...' if len(ids) > 6 else ''}")
        print("\nfailing cases:")
        for c in run.cases:
            if c.config is not None and H.conformance_problem(c) is not None:
                print(H.describe_case(c))
    if args.json:
        data = [
            {
                "id": c.id,
                "family": c.fixture.family,
                "template": c.config.template_name if c.config else None,
                "how": c.config.how if c.config else None,
                "status": c.status.value,
                "official_status": c.official_status.value,
                "columns": {k: v.value for k, v in c.column_status.items()},
                "failing": [r.to_dict() for r in c.failing()],
                "observed": c.observation.to_dict() if c.observation else None,
            }
            for c in run.cases
        ]
        args.json.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
