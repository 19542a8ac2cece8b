//! The daemon's side of `[sessions]` retention: once a day (and a minute after start), when
//! config.toml sets `archive_after` or `delete_archived_after`, the store of volee agent's
//! sessions is pruned exactly as `volee agent --prune-sessions` would (the logic is
//! `volee_store::retention`). It runs on a blocking task of its own, never on the daemon's
//! actor: reading and deleting many sessions' files must not hold up agents' events.

use std::path::PathBuf;
use std::time::Duration;

use volee_store::{RetentionPolicy, Store};

use crate::config::SessionsConfig;

/// How often retention runs.
pub const EVERY: Duration = Duration::from_secs(24 * 3600);

/// The store's policy from `[sessions]`.
pub fn policy(c: &SessionsConfig) -> RetentionPolicy {
    RetentionPolicy {
        archive_after: c.archive_after,
        delete_archived_after: c.delete_archived_after,
        keep_tagged: c.keep_tagged.clone(),
    }
}

/// Spawn the daily task when the policy is set (nothing otherwise).
pub fn spawn_daily(store_root: PathBuf, config: &SessionsConfig) {
    if !config.is_set() {
        return;
    }
    let policy = policy(config);
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(60)).await;
        let mut every = tokio::time::interval(EVERY);
        loop {
            every.tick().await;
            let (root, policy) = (store_root.clone(), policy.clone());
            let ran = tokio::task::spawn_blocking(move || {
                Store::new(root).apply_retention(&policy, volee_store::now_ms(), false)
            })
            .await;
            match ran {
                Ok(Ok(outcomes)) => {
                    for o in outcomes {
                        tracing::info!(
                            "session retention: {:?} {} {}{}",
                            o.planned.action,
                            o.planned.id,
                            o.status,
                            o.reason.map(|r| format!(": {r}")).unwrap_or_default()
                        );
                    }
                }
                Ok(Err(e)) => tracing::warn!("session retention: {e}"),
                Err(e) => tracing::warn!("session retention task: {e}"),
            }
        }
    });
}
