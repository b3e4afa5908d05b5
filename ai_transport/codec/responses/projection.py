"""The reducer's state: one conversation node's messages in progress (``OpenAIProjection`` of 0.8.0).

:class:`ReducerState` holds the messages in first-touch order, each an :class:`_Entry` with the
indexes that keep every fold O(1); streamed text is accumulated as chunks (:func:`_append_text`)
and joined when the state is read (:func:`_flush`). Pure; mutated only by the fold.
"""

from __future__ import annotations

from typing import Any

from .js_values import _ABSENT, _js_plus, _key

__all__ = ["DeltaRun", "ReducerState", "init"]


# ---------------------------------------------------------------------------------------------
# State


class _Entry(list[Any]):
    """One message in progress: its items (the entry is their list) plus the indexes that keep
    every fold O(1).

    A list of its items rather than a record holding one: a woken worker keeps every message of
    its history, and the record and its list were two objects the cyclic GC tracks. Compared and
    hashed by identity, as a record is (never by its items).
    """

    __slots__ = (
        "by_item_id",
        "codec_message_id",
        "input_message",
        "outputs_by_call",
        "role",
        "tool_states",
    )

    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__  # type: ignore[assignment]

    def __init__(self, codec_message_id: Any, role: Any) -> None:
        self.codec_message_id = codec_message_id
        self.role = role
        #: key(item id) -> index in the entry of the first item with that id (a message, reasoning
        #: or function_call item: never replaced). Positions, not the items: a dict of atoms the
        #: cyclic GC does not track (a woken worker keeps every message of its history).
        self.by_item_id: dict[Any, int] = {}
        #: key(call_id) -> (call_id, state); insertion-ordered like the JS Map.
        self.tool_states: dict[Any, tuple[Any, dict[str, Any]]] = {}
        #: key(call_id) -> index in the entry of the first ``function_call_output`` with that call_id.
        self.outputs_by_call: dict[Any, int] = {}
        #: The first item that is a ``message`` with an array ``content`` (user-message merge target).
        self.input_message: dict[str, Any] | None = None

    @property
    def items(self) -> list[Any]:
        """The message's items (the entry itself)."""
        return self

    def __repr__(self) -> str:
        return f"_Entry({self.codec_message_id!r}, items={list.__repr__(self)})"

    def push(self, item: dict[str, Any]) -> None:
        index = len(self)
        self.append(item)
        typ = item.get("type")
        if typ == "function_call_output":
            k = _key(item.get("call_id", _ABSENT))
            if k not in self.outputs_by_call and type(k) is not object:
                self.outputs_by_call[k] = index
        elif typ == "message" and self.input_message is None and type(item.get("content")) is list:
            self.input_message = item

    def upsert_output(self, item: dict[str, Any]) -> None:
        index = self.outputs_by_call.get(_key(item.get("call_id", _ABSENT)))
        if index is None:
            self.push(item)
        else:
            self[index] = item

    def merge_state(self, call_id: Any, patch: dict[str, Any]) -> None:
        k = _key(call_id)
        old = self.tool_states.get(k)
        state = dict(old[1]) if old is not None else {}
        for name, value in patch.items():
            if value is _ABSENT:
                state.pop(name, None)
            else:
                state[name] = value
        self.tool_states[k] = (call_id if old is None else old[0], state)


#: ``(type, message_id, item_id, index_key, index, chunks)``: the event ``type``, codec message id,
#: ``item_id`` and (``index_key`` not None) the value at ``index_key`` of the delta event that last
#: appended to ``chunks`` (a pending list of :attr:`ReducerState._pending`). A delta event with the
#: same values (the same objects: identity implies the same JS value) appends to the same part.
DeltaRun = tuple[str, str, Any, "str | None", Any, list[str]]


class ReducerState(list[_Entry]):
    """The projection of one conversation node (``OpenAIProjection`` of 0.8.0). Opaque; mutated by :func:`fold`.

    Streamed text (``text`` / ``refusal`` / ``arguments``) is accumulated as chunks and joined when
    :func:`get_messages` reads the state, so a long stream folds in linear time (JS strings are
    ropes; Python's are not).

    The state is the list of its messages (:class:`_Entry`, in first-touch order) with its indexes
    as slots, not a record holding that list: a woken worker keeps one per node of its history, and
    the list was one more object the cyclic GC tracks. Compared and hashed by identity.
    """

    __slots__ = ("_by_id", "_pending", "_run")

    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__  # type: ignore[assignment]

    def __init__(self) -> None:
        #: key(codec message id) -> index of its message: positions, not the entries (a dict of
        #: atoms, untracked by the cyclic GC).
        self._by_id: dict[Any, int] = {}
        #: (id(obj), key) -> (obj, key, chunks): text appended to ``obj[key]`` not yet joined.
        self._pending: dict[tuple[int, str], tuple[dict[str, Any], str, list[str]]] = {}
        #: The delta run: the last fold appended a delta to pending ``chunks``, and nothing else
        #: touched the state since (:data:`DeltaRun`); None otherwise.
        self._run: DeltaRun | None = None

    @property
    def _messages(self) -> list[_Entry]:
        """The messages in first-touch order (the state itself)."""
        return self

    def __repr__(self) -> str:
        return f"ReducerState(messages={len(self)})"

    def __reduce__(self) -> tuple[Any, tuple[list[_Entry], dict[Any, int]]]:
        _flush(self)
        return (_restored, (list(self), self._by_id))

    def __deepcopy__(self, memo: dict[int, Any]) -> ReducerState:
        import copy

        _flush(self)
        new = ReducerState()
        memo[id(self)] = new
        new.extend(copy.deepcopy(list(self), memo))
        new._by_id = dict(self._by_id)
        return new

    def _ensure(self, role: Any, codec_message_id: Any) -> _Entry:
        k = codec_message_id if type(codec_message_id) is str else _key(codec_message_id)
        at = self._by_id.get(k)
        if at is not None:
            return self[at]
        entry = _Entry(codec_message_id, role)
        if type(k) is not object:
            self._by_id[k] = len(self)
        self.append(entry)
        return entry

    def _item(self, codec_message_id: Any, item_id: Any) -> dict[str, Any] | None:
        at = self._by_id.get(codec_message_id if type(codec_message_id) is str else _key(codec_message_id))
        if at is None:
            return None
        entry = self[at]
        at = entry.by_item_id.get(item_id if type(item_id) is str else _key(item_id))
        return None if at is None else entry[at]


def _restored(messages: list[_Entry], by_id: dict[Any, int]) -> ReducerState:
    """A state unpickled: its messages and their index (nothing pending)."""
    state = ReducerState()
    state.extend(messages)
    state._by_id = by_id
    return state


def _append_text(state: ReducerState, obj: dict[str, Any], key: str, value: Any) -> list[str] | None:
    """JS ``obj[key] += value``, deferred: string chunks are joined by :func:`_flush`.

    Returns the pending chunks ``value`` was appended to (None when it was added at once).
    """
    pk = (id(obj), key)
    pending = state._pending.get(pk)
    if pending is not None:
        if type(value) is str:
            pending[2].append(value)
            return pending[2]
        obj[key] = "".join(pending[2])
        del state._pending[pk]
    cur = obj.get(key, _ABSENT)
    if type(cur) is str and type(value) is str:
        if not cur:  # the first delta of a part seeded empty: nothing to join yet (a history
            obj[key] = value  # aggregate's one delta then leaves no pending entry behind)
            return None
        chunks = [cur, value]
        state._pending[pk] = (obj, key, chunks)
        return chunks
    obj[key] = _js_plus(cur, value)
    return None


def _replace_text(state: ReducerState, obj: dict[str, Any], key: str, value: Any) -> None:
    """JS ``obj[key] = value`` for a streamed field (drops pending chunks)."""
    pending = state._pending
    if pending:
        pending.pop((id(obj), key), None)
        if not pending:
            state._pending = {}  # (a fresh dict is untracked by the GC; one emptied stays tracked)
    if value is _ABSENT:  # (assigning ``undefined`` removes the key from the JSON view)
        obj.pop(key, None)
    else:
        obj[key] = value


def _flush(state: ReducerState) -> None:
    """Join every pending streamed text into its object."""
    state._run = None
    pending = state._pending
    if pending:
        for obj, key, chunks in pending.values():
            obj[key] = "".join(chunks)
        state._pending = {}  # (not .clear(): an emptied dict stays GC-tracked until a full collection)


def init() -> ReducerState:
    """A fresh, empty projection (``init()``)."""
    return ReducerState()
