"""Stored generations at scale: parse a column of a Hugging Face dataset (or of any table) into columns.

`RowParser` is the row function: a picklable callable that turns one row (a mapping) into the
parsed columns; `RowParser.batch` does the same for a batch of rows (a mapping of column lists)
and `RowParser.table` for an Arrow batch (a `pyarrow.Table`, giving a `pyarrow.Table`).
`parse_dataset` maps `RowParser.table` over a map-style `datasets.Dataset` (in memory or
memory-mapped; `num_proc` for several processes): each batch reaches the parser as Arrow, only the
columns it reads become Python objects, the parsed columns go back to Arrow with their fixed
schema, and they are written (batch by batch, never gathered in memory) to a table of their own
that is joined to the dataset without copying it. A streaming `IterableDataset` is mapped lazily
with `RowParser.batch` (nothing is parsed before it is read).

Columns are fixed by the template, so every batch has the same Arrow schema: one column per
template field (text fields as strings; `tool_calls` as a list of `{id, type, function: {name,
arguments}}` with `arguments` as JSON text; any other field as JSON text), plus `parse_error`
(`None`, or `"<ExceptionType>: <message>"` for a row that cannot be parsed; nothing is dropped
silently). Text fields that the output did not contain are `None`.

Ray Data and Spark users call the same object (`batch` and `table` return the parsed columns
only)::

    parser = RowParser(column="completion", prefix_column="prompt", template="qwen3")
    ray_ds.map(parser)                                    # row by row, or
    ray_ds.map_batches(parser.table, batch_format="pyarrow")  # Arrow batches (fastest), or
    ray_ds.map_batches(parser.batch, batch_format="pandas")
    spark_df.rdd.map(lambda r: {**r.asDict(), **parser(r.asDict())}).toDF()
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._parser import parse_response as _parse_text
from .._template import Template, load_response_template

_REASONING = ("reasoning_content", "reasoning", "thinking")
_ERROR_MODES = ("record", "raise")
ERROR_COLUMN = "parse_error"


def _spec_of(template: Any, tokenizer: Any) -> dict:
    """The template as a dict (what a `RowParser` pickles), from a dict, a `Template`, a name or a tokenizer."""
    if template is None:
        if tokenizer is None:
            raise ValueError(
                "parse_dataset needs template= (a response_template dict, a chatparse.Template or a "
                "catalog name such as 'qwen3') or tokenizer= (its response_template, else the catalog's)"
            )
        from . import _tokenizer as T

        found = T.resolve_template(tokenizer, None, catalog=True, message=T.NO_TEMPLATE_PARSE)
        template = found
    if isinstance(template, str):
        from .. import catalog

        return catalog.get(template)
    if isinstance(template, Template):
        return template.spec
    if isinstance(template, Mapping):
        load_response_template(dict(template))  # validate now, not in a worker
        return dict(template)
    raise TypeError(
        f"template must be a dict, a chatparse.Template or a catalog name, not {type(template).__name__}"
    )


def _kinds(spec: dict) -> dict[str, str]:
    """Output column kind per message key: `"text"`, `"calls"` or `"json"` (the role is left out)."""
    fields = spec.get("fields") or {}
    out: dict[str, str] = {}
    for name, f in fields.items():
        f = f if isinstance(f, Mapping) else {}
        if name == "tool_calls":
            out[name] = "calls"
        elif (
            f.get("content", "text") == "text"
            and "transform" not in f
            and (not f.get("repeats") or f.get("join") is not None)
        ):
            out[name] = "text"
        else:
            out[name] = "json"
    for key in spec.get("defaults") or {}:
        if key != "role" and key not in out:
            out[key] = "json"
    return out


_encode_json = json.JSONEncoder(ensure_ascii=False).encode  # = json.dumps(v, ensure_ascii=False), built once


def _json(value: Any) -> str:
    return _encode_json(value)


def _call_row(call: Any) -> dict[str, Any]:
    if not isinstance(call, Mapping):
        return {"id": None, "type": "function", "function": {"name": "", "arguments": _json(call)}}
    fn = call.get("function")
    fn = fn if isinstance(fn, Mapping) else {}
    cid = call.get("id")
    return {
        "id": cid if isinstance(cid, str) else (None if cid is None else str(cid)),
        "type": str(call.get("type", "function")),
        "function": {
            "name": str(fn.get("name", "")),
            "arguments": _json(fn.get("arguments", {})),
        },
    }


class RowParser:
    """Parse the generation in one row into columns (picklable: for `datasets`, Ray Data, Spark).

    * `column`: the generated text, or token ids (then `tokenizer=` decodes them, special tokens
      kept);
    * the prompt: `prefix_column=` (text or ids per row) or a fixed `prefix=` (`""` opts out);
      with neither, a catalog template (given by name) uses its entry's generation prompt;
    * the template: `template=` (a dict, a `chatparse.Template`, a catalog name), else
      `tokenizer=`'s (`response_template_for`);
    * `tools=` (one list for every row) or `tools_column=` (a list, or its JSON text, per row);
    * `column_prefix=` names the output columns (`"parsed_"` gives `parsed_content`, ...);
    * `on_error="record"` (the default) puts the error in `parse_error`; `"raise"` raises it
      with the row named.

    >>> parser = RowParser(column="out", prefix="", template="qwen3")
    >>> parser({"out": "<think>hm</think>Hi<|im_end|>"})
    {'reasoning_content': 'hm', 'tool_calls': [], 'content': 'Hi', 'parse_error': None}
    """

    def __init__(
        self,
        *,
        column: str,
        prefix_column: str | None = None,
        prefix: str | None = None,
        template: Any = None,
        tokenizer: Any = None,
        tools: Sequence[dict | Callable] | None = None,
        tools_column: str | None = None,
        column_prefix: str = "",
        on_error: str = "record",
    ) -> None:
        if on_error not in _ERROR_MODES:
            raise ValueError(f"on_error must be one of {_ERROR_MODES}, got {on_error!r}")
        if prefix_column is None and prefix is None and isinstance(template, str):
            from .. import catalog

            prefix = catalog.describe(template)["generation_prompt"]  # as `chatparse parse --model`
        if prefix_column is None and prefix is None:
            raise ValueError(
                "parse_dataset requires prefix_column= (the prompt of each row) or prefix= (one prompt "
                "for every row), because chat templates often pre-write part of the assistant message "
                '(e.g. an opening `<think>` tag); pass prefix="" to opt out'
            )
        if prefix_column is not None and prefix is not None:
            raise ValueError("give prefix_column= or prefix=, not both")
        if tools is not None and tools_column is not None:
            raise ValueError("give tools= or tools_column=, not both")
        self.column = column
        self.prefix_column = prefix_column
        self.prefix = prefix
        self.spec = _spec_of(template, tokenizer)
        self.tokenizer = tokenizer
        self.tools = list(tools) if tools is not None else None
        self.tools_column = tools_column
        self.column_prefix = column_prefix
        self.on_error = on_error
        self.kinds = _kinds(self.spec)
        self._template: Template | None = None
        self._schema: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_template"] = None  # compiled again in each worker
        state["_schema"] = None
        return state

    @property
    def columns(self) -> list[str]:
        """The names of the output columns, in order."""
        p = self.column_prefix
        return [p + k for k in self.kinds] + [p + ERROR_COLUMN]

    def features(self) -> Any:
        """The output columns as `datasets.Features` (imports `datasets`)."""
        from datasets import Features, List, Value

        call = {
            "id": Value("string"),
            "type": Value("string"),
            "function": {"name": Value("string"), "arguments": Value("string")},
        }
        out: dict[str, Any] = {}
        for key, kind in self.kinds.items():
            out[self.column_prefix + key] = List(call) if kind == "calls" else Value("string")
        out[self.column_prefix + ERROR_COLUMN] = Value("string")
        return Features(out)

    # -- parsing -------------------------------------------------------------------------------

    def _compiled(self) -> Template:
        if self._template is None:
            self._template = load_response_template(self.spec)
        return self._template

    def _text(self, value: Any, what: str) -> str:
        if isinstance(value, str):
            return value
        if value is None:
            raise ValueError(f"{what} is empty (None)")
        if type(value) is float and value != value:  # pandas' missing value (Ray Data, Spark batches)
            raise ValueError(f"{what} is empty (NaN)")
        if self.tokenizer is None:
            raise TypeError(
                f"{what} holds {type(value).__name__}, not text; pass tokenizer= to decode token ids"
            )
        decoded = self.tokenizer.decode(value)
        if not isinstance(decoded, str):
            raise ValueError(f"{what} holds a batch of sequences; expected one sequence per row")
        return decoded

    def _texts(self, values: Sequence[Any], name: str) -> list[Any]:
        """A column as text: each entry a `str`, or the exception that `_text` raises for that row.

        Token ids are decoded in one `batch_decode` call per batch (the tokenizer's batched decode);
        an entry that is not a flat list of ids, or a batch the tokenizer rejects, is decoded row by row
        so that each row gets its own error.
        """
        what = f"column {name!r}"
        out: list[Any] = list(values)
        ids = [i for i, v in enumerate(out) if type(v) is not str]
        if not ids:
            return out
        flat = [i for i in ids if type(out[i]) is list and (not out[i] or type(out[i][0]) is int)]
        if flat and self.tokenizer is not None and hasattr(self.tokenizer, "batch_decode"):
            try:
                decoded = self.tokenizer.batch_decode([out[i] for i in flat])
            except Exception:  # noqa: BLE001 - decoded row by row below, with each row's own error
                decoded = None
            if isinstance(decoded, list) and len(decoded) == len(flat):
                done = set()
                for i, text in zip(flat, decoded):
                    if isinstance(text, str):
                        out[i] = text
                        done.add(i)
                ids = [i for i in ids if i not in done]
        for i in ids:
            try:
                out[i] = self._text(out[i], what)
            except (ValueError, TypeError, KeyError, AttributeError) as e:
                out[i] = e
        return out

    def _tools(self, value: Any) -> Any:
        if isinstance(value, str):
            value = json.loads(value) if value.strip() else None
        return list(value) if value else None

    def message(self, row: Mapping[str, Any]) -> dict:
        """The parsed message of one row (raises as `chatparse.parse_response` does)."""
        text = self._text(row[self.column], f"column {self.column!r}")
        if self.prefix_column is not None:
            prefix = self._text(row[self.prefix_column], f"column {self.prefix_column!r}")
        else:
            assert self.prefix is not None
            prefix = self.prefix
        tools = self.tools if self.tools_column is None else self._tools(row[self.tools_column])
        return _parse_text(text, self._compiled(), prefix=prefix, tools=tools)

    def columns_of(self, message: Mapping[str, Any] | None, error: str | None) -> dict[str, Any]:
        """The output columns for a parsed message (or for a row whose parse failed)."""
        p = self.column_prefix
        out: dict[str, Any] = {}
        for key, kind in self.kinds.items():
            value = message.get(key) if message is not None else None
            out[p + key] = _cell(kind, value)
        out[p + ERROR_COLUMN] = error
        return out

    def __call__(self, row: Mapping[str, Any], index: int | None = None) -> dict[str, Any]:
        """The output columns for one row."""
        try:
            message = self.message(row)
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            if self.on_error == "raise":
                where = f"row {index}" if index is not None else "row"
                raise type(e)(f"{where}: {e}") from e
            return self.columns_of(None, f"{type(e).__name__}: {e}")
        return self.columns_of(message, None)

    def batch(
        self, batch: Mapping[str, Sequence[Any]], indices: Sequence[int] | None = None
    ) -> dict[str, list]:
        """The output columns for a batch (a mapping of equally long column sequences).

        The same columns as calling the parser on each row, computed column-wise: token ids are
        decoded once per batch, the template is compiled once per process, and each row's values go
        straight into the output lists.
        """
        texts = self._texts(batch[self.column], self.column)
        n_rows = len(texts)
        if self.prefix_column is not None:
            prefixes: Sequence[Any] = self._texts(batch[self.prefix_column], self.prefix_column)
        else:
            prefixes = [self.prefix] * n_rows
        tools_in = None if self.tools_column is None else list(batch[self.tools_column])
        template = self._compiled()
        kinds = list(self.kinds.items())
        lists: list[list] = [[] for _ in kinds]
        errors: list[str | None] = []
        for i in range(n_rows):
            try:
                text, prefix = texts[i], prefixes[i]
                if isinstance(text, Exception):
                    raise text
                if isinstance(prefix, Exception):
                    raise prefix
                tools = self.tools if tools_in is None else self._tools(tools_in[i])
                message = _parse_text(text, template, prefix=prefix, tools=tools)
            except (ValueError, TypeError, KeyError, AttributeError) as e:
                if self.on_error == "raise":
                    where = f"row {indices[i]}" if indices is not None else "row"
                    raise type(e)(f"{where}: {e}") from e
                for (_, kind), column in zip(kinds, lists):
                    column.append([] if kind == "calls" else None)
                errors.append(f"{type(e).__name__}: {e}")
                continue
            get = message.get
            for (key, kind), column in zip(kinds, lists):
                column.append(_cell(kind, get(key)))
            errors.append(None)
        p = self.column_prefix
        out = {p + key: column for (key, _), column in zip(kinds, lists)}
        out[p + ERROR_COLUMN] = errors
        return out

    def table(self, batch: Any, indices: Sequence[int] | None = None) -> Any:
        """The output columns for an Arrow batch (a `pyarrow.Table`), as a `pyarrow.Table`.

        What `parse_dataset` maps over a map-style dataset: only the columns the parser reads are
        converted to Python, and the output goes to Arrow with its fixed schema (no type inference).
        """
        import pyarrow as pa

        names = [self.column] + [c for c in (self.prefix_column, self.tools_column) if c is not None]
        cols = {n: batch.column(n).to_pylist() for n in names}
        out = self.batch(cols, indices)
        schema = self._arrow_schema()
        return pa.Table.from_arrays([pa.array(out[f.name], type=f.type) for f in schema], schema=schema)

    def _arrow_schema(self) -> Any:
        if getattr(self, "_schema", None) is None:
            self._schema = self.features().arrow_schema
        return self._schema


def _cell(kind: str, value: Any) -> Any:
    """One output cell: a message value in its column's representation."""
    if kind == "calls":
        return [_call_row(c) for c in value] if isinstance(value, list) else []
    if value is None:
        return None
    if kind == "text" and isinstance(value, str):
        return value
    return _encode_json(value)


def parse_dataset(
    dataset: Any,
    *,
    column: str,
    prefix_column: str | None = None,
    template: Any = None,
    tools: Sequence[dict | Callable] | None = None,
    num_proc: int | None = None,
    prefix: str | None = None,
    tokenizer: Any = None,
    tools_column: str | None = None,
    column_prefix: str = "",
    on_error: str = "record",
    batch_size: int = 1000,
    desc: str | None = "chatparse",
    **map_kwargs: Any,
) -> Any:
    """Add the parsed columns of `RowParser` to a `datasets` dataset.

    `dataset` is a `Dataset` (in memory or memory-mapped from Arrow files: the output is written to
    the cache batch by batch, with a progress bar), an `IterableDataset` (streaming: parsed lazily as
    it is iterated; `num_proc` does not apply), or a `DatasetDict` / `IterableDatasetDict` (every
    split). The arguments are `RowParser`'s, plus `num_proc`, `batch_size`, `desc` and any other
    keyword of `map` (`cache_file_name`, `keep_in_memory`, ...). Output columns that already exist
    raise a `ValueError` (choose a `column_prefix`).

    >>> from datasets import Dataset
    >>> ds = Dataset.from_dict({"out": ["<think>a</think>b<|im_end|>", "c<|im_end|>"]})
    >>> list(parse_dataset(ds, column="out", prefix="", template="qwen3", desc=None)["content"])
    ['b', 'c']
    """
    parser = RowParser(
        column=column,
        prefix_column=prefix_column,
        prefix=prefix,
        template=template,
        tokenizer=tokenizer,
        tools=tools,
        tools_column=tools_column,
        column_prefix=column_prefix,
        on_error=on_error,
    )
    return _map(dataset, parser, num_proc=num_proc, batch_size=batch_size, desc=desc, map_kwargs=map_kwargs)


def _staged(dataset: Any, parser: RowParser) -> Any:
    """The columns `parser` reads from an in-memory dataset, written once to an Arrow file in
    `datasets`' temporary cache directory (removed at exit) and memory-mapped from there.

    `datasets` sends each worker of a multi-process `map` its shard of an in-memory table by
    pickling it: that cost as much CPU as the parse itself (`num_proc=2` ran slower than 1). A
    memory-mapped shard is sent as a file path; the workers' outputs are written beside it."""
    import os
    import uuid

    import pyarrow as pa
    from datasets import Dataset
    from datasets.fingerprint import get_temporary_cache_files_directory

    needed = [parser.column] + [c for c in (parser.prefix_column, parser.tools_column) if c is not None]
    source = dataset.select_columns(list(dict.fromkeys(needed)))
    table = source.with_format("arrow")[:]  # one `take` when the dataset has an indices mapping
    path = os.path.join(get_temporary_cache_files_directory(), f"chatparse-input-{uuid.uuid4().hex}.arrow")
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return Dataset.from_file(path)


def _map(
    dataset: Any, parser: RowParser, *, num_proc: Any, batch_size: int, desc: Any, map_kwargs: dict
) -> Any:
    kind = {c.__name__ for c in type(dataset).__mro__}
    if "DatasetDict" in kind or "IterableDatasetDict" in kind:
        out = {
            split: _map(
                ds, parser, num_proc=num_proc, batch_size=batch_size, desc=desc, map_kwargs=map_kwargs
            )
            for split, ds in dataset.items()
        }
        return type(dataset)(out)
    if "Dataset" not in kind and "IterableDataset" not in kind:
        raise TypeError(
            f"parse_dataset takes a datasets Dataset, IterableDataset or DatasetDict, not {type(dataset).__name__}"
        )
    streaming = "IterableDataset" in kind
    existing = dataset.column_names
    if existing is not None:
        needed = [parser.column] + [c for c in (parser.prefix_column, parser.tools_column) if c is not None]
        for name in needed:
            if name not in existing:
                raise ValueError(f"the dataset has no column {name!r} (columns: {', '.join(existing)})")
        clash = [c for c in parser.columns if c in existing]
        if clash:
            raise ValueError(
                f"parse_dataset would overwrite the column(s) {', '.join(clash)}; "
                "pass column_prefix= (e.g. 'parsed_') to name the output columns"
            )
    features = None
    if dataset.features is not None:
        from datasets import Features

        features = Features({**dataset.features, **parser.features()})
    kwargs: dict[str, Any] = dict(batched=True, with_indices=True, batch_size=batch_size, features=features)
    if streaming:
        if num_proc not in (None, 1):
            raise ValueError(
                "num_proc does not apply to a streaming (IterableDataset) dataset: it is parsed lazily as "
                "it is read; shard it (dataset.shard) or use a map-style Dataset for several processes"
            )
        return dataset.map(parser.batch, **kwargs, **map_kwargs)
    if num_proc == 1:
        num_proc = None  # datasets >= 4 forks one worker for num_proc=1; in-process is the same, cheaper
    # Map-style: the parser reads Arrow batches and returns an Arrow table of the parsed columns only
    # (no Python conversion of the other columns, no type inference, the input is not copied into
    # the output file); the parsed columns are then joined to the dataset without copying it.
    from datasets import concatenate_datasets

    remove = map_kwargs.pop("remove_columns", None)
    kwargs["features"] = parser.features()
    base = dataset.remove_columns(remove) if remove else dataset
    if len(dataset) == 0:  # `map` and `concatenate_datasets` drop the new columns of an empty dataset
        from datasets import Dataset, Features

        empty = Features({**base.features, **kwargs["features"]})
        joined = Dataset.from_dict({c: [] for c in empty}, features=empty)
    else:
        source = dataset
        if num_proc is not None and num_proc > 1 and not dataset.cache_files:
            source = _staged(dataset, parser)
        elif (
            num_proc is not None
            and num_proc > 1
            and map_kwargs.get("load_from_cache_file") is False
            and "new_fingerprint" not in map_kwargs
            and "cache_file_name" not in map_kwargs
        ):
            # `datasets` (5.2) maps in as many shards as an earlier run left cache files for, even
            # when told not to load them: after a one-process run, `num_proc=2` silently ran in one
            # process. A fingerprint of its own per process count keeps the shards asked for.
            from datasets.fingerprint import Hasher

            kwargs["new_fingerprint"] = Hasher.hash(
                [source._fingerprint, "chatparse.parse_dataset", parser, batch_size, num_proc]
            )
        parsed = source.with_format("arrow").map(
            parser.table, num_proc=num_proc, desc=desc, **kwargs, **map_kwargs
        )
        joined = concatenate_datasets([base.with_format(None), parsed.with_format(None)], axis=1)
    fmt = dataset.format  # kept, with the parsed columns added to its columns (as `map` does)
    columns = fmt["columns"]
    if columns is not None:
        columns = [c for c in columns if c in joined.column_names] + parser.columns
    return joined.with_format(
        fmt["type"], columns=columns, output_all_columns=fmt["output_all_columns"], **fmt["format_kwargs"]
    )
