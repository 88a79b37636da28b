//! # emco-controllers
//!
//! EMCO's built-in controllers, written only with the public API of `emco-controller-sdk`: the
//! generic action controller (gac), the hardware-platform-aware placement and action
//! controllers (hpa), the distributed traffic controller (dtc) with its network policy
//! sub-controller (nps), and the network action controller (ovnaction).
//!
//! - [`gac::Gac`]: applies the generic-k8s-intent the DIG names (new objects, JSON / merge
//!   patches, ConfigMap / Secret data from files, per-cluster or per-label scope with allow /
//!   deny); [`gac::apply`] is the same logic on a [`emco_controller_sdk::ContextHandle`].
//! - [`hpa::HpaPlacement`] removes the clusters that miss an app's mandatory hardware
//!   requirements (cluster kv-pairs and labels) and, in each anyOf group, the clusters that
//!   score below the best on the weights of the optional ones; [`hpa::HpaAction`] writes the
//!   requests and limits into the consumer's pod template.
//! - [`dtc::Dtc`] calls dtc's sub-controllers in priority order (in-process ones and, at their
//!   registered address, remote ones); [`dtc::Nps`] writes the NetworkPolicies that admit each
//!   inbound intent's clients to its server.
//! - [`its::Its`], dtc's Istio sub-controller, adds the Gateways, ServiceEntries,
//!   DestinationRules, AuthorizationPolicies (and for external access VirtualServices and
//!   Secrets) that let clients in other clusters reach a server through the ingress gateways.
//! - [`swc::Swc`], dtc's SD-EWAN sub-controller, adds the CNFServices and SdewanApplications
//!   that expose a server behind an SD-EWAN CNF to its clients' clusters.
//! - [`sds::Sds`], dtc's service discovery sub-controller, makes a server reachable by name
//!   in its clients' clusters once it is deployed: a headless Service and Endpoints at the
//!   server's node or load balancer address, deployed in a child AppContext.
//! - [`dtc::routes`] serves dtc's traffic intents (traffic groups, inbound servers, clients,
//!   access points) and its sub-controller registry at EMCO's URLs, with dtc's checks and texts.
//! - [`ovnaction::Ovnaction`] sets the network annotations (ovn4nfv's `nfn-network`, multus'
//!   `networks`) on the pod templates of the workloads a network-controller-intent names;
//!   [`ovnaction::routes`] serves its intents.
//! - [`sfc::Sfc`] adds a Nodus `NetworkChaining` resource for each network chain of the DIG
//!   (on the clusters that run all its functions) and labels the functions' pods;
//!   [`sfc::SfcClient`] labels a client workload's pods to attach it to a chain end;
//!   [`sfc::routes`] serves their intents (network chains with links, client selectors and
//!   provider networks; sfc clients).
//! - [`gac::routes`] serves gac's intents at EMCO's URLs; a GET of a resource or customization
//!   answers JSON, `multipart/form-data` (metadata and files) or the raw file, as `Accept` asks.
//!
//! Each runs in-process through `ControllerRegistry::with_action` / `with_placement`, or as a
//! gRPC server with `emco_controller_sdk::Server`.

pub mod dtc;
pub mod gac;
pub mod hpa;
pub mod its;
pub mod ovnaction;
pub mod sds;
pub mod sfc;
pub mod swc;
mod workload;
