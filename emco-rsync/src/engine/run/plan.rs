//! Planning one app on one cluster: the order of the apps and the resources of each phase.

use std::collections::HashSet;

use emco_core::Result;

use super::Run;

/// The resources of one app on one cluster by phase, each list in the order it is applied.
#[derive(Debug, Default)]
pub(super) struct ClusterPlan {
    pub(super) crd: Vec<String>,
    pub(super) pre: Vec<String>,
    pub(super) main: Vec<String>,
    pub(super) post: Vec<String>,
    pub(super) pre_delete: Vec<String>,
    pub(super) post_delete: Vec<String>,
}

impl ClusterPlan {
    /// What instantiate applies, in order.
    pub(super) fn installed(&self) -> Vec<String> {
        [&self.crd, &self.pre, &self.main, &self.post]
            .into_iter()
            .flatten()
            .cloned()
            .collect()
    }
}

impl Run {
    /// The apps in `apporder`, then any others by name.
    pub(super) async fn ordered_apps(&self) -> Result<Vec<String>> {
        let mut apps = self.ctx.apps().await?;
        apps.retain(|a| a != "instruction");
        apps.sort();
        let order = self.ctx.app_order().await?.unwrap_or_default();
        let mut ordered: Vec<String> = order.into_iter().filter(|a| apps.contains(a)).collect();
        for a in apps {
            if !ordered.contains(&a) {
                ordered.push(a);
            }
        }
        Ok(ordered)
    }

    pub(super) async fn plan(&self, app: &str, cluster: &str) -> Result<ClusterPlan> {
        let mut all = self.ctx.resources(app, cluster).await?;
        all.sort();
        let order = self
            .ctx
            .resource_order(app, cluster)
            .await?
            .unwrap_or_default();
        let hooks = self
            .ctx
            .hook_groups(app, cluster)
            .await?
            .unwrap_or_default();
        let present = |list: &[String]| -> Vec<String> {
            list.iter().filter(|n| all.contains(n)).cloned().collect()
        };
        let hook_names: HashSet<&String> = [
            &hooks.crd_install,
            &hooks.pre_install,
            &hooks.post_install,
            &hooks.pre_delete,
            &hooks.post_delete,
        ]
        .into_iter()
        .flatten()
        .collect();
        let mut main: Vec<String> = Vec::new();
        for n in order.iter().chain(all.iter()) {
            if all.contains(n) && !hook_names.contains(n) && !main.contains(n) {
                main.push(n.clone());
            }
        }
        Ok(ClusterPlan {
            crd: present(&hooks.crd_install),
            pre: present(&hooks.pre_install),
            main,
            post: present(&hooks.post_install),
            pre_delete: present(&hooks.pre_delete),
            post_delete: present(&hooks.post_delete),
        })
    }
}
