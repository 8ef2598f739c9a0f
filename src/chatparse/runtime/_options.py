"""`GenerationOptions`: one vocabulary for the generation knobs of every runtime.

Theory of operation
-------------------
The portable options (`runtime-contract.md` §6) are `max_tokens`, `sampler` (`"greedy"`, `"top-k"`,
`"top-p"`), `temperature`, `top_k`, `top_p`, `seed`, `enable_thinking`, `stop` and `multimodal`.
Each one resolves as *first defined of (canonical name, the runtime's native name), else the
contract default*: `GenerationOptions(max_tokens=64, native={"max_new_tokens": 8})` gives 64 on
transformers, and `native={"max_new_tokens": 8}` alone gives 8. Native names that are not the
spelling of a portable option (`grammar`, `repetition_penalty`, `logits_processor`, ...) are passed
through to the runtime untouched; that is how runtime-specific features stay reachable.

Two mapping rules hold on every adapter:

* `greedy` sends no sampler knobs: `temperature`, `top_k` and `top_p` are not sent, and each
  runtime gets its own switch for greedy decoding (`do_sample=False` on transformers, temperature
  0 on llama.cpp, OpenAI-compatible servers and Ollama, whose samplers treat 0 as argmax);
  `top-k` sends `temperature` and `top_k`, `top-p` sends `temperature` and `top_p`.
* `enable_thinking` is always passed to the chat template explicitly (default `False`), because
  Qwen3 and DeepSeek templates otherwise default to thinking and spend the token budget on it.

This module is pure: no runtime is imported here. Each adapter asks `resolve(native_names)` for
the values and maps them onto its own request.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

__all__ = ["DEFAULTS", "SAMPLERS", "GenerationOptions", "ResolvedOptions"]

SAMPLERS = ("greedy", "top-k", "top-p")

#: The contract's defaults (runtime-contract.md §6).
DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {
        "max_tokens": 1024,
        "sampler": "greedy",
        "temperature": 0.7,
        "top_k": 40,
        "top_p": 0.95,
        "seed": None,
        "enable_thinking": False,
        "stop": (),
        "multimodal": MappingProxyType({"image": False, "audio": False}),
    }
)

_CANONICAL = tuple(DEFAULTS)

#: How an adapter names a portable option natively: a name, or a name and a converter to the
#: portable spelling (transformers `do_sample=True` means a sampling decoder).
NativeName = str | tuple[str, Callable[[Any], Any]]


def _check(name: str, value: Any) -> Any:
    """`value` validated for option `name` (None passes: not given). Raises ValueError naming it."""
    if value is None:
        return None
    if name == "max_tokens":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"max_tokens must be a positive integer, got {value!r}")
    elif name == "sampler":
        if value not in SAMPLERS:
            raise ValueError(f"sampler must be one of {', '.join(SAMPLERS)}, got {value!r}")
    elif name == "temperature":
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value < 0
        ):
            raise ValueError(f"temperature must be a finite number >= 0, got {value!r}")
        value = float(value)
    elif name == "top_k":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"top_k must be an integer >= 1, got {value!r}")
    elif name == "top_p":
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
            raise ValueError(f"top_p must be a number in (0, 1], got {value!r}")
        value = float(value)
    elif name == "seed":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"seed must be an integer, got {value!r}")
    elif name == "enable_thinking":
        if not isinstance(value, bool):
            raise ValueError(f"enable_thinking must be True or False, got {value!r}")
    elif name == "stop":
        if isinstance(value, str):
            value = (value,)
        elif isinstance(value, Sequence) and all(isinstance(s, str) for s in value):
            value = tuple(value)
        else:
            raise ValueError(f"stop must be a string or a list of strings, got {value!r}")
        if any(not s for s in value):
            raise ValueError("stop strings must not be empty")
    elif name == "multimodal":
        if not isinstance(value, Mapping) or not all(
            k in ("image", "audio") and isinstance(v, bool) for k, v in value.items()
        ):
            raise ValueError(
                f"multimodal must be a mapping with boolean 'image' / 'audio' entries, got {value!r}"
            )
        value = MappingProxyType({"image": False, "audio": False, **dict(value)})
    return value


@dataclass(frozen=True)
class ResolvedOptions:
    """Every portable option with a concrete value, plus the native options left to pass through.

    `sampler_knobs()` gives what the sampler needs: `{}` for greedy, `temperature` and `top_k` for
    top-k, `temperature` and `top_p` for top-p.
    """

    max_tokens: int
    sampler: str
    temperature: float
    top_k: int
    top_p: float
    seed: int | None
    enable_thinking: bool
    stop: tuple[str, ...]
    multimodal: Mapping[str, bool]
    passthrough: Mapping[str, Any] = field(default_factory=dict)
    #: the portable options that were given (canonically or natively), not defaulted
    given: frozenset[str] = frozenset()

    @property
    def greedy(self) -> bool:
        return self.sampler == "greedy"

    def sampler_knobs(self) -> dict[str, Any]:
        """`{}` (greedy), `{"temperature", "top_k"}` (top-k) or `{"temperature", "top_p"}` (top-p)."""
        if self.sampler == "top-k":
            return {"temperature": self.temperature, "top_k": self.top_k}
        if self.sampler == "top-p":
            return {"temperature": self.temperature, "top_p": self.top_p}
        return {}


@dataclass(frozen=True)
class GenerationOptions:
    """Portable generation options; `None` means "not given" (the runtime-native name or the default).

    >>> opts = GenerationOptions(max_tokens=64, native={"max_new_tokens": 8, "repetition_penalty": 1.1})
    >>> r = opts.resolve({"max_tokens": "max_new_tokens"})
    >>> r.max_tokens, r.sampler, r.enable_thinking, dict(r.passthrough)
    (64, 'greedy', False, {'repetition_penalty': 1.1})
    >>> GenerationOptions(native={"max_new_tokens": 8}).resolve({"max_tokens": "max_new_tokens"}).max_tokens
    8

    `native` holds options in the runtime's own spelling: those that name a portable option (as the
    adapter declares, e.g. transformers `max_new_tokens`) are its fallback value, the rest are sent
    to the runtime as they are. Invalid values raise `ValueError` naming the option.
    """

    max_tokens: int | None = None
    sampler: str | None = None
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = None
    enable_thinking: bool | None = None
    stop: str | Sequence[str] | None = None
    multimodal: Mapping[str, bool] | None = None
    native: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in _CANONICAL:
            object.__setattr__(self, name, _check(name, getattr(self, name)))
        if not isinstance(self.native, Mapping) or not all(isinstance(k, str) for k in self.native):
            raise ValueError(f"native must be a mapping of option names to values, got {self.native!r}")
        object.__setattr__(self, "native", MappingProxyType(dict(self.native)))

    @classmethod
    def coerce(cls, value: GenerationOptions | Mapping[str, Any] | None) -> GenerationOptions:
        """`value` as options: an instance, None (all defaults), or a flat mapping in which portable
        names are portable options and every other key is a native option.

        >>> GenerationOptions.coerce({"max_tokens": 5, "grammar": "root ::= x"}).native["grammar"]
        'root ::= x'
        """
        if value is None:
            return cls()
        if isinstance(value, GenerationOptions):
            return value
        if not isinstance(value, Mapping):
            raise TypeError(f"options must be GenerationOptions or a mapping, not {type(value).__name__}")
        canonical = {k: v for k, v in value.items() if k in _CANONICAL}
        native = dict(value.get("native") or {})
        native.update({k: v for k, v in value.items() if k not in _CANONICAL and k != "native"})
        return cls(**canonical, native=native)

    def merged(self, other: GenerationOptions | Mapping[str, Any] | None) -> GenerationOptions:
        """These options with every option `other` sets overriding them (native ones merged by key)."""
        if other is None:
            return self
        other = GenerationOptions.coerce(other)
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "native"}
        values.update({name: getattr(other, name) for name in _CANONICAL if getattr(other, name) is not None})
        return GenerationOptions(**values, native={**self.native, **other.native})

    def resolve(self, native_names: Mapping[str, NativeName] | None = None) -> ResolvedOptions:
        """Concrete values: canonical, else the native fallback named in `native_names`, else default.

        `native_names` maps a portable option to the runtime's name for it (`{"max_tokens":
        "max_new_tokens"}`), or to `(name, convert)` when the native value is spelled differently
        (transformers `do_sample` for `sampler`). A native fallback is validated like the canonical
        option. Native options that are nobody's fallback are returned in `passthrough`; a native
        fallback that lost to its canonical option is dropped (the canonical value is what the
        runtime gets).
        """
        names = dict(native_names or {})
        unknown = set(names) - set(_CANONICAL)
        if unknown:
            raise ValueError(f"unknown portable option(s) {sorted(unknown)}")
        consumed = {n if isinstance(n, str) else n[0] for n in names.values()}
        values: dict[str, Any] = {}
        given = set()
        for name in _CANONICAL:
            value = getattr(self, name)
            spec = names.get(name)
            native_name, convert = (spec, None) if isinstance(spec, str) or spec is None else spec
            if value is None and native_name is not None and native_name in self.native:
                try:
                    raw = self.native[native_name]
                    value = _check(name, convert(raw) if convert is not None else raw)
                except ValueError as e:
                    raise ValueError(f"native option {native_name!r} (for {name}): {e}") from None
            if value is not None:
                given.add(name)
            values[name] = DEFAULTS[name] if value is None else value
        passthrough = {k: v for k, v in self.native.items() if k not in consumed}
        return ResolvedOptions(**values, passthrough=MappingProxyType(passthrough), given=frozenset(given))
