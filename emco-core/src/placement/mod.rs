//! Placement: app placement intents resolved against a cluster inventory, as pure functions.
//!
//! Two steps, as in EMCO's instantiate:
//! 1. [`resolve`] turns the app placement intents and the [`Inventory`] (providers, clusters,
//!    labels, the logical cloud's members) into a [`Placement`] per app: the mandatory clusters
//!    and the anyOf groups, each with a stable group number for the AppContext `!@#metaGrp` key.
//! 2. The placement controllers filter those clusters; [`finalize`] then keeps exactly one
//!    cluster per anyOf group that has survivors, chosen by an [`AnyOfStrategy`]
//!    ([`FirstLexicographic`], EMCO's choice, by default).
//!
//! Both are deterministic: the same input in any order gives the same output.
//!
//! ```
//! use emco_core::placement::{finalize, resolve, AppPlacementIntent, FirstLexicographic, Inventory};
//!
//! let inv = Inventory::builder()
//!     .cluster("edge", "c1", ["east"])
//!     .cluster("edge", "c2", ["east"])
//!     .cluster("edge", "c3", ["west"])
//!     .cluster("edge", "c4", ["west"])
//!     .build();
//! let intent: AppPlacementIntent = serde_json::from_str(r#"{
//!     "metadata": {"name": "fw"},
//!     "spec": {"app": "firewall", "intent": {
//!         "allOf": [{"clusterProvider": "edge", "clusterLabel": "east"}],
//!         "anyOf": [{"clusterProvider": "edge", "clusterLabel": "west"}]}}}"#).unwrap();
//! let placements = resolve(&[intent], &inv).unwrap();
//! // The placement controllers rejected c3.
//! let fin = finalize(&placements[0], |c| c.cluster() != "c3", &FirstLexicographic).unwrap();
//! let names: Vec<String> = fin.clusters.iter().map(|p| p.cluster.to_string()).collect();
//! assert_eq!(names, ["edge+c1", "edge+c2", "edge+c4"]);
//! ```

mod cluster;
mod explain;
mod finalize;
mod intent;
mod inventory;
mod resolve;

pub use cluster::{ClusterRef, SEPARATOR};
pub use explain::{Reason, Rule, explain};
pub use finalize::{
    AnyOfStrategy, FinalPlacement, FirstLexicographic, GroupChoice, PlacedCluster, finalize,
};
pub use intent::{AllOf, AnyOf, AppPlacementIntent, AppPlacementSpec, PlacementIntent, Target};
pub use inventory::{Inventory, InventoryBuilder};
pub use resolve::{AnyOfGroup, Placement, resolve};
