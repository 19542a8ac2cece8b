//! Retention of stored sessions (`[sessions]` in config.toml; `volee agent --prune-sessions`,
//! and the daemon once a day): archive sessions idle for `archive_after`, delete archived ones
//! idle for `delete_archived_after`, never one tagged with a `keep_tagged` tag. The plan is a
//! pure function of the listing and the time, so a dry run lists exactly what a run does; a
//! run takes each session's writer lock (a session held by an agent is skipped, never touched)
//! and deletes by renaming the directory away, then removing it ([`Store::delete`]).

use std::time::Duration;

use serde::Serialize;

use crate::error::{Result, StoreError};
use crate::store::{error_text, Health, Listed, Store};

/// The policy; both durations off (None) by default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// Archive a session not updated for this long.
    pub archive_after: Option<Duration>,
    /// Delete an archived session not updated for this long (archiving updates it, so this
    /// counts from the archiving at the latest).
    pub delete_archived_after: Option<Duration>,
    /// Sessions with one of these tags are never archived or deleted by retention.
    pub keep_tagged: Vec<String>,
}

impl RetentionPolicy {
    /// Does the policy do anything?
    pub fn is_set(&self) -> bool {
        self.archive_after.is_some() || self.delete_archived_after.is_some()
    }
}

/// What retention does to a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RetentionKind {
    Archive,
    Delete,
}

/// One planned action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RetentionAction {
    pub id: String,
    pub title: String,
    pub action: RetentionKind,
    /// Milliseconds since the session was last updated.
    pub idle_ms: u64,
}

/// An action as it went: `done`, or `skipped` with why (held by a writer, gone meanwhile).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RetentionOutcome {
    #[serde(flatten)]
    pub planned: RetentionAction,
    /// `planned` (a dry run), `done`, `skipped` or `failed`.
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The actions `policy` asks for on `sessions` at `now_ms`, in listing order. Damaged and newer
/// sessions are left alone.
pub fn plan(sessions: &[Listed], policy: &RetentionPolicy, now_ms: u64) -> Vec<RetentionAction> {
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    sessions
        .iter()
        .filter(|l| l.health == Health::Ok)
        .filter_map(|l| {
            let m = l.meta.as_ref()?;
            if m.tags.iter().any(|t| policy.keep_tagged.contains(t)) {
                return None;
            }
            let idle_ms = now_ms.saturating_sub(m.updated_at_ms);
            let action = if m.archived {
                policy
                    .delete_archived_after
                    .filter(|d| idle_ms >= ms(*d))
                    .map(|_| RetentionKind::Delete)
            } else {
                policy
                    .archive_after
                    .filter(|d| idle_ms >= ms(*d))
                    .map(|_| RetentionKind::Archive)
            }?;
            Some(RetentionAction {
                id: l.id.clone(),
                title: m.title.clone(),
                action,
                idle_ms,
            })
        })
        .collect()
}

impl Store {
    /// The retention plan of this store now.
    pub fn retention_plan(
        &self,
        policy: &RetentionPolicy,
        now_ms: u64,
    ) -> Result<Vec<RetentionAction>> {
        Ok(plan(&self.list(true)?, policy, now_ms))
    }

    /// Plan, then (unless `dry_run`) apply each action under the session's writer lock: a session
    /// held by a writer is skipped with its holder; its tags are read again under the lock, so
    /// one tagged to keep meanwhile is skipped too.
    pub fn apply_retention(
        &self,
        policy: &RetentionPolicy,
        now_ms: u64,
        dry_run: bool,
    ) -> Result<Vec<RetentionOutcome>> {
        let planned = self.retention_plan(policy, now_ms)?;
        Ok(planned
            .into_iter()
            .map(|p| {
                if dry_run {
                    return RetentionOutcome {
                        planned: p,
                        status: "planned",
                        reason: None,
                    };
                }
                let result = self.apply_one(&p, policy);
                let (status, reason) = match result {
                    Ok(None) => ("done", None),
                    Ok(Some(why)) => ("skipped", Some(why)),
                    Err(e @ StoreError::Locked { .. }) => ("skipped", Some(error_text(&e))),
                    Err(e) => ("failed", Some(error_text(&e))),
                };
                RetentionOutcome {
                    planned: p,
                    status,
                    reason,
                }
            })
            .collect())
    }

    /// One action; `Some(why)` when it is no longer due.
    fn apply_one(&self, p: &RetentionAction, policy: &RetentionPolicy) -> Result<Option<String>> {
        let mut w = self.open_writer(&p.id)?;
        let state = w.state();
        if state.tags.iter().any(|t| policy.keep_tagged.contains(t)) {
            return Ok(Some("tagged to keep meanwhile".into()));
        }
        match p.action {
            RetentionKind::Archive => {
                if state.archived {
                    return Ok(Some("archived meanwhile".into()));
                }
                w.state_mut().archived = true;
                w.checkpoint()?;
            }
            RetentionKind::Delete => {
                if !state.archived {
                    return Ok(Some("unarchived meanwhile".into()));
                }
                // The lock is taken again by delete (the same process: released first).
                drop(w);
                self.delete(&p.id)?;
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::store::NewSession;

    const DAY: u64 = 24 * 3600 * 1000;

    #[test]
    fn a_dry_run_lists_what_the_run_then_does() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("s"));
        let new = |title: &str| {
            let mut w = store
                .create(NewSession {
                    title: title.into(),
                    project_root: dir.path().into(),
                    model: "m".into(),
                })
                .unwrap();
            w.checkpoint().unwrap();
            w.id().to_string()
        };
        let (old, kept, archived, held) = (new("old"), new("kept"), new("archived"), new("held"));
        store.tag(&kept, &["keep".into()]).unwrap();
        store.set_archived(&archived, true).unwrap();
        let policy = RetentionPolicy {
            archive_after: Some(Duration::from_secs(30 * 86400)),
            delete_archived_after: Some(Duration::from_secs(180 * 86400)),
            keep_tagged: vec!["keep".into()],
        };
        // Now: nothing is due.
        assert!(store
            .apply_retention(&policy, crate::now_ms(), true)
            .unwrap()
            .is_empty());
        let later = crate::now_ms() + 200 * DAY;
        let _writer = store.open_writer(&held).unwrap();
        let dry = store.apply_retention(&policy, later, true).unwrap();
        let what = |v: &[RetentionOutcome]| {
            let mut w: Vec<(String, RetentionKind)> = v
                .iter()
                .map(|o| (o.planned.id.clone(), o.planned.action))
                .collect();
            w.sort();
            w
        };
        let mut want = vec![
            (old.clone(), RetentionKind::Archive),
            (archived.clone(), RetentionKind::Delete),
            (held.clone(), RetentionKind::Archive),
        ];
        want.sort();
        assert_eq!(what(&dry), want);
        assert!(dry.iter().all(|o| o.status == "planned"));
        assert_eq!(
            store.list(true).unwrap().len(),
            4,
            "a dry run changes nothing"
        );
        let run = store.apply_retention(&policy, later, false).unwrap();
        assert_eq!(
            what(&run),
            what(&dry),
            "the run does what the dry run listed"
        );
        for o in &run {
            let want = if o.planned.id == held {
                "skipped"
            } else {
                "done"
            };
            assert_eq!(o.status, want, "{o:?}");
        }
        assert!(store.load(&old).unwrap().archived);
        assert!(store.load(&archived).is_err(), "deleted");
        assert!(!store.load(&kept).unwrap().archived);
        assert!(!store.load(&held).unwrap().archived, "held: untouched");
        let names: Vec<String> = std::fs::read_dir(store.root())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");
    }
}
