//! Hook events: the harness says what its agent is doing (`volee hook`), checked against the
//! agent's token and harness, deduplicated, spooled while no daemon answers; and volee's hooks
//! files kept under HOME, removed once no live agent of their harness needs them.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use volee_core::{HookSignal, Observation};
use volee_protocol::{HookEvent, Origin};

use super::Daemon;

/// Hook events lately seen, and the hooks files volee keeps under HOME.
pub(super) struct HookState {
    /// Ids of the hook events seen lately: a hook whose answer came too late is spooled too.
    pub(super) recent: RecentIds,
    /// Hook files volee placed in a harness's own directory, with their harness.
    pub(super) kept: BTreeMap<PathBuf, String>,
}

impl Default for HookState {
    fn default() -> Self {
        HookState {
            recent: RecentIds::new(4096),
            kept: BTreeMap::new(),
        }
    }
}

impl Daemon {
    /// A hook event: the harness says what its agent is doing. Names and errors are logged
    /// escaped (`{:?}`): they come from whoever ran `volee hook` and may hold line breaks.
    pub(super) fn on_hook(&mut self, event: HookEvent) {
        if let Some(error) = &event.error {
            tracing::warn!(
                "rejected {:?} hook {:?} for agent {:?}: {error:?}",
                event.harness,
                event.event,
                event.agent
            );
            return;
        }
        // A hook from a session volee did not launch (volee's own hooks file or extension is
        // loaded by every session of the harness) carries no agent id: it belongs to the
        // discovered agent whose published session id it names, else to nobody.
        let agent_id = if event.agent.is_empty() {
            let by_session = event.session_id.as_deref().and_then(|s| {
                self.registry
                    .iter()
                    .find(|a| {
                        a.origin == Origin::Discovered
                            && !a.is_ended()
                            && a.harness == event.harness
                            && a.session_id.as_deref() == Some(s)
                    })
                    .map(|a| a.id.clone())
            });
            match by_session {
                Some(id) => id,
                None => {
                    tracing::debug!(
                        "hook {:?} {:?} from a session volee does not know",
                        event.harness,
                        event.event
                    );
                    return;
                }
            }
        } else {
            event.agent.clone()
        };
        let Some(agent) = self.registry.get(&agent_id) else {
            tracing::warn!(
                "hook {:?} {:?} names unknown agent {:?}",
                event.harness,
                event.event,
                event.agent
            );
            return;
        };
        // Launched with a token: only its own hooks (which have it in their environment) count.
        if let Some(token) = &agent.hook_token {
            if !token.matches(event.token.as_ref()) {
                tracing::warn!(
                    "ignored {:?} hook {:?} for agent {}: {} token",
                    event.harness,
                    event.event,
                    agent.id,
                    if event.token.is_some() { "wrong" } else { "no" }
                );
                return;
            }
        }
        if let Some(event_id) = &event.event_id {
            if !self.hooks.recent.insert(event_id) {
                tracing::debug!(
                    "agent {}: hook {:?} delivered twice, counted once",
                    agent.id,
                    event.event
                );
                return;
            }
        }
        if agent.harness != event.harness || agent.is_ended() {
            tracing::warn!(
                "hook {:?} {:?} does not fit agent {} ({}, {})",
                event.harness,
                event.event,
                agent.id,
                agent.harness,
                agent.state()
            );
            return;
        }
        let unnamed = agent.session_id.is_none();
        if let (true, Some(session)) = (unnamed, &event.session_id) {
            self.registry
                .edit(&agent_id, |a| a.session_id = Some(session.clone()));
        }
        let payload = serde_json::Value::Object(
            event
                .fields
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect(),
        );
        let row = volee_harness::hooks::hook_row(&event.harness, &event.event, &payload);
        let ends = volee_harness::get(&event.harness)
            .is_some_and(|p| p.hooks.iter().any(|h| h.ends_session));
        if ends && row.is_some() {
            self.registry.observe(
                &agent_id,
                Observation::ExpectsSessionEnd { at: event.at_ms },
            );
        }
        if row.is_some_and(|r| r.ends_session) {
            self.registry
                .observe(&agent_id, Observation::SessionEnd { at: event.at_ms });
        }
        match row.map(|r| (r.meaning, r.reason)) {
            Some((volee_harness::HookMeaning::State(state), reason)) => {
                let hook = HookSignal {
                    at: event.at_ms,
                    event: event.event.clone(),
                    state,
                    reason,
                };
                self.registry.observe(&agent_id, Observation::Hook(hook));
            }
            Some((volee_harness::HookMeaning::Evidence, _)) => {
                tracing::debug!("agent {agent_id}: hook {:?} (evidence)", event.event);
            }
            None => tracing::debug!("agent {agent_id}: hook {:?} ignored", event.event),
        }
    }

    /// Hook events written while the daemon was down, in order.
    pub(super) fn replay_spool(&mut self) {
        let path = self.paths.hook_spool();
        let Ok(bytes) = std::fs::read(&path) else {
            return;
        };
        let _ = std::fs::remove_file(&path);
        let (events, bad) = volee_harness::hooks::parse_hook_spool(&bytes);
        for (line, why) in bad {
            tracing::warn!("skipped spooled hook line {line}: {why}");
        }
        let replayed = events.len();
        for event in events {
            self.on_hook(event);
        }
        tracing::info!("replayed {replayed} spooled hook events");
    }

    /// Grok Build and Copilot CLI have no per-launch hooks: the launch puts one file of volee's
    /// own into `~/.grok/hooks/` or `~/.copilot/hooks/` (`$COPILOT_HOME/hooks/`); it goes as soon
    /// as no live agent of that harness needs it.
    pub(super) fn remove_unneeded_hook_files(&mut self) {
        let unneeded: Vec<(PathBuf, String)> = self
            .hooks
            .kept
            .iter()
            .filter(|(_, harness)| {
                !self
                    .registry
                    .iter()
                    .any(|a| &a.harness == *harness && !a.is_ended())
            })
            .map(|(p, h)| (p.clone(), h.clone()))
            .collect();
        for (path, harness) in unneeded {
            // Only ever a file volee wrote (it calls `volee hook HARNESS`).
            match crate::instrument::remove_kept_file(&path, &harness) {
                Ok(true) => {
                    tracing::info!("removed {} (no {harness} agent needs it)", path.display())
                }
                Ok(false) => {}
                Err(e) => tracing::warn!("could not remove {}: {e}", path.display()),
            }
            self.hooks.kept.remove(&path);
            self.registry.mark_unsaved();
        }
    }
}

/// The last `cap` ids seen, oldest forgotten first.
pub(super) struct RecentIds {
    order: std::collections::VecDeque<String>,
    seen: HashSet<String>,
    cap: usize,
}

impl RecentIds {
    pub(super) fn new(cap: usize) -> RecentIds {
        RecentIds {
            order: std::collections::VecDeque::new(),
            seen: HashSet::new(),
            cap,
        }
    }

    /// Remember `id`; false when it was seen already.
    pub(super) fn insert(&mut self, id: &str) -> bool {
        if self.seen.contains(id) {
            return false;
        }
        if self.order.len() >= self.cap {
            if let Some(old) = self.order.pop_front() {
                self.seen.remove(&old);
            }
        }
        self.order.push_back(id.to_string());
        self.seen.insert(id.to_string());
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_ids_count_a_repeat_once_and_stay_bounded() {
        let mut ids = RecentIds::new(2);
        assert!(ids.insert("a"));
        assert!(!ids.insert("a"), "a repeat is seen");
        assert!(ids.insert("b"));
        assert!(ids.insert("c"), "the oldest is forgotten");
        assert_eq!(ids.order.len(), 2);
        assert_eq!(ids.seen.len(), 2);
        assert!(ids.insert("a"));
        assert!(!ids.insert("c"));
    }
}
