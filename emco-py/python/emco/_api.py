"""One API over two ways in: `Client` (an emco-server or EMCO over REST) and `Orchestrator` (the
orchestrator and rsync embedded in this process). Every method is a request of EMCO's REST API;
the answers are the same either way."""

import asyncio
import json
import os
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import (
    Any,
    AsyncIterator,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    Union,
)
from urllib.parse import quote, urlencode

from ._emco import Context, Transport
from ._errors import AlreadyExists, EmcoError, Unavailable, error_for
from ._status import Status, parse_status

PathLike = Union[str, "os.PathLike[str]"]
Json = Dict[str, Any]


class ActionController(Protocol):
    """An action controller in Python: `update(ctx)` changes the AppContext before rsync
    applies it (`ctx.put_resource`, `ctx.add_resource`, `ctx.remove_resource`); an exception
    aborts the operation with its message (and the kind of an `EmcoError`). A
    `terminate(ctx)` method, when present, is called when the deployment is terminated."""

    def update(self, ctx: Context) -> None: ...


class PlacementController(Protocol):
    """A placement controller in Python: `filter_clusters(ctx)` removes the clusters an app must
    not go to (`ctx.remove_cluster(app, cluster)`; `ctx.cluster_groups(app)` gives anyOf
    groups); an exception aborts the operation with its message."""

    def filter_clusters(self, ctx: Context) -> None: ...


Controller = Union[ActionController, PlacementController]


@dataclass(frozen=True)
class DigRef:
    """A deployment intent group: project, composite app, its version and the group's name."""

    project: str
    composite_app: str
    version: str
    name: str

    @property
    def path(self) -> str:
        return (
            f"/v2/projects/{_q(self.project)}/composite-apps/{_q(self.composite_app)}/"
            f"{_q(self.version)}/deployment-intent-groups/{_q(self.name)}"
        )


@dataclass(frozen=True)
class LogicalCloudRef:
    """A logical cloud of a project."""

    project: str
    name: str

    @property
    def path(self) -> str:
        return f"/v2/projects/{_q(self.project)}/logical-clouds/{_q(self.name)}"


Target = Union[DigRef, LogicalCloudRef]


def _q(segment: str) -> str:
    return quote(segment, safe="")


def _meta(name: str, description: str = "") -> Json:
    meta: Json = {"name": name}
    if description:
        meta["description"] = description
    return meta


class _Api:
    """The methods `Client` and `Orchestrator` share."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    # ---- plumbing -------------------------------------------------------------------------

    def _answer(self, method: str, path: str, answer: Tuple[int, Optional[str], bytes]) -> Any:
        status, kind, body = answer
        text = body.decode("utf-8", "replace")
        if status >= 400:
            raise error_for(status, kind, f"{method} {self._t.url(path)}: {text.strip()}")
        if not body.strip():
            return None
        try:
            return json.loads(text)
        except ValueError:
            return text

    def _call(self, method: str, path: str, body: Optional[Any] = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        try:
            answer = self._t.request(method, path, data)
        except ConnectionError as e:
            raise Unavailable(str(e)) from e
        return self._answer(method, path, answer)

    def _upload(self, method: str, path: str, metadata: Json, field: str, file: Path) -> Any:
        try:
            answer = self._t.upload(
                method, path, json.dumps(metadata).encode(), [(field, file.name, str(file))]
            )
        except ConnectionError as e:
            raise Unavailable(str(e)) from e
        return self._answer(method, path, answer)

    def request(self, method: str, path: str, body: Optional[Any] = None) -> Any:
        """Any request of the REST API (`path` starts with `/v2/`); the decoded JSON answer."""
        return self._call(method, path, body)

    @property
    def is_embedded(self) -> bool:
        """Whether the orchestrator runs in this process."""
        return self._t.is_embedded

    # ---- projects, cluster providers and clusters -----------------------------------------

    def create_project(self, name: str, description: str = "") -> Json:
        return self._call("POST", "/v2/projects", {"metadata": _meta(name, description)})  # type: ignore[no-any-return]

    def get_project(self, name: str) -> Json:
        return self._call("GET", f"/v2/projects/{_q(name)}")  # type: ignore[no-any-return]

    def list_projects(self) -> List[Json]:
        return self._call("GET", "/v2/projects") or []

    def delete_project(self, name: str) -> None:
        self._call("DELETE", f"/v2/projects/{_q(name)}")

    def create_cluster_provider(self, name: str, description: str = "") -> Json:
        return self._call("POST", "/v2/cluster-providers", {"metadata": _meta(name, description)})  # type: ignore[no-any-return]

    def create_cluster(
        self,
        provider: str,
        name: str,
        kubeconfig: Union[PathLike, str],
        labels: Sequence[str] = (),
        description: str = "",
    ) -> None:
        """Registers cluster `name` with its kubeconfig: a path to the file, or its text."""
        path = f"/v2/cluster-providers/{_q(provider)}/clusters"
        metadata = {"metadata": _meta(name, description)}
        with _as_file(kubeconfig, "kubeconfig") as file:
            self._upload("POST", path, metadata, "file", file)
        for label in labels:
            self.add_cluster_label(provider, name, label)

    def add_cluster_label(self, provider: str, cluster: str, label: str) -> None:
        path = f"/v2/cluster-providers/{_q(provider)}/clusters/{_q(cluster)}/labels"
        self._call("POST", path, {"clusterLabel": label})

    def list_clusters(self, provider: str, label: Optional[str] = None) -> List[str]:
        """The names of the clusters of `provider`, those with `label` when given."""
        path = f"/v2/cluster-providers/{_q(provider)}/clusters"
        if label is not None:
            return self._call("GET", f"{path}?{urlencode({'label': label})}") or []
        return [c["metadata"]["name"] for c in self._call("GET", path) or []]

    def delete_cluster(self, provider: str, name: str) -> None:
        self._call("DELETE", f"/v2/cluster-providers/{_q(provider)}/clusters/{_q(name)}")

    # ---- logical clouds --------------------------------------------------------------------

    def create_logical_cloud(
        self,
        project: str,
        name: str,
        clusters: Sequence[Tuple[str, str]] = (),
        namespace: str = "",
        level: str = "0",
    ) -> LogicalCloudRef:
        """Creates a logical cloud (level "0": admin, the clusters' own credentials; "1":
        standard, in `namespace`) with a reference to each `(provider, cluster)`."""
        spec: Json = {"level": level}
        if namespace:
            spec["namespace"] = namespace
        lc = LogicalCloudRef(project, name)
        self._call("POST", f"/v2/projects/{_q(project)}/logical-clouds",
                   {"metadata": _meta(name), "spec": spec})
        for provider, cluster in clusters:
            self._call("POST", f"{lc.path}/cluster-references", {
                "metadata": _meta(f"{provider}-{cluster}"),
                "spec": {"clusterProvider": provider, "cluster": cluster,
                         "loadBalancerIP": "0.0.0.0"},
            })
        return lc

    # ---- composite apps ---------------------------------------------------------------------

    def create_composite_app(self, project: str, name: str, version: str,
                             description: str = "") -> Json:
        return self._call("POST", f"/v2/projects/{_q(project)}/composite-apps", {  # type: ignore[no-any-return]
            "metadata": _meta(name, description), "spec": {"compositeAppVersion": version}})

    def create_app(self, project: str, composite_app: str, version: str, name: str,
                   chart: PathLike, description: str = "") -> None:
        """Adds app `name` with its Helm chart: a chart directory or a `.tgz`."""
        path = (f"/v2/projects/{_q(project)}/composite-apps/{_q(composite_app)}/"
                f"{_q(version)}/apps")
        with _as_tgz(chart) as file:
            self._upload("POST", path, {"metadata": _meta(name, description)}, "file", file)

    def create_composite_profile(self, project: str, composite_app: str, version: str,
                                 name: str) -> None:
        path = (f"/v2/projects/{_q(project)}/composite-apps/{_q(composite_app)}/"
                f"{_q(version)}/composite-profiles")
        self._call("POST", path, {"metadata": _meta(name)})

    def create_app_profile(self, project: str, composite_app: str, version: str,
                           composite_profile: str, name: str, app: str,
                           profile: PathLike) -> None:
        """Adds the profile of `app` (a directory with `manifest.yaml`, or its `.tgz`)."""
        path = (f"/v2/projects/{_q(project)}/composite-apps/{_q(composite_app)}/"
                f"{_q(version)}/composite-profiles/{_q(composite_profile)}/profiles")
        with _as_tgz(profile, top_dir=False) as file:
            self._upload("POST", path, {"metadata": _meta(name), "spec": {"app": app}},
                         "file", file)

    # ---- deployment intent groups -----------------------------------------------------------

    def create_deployment_intent_group(
        self,
        project: str,
        composite_app: str,
        version: str,
        name: str,
        composite_profile: str,
        logical_cloud: str,
        release: str = "r1",
        override_values: Optional[Mapping[str, Mapping[str, str]]] = None,
        placement: Optional[Mapping[str, Sequence[Mapping[str, str]]]] = None,
        intents: Optional[Mapping[str, str]] = None,
    ) -> DigRef:
        """Creates a group, its generic placement intent `placement` with one app intent per
        app (`{app: [{"clusterProvider": p, "cluster": c} or {..., "clusterLabel": l}]}`,
        all of them), and its intents (`genericPlacementIntent` plus `intents`, e.g.
        `{"gac": "my-gac-intent"}`)."""
        dig = DigRef(project, composite_app, version, name)
        parent = dig.path.rsplit("/", 1)[0]
        spec: Json = {"compositeProfile": composite_profile, "version": release,
                      "logicalCloud": logical_cloud}
        if override_values:
            spec["overrideValues"] = [{"app": app, "values": dict(values)}
                                      for app, values in override_values.items()]
        self._call("POST", parent, {"metadata": _meta(name), "spec": spec})
        self._call("POST", f"{dig.path}/generic-placement-intents",
                   {"metadata": _meta("placement"), "spec": {"logicalCloud": logical_cloud}})
        for app, all_of in (placement or {}).items():
            self._call("POST", f"{dig.path}/generic-placement-intents/placement/app-intents", {
                "metadata": _meta(f"{app}-placement"),
                "spec": {"app": app, "intent": {"allOf": [dict(c) for c in all_of]}},
            })
        intent = {"genericPlacementIntent": "placement", **dict(intents or {})}
        self._call("POST", f"{dig.path}/intents",
                   {"metadata": _meta("intents"), "spec": {"intent": intent}})
        return dig

    # ---- lifecycle ----------------------------------------------------------------------------

    def approve(self, dig: DigRef) -> None:
        self._call("POST", f"{dig.path}/approve")

    def instantiate(self, target: Target) -> None:
        """Instantiates a deployment intent group or a logical cloud; returns once rsync has the
        work (follow it with `watch` or `wait`)."""
        self._call("POST", f"{target.path}/instantiate")

    def terminate(self, target: Target) -> None:
        self._call("POST", f"{target.path}/terminate")

    def stop(self, target: Target) -> None:
        self._call("POST", f"{target.path}/stop")

    def update(self, target: Target) -> Optional[int]:
        """Deploys the current intents as a new revision; returns it (a group's)."""
        answer = self._call("POST", f"{target.path}/update")
        return answer if isinstance(answer, int) else None

    def rollback(self, dig: DigRef, revision: int) -> None:
        self._call("POST", f"{dig.path}/rollback",
                   {"metadata": {}, "spec": {"revision": str(revision)}})

    def migrate(self, dig: DigRef, target_version: str, target_group: str) -> None:
        self._call("POST", f"{dig.path}/migrate", {"metadata": {}, "spec": {
            "targetCompositeAppVersion": target_version,
            "targetDeploymentIntentGroup": target_group}})

    # ---- status ------------------------------------------------------------------------------

    def status(self, target: Target, ready: bool = True, apps: Sequence[str] = (),
               clusters: Sequence[str] = (), resources: Sequence[str] = (),
               instance: Optional[str] = None) -> Status:
        """The full status (`ready=False`: what rsync deployed, without readiness), filtered
        by apps, clusters (`provider+cluster`) and resources as EMCO's query parameters."""
        query: List[Tuple[str, str]] = [("status", "ready" if ready else "deployed")]
        query += [("app", a) for a in apps]
        query += [("cluster", c) for c in clusters]
        query += [("resource", r) for r in resources]
        if instance is not None:
            query.append(("instance", instance))
        return parse_status(self._call("GET", f"{target.path}/status?{urlencode(query)}"))

    def query_status(self, target: Target, **params: str) -> Any:
        """The status route with any of EMCO's query parameters (`type`, `output`, `apps`,
        `clusters`, `resources`, ...), answered as the server's JSON."""
        return self._call("GET", f"{target.path}/status?{urlencode(params)}")

    def watch(self, target: Target, ready: bool = True, interval: float = 0.5,
              timeout: Optional[float] = None) -> Iterator[Status]:
        """The status now, then each time it changes (state, deployed or ready status, or any
        resource's), until `timeout` seconds pass (forever when `None`)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        last: Optional[Any] = None
        while True:
            now = self.status(target, ready=ready)
            seen = (now.state, now.deployed_status, now.ready_status,
                    [(r.name, r.deployed_status, r.ready_status, r.reason)
                     for r in now.resources()])
            if seen != last:
                last = seen
                yield now
            if deadline is not None and time.monotonic() >= deadline:
                return
            time.sleep(interval)

    async def awatch(self, target: Target, ready: bool = True, interval: float = 0.5,
                     timeout: Optional[float] = None) -> AsyncIterator[Status]:
        """`watch` for asyncio: the requests run in a worker thread."""
        it = self.watch(target, ready=ready, interval=interval, timeout=timeout)
        done = object()
        while True:
            item = await asyncio.to_thread(next, it, done)
            if item is done:
                return
            yield item  # type: ignore[misc]

    def wait(self, target: Target, ready: bool = True, timeout: float = 120.0,
             interval: float = 0.5) -> Status:
        """Waits until the current operation settled (and, with `ready`, every resource is
        ready, for a deployed target); the last status. Raises `TimeoutError` with it."""
        last: Optional[Status] = None
        for last in self.watch(target, ready=ready, interval=interval, timeout=timeout):
            if _settled(last, ready):
                return last
        raise TimeoutError(f"not settled after {timeout} s: {last}")

    # ---- emcoctl files -------------------------------------------------------------------------

    def apply_file(self, path: PathLike, values: Optional[Mapping[str, Any]] = None,
                   command: str = "apply", wait: float = 0.0) -> List[Json]:
        """Runs an emcoctl file (`command`: apply, delete, get or update) with `values` as its
        template values, as `emcoctl <command> -f path` does; one `{url, status, body}` per
        document. Raises the first failure's exception (the list is its `outcomes`)."""
        raw = self._t.run_file(str(path), command,
                               None if values is None else json.dumps(values).encode(),
                               float(wait))
        outcomes: List[Json] = json.loads(raw)
        for o in outcomes:
            status = int(o.get("status") or 0)
            if status >= 400 or "error" in o:
                body = o.get("body")
                text = body if isinstance(body, str) else json.dumps(body)
                err = error_for(status, None, f"{o.get('url')}: {o.get('error') or text}")
                err.outcomes = outcomes  # type: ignore[attr-defined]
                raise err
        return outcomes


def _settled(s: Status, ready: bool) -> bool:
    """Whether the operation the lifecycle state names is done with (and, for a deployment
    with `ready`, every resource ready)."""
    d = s.deployed_status
    if d in ("Instantiating", "Terminating", "Updating", "PreTerminate"):
        return False
    if s.state in ("Created", "Approved", "InstantiateStopped", "TerminateStopped"):
        return True
    if s.state == "Terminated":
        return d in ("Terminated", "TerminateFailed", "")
    if d in ("InstantiateFailed", "UpdateFailed"):
        return True
    if d not in ("Instantiated", "Updated"):
        return False
    return not ready or s.ready


class _TempFile:
    """A context manager yielding a path, removing it afterwards when it was made here."""

    def __init__(self, path: Path, owned: Optional[tempfile.TemporaryDirectory[str]]) -> None:
        self.path, self.owned = path, owned

    def __enter__(self) -> Path:
        return self.path

    def __exit__(self, *exc: object) -> None:
        if self.owned is not None:
            self.owned.cleanup()


def _as_file(value: Union[PathLike, str], name: str) -> _TempFile:
    if isinstance(value, str) and ("\n" in value or not Path(value).exists()):
        tmp = tempfile.TemporaryDirectory(prefix="emco-")
        path = Path(tmp.name) / name
        path.write_text(value)
        return _TempFile(path, tmp)
    return _TempFile(Path(value), None)


def _as_tgz(path: PathLike, top_dir: bool = True) -> _TempFile:
    """A `.tgz` as is; a directory tarred (under its own name for a chart, at the root for a
    profile)."""
    p = Path(path)
    if not p.is_dir():
        return _TempFile(p, None)
    tmp = tempfile.TemporaryDirectory(prefix="emco-")
    out = Path(tmp.name) / f"{p.name}.tgz"
    with tarfile.open(out, "w:gz") as tar:
        for f in sorted(p.rglob("*")):
            rel = f.relative_to(p)
            tar.add(f, arcname=str(Path(p.name) / rel if top_dir else rel), recursive=False)
    return _TempFile(out, tmp)


class Client(_Api):
    """An emco-server (or EMCO) over REST: `Client("http://host:9015", token=...)`."""

    def __init__(self, url: str, token: Optional[str] = None,
                 ca_cert: Optional[PathLike] = None, insecure: bool = False) -> None:
        try:
            transport = Transport.remote(url, token,
                                         None if ca_cert is None else str(ca_cert), insecure)
        except ValueError as e:
            raise EmcoError(str(e)) from e
        super().__init__(transport)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Nothing to release: each request has its own connection."""


class Orchestrator(_Api):
    """The orchestrator, rsync and the built-in controllers in this process, no server:
    `Orchestrator.in_memory()` or `Orchestrator.embedded(data_dir)`. Use it as a context
    manager, or call `close()`, to stop its engine."""

    def __init__(self, transport: Transport,
                 controllers: Optional[Mapping[str, Controller]] = None,
                 priority: int = 1) -> None:
        super().__init__(transport)
        # Registered like any controller, so deployment intent groups can name them; the
        # address is never dialled: the orchestrator calls them in this process.
        for name, controller in (controllers or {}).items():
            kind = "placement" if hasattr(controller, "filter_clusters") else "action"
            try:
                self._call("POST", "/v2/controllers", {
                    "metadata": _meta(name),
                    "spec": {"host": "localhost", "port": 9, "type": kind,
                             "priority": priority},
                })
            except AlreadyExists:
                pass

    @classmethod
    def in_memory(cls, controllers: Optional[Mapping[str, Controller]] = None,
                  priority: int = 1) -> "Orchestrator":
        """Stores in memory: everything is gone when the process ends. `controllers` are
        Python action controllers (with `update`) or placement controllers (with
        `filter_clusters`) by name, called in this process."""
        found = dict(controllers or {})
        return cls(Transport.embedded(None, list(found.items())), found, priority)

    @classmethod
    def embedded(cls, data_dir: PathLike,
                 controllers: Optional[Mapping[str, Controller]] = None,
                 priority: int = 1) -> "Orchestrator":
        """Stores in one file under `data_dir`; deployments in progress resume at the next
        start over the same directory."""
        found = dict(controllers or {})
        return cls(Transport.embedded(str(data_dir), list(found.items())), found, priority)

    def __enter__(self) -> "Orchestrator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stops the engine (what it was doing resumes at the next start over the same data)."""
        self._t.close()
