"""The typed objects the API answers, and the onboarding calls behind them, embedded and
against a server (the routes are EMCO's: src/orchestrator/api and src/clm/api)."""

from pathlib import Path

import pytest

import emco
from conftest import PROVIDER, ROOT, Fleet

CHARTS = ROOT / "examples" / "charts"


def test_onboarding_answers_typed_objects(target: emco.Emco, fleet: Fleet) -> None:
    project = target.create_project("p", description="the team's")
    assert isinstance(project, emco.Project)
    assert (project.name, project.description) == ("p", "the team's")
    assert target.get_project("p") == project
    assert [p.name for p in target.list_projects()] == ["p"]

    provider = target.create_cluster_provider(PROVIDER)
    assert isinstance(provider, emco.ClusterProvider)
    assert [p.name for p in target.list_cluster_providers()] == [PROVIDER]
    cluster = target.create_cluster(PROVIDER, "c1", fleet.kubeconfig("c1"), labels=["edge"])
    assert isinstance(cluster, emco.Cluster) and cluster.name == "c1"
    # A kubeconfig as text works as well as a path.
    target.create_cluster(PROVIDER, "c2", fleet.kubeconfig("c2").read_text())
    assert [c.name for c in target.list_clusters(PROVIDER)] == ["c1", "c2"]
    assert target.get_cluster(PROVIDER, "c2").name == "c2"
    assert target.list_cluster_labels(PROVIDER, "c1") == ["edge"]
    assert target.clusters_with_label(PROVIDER, "edge") == ["c1"]
    target.delete_cluster_label(PROVIDER, "c1", "edge")
    assert target.clusters_with_label(PROVIDER, "edge") == []

    kv = target.create_cluster_kv_pairs(PROVIDER, "c1", "gateway",
                                        {"istioIngressGatewayAddress": "10.0.0.1",
                                         "istioIngressGatewayPort": "443"})
    assert isinstance(kv, emco.KvPairs)
    assert target.get_cluster_kv_pairs(PROVIDER, "c1", "gateway").kv == {
        "istioIngressGatewayAddress": "10.0.0.1", "istioIngressGatewayPort": "443"}

    lc = target.create_logical_cloud("p", "admin", [(PROVIDER, "c1")])
    cloud = target.get_logical_cloud(lc)
    assert isinstance(cloud, emco.LogicalCloud)
    assert (cloud.name, cloud.level) == ("admin", "0")
    assert [c.name for c in target.list_logical_clouds("p")] == ["admin"]

    ca = target.create_composite_app("p", "web", "v1")
    assert isinstance(ca, emco.CompositeApp) and ca.version == "v1"
    assert target.get_composite_app("p", "web", "v1").version == "v1"
    app = target.create_app("p", "web", "v1", "http-server", CHARTS / "http-server",
                            description="nginx")
    assert isinstance(app, emco.App) and app.description == "nginx"
    assert [a.name for a in target.list_apps("p", "web", "v1")] == ["http-server"]
    profile = target.create_composite_profile("p", "web", "v1", "default")
    assert isinstance(profile, emco.CompositeProfile)

    dig = target.create_deployment_intent_group(
        "p", "web", "v1", "d1", composite_profile="default", logical_cloud="admin",
        release="rel", override_values={"http-server": {"message": "hi"}},
        placement={"http-server": [{"clusterProvider": PROVIDER, "cluster": "c1"}]})
    group = target.get_deployment_intent_group(dig)
    assert isinstance(group, emco.DeploymentIntentGroup)
    assert (group.logical_cloud, group.composite_profile, group.release) == (
        "admin", "default", "rel")
    assert group.override_values == {"http-server": {"message": "hi"}}
    assert [g.name for g in target.list_deployment_intent_groups("p", "web", "v1")] == ["d1"]

    registered = target.register_controller("mine", "10.1.2.3", 9035, priority=3)
    assert isinstance(registered, emco.ControllerRegistration)
    assert (registered.host, registered.port, registered.type, registered.priority) == (
        "10.1.2.3", 9035, "action", 3)
    assert "mine" in [c.name for c in target.list_controllers()]
    target.delete_controller("mine")
    assert "mine" not in [c.name for c in target.list_controllers()]

    # Deleting in reverse order leaves nothing; a parent before its children is refused.
    with pytest.raises(emco.Conflict):
        target.delete_composite_app("p", "web", "v1")
    target.delete_deployment_intent_group(dig)
    target.delete_composite_profile("p", "web", "v1", "default")
    target.delete_app("p", "web", "v1", "http-server")
    target.delete_composite_app("p", "web", "v1")
    target.delete_logical_cloud(lc)
    target.delete_project("p")
    target.delete_cluster_kv_pairs(PROVIDER, "c1", "gateway")
    for name in ("c1", "c2"):
        target.delete_cluster(PROVIDER, name)
    target.delete_cluster_provider(PROVIDER)
    assert target.list_projects() == [] and target.list_cluster_providers() == []


def test_a_missing_chart_is_a_local_error(target: emco.Emco, tmp_path: Path) -> None:
    target.create_project("p")
    target.create_composite_app("p", "web", "v1")
    with pytest.raises(FileNotFoundError):
        target.create_app("p", "web", "v1", "broken", tmp_path / "no-such-chart")
    assert target.list_apps("p", "web", "v1") == []
