//! The JSON schemas EMCO's handlers check request bodies against (files in `schemas/`, see its
//! README), compiled once.

use emco_go::schemas;

schemas! {
    /// `metadata.json`: a body of `{metadata}` (projects, composite profiles, apps, app
    /// profiles, cluster providers).
    pub METADATA = "../schemas/metadata.json";
    /// `deployment-group-intent.json`: a deployment intent group.
    pub DEPLOYMENT_INTENT_GROUP = "../schemas/deployment-intent-group.json";
    /// `composite-app.json` (its `spec` checks nothing: the keyword sits outside `properties`).
    pub COMPOSITE_APP = "../schemas/composite-app.json";
    /// `generic-placement-intent.json`.
    pub GENERIC_PLACEMENT_INTENT = "../schemas/generic-placement-intent.json";
    /// `generic-placement-intent-app.json`: an app's placement intent.
    pub APP_INTENT = "../schemas/app-intent.json";
    /// `deployment-intent.json`: a DIG's `/intents` entry.
    pub DEPLOYMENT_INTENT = "../schemas/deployment-intent.json";
    /// `app-dependency.json`.
    pub APP_DEPENDENCY = "../schemas/app-dependency.json";
    /// `migrate.json`.
    pub MIGRATE = "../schemas/migrate.json";
    /// clm's `cluster-label.json`.
    pub CLUSTER_LABEL = "../schemas/clm-cluster-label.json";
    /// dcm's `logical-cloud.json`.
    pub LOGICAL_CLOUD = "../schemas/dcm-logical-cloud.json";
    /// dcm's `cluster-reference.json`.
    pub CLUSTER_REFERENCE = "../schemas/dcm-cluster-reference.json";
    /// dcm's `user-permission.json`.
    pub USER_PERMISSION = "../schemas/dcm-user-permission.json";
    /// dcm's `cluster-quota.json`.
    pub CLUSTER_QUOTA = "../schemas/dcm-cluster-quota.json";
    /// ncm's `virtual-network.json`: a network.
    pub NETWORK = "../schemas/ncm-virtual-network.json";
    /// ncm's `provider-network.json`: a provider network.
    pub PROVIDER_NETWORK = "../schemas/ncm-provider-network.json";
    /// ca-certs' `certificate.json`: a CA certificate intent.
    pub CA_CERT = "../schemas/ca-certs-certificate.json";
    /// ca-certs' `cluster.json`: a cluster group of a CA certificate.
    pub CA_CERT_CLUSTER_GROUP = "../schemas/ca-certs-cluster.json";
    /// ca-certs' `logicalCloud.json`: a logical cloud of a CA certificate.
    pub CA_CERT_LOGICAL_CLOUD = "../schemas/ca-certs-logical-cloud.json";
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
