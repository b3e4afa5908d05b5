"""The demo loop in-process (no subprocess): for any question, decision and reason, the run suspends
on the gated call, resumes after the answer, runs the tool iff approved, and completes; the live
transcript carries exactly the final conversation."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ai_transport.cli.demo import demo, run_demo
from ai_transport.cli.render import render_transcript
from ai_transport.cli.scenario import get_weather

CITIES = ["Paris", "Lyon", "New York", "Rio De Janeiro", "Oslo"]
reasons = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=40).filter(
    lambda s: s.strip() == s and s.strip()
)


def args(question: str, deny: str | None) -> argparse.Namespace:
    return argparse.Namespace(
        emulator=None, deny=deny, question=question, model=None, channel=None, no_reasoning=False,
        delay=0.0, color=False,
    )


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(city=st.sampled_from(CITIES), decision=st.one_of(st.none(), st.just(""), reasons))
def test_any_decision_completes_the_run_and_the_tool_runs_iff_approved(city, decision):
    out = io.StringIO()
    code = asyncio.run(run_demo(args(f"Is it raining in {city}?", decision), out))
    text = out.getvalue()
    assert code == 0, text
    call = re.escape(f'[tool] get_weather({json.dumps({"city": city, "unit": "celsius"}, separators=(",", ":"))})')
    assert re.search(call + r" -- awaiting approval$", text, re.MULTILINE), text
    if decision is None:
        weather = get_weather(city)
        assert re.search(call + " -- done$", text, re.MULTILINE)
        assert f"assistant> Right now in {city} it is {weather['temperature']}°C" in text
        assert "[result] get_weather -> " in text
    else:
        shown = decision or "Tool execution was not approved."
        assert re.search(call + re.escape(f" -- denied ({decision})" if decision else " -- denied") + "$", text, re.MULTILINE)
        assert f"assistant> I did not check the live weather ({shown})" in text
        assert "[result]" not in text
    assert re.search(r"^done: run complete; \d+ messages published, \d+ appends, 1 run\(s\)", text, re.MULTILINE)


def test_live_transcript_equals_the_static_rendering_of_the_final_conversation():
    """What streamed to the terminal, joined per block, is the final conversation: nothing lost,
    nothing doubled, in order."""
    out = io.StringIO()
    result = asyncio.run(demo(args("Weather in Oslo?", None), out))
    assert result.exit_code == 0
    assert [r.status for r in result.runs] == ["complete"]
    streamed: list[str] = []
    for line in out.getvalue().splitlines():
        m = re.match(r"^(you|thinking|assistant)( \(cont\.\))?> (.*)$", line)
        if m and m.group(2):
            streamed[-1] += m.group(3)
        elif m:
            streamed.append(f"{m.group(1)}> {m.group(3)}")
        elif line.startswith("  [result]"):
            streamed.append(line)
    final = [ln for ln in render_transcript(result.messages).splitlines() if not ln.startswith("  [tool]")]
    assert streamed == final
    assert len(final) == 6  # question, reasoning, text (+ call), result, reasoning, answer
    # Counters: every streamed delta travelled as an append, not as a message of its own.
    assert result.stats.appends > result.stats.published > 10
