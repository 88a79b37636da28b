"""The scripts of examples/python, run as a user runs them against kubesim."""

import signal
import subprocess
import sys

import emco
from conftest import ROOT, Fleet, Server, default_sigint, deploy_web, on, onboard_web

SCRIPTS = ROOT / "examples" / "python"


def test_the_deploy_script_deploys_the_example_and_removes_it(fleet: Fleet) -> None:
    done = subprocess.run([sys.executable, str(SCRIPTS / "deploy.py"), str(fleet.dir)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "web-dig: Instantiated, Instantiated, Ready" in done.stdout, done.stdout
    assert "web-dig: Terminated" in done.stdout, done.stdout
    for cluster in fleet.names:
        assert fleet.get(cluster, "/apis/apps/v1/namespaces/default/deployments/"
                                  "http-server") is None


def test_the_controller_script_labels_deployments_of_a_server(
    server: Server, fleet: Fleet
) -> None:
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPTS / "controller.py"), "--server", server.url,
         "--appcontext", server.grpc, "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    assert proc.stdout is not None
    try:
        assert "serving on" in proc.stdout.readline()
        client = emco.Client(server.url)
        assert "owner" in [c.name for c in client.list_controllers()]
        fleet.register(client)
        onboard_web(client, ["c1"])
        deploy_web(client, on("c1"), intents={"owner": "team-a"})
        deployment = fleet.get("c1", "/apis/apps/v1/namespaces/default/deployments/http-server")
        assert deployment is not None
        assert deployment["metadata"]["labels"]["owner"] == "team-a"

        proc.send_signal(signal.SIGINT)
        assert proc.stdout.readline().strip() == "stopped"
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()
        proc.wait()
