"""Temporal workflows of a deployment intent group: workflowmgr's workflow intents (started
through the user's workflow client, followed and stopped on a Temporal server) and tac's
workflow hooks (run at a point of the group's lifecycle)."""

from typing import Any, List, Mapping, Optional

from ._base import Base, DigRef, Json, meta
from ._objects import Intent

HOOK_TYPES = ("pre-install", "post-install", "pre-update", "post-update", "pre-termination",
              "post-termination")
"""The points of a group's lifecycle a tac hook runs at."""


def _workflow_spec(client_host: str, client_port: int, client_name: str, workflow_id: str,
                   task_queue: str, params: Optional[Mapping[str, Mapping[str, str]]],
                   start_options: Optional[Mapping[str, Any]]) -> Json:
    options: Json = {"ID": workflow_id, "TaskQueue": task_queue}
    options.update(start_options or {})
    temporal: Json = {"workflowClientName": client_name, "workflowStartOptions": options}
    if params:
        temporal["workflowParams"] = {"activityParams": {k: dict(v) for k, v in params.items()}}
    return {"workflowClient": {"clientEndpointName": client_host,
                               "clientEndpointPort": client_port},
            "temporal": temporal}


def _cancel_body(temporal_server: str, terminate: bool, reason: str,
                 workflow_id: Optional[str], run_id: Optional[str]) -> Json:
    spec: Json = {"temporalServer": temporal_server}
    if workflow_id:
        spec["workflowID"] = workflow_id
    if run_id:
        spec["runID"] = run_id
    if terminate:
        spec["terminate"] = True
    if reason:
        spec["reason"] = reason
    return {"metadata": meta("cancel"), "spec": spec}


class WorkflowsApi(Base):
    """workflowmgr's and tac's routes; shared by `Client` and `Orchestrator`."""

    # ---- workflowmgr: workflow intents ---------------------------------------------------------

    def create_workflow_intent(self, dig: DigRef, name: str, client_host: str,
                               client_port: int, client_name: str, workflow_id: str,
                               task_queue: str,
                               params: Optional[Mapping[str, Mapping[str, str]]] = None,
                               start_options: Optional[Mapping[str, Any]] = None) -> Intent:
        """A workflow intent: `start_workflow` posts its start request to the workflow client
        at `client_host:client_port` (`/invoke/{client_name}`), which starts workflow
        `workflow_id` on `task_queue`. `params` are its `activityParams` (by activity, key ->
        value); `start_options` more of the Go SDK's start options (`WorkflowExecutionTimeout`
        in nanoseconds, ...)."""
        body = {"metadata": meta(name),
                "spec": _workflow_spec(client_host, client_port, client_name, workflow_id,
                                       task_queue, params, start_options)}
        return Intent.from_json(self._op("createWorkflowIntent", *dig.params, body=body))

    def workflow_intents(self, dig: DigRef) -> List[Intent]:
        """The group's workflow intents."""
        return Intent.list_from_json(self._op("listWorkflowIntents", *dig.params))

    def delete_workflow_intent(self, dig: DigRef, name: str) -> None:
        """Deletes a workflow intent (its workflow, if running, goes on)."""
        self._op("deleteWorkflowIntent", *dig.params, name)

    def start_workflow(self, dig: DigRef, name: str) -> None:
        """Has the intent's workflow client start its workflow."""
        self._op("startWorkflowIntent", *dig.params, name)

    def workflow_status(self, dig: DigRef, name: str, temporal_server: str,
                        workflow_id: Optional[str] = None, run_id: Optional[str] = None,
                        describe: bool = True, history: bool = False,
                        query_type: Optional[str] = None, wait: bool = False) -> Json:
        """What the Temporal server `temporal_server` (`host:port`) says of the intent's
        workflow (or `workflow_id`): `workflowExecutionDescription` (with `describe`),
        `workflowHistory` (with `history`), `workflowQueryResult` (with `query_type`), after it
        closed (with `wait`)."""
        query = {"temporalServer": temporal_server, "runDescribeWfExec": str(describe).lower(),
                 "getWfHistory": str(history).lower(), "waitForResult": str(wait).lower()}
        if workflow_id:
            query["workflowID"] = workflow_id
        if run_id:
            query["runID"] = run_id
        if query_type:
            query["queryType"] = query_type
        answer: Json = self._op("getWorkflowIntentStatus", *dig.params, name, query=query)
        return answer

    def cancel_workflow(self, dig: DigRef, name: str, temporal_server: str,
                        terminate: bool = False, reason: str = "",
                        workflow_id: Optional[str] = None, run_id: Optional[str] = None) -> None:
        """Asks the intent's workflow to cancel, or terminates it (`terminate`, with `reason`)."""
        self._op("cancelWorkflowIntent", *dig.params, name,
                 body=_cancel_body(temporal_server, terminate, reason, workflow_id, run_id))

    # ---- tac: workflow hooks of the group's lifecycle -----------------------------------------

    def create_workflow_hook(self, dig: DigRef, name: str, hook_type: str, client_host: str,
                             client_port: int, client_name: str, workflow_id: str,
                             task_queue: str,
                             params: Optional[Mapping[str, Mapping[str, str]]] = None,
                             temporal_server: Optional[str] = None) -> Intent:
        """A tac hook run at `hook_type` (one of `HOOK_TYPES`) of the group's lifecycle when its
        intents name `tac`. With `temporal_server` (ours, not EMCO's) a pre-hook holds the
        operation until its workflow completes, and fails it with the workflow's error."""
        spec = _workflow_spec(client_host, client_port, client_name, workflow_id, task_queue,
                              params, None)
        spec["hookType"] = hook_type
        if temporal_server:
            spec["temporalServer"] = temporal_server
        return Intent.from_json(self._op("createTacIntent", *dig.params,
                                         body={"metadata": meta(name), "spec": spec}))

    def workflow_hooks(self, dig: DigRef) -> List[Intent]:
        """The group's tac hooks."""
        return Intent.list_from_json(self._op("listTacIntents", *dig.params))

    def delete_workflow_hook(self, dig: DigRef, name: str) -> None:
        """Deletes a tac hook."""
        self._op("deleteTacIntent", *dig.params, name)

    def workflow_hook_status(self, dig: DigRef, name: str, temporal_server: str,
                             describe: bool = True, history: bool = False,
                             wait: bool = False) -> Json:
        """What the Temporal server says of the hook's workflow (as `workflow_status`)."""
        body = {"temporalServer": temporal_server, "runDescribeWfExec": describe,
                "getWfHistory": history, "waitForResult": wait}
        answer: Json = self._op("getTacIntentStatus", *dig.params, name, body=body)
        return answer

    def cancel_workflow_hook(self, dig: DigRef, name: str, temporal_server: str,
                             terminate: bool = False, reason: str = "") -> None:
        """Cancels or terminates the hook's workflow."""
        self._op("cancelTacIntent", *dig.params, name,
                 body=_cancel_body(temporal_server, terminate, reason, None, None))
