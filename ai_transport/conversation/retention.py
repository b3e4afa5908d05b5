"""Event-log retention of the conversation tree (``reorderWindowMs`` of 0.8.0).

Every node keeps a log of the wires folded into it, so a wire delivered out of serial order can be
refolded into place. Once a run is structurally complete — its ``ai-run-start`` and its end (``complete`` /
``cancelled`` / ``error``) seen, and no step left open — and
the *reorder window* has passed on the Ably-timestamp clock since the run's last activity, the
decoded payloads of its log are dropped; the replay keys stay, so a re-delivered wire is still
recognised and dropped. The window bounds how late a wire can still be reordered (default 120 s,
0.8.0's ``REORDER_WINDOW_MS``); raise it for durable agents whose step retries back off longer,
lower it in tests. Sessions take it as ``reorder_window=`` (seconds).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from ..errors import InvalidArgumentError
from .nodes import RunNode, _Internal

__all__ = ["DEFAULT_REORDER_WINDOW", "LogRetention", "set_reorder_window"]

#: Seconds (0.8.0's ``REORDER_WINDOW_MS`` = 120000).
DEFAULT_REORDER_WINDOW = 120.0


class LogRetention:
    """The retention clock and the queue of runs whose logs may be swept."""

    def __init__(self, window: float = DEFAULT_REORDER_WINDOW) -> None:
        self.window_ms = window * 1000.0
        self.clock = 0
        self._queue: deque[str] = deque()
        #: Called with a run's entry before its log is swept (the tree makes a pending refold then).
        self.before_sweep: Callable[[_Internal], None] | None = None

    def reset(self) -> None:
        """Forget the clock and the queue (the tree was reset)."""
        self.clock = 0
        self._queue.clear()

    def record_activity(self, nodes: dict[str, _Internal], entry: _Internal, timestamp: Any) -> None:
        """A wire with Ably ``timestamp`` (epoch ms) touched ``entry``: advance its activity and the
        clock; a clock advance sweeps the runs whose window has passed."""
        if type(timestamp) is not int and (not isinstance(timestamp, int) or isinstance(timestamp, bool)):
            return  # (an int as Ably sends it: no isinstance call)
        if timestamp > entry.last_activity:
            entry.last_activity = timestamp
        if timestamp > self.clock:
            self.clock = timestamp
            self._drain(nodes)

    def maybe_queue(self, entry: _Internal) -> None:
        """Queue a run whose start and end were seen and whose steps are all settled."""
        node = entry.node
        if not isinstance(node, RunNode) or entry.log.swept or entry.sweep_queued:
            return
        if not entry.run_start_seen or node.status in ("active", "suspended"):
            return
        for rec in entry.steps.values():
            canonical = rec.get("canonical")
            if rec.get("started") and (canonical is None or rec["ends"].get(canonical) is None):
                return
        entry.sweep_queued = True
        self._queue.append(node.key)

    def _drain(self, nodes: dict[str, _Internal]) -> None:
        while self._queue:
            entry = nodes.get(self._queue[0])
            if entry is None or entry.log.swept:
                self._queue.popleft()
                continue
            if entry.last_activity + self.window_ms >= self.clock:
                return
            self._queue.popleft()
            entry.sweep_queued = False
            if self.before_sweep is not None:
                self.before_sweep(entry)
            entry.log.sweep()


def set_reorder_window(tree: Any, seconds: Any) -> None:
    """Set ``tree``'s retention window (seconds; None = the default), or a 40003."""
    if seconds is None:
        seconds = DEFAULT_REORDER_WINDOW
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
        raise InvalidArgumentError(
            f"unable to create session; reorder_window must be a positive number of seconds, got {seconds!r}"
        )
    tree.retention.window_ms = float(seconds) * 1000.0
