"""The canitoolcall 0.1.1 corpus (469 fixtures, 9 families) through chatparse's OpenAI layer.

Every fixture is parsed with ``chatparse.openai.parse_message`` and streamed through
``chatparse.openai.ChatParser`` with the chunkings of ``harness.STRATEGIES`` (``one``, one character
per feed ``char:0``, seeded 1-8 characters ``char:1``..``char:3``, cuts at marker boundaries
``marker:0`` and ±1 character around them ``marker:1``), once per chunking; the verdicts are
canitoolcall's own (``checks.run_checks``, ``assert_conforms``, ``assert_equivalent``, soft-v1).
Method and results: docs/conformance.md; table: ``python benchmarks/conformance.py``.

Target: every fixture supported, >= 97% strict pass and 100% pass-or-soft-pass in every chunking,
zero marker leakage, streamed == non-streamed.  Until then the measured numbers in
``canitoolcall_baseline.py`` are a ratchet: they may only go up.
"""

from __future__ import annotations

import pytest

pytest.importorskip("canitoolcall", reason="canitoolcall (test extra) is not installed")

from canitoolcall.fixtures import Fixture  # noqa: E402

from . import canitoolcall_baseline as B  # noqa: E402
from . import harness as H  # noqa: E402

_MISSING = H.missing_layer_reason()
pytestmark = pytest.mark.skipif(_MISSING is not None, reason=_MISSING or "")


@pytest.fixture(scope="module")
def layer() -> H.Layer:
    return H.load_layer()


@pytest.fixture(scope="module")
def corpus_run(layer: H.Layer) -> H.Run:
    return H.run_corpus(layer)


def test_corpus_ratchet(corpus_run: H.Run, capsys: pytest.CaptureFixture[str]) -> None:
    """Measured floors (ratchet) and the target, printed with the per-family table."""
    m = H.measured(corpus_run)
    n = len(corpus_run.cases)
    with capsys.disabled():
        print(f"\ncanitoolcall corpus through chatparse.openai ({corpus_run.seconds:.1f} s)")
        print(H.format_table(corpus_run))
        print(
            f"target: {n}/{n} supported, >= {H.TARGET_STRICT:.0%} strict "
            f"({int(H.TARGET_STRICT * n + 0.999)}), {H.TARGET_PASS_OR_SOFT:.0%} pass-or-soft in every chunking, "
            f"zero leakage, stream == non-stream; now: {m['supported']} supported, "
            f"{m['strict']['all']} strict, {m['pass_or_soft']['all']} pass-or-soft (all chunkings counted)"
        )
    assert m["supported"] >= B.MEASURED_SUPPORTED
    for col, floor in B.MEASURED_STRICT.items():
        assert m["strict"][col] >= floor, f"strict pass regressed in {col}: {m['strict'][col]} < {floor}"
    for col, floor in B.MEASURED_PASS_OR_SOFT.items():
        assert m["pass_or_soft"][col] >= floor, (
            f"pass-or-soft regressed in {col}: {m['pass_or_soft'][col]} < {floor}"
        )
    assert set(m["leaks"]) <= B.KNOWN_LEAKS, f"marker leakage: {sorted(set(m['leaks']) - B.KNOWN_LEAKS)}"
    new_diffs = set(m["stream_differences"]) - B.KNOWN_STREAM_DIFFERENCES
    assert not new_diffs, f"streamed != non-streamed although non-streaming passes: {sorted(new_diffs)}"


def test_fixture_conforms(canitoolcall_fixture: Fixture, corpus_run: H.Run, layer: H.Layer) -> None:
    """One test per fixture (ids = fixture ids): canitoolcall's ``assert_conforms`` (soft) on every
    parse and ``assert_equivalent`` stream vs non-stream; documented failures are strict xfails."""
    case = corpus_run.case(canitoolcall_fixture, layer)
    problem = H.conformance_problem(case)
    known = B.KNOWN_FAILURES.get(case.id)
    if problem is None:
        if known is not None:
            pytest.fail(f"{case.id} conforms now: remove it from KNOWN_FAILURES (was: {known})")
        return
    if known is not None:
        pytest.xfail(known)
    pytest.fail(problem, pytrace=False)
