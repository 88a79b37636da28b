"""emco from Python, embedded and against a server: onboard, deploy to kubesim, follow the
status to Ready, update, terminate, and the exceptions of refusals."""

import asyncio
from pathlib import Path
from typing import Dict, List

import pytest

import emco
from conftest import PROVIDER, ROOT, Fleet, example_values

EXAMPLES = ROOT / "examples"
DIG = emco.DigRef("demo", "http", "v1", "http-dig")
LC = emco.LogicalCloudRef("demo", "lc")


def onboard_web(target: emco.Emco, clusters: List[str]) -> None:
    """Project p, an instantiated admin cloud on `clusters`, and composite app web v1 with the
    http-server chart and its profile from the example's directories."""
    target.create_project("p")
    lc = target.create_logical_cloud("p", "admin", [(PROVIDER, c) for c in clusters])
    target.instantiate(lc)
    target.create_composite_app("p", "web", "v1")
    target.create_app("p", "web", "v1", "http-server", EXAMPLES / "charts" / "http-server")
    target.create_composite_profile("p", "web", "v1", "default")
    target.create_app_profile("p", "web", "v1", "default", "server-profile", "http-server",
                              EXAMPLES / "profiles" / "default")


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
    for status in target.watch(DIG, timeout=120):
        seen.append(status)
        if status.ready and status.deployed_status == "Instantiated":
            break
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
        placement={"http-server": [{"clusterProvider": PROVIDER, "cluster": "c2"}]},
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
    assert [p["metadata"]["name"] for p in target.list_projects()] == ["p"]
    assert all(issubclass(e, emco.EmcoError) for e in (
        emco.NotFound, emco.AlreadyExists, emco.Conflict, emco.InvalidArgument,
        emco.FailedPrecondition, emco.Unavailable, emco.Internal))


def test_an_unreachable_server_is_unavailable() -> None:
    with pytest.raises(emco.Unavailable):
        emco.Client("http://127.0.0.1:9").list_projects()
    with pytest.raises(emco.EmcoError):
        emco.Client("ftp://nowhere")


def test_an_embedded_orchestrator_keeps_its_objects_in_its_data_dir(tmp_path: Path) -> None:
    with emco.Orchestrator.embedded(tmp_path / "data") as orch:
        assert orch.is_embedded
        orch.create_project("kept")
    with emco.Orchestrator.embedded(tmp_path / "data") as again:
        assert again.get_project("kept")["metadata"]["name"] == "kept"


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
        placement = {"http-server": [{"clusterProvider": PROVIDER, "cluster": "c1"}]}

        refused = orch.create_deployment_intent_group(
            "p", "web", "v1", "refused", composite_profile="default", logical_cloud="admin",
            placement=placement, intents={"refuser": "x"})
        orch.approve(refused)
        with pytest.raises(emco.EmcoError) as e:
            orch.instantiate(refused)
        assert "quota exceeded for this intent" in e.value.message
        assert orch.status(refused, ready=False).state == "Approved"

        dig = orch.create_deployment_intent_group(
            "p", "web", "v1", "d1", composite_profile="default", logical_cloud="admin",
            placement=placement, intents={"labeller": "team-a"})
        orch.approve(dig)
        orch.instantiate(dig)
        status = orch.wait(dig, timeout=120)
        assert status.ready, status
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
        assert orch.request("GET", "/v2/controllers/first")["spec"]["type"] == "placement"
        onboard_web(orch, fleet.names)
        dig = orch.create_deployment_intent_group(
            "p", "web", "v1", "d1", composite_profile="default", logical_cloud="admin",
            placement={"http-server": [{"clusterProvider": PROVIDER, "clusterLabel": "edge"}]},
            intents={"first": "x"})
        orch.approve(dig)
        orch.instantiate(dig)
        status = orch.wait(dig, timeout=120)
        assert status.ready, status
        [app] = status.apps
        assert [c.cluster for c in app.clusters] == ["c1"]
        assert fleet.get("c2", "/apis/apps/v1/namespaces/default/deployments/http-server") is None
        orch.terminate(dig)
        assert orch.wait(dig, ready=False, timeout=120).state == "Terminated"
