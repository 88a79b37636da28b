"""Update, rollback and migrate from Python, embedded and against a server, checked on the
kubesim clusters (EMCO's handlers: src/orchestrator/api/instantiation_handler.go)."""

import pytest

import emco
from conftest import EDGE, Fleet, deploy_web, on, onboard_web, onboard_web_version

DEPLOYMENT = "/apis/apps/v1/namespaces/default/deployments/http-server"


def test_update_rollback_and_migrate_move_the_app(target: emco.Emco, fleet: Fleet) -> None:
    fleet.register(target)
    onboard_web(target, fleet.names)
    dig, _ = deploy_web(target, on("c1"))
    assert fleet.get("c1", DEPLOYMENT) is not None

    # Revision 2 moves the app to c2.
    target.set_placement(dig, "http-server", on("c2"))
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
