"""``step_id_for``: a step id that survives a cross-process retry and is unique across workflows."""

from __future__ import annotations

from temporalio import activity

__all__ = ["step_id_for"]


def step_id_for(invocation_id: str) -> str:
    """A workflow-scoped step id for ``run.create_step(step_id=...)`` inside a Temporal activity.

    ``<invocation_id>-<activity_id>``: Temporal keeps an activity's id across its retries, so a retry
    publishes under the same step id and its attempt replaces the failed one's output in every
    view; an activity id is only unique within one workflow, so the invocation id (the workflow id
    by default) keeps two workflows' first activities on one run apart. Call it inside an activity
    (it reads ``activity.info()``).
    """
    return f"{invocation_id}-{activity.info().activity_id}"
