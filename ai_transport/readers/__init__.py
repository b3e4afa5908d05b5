"""Pure readers over run messages (``OpenAIMessage`` lists), plus input hygiene helpers."""

from .calls import (
    CallIdSet,
    approved_unexecuted_calls,
    resolved_call_ids,
    to_responses_input,
    unanswered_calls,
)

__all__ = [
    "CallIdSet",
    "approved_unexecuted_calls",
    "resolved_call_ids",
    "to_responses_input",
    "unanswered_calls",
]
