"""`parse_dataset` / `RowParser` over real `datasets` objects: in memory, memory-mapped, streaming, `num_proc`."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("datasets", reason="needs the hf extra (datasets)")

from datasets import Dataset, DatasetDict, IterableDataset, load_from_disk  # noqa: E402

import chatparse  # noqa: E402
from chatparse import hf  # noqa: E402
from chatparse.hf import RowParser, parse_dataset  # noqa: E402

from ..core.strategies import prefixes_for, texts_for  # noqa: E402
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


# -- generated rows: every dataset kind and process count gives the plain loop's rows ----------------

GENERATED = ["QWEN_JSON", "GPT_OSS", "MISTRAL_V11"]
SHAPES = ("whole", "cut", "whitespace", "prose", "malformed", "none", "empty")


def generated_rows(name: str, n: int, seed: int = 12) -> tuple[dict[str, list], Counter]:
    """`n` rows from the family's recorded outputs, each reshaped the way real generations come:
    whole, cut off at any character, with whitespace runs, with prose around, with broken JSON, or
    missing (`None`, `""`). Returns the columns and how many rows of each shape were made."""
    rng = random.Random(seed)
    cases = family_cases(name)
    data: dict[str, list] = {"completion": [], "prompt": [], "tools": []}
    shapes: Counter = Counter()
    for _ in range(n):
        case = rng.choice(cases)
        text, shape = case["text"], rng.choice(SHAPES)
        if shape == "cut" and text:
            text = text[: rng.randrange(len(text))]
        elif shape == "whitespace" and text:
            at = rng.randrange(len(text) + 1)
            text = text[:at] + rng.choice([" " * 7, "\n\n\n", "\t \n "]) + text[at:]
        elif shape == "prose":
            text = "Sure, here is my answer. " + text + " (end)"
        elif shape == "malformed":
            text = text.replace("{", "{oops ", 1).replace('"', "", 1) if "{" in text else text + '{"a": '
        elif shape == "none":
            text = None
        elif shape == "empty":
            text = ""
        shapes[shape] += 1
        data["completion"].append(text)
        data["prompt"].append(case["prefix"])
        data["tools"].append(json.dumps(case["tools"]) if rng.random() < 0.8 else "")
    return data, shapes


@pytest.mark.parametrize("name", GENERATED)
def test_generated_rows_equal_the_plain_loop_for_every_dataset_kind_and_process_count(name, tmp_path):
    data, shapes = generated_rows(name, 1_500)
    assert min(shapes[s] for s in SHAPES) > 100  # every shape is well represented
    kwargs = dict(column="completion", prefix_column="prompt", template=FAMILIES[name], tools_column="tools")
    parser = RowParser(**kwargs)
    expected = loop(data, parser)
    errors = sum(row["parse_error"] is not None for row in expected)
    assert 0 < errors < len(expected)  # malformed rows are recorded, the rest parse
    assert sum(bool(row.get("tool_calls")) for row in expected) > 0

    memory = Dataset.from_dict(data)
    memory.save_to_disk(str(tmp_path / "ds"))
    mapped = load_from_disk(str(tmp_path / "ds"))
    assert mapped.cache_files and not memory.cache_files
    for kind, ds in (("in-memory", memory), ("memory-mapped", mapped)):
        for num_proc in (None, 1, 2):
            out = parse_dataset(ds, num_proc=num_proc, batch_size=400, desc=None, **kwargs)
            assert out.to_list() == expected, (kind, num_proc)
    stream = parse_dataset(mapped.to_iterable_dataset(num_shards=3), batch_size=400, **kwargs)
    assert isinstance(stream, IterableDataset)
    assert list(stream) == expected


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_batches_equal_rows_for_arbitrary_text(data):
    """`RowParser.table` (the Arrow path) and `RowParser.batch` give what the row function gives."""
    import pyarrow as pa

    name = data.draw(st.sampled_from(GENERATED))
    template = FAMILIES[name]
    texts = data.draw(st.lists(st.one_of(texts_for(template), st.none()), min_size=1, max_size=12))
    prefixes = data.draw(st.lists(prefixes_for(template), min_size=len(texts), max_size=len(texts)))
    parser = RowParser(column="c", prefix_column="p", template=template)
    rows = [parser({"c": t, "p": p}) for t, p in zip(texts, prefixes)]
    columns = {k: [r[k] for r in rows] for k in parser.columns}
    assert parser.batch({"c": texts, "p": prefixes}) == columns
    table = parser.table(pa.table({"c": pa.array(texts, pa.string()), "p": prefixes, "x": [1] * len(texts)}))
    assert table.schema == parser.features().arrow_schema
    assert table.to_pydict() == columns


def test_the_batched_arrow_path_is_the_one_taken(monkeypatch):
    """One `RowParser.table` call per batch (an Arrow table), no per-row call of the row function,
    one template compilation, one parse per row."""
    import pyarrow as pa

    import chatparse.hf._dataset as D

    data, _ = generated_rows("QWEN_JSON", 2_500)
    data["other"] = [[float(i)] * 50 for i in range(2_500)]  # a column the parser never reads
    ds = Dataset.from_dict(data)
    calls = Counter()
    real_table, real_call, real_load, real_parse = (
        RowParser.table,
        RowParser.__call__,
        D.load_response_template,
        D._parse_text,
    )

    def table(self, batch, indices=None):
        calls["table"] += 1
        assert isinstance(batch, pa.Table)  # Arrow in, Arrow out: no per-row dicts
        calls["rows in batches"] += batch.num_rows
        assert set(batch.column_names) >= {"completion", "prompt", "tools"}
        return real_table(self, batch, indices)

    monkeypatch.setattr(RowParser, "table", table)
    monkeypatch.setattr(
        RowParser, "__call__", lambda *a, **k: calls.update(["row call"]) or real_call(*a, **k)
    )
    monkeypatch.setattr(
        D, "load_response_template", lambda *a, **k: calls.update(["compile"]) or real_load(*a, **k)
    )
    monkeypatch.setattr(D, "_parse_text", lambda *a, **k: calls.update(["parse"]) or real_parse(*a, **k))
    out = parse_dataset(
        ds,
        column="completion",
        prefix_column="prompt",
        template="qwen3",
        tools_column="tools",
        batch_size=1000,
        desc=None,
    )
    assert len(out) == 2_500
    # every row with text is parsed exactly once; rows with None fail before the parse
    assert calls == Counter(
        {
            "table": 3,
            "rows in batches": 2_500,
            "compile": 1,
            "parse": sum(t is not None for t in data["completion"]),
        }
    )
    assert out["other"][7] == [7.0] * 50


def test_formats_indices_mappings_empty_datasets_and_remove_columns_are_kept():
    data, _ = generated_rows("QWEN_JSON", 300)
    data["n"] = list(range(300))
    ds = Dataset.from_dict(data)
    kwargs = dict(
        column="completion", prefix_column="prompt", template="qwen3", tools_column="tools", desc=None
    )
    parser = RowParser(**{k: v for k, v in kwargs.items() if k != "desc"})
    expected = loop(data, parser)
    # a shuffled / filtered dataset (an indices mapping over the table) gives its own rows, in its order
    shuffled = ds.shuffle(seed=3).filter(lambda r: r["n"] % 3 != 0)
    out = parse_dataset(shuffled, num_proc=2, **kwargs)
    assert out.to_list() == [expected[n] for n in shuffled["n"]]
    # the dataset's format is kept, with the parsed columns added to its columns (as map does)
    numpy = parse_dataset(ds.with_format("numpy", columns=["n"]), **kwargs)
    assert numpy.format["type"] == "numpy" and numpy.format["columns"] == ["n", *parser.columns]
    assert numpy[:2]["n"].tolist() == [0, 1] and "completion" not in numpy[:2]
    assert numpy.with_format(None).to_list() == expected
    # an empty dataset still gets the (typed) parsed columns
    empty = parse_dataset(ds.select([]), **kwargs)
    assert len(empty) == 0 and empty.column_names == ds.column_names + parser.columns
    assert empty.features["tool_calls"] == parser.features()["tool_calls"]
    # remove_columns= drops input columns from the result (they are still read for parsing)
    slim = parse_dataset(ds, remove_columns=["completion", "tools"], **kwargs)
    assert slim.column_names == ["prompt", "n", *parser.columns]
    assert slim.to_list() == [
        {k: v for k, v in r.items() if k not in ("completion", "tools")} for r in expected
    ]


def test_token_ids_are_decoded_once_per_batch(monkeypatch):
    tok = family_tokenizer("QWEN_JSON")
    data, _ = generated_rows("QWEN_JSON", 600)
    ids = [encode(tok, t) if t else None for t in data["completion"]]
    ds = Dataset.from_dict({"ids": ids, "prompt": data["prompt"]})
    kwargs = dict(column="ids", prefix_column="prompt", tokenizer=tok, template="qwen3")
    parser = RowParser(**kwargs)
    expected = [parser({"ids": i, "prompt": p}) for i, p in zip(ids, data["prompt"])]  # decode() per row
    calls = Counter()
    real_batch, real_one = type(tok).batch_decode, type(tok).decode

    def batch_decode(self, seqs, *a, **k):
        calls["batch_decode"] += 1
        calls["sequences"] += len(seqs)
        calls["inside"] += 1
        try:
            return real_batch(self, seqs, *a, **k)  # (transformers 5 loops over decode() in here)
        finally:
            calls["inside"] -= 1

    def decode(self, *a, **k):
        if not calls["inside"]:
            calls["decode per row"] += 1
        return real_one(self, *a, **k)

    monkeypatch.setattr(type(tok), "batch_decode", batch_decode)
    monkeypatch.setattr(type(tok), "decode", decode)
    out = parse_dataset(ds, batch_size=250, desc=None, **kwargs)
    assert out.select_columns(parser.columns).to_list() == expected
    with_ids = sum(i is not None for i in ids)
    assert calls["batch_decode"] == 3 and calls["sequences"] == with_ids and calls["decode per row"] == 0
    assert (
        sum(r["parse_error"] == "ValueError: column 'ids' is empty (None)" for r in expected)
        == len(ids) - with_ids
    )


def test_pandas_and_arrow_batches_as_ray_data_hands_them():
    """`map_batches(parser.batch, batch_format="pandas")` gets Series with any index;
    `batch_format="pyarrow"` gets tables: both give the row function's columns."""
    import pandas as pd
    import pyarrow as pa

    data, _ = generated_rows("QWEN_JSON", 60)
    parser = RowParser(column="completion", prefix_column="prompt", template="qwen3", tools_column="tools")
    expected = loop(data, parser)[20:]
    frame = pd.DataFrame(data).iloc[20:]  # a batch whose index starts at 20
    columns = {k: [r[k] for r in expected] for k in parser.columns}
    # Arrow keeps a missing text as null
    assert parser.table(pa.Table.from_pandas(frame, preserve_index=False)).to_pydict() == columns
    nan = [i for i, t in enumerate(data["completion"][20:]) if t is None]
    assert nan  # pandas keeps it as NaN: the same error, naming NaN
    for i in nan:
        columns["parse_error"][i] = "ValueError: column 'completion' is empty (NaN)"
    assert parser.batch(frame) == columns


def test_an_in_memory_dataset_reaches_several_workers_as_a_file_of_the_columns_read():
    """With `num_proc` > 1 an in-memory dataset is staged once as an Arrow file of the columns the
    parser reads (`datasets` would pickle the whole in-memory table to every worker), in the
    dataset's own row order (indices mappings included); the result is the plain loop's."""
    from chatparse.hf._dataset import _staged

    data, _ = generated_rows("QWEN_JSON", 120)
    data["n"] = list(range(120))
    data["other"] = ["x" * 50] * 120
    ds = Dataset.from_dict(data).shuffle(seed=5).select(range(0, 120, 2))
    kwargs = dict(column="completion", prefix_column="prompt", template="qwen3", tools_column="tools")
    parser = RowParser(**kwargs)
    staged = _staged(ds, parser)
    assert ds.cache_files == [] and len(staged.cache_files) == 1
    assert staged.column_names == ["completion", "prompt", "tools"]
    assert staged.to_list() == ds.select_columns(["completion", "prompt", "tools"]).to_list()
    out = parse_dataset(ds, num_proc=2, desc=None, **kwargs)
    expected = loop(data, parser)
    assert out.to_list() == [expected[n] for n in ds["n"]]


def test_num_proc_is_kept_after_a_run_with_another_process_count(tmp_path):
    """`datasets` maps in as many shards as an earlier run of the same map left cache files for,
    even with `load_from_cache_file=False` (5.2): `num_proc=2` after a one-process run ran in one
    process. parse_dataset keeps the process count asked for (two shard files), same rows."""
    data, _ = generated_rows("QWEN_JSON", 200)
    Dataset.from_dict(data).save_to_disk(str(tmp_path / "ds"))
    mapped = load_from_disk(str(tmp_path / "ds"))
    kwargs = dict(
        column="completion", prefix_column="prompt", template="qwen3", tools_column="tools", desc=None
    )
    one = parse_dataset(mapped, load_from_cache_file=False, **kwargs)
    two = parse_dataset(mapped, num_proc=2, load_from_cache_file=False, **kwargs)
    shards = [f["filename"] for f in two.cache_files if "_of_00002" in f["filename"]]
    assert len(shards) == 2, two.cache_files
    assert two.to_list() == one.to_list()
