//! EMCO's texts and codes for the objects of the orchestrator, clm and dcm, as their handlers
//! answer (see [`Wording`] for how EMCO arrives at them). Each function names the Go files the
//! wording is read from; where a text is another type's, that is EMCO's substring match.

use emco_appcontext::collection::{EmptyList, PutStatus, Wording};

// ---- orchestrator: src/orchestrator/api/apierrors.go, src/orchestrator/api/*handler.go ----

/// `projecthandler.go`: DELETE looks the project up first; PUT answers 200.
pub(crate) fn project() -> Wording {
    Wording::new("Project not found", "Project already exists")
        .with_delete_missing("Project not found")
        .with_put(PutStatus::Ok)
}

/// `composite_app_handler.go`: `CompositeApp not found` matches the `App not found` entry first.
pub(crate) fn composite_app() -> Wording {
    Wording::new("App not found", "App already exists")
        .with_put(PutStatus::Created)
        .with_list_checks(&[(0, "Project not found")])
}

/// `apphandler.go`: the list does not look its parent up.
pub(crate) fn app() -> Wording {
    Wording::new("App not found", "App already exists")
        .with_put(PutStatus::Created)
        .with_list_checks(&[])
}

/// `app_dependency_handler.go`: DELETE looks the dependency up first; the list is made with
/// `make`.
pub(crate) fn app_dependency() -> Wording {
    Wording::new("AppDependency not found", "AppDependency already exists")
        .with_delete_missing("AppDependency not found")
        .with_put(PutStatus::Created)
        .with_empty_list(EmptyList::Array)
        .with_list_checks(&[])
}

/// `composite_profilehandler.go`.
pub(crate) fn composite_profile() -> Wording {
    Wording::new(
        "CompositeProfile not found",
        "CompositeProfile already exists",
    )
    .with_put(PutStatus::Created)
    .with_list_checks(&[])
}

/// `app_profilehandler.go`: the composite profile is looked up before the create.
pub(crate) fn app_profile() -> Wording {
    Wording::new("AppProfile not found", "AppProfile already exists")
        .with_create_parent_missing("CompositeProfile not found")
        .with_put(PutStatus::Created)
        .with_list_checks(&[])
}

/// `deployment_intent_groups_handler.go`: `DeploymentIntentGroup already exists` matches the
/// `Intent already exists` entry first; the list looks up the project, then the composite app.
pub(crate) fn deployment_intent_group() -> Wording {
    Wording::new("DeploymentIntentGroup not found", "Intent already exists")
        .with_list_checks(&[(1, "Project not found"), (0, "App not found")])
}

/// `generic_placement_intent_handler.go`: the list looks up the project and the composite app,
/// not the group.
pub(crate) fn generic_placement_intent() -> Wording {
    Wording::new("Intent not found", "Intent already exists")
        .with_list_checks(&[(2, "Project not found"), (1, "App not found")])
}

/// Rollout policies: ours (EMCO has none); worded as its intents are.
pub(crate) fn rollout_policy() -> Wording {
    Wording::new("Rollout policy not found", "Rollout policy already exists")
        .with_put(PutStatus::Created)
        .with_list_checks(&[])
}

/// Drift policies (ours), worded as rollout policies.
pub(crate) fn drift_policy() -> Wording {
    Wording::new("Drift policy not found", "Drift policy already exists")
        .with_put(PutStatus::Created)
        .with_list_checks(&[])
}

/// `app_intent_handler.go`.
pub(crate) fn app_intent() -> Wording {
    Wording::new("Intent not found", "Intent already exists").with_list_checks(&[])
}

/// `add_intents_handler.go`.
pub(crate) fn dig_intent() -> Wording {
    Wording::new("Intent not found", "Intent already exists").with_list_checks(&[])
}

/// `controllerhandler.go`: PUT answers 201.
pub(crate) fn controller() -> Wording {
    Wording::new("Controller not found", "Controller already exists").with_put(PutStatus::Created)
}

// ---- clm: src/clm/api/apierrors.go, src/clm/api/clusterhandler.go, controllerhandler.go ----

/// Cluster providers: PUT answers 201; lists are made with `make`.
pub(crate) fn cluster_provider() -> Wording {
    Wording::new(
        "Cluster provider not found",
        "ClusterProvider already exists",
    )
    .with_put(PutStatus::Created)
    .with_empty_list(EmptyList::Array)
}

/// Clusters.
pub(crate) fn cluster() -> Wording {
    Wording::new("Cluster not found", "Cluster already exists")
        .with_put(PutStatus::Created)
        .with_empty_list(EmptyList::Array)
        .with_list_checks(&[(0, "Cluster provider not found")])
}

/// Cluster labels.
pub(crate) fn cluster_label() -> Wording {
    Wording::new("Cluster label not found", "Cluster Label already exists")
        .with_name_mismatch("Mismatched label name in PUT request")
        .with_put(PutStatus::Created)
        .with_empty_list(EmptyList::Array)
        .with_list_checks(&[(0, "Cluster not found")])
}

/// Cluster kv-pairs.
pub(crate) fn cluster_kv_pair() -> Wording {
    Wording::new(
        "Cluster key value pair not found",
        "Cluster KV Pair already exists",
    )
    .with_name_mismatch("Mismatched Key Value pair name in PUT request")
    .with_put(PutStatus::Created)
    .with_empty_list(EmptyList::Array)
    .with_list_checks(&[(0, "Cluster not found")])
}

/// Cluster sync objects (EMCO's table has no entries for them: its 500s are kept as 404/409).
pub(crate) fn cluster_sync_object() -> Wording {
    Wording::new(
        "Cluster sync object not found",
        "Cluster Sync Objects already exists",
    )
    .with_name_mismatch("Mismatched cluster sync object name in PUT request")
    .with_put(PutStatus::Created)
    .with_empty_list(EmptyList::Array)
    .with_list_checks(&[(0, "Cluster provider not found")])
}

/// clm's controller registry: PUT answers 200.
pub(crate) fn clm_controller() -> Wording {
    Wording::new("ClmController not found", "ClmController already exists").with_put(PutStatus::Ok)
}

// ---- dcm: src/dcm/api/apierrors.go, src/dcm/api/*Handler.go ----

/// Logical clouds: the create looks the project up first; a PUT (`logicalCloudHandler.go
/// putHandler`: it only replaces) and a DELETE (`logicalcloud.go Delete`) the logical cloud.
pub(crate) fn logical_cloud() -> Wording {
    Wording::new("Logical Cloud not found", "Logical Cloud already exists")
        .with_create_parent_missing("Project not found")
        .with_put_missing("Logical Cloud not found")
        .with_delete_missing("Logical Cloud not found")
        .with_name_conflict("Logical Cloud name mismatch")
        .with_put(PutStatus::Created)
        .with_list_checks(&[])
}

/// Cluster references: every handler looks the logical cloud up first; an empty list is a 400.
pub(crate) fn cluster_reference() -> Wording {
    Wording::new(
        "Cluster reference not found",
        "Cluster reference already exists",
    )
    .with_name_conflict("Cluster Reference mismatch")
    .with_create_parent_missing("Logical Cloud not found")
    .with_put(PutStatus::Ok)
    .with_list_checks(&[(0, "Logical Cloud not found")])
    .with_empty_list(EmptyList::Refused("No Cluster References associated"))
}

/// User permissions.
pub(crate) fn user_permission() -> Wording {
    Wording::new(
        "User Permission not found",
        "User Permission already exists",
    )
    .with_name_conflict("Permission name mismatch")
    .with_put(PutStatus::Ok)
    .with_list_checks(&[])
}

/// Cluster quotas: the create looks the logical cloud up first.
pub(crate) fn cluster_quota() -> Wording {
    Wording::new("Cluster Quota not found", "Quota already exists")
        .with_create_parent_missing("Logical Cloud not found")
        .with_name_conflict("Quota name mismatch")
        .with_put(PutStatus::Ok)
        .with_list_checks(&[])
}

/// Logical cloud kv-pairs.
pub(crate) fn logical_cloud_kv_pair() -> Wording {
    Wording::new("Key Value not found", "Key Value already exists")
        .with_name_conflict("KV pair name mismatch")
        .with_put(PutStatus::Ok)
        .with_list_checks(&[])
}

/// ncm's networks (src/ncm/api/apierrors.go; PUT answers 201, an empty list is `null` and
/// checks no parent).
pub(crate) fn network() -> Wording {
    Wording::new("Network not found", "Network already exists")
        .with_put(PutStatus::Created)
        .with_list_checks(&[])
}

/// ncm's provider networks (as [`network`]).
pub(crate) fn provider_network() -> Wording {
    Wording::new("ProviderNet not found", "ProviderNet already exists")
        .with_put(PutStatus::Created)
        .with_list_checks(&[])
}
