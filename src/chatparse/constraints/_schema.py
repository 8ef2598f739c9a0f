"""JSON schema to grammar rules, in the value dialects the templates' content parsers read.

Dialects:

* ``json``: standard JSON (``content: "json"``, values of ``xml-inline`` with a JSON value parser);
* ``delimited``: JSON with bare keys and strings between a custom delimiter, e.g. Gemma 4's
  ``{city:<|"|>Paris<|"|>}`` (``unquoted_keys`` + ``string_delims``);
* ``python``: Python literals, as ``python-call-list`` reads them (``'x'``, ``True``, ``None``);
* ``raw``: an ``xml-inline`` value as the tool coercion reads it: strings verbatim, every other
  type as JSON text.

Every construct is either rendered exactly or rejected with `ConstraintError` naming the schema
path and keyword: nothing is approximated. Objects take their properties in any order (each at
most once, required ones always) up to `ANY_ORDER_MAX_MEMBERS` properties, in the schema's order
beyond (optional ones possibly left out); ``additionalProperties`` is treated as
``false`` where properties are declared (XGrammar's strict mode), and a schema without
``properties`` is a free-form object.
"""

from __future__ import annotations

import json
from typing import Any

from ._errors import ConstraintError
from ._grammar import (
    EMPTY,
    NOTHING,
    WS_CHARS,
    Chars,
    Expr,
    Grammar,
    Lit,
    Ref,
    alt,
    class_ranges,
    opt,
    ranges_complement,
    ranges_minus,
    ranges_of,
    rep,
    seq,
)

_ANNOTATIONS = {
    "title",
    "description",
    "default",
    "examples",
    "$schema",
    "$id",
    "$comment",
    "deprecated",
    "readOnly",
    "writeOnly",
    "strict",
}
_SUPPORTED = {
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "anyOf",
    "oneOf",
    "allOf",
    "$ref",
    "$defs",
    "definitions",
    "nullable",
}
_TYPES = ("string", "integer", "number", "boolean", "null", "object", "array")
PY_NAME = r"[A-Za-z_][A-Za-z0-9_]*(?:[-.][A-Za-z0-9_]+)*"

_DIGIT = Chars(ranges_of("0123456789"))
_DIGIT19 = Chars(ranges_of("123456789"))
_HEX = Chars(ranges_of("0123456789abcdefABCDEF"))
_CONTROL = ((0, 0x1F),)


class SchemaCompiler:
    """Compiles JSON schemas into rules of `grammar` for one dialect.

    `forbidden`: strings no string value may contain (markers that would end the region early).
    `ws`: the whitespace expression used between JSON tokens.
    """

    def __init__(
        self,
        grammar: Grammar,
        dialect: str,
        *,
        forbidden: tuple[str, ...] = (),
        ws: Expr | None = None,
        delimiter: str | None = None,
        key_pattern: Any = None,
        root_schema: Any = None,
        key_order: str = "any",
        key_forbidden: tuple[str, ...] = (),
    ) -> None:
        self.g = grammar
        self.key_forbidden = key_forbidden
        self.key_order = key_order
        self.dialect = dialect
        if dialect == "json":
            # a raw JSON string holds no unescaped quote: markers with one cannot appear in it
            forbidden = tuple(f for f in forbidden if '"' not in f)
        self.forbidden = tuple(sorted(set(forbidden)))
        self.ws = ws if ws is not None else rep(WS_CHARS, 0, None)
        self.delimiter = delimiter
        self.key_pattern = key_pattern
        self.root_schema = root_schema
        self._refs: dict[str, str] = {}
        for f in self.forbidden:
            if dialect == "json" and "\\" in f:
                raise ConstraintError(
                    f"a marker containing a backslash ({f!r}) cannot be excluded from JSON strings"
                )

    # -- entry points --------------------------------------------------------------------------

    def value(self, schema: Any, path: str) -> Expr:
        """A value valid for `schema`."""
        if schema is True or schema == {}:
            return self.any_value()
        if schema is False:
            raise ConstraintError(f"{path}: the schema 'false' accepts no value")
        if not isinstance(schema, dict):
            raise ConstraintError(f"{path}: a schema must be an object, got {type(schema).__name__}")
        for key in schema:
            if key not in _SUPPORTED and key not in _ANNOTATIONS:
                raise ConstraintError(
                    f"{path}: the JSON-schema keyword {key!r} cannot be enforced exactly by a grammar"
                )
        if "$ref" in schema:
            others = set(schema) - {"$ref"} - _ANNOTATIONS
            if others:
                raise ConstraintError(f"{path}: '$ref' next to {sorted(others)} is not supported")
            return self._ref(schema["$ref"], path)
        if "allOf" in schema:
            parts = schema["allOf"]
            rest = {k: v for k, v in schema.items() if k != "allOf"}
            if isinstance(parts, list) and len(parts) == 1 and not (set(rest) - _ANNOTATIONS):
                return self.value(parts[0], f"{path}.allOf[0]")
            raise ConstraintError(f"{path}: 'allOf' with more than one schema cannot be enforced exactly")
        for union in ("anyOf", "oneOf"):
            if union in schema:
                branches = schema[union]
                if not isinstance(branches, list) or not branches:
                    raise ConstraintError(f"{path}: '{union}' must be a non-empty list")
                if union == "oneOf" and not _disjoint_by_type(branches):
                    raise ConstraintError(
                        f"{path}: 'oneOf' branches that are not told apart by their types cannot be "
                        "enforced exactly (a value matching two branches would be accepted)"
                    )
                rest = {
                    k: v for k, v in schema.items() if k not in (union, "nullable") and k not in _ANNOTATIONS
                }
                if rest:
                    raise ConstraintError(f"{path}: '{union}' next to {sorted(rest)} is not supported")
                out = alt(*(self.value(b, f"{path}.{union}[{i}]") for i, b in enumerate(branches)))
                if schema.get("nullable"):
                    out = alt(out, self._null())
                return out
        if "const" in schema:
            return self._literal_value(schema["const"], path)
        if "enum" in schema:
            values = schema["enum"]
            if not isinstance(values, list) or not values:
                raise ConstraintError(f"{path}: 'enum' must be a non-empty list")
            return alt(*(self._literal_value(v, f"{path}.enum") for v in values))
        types = schema.get("type")
        if types is None:
            if "properties" in schema or "additionalProperties" in schema:
                types = ["object"]
            elif "items" in schema or "prefixItems" in schema:
                types = ["array"]
            else:
                return self.any_value()
        if isinstance(types, str):
            types = [types]
        if not isinstance(types, list) or not all(t in _TYPES for t in types):
            raise ConstraintError(f"{path}: unknown 'type' {schema.get('type')!r}")
        if schema.get("nullable") and "null" not in types:
            types = [*types, "null"]
        if self.dialect == "raw" and len(types) > 1:
            raise ConstraintError(
                f"{path}: a union type {types} in a text-valued argument cannot be enforced exactly "
                "(the tool coercion picks the first type the text fits)"
            )
        return alt(*(self._typed(t, schema, path) for t in types))

    def object_members(self, schema: Any, path: str) -> list[tuple[str, Expr, bool]]:
        """(name, value expression, required) for each declared property, in order."""
        if not isinstance(schema, dict):
            raise ConstraintError(f"{path}: the parameters schema must be an object")
        props = schema.get("properties", {})
        if not isinstance(props, dict):
            raise ConstraintError(f"{path}.properties must be an object")
        required = schema.get("required", [])
        if not isinstance(required, list) or any(r not in props for r in required):
            raise ConstraintError(f"{path}.required names properties that are not declared: {required!r}")
        return [(k, self.value(v, f"{path}.{k}"), k in required) for k, v in props.items()]

    # -- pieces ----------------------------------------------------------------------------------

    def _ref(self, ref: Any, path: str) -> Expr:
        if not isinstance(ref, str) or not ref.startswith("#/"):
            raise ConstraintError(f"{path}: only local '$ref's ('#/...') are supported, got {ref!r}")
        if ref in self._refs:
            return Ref(self._refs[ref])
        target: Any = self.root_schema
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                raise ConstraintError(f"{path}: '$ref' {ref!r} does not resolve")
            target = target[part]
        name = self.g.declare(f"ref-{ref[2:]}")
        self._refs[ref] = name
        self.g.define(name, self.value(target, ref))
        return Ref(name)

    def _typed(self, t: str, schema: dict, path: str) -> Expr:
        if t == "string":
            return self._string(schema, path)
        if t == "integer":
            return self._integer()
        if t == "number":
            return self._number()
        if t == "boolean":
            return self._boolean()
        if t == "null":
            return self._null()
        if t == "object":
            return self._object(schema, path)
        return self._array(schema, path)

    def _integer(self) -> Expr:
        digits = 14 if self.dialect == "python" else 19
        return self.g.rule(
            "integer", seq(opt(Lit("-")), alt(Lit("0"), seq(_DIGIT19, rep(_DIGIT, 0, digits))))
        )

    def _number(self) -> Expr:
        frac = seq(Lit("."), rep(_DIGIT, 1, None))
        exp = seq(Chars(ranges_of("eE")), opt(Chars(ranges_of("+-"))), rep(_DIGIT, 1, 2))
        return self.g.rule("number", seq(self._integer(), opt(frac), opt(exp)))

    def _boolean(self) -> Expr:
        if self.dialect == "python":
            return self.g.rule("boolean", alt(Lit("True"), Lit("False"), Lit("true"), Lit("false")))
        if self.dialect == "raw":
            return self.g.rule("boolean", alt(Lit("true"), Lit("false"), Lit("True"), Lit("False")))
        return self.g.rule("boolean", alt(Lit("true"), Lit("false")))

    def _null(self) -> Expr:
        if self.dialect in ("python", "raw"):
            return self.g.rule("null", alt(Lit("None"), Lit("null")))
        return Lit("null")

    def _string(self, schema: dict, path: str) -> Expr:
        lo = schema.get("minLength", 0)
        hi = schema.get("maxLength")
        if not isinstance(lo, int) or (hi is not None and not isinstance(hi, int)) or lo < 0:
            raise ConstraintError(f"{path}: 'minLength'/'maxLength' must be non-negative integers")
        bounded = lo > 0 or hi is not None
        if bounded and (self.forbidden or self.dialect in ("raw", "delimited")):
            raise ConstraintError(
                f"{path}: 'minLength'/'maxLength' cannot be combined with the markers this format "
                "must keep out of string values"
            )
        if self.dialect == "json":
            plain = ranges_minus(ranges_complement(()), ranges_of('"\\') + _CONTROL)
            escape = seq(
                Lit("\\"),
                alt(Chars(ranges_of('"\\/bfnrt')), seq(Lit("u"), _HEX, _HEX, _HEX, _HEX)),
            )
            if bounded:
                body = rep(alt(Chars(plain), escape), lo, hi)
            else:
                run = self.g.text_excluding(
                    self.forbidden, allowed=plain, follow=ranges_of('"\\'), hint="str"
                )
                body = seq(run, rep(seq(self.g.rule("escape", escape), run), 0, None))
            return self.g.rule("string", seq(Lit('"'), body, Lit('"')))
        if self.dialect == "python":
            out = []
            for q in ("'", '"'):
                plain = ranges_minus(ranges_complement(()), ranges_of(q + "\\\n\r"))
                escape = seq(Lit("\\"), Chars(ranges_of("\\'\"nrt/")))
                if bounded:
                    body = rep(alt(Chars(plain), escape), lo, hi)
                else:
                    run = self.g.text_excluding(
                        self.forbidden, allowed=plain, follow=ranges_of(q + "\\"), hint="pystr"
                    )
                    body = seq(run, rep(seq(self.g.rule("pyescape", escape), run), 0, None))
                out.append(seq(Lit(q), body, Lit(q)))
            return self.g.rule("string", alt(*out))
        if self.dialect == "delimited":
            assert self.delimiter is not None
            # \x01 and \x02 are the parser's sentinels for delimited strings: it refuses a region
            # that contains them
            body = self.g.text_excluding(
                (*self.forbidden, self.delimiter),
                allowed=ranges_minus(ranges_complement(()), ranges_of("\x01\x02")),
                follow=ranges_of(self.delimiter[0]),
                hint="dstr",
            )
            return self.g.rule("string", seq(Lit(self.delimiter), body, Lit(self.delimiter)))
        raise ConstraintError(f"{path}: string values are written by the enclosing format")  # raw: caller

    def _literal_value(self, v: Any, path: str) -> Expr:
        if self.dialect == "json":
            text = json.dumps(v, ensure_ascii=False)
            if isinstance(v, str) and any(f in text for f in self.forbidden):
                raise ConstraintError(f"{path}: the value {v!r} contains a marker of the format")
            return Lit(text)
        if isinstance(v, bool):
            return Lit(
                {"python": "True", "raw": "true"}.get(self.dialect, "true")
                if v
                else {"python": "False", "raw": "false"}.get(self.dialect, "false")
            )
        if v is None:
            return Lit("None" if self.dialect == "python" else "null")
        if isinstance(v, (int, float)):
            return Lit(json.dumps(v))
        if isinstance(v, str):
            if any(f in v for f in self.forbidden):
                raise ConstraintError(f"{path}: the value {v!r} contains a marker of the format")
            if self.dialect == "python":
                return Lit(_py_repr(v))
            if self.dialect == "delimited":
                assert self.delimiter is not None
                if self.delimiter in v:
                    raise ConstraintError(f"{path}: the value {v!r} contains the string delimiter")
                return Lit(self.delimiter + v + self.delimiter)
            raise ConstraintError(f"{path}: raw string literals are written by the enclosing format")
        if self.dialect == "python" and isinstance(v, (list, dict)):
            return Lit(_py_literal(v))
        raise ConstraintError(f"{path}: the constant {v!r} cannot be written in this format")

    def key(self, name: str, path: str) -> Expr:
        if self.dialect == "json":
            return Lit(json.dumps(name, ensure_ascii=False))
        if self.dialect == "python":
            return Lit(_py_repr(name))
        if self.dialect == "delimited":
            if (
                self.key_pattern is None
                or not self.key_pattern.fullmatch(name)
                or any(x in name for x in self.key_forbidden if x)
            ):
                raise ConstraintError(
                    f"{path}: the property name {name!r} cannot be written as a bare key in this format"
                )
            return Lit(name)
        raise ConstraintError(f"{path}: keys are written by the enclosing format")

    def _any_key(self) -> Expr:
        if self.dialect == "delimited":
            if self.key_pattern is not None and self.key_pattern.pattern.startswith("[^"):
                # lenient bare keys (`{Basic LLM Chain: ...}`): no JSON punctuation, not starting
                # with whitespace, never the region's closer (keys are outside strings)
                punct = ranges_of('{}[]:,"\x01\x02')
                return self.g.text_excluding(
                    self.key_forbidden,
                    allowed=ranges_minus(ranges_complement(()), punct),
                    lead=class_ranges(r"\s", 0),
                    min_len=1,
                    hint="lenient-key",
                )
            # bare keys: a run of word characters (the reference's `\w+`), never a marker
            word = Chars(ranges_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"))
            return rep(word, 1, None)
        return self._string({}, "key")

    def _object(self, schema: dict, path: str) -> Expr:
        ws = self.ws
        colon = seq(ws, Lit(":"), ws)
        comma = seq(ws, Lit(","), ws)
        extra = schema.get("additionalProperties")
        if "properties" not in schema:
            value = (
                self.any_value()
                if extra in (None, True)
                else self.value(extra, f"{path}.additionalProperties")
            )
            if extra is False:
                return seq(Lit("{"), ws, Lit("}"))
            member = seq(self._any_key(), colon, value)
            members = seq(member, rep(seq(comma, member), 0, None))
            return self.g.rule("object", seq(Lit("{"), ws, opt(members), ws, Lit("}")))
        if extra not in (None, False) and schema.get("properties"):
            raise ConstraintError(
                f"{path}: 'additionalProperties' next to declared properties cannot be enforced exactly"
            )
        members_spec = [(self.key(k, f"{path}.{k}"), v, r) for k, v, r in self.object_members(schema, path)]
        if not members_spec:
            return seq(Lit("{"), ws, Lit("}"))
        body = members_rule(
            self.g,
            [(seq(k, colon, v), r) for k, v, r in members_spec],
            comma,
            f"{path}-members",
            order=self.key_order,
        )
        return self.g.rule("object", seq(Lit("{"), ws, body, ws, Lit("}")))

    def _array(self, schema: dict, path: str) -> Expr:
        ws = self.ws
        comma = seq(ws, Lit(","), ws)
        lo = schema.get("minItems", 0)
        hi = schema.get("maxItems")
        if not isinstance(lo, int) or (hi is not None and not isinstance(hi, int)):
            raise ConstraintError(f"{path}: 'minItems'/'maxItems' must be integers")
        prefix = schema.get("prefixItems")
        items = schema.get("items", True)
        if prefix is not None:
            if not isinstance(prefix, list):
                raise ConstraintError(f"{path}.prefixItems must be a list")
            if items not in (False,) or lo not in (0, len(prefix)) or hi not in (None, len(prefix)):
                raise ConstraintError(
                    f"{path}: 'prefixItems' is supported only as a fixed tuple ('items': false)"
                )
            parts = [self.value(p, f"{path}.prefixItems[{i}]") for i, p in enumerate(prefix)]
            body: Expr = EMPTY
            for i, p in enumerate(parts):
                body = seq(body, comma, p) if i else p
            return self.g.rule("tuple", seq(Lit("["), ws, body, ws, Lit("]")))
        item = self.value(items, f"{path}.items") if items is not False else NOTHING
        if item == NOTHING:
            return seq(Lit("["), ws, Lit("]"))
        more_hi = None if hi is None else max(hi - 1, 0)
        more_lo = max(lo - 1, 0)
        elements = seq(item, rep(seq(comma, item), more_lo, more_hi))
        if hi == 0:
            return seq(Lit("["), ws, Lit("]"))
        body = elements if lo > 0 else opt(elements)
        return self.g.rule("array", seq(Lit("["), ws, body, ws, Lit("]")))

    def any_value(self) -> Expr:
        """Any value of the dialect (a free-form argument)."""
        key = f"any-{self.dialect}"
        if key in self._refs:
            return Ref(self._refs[key])
        name = self.g.declare(f"any-{self.dialect}-value")
        self._refs[key] = name
        ws = self.ws
        comma = seq(ws, Lit(","), ws)
        v = Ref(name)
        if self.dialect == "raw":
            inner = SchemaCompiler(
                self.g, "json", forbidden=self.forbidden, ws=self.ws, key_order=self.key_order
            )
            return self.g.define(name, inner.any_value())
        member = seq(self._any_key(), ws, Lit(":"), ws, v)
        obj = seq(Lit("{"), ws, opt(seq(member, rep(seq(comma, member), 0, None))), ws, Lit("}"))
        arr = seq(Lit("["), ws, opt(seq(v, rep(seq(comma, v), 0, None))), ws, Lit("]"))
        self.g.define(
            name, alt(self._string({}, "value"), self._number(), self._boolean(), self._null(), obj, arr)
        )
        return v


ANY_ORDER_MAX_MEMBERS = 6
"""Objects with at most this many members accept them in any order (each at most once, every
required one present): the grammar tracks which members were written, 2**n states for n members.
Larger objects take their members in the schema's order (optional ones may be left out)."""

KEY_ORDERS = ("any", "schema")


def members_rule(
    g: Grammar,
    members: list[tuple[Expr, bool]],
    comma: Expr,
    hint: str,
    *,
    order: str = "any",
    first_ok: Any = None,
) -> Expr:
    """The members of an object, separated by `comma`; optional ones may be left out.

    `order="any"` (up to `ANY_ORDER_MAX_MEMBERS` members): any order, each member at most once,
    every required member present. Otherwise the given order (linear size). `first_ok(i)`, if
    given, gives the forms of member `i` that may be written first (NOTHING: none; an opener's
    lookahead may demand a particular first key).
    """
    n = len(members)
    ok = (lambda i: members[i][0]) if first_ok is None else first_ok
    if order == "any" and 1 < n <= ANY_ORDER_MAX_MEMBERS:
        return _members_any_order(g, members, comma, hint, ok)
    first: list[Expr] = [EMPTY] * (n + 1)  # nothing written yet
    after: list[Expr] = [EMPTY] * (n + 1)  # something written: each member needs a comma
    for i in range(n - 1, -1, -1):
        m, required = members[i]
        a = seq(comma, m, after[i + 1])
        f = seq(ok(i), after[i + 1])
        if not required:
            a = alt(a, after[i + 1])
            f = alt(f, first[i + 1])
        after[i] = g.rule(f"{hint}-a{i}", a) if i else a
        first[i] = g.rule(f"{hint}-f{i}", f) if i else f
    return first[0]


def _members_any_order(g: Grammar, members: list[tuple[Expr, bool]], comma: Expr, hint: str, ok: Any) -> Expr:
    n = len(members)
    required = frozenset(i for i, (_, r) in enumerate(members) if r)
    refs = [m if isinstance(m, (Lit, Ref)) else g.rule(f"{hint}-m{i}", m) for i, (m, _) in enumerate(members)]
    names: dict[frozenset[int], Expr] = {}

    def after(used: frozenset[int]) -> Expr:
        if used in names:
            return names[used]
        if len(used) == n:
            names[used] = EMPTY
            return EMPTY
        name = g.declare(f"{hint}-s{len(names)}")
        names[used] = Ref(name)
        choices: list[Expr] = [EMPTY] if required <= used else []
        choices += [seq(comma, refs[i], after(used | {i})) for i in range(n) if i not in used]
        g.define(name, alt(*choices))
        return names[used]

    start: list[Expr] = [EMPTY] if not required else []
    for i in range(n):
        lead = ok(i)
        if lead != NOTHING:
            start.append(seq(refs[i] if lead == members[i][0] else lead, after(frozenset({i}))))
    return alt(*start) if start else NOTHING


def _disjoint_by_type(branches: list[Any]) -> bool:
    seen: set[str] = set()
    for b in branches:
        t = b.get("type") if isinstance(b, dict) else None
        if (
            not isinstance(t, str)
            or t in seen
            or (t in ("integer", "number") and {"integer", "number"} & seen)
        ):
            return False
        seen.add(t)
    return True


def _py_repr(s: str) -> str:
    out = ["'"]
    for ch in s:
        if ch in "\\'":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        else:
            out.append(ch)
    out.append("'")
    return "".join(out)


def _py_literal(v: Any) -> str:
    if isinstance(v, str):
        return _py_repr(v)
    if isinstance(v, bool):
        return "True" if v else "False"
    if v is None:
        return "None"
    if isinstance(v, list):
        return "[" + ", ".join(_py_literal(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_py_repr(str(k))}: {_py_literal(x)}" for k, x in v.items()) + "}"
    return json.dumps(v)
