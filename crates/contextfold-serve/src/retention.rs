//! Retention: with `--retain`, the store's sessions not written for that long are deleted, at
//! start-up and then every tenth of the period (at most hourly), so a proxy that runs for
//! months keeps a bounded store. A failure is logged by the store and tried again next time.

use crate::store::ProxyStore;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How often the store is pruned for a retention period of `retain`.
fn every(retain: Duration) -> Duration {
    (retain / 10).clamp(Duration::from_secs(1), Duration::from_secs(3600))
}

/// Prunes `store` of what was not written for `retain`, until the task is aborted.
pub async fn prune(store: ProxyStore, retain: Duration) {
    let mut ticks = tokio::time::interval(every(retain));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs());
        if let Ok(deleted) = store.prune(now.saturating_sub(retain.as_secs())).await {
            if deleted > 0 {
                tracing::info!(deleted, "contextfold serve: deleted sessions not written for {:?} (--retain)", retain);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_period_is_a_tenth_of_the_retention_between_a_second_and_an_hour() {
        assert_eq!(every(Duration::from_secs(5)), Duration::from_secs(1));
        assert_eq!(every(Duration::from_secs(600)), Duration::from_secs(60));
        assert_eq!(every(Duration::from_secs(30 * 86_400)), Duration::from_secs(3600));
    }
}
