//! The JSON schemas EMCO's handlers check request bodies against (files in `schemas/`, see its
//! README), compiled once.

use std::sync::LazyLock;

use emco_go::jsonschema::Schema;

macro_rules! schemas {
    ($($(#[$doc:meta])* $name:ident = $file:literal;)+) => {$(
        $(#[$doc])*
        pub static $name: LazyLock<Schema> = LazyLock::new(|| {
            Schema::parse(include_str!(concat!("../schemas/", $file)))
                .expect(concat!("schemas/", $file, " compiles"))
        });
    )+};
}

schemas! {
    /// `metadata.json`: a body of `{metadata}` (projects, composite profiles, apps, app
    /// profiles, cluster providers).
    METADATA = "metadata.json";
    /// `deployment-group-intent.json`: a deployment intent group.
    DEPLOYMENT_INTENT_GROUP = "deployment-intent-group.json";
    /// `composite-app.json` (its `spec` checks nothing: the keyword sits outside `properties`).
    COMPOSITE_APP = "composite-app.json";
    /// `generic-placement-intent.json`.
    GENERIC_PLACEMENT_INTENT = "generic-placement-intent.json";
    /// `generic-placement-intent-app.json`: an app's placement intent.
    APP_INTENT = "app-intent.json";
    /// `deployment-intent.json`: a DIG's `/intents` entry.
    DEPLOYMENT_INTENT = "deployment-intent.json";
    /// `app-dependency.json`.
    APP_DEPENDENCY = "app-dependency.json";
    /// `migrate.json`.
    MIGRATE = "migrate.json";
    /// clm's `cluster-label.json`.
    CLUSTER_LABEL = "clm-cluster-label.json";
    /// dcm's `logical-cloud.json`.
    LOGICAL_CLOUD = "dcm-logical-cloud.json";
    /// dcm's `cluster-reference.json`.
    CLUSTER_REFERENCE = "dcm-cluster-reference.json";
    /// dcm's `user-permission.json`.
    USER_PERMISSION = "dcm-user-permission.json";
    /// dcm's `cluster-quota.json`.
    CLUSTER_QUOTA = "dcm-cluster-quota.json";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_compiles_and_wants_an_object() {
        for s in [
            &METADATA,
            &DEPLOYMENT_INTENT_GROUP,
            &LOGICAL_CLOUD,
            &CLUSTER_REFERENCE,
            &USER_PERMISSION,
            &CLUSTER_QUOTA,
            &COMPOSITE_APP,
            &GENERIC_PLACEMENT_INTENT,
            &APP_INTENT,
            &DEPLOYMENT_INTENT,
            &APP_DEPENDENCY,
            &MIGRATE,
            &CLUSTER_LABEL,
        ] {
            // Each compiles and wants an object.
            assert_eq!(
                s.validate(&serde_json::json!([])),
                ["Invalid type. Expected: object, given: array"]
            );
        }
    }
}
