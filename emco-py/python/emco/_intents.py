"""The intents of the action controllers, under a deployment intent group: gac (generic
Kubernetes objects and customizations), hpa (hardware placement), dtc (traffic: inbound intents
and their clients) and ovnaction (network interfaces of workloads); and ncm's networks of a
cluster. Each method sends the body EMCO's controller takes; a deployment intent group uses the
intent once `set_intents` (or `create_deployment_intent_group`) names it."""

import json
from pathlib import Path
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

from ._base import Base, DigRef, Json, PathLike, as_file, meta
from ._objects import ControllerRegistration, Intent, Network
from ._status import Status, parse_status

ObjectFile = Union[Mapping[str, Any], PathLike, str]
"""A Kubernetes object: a dict, the path of a YAML file, or YAML text."""


def _object_text(obj: ObjectFile) -> Union[PathLike, str]:
    if isinstance(obj, Mapping):
        # JSON is YAML: the controller reads either.
        return json.dumps(obj, indent=2) + "\n"
    return obj


class IntentsApi(Base):
    """The controllers' intents; shared by `Client` and `Orchestrator`."""

    # ---- gac: generic Kubernetes objects -------------------------------------------------------

    def create_gac_intent(self, dig: DigRef, name: str, description: str = "") -> Intent:
        """A generic-k8s intent: the group's intents name it as `{"gac": name}`."""
        return Intent.from_json(self._op("createGenericK8sIntent", *dig.params,
                                         body={"metadata": meta(name, description)}))

    def add_gac_resource(self, dig: DigRef, intent: str, name: str, app: str, kind: str,
                         resource_name: str, api_version: str = "v1",
                         new_object: Optional[ObjectFile] = None) -> Intent:
        """A resource of a gac intent: `new_object` (a dict, a YAML file or text) is added to
        `app`'s clusters; without it, the app's own `kind`/`resource_name` is the one the
        resource's customizations change."""
        body = {"metadata": meta(name), "spec": {
            "app": app, "newObject": "false" if new_object is None else "true",
            "resourceGVK": {"apiVersion": api_version, "kind": kind, "name": resource_name}}}
        of = (*dig.params, intent)
        if new_object is None:
            return Intent.from_json(self._op_upload("createGenericResource", *of, metadata=body))
        with as_file(_object_text(new_object), f"{resource_name}.yaml") as file:
            return Intent.from_json(self._op_upload("createGenericResource", *of, metadata=body,
                                                    files=[("file", file)]))

    def add_gac_customization(
        self,
        dig: DigRef,
        intent: str,
        resource: str,
        name: str,
        patch: Sequence[Mapping[str, Any]] = (),
        patch_type: str = "json",
        provider: str = "",
        cluster: Optional[str] = None,
        cluster_label: Optional[str] = None,
        mode: str = "allow",
        files: Sequence[PathLike] = (),
        data_keys: Sequence[Tuple[str, str]] = (),
    ) -> Intent:
        """A customization of a gac resource: a JSON patch (`patch_type="json"`, a list of
        operations) or a merge patch; on every cluster, or only on `cluster` (by name) or the
        clusters with `cluster_label` of `provider` (`mode` allow or deny). For a ConfigMap or
        Secret, `files` become its data, each `(file name, key)` of `data_keys` naming a key."""
        specific = cluster is not None or cluster_label is not None
        info: Json = {"scope": "name" if cluster is not None else "label",
                      "clusterProvider": provider, "cluster": cluster or "",
                      "clusterLabel": cluster_label or "", "mode": mode}
        spec: Json = {"clusterSpecific": "true" if specific else "false",
                      "clusterInfo": info if specific else
                      {"scope": "", "clusterProvider": "", "cluster": "",
                       "clusterLabel": "", "mode": ""}}
        if patch:
            spec["patchType"] = patch_type
            spec["patchJson"] = [dict(op) for op in patch]
        if data_keys:
            spec["configMapOptions"] = {"dataKeyOptions": [
                {"fileName": f, "keyName": k} for f, k in data_keys]}
        parts = [("files", Path(f)) for f in files]
        return Intent.from_json(self._op_upload(
            "createCustomization", *dig.params, intent, resource,
            metadata={"metadata": meta(name), "spec": spec}, files=parts))

    # ---- hpa: hardware platform aware placement -------------------------------------------------

    def create_hpa_intent(self, dig: DigRef, name: str, app: str) -> Intent:
        """An hpa intent for `app`: the group's intents name it as `{"hpa-placement-controller":
        name}` (placement) and `{"hpa-action-controller": name}` (action), with the names the
        controllers are registered under (the reference server's: `hpa-placement-controller-1`
        and `hpa-action-controller-1`)."""
        return Intent.from_json(self._op("createHpaIntent", *dig.params,
                                         body={"metadata": meta(name), "spec": {"app": app}}))

    def add_hpa_consumer(self, dig: DigRef, intent: str, name: str, kind: str,
                         resource_name: str, container: str, api_version: str = "apps/v1",
                         replicas: int = 1) -> Intent:
        """The workload (`kind`/`resource_name`, its `container`) whose needs an hpa intent
        places."""
        return Intent.from_json(self._op("createHpaResourceConsumer", *dig.params, intent,
                                         body={"metadata": meta(name), "spec": {
            "apiVersion": api_version, "kind": kind, "replicas": replicas,
            "name": resource_name, "container": container}}))

    def add_hpa_requirement(self, dig: DigRef, intent: str, consumer: str, name: str,
                            resource: Mapping[str, Any], allocatable: bool = True,
                            mandatory: bool = True, weight: int = 1) -> Intent:
        """A need of an hpa consumer: allocatable (`{"name": "cpu", "requests": 1, "limits":
        1}`) or not (`{"key": "<node label>", "value": "<its value>"}`)."""
        return Intent.from_json(self._op("createResourceRequirement", *dig.params, intent,
                                         consumer, body={"metadata": meta(name), "spec": {
            "allocatable": allocatable, "mandatory": mandatory, "weight": weight,
            "resource": dict(resource)}}))

    # ---- dtc: traffic between apps --------------------------------------------------------------

    def register_dtc_controller(self, name: str, host: str, port: int, type: str = "action",
                                priority: int = 1) -> ControllerRegistration:
        """Registers a sub-controller of dtc (nps, its, sds, swc or one's own)."""
        body = {"metadata": meta(name),
                "spec": {"host": host, "port": port, "type": type, "priority": priority}}
        return ControllerRegistration.from_json(
            self._op("createDtcController", body=body))

    def create_traffic_group_intent(self, dig: DigRef, name: str,
                                    description: str = "") -> Intent:
        """A traffic group intent: the group's intents name it as `{"dtc": name}`."""
        return Intent.from_json(self._op("createTrafficGroupIntent", *dig.params,
                                         body={"metadata": meta(name, description)}))

    def add_inbound_intent(self, dig: DigRef, group: str, name: str, app: str,
                           app_label: str, service_name: str, port: int,
                           protocol: str = "TCP", **spec: Any) -> Intent:
        """What `app` serves (`app_label` selects its pods, e.g. `app=http-server`) to the
        clients `add_inbound_client` names; more of EMCO's fields (`externalName`,
        `serviceMesh`, `management`, ...) as keyword arguments."""
        return Intent.from_json(self._op("createInboundServerIntent", *dig.params, group,
                                         body={"metadata": meta(name), "spec": {
            "app": app, "appLabel": app_label, "serviceName": service_name, "port": port,
            "protocol": protocol, **spec}}))

    def add_inbound_client(self, dig: DigRef, group: str, inbound: str, name: str, app: str,
                           app_label: str, service_name: str,
                           namespaces: Sequence[str] = (),
                           cidrs: Sequence[str] = ()) -> Intent:
        """A client app allowed to reach an inbound intent's service."""
        return Intent.from_json(self._op("createInboundClientsIntent", *dig.params, group,
                                         inbound, body={"metadata": meta(name), "spec": {
            "app": app, "appLabel": app_label, "serviceName": service_name,
            "namespaces": list(namespaces), "cidrs": list(cidrs)}}))

    # ---- ovnaction: workload interfaces ---------------------------------------------------------

    def create_network_controller_intent(self, dig: DigRef, name: str) -> Intent:
        """An ovnaction intent: the group's intents name it as `{"ovnaction": name}`."""
        return Intent.from_json(self._op("createNetControllerIntent", *dig.params,
                                         body={"metadata": meta(name)}))

    def add_workload_intent(self, dig: DigRef, intent: str, name: str, app: str,
                            workload_resource: str, type: str = "Deployment") -> Intent:
        """The workload of `app` whose pods get interfaces."""
        return Intent.from_json(self._op("createWorkloadIntent", *dig.params, intent,
                                         body={"metadata": meta(name), "spec": {
            "app": app, "workloadResource": workload_resource, "type": type}}))

    def add_interface(self, dig: DigRef, intent: str, workload: str, name: str,
                      network: str, interface: str, ip_address: str = "",
                      mac_address: str = "", default_gateway: bool = False) -> Intent:
        """An interface `interface` on `network` for a workload's pods."""
        return Intent.from_json(self._op("createInterfaceIntent", *dig.params, intent, workload,
                                         body={"metadata": meta(name), "spec": {
            "interface": interface, "name": network, "ipAddress": ip_address,
            "macAddress": mac_address,
            "defaultGateway": "true" if default_gateway else "false"}}))

    # ---- ncm: a cluster's networks --------------------------------------------------------------

    def create_network(self, provider: str, cluster: str, name: str,
                       ipv4_subnets: Sequence[Mapping[str, str]], cni_type: str = "ovn4nfv",
                       provider_network: Optional[Mapping[str, Any]] = None) -> Network:
        """A virtual network of a cluster (subnets as `{"name", "subnet", "gateway",
        "excludeIps"}`), or a provider network with its `provider_network` fields
        (`providerNetType`, `vlan`)."""
        spec: Json = {"cniType": cni_type, "ipv4Subnets": [dict(s) for s in ipv4_subnets],
                      **dict(provider_network or {})}
        body = {"metadata": meta(name), "spec": spec}
        if provider_network is None:
            return Network.from_json(self._op("createNetwork", provider, cluster, body=body))
        return Network.from_json(self._op("createProviderNetwork", provider, cluster, body=body))

    def list_networks(self, provider: str, cluster: str,
                      provider_networks: bool = False) -> List[Network]:
        if provider_networks:
            return Network.list_from_json(self._op("listProviderNetworks", provider, cluster))
        return Network.list_from_json(self._op("listNetworks", provider, cluster))

    def apply_networks(self, provider: str, cluster: str) -> None:
        """Deploys the cluster's networks (ncm's `apply`)."""
        self._op("applyCluster", provider, cluster)

    def terminate_networks(self, provider: str, cluster: str) -> None:
        self._op("terminateCluster", provider, cluster)

    def network_status(self, provider: str, cluster: str) -> Status:
        """The status of the cluster's networks, as a deployment's."""
        return parse_status(self._op("getClusterStatus", provider, cluster))
