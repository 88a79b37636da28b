"""Rollouts in waves from Python, embedded and against a server, on the kubesim clusters: a
first instantiate wave by wave with an approval, then an update to a version kubesim never makes
ready, which fails its first wave and is rolled back by itself (emco-rs's own routes:
emco-orchestrator/src/lifecycle/rollout.rs)."""

import shutil
from pathlib import Path

import pytest

import emco
from conftest import ROOT, Fleet, web_group

DEPLOYMENT = "/apis/apps/v1/namespaces/default/deployments/http-server"


def _image(fleet: Fleet, cluster: str) -> str:
    deployment = fleet.get(cluster, DEPLOYMENT)
    assert deployment is not None, cluster
    image: str = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    return image


def test_waves_with_approval_and_an_automatic_rollback(
        target: emco.Emco, fleet: Fleet, tmp_path: Path) -> None:
    dig = web_group(target, fleet)
    with pytest.raises(emco.InvalidArgument):
        target.set_rollout_policy(dig, {"waves": [{"percent": 150}]})
    target.set_rollout_policy(dig, {
        "waves": [{"clusters": ["c1"]}, {}],
        "gates": {"progressDeadline": "8s", "approval": True},
        "onFailure": "rollback"})
    target.approve(dig)
    target.instantiate(dig)
    waiting = target.wait_rollout(dig, states=["WaitingForApproval"])
    assert [w["state"] for w in waiting["waves"]] == ["Succeeded", "WaitingForApproval"]
    assert fleet.get("c2", DEPLOYMENT) is None
    target.approve_wave(dig)
    done = target.wait_rollout(dig)
    assert done["state"] == "Succeeded", done
    assert target.wait(dig, timeout=120).ready
    good = _image(fleet, "c1")

    # A version that never gets ready: the first wave fails and is rolled back.
    target.set_rollout_policy(dig, {
        "waves": [{"clusters": ["c1"]}, {}],
        "gates": {"progressDeadline": "5s"},
        "onFailure": "rollback"})
    chart = tmp_path / "http-server"
    shutil.copytree(ROOT / "examples" / "charts" / "http-server", chart)
    values = chart / "values.yaml"
    values.write_text("\n".join(
        "image: nginx:1.28-never-ready" if line.startswith("image:") else line
        for line in values.read_text().splitlines()) + "\n")
    target.replace_app("p", "web", "v1", "http-server", chart)
    target.update(dig)
    with pytest.raises(emco.Conflict):
        target.update(dig)
    back = target.wait_rollout(dig)
    assert back["state"] == "RolledBack", back
    assert back["waves"][0]["failures"][0]["cluster"].endswith("+c1"), back
    assert target.wait(dig, timeout=120).ready
    assert _image(fleet, "c1") == good
    assert _image(fleet, "c2") == good
    with pytest.raises(emco.Conflict):
        target.approve_wave(dig)
    target.delete_rollout_policy(dig)
