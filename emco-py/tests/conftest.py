"""Fixtures: kubesim clusters and an emco-server, the project's own binaries started on loopback
ports and stopped after each test; the example charts of examples/ tarred as emcoctl expects."""

import base64
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Set

import pytest

import emco


def default_sigint() -> None:
    """Before a script the test interrupts starts: Ctrl-C reaches it as in a terminal, also when
    the test run itself ignores SIGINT (a background job of a non-interactive shell does, and
    Python then installs no KeyboardInterrupt handler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("EMCO_BIN_DIR", ROOT / "target" / "debug"))
PROVIDER = "kubesim"


_BUILT: Set[str] = set()


def _binary(name: str) -> Path:
    """The project's binary `name`, built (or found up to date) once per run unless
    EMCO_BIN_DIR names prebuilt ones."""
    if "EMCO_BIN_DIR" not in os.environ and name not in _BUILT:
        subprocess.run(["cargo", "build", "--quiet", "-p", name], cwd=ROOT, check=True)
        _BUILT.add(name)
    return BIN / name


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Fleet:
    """kubesim serving clusters c1..cN; their kubeconfigs are in `dir`."""

    def __init__(self, dir: Path, clusters: int) -> None:
        self.dir = dir
        self.names = [f"c{i}" for i in range(1, clusters + 1)]
        out = open(dir / "kubesim.out", "w")
        self.proc = subprocess.Popen(
            [str(_binary("kubesim")), "serve", "--clusters", str(clusters),
             "--kubeconfig-dir", str(dir), "--ready-delay-ms", "200"],
            stdout=out, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while "kubesim ready" not in (dir / "kubesim.out").read_text():
            assert self.proc.poll() is None, "kubesim exited"
            assert time.monotonic() < deadline, "kubesim not ready in 30 s"
            time.sleep(0.05)

    def kubeconfig(self, name: str) -> Path:
        return self.dir / f"{name}.kubeconfig"

    def get(self, cluster: str, path: str) -> Optional[Dict[str, Any]]:
        """GET `path` of the Kubernetes API of `cluster` as its kubeconfig allows; None for a
        404."""
        return self._call(cluster, path)

    def patch(self, cluster: str, path: str, patch: Dict[str, Any], manager: str) -> None:
        """A JSON merge patch of the object at `path` as field manager `manager` (as `kubectl
        edit` or another controller changes an object)."""
        self._call(cluster, f"{path}?fieldManager={manager}", "PATCH",
                   json.dumps(patch).encode(), "application/merge-patch+json")

    def _call(self, cluster: str, path: str, method: str = "GET", body: Optional[bytes] = None,
              content_type: Optional[str] = None) -> Optional[Dict[str, Any]]:
        text = self.kubeconfig(cluster).read_text()

        def field(name: str) -> str:
            found = re.search(rf"{name}: (\S+)", text)
            assert found, name
            return found.group(1)

        ca = base64.b64decode(field("certificate-authority-data")).decode()
        headers = {"Authorization": f"Bearer {field('token')}"}
        if content_type:
            headers["Content-Type"] = content_type
        req = urllib.request.Request(f"{field('server')}{path}", method=method, data=body,
                                     headers=headers)
        try:
            with urllib.request.urlopen(req, context=ssl.create_default_context(cadata=ca),
                                        timeout=10) as answer:
                doc: Dict[str, Any] = json.load(answer)
                return doc
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise

    def set_down(self, cluster: str, down: bool = True) -> None:
        """Refuses (or again serves) the connections of `cluster`, through kubesim's admin
        endpoint."""
        admin = (self.dir / "kubesim-admin.url").read_text().strip()
        fault = {"unreachable": "refused"} if down else {}
        req = urllib.request.Request(f"{admin}/clusters/{cluster}/fault", method="PUT",
                                     data=json.dumps(fault).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as answer:
            answer.read()

    def register(self, target: emco.Emco, label: str = "edge") -> None:
        target.create_cluster_provider(PROVIDER)
        for name in self.names:
            target.create_cluster(PROVIDER, name, self.kubeconfig(name), labels=[label])

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    (tmp_path / "kubesim").mkdir()
    f = Fleet(tmp_path / "kubesim", 2)
    yield f
    f.stop()


class Server:
    """An emco-server: its REST URL and its gRPC URL (the AppContext service remote
    controllers work on)."""

    def __init__(self, url: str, grpc: str,
                 proc: "Optional[subprocess.Popen[bytes]]" = None) -> None:
        self.url, self.grpc, self.proc = url, grpc, proc


MEMORY = ("--backend", "memory", "--context-backend", "memory")
"""Stores in memory: gone with the process."""


def _start_server(tmp_path: Path, *args: str,
                  stores: Sequence[str] = MEMORY) -> Iterator[Server]:
    """An emco-server with `stores` (in memory by default) and `args`."""
    # A port found free can be taken before the server binds it (kubesim binds ephemeral
    # ports for its clusters meanwhile): a server that could not listen starts again on others.
    for attempt in range(5):
        port, grpc = _free_port(), _free_port()
        url = f"http://127.0.0.1:{port}"
        log_path = tmp_path / f"emco-server-{attempt}.log"
        log = open(log_path, "w")
        proc = subprocess.Popen(
            [str(_binary("emco-server")), "--listen", f"127.0.0.1:{port}",
             "--grpc-listen", f"127.0.0.1:{grpc}", *stores, *args],
            stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{url}/healthz", timeout=1).read()
                break
            except OSError:
                if proc.poll() is not None:
                    break
                assert time.monotonic() < deadline, "emco-server not up in 30 s"
                time.sleep(0.05)
        if proc.poll() is None:
            break
        assert "cannot listen" in log_path.read_text(), log_path.read_text()
    assert proc.poll() is None, log_path.read_text()
    yield Server(url, f"http://127.0.0.1:{grpc}", proc)
    if proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=15)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """An emco-server with its stores in memory, open to anyone."""
    yield from _start_server(tmp_path)


# The static tokens of `secured_server`: a platform admin and the owner of project p1.
ADMIN_TOKEN = "admin-token-0123456789"
ALICE_TOKEN = "alice-token-0123456789"


@pytest.fixture
def secured_server(tmp_path: Path) -> Iterator[Server]:
    """An emco-server that requires tokens: ADMIN_TOKEN (platform admin) and ALICE_TOKEN
    (owner of project p1)."""
    auth = tmp_path / "auth.yaml"
    auth.write_text(
        "tokens:\n"
        f"  - {{token: {ADMIN_TOKEN}, subject: admin, roles: [platform-admin]}}\n"
        f"  - {{token: {ALICE_TOKEN}, subject: alice, roles: ['project-owner:p1']}}\n")
    yield from _start_server(tmp_path, "--auth-config", str(auth))


@pytest.fixture(params=["embedded", "client"])
def target(request: pytest.FixtureRequest) -> Iterator[emco.Emco]:
    """Each test runs twice: with the orchestrator in this process, and against a server."""
    if request.param == "embedded":
        with emco.Orchestrator.in_memory() as orch:
            yield orch
    else:
        with emco.Client(request.getfixturevalue("server").url) as client:
            yield client


@pytest.fixture
def packages(tmp_path: Path) -> Path:
    """The example's charts and profile tarred, as scripts/run.sh tars them."""
    out = tmp_path / "packages"
    out.mkdir()
    for app in ("http-server", "http-client"):
        with tarfile.open(out / f"{app}.tgz", "w:gz") as tar:
            tar.add(ROOT / "examples" / "charts" / app, arcname=app)
    with tarfile.open(out / "profile.tgz", "w:gz") as tar:
        for f in sorted((ROOT / "examples" / "profiles" / "default").iterdir()):
            tar.add(f, arcname=f.name)
    return out


def example_values(fleet: Fleet, packages: Path) -> Dict[str, object]:
    """The values of examples/emcoctl/*.yaml."""
    clusters: List[str] = fleet.names
    return {"PackagesPath": str(packages), "ClusterProvider": PROVIDER,
            "ClusterLabel": "edge", "Clusters": clusters}


def onboard_web(target: emco.Emco, clusters: List[str]) -> None:
    """Project p, an instantiated admin cloud on `clusters`, and composite app web v1 with the
    http-server chart and its profile from the example's directories."""
    target.create_project("p")
    lc = target.create_logical_cloud("p", "admin", [(PROVIDER, c) for c in clusters])
    target.instantiate(lc)
    onboard_web_version(target, "v1")


def onboard_web_version(target: emco.Emco, version: str) -> None:
    """Version `version` of composite app web of project p: app http-server, profile default."""
    examples = ROOT / "examples"
    target.create_composite_app("p", "web", version)
    target.create_app("p", "web", version, "http-server", examples / "charts" / "http-server")
    target.create_composite_profile("p", "web", version, "default")
    target.create_app_profile("p", "web", version, "default", "server-profile", "http-server",
                              examples / "profiles" / "default")


def deploy_web(target: emco.Emco, all_of: List[Dict[str, str]],
               intents: Optional[Dict[str, str]] = None,
               name: str = "d1") -> "tuple[emco.DigRef, emco.Status]":
    """Group `name` of web v1 placing http-server on `all_of` with `intents`, approved,
    instantiated and Ready; its last status."""
    dig = target.create_deployment_intent_group(
        "p", "web", "v1", name, composite_profile="default", logical_cloud="admin",
        placement={"http-server": all_of}, intents=intents)
    target.approve(dig)
    target.instantiate(dig)
    status = target.wait(dig, timeout=120)
    assert status.ready, status
    return dig, status


def web_group(target: emco.Emco, fleet: Fleet) -> emco.DigRef:
    """The fleet registered, web v1 onboarded over it and group d1 placing http-server on every
    cluster, not yet approved."""
    fleet.register(target)
    onboard_web(target, fleet.names)
    return target.create_deployment_intent_group(
        "p", "web", "v1", "d1", composite_profile="default", logical_cloud="admin",
        placement={"http-server": EDGE})


def on(cluster: str) -> List[Dict[str, str]]:
    """Placement on one cluster of the fleet."""
    return [{"clusterProvider": PROVIDER, "cluster": cluster}]


EDGE = [{"clusterProvider": PROVIDER, "clusterLabel": "edge"}]
"""Placement on every cluster of the fleet."""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Iterator[None]:
    """Keeps each phase's report on the test item (`rep_call`), so fixtures can tell a failed
    test at teardown (the dashboard tests take a screenshot then)."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    setattr(item, f"rep_{report.when}", report)


class Temporal:
    """A real Temporal server (../shared/temporal) and the workflow tests' client and worker
    (tests/testkit/workflows/worker.py: workflows `sleep`, `fail` and `migrate`)."""

    TASK_QUEUE = "EMCO_PY_Q"

    def __init__(self, dir: Path) -> None:
        kit = ROOT.parent / "shared" / "temporal"
        if not (kit / "start.sh").is_file():
            if os.environ.get("CI") == "true":
                pytest.fail(f"{kit} is missing: the workflow tests cannot run")
            pytest.skip(f"{kit} is missing; the workflow tests did not run")
        self.kit, self.dir = kit, dir / "temporal"
        self.address = subprocess.run(["bash", str(kit / "start.sh"), str(self.dir)], check=True,
                                      capture_output=True, text=True).stdout.strip()
        self.worker = subprocess.Popen(
            [sys.executable,
             str(ROOT / "tests" / "testkit" / "workflows" / "worker.py"),
             "--temporal", self.address, "--port", "0", "--task-queue", self.TASK_QUEUE],
            stdout=subprocess.PIPE, text=True)
        assert self.worker.stdout is not None
        line = self.worker.stdout.readline()
        self.client_port = int(line.strip().rsplit(":", 1)[1])

    def stop(self) -> None:
        self.worker.kill()
        self.worker.wait()
        subprocess.run(["bash", str(self.kit / "stop.sh"), str(self.dir)], check=False,
                       capture_output=True)


@pytest.fixture
def temporal(tmp_path: Path) -> Iterator[Temporal]:
    """A Temporal server with a workflow client and worker, stopped after the test."""
    t = Temporal(tmp_path)
    try:
        yield t
    finally:
        t.stop()
