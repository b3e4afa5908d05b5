"""Options: validation messages and the three-layer merge (headers / retry key by key, rest wholesale)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ai_transport.responses import (
    InvalidResponsesOptionsError,
    ResponsesClient,
    ResponsesOptions,
    RetrySettings,
    merge_options,
    resolve_options,
)


def test_request_body_sends_set_api_options_and_forces_store_and_stream():
    options = resolve_options(
        {"model": "gpt-5.1", "reasoning": {"effort": "low"}, "headers": {"a": "b"}, "timeout": 5.0,
         "retry": {"max_retries": 0}, "extra_body": {"x_custom": 1}, "include": ["reasoning.encrypted_content"]}
    )
    body = options.request_body([{"role": "user", "content": "hi"}])
    assert body == {
        "model": "gpt-5.1",
        "reasoning": {"effort": "low"},
        "include": ["reasoning.encrypted_content"],
        "x_custom": 1,
        "input": [{"role": "user", "content": "hi"}],
        "store": False,
        "stream": True,
    }


def test_model_is_required_to_build_a_request():
    with pytest.raises(InvalidResponsesOptionsError) as info:
        resolve_options({}).request_body([])
    assert info.value.fields == ["model"]


def test_union_type_errors_are_folded_into_one_field_message():
    with pytest.raises(InvalidResponsesOptionsError) as info:
        resolve_options({"tool_choice": 5})
    assert info.value.fields == ["tool_choice"]
    assert "got number" in info.value.message


def test_several_bad_fields_are_all_named():
    with pytest.raises(InvalidResponsesOptionsError) as info:
        resolve_options({"background": True, "top_p": 2, "unknown_thing": 1})
    assert sorted(info.value.fields) == ["background", "top_p", "unknown_thing"]


def test_retry_delay_backoff_is_capped_and_honours_retry_after():
    retry = RetrySettings(initial_delay=1.0, multiplier=2.0, max_delay=5.0, jitter=0.0)
    assert [retry.delay(n) for n in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert retry.delay(0, retry_after=3.0) == 3.0 and retry.delay(0, retry_after=60.0) == 5.0


@given(st.integers(0, 10), st.floats(0, 1))
def test_retry_delay_with_jitter_stays_within_bounds(n, jitter):
    retry = RetrySettings(initial_delay=0.5, multiplier=2.0, max_delay=8.0, jitter=jitter)
    base = min(8.0, 0.5 * 2.0**n)
    assert max(0.0, base * (1 - jitter)) - 1e-9 <= retry.delay(n) <= min(8.0, base * (1 + jitter)) + 1e-9


def test_options_instances_count_only_their_set_fields_as_a_layer():
    low = ResponsesOptions(model="a", temperature=0.5, retry=RetrySettings(max_retries=5))
    high = ResponsesOptions(model="b", retry=RetrySettings(jitter=0.0))
    merged = resolve_options(low, high)
    assert merged.model == "b" and merged.temperature == 0.5
    assert merged.retry == RetrySettings(max_retries=5, jitter=0.0)


def test_headers_none_drops_inherited_headers_and_header_none_removes_one():
    assert merge_options({"headers": {"a": "1", "b": "2"}}, {"headers": None}, {"headers": {"c": "3"}}) == {
        "headers": {"c": "3"}
    }
    merged = resolve_options({"headers": {"A": "1", "b": "2"}}, {"headers": {"a": None}})
    assert merged.effective_headers() == {"b": "2"}


def test_client_validates_defaults_at_construction_and_with_options_layers():
    with pytest.raises(InvalidResponsesOptionsError):
        ResponsesClient(base_url="http://127.0.0.1:9/v1", temperature="hot")
    client = ResponsesClient(base_url="http://127.0.0.1:9/v1", model="a", headers={"x": "1"}, reasoning={"e": 1})
    child = client.with_options(headers={"y": "2"}, reasoning={"f": 2})
    assert child.defaults["headers"] == {"x": "1", "y": "2"} and child.defaults["reasoning"] == {"f": 2}
    assert client.defaults["headers"] == {"x": "1"}  # the parent is unchanged
    resolved = child.resolve_options({"model": "b"}, {"headers": {"x": "3"}})
    assert resolved.model == "b" and resolved.effective_headers() == {"y": "2", "x": "3"}


# -- the merge property -----------------------------------------------------------------------------

header_names = st.sampled_from(["X-A", "x-a", "X-B", "Authorization", "x-c"])
header_values = st.one_of(st.none(), st.text(max_size=5))
retry_fields = st.fixed_dictionaries(
    {},
    optional={
        "max_retries": st.integers(0, 5),
        "initial_delay": st.floats(0, 2),
        "max_delay": st.floats(0, 10),
        "jitter": st.floats(0, 1),
    },
)
wholesale_values = {
    "model": st.one_of(st.none(), st.text(min_size=1, max_size=5)),
    "reasoning": st.one_of(st.none(), st.dictionaries(st.sampled_from(["effort", "summary"]), st.text(max_size=3))),
    "metadata": st.one_of(st.none(), st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2)),
    "tools": st.one_of(st.none(), st.lists(st.fixed_dictionaries({"type": st.just("function"),
                                                                  "name": st.text(max_size=3)}), max_size=2)),
    "max_output_tokens": st.one_of(st.none(), st.integers(1, 1000)),
}
layer = st.fixed_dictionaries(
    {},
    optional={
        "headers": st.one_of(st.none(), st.dictionaries(header_names, header_values, max_size=4)),
        "retry": st.one_of(st.none(), retry_fields),
        **wholesale_values,
    },
)


def expected_merge(layers):
    headers: dict | None = None
    retry: dict | None = None
    others: dict = {}
    for lay in layers:
        for key, value in lay.items():
            if key == "headers":
                if value is None:
                    headers = None
                    continue
                headers = dict(headers or {})
                for name, v in value.items():
                    for old in [k for k in headers if k.lower() == name.lower()]:
                        del headers[old]
                    headers[name] = v
            elif key == "retry":
                retry = None if value is None else {**(retry or {}), **value}
            else:
                others[key] = value
    return headers, retry, others


@given(st.lists(layer, min_size=3, max_size=3))
def test_merge_headers_and_retry_key_by_key_everything_else_wholesale(layers):
    merged = merge_options(*layers)
    headers, retry, others = expected_merge(layers)
    set_anywhere = {k for lay in layers for k in lay}
    assert set(merged) == set_anywhere
    if "headers" in set_anywhere:
        assert merged["headers"] == headers
        # Case-insensitive: at most one spelling of each header name survives.
        names = [k.lower() for k in merged["headers"] or {}]
        assert len(names) == len(set(names))
    if "retry" in set_anywhere:
        assert merged["retry"] == retry
    for key, value in others.items():
        last = [lay[key] for lay in layers if key in lay][-1]
        assert merged[key] == value == last  # the whole value of the last layer, never a blend
    resolved = resolve_options(*layers)
    assert resolved.effective_headers() == {k: v for k, v in (headers or {}).items() if v is not None}
    assert resolved.effective_retry() == RetrySettings(**(retry or {}))
    for key in wholesale_values:
        assert getattr(resolved, key) == others.get(key)


@given(st.lists(layer, min_size=1, max_size=4))
def test_merge_is_associative(layers):
    split = len(layers) // 2
    left = merge_options(*layers[:split])
    assert merge_options(left, *layers[split:]) == merge_options(*layers)
