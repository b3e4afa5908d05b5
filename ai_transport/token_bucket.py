"""One token bucket: ``rate`` tokens per second, at most ``burst`` held (the burst cap).

Sans-I/O (the caller passes the clock, e.g. ``loop.time()``) and imports nothing of the package, so
every layer may use it: the emulator's inbound limits (:mod:`ai_transport.emulator.limits`, 42911 /
42913) and the publish budget of a connection (:mod:`ai_transport.channels.budget`) count with it.

A bucket starts full. However long it stays idle, it never holds more than ``burst`` tokens: after
any pause at most ``burst`` operations leave back to back, then one per ``1 / rate`` seconds.
"""

from __future__ import annotations

__all__ = ["TokenBucket"]


class TokenBucket:
    """``rate`` tokens/s, at most ``burst`` held; starts full.

    Args:
        rate: tokens added per second (> 0).
        burst: the most tokens held (>= 1; a smaller value is raised to 1).
        now: the clock reading the bucket starts at; ``None``: the first call's ``now``.
    """

    __slots__ = ("burst", "rate", "stamp", "tokens")

    def __init__(self, rate: float, burst: float, now: float | None = None) -> None:
        self.rate = float(rate)
        self.burst = max(1.0, float(burst))
        self.tokens = self.burst
        self.stamp = now

    def _refill(self, now: float) -> None:
        if self.stamp is None:
            self.stamp = now
        elif now > self.stamp:
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now

    def available(self, now: float) -> float:
        """Tokens available at ``now``."""
        self._refill(now)
        return self.tokens

    def take(self, n: float, now: float) -> bool:
        """Take ``n`` tokens if available (all or nothing); True when taken."""
        self._refill(now)
        if n > self.tokens:
            return False
        self.tokens -= n
        return True

    def wait(self, n: float, now: float) -> float:
        """Seconds from ``now`` until ``n`` tokens are available (0 when they are)."""
        self._refill(now)
        return max(0.0, (n - self.tokens) / self.rate)

    def drain(self, now: float) -> None:
        """Empty the bucket at ``now`` (the next token comes ``1 / rate`` seconds later)."""
        self.tokens = 0.0
        self.stamp = now
