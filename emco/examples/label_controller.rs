//! A custom EMCO action controller: labels and annotates every Deployment of the apps its
//! intent names. See examples/label-controller/README.md.
use std::collections::BTreeMap;

use emco::controller::{ActionController, ControllerContext, Dig, IntentType, Server, set_field};
use emco::{Error, Metadata, Object, Result, async_trait};
use serde::{Deserialize, Serialize};

/// `DIG/label-intents/{labelIntent}`.
#[derive(Debug, Clone, Serialize, Deserialize, Object)]
#[object(metadata, check = LabelIntent::check)]
#[intent(parent = Dig, segment = "label-intents", param = "labelIntent")]
pub struct LabelIntent {
    metadata: Metadata,
    spec: LabelSpec,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct LabelSpec {
    apps: Vec<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
}

impl LabelIntent {
    fn check(&self) -> Result<()> {
        if self.spec.apps.is_empty() || self.spec.labels.len() + self.spec.annotations.len() == 0 {
            return Err(Error::invalid(
                "name apps and at least one label or annotation",
            ));
        }
        Ok(())
    }
}

/// The controller: reads the intent the DIG names and patches the Deployments.
#[derive(Debug)]
pub struct Labeler;

#[async_trait]
impl ActionController for Labeler {
    async fn update(&self, cx: &mut ControllerContext) -> Result<()> {
        let (_, intent) = cx.intent::<LabelIntent>().await?;
        for app in &intent.spec.apps {
            for cluster in cx.clusters(app).await? {
                for (name, mut obj) in cx.resources(app, &cluster).await? {
                    if obj["kind"] != "Deployment" {
                        continue;
                    }
                    for (k, v) in &intent.spec.labels {
                        set_field(&mut obj, &["metadata", "labels", k], v.as_str().into())?;
                    }
                    for (k, v) in &intent.spec.annotations {
                        set_field(&mut obj, &["metadata", "annotations", k], v.as_str().into())?;
                    }
                    cx.put_resource(app, &cluster, &name, obj).await?;
                }
            }
        }
        Ok(())
    }
}

#[tokio::main]
async fn main() -> emco::Result<()> {
    let (rest, grpc) = (([127, 0, 0, 1], 9025).into(), ([127, 0, 0, 1], 9035).into());
    Server::run_from_env("label", rest, grpc, LabelIntent::routes, |s| {
        s.action(Labeler)
    })
    .await
}
