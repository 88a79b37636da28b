"""Workflow intents and tac hooks from Python, embedded and against a server, on a real
Temporal server with a real workflow client and worker (conftest's `temporal`)."""

import time
from pathlib import Path
from typing import Any, Dict

import emco
from conftest import Fleet, Temporal, _start_server, on, onboard_web


def test_a_workflow_intent_starts_is_followed_and_terminated(
        target: emco.Emco, fleet: Fleet, temporal: Temporal) -> None:
    fleet.register(target)
    onboard_web(target, fleet.names)
    dig = target.create_deployment_intent_group(
        "p", "web", "v1", "d1", composite_profile="default", logical_cloud="admin",
        placement={"http-server": on("c1")})
    nap = target.create_workflow_intent(
        dig, "nap", "127.0.0.1", temporal.client_port, "sleep", "nap-1", temporal.TASK_QUEUE,
        params={"sleep": {"seconds": "1"}})
    assert nap.spec["temporal"]["workflowStartOptions"]["ID"] == "nap-1"
    assert [i.name for i in target.workflow_intents(dig)] == ["nap"]
    target.start_workflow(dig, "nap")
    running = target.workflow_status(dig, "nap", temporal.address, query_type="state")
    assert running["workflowQueryResult"] == {"state": "sleeping"}
    done = target.workflow_status(dig, "nap", temporal.address, history=True, wait=True)
    assert done["workflowExecutionDescription"]["workflow_execution_info"]["status"] == 2
    assert "WorkflowExecutionCompletedEventAttributes" in done["workflowHistory"][-1]["attributes"]

    target.create_workflow_intent(dig, "long", "127.0.0.1", temporal.client_port, "sleep",
                                  "long-1", temporal.TASK_QUEUE)
    target.start_workflow(dig, "long")
    target.cancel_workflow(dig, "long", temporal.address, terminate=True, reason="enough")
    ended = target.workflow_status(dig, "long", temporal.address, history=True)
    attributes = ended["workflowHistory"][-1]["attributes"]
    assert attributes["WorkflowExecutionTerminatedEventAttributes"]["reason"] == "enough"
    try:
        target.start_workflow(dig, "nope")
        raise AssertionError("a missing intent started")
    except emco.NotFound:
        pass
    target.delete_workflow_intent(dig, "nap")
    assert [i.name for i in target.workflow_intents(dig)] == ["long"]


def _hold(target: emco.Emco, dig: emco.DigRef) -> Dict[str, Any]:
    """The first hold of the group's context once it no longer holds."""
    deadline = time.monotonic() + 60
    while True:
        holds = target.status(dig, ready=False).raw.get("holds") or []
        if holds and holds[0]["state"] != "Holding":
            hold: Dict[str, Any] = holds[0]
            return hold
        assert time.monotonic() < deadline, holds
        time.sleep(0.2)


def test_a_pre_install_hook_holds_and_a_failing_one_fails_the_instantiate(
        target: emco.Emco, fleet: Fleet, temporal: Temporal) -> None:
    fleet.register(target)
    target.register_controller("tac", "tac", 9065)
    onboard_web(target, fleet.names)
    dig = target.create_deployment_intent_group(
        "p", "web", "v1", "d1", composite_profile="default", logical_cloud="admin",
        placement={"http-server": on("c1")}, intents={"tac": "hooks"})
    assert "pre-install" in emco.HOOK_TYPES
    target.create_workflow_hook(dig, "prep", "pre-install", "127.0.0.1", temporal.client_port,
                                "fail", "prep-1", temporal.TASK_QUEUE,
                                params={"fail": {"message": "no backup space"}},
                                temporal_server=temporal.address)
    assert [h.name for h in target.workflow_hooks(dig)] == ["prep"]
    target.approve(dig)
    # Recorded at once; the hold fails with the workflow's error and nothing is deployed.
    target.instantiate(dig)
    failed = _hold(target, dig)
    assert failed["state"] == "Failed", failed
    assert "no backup space" in failed["message"], failed
    assert target.status(dig, ready=False).deployed_status == "InstantiateFailed"
    target.terminate(dig)

    target.delete_workflow_hook(dig, "prep")
    target.create_workflow_hook(dig, "prep", "pre-install", "127.0.0.1", temporal.client_port,
                                "sleep", "prep-2", temporal.TASK_QUEUE,
                                params={"sleep": {"seconds": "1"}},
                                temporal_server=temporal.address)
    # Once the terminate of the failed context is done.
    deadline = time.monotonic() + 60
    while True:
        try:
            target.instantiate(dig)
            break
        except emco.Conflict:
            assert time.monotonic() < deadline, "the terminate never ended"
            time.sleep(0.2)
    assert _hold(target, dig)["state"] == "Released"
    hook = target.workflow_hook_status(dig, "prep", temporal.address)
    assert hook["workflowExecutionDescription"]["workflow_execution_info"]["status"] == 2
    assert target.wait(dig, timeout=120).ready


def test_a_held_instantiate_goes_on_after_the_server_is_killed(
        tmp_path: Path, fleet: Fleet, temporal: Temporal) -> None:
    """emco-server (embedded stores) SIGKILLed while a pre-install hook holds an instantiate:
    started again on the same data, it waits for the workflow again and deploys."""
    stores = ("--data-dir", str(tmp_path / "data"))
    flags = ("--temporal-server", temporal.address)
    first = _start_server(tmp_path, *flags, stores=stores)
    server = next(first)
    with emco.Client(server.url) as client:
        fleet.register(client)
        client.register_controller("tac", "tac", 9065)
        onboard_web(client, fleet.names)
        dig = client.create_deployment_intent_group(
            "p", "web", "v1", "d1", composite_profile="default", logical_cloud="admin",
            placement={"http-server": on("c1")}, intents={"tac": "hooks"})
        # Followed on the server's --temporal-server: the hook names none.
        client.create_workflow_hook(dig, "migrate-db", "pre-install", "127.0.0.1",
                                    temporal.client_port, "sleep", "db-1", temporal.TASK_QUEUE,
                                    params={"sleep": {"seconds": "4"}})
        client.approve(dig)
        client.instantiate(dig)
        holds = client.status(dig, ready=False).raw["holds"]
        assert [h["state"] for h in holds] == ["Holding"], holds
    assert server.proc is not None
    server.proc.kill()
    server.proc.wait()
    for _ in first:
        pass
    second = _start_server(tmp_path, *flags, stores=stores)
    server = next(second)
    with emco.Client(server.url) as client:
        assert client.wait(dig, timeout=120).ready
        holds = client.status(dig, ready=False).raw["holds"]
        assert [h["state"] for h in holds] == ["Released"], holds
        assert client.status(dig).state == "Instantiated"
    for _ in second:
        pass
