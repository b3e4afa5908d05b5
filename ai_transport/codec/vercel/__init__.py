"""The Vercel AI SDK UI message codec (``createUIMessageCodec`` of 0.8.0's ``vercel`` entry).

:class:`UIMessageCodec` (encoder from UI message stream chunks, decoder, reducer into ``UIMessage``
dicts, input factories) and the readers a resuming agent needs.
"""

from .codec import UIMessageCodec
from .readers import approved_pending_tool_calls, pending_tool_calls
from .state import UIProjection

__all__ = ["UIMessageCodec", "UIProjection", "approved_pending_tool_calls", "pending_tool_calls"]
