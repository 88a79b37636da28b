"""emco from Python, embedded and against a server: onboard, deploy to kubesim, follow the
status to Ready, update, terminate, and the exceptions of refusals."""

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import pytest

import emco
from conftest import (
    ADMIN_TOKEN,
    ALICE_TOKEN,
    EDGE,
    PROVIDER,
    ROOT,
    Fleet,
    Server,
    default_sigint,
    deploy_web,
    example_values,
    on,
    onboard_web,
)

EXAMPLES = ROOT / "examples"
DIG = emco.DigRef("demo", "http", "v1", "http-dig")
LC = emco.LogicalCloudRef("demo", "lc")


def test_the_emcoctl_example_deploys_and_terminates(
    target: emco.Emco, fleet: Fleet, packages: Path
) -> None:
    fleet.register(target)
    values = example_values(fleet, packages)
    onboarded = emco.apply_file(target, str(EXAMPLES / "emcoctl" / "project.yaml"), values)
    assert all(int(o["status"]) in (200, 201, 202) for o in onboarded), onboarded

    target.instantiate(LC)
    target.instantiate(DIG)
    seen: List[emco.Status] = []
    with target.watch(DIG, timeout=120) as watch:
        for status in watch:
            seen.append(status)
            if status.ready and status.deployed_status == "Instantiated":
                watch.close()
    assert next(watch, None) is None
    final = seen[-1]
    assert final.ready, final
    assert final.state == "Instantiated"
    assert sorted(a.name for a in final.apps) == ["http-client", "http-server"]
    for app in final.apps:
        assert sorted(c.cluster for c in app.clusters) == fleet.names
        assert all(c.cluster_provider == PROVIDER for c in app.clusters)
    assert all(r.ready_status == "Ready" for r in final.resources())
    assert not final.failures()
    # A terminal table of apps by clusters, and an HTML one for notebooks.
    text = str(final)
    assert "http-server" in text and "c1" in text and "ready" in text, text
    assert "<table>" in final._repr_html_()

    # An update with nothing changed is a new revision all the same.
    assert target.update(DIG) == 2
    assert target.wait(DIG, timeout=120).ready

    target.terminate(DIG)
    gone = target.wait(DIG, ready=False, timeout=120)
    assert (gone.state, gone.deployed_status) == ("Terminated", "Terminated"), gone
    target.terminate(LC)
    emco.apply_file(target, str(EXAMPLES / "emcoctl" / "project.yaml"), values,
                    command="delete")
    with pytest.raises(emco.NotFound):
        target.get_project("demo")


def test_the_typed_api_builds_a_deployment_from_directories(
    target: emco.Emco, fleet: Fleet
) -> None:
    fleet.register(target)
    onboard_web(target, fleet.names)
    dig = target.create_deployment_intent_group(
        "p", "web", "v1", "d1", composite_profile="default", logical_cloud="admin",
        placement={"http-server": on("c2")},
    )

    # Not approved yet: EMCO's refusal, as the exception of its kind.
    with pytest.raises(emco.FailedPrecondition) as refused:
        target.instantiate(dig)
    assert refused.value.status == 409

    target.approve(dig)
    target.instantiate(dig)
    with pytest.raises(emco.EmcoError) as twice:
        target.instantiate(dig)
    assert twice.value.status == 409
    status = target.wait(dig, timeout=120)
    assert status.ready
    [app] = status.apps
    assert [c.cluster for c in app.clusters] == ["c2"]

    # The asyncio watch sees the same status.
    async def first() -> emco.Status:
        async for s in target.awatch(dig, timeout=10):
            return s
        raise AssertionError("no status")

    assert asyncio.run(first()).ready_status == "Ready"

    # Filters of the status query.
    only = target.status(dig, resources=["http-server"])
    assert {r.name for r in only.resources()} <= {"http-server"}
    deployed = target.status(dig, ready=False)
    assert deployed.deployed_status == "Instantiated"

    target.terminate(dig)
    assert target.wait(dig, ready=False, timeout=120).state == "Terminated"


def test_refusals_raise_the_exception_of_their_kind(target: emco.Emco) -> None:
    target.create_project("p")
    with pytest.raises(emco.AlreadyExists) as dup:
        target.create_project("p")
    assert dup.value.kind in ("AlreadyExists", None)
    with pytest.raises(emco.NotFound):
        target.get_project("missing")
    with pytest.raises(emco.InvalidArgument):
        target.request("POST", "/v2/projects", {"metadata": {"name": "bad name!"}})
    with pytest.raises(emco.NotFound):
        target.status(emco.DigRef("p", "ca", "v1", "nope"))
    assert [p.name for p in target.list_projects()] == ["p"]
    assert all(issubclass(e, emco.EmcoError) for e in (
        emco.NotFound, emco.AlreadyExists, emco.Conflict, emco.InvalidArgument,
        emco.FailedPrecondition, emco.Unavailable, emco.Internal, emco.Unauthenticated,
        emco.PermissionDenied))


def test_a_server_that_requires_tokens_answers_each_client_by_its_roles(
        secured_server: Server) -> None:
    url = secured_server.url
    with pytest.raises(emco.Unauthenticated) as no_token:
        emco.Client(url).list_projects()
    assert no_token.value.status == 401
    with pytest.raises(emco.Unauthenticated):
        emco.Client(url, token="not-a-token-we-know").list_projects()
    admin = emco.Client(url, token=ADMIN_TOKEN)
    admin.create_project("p1")
    admin.create_project("p2")
    alice = emco.Client(url, token=ALICE_TOKEN)
    assert [p.name for p in alice.list_projects()] == ["p1"]
    alice.create_composite_app("p1", "ca", "v1")
    with pytest.raises(emco.PermissionDenied) as other:
        alice.create_composite_app("p2", "ca", "v1")
    assert other.value.status == 403 and other.value.kind == "PermissionDenied"
    with pytest.raises(emco.PermissionDenied):
        alice.get_project("p-that-does-not-exist")
    with pytest.raises(emco.PermissionDenied):
        alice.create_project("p3")
    assert sorted(p.name for p in admin.list_projects()) == ["p1", "p2"]


def test_an_unreachable_server_is_unavailable() -> None:
    with pytest.raises(emco.Unavailable):
        emco.Client("http://127.0.0.1:9").list_projects()
    with pytest.raises(emco.EmcoError):
        emco.Client("ftp://nowhere")


def test_routes_are_the_operations_of_the_openapi_document_served() -> None:
    from emco._base import route
    from emco._operations import OPERATIONS

    dig = emco.DigRef("p 1", "ca/x", "v1", "d?1")
    # Each parameter is one quoted segment, in the route's order; a query goes after it.
    assert route("getDeploymentIntentGroupStatus", *dig.params, query=[("app", "a"),
                                                                      ("app", "b")]) == (
        "GET", "/v2/projects/p%201/composite-apps/ca%2Fx/v1/deployment-intent-groups/d%3F1"
        "/status?app=a&app=b")
    assert dig.path == route("getDeploymentIntentGroup", *dig.params)[1]
    with pytest.raises(TypeError, match="takes 2 path parameters"):
        route("getCluster", "provider")
    # The document served is the one the routes were generated from.
    with emco.Orchestrator.in_memory() as orch:
        served = orch.request("GET", "/v2/openapi.yaml")
    for op, (method, path) in OPERATIONS.items():
        assert f"operationId: {op}\n" in served
        assert f"  {path}:\n" in served, (op, method)


def test_an_embedded_orchestrator_keeps_its_objects_in_its_data_dir(tmp_path: Path) -> None:
    with emco.Orchestrator.embedded(tmp_path / "data") as orch:
        assert orch.is_embedded
        orch.create_project("kept")
    with emco.Orchestrator.embedded(tmp_path / "data") as again:
        assert again.get_project("kept").name == "kept"


def test_an_embedded_orchestrator_obeys_the_rules_for_its_principal(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with emco.Orchestrator.embedded(data) as admin:
        admin.create_project("p1")
        admin.create_project("p2")
    alice = emco.Principal("alice", ["project-owner:p1"])
    with emco.Orchestrator.embedded(data, principal=alice) as orch:
        assert [p.name for p in orch.list_projects()] == ["p1"]
        orch.create_composite_app("p1", "ca", "v1")
        with pytest.raises(emco.PermissionDenied) as other:
            orch.create_composite_app("p2", "ca", "v1")
        assert other.value.status == 403 and other.value.kind == "PermissionDenied"
        assert "alice" in str(other.value)
        with pytest.raises(emco.PermissionDenied):
            orch.get_project("p-that-does-not-exist")
        with pytest.raises(emco.PermissionDenied):
            orch.create_project("p3")
        with pytest.raises(emco.PermissionDenied):
            orch.create_cluster_provider("kubesim")
    viewer = emco.Principal("bob", ["project-viewer:p1"])
    with emco.Orchestrator.embedded(data, principal=viewer) as orch:
        assert orch.get_project("p1").name == "p1"
        with pytest.raises(emco.PermissionDenied):
            orch.create_composite_app("p1", "other", "v1")
    with pytest.raises(ValueError, match="unknown role"):
        emco.Orchestrator.in_memory(principal=emco.Principal("eve", ["root"]))
    # Its own Python controllers are registered whoever it acts for.
    with emco.Orchestrator.in_memory({"labeller": Labeller()}, principal=alice) as orch:
        assert [c.name for c in orch.list_controllers()] == ["labeller"]


class Labeller:
    """Labels every Deployment with its intent's name and adds a ConfigMap to each app."""

    def __init__(self) -> None:
        self.intents: List[str] = []

    def update(self, ctx: emco.Context) -> None:
        intent = ctx.intent_name or ""
        self.intents.append(intent)
        for app in ctx.apps():
            for cluster in ctx.clusters(app):
                for name, obj in ctx.resources(app, cluster):
                    if obj.get("kind") == "Deployment":
                        obj.setdefault("metadata", {}).setdefault("labels", {})["team"] = intent
                        ctx.put_resource(app, cluster, name, obj)
                ctx.add_resource(app, cluster, {
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": f"{app}-from-python"}, "data": {"by": "python"},
                })


class Refuser:
    def update(self, ctx: emco.Context) -> None:
        raise emco.InvalidArgument("quota exceeded for this intent", 400, "InvalidArgument")


def test_python_action_controllers_change_what_is_deployed(fleet: Fleet) -> None:
    labeller = Labeller()
    controllers: Dict[str, emco.ActionController] = {"labeller": labeller, "refuser": Refuser()}
    with emco.Orchestrator.in_memory(controllers=controllers) as orch:
        fleet.register(orch)
        onboard_web(orch, ["c1"])
        refused = orch.create_deployment_intent_group(
            "p", "web", "v1", "refused", composite_profile="default", logical_cloud="admin",
            placement={"http-server": on("c1")}, intents={"refuser": "x"})
        orch.approve(refused)
        with pytest.raises(emco.EmcoError) as e:
            orch.instantiate(refused)
        assert "quota exceeded for this intent" in e.value.message
        assert orch.status(refused, ready=False).state == "Approved"

        dig, status = deploy_web(orch, on("c1"), intents={"labeller": "team-a"})
        assert labeller.intents == ["team-a"]
        names = {r.name for r in status.resources()}
        assert "http-server-from-python" in names, names
        cm = fleet.get("c1", "/api/v1/namespaces/default/configmaps/http-server-from-python")
        assert cm is not None and cm["data"] == {"by": "python"}
        deployments = fleet.get("c1", "/apis/apps/v1/namespaces/default/deployments")
        assert deployments is not None
        labels = [d["metadata"].get("labels", {}) for d in deployments["items"]]
        assert labels and all(label.get("team") == "team-a" for label in labels), labels

        orch.terminate(dig)
        assert orch.wait(dig, ready=False, timeout=120).state == "Terminated"


class OnlyFirstCluster:
    """A placement controller: each app keeps the first of its clusters by name."""

    def filter_clusters(self, ctx: emco.Context) -> None:
        for app in ctx.apps():
            for cluster in sorted(ctx.clusters(app))[1:]:
                ctx.remove_cluster(app, cluster)


def test_python_placement_controllers_filter_clusters(fleet: Fleet) -> None:
    controllers: Dict[str, emco.Controller] = {"first": OnlyFirstCluster()}
    with emco.Orchestrator.in_memory(controllers=controllers) as orch:
        fleet.register(orch)
        [first] = orch.list_controllers()
        assert (first.name, first.type) == ("first", "placement")
        onboard_web(orch, fleet.names)
        dig, status = deploy_web(orch, EDGE, intents={"first": "x"})
        [app] = status.apps
        assert [c.cluster for c in app.clusters] == ["c1"]
        assert fleet.get("c2", "/apis/apps/v1/namespaces/default/deployments/http-server") is None
        orch.terminate(dig)
        assert orch.wait(dig, ready=False, timeout=120).state == "Terminated"


def test_python_controllers_served_over_grpc_take_part_in_a_server_s_deployment(
    server: Server, fleet: Fleet
) -> None:
    labeller = Labeller()
    client = emco.Client(server.url)
    with emco.ControllerServer(labeller, "labeller", appcontext=server.grpc) as action, \
            emco.ControllerServer(OnlyFirstCluster(), "first",
                                  appcontext=server.grpc) as placement:
        client.register_controller("labeller", "127.0.0.1", action.port)
        client.register_controller("first", "127.0.0.1", placement.port, type="placement")
        fleet.register(client)
        onboard_web(client, fleet.names)
        dig, status = deploy_web(client, EDGE, intents={"labeller": "team-b", "first": "x"})
        assert labeller.intents == ["team-b"]
        [app] = status.apps
        assert [c.cluster for c in app.clusters] == ["c1"]
        cm = fleet.get("c1", "/api/v1/namespaces/default/configmaps/http-server-from-python")
        assert cm is not None and cm["data"] == {"by": "python"}
        deployment = fleet.get("c1", "/apis/apps/v1/namespaces/default/deployments/http-server")
        assert deployment is not None
        assert deployment["metadata"]["labels"]["team"] == "team-b"
        assert fleet.get("c2", "/apis/apps/v1/namespaces/default/deployments/http-server") is None
        client.terminate(dig)
        assert client.wait(dig, ready=False, timeout=120).state == "Terminated"


def test_a_controller_server_needs_one_store_and_a_controller() -> None:
    with pytest.raises(ValueError):
        emco.ControllerServer(Labeller(), "x")
    with pytest.raises(ValueError):
        emco.ControllerServer(Labeller(), "x", appcontext="http://127.0.0.1:9",
                              etcd=["http://127.0.0.1:2379"])
    with pytest.raises(TypeError):
        emco.ControllerServer(object(), "x", appcontext="http://127.0.0.1:9")  # type: ignore[arg-type]


CTRL_C = """
import socket
import emco

class Noop:
    def update(self, ctx: emco.Context) -> None:
        pass

silent = socket.socket()
silent.bind(("127.0.0.1", 0))
silent.listen(1)
print("request", flush=True)
try:
    emco.Client(f"http://127.0.0.1:{silent.getsockname()[1]}").list_projects()
except KeyboardInterrupt:
    print("interrupted request", flush=True)
server = emco.ControllerServer(Noop(), "noop", appcontext="http://127.0.0.1:9")
print("serve", flush=True)
try:
    server.wait()
except KeyboardInterrupt:
    print("interrupted serve", flush=True)
"""


def test_ctrl_c_interrupts_a_blocking_request_and_a_serving_controller(tmp_path: Path) -> None:
    script = tmp_path / "ctrl_c.py"
    script.write_text(CTRL_C)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    assert proc.stdout is not None
    try:
        for expected in ("request", "serve"):
            assert proc.stdout.readline().strip() == expected
            # Inside the blocking call by now; the call returns with KeyboardInterrupt.
            time.sleep(0.5)
            started = time.monotonic()
            proc.send_signal(signal.SIGINT)
            assert proc.stdout.readline().strip() == f"interrupted {expected}"
            assert time.monotonic() - started < 5
        assert proc.wait(timeout=10) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        proc.kill()
        proc.wait()
