//! ovnaction, the network action controller: its intents and the pod annotations it writes
//! (src/ovnaction: api/, pkg/module/resources.go, internal/action/action.go).
//!
//! Under a DIG, `network-controller-intent/{netControllerIntent}` holds
//! `workload-intents/{workloadIntent}` (an app's workload, `workloadResource` + `type` naming the
//! AppContext resource `name+Kind`), each holding `interfaces/{interfaceIntent}` (an interface of
//! the workload's pods on an ncm network, with its address).
//!
//! [`Ovnaction`] is the action controller a DIG names with `ovnaction: <netControllerIntent>`:
//! on every cluster of each workload's app it sets, in the workload's pod template (a Pod's own
//! metadata),
//! - `k8s.plugin.opnfv.org/nfn-network`: `{"type":"ovn4nfv","interface":[...]}`, the intent's
//!   interfaces merged into those already there (same `name` and `interface`: replaced);
//! - `k8s.v1.cni.cncf.io/networks`: the existing network selections plus
//!   `{"name":"ovn-networkobj","namespace":"default"}`, unless the cluster's kv-pairs say Nodus
//!   serves all interfaces (`CNI-Networking-Nodus-CNI-For-all-interfaces: true`) or name
//!   another CNI wrapper than multus (`CNI-Networking-Multi-CNI-Wrapper`).
//!
//! A workload without interfaces, or not found on a cluster, is left alone, as ovnaction does.
//! Where ovnaction writes `null` over a custom resource without a pod template we leave it
//! unchanged.

use std::net::IpAddr;

use async_trait::async_trait;
use emco_controller_sdk::intent::{Dig, IntentType};
use emco_controller_sdk::{ActionController, ControllerContext};
use emco_core::ResourceName;
use emco_core::model::kv_value_text;
use emco_core::validate::{go_list, go_name_errors};
use emco_core::{Error, Metadata, Object, Result};
use emco_rest::{PutStatus, Wording};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::workload::{PodMeta, object_at, pod_meta, type_of};

/// The nfn annotation (`NfnAnnotationKey`).
pub const NFN_ANNOTATION: &str = "k8s.plugin.opnfv.org/nfn-network";
/// multus' network selection annotation (`NetworkAttachmentAnnot`).
pub const NETWORKS_ANNOTATION: &str = "k8s.v1.cni.cncf.io/networks";
/// The network object ovnaction selects for multus.
pub const OVN_NETWORK_OBJECT: &str = "ovn-networkobj";
/// The cluster kv-pair saying Nodus serves every interface (no multus selection then).
pub const NODUS_ALL_INTERFACES: &str = "CNI-Networking-Nodus-CNI-For-all-interfaces";
/// The cluster kv-pair naming the CNI wrapper (`multus` by default).
pub const CNI_WRAPPER: &str = "CNI-Networking-Multi-CNI-Wrapper";

/// `DIG/network-controller-intent/{netControllerIntent}`: `{metadata}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
// netcontrolintenthandler.go: json-schemas/metadata.json on POST and PUT.
#[object(schema = emco_core::schemas::METADATA)]
#[intent(parent = Dig, segment = "network-controller-intent", param = "netControllerIntent",
    wording = wording("Net Control Intent not found", "NetControlIntent already exists"))]
pub struct NetControlIntent {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
}

/// `.../workload-intents/{workloadIntent}`: the workload of an app whose pods get interfaces.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
// workloadintenthandler.go: json-schemas/network-workload.json on POST and PUT.
#[object(schema = WORKLOAD_SCHEMA)]
#[intent(parent = NetControlIntent, segment = "workload-intents", param = "workloadIntent",
    wording = wording("WorkloadIntent not found", "WorkloadIntent already exists"))]
pub struct WorkloadIntent {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// The workload.
    #[serde(default)]
    pub spec: WorkloadIntentSpec,
}

/// The `spec` of a [`WorkloadIntent`] (every field written, as ovnaction's Go struct).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadIntentSpec {
    /// The app.
    #[serde(default)]
    pub app: String,
    /// The workload's rendered `metadata.name`.
    #[serde(default)]
    pub workload_resource: String,
    /// Its kind, exactly (`Deployment`).
    #[serde(default, rename = "type")]
    pub kind: String,
}

/// `.../interfaces/{interfaceIntent}`: one interface of the workload's pods.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
// workloadifintenthandler.go: json-schemas/network-load-interface.json on POST only, then
// `validateWorkloadIfIntentInputs`; the handlers fill in the default gateway.
#[object(check = Self::check, schema = INTERFACE_SCHEMA, schema_on_put = false)]
#[intent(parent = WorkloadIntent, segment = "interfaces", param = "interfaceIntent",
    wording = wording("WorkloadIfIntent not found", "WorkloadIfIntent already exists"),
    hook = InterfaceDefaults)]
pub struct WorkloadIfIntent {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// The interface.
    #[serde(default)]
    pub spec: InterfaceSpec,
}

/// The `spec` of a [`WorkloadIfIntent`], also an element of the nfn annotation (its fields in
/// this order; addresses omitted when empty).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InterfaceSpec {
    /// The interface in the pod (`eth1`).
    #[serde(default)]
    pub interface: String,
    /// The ncm network.
    #[serde(default)]
    pub name: String,
    /// Whether it carries the default route (`"false"` when not given).
    #[serde(default)]
    pub default_gateway: String,
    /// A fixed IP address.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ip_address: String,
    /// A fixed MAC address.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mac_address: String,
}

emco_go::schemas! {
    WORKLOAD_SCHEMA = "../schemas/ovnaction/network-workload.json";
    INTERFACE_SCHEMA = "../schemas/ovnaction/network-load-interface.json";
}

impl WorkloadIfIntent {
    /// `validateWorkloadIfIntentInputs` (an empty `defaultGateway` counts as its default
    /// `"false"`).
    fn check(&self) -> Result<()> {
        if self.metadata.name.is_empty() {
            return Err(Error::invalid("Missing name in PUT request"));
        }
        let s = &self.spec;
        let gateway = if s.default_gateway.is_empty() {
            "false"
        } else {
            s.default_gateway.as_str()
        };
        for (what, value) in [
            ("interface name", s.interface.as_str()),
            ("network name", s.name.as_str()),
            ("default interface", gateway),
        ] {
            let errs = go_name_errors(value);
            if !errs.is_empty() {
                return Err(Error::invalid(format!(
                    "Invalid {what} = [{value}], errors: {}",
                    go_list(&errs)
                )));
            }
        }
        if !s.ip_address.is_empty() && parse_go_ip(&s.ip_address).is_none() {
            return Err(Error::invalid(format!(
                "Invalid IP address = [{0}], errors: invalid ip address {0}",
                s.ip_address
            )));
        }
        if !s.mac_address.is_empty() && !is_go_mac(&s.mac_address) {
            return Err(Error::invalid(format!(
                "Invalid MAC address = [{0}], errors: invalid MAC address {0}",
                s.mac_address
            )));
        }
        Ok(())
    }
}

/// Go's `net.ParseIP`.
fn parse_go_ip(s: &str) -> Option<IpAddr> {
    s.parse().ok()
}

/// Go's `net.ParseMAC`: 6, 8 or 20 octets as hex pairs separated by `:` or `-`, or as groups
/// of four hex digits separated by `.`.
fn is_go_mac(s: &str) -> bool {
    let hex =
        |part: &str, len: usize| part.len() == len && part.bytes().all(|b| b.is_ascii_hexdigit());
    let sizes = [6, 8, 20];
    for sep in [':', '-'] {
        let parts: Vec<&str> = s.split(sep).collect();
        if parts.len() > 1 && sizes.contains(&parts.len()) && parts.iter().all(|p| hex(p, 2)) {
            return true;
        }
    }
    let groups: Vec<&str> = s.split('.').collect();
    groups.len() > 1 && sizes.contains(&(groups.len() * 2)) && groups.iter().all(|g| hex(g, 4))
}

/// ovnaction's wording of a type (api/apierrors.go): PUT answers 201; an empty list is `null`
/// and checks no parent.
fn wording(not_found: &'static str, exists: &'static str) -> Wording {
    Wording::new(not_found, exists)
        .with_put(PutStatus::Created)
        .with_list_checks(&[])
}

/// The default gateway ovnaction's handlers fill in.
struct InterfaceDefaults;

#[async_trait]
impl emco_rest::Hook<WorkloadIfIntent> for InterfaceDefaults {
    fn prepare(&self, value: &mut WorkloadIfIntent) {
        if value.spec.default_gateway.is_empty() {
            "false".clone_into(&mut value.spec.default_gateway);
        }
    }
}

/// ovnaction's REST routes over `store`: the three intent levels under a DIG.
pub fn routes<S: Clone + Send + Sync + 'static>(
    store: std::sync::Arc<dyn emco_store::ResourceStore>,
) -> axum::Router<S> {
    NetControlIntent::routes(std::sync::Arc::clone(&store))
        .merge(WorkloadIntent::routes(std::sync::Arc::clone(&store)))
        .merge(WorkloadIfIntent::routes(store))
}

/// `existing` (the nfn annotation's interfaces) with `new` merged in: an interface with the
/// same network and name is replaced in place, the others appended in order.
fn merge_interfaces(existing: Vec<InterfaceSpec>, new: &[InterfaceSpec]) -> Vec<InterfaceSpec> {
    let mut out = existing;
    for n in new {
        match out
            .iter_mut()
            .find(|e| e.name == n.name && e.interface == n.interface)
        {
            Some(e) => {
                e.default_gateway.clone_from(&n.default_gateway);
                e.ip_address.clone_from(&n.ip_address);
                e.mac_address.clone_from(&n.mac_address);
            }
            None => out.push(n.clone()),
        }
    }
    out
}

/// multus' `ParseNetworkAnnotation`: a JSON list of selections, or `[ns/]name[@if]` items
/// separated by commas; selections without a namespace get `namespace`.
fn parse_networks(text: &str, namespace: &str) -> Option<Vec<Map<String, Value>>> {
    let mut out: Vec<Map<String, Value>> = if text.contains(['[', '{', '"']) {
        serde_json::from_str::<Vec<Map<String, Value>>>(text).ok()?
    } else {
        let dns_label = |s: &str| emco_core::validate::is_dns1123_label(s);
        let mut items = Vec::new();
        for item in text.split(',') {
            let item = item.trim();
            let (rest, interface) = match item.split_once('@') {
                Some((r, i)) => (r, Some(i)),
                None => (item, None),
            };
            let (ns, name) = match rest.split_once('/') {
                Some((ns, name)) => (Some(ns), name),
                None => (None, rest),
            };
            if !dns_label(name) || ns.is_some_and(|ns| !dns_label(ns)) {
                return None;
            }
            let mut m = Map::new();
            m.insert("name".into(), json!(name));
            if let Some(ns) = ns {
                m.insert("namespace".into(), json!(ns));
            }
            if let Some(i) = interface {
                m.insert("interface".into(), json!(i));
            }
            items.push(m);
        }
        items
    };
    for m in &mut out {
        if m.get("namespace")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            m.insert("namespace".into(), json!(namespace));
        }
    }
    Some(out)
}

/// A network selection as multus' client v1.2.0 writes it: its fields in the struct's order,
/// the optional ones only when set, `cni-args` always.
fn selection_json(m: &Map<String, Value>) -> Value {
    let mut out = Map::new();
    out.insert("name".into(), m.get("name").cloned().unwrap_or(json!("")));
    let set = |v: &Value| match v {
        Value::Null => false,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        _ => true,
    };
    for key in [
        "namespace",
        "ips",
        "mac",
        "infiniband-guid",
        "interface",
        "portMappings",
        "bandwidth",
    ] {
        if let Some(v) = m.get(key).filter(|v| set(v)) {
            out.insert(key.into(), v.clone());
        }
    }
    out.insert(
        "cni-args".into(),
        m.get("cni-args").cloned().unwrap_or(Value::Null),
    );
    if let Some(v) = m.get("default-route").filter(|v| set(v)) {
        out.insert("default-route".into(), v.clone());
    }
    Value::Object(out)
}

/// Sets ovnaction's annotations on `object` for the interfaces `new`; whether it changed.
/// A custom resource whose existing annotations do not parse is left alone, as ovnaction.
///
/// # Errors
/// When the annotations cannot be written back as JSON.
pub fn annotate(object: &mut Value, new: &[InterfaceSpec], multus: bool) -> Result<bool> {
    let (api_version, kind) = type_of(object);
    let (pointer, typed, namespace) = match pod_meta(&api_version, &kind) {
        PodMeta::None => return Ok(false),
        PodMeta::Typed(p) => {
            // A pod template's own namespace (usually none); a Pod's namespace.
            let ns = object
                .pointer(&format!("{p}/namespace"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            (p, true, ns)
        }
        // A custom resource: its `spec.template`, when there is one.
        PodMeta::Custom => {
            if !object
                .pointer("/spec/template")
                .is_some_and(Value::is_object)
            {
                return Ok(false);
            }
            let ns = object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            ("/spec/template/metadata", false, ns)
        }
    };
    let Some(annotations) = object_at(object, &format!("{pointer}/annotations")) else {
        return Ok(false);
    };
    let text = |a: &Map<String, Value>, key: &str| {
        a.get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let existing = match text(annotations, NFN_ANNOTATION) {
        None => Vec::new(),
        Some(t) => match serde_json::from_str::<Value>(&t) {
            Ok(v) => v
                .get("interface")
                .and_then(|i| serde_json::from_value::<Vec<InterfaceSpec>>(i.clone()).ok())
                .unwrap_or_default(),
            Err(_) if typed => Vec::new(),
            Err(_) => return Ok(false),
        },
    };
    let mut networks = None;
    if multus {
        let mut list = match text(annotations, NETWORKS_ANNOTATION) {
            None => Vec::new(),
            Some(t) => match parse_networks(&t, &namespace) {
                Some(l) => l,
                None if typed => Vec::new(),
                None => return Ok(false),
            },
        };
        if !list
            .iter()
            .any(|m| m.get("name").and_then(Value::as_str) == Some(OVN_NETWORK_OBJECT))
        {
            let mut ovn = Map::new();
            ovn.insert("name".into(), json!(OVN_NETWORK_OBJECT));
            ovn.insert("namespace".into(), json!("default"));
            list.push(ovn);
        }
        let list: Vec<Value> = list.iter().map(selection_json).collect();
        networks = Some(to_json(&list)?);
    }
    let nfn = json!({"type": "ovn4nfv", "interface": merge_interfaces(existing, new)});
    annotations.insert(NFN_ANNOTATION.to_owned(), Value::String(to_json(&nfn)?));
    if let Some(n) = networks {
        annotations.insert(NETWORKS_ANNOTATION.to_owned(), Value::String(n));
    }
    Ok(true)
}

fn to_json<T: Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value)
        .map_err(|e| Error::internal("cannot write an annotation").with_source(e))
}

/// Whether ovnaction selects its network through multus on a cluster with kv-pairs `kv`.
#[must_use]
pub fn uses_multus(kv: &std::collections::BTreeMap<String, Value>) -> bool {
    let text = kv_value_text;
    // Go's strconv.ParseBool; anything else is false.
    let all_interfaces = kv
        .get(NODUS_ALL_INTERFACES)
        .map(text)
        .is_some_and(|s| matches!(s.as_str(), "1" | "t" | "T" | "TRUE" | "true" | "True"));
    let wrapper = kv
        .get(CNI_WRAPPER)
        .map_or_else(|| "multus".to_owned(), text);
    !all_interfaces && wrapper.eq_ignore_ascii_case("multus")
}

/// The network action controller: applies the network-controller-intent the DIG names for it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ovnaction;

#[async_trait]
impl ActionController for Ovnaction {
    async fn update(&self, cx: &mut ControllerContext) -> Result<()> {
        let intent = cx
            .intent_name()
            .ok_or_else(|| Error::failed_precondition("the request names no intent"))?
            .to_owned();
        // As ovnaction, the intent itself is not looked up: an unknown name changes nothing.
        let key = cx.dig_key().await?.child(NetControlIntent::PARAM, &intent);
        let mut multus_of = std::collections::BTreeMap::new();
        for (wkey, wi) in cx.children::<WorkloadIntent>(&key).await? {
            let interfaces: Vec<InterfaceSpec> = cx
                .children::<WorkloadIfIntent>(&wkey)
                .await?
                .into_iter()
                .map(|(_, i)| i.spec)
                .collect();
            if interfaces.is_empty() {
                tracing::warn!(workload = %wi.metadata.name, "no interface intents for the workload intent");
                continue;
            }
            let app = &wi.spec.app;
            let clusters = cx.clusters(app).await?;
            if clusters.is_empty() {
                return Err(Error::failed_precondition(format!(
                    "Error getting clusters for app: {app}: Cluster list is empty"
                )));
            }
            let resource = ResourceName::new(&wi.spec.workload_resource, &wi.spec.kind).to_string();
            for cluster in clusters {
                let Some(mut object) = cx.handle().resource(app, &cluster, &resource).await? else {
                    tracing::warn!(%app, %cluster, %resource, "ovnaction: no such resource");
                    continue;
                };
                // A cluster's kv-pairs are read once, however many workloads it has.
                let multus = match multus_of.get(&cluster) {
                    Some(m) => *m,
                    None => {
                        let m = uses_multus(&cx.cluster_kv(&cluster).await?);
                        multus_of.insert(cluster.clone(), m);
                        m
                    }
                };
                if annotate(&mut object, &interfaces, multus)? {
                    cx.handle_mut()
                        .put_resource(app, &cluster, &resource, object)
                        .await?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn iface(interface: &str, name: &str, ip: &str) -> InterfaceSpec {
        InterfaceSpec {
            interface: interface.into(),
            name: name.into(),
            default_gateway: "false".into(),
            ip_address: ip.into(),
            mac_address: String::new(),
        }
    }

    fn deployment(annotations: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "r1-sink"},
            "spec": {"template": {"metadata": {"annotations": annotations},
                "spec": {"containers": []}}}})
    }

    /// resources.go: the vfw sink's annotations, as ovnaction writes them.
    #[test]
    fn a_deployment_gets_both_annotations() {
        let mut d = deployment(Value::Null);
        let new = [
            iface("eth1", "protected-private-net", "192.168.20.3"),
            iface("eth2", "emco-private-net", "10.10.20.4"),
        ];
        assert!(annotate(&mut d, &new, true).unwrap());
        let a = &d["spec"]["template"]["metadata"]["annotations"];
        assert_eq!(
            a[NFN_ANNOTATION],
            r#"{"type":"ovn4nfv","interface":[{"interface":"eth1","name":"protected-private-net","defaultGateway":"false","ipAddress":"192.168.20.3"},{"interface":"eth2","name":"emco-private-net","defaultGateway":"false","ipAddress":"10.10.20.4"}]}"#
        );
        assert_eq!(
            a[NETWORKS_ANNOTATION],
            r#"[{"name":"ovn-networkobj","namespace":"default","cni-args":null}]"#
        );
        // Applied again: nothing is duplicated.
        let once = d.clone();
        annotate(&mut d, &new, true).unwrap();
        assert_eq!(d, once);
    }

    #[test]
    fn existing_annotations_are_merged() {
        let mut d = deployment(json!({
            "keep": "me",
            NFN_ANNOTATION: r#"{"type":"ovn4nfv","interface":[{"interface":"eth1","name":"n1","defaultGateway":"true","extra":1},{"interface":"eth9","name":"n9"}]}"#,
            NETWORKS_ANNOTATION: "other/macvlan@net1, sriov",
        }));
        annotate(
            &mut d,
            &[iface("eth1", "n1", "10.0.0.1"), iface("eth2", "n2", "")],
            true,
        )
        .unwrap();
        let a = &d["spec"]["template"]["metadata"]["annotations"];
        assert_eq!(a["keep"], "me");
        assert_eq!(
            a[NFN_ANNOTATION],
            r#"{"type":"ovn4nfv","interface":[{"interface":"eth1","name":"n1","defaultGateway":"false","ipAddress":"10.0.0.1"},{"interface":"eth9","name":"n9","defaultGateway":""},{"interface":"eth2","name":"n2","defaultGateway":"false"}]}"#
        );
        assert_eq!(
            a[NETWORKS_ANNOTATION],
            r#"[{"name":"macvlan","namespace":"other","interface":"net1","cni-args":null},{"name":"sriov","cni-args":null},{"name":"ovn-networkobj","namespace":"default","cni-args":null}]"#
        );
    }

    #[test]
    fn kinds_as_ovnaction_places_them() {
        let new = [iface("eth1", "n1", "")];
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
        assert!(annotate(&mut pod, &new, false).unwrap());
        assert!(pod["metadata"]["annotations"][NFN_ANNOTATION].is_string());
        assert!(
            pod["metadata"]["annotations"]
                .get(NETWORKS_ANNOTATION)
                .is_none()
        );
        let mut cron = json!({"apiVersion": "batch/v1beta1", "kind": "CronJob",
            "spec": {"jobTemplate": {"spec": {"template": {"spec": {}}}}}});
        assert!(annotate(&mut cron, &new, true).unwrap());
        assert!(
            cron.pointer("/spec/jobTemplate/spec/template/metadata/annotations")
                .unwrap()
                .get(NFN_ANNOTATION)
                .is_some()
        );
        // Built-in kinds ovnaction does not know stay as they are.
        for (v, k) in [
            ("batch/v1", "CronJob"),
            ("v1", "Service"),
            ("apps/v1beta2", "Deployment"),
        ] {
            let mut o = json!({"apiVersion": v, "kind": k, "spec": {"template": {}}});
            let before = o.clone();
            assert!(!annotate(&mut o, &new, true).unwrap(), "{k}");
            assert_eq!(o, before);
        }
        // A custom resource: its pod template when it has one.
        let mut vm = json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
            "metadata": {"namespace": "vms"}, "spec": {"template": {"spec": {}}}});
        assert!(annotate(&mut vm, &new, true).unwrap());
        let mut bare = json!({"apiVersion": "example.com/v1", "kind": "Widget", "spec": {}});
        assert!(!annotate(&mut bare, &new, true).unwrap());
        // A custom resource whose annotation does not parse is left alone.
        let mut bad = json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
            "spec": {"template": {"metadata": {"annotations": {NFN_ANNOTATION: "{"}}}}});
        assert!(!annotate(&mut bad, &new, true).unwrap());
    }

    #[test]
    fn multus_unless_the_cluster_says_otherwise() {
        let kv = |pairs: &[(&str, Value)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        assert!(uses_multus(&kv(&[])));
        assert!(!uses_multus(&kv(&[(NODUS_ALL_INTERFACES, json!("true"))])));
        assert!(!uses_multus(&kv(&[(NODUS_ALL_INTERFACES, json!(true))])));
        assert!(uses_multus(&kv(&[(NODUS_ALL_INTERFACES, json!("yes"))])));
        assert!(!uses_multus(&kv(&[(CNI_WRAPPER, json!("danm"))])));
        assert!(uses_multus(&kv(&[(CNI_WRAPPER, json!("Multus"))])));
    }

    #[test]
    fn addresses_as_go_parses_them() {
        assert!(is_go_mac("00:00:5e:00:53:01"));
        assert!(is_go_mac("00-00-5E-00-53-01"));
        assert!(is_go_mac("0000.5e00.5301"));
        assert!(is_go_mac("02:00:5e:10:00:00:00:01"));
        assert!(!is_go_mac("00:00:5e:00:53"));
        assert!(!is_go_mac("0000.5e00"));
        assert!(parse_go_ip("10.10.20.4").is_some());
        assert!(parse_go_ip("2001:db8::1").is_some());
        assert!(parse_go_ip("010.10.20.4").is_none());
    }
}
