"""`chatparse.hf.parse_response` / `get_response_parser` against transformers 5.24.0's own tokenizer API.

For every family case (tests/data/family_cases.json) and every input shape the reference accepts
(str, ids as list / tuple, numpy 1-D, torch 1-D; batches of str, of id lists, numpy 2-D, torch 2-D;
prefixes as str, ids, [] and batches, broadcast or one per response), the same tokenizer (a real
`PreTrainedTokenizerFast` built from the family's text) parses with transformers'
`tokenizer.parse_response` and with `chatparse.hf.parse_response`. The results are equal, or differ
in one of the reference's documented defects (classified by tests/core/test_differential.classify),
and the error messages are identical.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

import chatparse
from chatparse import catalog, hf

from ..core.reference import Outcome
from ..core.test_differential import classify, same_outcome
from .conftest import STATS, require_torch
from .helpers import CASES, FAMILIES, encode, family_cases, family_tokenizer

try:
    import torch
except ImportError:  # pragma: no cover - torch runs in CI's torch step
    torch = None


def run(fn) -> Outcome:
    try:
        return Outcome("ok", message=fn())
    except Exception as exc:  # noqa: BLE001
        return Outcome("error", error=exc)


def same_results(a: Outcome, b: Outcome) -> bool:
    """Equal outcomes, for single messages and for batches (lists of messages)."""
    if a.status == b.status == "ok" and isinstance(a.message, list):
        return (
            isinstance(b.message, list)
            and len(a.message) == len(b.message)
            and all(
                same_outcome(Outcome("ok", message=x), Outcome("ok", message=y))
                for x, y in zip(a.message, b.message)
            )
        )
    return same_outcome(a, b)


def verdict(template, prefix, text, tools, ref: Outcome, cp: Outcome) -> str:
    found = classify(template, prefix, text, tools, ref, cp)
    assert found is not None, (
        f"mismatch\nprefix={prefix!r}\ntext={text!r}\nreference: {ref.describe()}\nchatparse: {cp.describe()}"
    )
    return found


def single_shapes(tok, text: str, prefix: str):
    """(name, response, prefix) in every single-sequence shape the reference accepts."""
    ids, pids = encode(tok, text), encode(tok, prefix)
    yield "str", text, prefix
    yield "ids", ids, pids
    yield "tuple-ids", tuple(ids), tuple(pids)
    yield "str+ids-prefix", text, pids
    yield "ids+str-prefix", ids, prefix
    if ids and pids:
        yield "numpy-1d", np.array(ids), np.array(pids)
    if torch is not None and ids and pids:
        yield "torch-1d", torch.tensor(ids), torch.tensor(pids)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_single_sequences_match_transformers(name):
    tok = family_tokenizer(name)
    template = FAMILIES[name]
    for case in family_cases(name):
        text, prefix, tools = case["text"], case["prefix"], case["tools"]
        expected = None
        for shape, response, pfx in single_shapes(tok, text, prefix):
            ref = run(lambda r=response, p=pfx, t=tools: tok.parse_response(r, prefix=p, tools=t))
            cp = run(lambda r=response, p=pfx, t=tools: hf.parse_response(tok, r, prefix=p, tools=t))
            v = verdict(template, prefix, text, tools, ref, cp)
            STATS[f"single:{v}"] += 1
            if not text and shape in ("ids", "tuple-ids", "ids+str-prefix"):
                assert cp.message == [] == ref.message  # [] is an empty batch, in both
                continue
            # every shape of the same sequence gives the same result
            expected = expected or cp
            assert same_results(cp, expected), (case["id"], shape)
            if cp.ok:
                assert isinstance(cp.message, dict)


def test_opt_out_prefixes_match_transformers():
    name = "QWEN_JSON"
    tok = family_tokenizer(name)
    for case in family_cases(name):
        for pfx in ("", [], ()):
            ref = run(lambda p=pfx, c=case: tok.parse_response(c["text"], prefix=p))
            cp = run(lambda p=pfx, c=case: hf.parse_response(tok, c["text"], prefix=p))
            assert same_results(ref, cp), case["id"]
            STATS["opt-out:equal"] += 1


def batch_shapes(tok, texts: list[str], prefixes: list[str]):
    """(name, response batch, prefix argument) in every batch shape, with per-item and broadcast prefixes."""
    ids = [encode(tok, t) for t in texts]
    pids = [encode(tok, p) for p in prefixes]
    yield "str-batch", list(texts), list(prefixes)
    yield "tuple-str-batch", tuple(texts), tuple(prefixes)
    yield "ids-batch", ids, pids
    yield "ids-batch+str-prefixes", ids, list(prefixes)
    yield "str-batch+broadcast-str", list(texts), prefixes[0]
    if pids[0]:
        yield "ids-batch+broadcast-ids", ids, pids[0]
        yield "numpy-2d+broadcast-numpy-1d", np.array([ids[0], ids[0]]), np.array(pids[0])
    yield (
        "numpy-2d",
        np.array([ids[0], ids[0]]),
        np.array([pids[0], pids[0]]) if pids[0] else [prefixes[0]] * 2,
    )
    if torch is not None:
        yield "torch-2d", torch.tensor([ids[0], ids[0]]), [prefixes[0], prefixes[0]]
        if pids[0]:
            yield "torch-2d+torch-2d-prefix", torch.tensor([ids[0]] * 3), torch.tensor([pids[0]] * 3)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_batches_match_transformers(name):
    tok = family_tokenizer(name)
    template = FAMILIES[name]
    cases = family_cases(name)
    texts, prefixes, tools = [c["text"] for c in cases], [c["prefix"] for c in cases], cases[0]["tools"]
    for shape, responses, pfx in batch_shapes(tok, texts, prefixes):
        ref = run(lambda r=responses, p=pfx: tok.parse_response(r, prefix=p, tools=tools))
        cp = run(lambda r=responses, p=pfx: hf.parse_response(tok, r, prefix=p, tools=tools))
        if same_results(ref, cp):
            STATS["batch:equal"] += 1
            continue
        # A documented divergence: it must be explained item by item.
        n = len(responses)
        items_t = [tok.decode(r) if not isinstance(r, str) else r for r in list(responses)]
        items_p = (
            [pfx if isinstance(pfx, str) else tok.decode(pfx)] * n
            if isinstance(pfx, str)
            or not isinstance(pfx, (list, tuple))
            or (pfx and not isinstance(pfx[0], (str, list)))
            else [p if isinstance(p, str) else tok.decode(p) for p in pfx]
        )
        if not isinstance(items_p[0], str):  # a 2-D prefix tensor/array decodes to a list
            items_p = list(items_p[0])
        verdicts = set()
        for t, p in zip(items_t, items_p):
            r1 = run(lambda t=t, p=p: tok.parse_response(t, prefix=p, tools=tools))
            c1 = run(lambda t=t, p=p: hf.parse_response(tok, t, prefix=p, tools=tools))
            verdicts.add(verdict(template, p, t, tools, r1, c1))
        assert verdicts - {"equal"}, (shape, ref.describe(), cp.describe())
        STATS["batch:" + "+".join(sorted(verdicts - {"equal"}))] += 1


def test_batch_results_are_lists_and_broadcast():
    tok = family_tokenizer("QWEN_JSON")
    texts = [c["text"] for c in family_cases("QWEN_JSON")][:4]
    assert hf.parse_response(tok, [], prefix="") == [] == tok.parse_response([], prefix="")
    one = hf.parse_response(tok, [texts[0]], prefix="")
    assert isinstance(one, list) and len(one) == 1
    many = hf.parse_response(tok, texts, prefix="<|im_start|>assistant\n")
    assert many == [hf.parse_response(tok, t, prefix="<|im_start|>assistant\n") for t in texts]


# ---------------------------------------------------------------------------------------- errors


def error_of(fn) -> BaseException:
    with pytest.raises(Exception) as info:  # noqa: PT011
        fn()
    return info.value


def same_error(ref: BaseException, cp: BaseException) -> None:
    assert type(ref) is type(cp)
    assert str(cp) == str(ref)


def test_missing_prefix_error_is_the_reference_s():
    tok = family_tokenizer("QWEN_JSON")
    for response in ("x", [1, 2], ["a", "b"], np.array([1, 2])):
        same_error(
            error_of(lambda r=response: tok.parse_response(r)),
            error_of(lambda r=response: hf.parse_response(tok, r)),
        )
    same_error(
        error_of(lambda: tok.get_response_parser()),
        error_of(lambda: hf.get_response_parser(tok)),
    )


def test_batch_size_mismatch_error_is_the_reference_s():
    tok = family_tokenizer("QWEN_JSON")
    ids = encode(tok, "a<|im_end|>")
    for response, prefix in (
        (["a", "b", "c"], ["x", "y"]),
        ([ids, ids], [[1], [2], [3]]),
        ("a", ["x", "y"]),
        (np.array([ids, ids, ids]), np.array([[1, 2]] * 2)),
    ):
        ref = error_of(lambda r=response, p=prefix: tok.parse_response(r, prefix=p))
        cp = error_of(lambda r=response, p=prefix: hf.parse_response(tok, r, prefix=p))
        same_error(ref, cp)
        assert "prefix(es)" in str(cp)


def test_batched_prefix_for_a_stream_is_the_reference_s_error():
    tok = family_tokenizer("QWEN_JSON")
    ref = error_of(lambda: tok.get_response_parser(prefix=[[1, 2], [3]]))
    cp = error_of(lambda: hf.get_response_parser(tok, prefix=[[1, 2], [3]]))
    same_error(ref, cp)


def test_missing_template_error_is_the_reference_s_plus_a_hint():
    tok = family_tokenizer("QWEN_JSON", with_template=False)
    for cat in (True, False):
        ref = error_of(lambda: tok.parse_response("x", prefix=""))
        cp = error_of(lambda c=cat: hf.parse_response(tok, "x", prefix="", catalog=c))
        assert type(cp) is type(ref) is AttributeError
        first, hint = str(cp).split("\n")
        assert first == str(ref)
        assert "response_template=" in hint
        ref = error_of(lambda: tok.get_response_parser(prefix=""))
        cp = error_of(lambda c=cat: hf.get_response_parser(tok, prefix="", catalog=c))
        assert type(cp) is type(ref) is AttributeError
        assert str(cp).split("\n")[0] == str(ref)


def test_missing_template_hint_names_close_catalog_entries():
    tok = family_tokenizer("QWEN_JSON", with_template=False, name_or_path="acme/qwen-ish-chat")
    msg = str(error_of(lambda: hf.parse_response(tok, "x", prefix="")))
    assert "name_or_path 'acme/qwen-ish-chat'" in msg and "closest:" in msg


def test_invalid_template_errors_match():
    tok = family_tokenizer("QWEN_JSON")
    bad = {"start_anchor": "A", "fields": {"content": {"open": "<", "bogus": 1}}}
    same_error(
        error_of(lambda: tok.parse_response("x", bad, prefix="")),
        error_of(lambda: hf.parse_response(tok, "x", prefix="", response_template=bad)),
    )
    # an empty batch never looks at the template, in both
    assert (
        tok.parse_response([], bad, prefix="")
        == []
        == hf.parse_response(tok, [], prefix="", response_template=bad)
    )


def test_unparseable_output_raises_the_reference_s_error_type():
    tok = family_tokenizer("QWEN_JSON")
    text = '<tool_call>\n{"name": "f", "arguments": {oops}}\n</tool_call><|im_end|>'
    ref = error_of(lambda: tok.parse_response(text, prefix=""))
    cp = error_of(lambda: hf.parse_response(tok, text, prefix=""))
    assert type(cp) is type(ref)


# ---------------------------------------------------------------------------------------- streaming


@pytest.mark.parametrize("name", ["QWEN_JSON", "GPT_OSS", "GEMMA4", "DEEPSEEK_V31", "KIMI_K2"])
def test_get_response_parser_matches_transformers(name):
    """Streamed messages through the tokenizer-level parser: ids prefixes decoded like the reference's."""
    tok = family_tokenizer(name)
    for case in family_cases(name):
        text, prefix, tools = case["text"], case["prefix"], case["tools"]
        pids = encode(tok, prefix)
        for pfx in (prefix, pids, np.array(pids) if pids else prefix):
            cp = hf.get_response_parser(tok, prefix=pfx, tools=tools)
            ref = tok.get_response_parser(prefix=pfx, tools=tools)
            assert isinstance(cp, chatparse.ResponseParser)
            events: list = []

            def stream(p=cp, text=text, events=events):
                events.extend(p.feed(text))
                message, last = p.finalize()
                events.extend(last)
                return message

            cp_out = run(stream)
            ref_out = run(lambda p=ref, text=text: (p.feed(text), p.finalize()[0])[1])
            bad = [e for e in events if e["type"] == "region_malformed"]
            if ref_out.status == "error" and bad:
                # D11: the reference raises from feed(); chatparse reports region_malformed and goes on
                assert type(bad[0]["error"]) is type(ref_out.error)
                STATS["stream:D11"] += 1
            elif same_results(ref_out, cp_out):
                STATS["stream:equal"] += 1
            else:
                STATS["stream:" + verdict(FAMILIES[name], prefix, text, tools, ref_out, cp_out)] += 1


def test_get_response_parser_with_torch_prefix():
    require_torch()
    import torch as _torch

    tok = family_tokenizer("QWEN_JSON")
    case = family_cases("QWEN_JSON")[0]
    p = hf.get_response_parser(tok, prefix=_torch.tensor(encode(tok, case["prefix"])))
    p.feed(case["text"])
    assert p.finalize()[0] == hf.parse_response(tok, case["text"], prefix=case["prefix"])


# ---------------------------------------------------------------------------------------- lookup


def test_catalog_lookup_by_name_or_path():
    tok = family_tokenizer("QWEN_JSON", with_template=False, name_or_path="unsloth/Qwen3-8B-GGUF")
    assert hf.catalog_name_for(tok) == "qwen3"
    assert hf.response_template_for(tok) == catalog.get("qwen3")
    case = next(c for c in family_cases("QWEN_JSON") if c["id"] == "QWEN_JSON-doc")
    expected = chatparse.parse_response(case["text"], catalog.get("qwen3"), prefix=case["prefix"])
    assert hf.parse_response(tok, encode(tok, case["text"]), prefix=case["prefix"]) == expected
    with pytest.raises(AttributeError):
        hf.parse_response(tok, case["text"], prefix="", catalog=False)


def test_catalog_lookup_by_chat_template():
    qwen = (
        (Path := __import__("pathlib").Path)(__file__).parent.parent
        / "data"
        / "chat_templates"
        / "qwen3.jinja"
    )
    tok = family_tokenizer("QWEN_JSON", with_template=False, chat_template=qwen.read_text(encoding="utf-8"))
    assert hf.catalog_name_for(tok) == "qwen3"
    gpt = Path(__file__).parent.parent / "data" / "chat_templates" / "gpt_oss.jinja"
    tok2 = family_tokenizer("GPT_OSS", with_template=False, chat_template=gpt.read_text(encoding="utf-8"))
    assert hf.catalog_name_for(tok2) == "gpt_oss"
    # a recognised chat template wins over the name (catalog.resolve: the template is what the model
    # is prompted with); the lookup follows changes of either
    tok.name_or_path = "openai/gpt-oss-20b"
    assert hf.catalog_name_for(tok) == "qwen3"
    tok.chat_template = "{{ messages }}"
    assert hf.catalog_name_for(tok) == "gpt_oss"


def test_own_template_wins_and_names_and_templates_are_accepted():
    tok = family_tokenizer("QWEN_JSON", name_or_path="openai/gpt-oss-20b")
    assert hf.response_template_for(tok) == FAMILIES["QWEN_JSON"]
    text = "<think>a</think>b<|im_end|>"
    assert hf.parse_response(tok, text, prefix="")["content"] == "b"
    by_name = hf.parse_response(tok, text, prefix="", response_template="qwen3")
    by_template = hf.parse_response(tok, text, prefix="", response_template=catalog.load("qwen3"))
    assert by_name == by_template == {"role": "assistant", "reasoning_content": "a", "content": "b"}


def test_template_dict_is_not_mutated():
    tok = family_tokenizer("QWEN_JSON")
    before = copy.deepcopy(tok.response_template)
    for case in family_cases("QWEN_JSON"):
        run(lambda c=case: hf.parse_response(tok, [c["text"]] * 2, prefix=c["prefix"], tools=c["tools"]))
    assert tok.response_template == before


def test_numpy_and_torch_are_never_imported(tmp_path):
    """`import chatparse.hf` and a parse with a tokenizer-like object import neither numpy nor torch."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from chatparse import hf\n"
        "class Tok:\n"
        "    name_or_path, chat_template, response_template = 'Qwen/Qwen3-8B', None, None\n"
        "    def decode(self, ids, skip_special_tokens=False):\n"
        "        return ''.join(chr(i) for i in ids) if not ids or isinstance(ids[0], int) else [self.decode(x) for x in ids]\n"
        "m = hf.parse_response(Tok(), [ord(c) for c in 'Hi<|im_end|>'], prefix=[])\n"
        "assert m == {'role': 'assistant', 'content': 'Hi'}, m\n"
        "hf.parse_response(Tok(), [[72], [73]], prefix='')\n"
        "s = hf.ResponseStreamer(Tok()); s.put([ord(c) for c in '<|im_start|>assistant\\n']); s.put([72]); s.end()\n"
        "assert s.message == {'role': 'assistant', 'content': 'H'}, s.message\n"
        "bad = [m for m in ('numpy', 'torch', 'transformers', 'datasets') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_all_cases_are_covered():
    assert {c["template"] for c in CASES} == set(FAMILIES)
