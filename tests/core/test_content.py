"""Differential tests of `chatparse._content` against transformers 5.24.0 `content_parsers`.

For every input the reference accepts the result must be equal (type-strict, key order included);
where the reference raises `ValueError` (or `KeyError` for an undefined transform placeholder) the
same exception type and message are expected. Inputs on which the reference leaks another exception
type, and the extensions, are deliberate differences, each tested on its own below.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers.utils.chat_parsing import content_parsers as ref

from chatparse import _content
from chatparse._content import (
    CONTENT_PARSERS,
    STREAMABLE_PARSERS,
    apply_transform,
    compile_processor,
    compile_transform,
    is_dirty,
    parse_content,
    process_field,
    validate_transform_strings,
)
from tests.core.equality import same

from ..support.build import docstring_examples

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
QUICK = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ALLOWED = (ValueError, TypeError, KeyError)


# --------------------------------------------------------------------------------------------------
# Helpers


def outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", fn()
    except ValueError as e:  # JSONDecodeError included
        return "ValueError", str(e)
    except KeyError as e:
        return "KeyError", str(e)
    except Exception as e:  # noqa: BLE001 - the reference's leaks are what we classify here
        return "other:" + type(e).__name__, str(e)


def check(ours: Callable[[], Any], theirs: Callable[[], Any]) -> None:
    """Equal result, or the same ValueError/KeyError; a leak of any other exception type in the
    reference must be one of the allowed exception types here (the hardening)."""
    expected = outcome(theirs)
    got = outcome(ours)
    if expected[0].startswith("other:"):
        assert got[0] in ("ValueError", "KeyError", "other:TypeError"), (expected, got)
        return
    assert got[0] == expected[0], (expected, got)
    if got[0] == "ok":
        assert same(got[1], expected[1]), (expected[1], got[1])
    else:
        assert got[1] == expected[1]


def check_parser(text: str, name: str, args: dict[str, Any]) -> None:
    check(lambda: parse_content(text, name, args), lambda: ref.parse_content(text, name, args))


# --------------------------------------------------------------------------------------------------
# Strategies

WS = st.sampled_from(["", "", " ", "  ", "\n", "\n  ", "\t", "\r\n", "\u00a0", "\u2003"])
TRICKY_CHARS = list("ab \"\\:{},[]\n\x01\x02é<|>'«»sx1=\t") + ["\u00a0", "😀", "\ud800"]
tricky_text = st.text(alphabet=st.sampled_from(TRICKY_CHARS), max_size=12)
any_text = st.one_of(tricky_text, st.text(max_size=10))
strip_arg = st.fixed_dictionaries(
    {}, optional={"strip": st.one_of(st.booleans(), st.none(), st.sampled_from([0, 1, "", "no"]))}
)


def padded(s: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.tuples(WS, s, WS).map("".join)


NUMBER_EDGE = [
    str(2**53 - 1),
    str(2**53),
    str(2**53 + 1),
    str(-(2**53 - 1)),
    str(-(2**53)),
    str(-(2**53) - 1),
    "9007199254740993",
    "12345678901234567",
    "123456789012345678",
    "-1234567890123456",
    "1e400",
    "-1e400",
    "1e-400",
    "1.0",
    "-0",
    "-0.0",
    "01",
    "00",
    "1.",
    ".5",
    "-.5",
    "+1",
    "0x10",
    "1_000",
    "1e3",
    "1E+3",
    "2.5e-3",
    "inf",
    "nan",
    "NaN",
    "Infinity",
    "-Infinity",
    "١٢",
    "1,5",
]
numbers = st.one_of(
    st.sampled_from(NUMBER_EDGE),
    st.integers(-(2**64), 2**64).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.floats(allow_nan=False, allow_infinity=False).map(json.dumps),
)

# --------------------------------------------------------------------------------------------------
# text / int / float / bool


@FAST
@given(text=st.one_of(padded(any_text), padded(numbers)), args=strip_arg)
def test_scalar_parsers_match_reference(text: str, args: dict[str, Any]) -> None:
    for name in ("text", "int", "float", "bool"):
        check_parser(text, name, args)


@pytest.mark.parametrize(
    "text",
    [
        " 7 ",
        "1_000",
        "١٢",
        "1.5",
        "",
        "True",
        " TRUE ",
        "1",
        "0",
        "yes",
        "inf",
        "-nan",
        "1e3",
        "\u20037\u2003",
    ],
)
def test_scalar_parsers_examples(text: str) -> None:
    for name in ("text", "int", "float", "bool"):
        for args in ({}, {"strip": False}):
            check_parser(text, name, args)


# --------------------------------------------------------------------------------------------------
# json

DELIMS = [['<|"|>', '<|"|>'], ["«", "»"], ["<s>", "</s>"], ["'", "'"], ["", "!"]]
BARE_KEYS = ["a", "b_c", "é", "location", "content-type", "a.b", "$a", "key with space", "1", "_", "日本"]
LITERALS = ["true", "false", "null", "True", "None", "NaN", "Infinity", "-Infinity", "celsius", "'x'", "-.5"]


_delimited = st.tuples(st.sampled_from(DELIMS), tricky_text).map(lambda t: t[0][0] + t[1] + t[0][1])
_json_scalar = st.one_of(
    numbers,
    st.sampled_from(LITERALS),
    tricky_text.map(json.dumps),
    any_text.map(lambda s: json.dumps(s, ensure_ascii=False)),
    _delimited,
    st.sampled_from(['"a, b: c"', '"{x: 1}"', '"\\"k\\": 1"', '"<|\\"|>"', '"x\\u0001"']),
)
_json_key = st.one_of(
    tricky_text.map(json.dumps),
    st.sampled_from(BARE_KEYS),
    st.sampled_from(BARE_KEYS).map(json.dumps),
    _delimited,
)


def _json_containers(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    array = st.lists(st.tuples(WS, children, WS).map("".join), max_size=4).map(
        lambda xs: "[" + ",".join(xs) + "]"
    )
    member = st.tuples(WS, _json_key, WS, st.just(":"), WS, children, WS).map("".join)
    obj = st.lists(member, max_size=4).map(lambda xs: "{" + ",".join(xs) + "}")
    return st.one_of(array, obj)


JSON_BODIES = st.recursive(_json_scalar, _json_containers, max_leaves=10)


@st.composite
def json_texts(draw: st.DrawFn) -> str:
    body = draw(JSON_BODIES)
    text = draw(WS) + body + draw(WS)
    mutation = draw(st.sampled_from(["none", "none", "none", "cut", "insert", "append"]))
    if mutation == "cut" and text:
        text = text[: draw(st.integers(0, len(text) - 1))]
    elif mutation == "insert":
        at = draw(st.integers(0, len(text)))
        text = (
            text[:at] + draw(st.sampled_from(["\x01", "\x02", ",", ":", "}", '"', '<|"|>', "x"])) + text[at:]
        )
    elif mutation == "append":
        text += draw(st.sampled_from([" trailing", "}", "\n<|im_end|>", "\x010\x02"]))
    return text


json_args = st.fixed_dictionaries(
    {},
    optional={
        "unquoted_keys": st.booleans(),
        "string_delims": st.one_of(
            st.just([]), st.lists(st.sampled_from(DELIMS), min_size=1, max_size=2, unique_by=lambda d: d[0])
        ),
        "allow_non_json": st.booleans(),
        "strip": st.booleans(),
    },
)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=json_texts(), args=json_args)
def test_json_matches_reference(text: str, args: dict[str, Any]) -> None:
    check_parser(text, "json", args)


D12_ARGS = {"unquoted_keys": True, "string_delims": [['<|"|>', '<|"|>']]}


@pytest.mark.parametrize(
    "text",
    [
        "{ a : 1}",
        '{\n  location : <|"|>London<|"|>}',
        "{é:1}",
        "{a:1e3}",
        "{content-type:1}",
        "{a.b:1}",
        "{$a:1}",
        "{key with space:1.5e-05}",
        "{unit:celsius}",
        "{a:None}",
        "{a:True}",
        "{a:'x'}",
        "{a:1,}",
        "{a:-.5}",
        '{"s": "x, b: 1", c: 2}',
        '{a: <|"|>he said "hi"\\n<|"|>, b: [1, {c: 2}]}',
        '{a: "\\" , b: 1"}',
        "\x01",
        '<|"|>unterminated',
        "",
        "   ",
        "[1, 2",
        "NaN",
        '{"a": 1, "a": 2}',
    ],
)
def test_json_examples(text: str) -> None:
    for args in ({}, D12_ARGS, {**D12_ARGS, "allow_non_json": True}, {"unquoted_keys": True, "strip": False}):
        check_parser(text, "json", args)


def test_json_reference_accepts_two_character_string_delims() -> None:
    # `for open_d, close_d in string_delims` also unpacks a two-character string: keep accepting it.
    check_parser("{a: <x>}", "json", {"unquoted_keys": True, "string_delims": ["<>"]})
    check_parser('{"a": <x>}', "json", {"string_delims": [("<", ">")]})


# --------------------------------------------------------------------------------------------------
# xml-inline

TAG_PATTERNS = [
    r"<(?P<key>\w+)>(?P<value>.*?)</(?P=key)>",
    r"<parameter=(?P<key>[^>]+)>\n?(?P<value>.*?)\n?</parameter>",
    r"<arg_key>(?P<key>.*?)</arg_key>\s*<arg_value>(?P<value>.*?)</arg_value>",
    r"(?P<key>\w+)=(?P<value>\S*)",
    r"<(?P<key>\w+)/>",  # no value group: value is ""
    r"<c>(?P<value>.*?)</c>",  # no key group: ValueError only when something matches
    r"(?:<(?P<key>\w+)>)?x",  # key group not taking part: same ValueError
    r"^",  # zero-width, no key
]
VALUE_PARSERS: list[Any] = [
    None,
    {},
    {"name": "text"},
    {"name": "text", "args": {"strip": False}},
    {"name": "int"},
    {"name": "bool"},
    {"name": "json"},
    {"name": "json", "args": {"allow_non_json": True}},
    {"name": "kv-lines"},
    {"name": "xml-inline", "args": {"tag_pattern": r"\[(?P<key>\w)\|(?P<value>[^\]]*)\]"}},
]
XML_KEYS = ["a", "b", "city", "é", "x"]


@st.composite
def xml_texts(draw: st.DrawFn) -> str:
    pieces = []
    for _ in range(draw(st.integers(0, 5))):
        key = draw(st.sampled_from(XML_KEYS))
        value = draw(
            st.one_of(padded(numbers), padded(tricky_text), st.sampled_from(["[a|1]", '{"k": 1}', "k: v"]))
        )
        form = draw(st.integers(0, 4))
        if form == 0:
            pieces.append(f"<{key}>{value}</{key}>")
        elif form == 1:
            pieces.append(f"<parameter={key}>\n{value}\n</parameter>")
        elif form == 2:
            pieces.append(f"<arg_key>{key}</arg_key>\n<arg_value>{value}</arg_value>")
        elif form == 3:
            pieces.append(f"{key}={value.strip()}")
        else:
            pieces.append(f"<{key}/>")
        pieces.append(draw(st.one_of(WS, tricky_text)))
    return "".join(pieces)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=xml_texts(),
    pattern=st.sampled_from(TAG_PATTERNS),
    value_parser=st.sampled_from(VALUE_PARSERS),
    merge=st.sampled_from([None, True, False, 1]),
)
def test_xml_inline_matches_reference(text: str, pattern: str, value_parser: Any, merge: Any) -> None:
    args: dict[str, Any] = {"tag_pattern": pattern}
    if value_parser is not None:
        args["value_parser"] = value_parser
    if merge is not None:
        args["merge_duplicates"] = merge
    check_parser(text, "xml-inline", args)


def test_xml_inline_missing_tag_pattern() -> None:
    check_parser("<a>1</a>", "xml-inline", {})


def test_xml_inline_merge_duplicates_with_list_valued_first() -> None:
    args = {"tag_pattern": TAG_PATTERNS[0], "value_parser": {"name": "json"}, "merge_duplicates": True}
    check_parser("<a>[1]</a><a>2</a><a>[3]</a><b>1</b>", "xml-inline", args)


# --------------------------------------------------------------------------------------------------
# kv-lines


@st.composite
def kv_cases(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    line_sep = draw(st.sampled_from(["\n", ";", "\n\n", "||", "\r\n"]))
    kv_sep = draw(st.sampled_from([":", "=", ": ", "::", "->"]))
    lines = []
    for _ in range(draw(st.integers(0, 5))):
        key = draw(st.one_of(st.sampled_from(XML_KEYS), tricky_text))
        value = draw(st.one_of(padded(numbers), tricky_text, st.sampled_from(['{"k": 1}', "[1,2]", "a:b:c"])))
        sep = draw(st.sampled_from([kv_sep, kv_sep, " " + kv_sep + " ", "", ":"]))
        lines.append(draw(WS) + key + sep + value + draw(WS))
    args: dict[str, Any] = {}
    if line_sep != "\n" or draw(st.booleans()):
        args["line_sep"] = line_sep
    if kv_sep != ":" or draw(st.booleans()):
        args["kv_sep"] = kv_sep
    if draw(st.booleans()):
        args["strip"] = draw(st.booleans())
    vp = draw(st.sampled_from(VALUE_PARSERS[:8]))
    if vp is not None:
        args["value_parser"] = vp
    return line_sep.join(lines), args


@FAST
@given(case=kv_cases())
def test_kv_lines_matches_reference(case: tuple[str, dict[str, Any]]) -> None:
    text, args = case
    check_parser(text, "kv-lines", args)


@pytest.mark.parametrize("text", ["", "\n\n", "a: 1", "  \n a:1"])
@pytest.mark.parametrize("args", [{"kv_sep": ""}, {"line_sep": ""}, {"kv_sep": "", "strip": False}])
def test_kv_lines_empty_separators_match_reference(text: str, args: dict[str, Any]) -> None:
    check_parser(text, "kv-lines", args)


# --------------------------------------------------------------------------------------------------
# python-call-list

PCL_STRINGS = [
    r"'\x41'",
    r"'\a'",
    r"'\101'",
    "'a\nb'",
    "'a\rb'",
    r"'\ud800'",
    r"'\ud83d\ude00'",
    r"'\udc00'",
    r"'\ud83d'",
    r"'\ud83dx'",
    r"'\ud83d\u0041'",
    "'\ud800'",
    r'"\/"',
    r"'it\'s'",
    "'unterminated",
    r"'\N{DASH}'",
    "'\\\n'",
    r"'\U0001F600'",
    r"'\u00e9\t\b\f\n\r'",
    r"'\uZZZZ'",
    "'''",
    '"a\'b"',
    "'a\"b'",
    "'<|\"|>'",
    "'f(a=1)]'",
]
PCL_NAMES = ["f", "get_weather", "grocery.order", "a.b-c", "a..b", "x.", "_x", "1f", "f-", "é", "True", "A9_"]
PCL_ATOMS = [
    "True",
    "true",
    "False",
    "false",
    "None",
    "null",
    "TRUE",
    "none",
    "x",
    "(1, 2)",
    "{1, 2}",
    "1+2",
    "",
]


def single_quoted(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


PCL_WS = st.sampled_from(["", "", " ", "\n", "\t", "\r\n", "  \n  "])
PCL_INVALID_STRINGS = {
    r"'\x41'",
    r"'\a'",
    r"'\101'",
    "'a\nb'",
    "'a\rb'",
    r"'\ud800'",
    r"'\udc00'",
    r"'\ud83d'",
}
PCL_INVALID_STRINGS |= {r"'\ud83dx'", r"'\ud83d\u0041'", "'\ud800'", "'unterminated", r"'\N{DASH}'", "'\\\n'"}
PCL_INVALID_STRINGS |= {r"'\U0001F600'", r"'\uZZZZ'", "'''"}
PCL_VALID_STRINGS = [s for s in PCL_STRINGS if s not in PCL_INVALID_STRINGS]


def pcl_values(
    ws: st.SearchStrategy[str],
    strings: st.SearchStrategy[str],
    atoms: st.SearchStrategy[str],
    sep: st.SearchStrategy[str],
) -> st.SearchStrategy[str]:
    scalar = st.one_of(strings, atoms)

    def containers(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        array = st.builds(lambda xs, s: "[" + s.join(xs) + "]", st.lists(children, max_size=3), sep)
        member = st.builds(lambda k, w, v: k + w + ":" + w + v, strings, ws, children)
        obj = st.builds(lambda xs, s: "{" + s.join(xs) + "}", st.lists(member, max_size=3), sep)
        return st.one_of(array, obj)

    return st.recursive(scalar, containers, max_leaves=6)


_valid_strings = st.one_of(
    tricky_text.map(single_quoted),
    any_text.map(json.dumps),
    any_text.map(lambda s: json.dumps(s, ensure_ascii=False)),
    st.sampled_from(PCL_VALID_STRINGS),
)
_valid_sep = st.tuples(PCL_WS, st.just(","), PCL_WS).map("".join)
PCL_VALID_VALUES = pcl_values(
    PCL_WS,
    _valid_strings,
    st.one_of(
        st.sampled_from(PCL_ATOMS[:6]),
        st.integers(-(2**53 - 1), 2**53 - 1).map(str),
        st.floats(allow_nan=False, allow_infinity=False).map(json.dumps),
        st.sampled_from(["0", "-0", "1e3", "1.5E-3", "9007199254740991", "-9007199254740991", "1e308"]),
    ),
    _valid_sep,
)
_any_sep = st.tuples(WS, st.sampled_from([",", ",", ",", ", ", ";", "", ",,"]), WS).map("".join)
PCL_ANY_VALUES = pcl_values(
    WS,
    st.one_of(_valid_strings, st.sampled_from(PCL_STRINGS), st.sampled_from(["k", "1"])),
    st.one_of(numbers, st.sampled_from(PCL_ATOMS)),
    _any_sep,
)


@st.composite
def pcl_texts(draw: st.DrawFn) -> str:
    """Mostly well-formed call lists (so that successes are compared too), some malformed ones."""
    valid = draw(st.integers(0, 9)) < 7
    ws, sep = (PCL_WS, _valid_sep) if valid else (WS, _any_sep)
    value = PCL_VALID_VALUES if valid else PCL_ANY_VALUES
    names = st.sampled_from(PCL_NAMES[:5] + ["_x", "A9_"] if valid else PCL_NAMES)
    calls = []
    for _ in range(draw(st.integers(0, 3))):
        kwargs = []
        for keyword in draw(st.lists(st.sampled_from(["a", "b", "city", "x_1"]), max_size=3, unique=valid)):
            if not valid and draw(st.integers(0, 9)) == 0:
                kwargs.append(draw(value))  # positional
            else:
                kwargs.append(keyword + draw(ws) + "=" + draw(ws) + draw(value))
        trailing = "," if not valid and draw(st.integers(0, 4)) == 0 else ""
        calls.append(
            draw(names) + draw(ws) + "(" + draw(ws) + draw(sep).join(kwargs) + trailing + draw(ws) + ")"
        )
    trailing = "," if not valid and draw(st.integers(0, 4)) == 0 else ""
    text = draw(ws) + "[" + draw(ws) + draw(sep).join(calls) + trailing + draw(ws) + "]" + draw(ws)
    if valid:
        return text
    mutation = draw(st.sampled_from(["none", "cut", "insert", "append"]))
    if mutation == "cut" and text:
        text = text[: draw(st.integers(0, len(text) - 1))]
    elif mutation == "insert":
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(list("[](){},=:'\"\\ \n\x0b") + ["\u00a0"])) + text[at:]
    elif mutation == "append":
        text += draw(st.sampled_from([" x", "]", "\n", "\u00a0"]))
    return text


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=pcl_texts())
def test_python_call_list_matches_reference(text: str) -> None:
    check_parser(text, "python-call-list", {})


@FAST
@given(
    text=st.text(alphabet=st.sampled_from(list("[](){},=:'\"\\ \nafT1.-e_u0d8") + ["\u00a0"]), max_size=30)
)
def test_python_call_list_fuzz_matches_reference(text: str) -> None:
    check_parser(text, "python-call-list", {})


@pytest.mark.parametrize("depth", [1, 99, 100, 101, 150])
@pytest.mark.parametrize("kind", ["[]", '{"k":}'])
def test_python_call_list_nesting_limit_matches_reference(depth: int, kind: str) -> None:
    opener, closer = (kind[:-1], kind[-1]) if kind == "[]" else ('{"k":', "}")
    inner = opener * depth + "1" + closer * depth
    check_parser(f"[f(a={inner})]", "python-call-list", {})


@pytest.mark.parametrize("number", NUMBER_EDGE)
def test_python_call_list_numbers_match_reference(number: str) -> None:
    check_parser(f"[f(a={number}, b=[{number}])]", "python-call-list", {})


def test_python_call_list_repeated_names_match_reference() -> None:
    check_parser("[f(a=1, a=2)]", "python-call-list", {})
    check_parser('[f(a={"k": 1, "k": 2})]', "python-call-list", {})
    check_parser("[f(), g.h-i(x=[1, {'y': null}], z='\\u00e9')]", "python-call-list", {})


# --------------------------------------------------------------------------------------------------
# Transforms and process_field

SCOPE_NAMES = ["content", "a", "b", "name", "arguments"]
scope_values = st.recursive(
    st.one_of(st.integers(), st.text(max_size=3), st.none(), st.booleans()),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(SCOPE_NAMES + ["é"]), c, max_size=3),
    max_leaves=8,
)
placeholders = st.lists(st.sampled_from(SCOPE_NAMES + ["é", "0", "x"]), min_size=1, max_size=3).map(
    lambda p: "{" + ".".join(p) + "}"
)
transforms = st.recursive(
    st.one_of(
        placeholders,
        st.sampled_from(["{}", "{ x }", "function", "{a", "a}", "{a.}", "{content}x", "", "{a..b}", "{-}"]),
        st.integers(),
        st.none(),
        st.booleans(),
        st.floats(allow_nan=False),
    ),
    lambda c: (
        st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(["{content}", "type", "function", "a"]), c)
    ),
    max_leaves=8,
)


@FAST
@given(transform=transforms, scope=st.dictionaries(st.sampled_from(SCOPE_NAMES), scope_values, max_size=4))
def test_apply_transform_matches_reference(transform: Any, scope: dict[str, Any]) -> None:
    check(lambda: apply_transform(transform, scope), lambda: ref._apply_transform(transform, scope))


@FAST
@given(
    transform=st.recursive(
        st.text(alphabet=st.sampled_from(list("{}a._ x-é")), max_size=8) | st.integers(),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=2), c, max_size=3),
        max_leaves=6,
    )
)
def test_validate_transform_strings_matches_reference(transform: Any) -> None:
    check(
        lambda: validate_transform_strings("Field 'x'", transform),
        lambda: ref.validate_transform_strings("Field 'x'", transform),
    )


FIELD_CASES: list[tuple[str, dict[str, Any], Any, bool]] = [
    ("json", {}, None, False),
    ("text", {}, None, False),
    ("text", {"strip": False}, None, False),
    ("json", {"close_outside_strings": True}, {"type": "function", "function": "{content}"}, False),
    ("json", {}, {"type": "function", "function": "{content}"}, False),
    ("json", {}, {"function": {"name": "{content.name}", "arguments": "{content.arguments}"}}, False),
    ("json", {}, {"name": "{name}", "arguments": "{arguments}", "id": "{cid}"}, True),
    ("json", {}, "{content}", False),
    ("json", {}, ["{content}", "{content.name}"], False),
    (
        "python-call-list",
        {},
        {"type": "function", "function": {"name": "{name}", "arguments": "{arguments}"}},
        True,
    ),
    ("text", {}, {"name": "{cid}", "arguments": "{content}"}, False),
    ("text", {}, {"x": "{missing}"}, False),
    ("kv-lines", {}, {"function": {"name": "{fn}", "arguments": "{content}"}}, False),
    ("json", {}, {"x": "{content}"}, True),
    # xml-inline with a tag pattern alone (compiled: `_plain_xml_inline`), qwen3_xml's and one whose
    # key group can stay out of a match (the generic path's error)
    (
        "xml-inline",
        {
            "tag_pattern": "<parameter=(?P<key>[^>\\n]+)>\\n?(?P<value>.*?)(?:\\n?</parameter>(?=\\s{0,64}"
            "(?:<parameter=|</function>|\\Z))|\\n(?=<parameter=|</function>)|\\n?\\Z)"
        },
        {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
        False,
    ),
    ("xml-inline", {"tag_pattern": "<(?:(?P<key>\\w+)|!)>(?P<value>[^<]*)"}, None, False),
    # a value group that can stay out of a match (None there, not ""): the `finditer` scan
    ("xml-inline", {"tag_pattern": "<(?P<key>\\w+)>(?P<value>[^<]+)?"}, None, False),
    # both always set but not the groups (key, value) in that order: `findall`'s tuples reordered
    ("xml-inline", {"tag_pattern": "(?P<value>[^<]*)<(?P<key>\\w+)>"}, None, False),
]


@FAST
@given(
    case=st.sampled_from(FIELD_CASES),
    body=st.one_of(
        json_texts(),
        st.sampled_from(
            [
                '{"name": "f", "arguments": {"a": 1}}',
                '[{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": {}}]',
                "[1, 2]",
                "[f(a=1), g()]",
                "a: 1\nb: 2",
                '[{"content": 1, "name": "n", "arguments": null}]',
                '{"name": {"x": 1}}',
                "<parameter=city>\nParis\n</parameter>\n<parameter=days>\n0\n</parameter>\n",
                "<parameter=a>\n1\n<parameter=a>\n2\n</function>",
                "<a>1<b>2<!>3<a>4",
            ]
        ),
    ),
    captures=st.dictionaries(
        st.sampled_from(["cid", "fn", "name", "content"]), st.text(max_size=3), max_size=3
    ),
)
def test_process_field_matches_reference(
    case: tuple[str, dict[str, Any], Any, bool], body: str, captures: dict[str, str]
) -> None:
    check_field(case, body, captures)


def check_field(case: tuple[str, dict[str, Any], Any, bool], body: str, captures: dict[str, str]) -> None:
    """`process_field` of the field `case` describes, generic and compiled, against the reference."""
    content, content_args, transform, each = case
    field = SimpleNamespace(
        name="tool_calls",
        content=content,
        content_args=content_args,
        transform=transform,
        transform_each=each,
    )
    check(lambda: process_field(body, field, captures), lambda: ref.process_field(body, field, captures))
    # the compiled value path of a loaded field (`compile_processor`) gives the same outcome
    compiled = SimpleNamespace(
        **vars(field), process=compile_processor("tool_calls", content, content_args, transform, each)
    )
    check(lambda: process_field(body, compiled, captures), lambda: ref.process_field(body, field, captures))


_XML_BODIES = [
    "<parameter=city>\nParis\n</parameter>\n<parameter=days>\n0\n</parameter>\n",
    "<parameter=a>\n1\n<parameter=a>\n2\n</function>",
    "<parameter=a>\n1",
    "",
    "no tag",
    "<a>1<b>2<!>3<a>4",
    "<a>1<b>2",
    "<parameter=a>\n\n</parameter>\n<parameter=b>\n</parameter>",
    "<a><b>2<c>",
]


def test_always_set_groups() -> None:
    # `_plain_xml_inline` scans with `findall` (its "" for a group that took no part would read as
    # an empty value) only when both groups take part in every match.
    from chatparse._content import _always_set

    names = ("key", "value")
    assert _always_set("<(?P<key>a)>(?:(?P<value>b))", names)
    assert _always_set("<(?>(?P<key>a+))>(?P<value>.*?)(?:x|\\Z)", names)
    assert not _always_set("(?:<(?P<key>a)>|x)(?P<value>b)", names)
    assert not _always_set("<(?P<key>a)>(?P<value>b)?", names)
    assert not _always_set("<(?P<key>a)>(?:(?P<value>b))*", names)
    assert not _always_set("<(?P<key>a)>(?=(?P<value>b))", names)
    assert not _always_set("<(?P<key>a)>", names)


@pytest.mark.parametrize("case", [c for c in FIELD_CASES if c[0] == "xml-inline"])
@pytest.mark.parametrize("body", _XML_BODIES)
def test_compiled_xml_inline_matches_reference(
    case: tuple[str, dict[str, Any], Any, bool], body: str
) -> None:
    # The compiled tag scan (`_plain_xml_inline`) on every xml body (the property test above draws
    # them rarely): the reference's values, and its errors through the generic path.
    assert compile_processor("tool_calls", *case) is not None
    check_field(case, body, {"name": "f"})


def test_compiled_templates_pickle() -> None:
    # Templates pickle (`datasets` workers, multiprocessing): the compiled value path pickles as
    # the field description it is built from, and parses the same after the round trip.
    import pickle

    from chatparse import catalog, load_response_template, parse_response

    text = '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'
    for name in ("qwen3", "kimi_k2", "deepseek_v3"):
        t = load_response_template(catalog.get(name))
        assert any(f.process is not None for f in t.fields.values())
        copy = pickle.loads(pickle.dumps(t))
        assert [f.process is not None for f in copy.fields.values()] == [
            f.process is not None for f in t.fields.values()
        ]
        assert parse_response(text, copy, prefix="") == parse_response(text, t, prefix="")


def _related(transform: Any) -> bool:
    """Whether `transform` places two paths one of which is a prefix of the other."""
    found: list[tuple[str, ...]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
        elif isinstance(node, str) and (m := regex.fullmatch(r"\{(\w+(?:\.\w+)*)\}", node)):
            found.append(tuple(m.group(1).split(".")))

    walk(transform)
    return any(p[: len(q)] == q or q[: len(p)] == p for i, p in enumerate(found) for q in found[:i])


@FAST
@given(transform=transforms, scope=st.dictionaries(st.sampled_from(SCOPE_NAMES), scope_values, max_size=4))
def test_compiled_transform_matches_apply_transform(transform: Any, scope: dict[str, Any]) -> None:
    compiled = compile_transform(transform)
    # declined exactly when two placed paths are related (the generic code copies there)
    assert (compiled is None) == _related(transform)
    if compiled is None:
        return
    expected = outcome(lambda: apply_transform(transform, scope))
    got = outcome(lambda: compiled(scope))
    assert got[0] == expected[0] and same(got[1], expected[1]), (expected, got)
    if got[0] == "ok":
        # containers of the transform are rebuilt on every call, never shared with it
        again = compiled(scope)
        assert not isinstance(transform, (dict, list)) or (again is not transform and again is not got[1])


def test_registry_matches_reference() -> None:
    assert list(CONTENT_PARSERS) == list(ref.CONTENT_PARSERS)
    assert STREAMABLE_PARSERS == ref.STREAMABLE_PARSERS


# --------------------------------------------------------------------------------------------------
# Extensions (response-template.md §2.10, transformers.js)


@pytest.mark.parametrize(
    ("text", "args", "expected"),
    [
        (" <response> hi </response> ", {"strip_prefix": "<response>", "strip_suffix": "</response>"}, "hi"),
        ("<response>hi", {"strip_prefix": "<response>"}, "hi"),
        ("hi</response>\n", {"strip_suffix": "</response>"}, "hi"),
        ("no wrapper", {"strip_prefix": "<response>", "strip_suffix": "</response>"}, "no wrapper"),
        ("  x  ", {"strip_prefix": "", "strip_suffix": ""}, "x"),
        ("  x  ", {"strip_prefix": None}, "x"),
        # strip off: no stripping before or after, so a leading space hides the prefix
        (" <r>x</r>", {"strip": False, "strip_prefix": "<r>", "strip_suffix": "</r>"}, " <r>x"),
        ("<r> x </r>", {"strip": False, "strip_prefix": "<r>", "strip_suffix": "</r>"}, " x "),
        # only one occurrence is removed
        ("<r><r>x", {"strip_prefix": "<r>"}, "<r>x"),
        # prefix removed first, then the suffix is looked for in what is left
        ("<r>", {"strip_prefix": "<r>", "strip_suffix": "r>"}, ""),
    ],
)
def test_extension_text_strip_prefix_suffix(text: str, args: dict[str, Any], expected: str) -> None:
    # Extension (§2.10): `text` strip_prefix / strip_suffix.
    assert parse_content(text, "text", args) == expected


def test_extension_strip_prefix_only_for_text_parser() -> None:
    # Extension (§2.10) applies to `text` only; int/float/bool/kv-lines ignore it, as the reference does.
    args = {"strip_prefix": "<", "strip_suffix": ">"}
    check_parser(" 7 ", "int", args)
    check_parser("<7>", "int", args)
    check_parser(" a: <1> ", "kv-lines", args)


def test_extension_strip_prefix_must_be_string() -> None:
    with pytest.raises(ValueError, match="text: 'strip_prefix' content_arg must be a string, got int"):
        parse_content("x", "text", {"strip_prefix": 1})


def test_extension_json_prefix_suffix() -> None:
    # Extension (§2.10): `json` prefix / suffix, added before the dialect transforms.
    assert parse_content(' "tool": "f"}', "json", {"prefix": "{"}) == {"tool": "f"}
    assert parse_content("[1, 2", "json", {"suffix": "]"}) == [1, 2]
    assert parse_content(" tool : 1", "json", {"prefix": "{", "suffix": "}", "unquoted_keys": True}) == {
        "tool": 1
    }
    assert parse_content(
        '<|"|>a<|"|>', "json", {"prefix": "[", "suffix": "]", "string_delims": [DELIMS[0]]}
    ) == ["a"]
    assert parse_content(" 1 ", "json", {"prefix": "", "suffix": ""}) == 1


def test_extension_json_prefix_error_shows_parsed_text() -> None:
    # Extension (§2.10): the error message quotes the text actually parsed (prefix + region + suffix).
    with pytest.raises(ValueError) as info:
        parse_content(' "tool": }', "json", {"prefix": "{"})
    assert "Content: '{ \"tool\": }'" in str(info.value)
    with pytest.raises(ValueError) as info:
        parse_content(" a: }", "json", {"prefix": "{", "unquoted_keys": True})
    assert "Original: '{ a: }'" in str(info.value)
    assert "Transformed: '{ \"a\": }'" in str(info.value)


def test_extension_json_prefix_with_allow_non_json_returns_parsed_text() -> None:
    # Extension (§2.10): allow_non_json falls back to the (stripped) text that was parsed.
    assert parse_content(" oops ", "json", {"prefix": "{", "allow_non_json": True}) == "{ oops"


def test_extension_json_prefix_sentinel_check_covers_prefix() -> None:
    with pytest.raises(ValueError, match="reserved sentinel"):
        parse_content("1", "json", {"prefix": "\x01", "string_delims": [DELIMS[0]]})


def test_extension_json_prefix_must_be_string() -> None:
    with pytest.raises(ValueError, match="json: 'suffix' content_arg must be a string, got list"):
        parse_content("1", "json", {"suffix": ["]"]})


@pytest.mark.parametrize(
    ("content", "args", "dirty"),
    [
        ("text", {}, False),
        ("int", {}, False),
        ("float", {"strip_prefix": "<"}, False),
        ("bool", {}, False),
        ("text", {"strip_prefix": ""}, False),
        ("text", {"strip_prefix": "", "strip_suffix": ""}, False),
        ("text", {"strip_prefix": "<response>"}, True),
        ("text", {"strip_suffix": "</response>"}, True),
        ("json", {}, True),
        ("xml-inline", {"tag_pattern": "x"}, True),
        ("kv-lines", {}, True),
        ("python-call-list", {}, True),
    ],
)
def test_is_dirty(content: str, args: dict[str, Any], dirty: bool) -> None:
    assert is_dirty(content, args) is dirty


# --------------------------------------------------------------------------------------------------
# Deliberate differences (hardening); each test names the reference behaviour it replaces.

NONPARTICIPATING = r"<(?P<key>\w+)>(?:v=(?P<value>[^<]*))?</(?P=key)>"


def test_d13_xml_inline_nonparticipating_value_with_value_parser_is_value_error() -> None:
    # D13: the reference crashes with AttributeError inside the value_parser.
    args = {"tag_pattern": NONPARTICIPATING, "value_parser": {"name": "text"}}
    with pytest.raises(AttributeError):
        ref.parse_content("<a>v=1</a><b></b>", "xml-inline", args)
    with pytest.raises(ValueError, match=r"'value' group .* key 'b'\. Pattern: <\(\?P<key>"):
        parse_content("<a>v=1</a><b></b>", "xml-inline", args)


def test_xml_inline_nonparticipating_value_without_value_parser_is_none_as_in_reference() -> None:
    # Not a divergence: without a value_parser the reference stores None, and so does chatparse
    # (an earlier version raised, which made a region malformed that the reference closes).
    args = {"tag_pattern": NONPARTICIPATING}
    assert ref.parse_content("<a>v=1</a><b></b>", "xml-inline", args) == {"a": "1", "b": None}
    check_parser("<a>v=1</a><b></b>", "xml-inline", args)
    check_parser("<k>v=1</k><j></j><a>", "xml-inline", args)
    # A participating value is unaffected.
    check_parser("<a>v=1</a><b>v=</b>", "xml-inline", args)


def test_xml_inline_invalid_tag_pattern_is_value_error() -> None:
    # Hardening: the reference leaks regex.error (not a ValueError).
    with pytest.raises(regex.error):
        ref.parse_content("<a>1</a>", "xml-inline", {"tag_pattern": "(?P<key>"})
    with pytest.raises(ValueError, match=r"xml-inline: invalid tag_pattern regex '\(\?P<key>'"):
        parse_content("<a>1</a>", "xml-inline", {"tag_pattern": "(?P<key>"})


def test_xml_inline_catastrophic_tag_pattern_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    # Hardening: a pathological tag_pattern cannot hang the process (the reference has no limit).
    monkeypatch.setattr(_content, "REGEX_TIMEOUT", 0.05)
    pattern = r"(?P<key>.*)(.*)(.*)(.*)(.*)(.*)\1\2\3x"
    with pytest.raises(ValueError, match=r"xml-inline: tag_pattern .* timed out"):
        parse_content("a" * 80 + "x!", "xml-inline", {"tag_pattern": pattern})


def test_json_string_delims_timeout_is_value_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # Hardening: the string_delims regex runs under REGEX_TIMEOUT (0 means "already out of time").
    monkeypatch.setattr(_content, "REGEX_TIMEOUT", 0.0)
    with pytest.raises(ValueError, match="json: string_delims: regex timed out"):
        parse_content('{"a": <|"|>x<|"|>}', "json", {"string_delims": [DELIMS[0]]})


def test_json_unquoted_keys_timeout_is_value_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # Hardening: the unquoted_keys regex runs under REGEX_TIMEOUT.
    monkeypatch.setattr(_content, "REGEX_TIMEOUT", 0.0)
    with pytest.raises(ValueError, match="json: unquoted_keys: regex timed out"):
        parse_content("{a: 1}", "json", {"unquoted_keys": True})


def test_xml_inline_timeout_is_value_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_content, "REGEX_TIMEOUT", 0.0)
    with pytest.raises(ValueError, match="timed out"):
        parse_content("<a>1</a>", "xml-inline", {"tag_pattern": TAG_PATTERNS[0]})


def test_json_deep_nesting_is_value_error() -> None:
    # Hardening: json.loads raises RecursionError on deep nesting; the reference leaks it.
    text = "[" * 100_000 + "]" * 100_000
    with pytest.raises(RecursionError):
        ref.parse_content(text, "json", {})
    with pytest.raises(ValueError, match="json parser could not parse region as JSON"):
        parse_content(text, "json", {})
    assert parse_content(text, "json", {"allow_non_json": True}) == text


def test_json_integer_over_digit_limit_is_a_parse_failure() -> None:
    # Hardening: Python's int digit limit raises a plain ValueError that the reference does not treat
    # as a JSON failure (allow_non_json does not apply there); here it is one.
    text = "1" * 5000
    with pytest.raises(ValueError, match="Exceeds the limit"):
        ref.parse_content(text, "json", {"allow_non_json": True})
    assert parse_content(text, "json", {"allow_non_json": True}) == text
    with pytest.raises(ValueError, match="json parser could not parse region as JSON"):
        parse_content(text, "json", {})


BAD_ARGS: list[tuple[str, Any, str]] = [
    ("json", {"string_delims": 5}, "json: 'string_delims' content_arg must be a list of"),
    ("json", {"string_delims": [["<"]]}, "json: 'string_delims' content_arg must be a list of"),
    ("json", {"string_delims": [[1, 2]]}, "json: 'string_delims' content_arg must be a list of"),
    ("json", {"prefix": 1}, "json: 'prefix' content_arg must be a string"),
    ("xml-inline", {"tag_pattern": 1}, "xml-inline: 'tag_pattern' content_arg must be a string, got int"),
    (
        "xml-inline",
        {"tag_pattern": TAG_PATTERNS[0], "value_parser": "json"},
        "'value_parser' content_arg must be",
    ),
    (
        "xml-inline",
        {"tag_pattern": TAG_PATTERNS[0], "value_parser": {"name": "yaml"}},
        "unknown content parser",
    ),
    (
        "xml-inline",
        {"tag_pattern": TAG_PATTERNS[0], "value_parser": {"name": ["x"]}},
        "unknown content parser",
    ),
    (
        "xml-inline",
        {"tag_pattern": TAG_PATTERNS[0], "value_parser": {"args": None}},
        "content_args for parser",
    ),
    ("kv-lines", {"line_sep": 1}, "kv-lines: 'line_sep' content_arg must be a string, got int"),
    ("kv-lines", {"kv_sep": None}, "kv-lines: 'kv_sep' content_arg must be a string, got NoneType"),
    ("kv-lines", {"value_parser": []}, "kv-lines: 'value_parser' content_arg must be a dict"),
    ("text", None, "content_args for parser 'text' must be a dict, got NoneType"),
    ("json", [], "content_args for parser 'json' must be a dict, got list"),
]


@pytest.mark.parametrize(("name", "args", "message"), BAD_ARGS)
def test_wrongly_typed_content_args_are_value_errors(name: str, args: Any, message: str) -> None:
    # Hardening: the reference leaks AttributeError / TypeError / KeyError from deep inside.
    text = "<a>1</a>" if name == "xml-inline" else "a: 1"
    with pytest.raises(ValueError, match=regex.escape(message)):
        parse_content(text, name, args)
    assert outcome(lambda: ref.parse_content(text, name, args)) != outcome(
        lambda: parse_content(text, name, args)
    )


def test_unknown_parser_name_is_value_error() -> None:
    # Hardening: the reference raises KeyError('yaml').
    with pytest.raises(KeyError):
        ref.parse_content("x", "yaml", {})
    with pytest.raises(ValueError, match="unknown content parser 'yaml'. Available: "):
        parse_content("x", "yaml", {})


def test_kv_sep_type_checked_only_when_used() -> None:
    # The reference never reads kv_sep when every line is empty; neither does chatparse.
    check_parser("\n \n", "kv-lines", {"kv_sep": None})


def test_transform_placeholder_values_are_not_shared() -> None:
    # D18 (aliasing): the reference places the same object at every use of a placeholder.
    transform = {"a": "{content}", "b": "{content}", "c": "{content.k}", "d": "{content.n}"}
    scope = {"content": {"k": [1], "n": 2}}
    theirs = ref._apply_transform(transform, scope)
    assert theirs["a"] is theirs["b"]
    ours = apply_transform(transform, scope)
    assert same(ours, theirs)
    assert ours["a"] is not ours["b"]
    assert ours["c"] is not ours["a"]["k"] and ours["c"] is not ours["b"]["k"]


def test_transform_literals_are_fresh_objects() -> None:
    # Values never alias content_args: transform literals are rebuilt on every call.
    transform = {"type": "function", "meta": {"tags": ["a"]}, "args": []}
    field = SimpleNamespace(
        name="t", content="text", content_args={}, transform=transform, transform_each=False
    )
    first = process_field("x", field, {})
    second = process_field("x", field, {})
    assert first == second == transform
    assert first["meta"] is not transform["meta"] and first["args"] is not transform["args"]
    assert first["meta"]["tags"] is not second["meta"]["tags"]


def test_transform_each_items_are_fresh_objects() -> None:
    transform = {"function": "{f}", "again": "{f}"}
    field = SimpleNamespace(
        name="t", content="json", content_args={}, transform=transform, transform_each=True
    )
    out = process_field('[{"f": {"x": [1]}}]', field, {})
    assert out == [{"function": {"x": [1]}, "again": {"x": [1]}}]
    assert out[0]["function"] is not out[0]["again"]


def test_transform_nested_too_deeply_is_value_error() -> None:
    # Hardening: the reference leaks RecursionError for absurdly nested transforms.
    transform: Any = "{content}"
    for _ in range(5000):
        transform = [transform]
    with pytest.raises(RecursionError):
        ref.validate_transform_strings("Field 'x'", transform)
    with pytest.raises(ValueError, match="Field 'x': transform is nested too deeply"):
        validate_transform_strings("Field 'x'", transform)
    with pytest.raises(ValueError, match="transform is nested too deeply"):
        apply_transform(transform, {"content": 1})


def test_undefined_placeholder_stays_key_error() -> None:
    # Same as the reference: KeyError with the reference's message.
    check(
        lambda: apply_transform("{why}", {"content": 1}),
        lambda: ref._apply_transform("{why}", {"content": 1}),
    )
    with pytest.raises(
        KeyError, match="transform placeholder '{why}' is not defined. Available: \\['content'\\]"
    ):
        apply_transform("{why}", {"content": 1})


# --------------------------------------------------------------------------------------------------
# Invariant: only ValueError / TypeError / KeyError leave a parser, on any input and any args.

garbage = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 2),
    st.text(max_size=4),
    st.lists(st.text(max_size=2), max_size=2),
)
arg_values = {
    "strip": garbage,
    "strip_prefix": garbage,
    "strip_suffix": garbage,
    "prefix": garbage,
    "suffix": garbage,
    "unquoted_keys": garbage,
    "allow_non_json": garbage,
    "string_delims": st.one_of(garbage, st.lists(st.lists(garbage, max_size=3), max_size=2)),
    "tag_pattern": st.one_of(
        garbage, st.sampled_from(TAG_PATTERNS), st.text(alphabet="()?P<>\\w+*.[]{}key", max_size=12)
    ),
    "value_parser": st.one_of(
        garbage,
        st.sampled_from(VALUE_PARSERS),
        st.fixed_dictionaries(
            {}, optional={"name": st.one_of(garbage, st.sampled_from(list(CONTENT_PARSERS))), "args": garbage}
        ),
    ),
    "merge_duplicates": garbage,
    "line_sep": garbage,
    "kv_sep": garbage,
}


@QUICK
@given(
    name=st.sampled_from(list(CONTENT_PARSERS)),
    text=st.one_of(any_text, json_texts(), xml_texts(), pcl_texts()),
    args=st.fixed_dictionaries({}, optional=arg_values),
)
def test_only_documented_exceptions_escape(name: str, text: str, args: dict[str, Any]) -> None:
    with contextlib.suppress(ALLOWED):
        parse_content(text, name, args)


def test_docstring_examples() -> None:
    result = docstring_examples(_content)
    assert result.attempted > 0 and result.failed == 0


# --------------------------------------------------------------------------------------------------
# `json_loads`: `json.loads` without its Python layers, same values and same errors

_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=4), kids, max_size=3),
    max_leaves=8,
)


def _loads_outcome(fn: Callable[[str], Any], text: str) -> Any:
    try:
        return ("value", repr(fn(text)))
    except (ValueError, RecursionError) as e:
        return ("error", type(e).__name__, str(e))


@settings(max_examples=400, deadline=None)
@given(
    value=_JSON_VALUES,
    before=st.sampled_from(["", " ", "\n\t", "\ufeff", "x"]),
    after=st.sampled_from(["", " \n", "x", ",", "}", "\r\n "]),
    cut=st.integers(min_value=0, max_value=3),
)
def test_json_loads_is_json_loads(value: Any, before: str, after: str, cut: int) -> None:
    text = before + json.dumps(value) + after
    for t in (text, text[: len(text) - cut]):
        assert _loads_outcome(_content.json_loads, t) == _loads_outcome(json.loads, t), t


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet='{}[]",:0123456789.eE+-tfnrul \n\\x', max_size=30))
def test_json_loads_is_json_loads_on_any_text(text: str) -> None:
    assert _loads_outcome(_content.json_loads, text) == _loads_outcome(json.loads, text), text
