"""Property: through the real SDK, a subscriber joining at any point converges on history.

Whatever the interleaving of creates and appends and wherever a second client attaches, applying
what it receives (the aggregate on first sight, fragments afterwards) yields exactly the stored
aggregates, in channel order, with increasing version serials per message.
"""


from __future__ import annotations

import asyncio
from typing import Any

from ably import MessageAction
from ably.types.message import Message
from hypothesis import given, settings
from hypothesis import strategies as st
from support_emulator import Inbox, emulator_thread, realtime_client, unique_channel  # noqa: F401

from ai_transport.emulator import EmulatorThread

op = st.one_of(
    st.just(("create",)),
    st.tuples(st.just("append"), st.integers(0, 3), st.text(min_size=1, max_size=3)),
    st.tuples(st.just("update"), st.integers(0, 3), st.text(max_size=3)),
)


async def scenario(port: int, ops: list[tuple[Any, ...]], join_at: int, reader_binary: bool) -> None:
    name = unique_channel("prop")
    async with (
        realtime_client(port) as writer,
        realtime_client(port, use_binary_protocol=reader_binary) as reader,
    ):
        wch = writer.channels.get(name)
        await wch.attach()
        serials: list[str] = []
        inbox = Inbox()
        expected_deliveries = 0
        for i, o in enumerate([("create",), *ops]):
            if i == join_at:
                await reader.channels.get(name).subscribe(inbox.push)
            if o[0] == "create" or not serials:
                serials += (await wch.publish("n", "")).serials
            elif o[0] == "append":
                await wch.append_message(Message(serial=serials[o[1] % len(serials)], data=o[2]))
            else:
                await wch.update_message(Message(serial=serials[o[1] % len(serials)], data=o[2]))
            if i >= join_at:
                expected_deliveries += 1
        got = await inbox.take(expected_deliveries)
        await inbox.quiet(0.05)
        view: dict[str, str] = {}
        last_version: dict[str, str] = {}
        for m in got:
            if m.action == MessageAction.MESSAGE_APPEND:
                assert m.serial in view, "a fragment for a message this client never saw"
                view[m.serial] += m.data
            else:
                view[m.serial] = m.data or ""
            assert m.version.serial > last_version.get(m.serial, "")
            last_version[m.serial] = m.version.serial
        history = {m.serial: m for m in (await wch.history(limit=1000)).items}
        for serial, text in view.items():
            assert history[serial].data == text
            assert history[serial].version.serial == last_version[serial]


@settings(max_examples=15, deadline=None)
@given(ops=st.lists(op, max_size=12), join=st.integers(0, 13), reader_binary=st.booleans())
def test_late_subscriber_converges_on_history(
    emulator_thread: EmulatorThread, ops: list[tuple[Any, ...]], join: int, reader_binary: bool
) -> None:
    asyncio.run(scenario(emulator_thread.port, ops, min(join, len(ops)), reader_binary))
