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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_compiles() {
        for s in [&METADATA, &DEPLOYMENT_INTENT_GROUP] {
            assert!(s.validate(&serde_json::json!({})).is_empty());
        }
    }
}
