"""The action controllers' intents from Python: what gac and dtc's nps put on kubesim clusters,
and the bodies hpa, ovnaction and ncm keep (their Go handlers: src/genericactioncontroller/api,
src/dtc/api, src/hpa-plc/api, src/ovnaction/api, src/ncm/api)."""

import pytest

import emco
from conftest import PROVIDER, Fleet, on, onboard_web

PLACE_C1 = {"http-server": on("c1")}
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


def test_gac_and_nps_change_what_lands_on_the_clusters(target: emco.Emco, fleet: Fleet) -> None:
    fleet.register(target)
    # nps writes policies only on clusters that say they enforce them.
    target.add_cluster_label(PROVIDER, "c1", "networkpolicy-supported")
    # The controllers take part once registered, as EMCO's registration files do; the
    # reference server runs gac, dtc and nps in-process whatever the address.
    target.register_controller("gac", "localhost", 9033)
    target.register_controller("dtc", "localhost", 9048)
    target.register_dtc_controller("nps", "localhost", 9, priority=2)
    onboard_web(target, ["c1"])
    dig = target.create_deployment_intent_group(
        "p", "web", "v1", "d1", composite_profile="default", logical_cloud="admin",
        placement=PLACE_C1)

    gac = target.create_gac_intent(dig, "extras")
    assert isinstance(gac, emco.Intent) and gac.name == "extras"
    target.add_gac_resource(dig, "extras", "quota", "http-server", "ConfigMap", "limits",
                            new_object={"apiVersion": "v1", "kind": "ConfigMap",
                                        "metadata": {"name": "limits"},
                                        "data": {"max": "10"}})
    target.add_gac_resource(dig, "extras", "server", "http-server", "Deployment",
                            "http-server", api_version="apps/v1")
    target.add_gac_customization(dig, "extras", "server", "scale", patch=[
        {"op": "replace", "path": "/spec/replicas", "value": 3},
        {"op": "add", "path": "/metadata/labels/tier", "value": "web"}])
    # A customization for another cluster leaves c1 alone.
    target.add_gac_customization(dig, "extras", "server", "elsewhere", provider=PROVIDER,
                                 cluster="c2", patch=[
                                     {"op": "add", "path": "/metadata/labels/far",
                                      "value": "yes"}])

    target.create_traffic_group_intent(dig, "tg")
    target.add_inbound_intent(dig, "tg", "serverin", "http-server", "app=http-server",
                              "http-server", 8080)
    target.add_inbound_client(dig, "tg", "serverin", "client1", "http-client",
                              "app=http-client", "http-client")
    target.set_intents(dig, {"genericPlacementIntent": "placement", "gac": "extras",
                             "dtc": "tg"})

    target.approve(dig)
    target.instantiate(dig)
    status = target.wait(dig, timeout=120)
    assert status.ready, status

    cm = fleet.get("c1", "/api/v1/namespaces/default/configmaps/limits")
    assert cm is not None and cm["data"] == {"max": "10"}
    deployment = fleet.get("c1", f"{DEPLOYMENTS}/http-server")
    assert deployment is not None
    assert deployment["spec"]["replicas"] == 3
    assert deployment["metadata"]["labels"]["tier"] == "web"
    assert "far" not in deployment["metadata"]["labels"]
    policy = fleet.get("c1", "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies/"
                             "tg-serverin")
    assert policy is not None
    assert policy["spec"]["podSelector"] == {"matchLabels": {"app": "http-server"}}

    target.terminate(dig)
    assert target.wait(dig, ready=False, timeout=120).state == "Terminated"
    assert fleet.get("c1", "/api/v1/namespaces/default/configmaps/limits") is None


def test_hpa_ovnaction_and_ncm_keep_their_intents(target: emco.Emco, fleet: Fleet) -> None:
    fleet.register(target)
    onboard_web(target, ["c1"])
    dig = target.create_deployment_intent_group(
        "p", "web", "v1", "d1", composite_profile="default", logical_cloud="admin",
        placement=PLACE_C1)
    base = dig.path

    target.create_hpa_intent(dig, "needs", "http-server")
    target.add_hpa_consumer(dig, "needs", "server", "Deployment", "http-server", "server")
    req = target.add_hpa_requirement(dig, "needs", "server", "cpu",
                                     {"name": "cpu", "requests": 1, "limits": 2})
    assert req.spec["resource"] == {"name": "cpu", "requests": 1, "limits": 2}
    got = target.request("GET", f"{base}/hpa-intents/needs/hpa-resource-consumers/server")
    assert got["spec"]["container"] == "server"

    target.create_network_controller_intent(dig, "nets")
    target.add_workload_intent(dig, "nets", "server", "http-server", "http-server")
    iface = target.add_interface(dig, "nets", "server", "eth1", "protected", "eth1",
                                 ip_address="10.10.1.5")
    assert iface.spec["defaultGateway"] == "false"
    assert iface.spec["ipAddress"] == "10.10.1.5"

    # ovnaction checks the address as Go's ParseIP does.
    with pytest.raises(emco.InvalidArgument):
        target.add_interface(dig, "nets", "server", "eth2", "protected", "eth2",
                             ip_address="10.10.1")

    net = target.create_network(PROVIDER, "c1", "protected",
                                [{"name": "sub1", "subnet": "10.10.1.0/24",
                                  "gateway": "10.10.1.1/24"}])
    assert isinstance(net, emco.Network) and net.cni_type == "ovn4nfv"
    provider_net = target.create_network(
        PROVIDER, "c1", "provider", [{"name": "sub2", "subnet": "10.20.1.0/24",
                                      "gateway": "10.20.1.1/24"}],
        provider_network={"providerNetType": "VLAN", "vlan": {
            "vlanID": "100", "providerInterfaceName": "eth1",
            "logicalInterfaceName": "eth1.100", "vlanNodeSelector": "specific",
            "nodeLabelList": ["kubernetes.io/os=linux"]}})
    assert provider_net.name == "provider"
    assert [n.name for n in target.list_networks(PROVIDER, "c1")] == ["protected"]
    assert [n.name for n in target.list_networks(PROVIDER, "c1", provider_networks=True)] == [
        "provider"]
    with pytest.raises(emco.InvalidArgument):
        target.create_network(PROVIDER, "c1", "bad", [{"name": "s", "subnet": "10.1.2.0/99",
                                                       "gateway": "10.1.2.1/24"}])
