"""One API over two ways in: `Client` (an emco-server or EMCO over REST) and `Orchestrator` (the
orchestrator and rsync embedded in this process). Every method is an operation of EMCO's REST
API, named by its operationId in the OpenAPI document (routes in `_operations`, generated from
it); the answers are the same either way."""

import argparse
import asyncio
import json
import time
from typing import (
    Any,
    AsyncIterator,
    Dict,
    Generator,
    Iterator,
    List,
    Mapping,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    Union,
)

from ._base import (
    DigRef,
    Json,
    LogicalCloudRef,
    PathLike,
    Principal,
    Query,
    Target,
    as_file,
    as_tgz,
    meta,
)
from ._emco import Context, ControllerServer as _NativeServer, Transport
from ._errors import AlreadyExists, EmcoError, NotFound, error_for
from ._intents import IntentsApi
from ._workflows import WorkflowsApi
from ._objects import (
    App,
    Cluster,
    ClusterProvider,
    CompositeApp,
    CompositeProfile,
    ControllerRegistration,
    DeploymentIntentGroup,
    KvPairs,
    LogicalCloud,
    Project,
)
from ._operations import OperationId
from ._status import Status, parse_status

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


def _of(target: Target, dig_op: OperationId, cloud_op: OperationId) -> OperationId:
    """The operation of `target`'s kind: a deployment intent group's or a logical cloud's."""
    return dig_op if isinstance(target, DigRef) else cloud_op


class _Api(IntentsApi, WorkflowsApi):
    """The methods `Client` and `Orchestrator` share."""

    # ---- projects, cluster providers and clusters -----------------------------------------

    def create_project(self, name: str, description: str = "") -> Project:
        return Project.from_json(
            self._op("createProject", body={"metadata": meta(name, description)}))

    def get_project(self, name: str) -> Project:
        return Project.from_json(self._op("getProject", name))

    def list_projects(self) -> List[Project]:
        return Project.list_from_json(self._op("listProjects"))

    def delete_project(self, name: str) -> None:
        self._op("deleteProject", name)

    def create_cluster_provider(self, name: str, description: str = "") -> ClusterProvider:
        return ClusterProvider.from_json(
            self._op("createClusterProvider", body={"metadata": meta(name, description)}))

    def get_cluster_provider(self, name: str) -> ClusterProvider:
        return ClusterProvider.from_json(
            self._op("getClusterProvider", name))

    def list_cluster_providers(self) -> List[ClusterProvider]:
        return ClusterProvider.list_from_json(self._op("listClusterProviders"))

    def delete_cluster_provider(self, name: str) -> None:
        self._op("deleteClusterProvider", name)

    def create_cluster(
        self,
        provider: str,
        name: str,
        kubeconfig: Union[PathLike, str],
        labels: Sequence[str] = (),
        description: str = "",
    ) -> Cluster:
        """Registers cluster `name` with its kubeconfig (a path to the file, or its text) and
        its `labels`."""
        metadata = {"metadata": meta(name, description)}
        with as_file(kubeconfig, "kubeconfig") as file:
            cluster = Cluster.from_json(self._op_upload("createCluster", provider,
                                                        metadata=metadata,
                                                        files=[("file", file)]))
        for label in labels:
            self.add_cluster_label(provider, name, label)
        return cluster

    def get_cluster(self, provider: str, name: str) -> Cluster:
        return Cluster.from_json(self._op("getCluster", provider, name))

    def list_clusters(self, provider: str) -> List[Cluster]:
        """The clusters of `provider`."""
        return Cluster.list_from_json(self._op("listClusters", provider))

    def clusters_with_label(self, provider: str, label: str) -> List[str]:
        """The names of the clusters of `provider` that have `label`."""
        return list(self._op("listClusters", provider, query={"label": label}) or [])

    def delete_cluster(self, provider: str, name: str) -> None:
        self._op("deleteCluster", provider, name)

    def add_cluster_label(self, provider: str, cluster: str, label: str) -> None:
        self._op("createClusterLabel", provider, cluster, body={"clusterLabel": label})

    def list_cluster_labels(self, provider: str, cluster: str) -> List[str]:
        return [str(label.get("clusterLabel", ""))
                for label in self._op("listClusterLabels", provider, cluster) or []]

    def delete_cluster_label(self, provider: str, cluster: str, label: str) -> None:
        self._op("deleteClusterLabel", provider, cluster, label)

    def create_cluster_kv_pairs(self, provider: str, cluster: str, name: str,
                                kv: Mapping[str, Any], description: str = "") -> KvPairs:
        """Key-value pairs of a cluster (its ingress gateway for its, multus for ncm, ...)."""
        body = {"metadata": meta(name, description),
                "spec": {"kv": [{k: v} for k, v in kv.items()]}}
        return KvPairs.from_json(self._op("createClusterKvPair", provider, cluster, body=body))

    def get_cluster_kv_pairs(self, provider: str, cluster: str, name: str) -> KvPairs:
        return KvPairs.from_json(self._op("getClusterKvPair", provider, cluster, name))

    def delete_cluster_kv_pairs(self, provider: str, cluster: str, name: str) -> None:
        self._op("deleteClusterKvPair", provider, cluster, name)

    # ---- controllers ------------------------------------------------------------------------

    def register_controller(self, name: str, host: str, port: int, type: str = "action",
                            priority: int = 1) -> ControllerRegistration:
        """Registers a controller the orchestrator calls over gRPC at `host:port`: `action`
        (its deployment intent groups name it in their intents) or `placement`."""
        body = {"metadata": meta(name),
                "spec": {"host": host, "port": port, "type": type, "priority": priority}}
        return ControllerRegistration.from_json(self._op("createController", body=body))

    def list_controllers(self) -> List[ControllerRegistration]:
        return ControllerRegistration.list_from_json(self._op("listControllers"))

    def delete_controller(self, name: str) -> None:
        self._op("deleteController", name)

    # ---- logical clouds --------------------------------------------------------------------

    def create_logical_cloud(
        self,
        project: str,
        name: str,
        clusters: Sequence[Tuple[str, str]] = (),
        namespace: str = "",
        level: str = "0",
        user: str = "",
    ) -> LogicalCloudRef:
        """Creates a logical cloud with a reference to each `(provider, cluster)`: level "0",
        admin, deploys with the clusters' own credentials; level "1", standard, gives `user` a
        certificate for `namespace` on each cluster (see `logical_cloud_kubeconfig`)."""
        spec: Json = {"level": level}
        if namespace:
            spec["namespace"] = namespace
        if user:
            spec["user"] = {"userName": user, "type": "certificate"}
        lc = LogicalCloudRef(project, name)
        self._op("createLogicalCloud", project, body={"metadata": meta(name), "spec": spec})
        for provider, cluster in clusters:
            self.add_cluster_reference(lc, provider, cluster)
        return lc

    def add_cluster_reference(self, lc: LogicalCloudRef, provider: str, cluster: str) -> str:
        """Adds `(provider, cluster)` to a logical cloud (an instantiated one gets it with its
        next `update`); returns the reference's name, `<provider>-<cluster>`."""
        name = f"{provider}-{cluster}"
        self._op("createClusterReference", *lc.params, body={
            "metadata": meta(name),
            "spec": {"clusterProvider": provider, "cluster": cluster,
                     "loadBalancerIP": "0.0.0.0"},
        })
        return name

    def delete_cluster_reference(self, lc: LogicalCloudRef, reference: str) -> None:
        self._op("deleteClusterReference", *lc.params, reference)

    def logical_cloud_kubeconfig(self, lc: LogicalCloudRef, reference: str) -> str:
        """The kubeconfig a standard logical cloud's user has for the cluster of `reference`."""
        return str(self._op("getClusterReferenceKubeconfig", *lc.params, reference))

    def get_logical_cloud(self, lc: LogicalCloudRef) -> LogicalCloud:
        return LogicalCloud.from_json(self._op("getLogicalCloud", *lc.params))

    def list_logical_clouds(self, project: str) -> List[LogicalCloud]:
        return LogicalCloud.list_from_json(self._op("listLogicalClouds", project))

    def delete_logical_cloud(self, lc: LogicalCloudRef) -> None:
        """Deletes a (terminated) logical cloud and its cluster references."""
        for ref in self._op("listClusterReferences", *lc.params) or []:
            self.delete_cluster_reference(lc, (ref.get("metadata") or {}).get("name", ""))
        self._op("deleteLogicalCloud", *lc.params)

    # ---- composite apps ---------------------------------------------------------------------

    def create_composite_app(self, project: str, name: str, version: str,
                             description: str = "") -> CompositeApp:
        return CompositeApp.from_json(self._op("createCompositeApp", project, body={
            "metadata": meta(name, description), "spec": {"compositeAppVersion": version}}))

    def get_composite_app(self, project: str, name: str, version: str) -> CompositeApp:
        return CompositeApp.from_json(self._op("getCompositeApp", project, name, version))

    def list_composite_apps(self, project: str) -> List[CompositeApp]:
        return CompositeApp.list_from_json(self._op("listCompositeApps", project))

    def delete_composite_app(self, project: str, name: str, version: str) -> None:
        self._op("deleteCompositeApp", project, name, version)

    def create_app(self, project: str, composite_app: str, version: str, name: str,
                   chart: PathLike, description: str = "") -> App:
        """Adds app `name` with its Helm chart: a chart directory or a `.tgz`."""
        with as_tgz(chart) as file:
            return App.from_json(self._op_upload(
                "createApp", project, composite_app, version,
                metadata={"metadata": meta(name, description)}, files=[("file", file)]))

    def replace_app(self, project: str, composite_app: str, version: str, name: str,
                    chart: PathLike, description: str = "") -> App:
        """Replaces app `name`'s Helm chart (a new version of it); an `update` of a group
        deploys it."""
        with as_tgz(chart) as file:
            return App.from_json(self._op_upload(
                "replaceApp", project, composite_app, version, name,
                metadata={"metadata": meta(name, description)}, files=[("file", file)]))

    def list_apps(self, project: str, composite_app: str, version: str) -> List[App]:
        return App.list_from_json(self._op("listApps", project, composite_app, version))

    def delete_app(self, project: str, composite_app: str, version: str, name: str) -> None:
        self._op("deleteApp", project, composite_app, version, name)

    def create_composite_profile(self, project: str, composite_app: str, version: str,
                                 name: str) -> CompositeProfile:
        return CompositeProfile.from_json(self._op(
            "createCompositeProfile", project, composite_app, version,
            body={"metadata": meta(name)}))

    def create_app_profile(self, project: str, composite_app: str, version: str,
                           composite_profile: str, name: str, app: str,
                           profile: PathLike) -> None:
        """Adds the profile of `app` (a directory with `manifest.yaml`, or its `.tgz`)."""
        with as_tgz(profile, top_dir=False) as file:
            self._op_upload("createAppProfile", project, composite_app, version,
                            composite_profile,
                            metadata={"metadata": meta(name), "spec": {"app": app}},
                            files=[("file", file)])

    def delete_composite_profile(self, project: str, composite_app: str, version: str,
                                 name: str) -> None:
        """Deletes a composite profile with its app profiles."""
        profile_of = (project, composite_app, version, name)
        for profile in self._op("listAppProfiles", *profile_of) or []:
            self._op("deleteAppProfile", *profile_of, profile["metadata"]["name"])
        self._op("deleteCompositeProfile", *profile_of)

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
        spec: Json = {"compositeProfile": composite_profile, "version": release,
                      "logicalCloud": logical_cloud}
        if override_values:
            spec["overrideValues"] = [{"app": app, "values": dict(values)}
                                      for app, values in override_values.items()]
        self._op("createDeploymentIntentGroup", project, composite_app, version,
                 body={"metadata": meta(name), "spec": spec})
        self._op("createGenericPlacementIntent", *dig.params, body={
            "metadata": meta("placement"), "spec": {"logicalCloud": logical_cloud}})
        for app, all_of in (placement or {}).items():
            self._op("createAppIntent", *dig.params, "placement", body=_app_intent(app, all_of))
        intent = {"genericPlacementIntent": "placement", **dict(intents or {})}
        self._op("createGroupIntent", *dig.params,
                 body={"metadata": meta("intents"), "spec": {"intent": intent}})
        return dig

    def set_placement(self, dig: DigRef, app: str,
                      all_of: Sequence[Mapping[str, str]]) -> None:
        """Replaces where `app` goes (`[{"clusterProvider": p, "cluster": c} or {...,
        "clusterLabel": l}]`, all of them) in the placement intent
        `create_deployment_intent_group` wrote; an `update` deploys it."""
        self._op("replaceAppIntent", *dig.params, "placement", f"{app}-placement",
                 body=_app_intent(app, all_of))

    def get_deployment_intent_group(self, dig: DigRef) -> DeploymentIntentGroup:
        return DeploymentIntentGroup.from_json(self._op("getDeploymentIntentGroup", *dig.params))

    def list_deployment_intent_groups(self, project: str, composite_app: str,
                                      version: str) -> List[DeploymentIntentGroup]:
        return DeploymentIntentGroup.list_from_json(
            self._op("listDeploymentIntentGroups", project, composite_app, version))

    def delete_deployment_intent_group(self, dig: DigRef) -> None:
        """Deletes a (terminated) group with what `create_deployment_intent_group` made: its
        intents and its generic placement intent. Other intents (gac, dtc, ...) go first, as
        EMCO refuses to delete a parent of anything."""
        if self._exists("getGroupIntent", *dig.params, "intents"):
            self._op("deleteGroupIntent", *dig.params, "intents")
        placement = (*dig.params, "placement")
        if self._exists("getGenericPlacementIntent", *placement):
            for a in self._op("listAppIntents", *placement) or []:
                self._op("deleteAppIntent", *placement, a["metadata"]["name"])
            self._op("deleteGenericPlacementIntent", *placement)
        self._op("deleteDeploymentIntentGroup", *dig.params)

    def set_intents(self, dig: DigRef, intents: Mapping[str, str],
                    name: str = "intents") -> None:
        """Replaces the group's intents (`{controller: intent}`, `genericPlacementIntent`
        among them) as `create_deployment_intent_group` wrote them; an `update` deploys them."""
        self._op("replaceGroupIntent", *dig.params, name,
                 body={"metadata": meta(name), "spec": {"intent": dict(intents)}})

    # ---- lifecycle ----------------------------------------------------------------------------

    def approve(self, dig: DigRef) -> None:
        self._op("approveDeploymentIntentGroup", *dig.params)

    def instantiate(self, target: Target) -> None:
        """Instantiates a deployment intent group or a logical cloud; returns once rsync has the
        work (follow it with `watch` or `wait`)."""
        self._op(_of(target, "instantiateDeploymentIntentGroup", "instantiateLogicalCloud"),
                 *target.params)

    def terminate(self, target: Target) -> None:
        self._op(_of(target, "terminateDeploymentIntentGroup", "terminateLogicalCloud"),
                 *target.params)

    def stop(self, target: Target) -> None:
        self._op(_of(target, "stopDeploymentIntentGroup", "stopLogicalCloud"), *target.params)

    def update(self, target: Target) -> Optional[int]:
        """Deploys the current intents as a new revision; returns it (a group's)."""
        answer = self._op(_of(target, "updateDeploymentIntentGroup", "updateLogicalCloud"),
                          *target.params)
        return answer if isinstance(answer, int) else None

    def rollback(self, dig: DigRef, revision: int) -> None:
        self._op("rollbackDeploymentIntentGroup", *dig.params,
                 body={"metadata": {}, "spec": {"revision": str(revision)}})

    def migrate(self, dig: DigRef, target_version: str, target_group: str) -> None:
        self._op("migrateDeploymentIntentGroup", *dig.params, body={"metadata": {}, "spec": {
            "targetCompositeAppVersion": target_version,
            "targetDeploymentIntentGroup": target_group}})

    def preview(self, dig: DigRef, clusters: bool = False, offset: int = 0, limit: int = 100,
                dry_run: bool = False) -> Dict[str, Any]:
        """What an instantiate (or, once deployed, an update) of the group would do, writing
        nothing (emco-rs's own): `operation`, `summary` (counts), `placement` (per app:
        `clusters`, `gains`, `loses`, `pickedBy` with the intent entries that chose them) and
        `changes` (clusters with the same changes together, each object with its unified
        `diff`); with `clusters=True` a page of `clusters` (from `offset`, at most `limit`)
        instead. `dry_run=True` has each cluster check the objects it would get created or
        changed (`dryRun`: `refusals`, `unchecked`). Raises what the operation would."""
        query: List[Tuple[str, str]] = []
        if clusters:
            query += [("detail", "clusters"), ("offset", str(offset)), ("limit", str(limit))]
        if dry_run:
            query.append(("dryRun", "true"))
        answer: Dict[str, Any] = self._op("previewDeploymentIntentGroup", *dig.params,
                                          query=query)
        return answer

    # ---- rollouts in waves (emco-rs's own) --------------------------------------------------

    def set_rollout_policy(self, dig: DigRef, spec: Mapping[str, Any],
                           name: str = "rollout") -> None:
        """Creates or replaces the group's rollout policy: its next instantiate or update
        reaches the clusters in waves (`{"waves": [{"clusters": [...]} | {"labels": [...]} |
        {"count": n} | {"percent": p} | {}], "gates": {"progressDeadline", "bakeTime",
        "maxFailures", "approval", "customHealth"}, "onFailure": "pause" | "rollback",
        "unreachable": "wait" | "skip" | "fail"}`; examples/emcoctl/rollout-policy.yaml)."""
        body = {"metadata": meta(name), "spec": dict(spec)}
        if self._exists("getRolloutPolicy", *dig.params, name):
            self._op("replaceRolloutPolicy", *dig.params, name, body=body)
        else:
            self._op("createRolloutPolicy", *dig.params, body=body)

    def delete_rollout_policy(self, dig: DigRef, name: str = "rollout") -> None:
        """Deletes the group's rollout policy: it deploys to every cluster at once again."""
        self._op("deleteRolloutPolicy", *dig.params, name)

    def rollout(self, dig: DigRef) -> Dict[str, Any]:
        """The group's latest rollout: `state`, `waves` (each with `name`, `clusters`,
        `state`, `started`, `finished`, `failures`), `current`, `reason`."""
        answer: Dict[str, Any] = self._op("getDeploymentIntentGroupRollout", *dig.params)
        return answer

    def approve_wave(self, dig: DigRef) -> None:
        """Lets the wave that waits for approval go."""
        self._op("approveDeploymentIntentGroupRollout", *dig.params)

    def pause_rollout(self, dig: DigRef) -> None:
        self._op("pauseDeploymentIntentGroupRollout", *dig.params)

    def resume_rollout(self, dig: DigRef) -> None:
        """Goes on from a pause; a failed wave is tried again."""
        self._op("resumeDeploymentIntentGroupRollout", *dig.params)

    def abort_rollout(self, dig: DigRef) -> None:
        """Rolls every changed cluster back and ends the rollout."""
        self._op("abortDeploymentIntentGroupRollout", *dig.params)

    def wait_rollout(self, dig: DigRef, states: Sequence[str] = ("Succeeded", "RolledBack",
                                                                  "Failed"),
                     timeout: float = 120.0, interval: float = 0.5) -> Dict[str, Any]:
        """Waits until the group's rollout is in one of `states`; it then."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                run = self.rollout(dig)
                if run["state"] in states:
                    return run
            except NotFound:
                run = {}
            if time.monotonic() >= deadline:
                raise TimeoutError(f"the rollout is not {'/'.join(states)} after {timeout} s: {run}")
            time.sleep(interval)

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
        return parse_status(self._status(target, query))

    def query_status(self, target: Target, **params: str) -> Any:
        """The status route with any of EMCO's query parameters (`type`, `output`, `apps`,
        `clusters`, `resources`, ...), answered as the server's JSON."""
        return self._status(target, params)

    def _status(self, target: Target, query: Query) -> Any:
        op = _of(target, "getDeploymentIntentGroupStatus", "getLogicalCloudStatus")
        return self._op(op, *target.params, query=query)

    def watch(self, target: Target, ready: bool = True, interval: float = 0.5,
              timeout: Optional[float] = None) -> "Watch":
        """The status now, then each time it changes (state, deployed or ready status, or any
        resource's), until `timeout` seconds pass (forever when `None`) or the watch is closed
        (`with target.watch(dig) as w: for status in w: ...`)."""
        return Watch(self._statuses(target, ready, interval, timeout))

    def _statuses(self, target: Target, ready: bool, interval: float,
                  timeout: Optional[float]) -> Generator[Status, None, None]:
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


class Watch(Iterator[Status]):
    """The statuses of a deployment as they change: an iterator, and a context manager that
    ends it."""

    def __init__(self, statuses: Generator[Status, None, None]) -> None:
        self._statuses: Optional[Generator[Status, None, None]] = statuses

    def __next__(self) -> Status:
        if self._statuses is None:
            raise StopIteration
        return next(self._statuses)

    def close(self) -> None:
        """Ends the watch: the iteration stops."""
        if self._statuses is not None:
            self._statuses.close()
            self._statuses = None

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _app_intent(app: str, all_of: Sequence[Mapping[str, str]]) -> Json:
    """The generic placement app intent `<app>-placement`."""
    return {"metadata": meta(f"{app}-placement"),
            "spec": {"app": app, "intent": {"allOf": [dict(c) for c in all_of]}}}


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
    manager, or call `close()`, to stop its engine.

    It acts as the platform admin, or as `principal` when one is given: then every call obeys
    the rules a server applies to that caller (PermissionDenied without the role)."""

    def __init__(self, transport: Transport) -> None:
        super().__init__(transport)

    @classmethod
    def in_memory(cls, controllers: Optional[Mapping[str, Controller]] = None,
                  priority: int = 1,
                  principal: Optional[Principal] = None) -> "Orchestrator":
        """Stores in memory: everything is gone when the process ends. `controllers` are
        Python action controllers (with `update`) or placement controllers (with
        `filter_clusters`) by name, called in this process and registered with `priority`."""
        return cls(_embedded(None, controllers, priority, principal))

    @classmethod
    def embedded(cls, data_dir: PathLike,
                 controllers: Optional[Mapping[str, Controller]] = None,
                 priority: int = 1,
                 principal: Optional[Principal] = None) -> "Orchestrator":
        """Stores in one file under `data_dir`; deployments in progress resume at the next
        start over the same directory."""
        return cls(_embedded(str(data_dir), controllers, priority, principal))

    def __enter__(self) -> "Orchestrator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stops the engine (what it was doing resumes at the next start over the same data)."""
        self._t.close()


def _embedded(data_dir: Optional[str], controllers: Optional[Mapping[str, Controller]],
              priority: int, principal: Optional[Principal]) -> Transport:
    who = None if principal is None else (principal.subject, list(principal.roles))
    return Transport.embedded(data_dir, list((controllers or {}).items()), priority, who)


class ControllerServer:
    """Serves a Python controller over EMCO's controller gRPC protocol, so that any
    emco-server (or EMCO) calls it as it calls a controller written in Go or Rust: an action
    controller (`update`, and `terminate` when it has one) over `contextupdate`, a placement
    controller (`filter_clusters`) over `PlacementController`.

    It works on the orchestrator's AppContexts: `appcontext` is an emco-server's gRPC URL
    (`http://host:9016`), or `etcd` the endpoints of the etcd an orchestrator keeps them in.
    Register it with `register_controller(name, host, server.port, ...)`.

        with emco.ControllerServer(Labeller(), "labeller", appcontext="http://127.0.0.1:9016",
                                   port=9037) as server:
            server.wait()          # until Ctrl-C
    """

    def __init__(self, controller: Controller, name: str, appcontext: Optional[str] = None,
                 etcd: Optional[Sequence[str]] = None, host: str = "127.0.0.1",
                 port: int = 0) -> None:
        self.name, self.host = name, host
        self._server = _NativeServer.start(name, controller, appcontext,
                                           None if etcd is None else list(etcd), host, port)

    @property
    def port(self) -> int:
        """The port it listens on (the one given, or the free one it took for 0)."""
        return self._server.port

    def wait(self) -> None:
        """Serves until `close` is called from another thread, or Ctrl-C."""
        self._server.wait()

    def close(self) -> None:
        """Stops serving after the calls in flight."""
        self._server.close()

    def __enter__(self) -> "ControllerServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def controller_arguments(description: Optional[str], name: str,
                         port: int) -> argparse.ArgumentParser:
    """The command line of a controller script, for `run_controller`: `--server` (the
    orchestrator's REST URL, to register with), `--appcontext` (its gRPC URL), `--host`,
    `--port` (0 takes a free one) and `--name`; add a script's own flags to it."""
    parser = argparse.ArgumentParser(description=(description or "").strip().split("\n")[0])
    parser.add_argument("--server", default="http://127.0.0.1:9015",
                        help="the emco-server to register with (REST)")
    parser.add_argument("--appcontext", default="http://127.0.0.1:9016",
                        help="its gRPC URL, where the AppContexts are")
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    parser.add_argument("--port", type=int, default=port)
    parser.add_argument("--name", default=name, help="the name it registers as")
    return parser


def run_controller(controller: Controller, args: argparse.Namespace,
                   type: str = "action") -> None:
    """Serves `controller` as `args` (from `controller_arguments`) say, registers it with the
    orchestrator as a `type` controller (kept when one of its name is already registered),
    prints `controller NAME serving on HOST:PORT` and serves until Ctrl-C, then prints
    `stopped`."""
    with ControllerServer(controller, args.name, appcontext=args.appcontext, host=args.host,
                          port=args.port) as server:
        try:
            Client(args.server).register_controller(args.name, args.host, server.port, type)
        except AlreadyExists:
            pass
        print(f"controller {args.name} serving on {args.host}:{server.port}", flush=True)
        try:
            server.wait()
        except KeyboardInterrupt:
            print("stopped", flush=True)


def serve_controller(controller: Controller, name: str, appcontext: Optional[str] = None,
                     etcd: Optional[Sequence[str]] = None, host: str = "127.0.0.1",
                     port: int = 0) -> None:
    """Serves `controller` (see `ControllerServer`) until Ctrl-C."""
    with ControllerServer(controller, name, appcontext, etcd, host, port) as server:
        server.wait()
