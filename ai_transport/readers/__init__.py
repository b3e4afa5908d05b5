"""Pure readers over run messages (``OpenAIMessage`` lists), input hygiene, preflight, chat shape.

- :mod:`.calls` — the four interop readers of ``@ably/ai-transport@0.8.0``.
- :mod:`.hygiene` — ``sanitize_input``, the whole replay hygiene; its parts: :mod:`.input_items`
  (item kinds, predicates, ``Change``), :mod:`.reasoning_sweep` (the reasoning pairing sweep,
  ``drop_reasoning``) and :mod:`.fingerprints` (replay fingerprints).
- :mod:`.preflight` — offline prediction (``preflight``/``check``) and ``repair`` of the API's 400s.
- :mod:`.chat` — Chat Completions conversation shape helpers.
"""

from .calls import (
    CallIdSet,
    approved_unexecuted_calls,
    resolved_call_ids,
    to_responses_input,
    unanswered_calls,
)
from .chat import (
    TrimResult,
    answer_unanswered_tool_calls,
    build_request_messages,
    note_message,
    split_turns,
    to_chat_completions_messages,
    trim_turns,
    unanswered_tool_calls,
    with_context,
)
from .hygiene import (
    Change,
    ReplayFingerprint,
    SanitizeResult,
    SweepResult,
    drop_reasoning,
    is_output_item,
    is_paired,
    normalize_tools,
    reasoning_links,
    replay_fingerprint,
    sanitize_input,
    sweep_reasoning,
)
from .preflight import (
    REASONING_REPLAY_KINDS,
    PreflightError,
    Problem,
    RepairResult,
    check,
    parse_api_error,
    preflight,
    repair,
)

__all__ = [
    "REASONING_REPLAY_KINDS",
    "CallIdSet",
    "Change",
    "PreflightError",
    "Problem",
    "RepairResult",
    "ReplayFingerprint",
    "SanitizeResult",
    "SweepResult",
    "TrimResult",
    "answer_unanswered_tool_calls",
    "approved_unexecuted_calls",
    "build_request_messages",
    "check",
    "drop_reasoning",
    "is_output_item",
    "is_paired",
    "normalize_tools",
    "note_message",
    "parse_api_error",
    "preflight",
    "reasoning_links",
    "repair",
    "replay_fingerprint",
    "resolved_call_ids",
    "sanitize_input",
    "split_turns",
    "sweep_reasoning",
    "to_chat_completions_messages",
    "to_responses_input",
    "trim_turns",
    "unanswered_calls",
    "unanswered_tool_calls",
    "with_context",
]
