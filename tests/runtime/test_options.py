"""GenerationOptions: the contract's defaults, canonical-over-native precedence, validation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatparse.runtime import DEFAULTS, GenerationOptions

HF_NAMES = {"max_tokens": "max_new_tokens", "sampler": ("do_sample", lambda v: "top-p" if v else "greedy")}


def test_defaults_are_the_contracts() -> None:
    r = GenerationOptions().resolve()
    assert (r.max_tokens, r.sampler, r.temperature, r.top_k, r.top_p) == (1024, "greedy", 0.7, 40, 0.95)
    assert r.seed is None and r.enable_thinking is False and r.stop == ()
    assert dict(r.multimodal) == {"image": False, "audio": False}
    assert r.given == frozenset() and r.greedy and r.sampler_knobs() == {}


def test_canonical_wins_native_is_the_fallback() -> None:
    both = GenerationOptions(max_tokens=64, native={"max_new_tokens": 8})
    assert both.resolve(HF_NAMES).max_tokens == 64
    assert "max_new_tokens" not in both.resolve(HF_NAMES).passthrough  # the loser is not sent
    native_only = GenerationOptions(native={"max_new_tokens": 8, "do_sample": True})
    r = native_only.resolve(HF_NAMES)
    assert (r.max_tokens, r.sampler) == (8, "top-p")
    assert r.given == {"max_tokens", "sampler"}
    # without the adapter's names, a native option is just passed through
    assert GenerationOptions(native={"max_new_tokens": 8}).resolve().passthrough == {"max_new_tokens": 8}


def test_sampler_knobs() -> None:
    assert GenerationOptions(sampler="greedy", temperature=1.5, top_k=3).resolve().sampler_knobs() == {}
    assert GenerationOptions(sampler="top-k", top_k=3).resolve().sampler_knobs() == {
        "temperature": 0.7,
        "top_k": 3,
    }
    assert GenerationOptions(sampler="top-p", top_p=0.5, temperature=1).resolve().sampler_knobs() == {
        "temperature": 1.0,
        "top_p": 0.5,
    }


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": True}, "max_tokens"),
        ({"sampler": "beam"}, "sampler must be one of greedy, top-k, top-p"),
        ({"temperature": -1}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"top_k": 0}, "top_k"),
        ({"top_p": 0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"seed": 1.5}, "seed"),
        ({"enable_thinking": "yes"}, "enable_thinking"),
        ({"stop": [1]}, "stop"),
        ({"stop": [""]}, "stop strings must not be empty"),
        ({"multimodal": {"video": True}}, "multimodal"),
        ({"native": {1: 2}}, "native"),
    ],
)
def test_invalid_values_name_the_option(kwargs: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        GenerationOptions(**kwargs)


def test_invalid_native_fallback_names_both() -> None:
    with pytest.raises(ValueError, match="native option 'max_new_tokens' \\(for max_tokens\\)"):
        GenerationOptions(native={"max_new_tokens": -1}).resolve(HF_NAMES)


def test_coerce_and_merge() -> None:
    o = GenerationOptions.coerce({"max_tokens": 5, "grammar": "root ::= x", "native": {"a": 1}})
    assert o.max_tokens == 5 and dict(o.native) == {"a": 1, "grammar": "root ::= x"}
    assert GenerationOptions.coerce(None) == GenerationOptions()
    with pytest.raises(TypeError):
        GenerationOptions.coerce(["max_tokens"])  # type: ignore[arg-type]
    base = GenerationOptions(max_tokens=5, temperature=0.2, native={"a": 1, "b": 2})
    m = base.merged({"temperature": 0.9, "b": 3})
    assert (m.max_tokens, m.temperature, dict(m.native)) == (5, 0.9, {"a": 1, "b": 3})
    assert base.merged(None) is base
    assert GenerationOptions(stop="x").stop == ("x",)


def test_unknown_portable_name_in_mapping() -> None:
    with pytest.raises(ValueError, match="unknown portable option"):
        GenerationOptions().resolve({"max_length": "x"})


options = st.fixed_dictionaries(
    {},
    optional={
        "max_tokens": st.integers(1, 10_000),
        "sampler": st.sampled_from(["greedy", "top-k", "top-p"]),
        "temperature": st.floats(0, 5),
        "top_k": st.integers(1, 100),
        "top_p": st.floats(0.01, 1.0),
        "seed": st.integers(-(2**31), 2**31),
        "enable_thinking": st.booleans(),
    },
)
natives = st.fixed_dictionaries(
    {},
    optional={"max_new_tokens": st.integers(1, 10_000), "do_sample": st.booleans(), "extra": st.integers()},
)


@given(options, natives)
def test_each_value_is_canonical_else_native_else_default(canonical: dict, native: dict) -> None:
    r = GenerationOptions(**canonical, native=native).resolve(HF_NAMES)
    fallback = {"max_tokens": native.get("max_new_tokens")}
    if "do_sample" in native:
        fallback["sampler"] = "top-p" if native["do_sample"] else "greedy"
    for name in ("max_tokens", "sampler", "temperature", "top_k", "top_p", "seed", "enable_thinking"):
        expected = canonical.get(name, fallback.get(name))
        if expected is None:
            expected = DEFAULTS[name]
        assert getattr(r, name) == expected
    assert dict(r.passthrough) == ({"extra": native["extra"]} if "extra" in native else {})
    assert (r.sampler_knobs() == {}) == (r.sampler == "greedy")
