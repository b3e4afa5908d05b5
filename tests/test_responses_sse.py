"""The SSE decoder: WHATWG event-stream rules, and properties over random framings and splits."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ai_transport.responses.sse import ServerSentEvent, SSEDecoder, encode_event


def decode(*chunks: bytes) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    events = []
    for chunk in chunks:
        events += decoder.feed(chunk)
    return events + decoder.close()


def test_event_data_and_id_fields():
    assert decode(b"event: response.created\nid: 7\ndata: {\"a\":1}\n\n") == [
        ServerSentEvent(data='{"a":1}', event="response.created", id="7")
    ]


def test_multi_line_data_joined_with_newlines():
    assert decode(b"data: one\ndata:two\ndata:  three\ndata\n\n")[0].data == "one\ntwo\n three\n"


def test_crlf_cr_and_lf_line_endings_mixed():
    assert decode(b"data: a\r\ndata: b\rdata: c\n\r\nevent: x\rdata: d\r\r") == [
        ServerSentEvent(data="a\nb\nc"),
        ServerSentEvent(data="d", event="x"),
    ]


def test_crlf_split_between_chunks_is_one_line_end():
    assert decode(b"data: a\r", b"\n", b"\r", b"\n") == [ServerSentEvent(data="a")]
    # A lone CR followed later by LF in the next chunk must not create an extra blank line.
    assert decode(b"data: a\r", b"\ndata: b\r\n\r\n") == [ServerSentEvent(data="a\nb")]


def test_comments_and_unknown_fields_are_ignored():
    assert decode(b": keep-alive\n\n:another\nfoo: bar\ndata: x\n\n") == [ServerSentEvent(data="x")]


def test_event_without_data_is_not_dispatched_and_resets_the_type():
    assert decode(b"event: ping\n\ndata: x\n\n") == [ServerSentEvent(data="x", event="message")]


def test_id_persists_and_nul_ids_are_ignored():
    events = decode(b"id: 1\ndata: a\n\ndata: b\n\nid: bad\x00\ndata: c\n\nid\ndata: d\n\n")
    assert [e.id for e in events] == ["1", "1", "1", ""]


def test_retry_accepts_digits_only():
    events = decode(b"retry: 1500\ndata: a\n\nretry: 1.5\ndata: b\n\n")
    assert [e.retry for e in events] == [1500, None]


def test_bom_is_skipped_once_and_utf8_split_inside_a_character():
    raw = "\ufeffdata: héllo ✓\n\n".encode()
    assert decode(*[raw[i : i + 1] for i in range(len(raw))]) == [ServerSentEvent(data="héllo ✓")]
    # Only the stream's first BOM is skipped: later, it makes the field name "\ufeffdata" (unknown).
    assert decode(b"data: a\n\n\xef\xbb\xbfdata: b\n\n") == [ServerSentEvent(data="a")]


def test_unterminated_event_at_eof_is_discarded():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: complete\n\ndata: cut") == [ServerSentEvent(data="complete")]
    assert decoder.close() == []
    with pytest.raises(RuntimeError):
        decoder.feed(b"x")


def test_no_done_sentinel_special_casing():
    assert decode(b"data: [DONE]\n\n") == [ServerSentEvent(data="[DONE]")]


def test_encode_event_rejects_line_breaks():
    with pytest.raises(ValueError):
        encode_event("a\rb")
    with pytest.raises(ValueError):
        encode_event("a", event="x\ny")


# -- properties -------------------------------------------------------------------------------------

line_text = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=30)
name_text = st.text(
    st.characters(blacklist_characters="\r\n\x00", blacklist_categories=("Cs",)), min_size=1, max_size=12
)
frames = st.lists(
    st.tuples(
        st.lists(line_text, min_size=1, max_size=4).map("\n".join),  # data, possibly multi-line / empty lines
        st.one_of(st.none(), name_text),  # event name
        st.one_of(st.none(), name_text),  # id
        st.booleans(),  # a comment line before the frame
    ),
    max_size=8,
)
newlines = st.sampled_from(["\n", "\r\n", "\r"])


@given(frames=frames, newline=newlines, data=st.data())
def test_random_events_survive_any_framing_and_any_byte_split(frames, newline, data):
    wire = b""
    expected = []
    last_id = ""
    for payload, event, ident, comment in frames:
        if comment:
            wire += f": comment{newline}".encode()
        wire += encode_event(payload, event=event, id=ident, newline=newline)
        last_id = ident if ident is not None else last_id
        expected.append(ServerSentEvent(data=payload, event=event or "message", id=last_id))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=12)))
    chunks = [wire[a:b] for a, b in zip([0, *cuts], [*cuts, len(wire)])]
    assert decode(*chunks) == expected


@given(frames=frames, data=st.data())
def test_line_ending_style_does_not_change_the_events(frames, data):
    styles = data.draw(st.lists(newlines, min_size=len(frames), max_size=len(frames)))
    mixed = b"".join(encode_event(p, event=e, id=i, newline=nl) for (p, e, i, _), nl in zip(frames, styles))
    plain = b"".join(encode_event(p, event=e, id=i) for p, e, i, _ in frames)
    assert decode(mixed) == decode(plain)


@given(payload=st.binary(max_size=200), data=st.data())
def test_decoder_never_crashes_and_is_split_invariant(payload, data):
    cuts = sorted(data.draw(st.lists(st.integers(0, len(payload)), max_size=8)))
    chunks = [payload[a:b] for a, b in zip([0, *cuts], [*cuts, len(payload)])]
    assert decode(*chunks) == decode(payload)
