"""`parse_dataset` / `RowParser` over real `datasets` objects: in memory, memory-mapped, streaming, `num_proc`."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("datasets", reason="needs the hf extra (datasets)")

from datasets import Dataset, DatasetDict, IterableDataset, load_from_disk  # noqa: E402

import chatparse  # noqa: E402
from chatparse import hf  # noqa: E402
from chatparse.hf import RowParser, parse_dataset  # noqa: E402

from .helpers import FAMILIES, encode, family_cases, family_tokenizer  # noqa: E402


def rows_of(name: str, repeat: int = 1) -> dict[str, list]:
    cases = family_cases(name) * repeat
    return {
        "id": [c["id"] for c in cases],
        "prompt": [c["prefix"] for c in cases],
        "completion": [c["text"] for c in cases],
        "tools": [json.dumps(c["tools"]) for c in cases],
    }


def loop(data: dict[str, list], parser: RowParser) -> list[dict]:
    """What a plain Python loop over the rows gives (the reference for every dataset kind)."""
    n = len(data["completion"])
    return [{**{k: data[k][i] for k in data}, **parser({k: data[k][i] for k in data})} for i in range(n)]


def expected_columns(case: dict, template: dict) -> dict:
    """The parsed columns, computed from chatparse.parse_response directly."""
    try:
        m = chatparse.parse_response(case["text"], template, prefix=case["prefix"], tools=case["tools"])
    except ValueError as e:
        return {"error": f"{type(e).__name__}: {e}"}
    return {"message": m}


@pytest.mark.parametrize("name", list(FAMILIES))
def test_every_family_in_memory_equals_parse_response(name):
    data = rows_of(name)
    template = FAMILIES[name]
    out = parse_dataset(
        Dataset.from_dict(data),
        column="completion",
        prefix_column="prompt",
        template=template,
        tools_column="tools",
        desc=None,
    )
    parser = RowParser(column="completion", prefix_column="prompt", template=template, tools_column="tools")
    assert out.column_names == list(data) + parser.columns
    assert out.to_list() == loop(data, parser)
    for row, case in zip(out.to_list(), family_cases(name)):
        exp = expected_columns(case, template)
        if "error" in exp:
            assert row["parse_error"] == exp["error"]
            continue
        m = exp["message"]
        assert row["parse_error"] is None
        for key, kind in parser.kinds.items():
            if kind == "calls":
                calls = m.get(key, [])
                assert [c["function"]["name"] for c in row[key]] == [c["function"]["name"] for c in calls]
                assert [json.loads(c["function"]["arguments"]) for c in row[key]] == [
                    c["function"]["arguments"] for c in calls
                ]
            elif kind == "text":
                assert row[key] == m.get(key)
            else:
                assert row[key] == (json.dumps(m[key], ensure_ascii=False) if key in m else None)


def test_memory_mapped_streaming_and_two_processes_equal_the_loop(tmp_path):
    data = rows_of("QWEN_XML", repeat=40)
    parser = RowParser(
        column="completion", prefix_column="prompt", template="qwen3_xml", tools_column="tools"
    )
    expected = loop(data, parser)
    Dataset.from_dict(data).save_to_disk(str(tmp_path / "ds"))
    mapped = load_from_disk(str(tmp_path / "ds"))
    assert mapped.cache_files  # memory-mapped from Arrow files
    kwargs = dict(
        column="completion", prefix_column="prompt", template="qwen3_xml", tools_column="tools", desc=None
    )
    one = parse_dataset(mapped, **kwargs)
    assert one.cache_files and one.cache_files[0]["filename"].startswith(str(tmp_path))  # written to disk
    assert one.to_list() == expected
    two = parse_dataset(mapped, num_proc=2, **kwargs)
    assert two.to_list() == expected
    stream = parse_dataset(mapped.to_iterable_dataset(num_shards=2), **kwargs)
    assert isinstance(stream, IterableDataset)
    assert list(stream) == expected
    with pytest.raises(ValueError, match="num_proc does not apply"):
        parse_dataset(mapped.to_iterable_dataset(), num_proc=2, **kwargs)


def test_one_process_parses_in_this_process(monkeypatch):
    """`num_proc=1` parses in the calling process (datasets would fork one worker for it)."""
    import os

    forks = []
    real_fork = os.fork
    monkeypatch.setattr(os, "fork", lambda: forks.append(1) or real_fork())
    data = rows_of("QWEN_JSON", repeat=2)
    parser = RowParser(column="completion", prefix_column="prompt", template="qwen3", tools_column="tools")
    out = parse_dataset(
        Dataset.from_dict(data),
        num_proc=1,
        column="completion",
        prefix_column="prompt",
        template="qwen3",
        tools_column="tools",
        desc=None,
    )
    assert out.to_list() == loop(data, parser)
    assert forks == []


def test_100k_rows_with_one_and_two_processes_equal_a_plain_loop():
    cases = family_cases("QWEN_JSON")
    data = rows_of("QWEN_JSON", repeat=100_000 // len(cases) + 1)
    data = {k: v[:100_000] for k, v in data.items()}
    ds = Dataset.from_dict(data)
    kwargs = dict(
        column="completion", prefix_column="prompt", template="qwen3", tools_column="tools", desc=None
    )
    parser = RowParser(**{k: v for k, v in kwargs.items() if k != "desc"})
    # the plain loop; the rows repeat the family's cases, so each distinct row is parsed once
    distinct = {}
    expected = []
    for i in range(len(ds)):
        row = {k: data[k][i] for k in ("completion", "prompt", "tools")}
        key = (row["completion"], row["prompt"], row["tools"])
        if key not in distinct:
            distinct[key] = parser(row)
        expected.append(distinct[key])
    assert len(distinct) == len(cases)
    for num_proc in (None, 2):
        out = parse_dataset(ds, num_proc=num_proc, **kwargs)
        assert len(out) == 100_000
        assert out.select_columns(parser.columns).to_list() == expected, num_proc


def test_token_id_columns_are_decoded_by_the_tokenizer():
    tok = family_tokenizer("QWEN_JSON")
    cases = [c for c in family_cases("QWEN_JSON") if c["text"]]
    ds = Dataset.from_dict(
        {
            "ids": [encode(tok, c["text"]) for c in cases],
            "prompt_ids": [encode(tok, c["prefix"]) for c in cases],
        }
    )
    out = parse_dataset(ds, column="ids", prefix_column="prompt_ids", tokenizer=tok, desc=None)
    for row, case in zip(out, cases):
        try:
            m = hf.parse_response(tok, case["text"], prefix=case["prefix"])
        except ValueError:
            assert row["parse_error"]
            continue
        assert row["content"] == m.get("content") and row["thinking"] == m.get("thinking")
    with pytest.raises(TypeError, match="pass tokenizer="):
        RowParser(column="ids", prefix="", template="qwen3", on_error="raise")({"ids": [1, 2]})


def test_dataset_dict_prefix_and_column_checks():
    data = rows_of("GPT_OSS")
    dd = DatasetDict({"train": Dataset.from_dict(data), "test": Dataset.from_dict(data)})
    out = parse_dataset(
        dd, column="completion", prefix="", template="gpt_oss", column_prefix="parsed_", desc=None
    )
    assert set(out) == {"train", "test"} and "parsed_content" in out["train"].column_names
    ds = dd["train"]
    with pytest.raises(ValueError, match="prefix_column= .* or prefix="):
        parse_dataset(ds, column="completion", template=FAMILIES["GPT_OSS"])
    # a catalog name brings its generation prompt as the default prefix
    assert RowParser(column="c", template="qwen3").prefix == "<|im_start|>assistant\n"
    with pytest.raises(ValueError, match="no column 'nope'"):
        parse_dataset(ds, column="nope", prefix="", template="gpt_oss")
    clash = ds.add_column("content", ["x"] * len(ds))
    with pytest.raises(ValueError, match="overwrite the column"):
        parse_dataset(clash, column="completion", prefix="", template="gpt_oss")
    with pytest.raises(ValueError, match="needs template="):
        parse_dataset(ds, column="completion", prefix="")
    with pytest.raises(TypeError, match="Dataset"):
        parse_dataset(data, column="completion", prefix="", template="gpt_oss")


def test_errors_are_recorded_or_raised_with_the_row():
    bad = 'x <tool_call>\n{"name": "f", "arguments": {oops}}\n</tool_call><|im_end|>'
    ds = Dataset.from_dict({"completion": ["ok<|im_end|>", bad, None]})
    out = parse_dataset(ds, column="completion", prefix="", template="qwen3", desc=None)
    assert out["parse_error"][0] is None and out["content"][0] == "ok"
    assert out["parse_error"][1].startswith("ValueError: json parser could not parse region as JSON")
    assert out["content"][1] is None and out["tool_calls"][1] == []
    assert out["parse_error"][2] == "ValueError: column 'completion' is empty (None)"
    with pytest.raises(ValueError, match="^row 1: json parser"):
        parse_dataset(ds, column="completion", prefix="", template="qwen3", on_error="raise", desc=None)


def test_row_parser_pickles_and_parses_rows_and_batches():
    import pickle

    parser = RowParser(column="c", prefix_column="p", template="qwen3", tools=[])
    clone = pickle.loads(pickle.dumps(parser))
    row = {"c": "<think>a</think>b<|im_end|>", "p": "<|im_start|>assistant\n"}
    assert (
        clone(row)
        == parser(row)
        == {"reasoning_content": "a", "tool_calls": [], "content": "b", "parse_error": None}
    )
    batch = clone.batch({"c": [row["c"]] * 3, "p": [row["p"]] * 3})
    assert batch["content"] == ["b"] * 3 and set(batch) == set(parser.columns)
