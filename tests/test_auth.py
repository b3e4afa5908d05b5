"""ai_transport.auth: least-privilege capabilities and token requests, checked against the ably SDK's
own signing and used over the emulator with the real ``ably`` SDK."""

from __future__ import annotations

import json

import pytest
from ably import AblyException
from ably.types.message import Message
from ably.types.tokenrequest import TokenRequest
from support_emulator import realtime_client, unique_channel

from ai_transport.auth import (
    agent_capability,
    agent_token_params,
    browser_capability,
    browser_token_params,
    create_token_request,
    request_token,
    token_request_callback,
)
from ai_transport.emulator import Emulator
from ai_transport.emulator.client import client_options
from ai_transport.errors import InvalidArgumentError


def test_capabilities_are_least_privilege() -> None:
    assert browser_capability("conv:1") == {"conv:1": ["subscribe", "publish", "history", "presence"]}
    assert agent_capability(["conv:*"]) == {
        "conv:*": ["subscribe", "publish", "history", "presence", "message-update-own", "message-delete-own"]
    }
    params = browser_token_params("alice", "conv:1", ttl_ms=60_000)
    assert params["client_id"] == "alice" and params["ttl"] == 60_000
    assert json.loads(params["capability"]) == browser_capability("conv:1")
    assert agent_token_params()["client_id"] == "agent"


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: browser_token_params("", "c"), "client_id"),
        (lambda: browser_token_params("*", "c"), "client_id"),
        (lambda: browser_token_params(None, "c"), "client_id"),  # type: ignore[arg-type]
        (lambda: browser_token_params("a", []), "channels"),
        (lambda: browser_token_params("a", ["ok", ""]), "channels[1]"),
        (lambda: agent_token_params("agent", "c", ttl_ms=0), "ttl_ms"),
        (lambda: create_token_request("no-colon", {}), "key"),
        (lambda: create_token_request("a:b", "x"), "token_params"),  # type: ignore[arg-type]
    ],
)
def test_bad_arguments_name_the_field(call, field: str) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        call()
    assert field in info.value.message and info.value.code == 40003


def test_token_request_is_signed_as_the_ably_sdk_signs() -> None:
    params = browser_token_params("alice", "conv:1")
    ours = create_token_request("app.key:s3cret", params, timestamp_ms=1_700_000_000_000, nonce="n1")
    theirs = TokenRequest(
        key_name="app.key",
        client_id="alice",
        nonce="n1",
        capability=params["capability"],
        timestamp=1_700_000_000_000,
        ttl=params["ttl"],
    )
    theirs.sign_request("s3cret")
    assert ours["mac"] == theirs.mac
    assert ours["keyName"] == "app.key" and ours["clientId"] == "alice"


async def test_roles_over_the_emulator_with_the_ably_sdk(emulator: Emulator) -> None:
    name = unique_channel("conv")
    agent_cb = token_request_callback(emulator.key, agent_token_params("agent", name))
    user_cb = token_request_callback(emulator.key, browser_token_params("alice", name))
    async with realtime_client(emulator, token=None, auth_callback=agent_cb) as agent, realtime_client(
        emulator, token=None, auth_callback=user_cb
    ) as user:
        assert agent.connection.connection_details.client_id == "agent"
        assert user.connection.connection_details.client_id == "alice"
        ach, uch = agent.channels.get(name), user.channels.get(name)
        await ach.attach()
        await uch.attach()
        serial = (await ach.publish(Message(name="ai-output", data="Hel"))).serials[0]
        await ach.append_message(Message(serial=serial, data="lo"))  # its own message: allowed
        await uch.publish(Message(name="ai-input", data="hi"))  # the user may publish inputs
        for mutate in (uch.append_message, uch.update_message):
            with pytest.raises(AblyException) as info:
                await mutate(Message(serial=serial, data=" injected"))
            assert info.value.code == 40160
        other = user.channels.get(unique_channel("elsewhere"))
        with pytest.raises(AblyException) as info:
            await other.attach()
        assert info.value.code == 40160
        assert [m.data for m in (await uch.history()).items] == ["hi", "Hello"]
    details = await request_token(emulator.key, browser_token_params("bob", name), **client_options(emulator))
    assert details.client_id == "bob"
    assert {k: sorted(v) for k, v in dict(details.capability).items()} == {name: sorted(browser_capability(name)[name])}


@pytest.fixture
async def emulator():
    async with Emulator(port=0) as emu:
        yield emu
