"""The status of a deployment intent group or logical cloud, as typed objects."""

from dataclasses import dataclass, field
from html import escape
from typing import Any, Dict, List, Optional


@dataclass(frozen=True)
class DriftedField:
    """A field emco-rs applied that another client changed (or removed) since: `path` (empty:
    the whole object was deleted), the field `manager` that did it, and when."""

    path: str
    manager: str
    time: Optional[str] = None
    removed: bool = False


@dataclass(frozen=True)
class ResourceStatus:
    """One resource of an app on a cluster."""

    name: str
    kind: str
    deployed_status: str
    ready_status: str
    reason: Optional[str] = None
    message: Optional[str] = None
    attempts: Optional[int] = None
    next_retry: Optional[str] = None
    drift: List[DriftedField] = field(default_factory=list)
    """With readiness: what was changed behind emco-rs's back."""
    drift_corrections: int = 0
    """How many times in a row a `correct` drift policy applied it again."""
    drift_gave_up: Optional[str] = None
    """Why emco-rs stopped correcting it."""


@dataclass(frozen=True)
class ClusterStatus:
    """An app's resources on one cluster."""

    cluster_provider: str
    cluster: str
    ready_status: str
    resources: List[ResourceStatus] = field(default_factory=list)
    connectivity: str = ""
    """Whether rsync reaches the cluster: Available, Retrying or Unknown."""
    reason: Optional[str] = None
    """While rsync retries the cluster: why (its most retried resource's reason)."""
    message: Optional[str] = None
    attempts: Optional[int] = None
    next_retry: Optional[str] = None

    @property
    def name(self) -> str:
        """`provider+cluster`."""
        return f"{self.cluster_provider}+{self.cluster}"


@dataclass(frozen=True)
class AppStatus:
    """One app on each of its clusters."""

    name: str
    clusters: List[ClusterStatus] = field(default_factory=list)


@dataclass(frozen=True)
class Status:
    """The full status of a deployment intent group or a logical cloud.

    `state` is the lifecycle state (Instantiated, Terminated, ...), `deployed_status` what
    rsync did with the current AppContext (Instantiating, Instantiated, Terminated, ...),
    `ready_status` Ready, NotReady or empty when the status was read without readiness; `raw`
    is the server's JSON.
    """

    name: str
    state: str
    deployed_status: str
    ready_status: str
    apps: List[AppStatus]
    raw: Dict[str, Any]

    @property
    def ready(self) -> bool:
        """Whether every resource is ready."""
        return self.ready_status == "Ready"

    def resources(self) -> List[ResourceStatus]:
        """Every resource of every app on every cluster."""
        return [r for a in self.apps for c in a.clusters for r in c.resources]

    def failures(self) -> List[ResourceStatus]:
        """The resources that carry a failure reason (retrying or failed)."""
        return [r for r in self.resources() if r.reason]

    def why(self) -> List[str]:
        """A line per resource that fails or retries: where, its reason and message, and while
        it retries the attempts so far and when the next is due."""
        lines = []
        for a in self.apps:
            for c in a.clusters:
                for r in c.resources:
                    if not r.reason:
                        continue
                    retry = (f" (attempt {r.attempts}, next at {r.next_retry})"
                             if r.attempts is not None and r.next_retry else "")
                    lines.append(f"{a.name} {c.name} {r.kind}/{r.name}: {r.deployed_status} "
                                 f"{r.reason}: {r.message or ''}{retry}")
        return lines

    def _cells(self) -> "tuple[List[str], List[List[str]]]":
        clusters = sorted({c.name for a in self.apps for c in a.clusters})
        rows = []
        for a in self.apps:
            by = {c.name: c for c in a.clusters}
            row = [a.name]
            for name in clusters:
                c = by.get(name)
                if c is None:
                    row.append("-")
                    continue
                ready = sum(1 for r in c.resources if r.ready_status == "Ready")
                row.append(f"{ready}/{len(c.resources)} ready")
            rows.append(row)
        return clusters, rows

    def __str__(self) -> str:
        clusters, rows = self._cells()
        head = f"{self.name}: {self.state}, {self.deployed_status or '-'}, {self.ready_status or '-'}"
        table = [["APP", *clusters], *rows]
        widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in table]
        return "\n".join([head, *lines, *self.why()])

    def _repr_html_(self) -> str:
        clusters, rows = self._cells()
        head = "".join(f"<th>{escape(c)}</th>" for c in ["app", *clusters])
        body = "".join(
            "<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in rows
        )
        title = escape(f"{self.name}: {self.state}, {self.deployed_status}, {self.ready_status}")
        why = "".join(f"<li>{escape(line)}</li>" for line in self.why())
        return (f"<b>{title}</b><table><tr>{head}</tr>{body}</table>"
                + (f"<ul>{why}</ul>" if why else ""))


def _why(doc: Dict[str, Any]) -> Dict[str, Any]:
    """The reason, message, attempts and next retry of a resource's or a cluster's JSON."""
    return {"reason": doc.get("reason"), "message": doc.get("message"),
            "attempts": doc.get("attempts"), "next_retry": doc.get("nextRetry")}


def parse_status(doc: Dict[str, Any]) -> Status:
    """A `Status` from the JSON of a full status answer."""
    apps = []
    for a in doc.get("apps") or []:
        clusters = []
        for c in a.get("clusters") or []:
            resources = [
                ResourceStatus(
                    name=r.get("name", ""),
                    kind=(r.get("GVK") or {}).get("Kind", ""),
                    deployed_status=r.get("deployedStatus", ""),
                    ready_status=r.get("readyStatus", ""),
                    drift=[DriftedField(path=d.get("path", ""), manager=d.get("manager", ""),
                                        time=d.get("time"), removed=bool(d.get("removed")))
                           for d in r.get("drift") or []],
                    drift_corrections=int(r.get("driftCorrections", 0)),
                    drift_gave_up=r.get("driftGaveUp"),
                    **_why(r),
                )
                for r in c.get("resources") or []
            ]
            clusters.append(
                ClusterStatus(
                    cluster_provider=c.get("clusterProvider", ""),
                    cluster=c.get("cluster", ""),
                    ready_status=c.get("readyStatus", ""),
                    resources=resources,
                    connectivity=c.get("connectivity", ""),
                    **_why(c),
                )
            )
        apps.append(AppStatus(name=a.get("name", ""), clusters=clusters))
    actions = (doc.get("states") or {}).get("actions") or []
    state = actions[-1].get("state", "Created") if actions else "Created"
    return Status(
        name=doc.get("name", ""),
        state=state,
        deployed_status=doc.get("deployedStatus", ""),
        ready_status=doc.get("readyStatus", ""),
        apps=apps,
        raw=doc,
    )
