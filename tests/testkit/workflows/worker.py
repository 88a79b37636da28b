"""The workflows of the workflow tests (emco-testkit's TemporalKit), served by
examples/workflows/workflowclient.py.

- ``sleep``: sleeps ``activityParams.sleep.seconds`` (a durable timer), answers the query
  ``state`` with ``{"state": "sleeping"}`` meanwhile, and returns ``"slept"``; a cancel ends it
  canceled.
- ``fail``: fails at once with ``activityParams.fail.message``.
- ``migrate``: the example of examples/workflows/migrate.py.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../../examples/workflows"))

import migrate  # noqa: E402,F401  (the example's `migrate`)
import workflowclient  # noqa: E402
from temporalio import workflow  # noqa: E402
from temporalio.exceptions import ApplicationError  # noqa: E402


def _param(spec: dict[str, Any], activity: str, key: str, default: str) -> str:
    params = (spec.get("workflowParams") or {}).get("activityParams") or {}
    return str((params.get(activity) or {}).get(key, default))


@workflow.defn(name="sleep")
class Sleep:
    def __init__(self) -> None:
        self.state = "starting"

    @workflow.run
    async def run(self, spec: dict[str, Any]) -> str:
        self.state = "sleeping"
        await asyncio.sleep(float(_param(spec, "sleep", "seconds", "3600")))
        self.state = "done"
        return "slept"

    # A method cannot share the attribute's name: the query is named.
    @workflow.query(name="state")
    def state_query(self) -> dict[str, str]:
        return {"state": self.state}


@workflow.defn(name="fail")
class Fail:
    @workflow.run
    async def run(self, spec: dict[str, Any]) -> str:
        raise ApplicationError(_param(spec, "fail", "message", "failed"), non_retryable=True)


workflowclient.WORKFLOWS.update({"sleep": Sleep, "fail": Fail})

if __name__ == "__main__":
    workflowclient.main()
