"""`chatparse constraints`: print the constraint for a template and a tools file."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

FORMATS = ("structural-tag", "json-schema", "gbnf", "lark", "ollama")


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "constraints",
        help="print the generation constraint for a template and tools",
        description="Derive the constraint (XGrammar structural tag, JSON schema, GBNF or Lark) that "
        "makes a model write only calls the template parses: offered tools, schema-valid arguments, "
        "the tool_choice's number of calls. Exit status 1 when the template or a schema cannot be "
        "constrained exactly (the message names the field), 2 on a usage error.",
    )
    p.add_argument("--template", "-t", required=True, help="catalog name or a response_template JSON file")
    p.add_argument("--tools", help="JSON file: a list of tools, or an object with a 'tools' list")
    p.add_argument("--tool-choice", default="auto", help="auto | required | none | NAME (a named tool)")
    p.add_argument("--no-parallel", action="store_true", help="at most one call (parallel_tool_calls: false)")
    p.add_argument("--reasoning", choices=("yes", "no", "optional"), default="optional")
    p.add_argument("--prefix", help="the rendered prompt (a region it opens is continued)")
    p.add_argument("--format", "-f", choices=FORMATS, default="structural-tag")
    p.add_argument(
        "--max-whitespace",
        type=int,
        default=32,
        help="longest whitespace run inside a call (default: 32; 0 or less: unbounded)",
    )
    return p


def run(args: argparse.Namespace, error: Any) -> int:
    from . import ConstraintError, derive

    template: Any = args.template
    path = Path(template)
    if path.suffix == ".json" or path.exists():
        try:
            template = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise error(f"{args.template}: {e}") from None
        if isinstance(template, dict) and "response_template" in template:
            template = template["response_template"]
    tools: Any = []
    if args.tools:
        try:
            tools = json.loads(Path(args.tools).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise error(f"{args.tools}: {e}") from None
        if isinstance(tools, dict):
            tools = tools.get("tools", [])
    choice: Any = args.tool_choice
    if choice not in ("auto", "required", "none"):
        choice = {"type": "function", "function": {"name": choice}}
    reasoning = {"yes": True, "no": False, "optional": None}[args.reasoning]
    try:
        c = derive(
            template,
            tools,
            tool_choice=choice,
            parallel_tool_calls=not args.no_parallel,
            reasoning=reasoning,
            prefix=args.prefix,
            max_whitespace=args.max_whitespace if args.max_whitespace > 0 else None,
        )
        out = c.render(args.format)
    except ConstraintError as e:
        raise error(str(e), 1) from None
    except (KeyError, ValueError) as e:
        raise error(str(e)) from None
    print(
        out if isinstance(out, str) else json.dumps(out, indent=2, ensure_ascii=False),
        end="" if isinstance(out, str) else "\n",
    )
    return 0
