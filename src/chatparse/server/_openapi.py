"""The OpenAPI 3.1 description of the endpoints `chatparse serve` answers (`GET /openapi.json`).

Request schemas say what the server accepts and checks (extra fields are allowed and ignored, as
in OpenAI's API); answers are described by their top-level shape. Every error is an OpenAI error
object.
"""

from __future__ import annotations

from typing import Any

__all__ = ["openapi"]

_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "param": {"type": ["string", "null"]},
                "code": {"type": ["integer", "string", "null"]},
            },
        }
    },
}


def _errors(*codes: int) -> dict[str, Any]:
    names = {
        400: "Invalid request (the field is in `error.param`)",
        401: "Missing or wrong API key",
        404: "Unknown model",
        408: "The request body did not arrive in time",
        413: "Request body too large",
        502: "The upstream engine failed",
        503: "Shutting down, or every render worker busy",
        504: "The upstream engine timed out",
    }
    return {
        str(c): {
            "description": names[c],
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
        for c in codes
    }


_MESSAGE = {
    "type": "object",
    "required": ["role"],
    "properties": {
        "role": {"type": "string", "enum": ["system", "developer", "user", "assistant", "tool"]},
        "content": {"type": ["string", "array", "null"], "items": {"type": "object"}},
        "name": {"type": "string"},
        "tool_calls": {"type": "array", "items": {"type": "object"}},
        "tool_call_id": {"type": "string"},
        "reasoning_content": {"type": "string"},
    },
}
_TOOL = {
    "type": "object",
    "required": ["function"],
    "properties": {
        "type": {"const": "function"},
        "function": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "description": {"type": "string"},
                "parameters": {"type": "object"},
                "strict": {"type": "boolean"},
            },
        },
    },
}
_CHAT_REQUEST = {
    "type": "object",
    "required": ["model", "messages"],
    "properties": {
        "model": {"type": "string", "minLength": 1},
        "messages": {"type": "array", "minItems": 1, "items": {"$ref": "#/components/schemas/Message"}},
        "stream": {"type": ["boolean", "null"]},
        "stream_options": {"type": "object", "properties": {"include_usage": {"type": "boolean"}}},
        "tools": {"type": "array", "items": {"$ref": "#/components/schemas/Tool"}},
        "tool_choice": {
            "oneOf": [{"type": "string", "enum": ["none", "auto", "required"]}, {"type": "object"}]
        },
        "parallel_tool_calls": {"type": ["boolean", "null"]},
        "max_tokens": {"type": ["integer", "null"], "minimum": 1},
        "max_completion_tokens": {"type": ["integer", "null"], "minimum": 1},
        "stop": {
            "oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}, {"type": "null"}]
        },
        "temperature": {"type": ["number", "null"], "minimum": 0, "maximum": 2},
        "top_p": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
        "seed": {"type": ["integer", "null"]},
        "presence_penalty": {"type": ["number", "null"], "minimum": -2, "maximum": 2},
        "frequency_penalty": {"type": ["number", "null"], "minimum": -2, "maximum": 2},
        "n": {"type": ["integer", "null"], "const": 1},
        "chat_template_kwargs": {"type": "object"},
        "reasoning_effort": {"type": "string"},
        "response_format": {
            "type": "object",
            "required": ["type"],
            "properties": {"type": {"type": "string"}},
        },
    },
}
_RESPONSES_REQUEST = {
    "type": "object",
    "required": ["model", "input"],
    "properties": {
        "model": {"type": "string", "minLength": 1},
        "input": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}]},
        "instructions": {"type": "string"},
        "tools": {"type": "array", "items": {"type": "object"}},
        "tool_choice": {"oneOf": [{"type": "string"}, {"type": "object"}]},
        "max_output_tokens": {"type": "integer", "minimum": 1},
        "temperature": {"type": "number", "minimum": 0, "maximum": 2},
        "top_p": {"type": "number", "minimum": 0, "maximum": 1},
        "parallel_tool_calls": {"type": "boolean"},
        "stream": {"type": "boolean"},
        "reasoning": {"type": "object"},
    },
}


def openapi(model: str, *, auth: bool) -> dict[str, Any]:
    """The schema; `auth`: the API endpoints need `Authorization: Bearer <key>`."""
    security: list[dict[str, list[str]]] = [{"bearer": []}] if auth else []
    json_body = {"application/json": {"schema": {"type": "object"}}}
    sse = {"text/event-stream": {"schema": {"type": "string"}}}

    def post(summary: str, ref: str) -> dict[str, Any]:
        return {
            "post": {
                "summary": summary,
                "security": security,
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{ref}"}}},
                },
                "responses": {
                    "200": {
                        "description": "The answer (an event stream with `stream: true`)",
                        "content": {**json_body, **sse},
                    },
                    **_errors(400, 401, 404, 408, 413, 502, 503, 504),
                },
            }
        }

    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "chatparse serve",
            "version": _version(),
            "description": f"OpenAI-compatible API in front of an inference engine, serving {model!r}.",
        },
        "paths": {
            "/health": {
                "get": {
                    "summary": "Liveness: 200 while serving, 503 while shutting down",
                    "responses": {"200": {"description": "Serving", "content": json_body}, **_errors(503)},
                }
            },
            "/v1/models": {
                "get": {
                    "summary": "The served model",
                    "security": security,
                    "responses": {
                        "200": {"description": "A model list", "content": json_body},
                        **_errors(401),
                    },
                }
            },
            "/v1/chat/completions": post("Chat Completions", "ChatRequest"),
            "/v1/responses": post("Responses (stateless)", "ResponsesRequest"),
            "/metrics": {
                "get": {
                    "summary": "Prometheus metrics",
                    "security": security,
                    "responses": {
                        "200": {
                            "description": "Text exposition format",
                            "content": {"text/plain": {"schema": {"type": "string"}}},
                        },
                        **_errors(401),
                    },
                }
            },
            "/openapi.json": {
                "get": {
                    "summary": "This document",
                    "responses": {"200": {"description": "OpenAPI", "content": json_body}},
                }
            },
        },
        "components": {
            "schemas": {
                "Error": _ERROR,
                "Message": _MESSAGE,
                "Tool": _TOOL,
                "ChatRequest": _CHAT_REQUEST,
                "ResponsesRequest": _RESPONSES_REQUEST,
            },
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
    return doc


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("chatparse")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0+unknown"
