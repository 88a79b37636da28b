//! The preview (what-if) of the main job's example, one kind of change at a time: an override
//! value before the first instantiate, a profile, a cluster label that placement selects by, and
//! a gac intent, each answering exactly the placement and the diff expected, over REST and
//! `emcoctl diff`, while the AppContext store and every cluster stay exactly as they were.

use std::path::Path;

use emco_core::preview::{Change, Preview};
use emco_core::{Error, Result};
use emco_e2e::{DEADLINE, Env, Labelled, Phases, tgz};
use emcoctl::client::Body;
use http::Method;
use serde_json::{Value, json};

pub(crate) const DIG: &str =
    "/v2/projects/demo/composite-apps/http/v1/deployment-intent-groups/http-dig";
const CLUSTERS: [&str; 3] = ["c1", "c2", "c3"];

pub(crate) fn fail(what: impl std::fmt::Display) -> Error {
    Error::internal(what.to_string())
}

pub(crate) fn check(ok: bool, what: impl FnOnce() -> String) -> Result<()> {
    if ok { Ok(()) } else { Err(fail(what())) }
}

/// What must not move while previewing: the contexts of the AppContext store (no new one; the
/// engine may still write the deployed one's status, so revisions are no measure) and every
/// labelled object of every cluster with its resourceVersion.
async fn untouched(env: &Env) -> Result<(Vec<String>, Vec<Vec<Labelled>>)> {
    let keys = env
        .orch
        .contexts()
        .list_all("/context/", true)
        .await?
        .into_iter()
        .map(|kv| kv.key)
        .filter(|k| k.matches('/').count() == 3)
        .collect();
    let mut objects = Vec::new();
    for c in CLUSTERS {
        objects.push(env.labelled_objects(c).await?);
    }
    Ok((keys, objects))
}

/// `GET DIG/preview?query`, checking that it wrote nothing.
async fn preview(env: &Env, query: &str) -> Result<Preview> {
    let before = untouched(env).await?;
    let p = ask_preview(env, query).await?;
    check(untouched(env).await? == before, || {
        "the preview changed the AppContext store or a cluster".to_owned()
    })?;
    Ok(p)
}

/// `GET DIG/preview?query`.
async fn ask_preview(env: &Env, query: &str) -> Result<Preview> {
    let (code, body) = env
        .request(Method::GET, &format!("{DIG}/preview?{query}"))
        .await?;
    check(code == 200, || format!("preview answered {code}: {body}"))?;
    serde_json::from_value(body).map_err(|e| fail(format!("the preview does not decode: {e}")))
}

/// `emcoctl diff` on the example's instantiate file: its exit code and output.
async fn emcoctl_diff(env: &Env, values: &Path) -> (i32, String) {
    emcoctl_diff_with(env, values, &[]).await
}

/// [`emcoctl_diff`] with more arguments.
async fn emcoctl_diff_with(env: &Env, values: &Path, more: &[&str]) -> (i32, String) {
    let file = emco_e2e::workspace().join("examples/emcoctl/instantiate.yaml");
    let mut args = vec![
        "emcoctl".to_owned(),
        "--server".to_owned(),
        env.url.clone(),
        "diff".to_owned(),
        "-f".to_owned(),
        file.display().to_string(),
        "-v".to_owned(),
        values.display().to_string(),
    ];
    args.extend(more.iter().map(|a| (*a).to_owned()));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = emcoctl::cli::run(args, &mut out, &mut err).await;
    out.extend(err);
    (code, String::from_utf8_lossy(&out).into_owned())
}

pub(crate) async fn send(env: &Env, method: Method, path: &str, body: Value) -> Result<()> {
    let r = env
        .client
        .send(
            method.clone(),
            path,
            Body::Json(body.to_string().into_bytes()),
        )
        .await
        .map_err(|e| fail(e.to_string()))?;
    check(r.status < 300, || {
        format!(
            "{method} {path} -> {} {}",
            r.status,
            String::from_utf8_lossy(&r.body)
        )
    })
}

/// The one group of changes of `p`, every cluster in it, with the objects of `app` as
/// `(resource, change)`.
fn only_group<'p>(
    p: &'p Preview,
    clusters: &[&str],
) -> Result<&'p emco_core::preview::ChangeGroup> {
    let groups = p.changes.as_deref().unwrap_or_default();
    let want: Vec<String> = clusters.iter().map(|c| format!("kubesim+{c}")).collect();
    check(groups.len() == 1 && groups[0].clusters == want, || {
        format!("wanted one group of {want:?}, got {groups:#?}")
    })?;
    Ok(&groups[0])
}

fn objects(group: &emco_core::preview::ChangeGroup) -> Vec<(&str, &str, Change)> {
    group
        .objects
        .iter()
        .map(|o| (o.app.as_str(), o.resource.as_str(), o.change))
        .collect()
}

/// The profile of the example with `values` as its override values, packed at `out`.
fn profile_with(env: &Env, values: &str, out: &Path) -> Result<()> {
    let dir = env.dir().join("profile-changed");
    emco_e2e::copy_dir(&examples_root().join("profiles/default"), &dir)?;
    std::fs::write(dir.join("override_values.yaml"), values).map_err(fail)?;
    tgz(&dir, ".", out)
}

fn examples_root() -> std::path::PathBuf {
    emco_e2e::workspace().join("examples")
}

/// The main job's example onboarded on c1..c3 with its charts packed under `dir`, its logical
/// cloud instantiated and its group approved: the documents and the values file.
pub(crate) async fn deploy_example(env: &Env, dir: &str) -> Result<(Phases, std::path::PathBuf)> {
    let packages = env.dir().join(dir);
    std::fs::create_dir_all(&packages).map_err(fail)?;
    for app in ["http-server", "http-client"] {
        tgz(
            &examples_root().join("charts").join(app),
            app,
            &packages.join(format!("{app}.tgz")),
        )?;
    }
    let (phases, values) = env.example(&packages, &CLUSTERS).await?;
    // Without nodes nothing becomes Ready, so on real clusters the client cannot wait for the
    // server (the dependency): it is left out there.
    let onboard = if env.is_real() {
        emco_e2e::without(
            phases.onboard.clone(),
            &["apps/http-client/dependency"],
            &[],
        )
    } else {
        phases.onboard.clone()
    };
    env.apply(&onboard).await?;
    env.apply(&phases.clouds).await?;
    for lc in phases.cloud_paths() {
        env.wait_cloud(&lc, "Instantiated").await?;
    }
    send(env, Method::POST, &format!("{DIG}/approve"), json!({})).await?;
    Ok((phases, values))
}

pub(crate) async fn preview_of_each_change(env: &Env) -> Result<()> {
    let (phases, values) = deploy_example(env, "preview-packages").await?;
    let packages = env.dir().join("preview-packages");

    // 1. Before the first instantiate: everything is added; the group's override value is in
    // the page the server serves.
    let p = preview(env, "").await?;
    check(
        p.operation == "instantiate" && p.summary.clusters == 3,
        || format!("{:?}", p.summary),
    )?;
    let group = only_group(&p, &CLUSTERS)?;
    check(
        group.objects.iter().all(|o| o.change == Change::Added),
        || format!("{group:#?}"),
    )?;
    let page = group
        .objects
        .iter()
        .find(|o| o.resource.ends_with("+ConfigMap") && o.app == "http-server")
        .ok_or_else(|| fail(format!("no ConfigMap of http-server in {group:#?}")))?;
    check(
        page.diff
            .contains("+    Hello from the http-dig deployment intent group (r1)"),
        || page.diff.clone(),
    )?;
    for app in &p.placement {
        let reasons = &app.picked_by[0].reasons;
        check(
            app.clusters == 3
                && app.picked_by.len() == 1
                && reasons.len() == 1
                && reasons[0].path == "spec.intent.allOf[0]"
                && reasons[0].cluster_label.as_deref() == Some("edge"),
            || format!("{app:#?}"),
        )?;
    }
    let (code, out) = emcoctl_diff(env, &values).await;
    check(
        code == 1 && out.contains("instantiate: 3 of 3 clusters change"),
        || format!("emcoctl diff exited {code}: {out}"),
    )?;

    env.apply(&phases.digs).await?;
    env.wait_deployed(DIG, DEADLINE).await?;
    let (code, out) = emcoctl_diff(env, &values).await;
    check(
        code == 0 && out.contains("update from revision 1: 0 of 3 clusters"),
        || format!("emcoctl diff exited {code}: {out}"),
    )?;

    // 2. A profile that changes http-server's replicas: its Deployment changes, everywhere.
    let ca = emco_orchestrator::keys::composite_app("demo", "http", "v1");
    let cp = ca.child(emco_orchestrator::keys::COMPOSITE_PROFILE, "default");
    let put_profile = async |file: &Path| {
        let profile: emco_core::model::AppProfile = serde_json::from_value(json!({
            "metadata": {"name": "http-server-profile"}, "spec": {"app": "http-server"}}))
        .map_err(fail)?;
        env.orch
            .onboarding()
            .put_app_profile(&cp, "http-server-profile", &profile, file)
            .await
            .map(drop)
    };
    let three = packages.join("profile-three.tgz");
    profile_with(env, "replicaCount: 3\n", &three)?;
    put_profile(&three).await?;
    let p = preview(env, "").await?;
    let group = only_group(&p, &CLUSTERS)?;
    check(
        objects(group) == [("http-server", "http-server+Deployment", Change::Changed)],
        || format!("{group:#?}"),
    )?;
    let diff = &group.objects[0].diff;
    check(
        diff.contains("-  replicas: 1\n") && diff.contains("+  replicas: 3\n"),
        || diff.clone(),
    )?;
    check(
        diff.lines().filter(|l| l.starts_with(['+', '-'])).count() == 4,
        || format!("only the replicas change, under the headers: {diff}"),
    )?;

    // 2b. A port no API server takes: the diff alone looks fine, the clusters' dry run says no
    // (on kubesim as on the real API servers); a cluster that does not answer is named as
    // unchecked, not taken for a yes.
    let bad = packages.join("profile-bad-port.tgz");
    profile_with(env, "service:\n  type: ClusterIP\n  port: 70000\n", &bad)?;
    put_profile(&bad).await?;
    let p = preview(env, "dryRun=true").await?;
    let dry = p.dry_run.ok_or_else(|| fail("no dry run in the answer"))?;
    let want = "spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive";
    check(
        dry.clusters == 3
            && dry.unchecked.is_empty()
            && dry.refusals.len() == 1
            && dry.refusals[0].resource == "http-server+Service"
            && dry.refusals[0].count == 3
            && dry.refusals[0].reason.contains(want),
        || format!("{dry:#?}"),
    )?;
    let (code, out) = emcoctl_diff_with(env, &values, &["--dry-run"]).await;
    check(
        code == 3 && out.contains("refused: http-server http-server+Service on kubesim+c1"),
        || format!("emcoctl diff --dry-run exited {code}: {out}"),
    )?;
    if let Some(fleet) = env.clusters.fleet() {
        fleet.set_fault("c2", kubesim::Fault::down())?;
        let p = ask_preview(env, "dryRun=true").await;
        fleet.set_fault("c2", kubesim::Fault::default())?;
        let dry = p?.dry_run.ok_or_else(|| fail("no dry run in the answer"))?;
        check(
            dry.unchecked.len() == 1
                && dry.unchecked[0].clusters == ["kubesim+c2"]
                && dry.refusals[0].clusters == ["kubesim+c1", "kubesim+c3"],
            || format!("{dry:#?}"),
        )?;
    }
    put_profile(&packages.join("profile.tgz")).await?;
    let p = preview(env, "dryRun=true").await?;
    check(
        !p.changes_anything()
            && p.dry_run
                .as_ref()
                .is_some_and(|d| d.clusters == 0 && d.passed()),
        || format!("{p:#?}"),
    )?;

    // 3. c3 loses the label placement selects by: both apps would leave it.
    let label = "/v2/cluster-providers/kubesim/clusters/c3/labels";
    let (code, body) = env
        .request(Method::DELETE, &format!("{label}/edge"))
        .await?;
    check(code == 204, || format!("label delete -> {code} {body}"))?;
    let p = preview(env, "").await?;
    let group = only_group(&p, &["c3"])?;
    check(
        group.objects.iter().all(|o| o.change == Change::Removed) && p.summary.removed > 0,
        || format!("{group:#?}"),
    )?;
    for app in &p.placement {
        check(app.loses == ["kubesim+c3"] && app.clusters == 2, || {
            format!("{app:#?}")
        })?;
    }
    // The per-cluster detail, paged: c3 has no app left, c2 keeps both for the label.
    let page = preview(env, "detail=clusters&offset=1&limit=2").await?;
    let page = page.clusters.ok_or_else(|| fail("no page"))?;
    let names: Vec<&str> = page.items.iter().map(|c| c.cluster.as_str()).collect();
    check(
        page.total == 3 && names == ["kubesim+c2", "kubesim+c3"],
        || format!("{page:#?}"),
    )?;
    check(
        page.items[0].apps.len() == 2 && page.items[1].apps.is_empty(),
        || format!("{page:#?}"),
    )?;
    send(env, Method::POST, label, json!({"clusterLabel": "edge"})).await?;
    let p = preview(env, "").await?;
    check(!p.changes_anything(), || format!("{:?}", p.summary))?;

    // 4. A gac intent adding a ConfigMap for http-server on every cluster.
    send(
        env,
        Method::POST,
        "/v2/controllers",
        json!({"metadata": {"name": "gac"},
               "spec": {"host": "gac.invalid", "port": 9033, "type": "action", "priority": 1}}),
    )
    .await?;
    send(
        env,
        Method::POST,
        &format!("{DIG}/generic-k8s-intents"),
        json!({"metadata": {"name": "extra"}}),
    )
    .await?;
    let greeting = env.dir().join("greeting.yaml");
    std::fs::write(
        &greeting,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: greeting\ndata:\n  hello: world\n",
    )
    .map_err(fail)?;
    let form = Body::Multipart {
        metadata: json!({"metadata": {"name": "greeting"},
               "spec": {"app": "http-server", "newObject": "true",
                        "resourceGVK": {"apiVersion": "v1", "kind": "ConfigMap", "name": "greeting"}}})
        .to_string()
        .into_bytes(),
        files: vec![emcoctl::client::FilePart {
            field: "file".to_owned(),
            name: "greeting.yaml".to_owned(),
            path: greeting,
        }],
    };
    let r = env
        .client
        .send(
            Method::POST,
            &format!("{DIG}/generic-k8s-intents/extra/resources"),
            form,
        )
        .await
        .map_err(|e| fail(e.to_string()))?;
    check(r.status == 201, || {
        format!(
            "gac resource -> {} {}",
            r.status,
            String::from_utf8_lossy(&r.body)
        )
    })?;
    send(
        env,
        Method::POST,
        &format!("{DIG}/intents"),
        json!({"metadata": {"name": "with-gac"}, "spec": {"intent": {"gac": "extra"}}}),
    )
    .await?;
    let p = preview(env, "").await?;
    let group = only_group(&p, &CLUSTERS)?;
    check(
        objects(group) == [("http-server", "greeting+ConfigMap", Change::Added)],
        || format!("{group:#?}"),
    )?;
    check(group.objects[0].diff.contains("+  hello: world\n"), || {
        group.objects[0].diff.clone()
    })?;
    let (code, out) = emcoctl_diff(env, &values).await;
    check(
        code == 1 && out.contains("# 3 clusters: kubesim+c1, kubesim+c2, kubesim+c3"),
        || format!("emcoctl diff exited {code}: {out}"),
    )?;
    send(
        env,
        Method::DELETE,
        &format!("{DIG}/intents/with-gac"),
        json!({}),
    )
    .await?;
    env.remove(&Phases {
        onboard: Vec::new(),
        ..phases
    })
    .await
}
