"""The scripts of examples/python, run as a user runs them against kubesim."""

import signal
import subprocess
import sys

import emco
import pytest
from conftest import (PROVIDER, ROOT, Fleet, Server, default_sigint, deploy_web, on,
                      onboard_web)

SCRIPTS = ROOT / "examples" / "python"
DEPLOYMENT = "/apis/apps/v1/namespaces/default/deployments/http-server"


def test_the_deploy_script_deploys_the_example_and_removes_it(fleet: Fleet) -> None:
    done = subprocess.run([sys.executable, str(SCRIPTS / "deploy.py"), str(fleet.dir)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "web-dig: Instantiated, Instantiated, Ready" in done.stdout, done.stdout
    assert "web-dig: Terminated" in done.stdout, done.stdout
    for cluster in fleet.names:
        assert fleet.get(cluster, "/apis/apps/v1/namespaces/default/deployments/"
                                  "http-server") is None


class Script:
    """An example controller script serving beside `server` until `stop`."""

    def __init__(self, server: Server, script: str, *flags: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(SCRIPTS / script), "--server", server.url,
             "--appcontext", server.grpc, "--port", "0", *flags],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=default_sigint)
        assert self.proc.stdout is not None
        self.stdout = self.proc.stdout
        assert "serving on" in self.stdout.readline()

    def stop(self) -> None:
        """Ctrl-C: it says it stopped and exits cleanly."""
        self.proc.send_signal(signal.SIGINT)
        assert self.stdout.readline().strip() == "stopped"
        assert self.proc.wait(timeout=10) == 0

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


def test_the_controller_script_labels_deployments_of_a_server(
    server: Server, fleet: Fleet
) -> None:
    script = Script(server, "controller.py")
    try:
        client = emco.Client(server.url)
        assert "owner" in [c.name for c in client.list_controllers()]
        fleet.register(client)
        onboard_web(client, ["c1"])
        deploy_web(client, on("c1"), intents={"owner": "team-a"})
        deployment = fleet.get("c1", DEPLOYMENT)
        assert deployment is not None
        assert deployment["metadata"]["labels"]["owner"] == "team-a"
        script.stop()
    finally:
        script.kill()


def test_the_drain_script_keeps_groups_off_drained_clusters(
    server: Server, fleet: Fleet
) -> None:
    script = Script(server, "drain.py", "--cluster", f"{PROVIDER}+c2")
    try:
        client = emco.Client(server.url)
        [drain] = [c for c in client.list_controllers() if c.name == "drain"]
        assert drain.type == "placement"
        fleet.register(client)
        onboard_web(client, fleet.names)
        both = on("c1") + on("c2")
        deploy_web(client, both, intents={"drain": "on"})
        assert fleet.get("c1", DEPLOYMENT) is not None
        assert fleet.get("c2", DEPLOYMENT) is None
        # Without the intent the group's placement stands.
        deploy_web(client, both, name="d2")
        assert fleet.get("c2", DEPLOYMENT) is not None
        # Placed on c2 alone, the app has nowhere to go: the instantiate says why.
        dig = client.create_deployment_intent_group(
            "p", "web", "v1", "d3", composite_profile="default", logical_cloud="admin",
            placement={"http-server": on("c2")}, intents={"drain": "on"})
        client.approve(dig)
        with pytest.raises(emco.EmcoError, match="every cluster of app http-server is drained"):
            client.instantiate(dig)
        script.stop()
    finally:
        script.kill()
