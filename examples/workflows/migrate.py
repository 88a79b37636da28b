"""A Temporal workflow that moves an app of a deployment intent group from one cluster to another
through emco-rs's REST API, with a rollback when the new cluster never becomes Ready.

Steps, each a Temporal activity (retried by Temporal, the workflow's progress kept there):

1. place the app on both clusters (its app placement intent) and update the group;
2. wait until every resource of the app is Ready on the new cluster;
3. place it on the new cluster only and update the group: the old one loses it.

When step 2 times out, the app is placed back on the old cluster alone and the workflow fails
with the reason. Its parameters are the ``activityParams.migrate`` of the intent that starts it:

    emco: http://127.0.0.1:9015        project, compositeApp, compositeAppVersion,
    deploymentIntentGroup, genericPlacementIntent, appIntent: where the app's placement is
    app: the app                        clusterProvider, from, to: the clusters
    readySeconds: how long the new cluster may take (default 300)

Served, with any other workflow, by ``workflowclient.py`` under the client name ``migrate``.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

import workflowclient


def _call(method: str, url: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            text = answer.read()
    except urllib.error.HTTPError as e:
        raise ApplicationError(f"{method} {url}: {e.code} {e.read().decode().strip()}") from e
    return json.loads(text) if text.strip() else None


def _dig(p: dict[str, str]) -> str:
    return (f"{p['emco']}/v2/projects/{p['project']}/composite-apps/{p['compositeApp']}/"
            f"{p['compositeAppVersion']}/deployment-intent-groups/{p['deploymentIntentGroup']}")


@activity.defn
def place(p: dict[str, str], clusters: list[str]) -> None:
    """Places the app on ``clusters`` alone and updates the group (an update of an unchanged
    placement is harmless)."""
    url = (f"{_dig(p)}/generic-placement-intents/{p['genericPlacementIntent']}/app-intents/"
           f"{p['appIntent']}")
    intent = _call("GET", url)
    intent["spec"]["intent"] = {"allOf": [
        {"clusterProvider": p["clusterProvider"], "cluster": c} for c in clusters]}
    _call("PUT", url, intent)
    _call("POST", f"{_dig(p)}/update", {})


@activity.defn
def wait_ready(p: dict[str, str], cluster: str) -> None:
    """Returns once every resource of the app on ``cluster`` is Ready; fails after
    ``readySeconds``."""
    deadline = time.monotonic() + float(p.get("readySeconds", "300"))
    seen = "no status yet"
    while time.monotonic() < deadline:
        activity.heartbeat(seen)
        status = _call("GET", f"{_dig(p)}/status?status=ready")
        for app in status.get("apps") or []:
            if app.get("name") != p["app"]:
                continue
            for c in app.get("clusters") or []:
                if c.get("cluster") != cluster:
                    continue
                resources = c.get("resources") or []
                states = [r.get("readyStatus") for r in resources]
                seen = f"{cluster}: {states}"
                if resources and all(s == "Ready" for s in states):
                    return
        time.sleep(1)
    raise ApplicationError(f"{p['app']} is not Ready on {cluster} after "
                           f"{p.get('readySeconds', '300')}s ({seen})", non_retryable=True)


#: How long one placement change (two REST calls) may take.
STEP = timedelta(seconds=120)


@workflow.defn(name="migrate")
class Migrate:
    @workflow.run
    async def run(self, spec: dict[str, Any]) -> str:
        p = ((spec.get("workflowParams") or {}).get("activityParams") or {}).get("migrate") or {}
        ready = float(p.get("readySeconds", "300"))
        once = RetryPolicy(maximum_attempts=1)
        await workflow.execute_activity(place, args=[p, [p["from"], p["to"]]],
                                        start_to_close_timeout=STEP)
        try:
            await workflow.execute_activity(
                wait_ready, args=[p, p["to"]], retry_policy=once,
                start_to_close_timeout=timedelta(seconds=ready + 30),
                heartbeat_timeout=timedelta(seconds=30))
        except ActivityError as e:
            await workflow.execute_activity(place, args=[p, [p["from"]]],
                                            start_to_close_timeout=STEP)
            raise ApplicationError(f"rolled back to {p['from']}: {e.cause or e}",
                                   non_retryable=True) from e
        await workflow.execute_activity(place, args=[p, [p["to"]]], start_to_close_timeout=STEP)
        return f"moved {p['app']} from {p['from']} to {p['to']}"


workflowclient.WORKFLOWS["migrate"] = Migrate
workflowclient.ACTIVITIES.extend([place, wait_ready])
