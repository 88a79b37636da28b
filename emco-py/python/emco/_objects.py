"""EMCO's objects as typed results. Every EMCO object is `{metadata, spec}`; these classes name
the fields a script reads most, and keep the whole answer in `raw`."""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Type, TypeVar

Json = Dict[str, Any]

R = TypeVar("R", bound="Resource")


@dataclass(frozen=True)
class Resource:
    """An EMCO object: its metadata (`name`, `description`, `user_data1`, `user_data2`),
    its `spec` as the server wrote it, and the whole answer in `raw`."""

    name: str
    description: str = ""
    user_data1: str = ""
    user_data2: str = ""
    spec: Json = field(default_factory=dict)
    raw: Json = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls: Type[R], doc: Any) -> R:
        """The object of a server's answer (`{metadata, spec}`)."""
        if not isinstance(doc, dict):
            raise TypeError(f"not an EMCO object: {doc!r}")
        meta = doc.get("metadata") or {}
        spec = doc.get("spec")
        return cls(
            name=str(meta.get("name", "")),
            description=str(meta.get("description", "")),
            user_data1=str(meta.get("userData1", "")),
            user_data2=str(meta.get("userData2", "")),
            spec=spec if isinstance(spec, dict) else {},
            raw=doc,
        )

    @classmethod
    def list_from_json(cls: Type[R], docs: Any) -> List[R]:
        """The objects of a list answer (an empty list for none)."""
        return [cls.from_json(d) for d in docs or []]

    def _spec_str(self, key: str) -> str:
        value = self.spec.get(key)
        return "" if value is None else str(value)


class Project(Resource):
    """A project."""


class ClusterProvider(Resource):
    """A cluster provider."""


class Cluster(Resource):
    """A cluster of a provider (its kubeconfig is not in the answer)."""


class CompositeApp(Resource):
    """A composite app of a project, at one version."""

    @property
    def version(self) -> str:
        return self._spec_str("compositeAppVersion")


class App(Resource):
    """An app of a composite app (its chart is not in the answer)."""


class CompositeProfile(Resource):
    """A composite profile of a composite app."""


class LogicalCloud(Resource):
    """A logical cloud of a project."""

    @property
    def level(self) -> str:
        """"0": admin (the clusters' own credentials); "1": standard; "2": privileged."""
        return self._spec_str("level")

    @property
    def namespace(self) -> str:
        return self._spec_str("namespace")


class DeploymentIntentGroup(Resource):
    """A deployment intent group of a composite app."""

    @property
    def logical_cloud(self) -> str:
        return self._spec_str("logicalCloud")

    @property
    def composite_profile(self) -> str:
        return self._spec_str("compositeProfile")

    @property
    def release(self) -> str:
        """The release name (`spec.version`)."""
        return self._spec_str("version")

    @property
    def override_values(self) -> Dict[str, Dict[str, str]]:
        """The override values of each app."""
        return {o.get("app", ""): dict(o.get("values") or {})
                for o in self.spec.get("overrideValues") or []}


class Intent(Resource):
    """An intent of a deployment intent group: placement, gac, hpa, dtc, ovnaction, ..."""


class ControllerRegistration(Resource):
    """A controller registered with the orchestrator (`/v2/controllers`) or with dtc
    (`/v2/dtc-controllers`)."""

    @property
    def host(self) -> str:
        return self._spec_str("host")

    @property
    def port(self) -> int:
        return int(self.spec.get("port") or 0)

    @property
    def type(self) -> str:
        """`action` or `placement`."""
        return self._spec_str("type")

    @property
    def priority(self) -> int:
        return int(self.spec.get("priority") or 0)


class KvPairs(Resource):
    """Key-value pairs of a cluster or a logical cloud."""

    @property
    def kv(self) -> Dict[str, Any]:
        """The pairs as one dict (EMCO keeps a list of one-key dicts)."""
        merged: Dict[str, Any] = {}
        for pair in self.spec.get("kv") or []:
            merged.update(pair)
        return merged


class Network(Resource):
    """A network or provider network of a cluster (ncm)."""

    @property
    def cni_type(self) -> str:
        return self._spec_str("cniType")

