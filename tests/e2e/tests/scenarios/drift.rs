//! Drift of the main job's example: objects changed on a cluster behind emco-rs's back by
//! another field manager (as `kubectl edit` and `kubectl patch` do) are reported in the status
//! with the fields, that manager's name and when, within seconds, and `emcoctl status` lists
//! them. A drift policy then corrects what drifts (a ConfigMap applied again), leaves the
//! fields it ignores to whoever owns them (replicas), and gives up on an object another
//! controller keeps changing back, saying so; an object deleted by hand is created again.

use std::time::Duration;

use emco_core::Result;
use emco_e2e::{DEADLINE, Env};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use super::preview::{DIG, check, deploy_example, fail, send};

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
    resource(status, cluster, kind, name)?
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
    correct_ignore_and_give_up(env, &values, &pages).await?;
    env.remove(&emco_e2e::Phases {
        onboard: Vec::new(),
        ..phases
    })
    .await
}

/// The entry of resource `kind`/`name` of http-server on `cluster` in a `status=ready` answer.
fn resource<'s>(status: &'s Value, cluster: &str, kind: &str, name: &str) -> Option<&'s Value> {
    status["apps"]
        .as_array()?
        .iter()
        .filter(|a| a["name"] == "http-server")
        .flat_map(|a| a["clusters"].as_array().into_iter().flatten())
        .filter(|c| c["cluster"] == cluster)
        .flat_map(|c| c["resources"].as_array().into_iter().flatten())
        .find(|r| r["name"] == name && r["GVK"]["Kind"] == kind)
}

/// The page's text on a cluster.
async fn page_text(pages: &Api<ConfigMap>) -> Result<String> {
    let page = pages
        .get("http-server-page")
        .await
        .map_err(|e| fail(format!("reading the page: {e}")))?;
    Ok(page
        .data
        .and_then(|d| d.get("index.html").cloned())
        .unwrap_or_default())
}

/// c1's page drifted (kubectl-edit), c2's replicas drifted (ops-script): a policy that corrects,
/// ignores replicas and gives up after two corrections, carried by an update.
async fn correct_ignore_and_give_up(
    env: &Env,
    values: &std::path::Path,
    c1_pages: &Api<ConfigMap>,
) -> Result<()> {
    let policies = format!("{DIG}/drift-policies");
    let (code, body) = env
        .request(http::Method::GET, &format!("{policies}/drift"))
        .await?;
    check(code == 404, || format!("no policy yet: {code} {body}"))?;
    let bad = env
        .client
        .send(
            http::Method::POST,
            &policies,
            emcoctl::client::Body::Json(
                json!({"metadata": {"name": "drift"}, "spec": {"correctInterval": "soon"}})
                    .to_string()
                    .into_bytes(),
            ),
        )
        .await
        .map_err(|e| fail(e.to_string()))?;
    let said = String::from_utf8_lossy(&bad.body);
    check(
        bad.status == 400 && said.contains("correctInterval"),
        || format!("a bad policy: {} {said}", bad.status),
    )?;
    // The example policy is taken as it is; the test's own, faster, replaces it.
    let example = emco_e2e::load(
        &[emco_e2e::workspace().join("examples/emcoctl/drift-policy.yaml")],
        values,
    )?;
    env.apply(&example).await?;
    send(
        env,
        http::Method::PUT,
        &format!("{policies}/drift"),
        json!({"metadata": {"name": "drift"},
               "spec": {"action": "correct", "correctInterval": "1s", "maxCorrections": 2,
                        "ignoreFields": ["spec.replicas"]}}),
    )
    .await?;
    let second = env
        .client
        .send(
            http::Method::POST,
            &policies,
            emcoctl::client::Body::Json(
                json!({"metadata": {"name": "other"}})
                    .to_string()
                    .into_bytes(),
            ),
        )
        .await
        .map_err(|e| fail(e.to_string()))?;
    check(second.status == 409, || {
        format!("a second policy: {}", second.status)
    })?;
    let original = page_text(&Api::default_namespaced(env.kube("c3").await?)).await?;
    // The next update carries the policy to the clusters' followers.
    let (code, body) = env
        .request(http::Method::POST, &format!("{DIG}/update"))
        .await?;
    check(code == 202, || format!("update -> {code} {body}"))?;
    let status = env
        .wait_status(DIG, "status=ready", SOON, |s| {
            resource(s, "c1", "ConfigMap", "http-server-page")
                .is_some_and(|r| r.get("drift").is_none() && r["driftCorrections"] == 1)
        })
        .await?;
    check(page_text(c1_pages).await? == original, || {
        "c1's page is applied again".to_owned()
    })?;
    // c2's replicas are the ops script's now: no drift, left at 4.
    check(
        resource(&status, "c2", "Deployment", "http-server")
            .is_some_and(|r| r.get("drift").is_none() && r.get("driftCorrections").is_none()),
        || format!("{status}"),
    )?;
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::default_namespaced(env.kube("c2").await?);
    let replicas = deployments
        .get("http-server")
        .await
        .map_err(|e| fail(format!("reading the deployment: {e}")))?
        .spec
        .replicas;
    check(replicas == Some(4), || format!("replicas {replicas:?}"))?;

    // Another controller keeps changing c3's page back: two corrections, then emco-rs leaves it.
    let c3_pages: Api<ConfigMap> = Api::default_namespaced(env.kube("c3").await?);
    let stop = tokio_util::sync::CancellationToken::new();
    let fighter = {
        let (pages, stop) = (c3_pages.clone(), stop.clone());
        tokio::spawn(async move {
            let params = PatchParams {
                field_manager: Some("fighter".to_owned()),
                ..PatchParams::default()
            };
            let mut n = 0;
            while !stop.is_cancelled() {
                n += 1;
                let text = format!("the fighter's page, round {n}");
                let _ = pages
                    .patch(
                        "http-server-page",
                        &params,
                        &Patch::Merge(json!({"data": {"index.html": text}})),
                    )
                    .await;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    let gave_up = env
        .wait_status(DIG, "status=ready", Duration::from_secs(30), |s| {
            resource(s, "c3", "ConfigMap", "http-server-page")
                .is_some_and(|r| r.get("driftGaveUp").is_some())
        })
        .await;
    stop.cancel();
    let _ = fighter.await;
    let status = gave_up?;
    let page = resource(&status, "c3", "ConfigMap", "http-server-page").cloned();
    check(
        page.as_ref().is_some_and(|r| {
            r["driftCorrections"] == 2
                && r["driftGaveUp"]
                    .as_str()
                    .is_some_and(|w| w.contains("changed back each time by fighter"))
                && r["drift"][0]["manager"] == "fighter"
        }),
        || format!("{page:#?}"),
    )?;

    // Deleted by hand: drift too, and the object is created again.
    let c2_pages: Api<ConfigMap> = Api::default_namespaced(env.kube("c2").await?);
    c2_pages
        .delete("http-server-page", &kube::api::DeleteParams::default())
        .await
        .map_err(|e| fail(format!("the delete: {e}")))?;
    env.wait_status(DIG, "status=ready", SOON, |s| {
        resource(s, "c2", "ConfigMap", "http-server-page").is_some_and(|r| {
            r.get("drift").is_none() && r["driftCorrections"] == 1 && r["readyStatus"] == "Ready"
        })
    })
    .await?;
    check(page_text(&c2_pages).await? == original, || {
        "c2's page is created again".to_owned()
    })?;

    // The metrics count what drifted and what was corrected, by group, cluster and kind.
    let (code, metrics) = env.request(http::Method::GET, "/metrics").await?;
    let metrics = metrics.as_str().unwrap_or_default().to_owned();
    let group = "group=\"demo/http/http-dig\"";
    check(
        code == 200
            && metrics.contains(&format!(
                "emco_rsync_drift_detected_total{{{group},cluster=\"kubesim+c1\",kind=\"ConfigMap\"}}"
            ))
            && metrics.contains(&format!(
                "emco_rsync_drift_corrected_total{{{group},cluster=\"kubesim+c3\",kind=\"ConfigMap\"}} 2\n"
            )),
        || format!("/metrics: {code} {metrics}"),
    )?;
    Ok(())
}
