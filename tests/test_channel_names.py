"""Ably's channel-name rule, one rule for the in-process channel and the emulator (40010)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ai_transport._channel_names import INVALID_CHANNEL_NAME, channel_name_problem
from ai_transport.channels import InProcessHub
from ai_transport.emulator.attach import check_channel_name
from ai_transport.emulator.protocol import EmulatorError
from ai_transport.errors import InvalidArgumentError

REFUSED = ["", ":bad", ":", "[unclosed", "[meta]", "a\nb", "a\rb"]
ACCEPTED = ["chat", "a:b", "ns:chat", "[?rewind=1]chat", "[meta]log", "x]", "a b", "ünïcode", "*"]


@pytest.mark.parametrize("name", REFUSED)
def test_the_in_process_channel_refuses_what_ably_refuses(name: str) -> None:
    client = InProcessHub().client("me")
    with pytest.raises(InvalidArgumentError) as info:
        client.channel(name)
    assert info.value.code == INVALID_CHANNEL_NAME == 40010 and info.value.status_code == 400
    assert "Invalid channel name" in info.value.message


@pytest.mark.parametrize("name", ACCEPTED)
def test_valid_names_are_accepted_by_both(name: str) -> None:
    assert InProcessHub().client("me").channel(name).name == name
    assert check_channel_name(name) == name


def test_a_non_string_name_is_refused() -> None:
    with pytest.raises(InvalidArgumentError) as info:
        InProcessHub().client("me").channel(None)  # type: ignore[arg-type]
    assert info.value.code == 40010


@given(st.text(alphabet=st.sampled_from("ab:[]?=\n\r é"), max_size=8))
def test_the_in_process_channel_and_the_emulator_agree(name: str) -> None:
    problem = channel_name_problem(name)
    try:
        InProcessHub().client("me").channel(name)
        in_process = None
    except InvalidArgumentError as e:
        assert e.code == 40010
        in_process = e.message
    try:
        check_channel_name(name)
        emulated = None
    except EmulatorError as e:
        assert (e.code, e.status_code) == (40010, 400)
        emulated = e.message
    assert (in_process is None) == (emulated is None) == (problem is None)
    if problem is not None:
        assert in_process == f"unable to get channel; {problem}" and emulated == problem
    # the rule itself, stated independently
    refused = (
        name == "" or "\n" in name or "\r" in name or name.startswith(":")
        or (name.startswith("[") and ("]" not in name or name.index("]") == len(name) - 1))
    )
    assert (problem is not None) == refused
