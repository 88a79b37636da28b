//! gac, the generic action controller: its intent types and what it does to an AppContext.
//!
//! Under a DIG, `generic-k8s-intents/{genericK8sIntent}` holds `resources/{genericResource}`
//! (a new object from a file, or an existing app resource to modify) and each resource holds
//! `customizations/{customization}` (JSON patch or merge patch, ConfigMap/Secret data from files,
//! and on which clusters it applies).
//!
//! What [`apply`] does, for each resource of the intent and each cluster of its app:
//! - a customization applies to a cluster when `clusterSpecific` is not `"true"`, or when the
//!   cluster matches `clusterInfo` (scope `name`: provider and cluster; scope `label`: the
//!   cluster carries `clusterLabel` in that provider) in mode `allow`, or does not match in mode
//!   `deny`;
//! - a new object goes to every cluster where one of its customizations applies (all clusters
//!   when it has none), then those customizations are applied to it;
//! - an existing resource (`name+Kind` from `resourceGVK`) is customized on every cluster that
//!   has it; a resource no cluster has is an error;
//! - customizations run in the order they were created (EMCO's gac reads them from its DB in
//!   insertion order): the ConfigMap/Secret data keys from files (Secret values
//!   base64; `mergePatch: "true"` merges a JSON/YAML file into the key's current JSON/YAML
//!   value with RFC 7386), then the patch (`patchType` `json`: RFC 6902 operations; `merge`:
//!   each element of `patchJson` as an RFC 7386 merge patch).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine as _;
use emco_controller_sdk::handle::parse_resource;
use emco_controller_sdk::intent::{Dig, IntentType};
use emco_controller_sdk::{ActionController, ContextHandle, ControllerContext};
use emco_core::ResourceName;
use emco_core::validate::{check_name, check_one_of, check_required};
use emco_core::{Error, Metadata, Object, Result};
use emco_rest::Wording;
use emco_store::resource::read_blob;
use emco_store::{ResourceKey, ResourceStore};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `DIG/generic-k8s-intents/{genericK8sIntent}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Object)]
// generick8sintent.go: the name, then json-schemas/genericK8sIntent.json.
#[object(
    check = |i: &Self| may_not_be_empty(&[("genericK8sIntent name", &i.metadata.name)]),
    schema = INTENT_SCHEMA,
    checks_before_schema
)]
#[intent(parent = Dig, segment = "generic-k8s-intents", param = "genericK8sIntent",
    wording = Wording::named(Self::PARAM)
        .with_name_mismatch("the intent name is not matching with the name in the request"))]
pub struct GenericK8sIntent {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
}

/// `.../resources/{genericResource}`: `spec{app, newObject, resourceGVK}` plus a file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Object)]
// resource.go `validateResourceData`, then json-schemas/resource.json; module.go's
// `resource not found`.
#[object(check = Self::check, schema = RESOURCE_SCHEMA, checks_before_schema)]
#[intent(parent = GenericK8sIntent, segment = "resources", param = "genericResource",
    wording = Wording::named("resource"))]
pub struct GacResource {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// What the resource is.
    #[serde(default)]
    pub spec: GacResourceSpec,
}

/// The `spec` of a [`GacResource`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GacResourceSpec {
    /// The app whose clusters get or have the resource.
    #[serde(default)]
    pub app: String,
    /// `"true"`: the file is a new object; `"false"`: modify the app's existing resource.
    #[serde(default, alias = "newobject")]
    pub new_object: String,
    /// Which object.
    #[serde(default, rename = "resourceGVK", alias = "resourcegvk")]
    pub resource_gvk: ResourceGvk,
}

/// `resourceGVK{apiVersion, kind, name}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceGvk {
    /// The API version (`apps/v1`).
    #[serde(default, alias = "apiversion")]
    pub api_version: String,
    /// The kind; matched case-insensitively against the context's resources.
    #[serde(default)]
    pub kind: String,
    /// The object name.
    #[serde(default)]
    pub name: String,
}

impl GacResource {
    /// Whether the resource is a new object.
    #[must_use]
    pub fn is_new(&self) -> bool {
        self.spec.new_object == "true"
    }
}

/// `.../customizations/{customization}`: `spec{clusterSpecific, clusterInfo, patchType,
/// patchJson, configMapOptions | secretOptions}` plus files.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Object)]
#[object(check = Self::check)]
#[intent(parent = GacResource, segment = "customizations", param = "customization",
    files = Self::files)]
pub struct Customization {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// What to change, where.
    #[serde(default)]
    pub spec: CustomizationSpec,
}

/// The `spec` of a [`Customization`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CustomizationSpec {
    /// `"true"`: applies only where `clusterInfo` says.
    #[serde(default, alias = "clusterspecific")]
    pub cluster_specific: String,
    /// Which clusters.
    #[serde(default, alias = "clusterinfo")]
    pub cluster_info: ClusterInfo,
    /// `json` or `merge` (empty: no patch).
    #[serde(default, alias = "patchtype", skip_serializing_if = "String::is_empty")]
    pub patch_type: String,
    /// The patch.
    #[serde(default, alias = "patchjson", skip_serializing_if = "Vec::is_empty")]
    pub patch_json: Vec<Value>,
    /// ConfigMap data from files.
    #[serde(
        default,
        alias = "configmapoptions",
        serialize_with = "options_or_empty"
    )]
    pub config_map_options: Option<DataOptions>,
    /// Secret data from files.
    #[serde(default, alias = "secretoptions", serialize_with = "options_or_empty")]
    pub secret_options: Option<DataOptions>,
}

/// gac's `ConfigMapOptions` / `SecretOptions` are structs, which `omitempty` never leaves out:
/// none is written `{}` (src/genericactioncontroller/pkg/module/customization.go).
fn options_or_empty<S: serde::Serializer>(
    options: &Option<DataOptions>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    options.clone().unwrap_or_default().serialize(s)
}

/// `clusterInfo{scope, clusterProvider, cluster, clusterLabel, mode}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterInfo {
    /// `name` or `label`.
    #[serde(default)]
    pub scope: String,
    /// The provider of the clusters.
    #[serde(default, alias = "clusterprovider")]
    pub cluster_provider: String,
    /// The cluster (scope `name`).
    #[serde(default)]
    pub cluster: String,
    /// The label (scope `label`).
    #[serde(default, alias = "clusterlabel")]
    pub cluster_label: String,
    /// `allow` or `deny`.
    #[serde(default)]
    pub mode: String,
}

/// `configMapOptions` / `secretOptions`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DataOptions {
    /// One entry per data key.
    #[serde(
        default,
        alias = "datakeyoptions",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub data_key_options: Vec<DataKeyOption>,
}

/// `{fileName, keyName, mergePatch}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DataKeyOption {
    /// The uploaded file holding the value.
    #[serde(default, alias = "filename", skip_serializing_if = "String::is_empty")]
    pub file_name: String,
    /// The data key it goes to.
    #[serde(default, alias = "keyname", skip_serializing_if = "String::is_empty")]
    pub key_name: String,
    /// `"true"`: merge the file into the key's current value.
    #[serde(
        default,
        alias = "mergepatch",
        skip_serializing_if = "String::is_empty"
    )]
    pub merge_patch: String,
}

emco_go::schemas! {
    INTENT_SCHEMA = "../schemas/gac/generic-k8s-intent.json";
    RESOURCE_SCHEMA = "../schemas/gac/resource.json";
}

/// gac's own checks (api/helper.go `validateData`), each failure a line, before the schema.
fn may_not_be_empty(fields: &[(&str, &str)]) -> Result<()> {
    let missing: Vec<String> = fields
        .iter()
        .filter(|(_, v)| v.is_empty())
        .map(|(what, _)| format!("{what} may not be empty"))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Error::invalid(missing.join("\n")))
    }
}

impl GacResource {
    /// gac's checks of the fields it needs, each missing one a line.
    fn check(&self) -> Result<()> {
        let gvk = &self.spec.resource_gvk;
        may_not_be_empty(&[
            ("resource name", &self.metadata.name),
            ("app", &self.spec.app),
            ("newObject", &self.spec.new_object),
            ("apiVersion", &gvk.api_version),
            ("kind", &gvk.kind),
            ("name", &gvk.name),
        ])
    }
}

impl Customization {
    fn check(&self) -> Result<()> {
        check_name("metadata.name", &self.metadata.name)?;
        let s = &self.spec;
        check_one_of(
            "spec.clusterSpecific",
            &s.cluster_specific,
            &["", "true", "false"],
        )?;
        if s.cluster_specific == "true" {
            let info = &s.cluster_info;
            check_one_of("spec.clusterInfo.scope", &info.scope, &["name", "label"])?;
            check_required("spec.clusterInfo.clusterProvider", &info.cluster_provider)?;
            check_one_of("spec.clusterInfo.mode", &info.mode, &["allow", "deny"])?;
            let (field, value) = if info.scope == "name" {
                ("spec.clusterInfo.cluster", &info.cluster)
            } else {
                ("spec.clusterInfo.clusterLabel", &info.cluster_label)
            };
            check_required(field, value)?;
        }
        check_one_of("spec.patchType", &s.patch_type, &["", "json", "merge"])?;
        if s.patch_type == "json" {
            json_patch_ops(&s.patch_json).map_err(|e| e.with_field("spec.patchJson"))?;
        }
        for (field, options) in [
            ("spec.configMapOptions", &s.config_map_options),
            ("spec.secretOptions", &s.secret_options),
        ] {
            for (i, o) in options
                .iter()
                .flat_map(|o| o.data_key_options.iter())
                .enumerate()
            {
                check_required(
                    &format!("{field}.dataKeyOptions[{i}].fileName"),
                    &o.file_name,
                )?;
                check_required(&format!("{field}.dataKeyOptions[{i}].keyName"), &o.key_name)?;
            }
        }
        Ok(())
    }

    /// The files its ConfigMap / Secret data come from, in order, each once.
    fn files(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        let options = [&self.spec.config_map_options, &self.spec.secret_options];
        for o in options
            .into_iter()
            .flatten()
            .flat_map(|o| &o.data_key_options)
        {
            if !names.contains(&o.file_name) {
                names.push(o.file_name.clone());
            }
        }
        names
    }
}

/// The blob holding a resource's uploaded file (the new object's YAML). A customization's files
/// are blobs named by their file names.
pub const RESOURCE_FILE_BLOB: &str = emco_appcontext::keys::FILE_BLOB;

/// gac's REST routes at EMCO's paths: `generic-k8s-intents` (JSON), and under it `resources`
/// and `customizations` (multipart `metadata` + `file` / `files`, files up to `max_file` bytes).
pub fn routes<S: Clone + Send + Sync + 'static>(
    store: Arc<dyn ResourceStore>,
    max_file: u64,
) -> axum::Router<S> {
    GenericK8sIntent::routes(Arc::clone(&store))
        .merge(GacResource::file_routes::<S>(Arc::clone(&store), max_file))
        .merge(Customization::file_routes::<S>(store, max_file))
}

fn json_patch_ops(ops: &[Value]) -> Result<Vec<json_patch::PatchOperation>> {
    serde_json::from_value(Value::Array(ops.to_vec()))
        .map_err(|e| Error::invalid("not a list of JSON patch operations").with_source(e))
}

/// The uploaded files of a resource or customization, by file name.
pub type Files = BTreeMap<String, Vec<u8>>;

/// A resource of the intent with its file and its customizations (each with its files).
#[derive(Debug, Clone, Default)]
pub struct ResourceInput {
    /// The resource.
    pub resource: GacResource,
    /// Its file (the new object's YAML), when it is a new object.
    pub file: Option<Vec<u8>>,
    /// Its customizations with their files.
    pub customizations: Vec<(Customization, Files)>,
}

/// Which labels each cluster (`provider+cluster`) carries.
pub type ClusterLabels = BTreeMap<String, BTreeSet<String>>;

/// Whether `c` applies to `cluster` (`provider+cluster`).
#[must_use]
pub fn applies_to(c: &Customization, cluster: &str, labels: &ClusterLabels) -> bool {
    if c.spec.cluster_specific != "true" {
        return true;
    }
    let info = &c.spec.cluster_info;
    let (provider, name) = emco_core::ClusterRef::split(cluster).unwrap_or(("", cluster));
    let matched = provider == info.cluster_provider
        && match info.scope.as_str() {
            "name" => name == info.cluster,
            "label" => labels
                .get(cluster)
                .is_some_and(|l| l.contains(&info.cluster_label)),
            _ => false,
        };
    matched == (info.mode != "deny")
}

/// Applies the resources of one gac intent to the context behind `handle` (staged; the runner
/// commits). See the module documentation for the rules.
///
/// # Errors
/// `InvalidArgument` for a bad file or patch; `NotFound` for an existing resource no cluster
/// has, or an app the context does not have; the store's errors.
pub async fn apply(
    handle: &mut ContextHandle,
    inputs: &[ResourceInput],
    labels: &ClusterLabels,
) -> Result<()> {
    let apps = handle.apps().await?;
    for input in inputs {
        let r = &input.resource;
        let app = &r.spec.app;
        let what = format!("gac resource {}", r.metadata.name);
        if !apps.contains(app) {
            return Err(
                Error::not_found(format!("app {app} is not in the AppContext")).within(&what),
            );
        }
        let customizations: Vec<&(Customization, Files)> = input.customizations.iter().collect();
        let new_object = if r.is_new() {
            let file = input
                .file
                .as_deref()
                .ok_or_else(|| Error::invalid("a new object needs its file").within(&what))?;
            let text = std::str::from_utf8(file).map_err(|e| {
                Error::invalid("the file is not UTF-8")
                    .with_source(e)
                    .within(&what)
            })?;
            Some(parse_resource(text).map_err(|e| e.within(&what))?)
        } else {
            None
        };
        let name =
            ResourceName::new(&r.spec.resource_gvk.name, &r.spec.resource_gvk.kind).to_string();
        let mut found = false;
        for cluster in handle.clusters(app).await? {
            let here: Vec<&(Customization, Files)> = customizations
                .iter()
                .copied()
                .filter(|(c, _)| applies_to(c, &cluster, labels))
                .collect();
            let (key, mut object) = match &new_object {
                Some(o) => {
                    if !customizations.is_empty() && here.is_empty() {
                        continue;
                    }
                    (
                        emco_controller_sdk::resource_name(o).map_err(|e| e.within(&what))?,
                        o.clone(),
                    )
                }
                None => match find(handle, app, &cluster, &name).await? {
                    Some(found) => found,
                    None => continue,
                },
            };
            found = true;
            for (c, files) in &here {
                customize(&mut object, c, files)
                    .map_err(|e| e.within(&format!("{what}, customization {}", c.metadata.name)))?;
            }
            handle.put_resource(app, &cluster, &key, object).await?;
        }
        if !found && new_object.is_none() {
            return Err(Error::not_found(format!(
                "app {app} has no resource {name} on any of its clusters"
            ))
            .within(&what));
        }
    }
    Ok(())
}

/// The resource `name` (`name+Kind`, kind compared case-insensitively as EMCO's users write
/// `networkpolicy`) of `app` on `cluster`.
async fn find(
    handle: &ContextHandle,
    app: &str,
    cluster: &str,
    name: &str,
) -> Result<Option<(String, Value)>> {
    for key in handle.resource_names(app, cluster).await? {
        if key.eq_ignore_ascii_case(name)
            && let Some(obj) = handle.resource(app, cluster, &key).await?
        {
            return Ok(Some((key, obj)));
        }
    }
    Ok(None)
}

/// Applies one customization to `object`: data keys from files, then the patch.
///
/// # Errors
/// `InvalidArgument` for a missing file, a file that is not text, or a patch that fails.
pub fn customize(object: &mut Value, c: &Customization, files: &Files) -> Result<()> {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    let data = match kind {
        "ConfigMap" => c.spec.config_map_options.as_ref().map(|o| (o, false)),
        "Secret" => c.spec.secret_options.as_ref().map(|o| (o, true)),
        _ => None,
    };
    if let Some((options, secret)) = data {
        for o in &options.data_key_options {
            set_data_key(object, o, files, secret)?;
        }
    }
    match c.spec.patch_type.as_str() {
        "json" => {
            let ops = json_patch_ops(&c.spec.patch_json)?;
            json_patch::patch(object, &ops)
                .map_err(|e| Error::invalid("the JSON patch does not apply").with_source(e))?;
        }
        "merge" => {
            for p in &c.spec.patch_json {
                json_patch::merge(object, p);
            }
        }
        _ => {}
    }
    Ok(())
}

fn set_data_key(object: &mut Value, o: &DataKeyOption, files: &Files, secret: bool) -> Result<()> {
    let file = files
        .get(&o.file_name)
        .ok_or_else(|| Error::invalid(format!("file {} was not uploaded", o.file_name)))?;
    let b64 = base64::engine::general_purpose::STANDARD;
    let current = object.pointer(&format!("/data/{}", escape(&o.key_name)));
    let value: Vec<u8> = match current.and_then(Value::as_str) {
        Some(old) if o.merge_patch == "true" => {
            let old = if secret {
                b64.decode(old)
                    .map_err(|e| Error::invalid("the Secret value is not base64").with_source(e))?
            } else {
                old.as_bytes().to_vec()
            };
            let mut doc = text_doc(&old, "the current value")?;
            json_patch::merge(&mut doc, &text_doc(file, &o.file_name)?);
            serde_json::to_vec(&doc)
                .map_err(|e| Error::internal("cannot encode a merged value").with_source(e))?
        }
        _ => file.clone(),
    };
    let text = if secret {
        b64.encode(&value)
    } else {
        String::from_utf8(value).map_err(|e| {
            Error::invalid(format!("file {} is not UTF-8", o.file_name)).with_source(e)
        })?
    };
    if !object.get("data").is_some_and(Value::is_object) {
        object["data"] = Value::Object(serde_json::Map::new());
    }
    object["data"][&o.key_name] = Value::String(text);
    Ok(())
}

/// A JSON or YAML document from text (for merge patches of data values).
fn text_doc(bytes: &[u8], what: &str) -> Result<Value> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| Error::invalid(format!("{what} is not UTF-8")).with_source(e))?;
    emco_go::yaml::from_str(text)
        .map_err(|e| Error::invalid(format!("{what} is not JSON or YAML")).with_source(e))
}

/// Reads the gac intent `key` with its resources, their files and customizations.
async fn load(cx: &ControllerContext, key: &ResourceKey) -> Result<Vec<ResourceInput>> {
    let store = Arc::clone(cx.resource_store()?);
    let mut inputs = Vec::new();
    for (rkey, resource) in cx.children::<GacResource>(key).await? {
        let file = if resource.is_new() {
            read_blob(store.as_ref(), &rkey, RESOURCE_FILE_BLOB).await?
        } else {
            None
        };
        let mut customizations = Vec::new();
        for (ckey, c) in cx.children::<Customization>(&rkey).await? {
            let mut files = Files::new();
            let options = [&c.spec.config_map_options, &c.spec.secret_options];
            for o in options
                .into_iter()
                .flatten()
                .flat_map(|o| &o.data_key_options)
            {
                if let Some(data) = read_blob(store.as_ref(), &ckey, &o.file_name).await? {
                    files.insert(o.file_name.clone(), data);
                }
            }
            customizations.push((c, files));
        }
        inputs.push(ResourceInput {
            resource,
            file,
            customizations,
        });
    }
    Ok(inputs)
}

/// The generic action controller: applies the generic-k8s-intent the DIG names for it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Gac;

#[async_trait]
impl ActionController for Gac {
    async fn update(&self, cx: &mut ControllerContext) -> Result<()> {
        let (key, _) = cx.intent::<GenericK8sIntent>().await?;
        let inputs = load(cx, &key).await?;
        let by_label = inputs.iter().flat_map(|i| &i.customizations).any(|(c, _)| {
            c.spec.cluster_specific == "true" && c.spec.cluster_info.scope == "label"
        });
        let mut labels = ClusterLabels::new();
        if by_label {
            let apps: BTreeSet<&str> = inputs
                .iter()
                .map(|i| i.resource.spec.app.as_str())
                .collect();
            for app in apps {
                for cluster in cx.clusters(app).await? {
                    let l = cx.cluster_labels(&cluster).await?;
                    labels.insert(cluster, l);
                }
            }
        }
        apply(cx.handle_mut(), &inputs, &labels).await
    }
}

/// Escapes a JSON pointer segment (RFC 6901).
fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    /// resource.go: gac's own checks, every missing value a line, then resource.json.
    #[test]
    fn resource_bodies_as_gac_refuses_them() {
        use emco_rest::EmcoJson;
        let refused = |body: &str| {
            EmcoJson::<super::GacResource>::parse(body.as_bytes())
                .unwrap_err()
                .error()
                .message()
                .to_owned()
        };
        assert_eq!(
            refused(r#"{"metadata": {"name": "r1"}, "spec": {"app": "a"}}"#),
            "newObject may not be empty\napiVersion may not be empty\nkind may not be empty\n\
             name may not be empty"
        );
        assert_eq!(
            refused(
                r#"{"metadata": {"name": "r1"}, "spec": {"app": "a", "newObject": "yes",
                "resourceGVK": {"apiVersion": "v1", "kind": "ConfigMap", "name": "c"}}}"#
            ),
            "Invalid Input:\nspec.newObject must be one of the following: \"true\", \"false\""
        );
    }

    use std::sync::Arc;

    use emco_appcontext::{AppContext, CompositeAppMeta};
    use emco_core::ErrorKind;
    use emco_store::{AppContextStore, InMemoryAppContextStore};
    use serde_json::json;

    use super::*;
    use emco_core::Validate;

    const DEPLOY: &str =
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n";
    const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  app.json: '{\"a\":1,\"b\":{\"c\":2}}'\n";
    const SECRET: &str = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: sec\n";

    async fn handle() -> ContextHandle {
        let store: Arc<dyn AppContextStore> = Arc::new(InMemoryAppContextStore::new());
        let ctx = AppContext::create(Arc::clone(&store), &CompositeAppMeta::default())
            .await
            .unwrap();
        let mut w = ctx.writer();
        w.add_app("web").unwrap();
        for c in ["p+edge1", "p+core1"] {
            w.add_cluster("web", c, None).unwrap();
            w.add_resource("web", c, "web+Deployment", DEPLOY).unwrap();
            w.add_resource("web", c, "cfg+ConfigMap", CM).unwrap();
            w.add_resource("web", c, "sec+Secret", SECRET).unwrap();
        }
        w.flush().await.unwrap();
        ContextHandle::new(ctx)
    }

    fn labels() -> ClusterLabels {
        BTreeMap::from([("p+edge1".to_owned(), BTreeSet::from(["edge".to_owned()]))])
    }

    fn resource(name: &str, kind: &str, new: bool) -> GacResource {
        GacResource {
            metadata: Metadata::named(format!("r-{name}")),
            spec: GacResourceSpec {
                app: "web".into(),
                new_object: if new { "true" } else { "false" }.into(),
                resource_gvk: ResourceGvk {
                    api_version: "v1".into(),
                    kind: kind.into(),
                    name: name.into(),
                },
            },
        }
    }

    fn customization(name: &str, spec: Value) -> Customization {
        let c: Customization =
            serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap();
        c.validate().unwrap();
        c
    }

    fn existing(
        name: &str,
        kind: &str,
        customizations: Vec<(Customization, Files)>,
    ) -> ResourceInput {
        ResourceInput {
            resource: resource(name, kind, false),
            file: None,
            customizations,
        }
    }

    async fn get(h: &ContextHandle, cluster: &str, name: &str) -> Option<Value> {
        h.resource("web", cluster, name).await.unwrap()
    }

    #[tokio::test]
    async fn json_patch_modifies_an_existing_resource_on_every_cluster() {
        let mut h = handle().await;
        let c = customization(
            "replicas",
            json!({"patchType": "json", "patchJson": [
                {"op": "replace", "path": "/spec/replicas", "value": 3},
                {"op": "add", "path": "/metadata/labels", "value": {"tier": "web"}}]}),
        );
        // The kind as EMCO's users often write it.
        let input = existing("web", "deployment", vec![(c, Files::new())]);
        apply(&mut h, &[input], &labels()).await.unwrap();
        for cluster in ["p+edge1", "p+core1"] {
            let d = get(&h, cluster, "web+Deployment").await.unwrap();
            assert_eq!(d["spec"]["replicas"], 3);
            assert_eq!(d["metadata"]["labels"], json!({"tier": "web"}));
        }
    }

    #[tokio::test]
    async fn merge_patch_and_a_failing_json_patch() {
        let mut h = handle().await;
        let c = customization(
            "m",
            json!({"patchType": "merge", "patchJson": [
                {"spec": {"replicas": 5, "paused": true}}, {"spec": {"paused": null}}]}),
        );
        apply(
            &mut h,
            &[existing("web", "Deployment", vec![(c, Files::new())])],
            &labels(),
        )
        .await
        .unwrap();
        let d = get(&h, "p+core1", "web+Deployment").await.unwrap();
        assert_eq!(d["spec"], json!({"replicas": 5}));

        let bad = customization(
            "bad",
            json!({"patchType": "json", "patchJson": [{"op": "remove", "path": "/spec/nothing"}]}),
        );
        let err = apply(
            &mut h,
            &[existing("web", "Deployment", vec![(bad, Files::new())])],
            &labels(),
        )
        .await
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.to_string().contains("customization bad"), "{err}");
    }

    #[tokio::test]
    async fn new_objects_go_to_the_allowed_clusters_only() {
        let mut h = handle().await;
        let netpol = b"apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: np\nspec: {}\n";
        let edge_only = customization(
            "edge",
            json!({"clusterSpecific": "true", "clusterInfo": {"scope": "label",
                "clusterProvider": "p", "clusterLabel": "edge", "mode": "allow"},
                "patchType": "merge", "patchJson": [{"metadata": {"labels": {"site": "edge"}}}]}),
        );
        let input = ResourceInput {
            resource: resource("np", "NetworkPolicy", true),
            file: Some(netpol.to_vec()),
            customizations: vec![(edge_only, Files::new())],
        };
        apply(&mut h, &[input], &labels()).await.unwrap();
        let np = get(&h, "p+edge1", "np+NetworkPolicy").await.unwrap();
        assert_eq!(np["metadata"]["labels"], json!({"site": "edge"}));
        assert!(get(&h, "p+core1", "np+NetworkPolicy").await.is_none());
        assert!(
            h.resource_order("web", "p+edge1")
                .await
                .unwrap()
                .unwrap()
                .contains(&"np+NetworkPolicy".to_owned())
        );

        // Without customizations a new object goes everywhere.
        let svc = b"apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n";
        let input = ResourceInput {
            resource: resource("s", "Service", true),
            file: Some(svc.to_vec()),
            customizations: Vec::new(),
        };
        apply(&mut h, &[input], &labels()).await.unwrap();
        assert!(get(&h, "p+core1", "s+Service").await.is_some());
        assert!(get(&h, "p+edge1", "s+Service").await.is_some());
    }

    #[tokio::test]
    async fn scope_by_name_and_deny_mode() {
        let mut h = handle().await;
        let not_edge1 = customization(
            "deny-edge1",
            json!({"clusterSpecific": "true", "clusterInfo": {"scope": "name",
                "clusterProvider": "p", "cluster": "edge1", "mode": "deny"},
                "patchType": "merge", "patchJson": [{"spec": {"replicas": 9}}]}),
        );
        apply(
            &mut h,
            &[existing(
                "web",
                "Deployment",
                vec![(not_edge1, Files::new())],
            )],
            &labels(),
        )
        .await
        .unwrap();
        assert_eq!(
            get(&h, "p+edge1", "web+Deployment").await.unwrap()["spec"]["replicas"],
            1
        );
        assert_eq!(
            get(&h, "p+core1", "web+Deployment").await.unwrap()["spec"]["replicas"],
            9
        );

        let c = |scope: &str, mode: &str| {
            customization(
                "c",
                json!({"clusterSpecific": "true", "clusterInfo": {"scope": scope,
                    "clusterProvider": "p", "cluster": "core1", "clusterLabel": "edge", "mode": mode}}),
            )
        };
        let l = labels();
        assert!(applies_to(&c("label", "allow"), "p+edge1", &l));
        assert!(!applies_to(&c("label", "allow"), "p+core1", &l));
        assert!(applies_to(&c("label", "deny"), "p+core1", &l));
        assert!(applies_to(&c("name", "allow"), "p+core1", &l));
        assert!(!applies_to(&c("name", "allow"), "q+core1", &l));
        assert!(!applies_to(&c("name", "deny"), "p+core1", &l));
    }

    #[tokio::test]
    async fn configmap_and_secret_data_from_files() {
        let mut h = handle().await;
        let files = Files::from([
            ("app.json".to_owned(), br#"{"b":{"c":null,"d":4}}"#.to_vec()),
            ("motd.txt".to_owned(), b"hello".to_vec()),
        ]);
        let cm = customization(
            "cm",
            json!({"configMapOptions": {"dataKeyOptions": [
                {"fileName": "app.json", "keyName": "app.json", "mergePatch": "true"},
                {"fileName": "motd.txt", "keyName": "motd"}]}}),
        );
        let secret = customization(
            "sec",
            json!({"secretOptions": {"dataKeyOptions": [
                {"fileName": "motd.txt", "keyName": "motd"}]}}),
        );
        apply(
            &mut h,
            &[
                existing("cfg", "ConfigMap", vec![(cm, files.clone())]),
                existing("sec", "Secret", vec![(secret, files)]),
            ],
            &labels(),
        )
        .await
        .unwrap();
        let cfg = get(&h, "p+edge1", "cfg+ConfigMap").await.unwrap();
        let merged: Value =
            serde_json::from_str(cfg["data"]["app.json"].as_str().unwrap()).unwrap();
        assert_eq!(merged, json!({"a": 1, "b": {"d": 4}}));
        assert_eq!(cfg["data"]["motd"], "hello");
        let sec = get(&h, "p+core1", "sec+Secret").await.unwrap();
        assert_eq!(sec["data"]["motd"], "aGVsbG8=");

        let missing = customization(
            "m",
            json!({"configMapOptions": {"dataKeyOptions": [{"fileName": "nope", "keyName": "k"}]}}),
        );
        let err = apply(
            &mut h,
            &[existing("cfg", "ConfigMap", vec![(missing, Files::new())])],
            &labels(),
        )
        .await
        .unwrap_err();
        assert!(
            err.to_string().contains("file nope was not uploaded"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn unknown_resources_and_apps_are_refused() {
        let mut h = handle().await;
        let err = apply(
            &mut h,
            &[existing("nope", "Deployment", Vec::new())],
            &labels(),
        )
        .await
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound);
        let mut other = existing("web", "Deployment", Vec::new());
        other.resource.spec.app = "db".into();
        let err = apply(&mut h, &[other], &labels()).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound);
        let mut no_file = existing("x", "Service", Vec::new());
        no_file.resource.spec.new_object = "true".into();
        let err = apply(&mut h, &[no_file], &labels()).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    }

    #[test]
    fn validation_follows_emco() {
        let bad = |spec: Value| {
            serde_json::from_value::<Customization>(
                json!({"metadata": {"name": "c"}, "spec": spec}),
            )
            .unwrap()
            .validate()
            .unwrap_err()
        };
        assert_eq!(
            bad(json!({"patchType": "strategic"})).field(),
            Some("spec.patchType")
        );
        assert_eq!(
            bad(
                json!({"clusterSpecific": "true", "clusterInfo": {"scope": "label",
                "clusterProvider": "p", "mode": "allow"}})
            )
            .field(),
            Some("spec.clusterInfo.clusterLabel")
        );
        assert_eq!(
            bad(json!({"patchType": "json", "patchJson": [{"op": "jump"}]})).field(),
            Some("spec.patchJson")
        );
        // EMCO's lower-case spellings are accepted.
        let c: Customization = serde_json::from_value(json!({"metadata": {"name": "c"},
            "spec": {"clusterspecific": "true", "clusterinfo": {"scope": "name",
            "clusterprovider": "p", "cluster": "c1", "mode": "deny"}}}))
        .unwrap();
        c.validate().unwrap();
        let r = resource("web", "Deployment", false);
        r.validate().unwrap();
        let mut r2 = r.clone();
        r2.spec.new_object = "maybe".into();
        // Not empty, so gac's own checks pass; its schema refuses the value.
        r2.validate().unwrap();
        let doc = serde_json::to_value(&r2).unwrap();
        assert_eq!(
            GacResource::schema().unwrap().invalid_input(&doc).unwrap(),
            "Invalid Input:\nspec.newObject must be one of the following: \"true\", \"false\""
        );
    }
}
