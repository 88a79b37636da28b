"""Update, rollback and migrate from Python, embedded and against a server, checked on the
kubesim clusters (EMCO's handlers: src/orchestrator/api/instantiation_handler.go)."""

import pytest

import emco
from conftest import EDGE, PROVIDER, Fleet, deploy_web, on, onboard_web, onboard_web_version, web_group

DEPLOYMENT = "/apis/apps/v1/namespaces/default/deployments/http-server"


def test_update_rollback_and_migrate_move_the_app(target: emco.Emco, fleet: Fleet) -> None:
    fleet.register(target)
    onboard_web(target, fleet.names)
    dig, _ = deploy_web(target, on("c1"))
    assert fleet.get("c1", DEPLOYMENT) is not None

    # Revision 2 moves the app to c2; the preview says so first, and changes nothing.
    target.set_placement(dig, "http-server", on("c2"))
    p = target.preview(dig)
    assert p["operation"] == "update" and p["deployedRevision"] == 1, p
    placed = p["placement"][0]
    assert placed["gains"] == [f"{PROVIDER}+c2"] and placed["loses"] == [f"{PROVIDER}+c1"]
    assert sorted(g["clusters"][0] for g in p["changes"]) == [f"{PROVIDER}+c1", f"{PROVIDER}+c2"]
    page = target.preview(dig, clusters=True, offset=1, limit=1, dry_run=True)
    assert page["clusters"]["total"] == 2
    assert [c["cluster"] for c in page["clusters"]["items"]] == [f"{PROVIDER}+c2"]
    assert page["dryRun"]["clusters"] == 1 and page["dryRun"]["refusals"] == [], page["dryRun"]
    assert fleet.get("c2", DEPLOYMENT) is None
    assert target.update(dig) == 2
    moved = target.wait(dig, timeout=120)
    assert moved.ready and [c.cluster for c in moved.apps[0].clusters] == ["c2"]
    assert fleet.get("c1", DEPLOYMENT) is None
    assert fleet.get("c2", DEPLOYMENT) is not None

    # Back to revision 1: c1 again.
    with pytest.raises(emco.InvalidArgument):
        target.rollback(dig, 7)
    target.rollback(dig, 1)
    back = target.wait(dig, timeout=120)
    assert back.ready and [c.cluster for c in back.apps[0].clusters] == ["c1"]
    assert fleet.get("c1", DEPLOYMENT) is not None
    assert fleet.get("c2", DEPLOYMENT) is None

    # Migrate to version v2 of the composite app, placed on both clusters.
    onboard_web_version(target, "v2")
    v2 = target.create_deployment_intent_group(
        "p", "web", "v2", "d2", composite_profile="default", logical_cloud="admin",
        placement={"http-server": EDGE})
    target.approve(v2)
    target.migrate(dig, "v2", "d2")
    migrated = target.wait(v2, timeout=120)
    assert migrated.ready and migrated.state == "Instantiated", migrated
    assert sorted(c.cluster for c in migrated.apps[0].clusters) == fleet.names
    assert target.status(dig, ready=False).state != "Instantiated"
    for cluster in fleet.names:
        assert fleet.get(cluster, DEPLOYMENT) is not None

    target.terminate(v2)
    assert target.wait(v2, ready=False, timeout=120).state == "Terminated"
    for cluster in fleet.names:
        assert fleet.get(cluster, DEPLOYMENT) is None


def test_a_standard_logical_cloud_follows_its_cluster_references(
    target: emco.Emco, fleet: Fleet
) -> None:
    fleet.register(target)
    target.create_project("p")
    lc = target.create_logical_cloud("p", "team", [(PROVIDER, "c1")], namespace="team-ns",
                                     level="1", user="bob")
    target.instantiate(lc)
    assert target.wait(lc, ready=False, timeout=120).state == "Instantiated"
    assert fleet.get("c1", "/api/v1/namespaces/team-ns") is not None
    assert fleet.get("c2", "/api/v1/namespaces/team-ns") is None
    kubeconfig = target.logical_cloud_kubeconfig(lc, f"{PROVIDER}-c1")
    assert "team-ns" in kubeconfig and "bob" in kubeconfig, kubeconfig

    # A new reference is part of the cloud once it is updated.
    target.add_cluster_reference(lc, PROVIDER, "c2")
    target.update(lc)
    updated = target.wait(lc, ready=False, timeout=120)
    assert updated.deployed_status in ("Instantiated", "Updated"), updated
    assert fleet.get("c2", "/api/v1/namespaces/team-ns") is not None

    target.terminate(lc)
    assert target.wait(lc, ready=False, timeout=120).state == "Terminated"
    target.delete_logical_cloud(lc)
    assert target.list_logical_clouds("p") == []


def test_stop_ends_an_instantiate_that_retries_an_unreachable_cluster(
    target: emco.Emco, fleet: Fleet
) -> None:
    dig = web_group(target, fleet)
    fleet.set_down("c2")
    target.approve(dig)
    target.instantiate(dig)
    # c2 retries, and the status says why, how often and when next.
    with target.watch(dig, ready=False, interval=0.2, timeout=60) as watch:
        for status in watch:
            if status.failures():
                break
    retrying = status.failures()
    assert retrying and all(r.reason == "Unreachable" for r in retrying), status
    assert all(r.attempts and r.next_retry for r in retrying), retrying
    assert status.why() and all(f"{PROVIDER}+c2 " in line for line in status.why())
    # The cluster says why too.
    [c2] = [c for a in status.apps for c in a.clusters if c.cluster == "c2"]
    assert (c2.connectivity, c2.reason) == ("Retrying", "Unreachable"), c2
    assert c2.attempts and c2.next_retry and c2.message, c2

    target.stop(dig)
    stopped = target.wait(dig, ready=False, timeout=60)
    assert (stopped.state, stopped.deployed_status) == (
        "InstantiateStopped", "InstantiateFailed"), stopped
    # What never got to c2 says so.
    assert {r.reason for r in stopped.failures()} == {"Stopped"}, stopped.why()
    fleet.set_down("c2", down=False)
    target.terminate(dig)
    assert target.wait(dig, ready=False, timeout=120).state == "Terminated"
