"""scripts/run.sh, the README's main command, as a user who only cloned the repository runs it:
it deploys the project's own example to kubesim clusters by itself, prints the dashboard's URL
and what to try next, serves the dashboard, stops on Ctrl-C, and refuses a port in use."""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Dict

from conftest import ROOT, _free_port


def _env(tmp_path: Path, port: int, grpc: int) -> Dict[str, str]:
    env = dict(os.environ)
    env.update(EMCO_RUN_CLUSTERS="2", EMCO_LISTEN=f"127.0.0.1:{port}",
               EMCO_GRPC_LISTEN=f"127.0.0.1:{grpc}", EMCO_RUN_DIR=str(tmp_path / "run"))
    return env


def test_run_sh_deploys_the_example_and_prints_the_dashboard(tmp_path: Path) -> None:
    port, grpc = _free_port(), _free_port()
    out = open(tmp_path / "run.out", "w")
    proc = subprocess.Popen(["bash", "scripts/run.sh"], cwd=ROOT, env=_env(tmp_path, port, grpc),
                            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while "Press Ctrl-C" not in (tmp_path / "run.out").read_text():
            assert proc.poll() is None, (tmp_path / "run.out").read_text()
            assert time.monotonic() < deadline, (tmp_path / "run.out").read_text()
            time.sleep(0.5)
        text = (tmp_path / "run.out").read_text()
        url = f"http://127.0.0.1:{port}"
        assert f"Dashboard: {url}/ui/#/dig/demo/http/v1/http-dig" in text, text
        assert "emcoctl --server" in text and "kubectl --kubeconfig" in text, text
        # Deployed by the script itself: both apps on both clusters.
        dig = f"{url}/v2/projects/demo/composite-apps/http/v1/deployment-intent-groups/http-dig"
        with urllib.request.urlopen(f"{dig}/status?status=deployed", timeout=10) as answer:
            status = json.load(answer)
        placed = {(a["name"], c["cluster"]) for a in status["apps"] for c in a["clusters"]}
        assert placed == {(a, c) for a in ("http-server", "http-client") for c in ("c1", "c2")}
        assert status["states"]["actions"][-1]["state"] == "Instantiated", status
        with urllib.request.urlopen(f"{url}/ui/", timeout=10) as answer:
            assert b"app.js" in answer.read()

        # A second run.sh refuses the ports the first one holds, and says why.
        again = subprocess.run(["bash", "scripts/run.sh"], cwd=ROOT,
                               env=_env(tmp_path / "again", port, _free_port()),
                               capture_output=True, text=True, timeout=600)
        assert again.returncode == 1, again.stdout + again.stderr
        assert f"127.0.0.1:{port} is already in use" in again.stderr, again.stderr
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=30)
    # Ctrl-C stopped both processes: nothing listens on their ports, so a server can listen there
    # again (SO_REUSEADDR, as servers bind: the closed connections' TIME_WAIT does not count, a
    # listener still would).
    for p in (port, grpc):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", p))
            s.listen()
