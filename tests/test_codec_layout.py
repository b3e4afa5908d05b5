"""The codec layer's layout states its architecture: a core that knows no codec, one package per codec.

The core (``ai_transport/codec/core``) never imports a codec package, and neither codec imports the
other; every old Responses module path stays importable.
"""

from __future__ import annotations

import importlib

import pytest
from test_layout import PKG, imports_of

from ai_transport.errors import InvalidTypeError

CODEC = PKG / "codec"


@pytest.mark.parametrize("path", sorted((CODEC / "core").glob("*.py")), ids=lambda p: p.name)
def test_core_imports_no_codec(path) -> None:
    bad = {m for m in imports_of(path) if m.startswith(("ai_transport.codec.responses", "ai_transport.codec.vercel"))}
    assert not bad, f"{path.name} imports {sorted(bad)}"


@pytest.mark.parametrize(("package", "other"), [("responses", "vercel"), ("vercel", "responses")])
def test_codecs_do_not_import_each_other(package: str, other: str) -> None:
    for path in sorted((CODEC / package).glob("*.py")):
        bad = {m for m in imports_of(path) if m.startswith(f"ai_transport.codec.{other}")}
        assert not bad, f"{path.name} imports {sorted(bad)}"


@pytest.mark.parametrize("module", ["headers", "decoder", "encoder", "codec", "types", "inputs", "reducer", "coalesce"])
def test_old_module_paths_still_import(module: str) -> None:
    assert importlib.import_module(f"ai_transport.codec.{module}").__doc__


def test_vercel_encoder_names_a_non_string_delta() -> None:
    # 0.8.0 would append the text "undefined" / "5"; we refuse, naming the field (as the Responses codec).
    from ai_transport.codec import UIMessageCodec
    from ai_transport.codec.core.table_encoder import TableEncoderCore
    from ai_transport.codec.vercel.wire import INPUT, OUTPUT

    assert UIMessageCodec.adapter_tag == "vercel-ai-sdk-ui-message"
    core = TableEncoderCore(OUTPUT, INPUT)
    (_op,) = core.encode_output({"type": "tool-input-start", "toolCallId": "c", "toolName": "t"})
    core.stream_started("c", ["s1"])
    with pytest.raises(InvalidTypeError, match=r"tool-input-delta\.inputTextDelta must be a string, got number"):
        core.encode_output({"type": "tool-input-delta", "toolCallId": "c", "inputTextDelta": 5})
    with pytest.raises(InvalidTypeError, match=r"text-start\.id must be a string, got undefined"):
        core.encode_output({"type": "text-start"})
