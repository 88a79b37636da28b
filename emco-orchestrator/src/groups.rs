//! The orchestrator's lifecycle of deployment intent groups as in-process action controllers
//! reach it ([`emco_controller_sdk::Groups`]): tac deploys its workers' groups with it.

use async_trait::async_trait;
use emco_controller_sdk::Groups;
use emco_core::lifecycle::DigState;
use emco_core::model::status::{StatusOutput, StatusQuery, StatusType};
use emco_core::{DigRef, Result};

use crate::status::{READY, Status};

/// [`Groups`] over the deployment and status services.
#[derive(Debug, Clone)]
pub(crate) struct DigGroups {
    pub(crate) status: Status,
}

#[async_trait]
impl Groups for DigGroups {
    async fn state(&self, dig: &DigRef) -> Result<DigState> {
        Ok(self.status.deployments.state(dig).await?.current_state())
    }

    async fn instantiate(&self, dig: &DigRef) -> Result<()> {
        self.status.deployments.instantiate(dig).await
    }

    async fn ready(&self, dig: &DigRef) -> Result<bool> {
        let query = StatusQuery {
            status: StatusType::Ready,
            output: StatusOutput::Summary,
            ..StatusQuery::default()
        };
        let answer = self.status.deployment(dig, &query).await?;
        Ok(answer.into_full()?.totals.ready_status == READY)
    }

    async fn terminate(&self, dig: &DigRef) -> Result<()> {
        self.status.deployments.terminate(dig).await
    }
}
