"""The decoder's plain-dict fast paths decode exactly as its general path (Hypothesis).

:meth:`~ai_transport.codec.core.decoder.StreamDecoder.decode` reads the common shapes (a plain dict
create, append or first update of a stream, as history gives a stream's aggregate) directly and
leaves every other shape to the general reader. The same wire given as a read-only mapping
(``MappingProxyType``, which only the general path reads) must decode to the same results, message
by message, whatever the wire: live, joined late (aggregates as updates), or with junk interleaved.
"""

from __future__ import annotations

import copy
from types import MappingProxyType

from hypothesis import given
from hypothesis import strategies as st
from support_codec_decoder import JUNK_MESSAGES, late_join, live_wires

from ai_transport.codec.decoder import Decoder


@given(live_wires(), st.data(), st.lists(st.tuples(st.integers(0, 10**6), JUNK_MESSAGES), max_size=4))
def test_plain_dicts_decode_as_the_general_path(wire, data, junk):
    k = data.draw(st.integers(0, len(wire)), label="join point")
    sequence = late_join(wire, k)
    for pos, msg in junk:
        sequence.insert(pos % (len(sequence) + 1), msg)
    fast, general = Decoder(), Decoder()
    for message in sequence:
        through_general = MappingProxyType(copy.deepcopy(message)) if type(message) is dict else copy.deepcopy(message)
        assert fast.decode(copy.deepcopy(message)) == general.decode(through_general)
    assert fast.tracked_streams == general.tracked_streams
