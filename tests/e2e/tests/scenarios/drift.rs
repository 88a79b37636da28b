//! Drift of the main job's example: objects changed on a cluster behind emco-rs's back by
//! another field manager (as `kubectl edit` and `kubectl patch` do) are reported in the status
//! with the fields, that manager's name and when, within seconds, and `emcoctl status` lists
//! them.

use std::time::Duration;

use emco_core::Result;
use emco_e2e::{DEADLINE, Env};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use super::preview::{DIG, check, deploy_example, fail};

/// How soon a change must show: the bound.
const SOON: Duration = Duration::from_secs(10);

/// The drift of the page ConfigMap of http-server on `cluster` in a `status=ready` answer.
fn page_drift<'s>(status: &'s Value, cluster: &str) -> Option<&'s Vec<Value>> {
    resource_drift(status, cluster, "ConfigMap", "http-server-page")
}

/// The drift of resource `kind`/`name` of http-server on `cluster` in a `status=ready` answer.
fn resource_drift<'s>(
    status: &'s Value,
    cluster: &str,
    kind: &str,
    name: &str,
) -> Option<&'s Vec<Value>> {
    status["apps"]
        .as_array()?
        .iter()
        .filter(|a| a["name"] == "http-server")
        .flat_map(|a| a["clusters"].as_array().into_iter().flatten())
        .filter(|c| c["cluster"] == cluster)
        .flat_map(|c| c["resources"].as_array().into_iter().flatten())
        .find(|r| r["name"] == name && r["GVK"]["Kind"] == kind)?
        .get("drift")?
        .as_array()
}

pub(crate) async fn drift_is_reported(env: &Env) -> Result<()> {
    let (phases, values) = deploy_example(env, "drift-packages").await?;
    env.apply(&phases.digs).await?;
    env.wait_deployed(DIG, DEADLINE).await?;
    let status = env.status(DIG, "status=ready").await?;
    check(page_drift(&status, "c1").is_none(), || {
        format!("drift before any change: {status}")
    })?;

    // Someone edits the page on c1.
    let pages: Api<ConfigMap> = Api::default_namespaced(env.kube("c1").await?);
    let edit = PatchParams {
        field_manager: Some("kubectl-edit".to_owned()),
        ..PatchParams::default()
    };
    pages
        .patch(
            "http-server-page",
            &edit,
            &Patch::Merge(json!({"data": {"index.html": "edited by hand"}})),
        )
        .await
        .map_err(|e| fail(format!("the edit: {e}")))?;
    let status = env
        .wait_status(DIG, "status=ready", SOON, |s| page_drift(s, "c1").is_some())
        .await?;
    let drift = page_drift(&status, "c1").cloned().unwrap_or_default();
    check(
        drift.len() == 1
            && drift[0]["path"] == "data.index.html"
            && drift[0]["manager"] == "kubectl-edit"
            && drift[0]["time"].is_string()
            && drift[0].get("removed").is_none(),
        || format!("{drift:#?}"),
    )?;
    check(page_drift(&status, "c2").is_none(), || {
        "c2 was not touched".to_owned()
    })?;

    // emcoctl status lists it.
    let file = emco_e2e::workspace().join("examples/emcoctl/instantiate.yaml");
    let args = [
        "emcoctl".to_owned(),
        "--server".to_owned(),
        env.url.clone(),
        "status".to_owned(),
        "-f".to_owned(),
        file.display().to_string(),
        "-v".to_owned(),
        values.display().to_string(),
    ];
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = emcoctl::cli::run(args, &mut out, &mut err).await;
    let out = String::from_utf8_lossy(&out);
    check(
        code == 0
            && out.contains(
                "http-server kubesim+c1 ConfigMap/http-server-page: drift: data.index.html changed by kubectl-edit at ",
            ),
        || format!("emcoctl status exited {code}: {out}"),
    )?;

    // A second hand scales the server's Deployment: the replicas it applied are drift too,
    // named after that hand.
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::default_namespaced(env.kube("c2").await?);
    let scale = PatchParams {
        field_manager: Some("ops-script".to_owned()),
        ..PatchParams::default()
    };
    deployments
        .patch(
            "http-server",
            &scale,
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .map_err(|e| fail(format!("the scale: {e}")))?;
    let status = env
        .wait_status(DIG, "status=ready", SOON, |s| {
            resource_drift(s, "c2", "Deployment", "http-server").is_some_and(|d| !d.is_empty())
        })
        .await?;
    let drift = resource_drift(&status, "c2", "Deployment", "http-server")
        .cloned()
        .unwrap_or_default();
    check(
        drift.len() == 1
            && drift[0]["path"] == "spec.replicas"
            && drift[0]["manager"] == "ops-script",
        || format!("{drift:#?}"),
    )?;
    env.remove(&emco_e2e::Phases {
        onboard: Vec::new(),
        ..phases
    })
    .await
}
