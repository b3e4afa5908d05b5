"""The tree passes each wire's verified publisher to the codec's fold as ``author`` (what the
per-publisher bounds of a projection count by, e.g. the Vercel reducer's answers waiting for
their tool call), on the incremental fold and on a refold alike; a custom codec whose fold takes
no ``author`` is folded without it."""

from __future__ import annotations

from typing import Any, ClassVar

from test_ownership_ledger import prompt, serial

from ai_transport.codec import ResponsesCodec
from ai_transport.conversation.tree import Tree, WireApplier


def run_input(run_id: str, who: str, n: int) -> dict[str, Any]:
    wire = prompt(f"in-{n}", who, n, text=f"{who} {n}")
    wire["extras"]["ai"]["transport"]["run-id"] = run_id
    return wire


class Recording(ResponsesCodec):
    authors: ClassVar[list[tuple[str, Any]]] = []

    @staticmethod
    def fold(state: Any, direction: str, event: Any, message_id: Any = None, serial: str = "", author: Any = None) -> Any:
        Recording.authors.append((serial, author))
        return ResponsesCodec.fold(state, direction, event, message_id=message_id, serial=serial)


class NoAuthor(ResponsesCodec):
    @staticmethod
    def fold(state: Any, direction: str, event: Any, message_id: Any = None, serial: str = "") -> Any:
        return ResponsesCodec.fold(state, direction, event, message_id=message_id, serial=serial)


def test_the_author_reaches_the_fold_live_and_in_a_refold() -> None:
    Recording.authors = []
    tree = Tree(Recording)
    applier = WireApplier(tree, Recording.create_decoder())
    applier.apply(run_input("r", "bob", 5))
    applier.apply(run_input("r", "alice", 3))  # older: the run node refolds from its log
    assert ("00000000000000000005", "bob") in Recording.authors[:1]
    refold = Recording.authors[1:]
    assert sorted(set(refold)) == [("00000000000000000003", "alice"), ("00000000000000000005", "bob")]
    assert serial(3) < serial(5)


def test_a_codec_without_author_is_folded_without_it() -> None:
    tree = Tree(NoAuthor)
    applier = WireApplier(tree, NoAuthor.create_decoder())
    applier.apply(run_input("r", "bob", 5))
    applier.apply(run_input("r", "alice", 3))
    node = tree.get_run_node("r")
    assert node is not None
    texts = [i["content"][0]["text"] for m in NoAuthor.get_messages(node.projection) for i in m.message.items]
    assert texts == ["alice 3", "bob 5"]
