"""Examples run as a user would run them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readers_tour_prints_the_resume_decisions():
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "readers_tour.py")],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout
    stages = out.split("== ")[1:]
    assert len(stages) == 3
    suspended, approved, finished = stages
    assert "unanswered_calls:          ['call_wMUhph1s1bedjPJraJvGw62X']" in suspended
    assert "approved_unexecuted_calls: ['call_wMUhph1s1bedjPJraJvGw62X']" in approved
    assert "unanswered_calls:          []" in approved
    assert "resolved_call_ids:         ['call_wMUhph1s1bedjPJraJvGw62X']" in finished
    assert "final answer: Verification code for issue-11239 is blue-42." in out
