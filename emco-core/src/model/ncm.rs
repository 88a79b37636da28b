//! ncm's objects: the networks and provider networks of a cluster
//! (`/cluster-providers/{clusterProvider}/clusters/{cluster}/networks|provider-networks`), with
//! ncm's Go structs' JSON (src/ncm/pkg/networkintents) and its handlers' checks and texts
//! (src/ncm/api/networkhandler.go `validateNetworkInputs`, providernethandler.go
//! `validateProviderNetInputs`, networkintents/types `ValidateSubnet`).

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::Object;
use crate::error::{Error, Result};
use crate::metadata::Metadata;
use crate::validate::{go_label_errors, go_list, go_name_errors};

/// The only CNI ncm knows (`CNI_TYPES`).
pub const CNI_OVN4NFV: &str = "ovn4nfv";
/// Provider network types (`PROVIDER_NET_TYPES`, compared in upper case).
pub const PROVIDER_NET_TYPES: [&str; 2] = ["VLAN", "DIRECT"];
/// VLAN node selectors (`VLAN_NODE_SELECTORS`, compared in lower case).
pub const VLAN_NODE_SELECTORS: [&str; 2] = ["any", "specific"];

/// An IPv4 or IPv6 subnet of a network (gateway and exclusions omitted when empty).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subnet {
    /// CIDR, `10.10.20.0/24`.
    #[serde(default)]
    pub subnet: String,
    /// The subnet's name.
    #[serde(default)]
    pub name: String,
    /// The gateway as a CIDR, `10.10.20.1/24`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub gateway: String,
    /// Space-separated addresses and `a..b` ranges not to hand out.
    #[serde(
        default,
        rename = "excludeIps",
        skip_serializing_if = "String::is_empty"
    )]
    pub exclude_ips: String,
}

/// `networks/{network}`: a virtual network on the cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(check = Self::check, schema = crate::schemas::NETWORK, schema_on_put = false)]
pub struct Network {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// The network.
    #[serde(default)]
    pub spec: NetworkSpec,
}

/// The `spec` of a [`Network`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkSpec {
    /// `ovn4nfv`.
    #[serde(default)]
    pub cni_type: String,
    /// IPv4 subnets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ipv4_subnets: Vec<Subnet>,
    /// IPv6 subnets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ipv6_subnets: Vec<Subnet>,
}

/// `provider-networks/{providerNetwork}`: a network bound to a host interface (VLAN or direct).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(check = Self::check, schema = crate::schemas::PROVIDER_NETWORK, schema_on_put = false)]
pub struct ProviderNetwork {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// The provider network.
    #[serde(default)]
    pub spec: ProviderNetworkSpec,
}

/// The `spec` of a [`ProviderNetwork`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderNetworkSpec {
    /// `ovn4nfv`.
    #[serde(default)]
    pub cni_type: String,
    /// IPv4 subnets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ipv4_subnets: Vec<Subnet>,
    /// IPv6 subnets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ipv6_subnets: Vec<Subnet>,
    /// `VLAN` or `DIRECT` (any case, kept as sent).
    #[serde(default)]
    pub provider_net_type: String,
    /// The interface settings.
    #[serde(default)]
    pub vlan: Vlan,
}

/// A provider network's interface settings (JSON `vlanID`; the cluster's resource says
/// `vlanId`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Vlan {
    /// 0..=4095, as a decimal string.
    #[serde(default, rename = "vlanID")]
    pub vlan_id: String,
    /// The host interface (`eth1`).
    #[serde(default)]
    pub provider_interface_name: String,
    /// The VLAN interface (`eth1.102`).
    #[serde(default)]
    pub logical_interface_name: String,
    /// `any` or `specific` node.
    #[serde(default)]
    pub vlan_node_selector: String,
    /// Node labels of `specific` (`null` when absent, as Go's nil slice).
    #[serde(default)]
    pub node_label_list: Option<Vec<String>>,
}

impl Network {
    /// ncm's handlers: the schema on POST only, then these checks on POST and PUT.
    fn check(&self) -> Result<()> {
        check_object_name(&self.metadata.name, "Invalid network name - name")?;
        check_cni(&self.spec.cni_type)?;
        check_subnets(&self.spec.ipv4_subnets)
    }
}

impl ProviderNetwork {
    fn check(&self) -> Result<()> {
        check_object_name(&self.metadata.name, "Invalid provider network name")?;
        let spec = &self.spec;
        check_cni(&spec.cni_type)?;
        if !PROVIDER_NET_TYPES.contains(&spec.provider_net_type.to_uppercase().as_str()) {
            return Err(Error::invalid(format!(
                "Invalid provider network type: {}",
                spec.provider_net_type
            )));
        }
        check_subnets(&spec.ipv4_subnets)?;
        let vlan = &spec.vlan;
        if let Some(why) = number_str_error(&vlan.vlan_id, 0, 4095) {
            return Err(Error::invalid(format!(
                "Invalid VlAN ID {} - error: [{why}]",
                vlan.vlan_id
            )));
        }
        let selector = vlan.vlan_node_selector.to_lowercase();
        if !VLAN_NODE_SELECTORS.contains(&selector.as_str()) {
            return Err(Error::invalid(format!(
                "Invalid VlAN Node Selector {}",
                vlan.vlan_node_selector
            )));
        }
        let labels = vlan.node_label_list.as_deref().unwrap_or_default();
        for label in labels {
            let errs = go_label_errors(label);
            if !errs.is_empty() {
                return Err(Error::invalid(format!(
                    "Invalid Label={label} - errors: {}",
                    go_list(&errs)
                )));
            }
        }
        if selector == "specific" && labels.is_empty() {
            return Err(Error::invalid(
                "Node Labels required for VlAN node selector \"specific\"",
            ));
        }
        Ok(())
    }
}

/// The name checks of ncm's handlers: a PUT without a name is refused first (on POST the
/// schema refuses it), then `IsValidName` under `heading`.
fn check_object_name(name: &str, heading: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid("Missing name in PUT request"));
    }
    let errs = go_name_errors(name);
    if errs.is_empty() {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{heading}=[{name}], errors: {}",
            go_list(&errs)
        )))
    }
}

fn check_cni(cni: &str) -> Result<()> {
    if cni == CNI_OVN4NFV {
        Ok(())
    } else {
        Err(Error::invalid(format!("Invalid cni type: {cni}")))
    }
}

/// `ValidateSubnet` of each IPv4 subnet, wrapped as the handlers wrap it (ncm checks no IPv6
/// subnet).
fn check_subnets(subnets: &[Subnet]) -> Result<()> {
    for s in subnets {
        if let Some(why) = subnet_error(s) {
            return Err(Error::invalid(format!("invalid subnet: {why}")));
        }
    }
    Ok(())
}

fn subnet_error(s: &Subnet) -> Option<String> {
    if let Some(why) = cidr_error(&s.subnet) {
        return Some(format!("invalid subnet: {why}"));
    }
    let errs = go_name_errors(&s.name);
    if !errs.is_empty() {
        return Some(format!(
            "Invalid subnet name=[{}], errors: {}",
            s.name,
            go_list(&errs)
        ));
    }
    if !s.gateway.is_empty()
        && let Some(why) = cidr_error(&s.gateway)
    {
        return Some(format!("invalid gateway: {why}"));
    }
    let bad_exclusion = s.exclude_ips.split_whitespace().any(|item| {
        item.splitn(2, "..")
            .any(|ip| !matches!(parse_go_ip(ip), Some(IpAddr::V4(_))))
    });
    bad_exclusion.then(|| format!("invalid ipv4 exclude list {}", s.exclude_ips))
}

/// EMCO's `IsIpv4Cidr`: Go's `net.ParseCIDR`. As in EMCO, an IPv6 CIDR passes (the check of
/// its family wraps a nil error).
fn cidr_error(s: &str) -> Option<String> {
    let parsed = s.split_once('/').and_then(|(ip, bits)| {
        let ip = parse_go_ip(ip)?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let digits_only = !bits.is_empty() && bits.bytes().all(|b| b.is_ascii_digit());
        (digits_only && bits.parse::<u32>().ok()? <= max).then_some(())
    });
    match parsed {
        Some(()) => None,
        None => Some(format!(
            "could not parse ipv4 cidr {s}: invalid CIDR address: {s}"
        )),
    }
}

/// Go's `net.ParseIP`: dotted IPv4 without leading zeros, IPv6 (an IPv4-mapped IPv6 address
/// counts as IPv4, as Go's `To4`).
fn parse_go_ip(s: &str) -> Option<IpAddr> {
    match s.parse::<IpAddr>().ok()? {
        IpAddr::V6(v6) => Some(v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)),
        v4 @ IpAddr::V4(_) => Some(v4),
    }
}

/// EMCO's `IsValidNumberStr`: Go's `strconv.Atoi` of `s` within `min..=max`; the problem, in
/// Go's words.
fn number_str_error(s: &str, min: i64, max: i64) -> Option<String> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Some(format!("strconv.Atoi: parsing \"{s}\": invalid syntax"));
    }
    let Ok(n) = s.parse::<i64>() else {
        return Some(format!("strconv.Atoi: parsing \"{s}\": value out of range"));
    };
    if n < min {
        Some("value less than minimum".to_owned())
    } else if n > max {
        Some("value greater than maximum".to_owned())
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::Validate;

    fn subnet(cidr: &str, gateway: &str, exclude: &str) -> Subnet {
        Subnet {
            subnet: cidr.into(),
            name: "subnet1".into(),
            gateway: gateway.into(),
            exclude_ips: exclude.into(),
        }
    }

    #[test]
    fn subnets_as_ncm_checks_them() {
        assert_eq!(
            subnet_error(&subnet("10.10.20.0/24", "10.10.20.1/24", "")),
            None
        );
        // An IPv6 CIDR passes the IPv4 check, as in EMCO.
        assert_eq!(subnet_error(&subnet("2001:db8::/56", "", "")), None);
        assert_eq!(
            subnet_error(&subnet("10.10.20.0", "", "")).unwrap(),
            "invalid subnet: could not parse ipv4 cidr 10.10.20.0: invalid CIDR address: 10.10.20.0"
        );
        assert!(subnet_error(&subnet("10.10.20.0/33", "", "")).is_some());
        assert!(subnet_error(&subnet("010.10.20.0/24", "", "")).is_some());
        assert_eq!(
            subnet_error(&subnet("10.10.20.0/24", "10.10.20.1", "")).unwrap(),
            "invalid gateway: could not parse ipv4 cidr 10.10.20.1: invalid CIDR address: 10.10.20.1"
        );
        assert_eq!(
            subnet_error(&subnet("10.0.0.0/8", "", "10.0.0.1 10.0.0.5..10.0.0.9")),
            None
        );
        assert_eq!(
            subnet_error(&subnet("10.0.0.0/8", "", "10.0.0.1 ::1")).unwrap(),
            "invalid ipv4 exclude list 10.0.0.1 ::1"
        );
        assert_eq!(
            subnet_error(&subnet("10.0.0.0/8", "", "::ffff:10.0.0.1")),
            None
        );
    }

    #[test]
    fn vlan_ids_as_strconv_atoi_reads_them() {
        assert_eq!(number_str_error("102", 0, 4095), None);
        assert_eq!(number_str_error("+5", 0, 4095), None);
        assert_eq!(number_str_error("007", 0, 4095), None);
        assert_eq!(
            number_str_error("", 0, 4095).unwrap(),
            "strconv.Atoi: parsing \"\": invalid syntax"
        );
        assert_eq!(
            number_str_error("4096", 0, 4095).unwrap(),
            "value greater than maximum"
        );
        assert_eq!(
            number_str_error("-1", 0, 4095).unwrap(),
            "value less than minimum"
        );
        assert_eq!(
            number_str_error("99999999999999999999", 0, 4095).unwrap(),
            "strconv.Atoi: parsing \"99999999999999999999\": value out of range"
        );
    }

    #[test]
    fn provider_networks_refuse_in_ncm_words() {
        let mut p = ProviderNetwork {
            metadata: Metadata::named("pn1"),
            ..ProviderNetwork::default()
        };
        p.spec.cni_type = CNI_OVN4NFV.into();
        p.spec.provider_net_type = "vlan".into();
        p.spec.vlan.vlan_id = "102".into();
        p.spec.vlan.vlan_node_selector = "Specific".into();
        assert_eq!(
            p.validate().unwrap_err().message(),
            "Node Labels required for VlAN node selector \"specific\""
        );
        p.spec.vlan.node_label_list = Some(vec!["Kubernetes.io/hostname=localhost".into()]);
        assert!(
            p.validate()
                .unwrap_err()
                .message()
                .starts_with("Invalid Label=Kubernetes.io/hostname=localhost - errors: [Invalid label prefix - label=[Kubernetes.io/hostname=localhost%], labelprefix=[Kubernetes.io], errors:  a lowercase RFC 1123 subdomain")
        );
        p.spec.vlan.node_label_list = Some(vec!["kubernetes.io/hostname=localhost".into()]);
        assert!(p.validate().is_ok());
        p.spec.provider_net_type = "bridge".into();
        assert_eq!(
            p.validate().unwrap_err().message(),
            "Invalid provider network type: bridge"
        );
    }
}
