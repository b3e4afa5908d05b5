"""The CLI's user-facing failure (:class:`CliError`), below the entry point and its subcommands."""

from __future__ import annotations

__all__ = ["CliError"]


class CliError(Exception):
    """A user-facing failure: printed as ``ai-transport: error: <message>``, exit code ``exit_code``."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code
