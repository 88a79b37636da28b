//! A custom EMCO placement controller: keeps the apps of a group off the clusters that carry a
//! label its intent avoids (a cluster labelled `maintenance`, say), whatever the group's generic
//! placement chose. See examples/label-controller/README.md.
use std::collections::BTreeSet;

use emco::controller::{ControllerContext, Dig, IntentType, PlacementController, Server};
use emco::{Error, Metadata, Object, Result, async_trait};
use serde::{Deserialize, Serialize};

/// `DIG/avoid-intents/{avoidIntent}`: the cluster labels to keep the group's apps away from.
#[derive(Debug, Clone, Serialize, Deserialize, Object)]
#[object(metadata, check = AvoidIntent::check)]
#[intent(parent = Dig, segment = "avoid-intents", param = "avoidIntent")]
pub struct AvoidIntent {
    metadata: Metadata,
    spec: AvoidSpec,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct AvoidSpec {
    labels: BTreeSet<String>,
}

impl AvoidIntent {
    fn check(&self) -> Result<()> {
        if self.spec.labels.is_empty() {
            return Err(Error::invalid("name at least one cluster label to avoid"));
        }
        Ok(())
    }
}

/// The controller, registered as `avoid`: a placement request names no intent, so it reads
/// every intent the group gives it.
#[derive(Debug)]
pub struct Avoider;

#[async_trait]
impl PlacementController for Avoider {
    async fn filter_clusters(&self, cx: &mut ControllerContext) -> Result<()> {
        let mut avoided = BTreeSet::new();
        for name in cx.intent_names_for("avoid").await? {
            avoided.extend(cx.intent_named::<AvoidIntent>(&name).await?.1.spec.labels);
        }
        for app in cx.apps().await? {
            let clusters = cx.clusters(&app).await?;
            let mut kept = clusters.len();
            for cluster in clusters {
                if !cx.cluster_labels(&cluster).await?.is_disjoint(&avoided) {
                    cx.remove_cluster(&app, &cluster).await?;
                    kept -= 1;
                }
            }
            if kept == 0 {
                let why = format!("every cluster of app {app} carries a label in {avoided:?}");
                return Err(Error::failed_precondition(why));
            }
        }
        Ok(())
    }
}

#[tokio::main]
async fn main() -> emco::Result<()> {
    let (rest, grpc) = (([127, 0, 0, 1], 9026).into(), ([127, 0, 0, 1], 9036).into());
    Server::run_from_env("avoid", rest, grpc, AvoidIntent::routes, |s| {
        s.placement(Avoider)
    })
    .await
}
