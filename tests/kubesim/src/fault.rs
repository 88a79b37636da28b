//! Faults a simulated cluster can be told to show its clients.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// How an unreachable cluster looks to a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Unreachable {
    /// The cluster's port is closed: connections are refused.
    Refused,
    /// Connections are accepted but never answered, so clients run into their timeouts.
    BlackHole,
}

/// The faults of one cluster. The default is a healthy cluster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Fault {
    /// The cluster cannot be reached (all the time, or in the down phases of `flap_period_ms`).
    pub unreachable: Option<Unreachable>,
    /// Added to every answer.
    pub latency_ms: u64,
    /// Fraction (0.0 to 1.0) of requests answered with `error_code` instead of being served.
    pub error_rate: f64,
    /// The status of injected errors: 500, 429 (with `Retry-After`) or 503. 0 means 500.
    pub error_code: u16,
    /// When set, the cluster flaps: reachable for one period, unreachable for the next, and so
    /// on, starting reachable when the fault is set.
    pub flap_period_ms: Option<u64>,
}

impl Fault {
    /// A healthy cluster.
    #[must_use]
    pub fn none() -> Self {
        Self::default()
    }

    /// Connections refused.
    #[must_use]
    pub fn down() -> Self {
        Self {
            unreachable: Some(Unreachable::Refused),
            ..Self::default()
        }
    }

    /// Connections accepted and never answered.
    #[must_use]
    pub fn black_hole() -> Self {
        Self {
            unreachable: Some(Unreachable::BlackHole),
            ..Self::default()
        }
    }

    /// Every answer delayed by `ms` milliseconds.
    #[must_use]
    pub fn latency(ms: u64) -> Self {
        Self {
            latency_ms: ms,
            ..Self::default()
        }
    }

    /// A fraction `rate` of requests fails with `code` (500, 429 or 503).
    #[must_use]
    pub fn errors(rate: f64, code: u16) -> Self {
        Self {
            error_rate: rate,
            error_code: code,
            ..Self::default()
        }
    }

    /// Alternately reachable and refusing connections, switching every `period`.
    #[must_use]
    pub fn flapping(period: Duration) -> Self {
        Self {
            unreachable: Some(Unreachable::Refused),
            flap_period_ms: Some(u64::try_from(period.as_millis()).unwrap_or(u64::MAX)),
            ..Self::default()
        }
    }

    /// Checks the values: rates within 0..=1, a supported error code, a non-zero period.
    ///
    /// # Errors
    ///
    /// An `InvalidArgument` error naming the bad field.
    pub fn validate(&self) -> emco_core::Result<()> {
        if !(0.0..=1.0).contains(&self.error_rate) {
            return Err(
                emco_core::Error::invalid("error rate must be between 0 and 1")
                    .with_field("errorRate"),
            );
        }
        if !matches!(self.error_code, 0 | 500 | 429 | 503) {
            return Err(
                emco_core::Error::invalid("error code must be 500, 429 or 503")
                    .with_field("errorCode"),
            );
        }
        if self.flap_period_ms == Some(0) {
            return Err(emco_core::Error::invalid("flap period must be positive")
                .with_field("flapPeriodMs"));
        }
        Ok(())
    }
}

/// A fault and the moment it was set (flapping counts from there).
#[derive(Debug, Clone)]
pub(crate) struct FaultState {
    pub(crate) fault: Fault,
    pub(crate) since: Instant,
}

impl Default for FaultState {
    fn default() -> Self {
        Self {
            fault: Fault::default(),
            since: Instant::now(),
        }
    }
}

impl FaultState {
    /// Whether, and how, the cluster is unreachable at `now`.
    pub(crate) fn unreachable_at(&self, now: Instant) -> Option<Unreachable> {
        let mode = self.fault.unreachable?;
        match self.fault.flap_period_ms {
            None => Some(mode),
            Some(p) => {
                let phase = now.duration_since(self.since).as_millis() / u128::from(p.max(1));
                (phase % 2 == 1).then_some(mode)
            }
        }
    }

    /// When the reachability computed by [`Self::unreachable_at`] next changes by itself.
    pub(crate) fn next_flip(&self, now: Instant) -> Option<Instant> {
        self.fault.unreachable?;
        let p = u128::from(self.fault.flap_period_ms?.max(1));
        let elapsed = now.duration_since(self.since).as_millis();
        let next = (elapsed / p + 1) * p;
        Some(self.since + Duration::from_millis(u64::try_from(next).unwrap_or(u64::MAX)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flapping_alternates() {
        let st = FaultState {
            fault: Fault::flapping(Duration::from_millis(100)),
            since: Instant::now(),
        };
        let t0 = st.since;
        assert_eq!(st.unreachable_at(t0 + Duration::from_millis(50)), None);
        assert_eq!(
            st.unreachable_at(t0 + Duration::from_millis(150)),
            Some(Unreachable::Refused)
        );
        assert_eq!(st.unreachable_at(t0 + Duration::from_millis(250)), None);
        assert_eq!(
            st.next_flip(t0 + Duration::from_millis(150)),
            Some(t0 + Duration::from_millis(200))
        );
        let down = FaultState {
            fault: Fault::down(),
            since: t0,
        };
        assert_eq!(down.unreachable_at(t0), Some(Unreachable::Refused));
        assert_eq!(down.next_flip(t0), None);
    }

    #[test]
    fn validation() {
        assert!(Fault::errors(0.5, 429).validate().is_ok());
        assert!(Fault::errors(1.5, 500).validate().is_err());
        assert!(Fault::errors(0.5, 404).validate().is_err());
    }
}
