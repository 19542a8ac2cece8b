//! The agent registry model: records, id and name rules, resolution, pruning.
//!
//! The daemon is its only writer; it persists [`RegistryFile`] as `agents.json`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use volee_protocol::{
    AgentState, AgentView, Explanation, Host, ObservationView, Origin, ProfileFit, StateSource,
};

use crate::arbiter::{decide, exit_status_of, ArbiterConfig, Decision, Millis, Signals};
use crate::observation::Observation;

/// Version of the `agents.json` layout.
pub const REGISTRY_FORMAT: u32 = 1;

/// What a launch knows about a new agent.
#[derive(Debug, Clone, PartialEq)]
pub struct NewAgent {
    pub id: String,
    pub name: String,
    pub harness: String,
    pub command: Vec<String>,
    pub cwd: String,
    pub host: Host,
    pub harness_version: Option<String>,
    pub profile_fit: ProfileFit,
    pub session_id: Option<String>,
}

/// One agent as the daemon remembers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentRecord {
    pub id: String,
    pub name: String,
    pub harness: String,
    pub origin: Origin,
    pub command: Vec<String>,
    pub cwd: String,
    pub host: Host,
    #[serde(default)]
    pub harness_version: Option<String>,
    #[serde(default = "generic_fit")]
    pub profile_fit: ProfileFit,
    #[serde(default)]
    pub session_id: Option<String>,
    /// The harness's own status file for this process, read as the `listing` source.
    #[serde(default)]
    pub status_file: Option<String>,
    /// The multiplexer's own variables from the launcher's environment (`ZELLIJ_SOCKET_DIR`, …),
    /// so a restarted daemon reaches the same zellij server.
    #[serde(default)]
    pub host_env: Vec<(String, String)>,
    /// A server that lists this agent's session with its state (Codex's app-server control
    /// socket), asked once a second as the `listing` source.
    #[serde(default)]
    pub listing_socket: Option<String>,
    /// The linked git worktree of its working directory, read when it was recorded.
    #[serde(default)]
    pub worktree: Option<volee_protocol::Worktree>,
    /// A first prompt volee types once the screen shows the harness idle (Aider has no flag that
    /// keeps its session interactive); cleared when typed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub typed_prompt: Option<String>,
    /// The secret its hooks must present (`VOLEE_AGENT_TOKEN`); None for agents recorded before
    /// tokens existed and for discovered ones, which accept hooks without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook_token: Option<volee_protocol::HookToken>,
    /// Where it sat in tmux (window name, index, layout, pane index), as last listed: what
    /// `volee restore` rebuilds after its server is gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<volee_protocol::Placement>,
    /// When `volee restore` brought it back (it keeps its id).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restored: Vec<Millis>,
    /// What its harness recorded of the tokens its session used (None: unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<volee_protocol::AgentUsage>,
    /// Its token budget (`volee launch --budget`, `volee budget`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<volee_protocol::Budget>,
    pub pid: Option<u32>,
    pub created_at: Millis,
    pub ended_at: Option<Millis>,
    /// Written only through [`Registry::observe`].
    pub(crate) signals: Signals,
    pub decision: Decision,
    /// When the current state began.
    pub state_since: Millis,
}

impl AgentRecord {
    /// A freshly launched agent.
    pub fn launched(new: NewAgent, now: Millis, cfg: &ArbiterConfig) -> AgentRecord {
        let signals = Signals::default();
        let decision = decide(&signals, now, now, cfg);
        AgentRecord {
            id: new.id,
            name: new.name,
            harness: new.harness,
            origin: Origin::Launched,
            command: new.command,
            cwd: new.cwd,
            host: new.host,
            harness_version: new.harness_version,
            profile_fit: new.profile_fit,
            session_id: new.session_id,
            status_file: None,
            host_env: Vec::new(),
            listing_socket: None,
            worktree: None,
            typed_prompt: None,
            hook_token: None,
            placement: None,
            restored: Vec::new(),
            usage: None,
            budget: None,
            pid: None,
            created_at: now,
            ended_at: None,
            signals,
            state_since: decision.at.min(now),
            decision,
        }
    }

    pub fn state(&self) -> AgentState {
        self.decision.state
    }

    /// Everything observed about it, latest per kind.
    pub fn signals(&self) -> &Signals {
        &self.signals
    }

    /// Ended for good: its process is gone.
    pub fn is_ended(&self) -> bool {
        self.decision.state.is_final()
    }

    /// Stopped because its host went away (its tmux server gone: killed, crashed, a reboot), and
    /// something to resume it with is known (a harness session id, or a command to run again):
    /// `volee restore` brings it back. Kept past the ended agents' retention until restored or
    /// removed.
    pub fn is_restorable(&self) -> bool {
        self.is_ended()
            && self.signals.host_lost.is_some()
            && (self.session_id.is_some() || !self.command.is_empty())
    }

    /// Re-run the arbiter; returns true when the visible state changed.
    pub fn reevaluate(&mut self, now: Millis, cfg: &ArbiterConfig) -> bool {
        if self.is_ended() {
            return false;
        }
        let decision = decide(&self.signals, self.created_at, now, cfg);
        let changed = decision.state != self.decision.state;
        if changed {
            self.state_since = decision.at.min(now);
        }
        if decision.state.is_final() {
            self.ended_at = Some(decision.at.min(now));
        }
        let visible_change = changed || decision.evidence != self.decision.evidence;
        self.decision = decision;
        visible_change
    }

    pub fn view(&self) -> AgentView {
        let host_pid = self.pid;
        AgentView {
            id: self.id.clone(),
            name: self.name.clone(),
            harness: self.harness.clone(),
            harness_version: self.harness_version.clone(),
            profile_fit: self.profile_fit,
            origin: self.origin,
            state: self.decision.state,
            state_source: self.decision.source,
            state_since: rfc3339(self.state_since),
            evidence: self.decision.evidence.clone(),
            reason: self.decision.reason,
            exit_status: self.signals.exit.as_ref().and_then(exit_status_of),
            pid: host_pid,
            cwd: self.cwd.clone(),
            session_id: self.session_id.clone(),
            host: self.host.clone(),
            title: self.signals.title.as_ref().map(|(_, t)| t.clone()),
            command: self.command.clone(),
            created_at: rfc3339(self.created_at),
            ended_at: self.ended_at.map(rfc3339),
            last_output: self.signals.last_output.map(rfc3339_ms),
            worktree: self.worktree.clone(),
            machine: None,
            reachable: true,
            unreachable_since: None,
            restorable: self.is_restorable(),
            placement: self.placement.clone(),
            restored: self.restored.iter().map(|t| rfc3339(*t)).collect(),
            usage: self.usage.clone(),
            budget: self.budget.clone(),
        }
    }

    /// Every source's latest observation and the rule that decided.
    pub fn explain(&self) -> Explanation {
        let s = &self.signals;
        let mut obs = Vec::new();
        let mut push = |source, kind: &str, at: Millis, evidence: String| {
            obs.push(ObservationView {
                source,
                kind: kind.into(),
                at: rfc3339_ms(at),
                evidence,
            })
        };
        push(
            StateSource::Process,
            "launch",
            self.created_at,
            format!("{} agent started", self.harness),
        );
        if let Some(at) = s.last_output {
            push(StateSource::Multiplexer, "output", at, "pane output".into());
        }
        if let Some(at) = s.last_bell {
            push(
                StateSource::Multiplexer,
                "bell",
                at,
                "BEL in pane output".into(),
            );
        }
        if let Some((at, title)) = &s.title {
            push(StateSource::Multiplexer, "title", *at, format!("{title:?}"));
        }
        if let Some(l) = &s.listing {
            push(
                StateSource::Listing,
                "listing",
                l.at,
                format!("{} means {}", l.event, l.state),
            );
        }
        if let Some(h) = &s.hook {
            push(
                StateSource::Hooks,
                "hook",
                h.at,
                format!("{} means {}", h.event, h.state),
            );
        }
        if let Some(p) = &s.prompt {
            push(
                StateSource::Screen,
                "prompt",
                p.at,
                format!("rule {} matched {:?} ({})", p.rule, p.text, p.state),
            );
        }
        if let Some(e) = &s.exit {
            let text = match (e.status, e.signal) {
                (_, Some(sig)) => format!("pane_dead_signal {sig}"),
                (Some(st), None) => format!("pane_dead_status {st}"),
                (None, None) => "pane dead, no status".into(),
            };
            push(StateSource::Multiplexer, "exit", e.at, text);
        }
        if let Some(at) = s.stop_requested {
            push(StateSource::Process, "stop", at, "volee stop".into());
        }
        if let Some(at) = s.pane_gone {
            push(
                StateSource::Multiplexer,
                "pane_gone",
                at,
                "pane no longer exists".into(),
            );
        }
        if let Some(at) = s.host_lost {
            push(
                StateSource::Multiplexer,
                "host_lost",
                at,
                "tmux server gone".into(),
            );
        }
        if let Some(at) = s.launch_interrupted {
            push(
                StateSource::Process,
                "launch_interrupted",
                at,
                "the pane still waited for its environment when the daemon restarted".into(),
            );
        }
        if let Some((at, evidence)) = &s.budget_hold {
            push(StateSource::Listing, "budget", *at, evidence.clone());
        }
        obs.sort_by(|a, b| a.at.cmp(&b.at));
        Explanation {
            agent: self.view(),
            observations: obs,
            decision: format!(
                "{} from {}: {} (evidence: {})",
                self.decision.state,
                self.decision.source,
                self.decision.rule,
                self.decision.evidence
            ),
            screen: None,
        }
    }
}

fn generic_fit() -> ProfileFit {
    ProfileFit::Generic
}

/// `agents.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RegistryFile {
    pub format: u32,
    pub agents: Vec<AgentRecord>,
}

/// Why an id did not resolve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    #[error("no agent matches {query:?}")]
    Unknown { query: String },
    #[error("{query:?} is ambiguous: it matches {}", candidates.join(", "))]
    Ambiguous {
        query: String,
        candidates: Vec<String>,
    },
}

/// Why a name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("name {name:?} is already used by live agent {id}")]
    Taken { name: String, id: String },
    #[error("name {name:?} is not allowed: {why}")]
    Invalid { name: String, why: &'static str },
}

/// All agents, by id — and what changed since the daemon last told its watchers and saved.
///
/// The one door: signals change only through [`Registry::observe`], other fields only through
/// [`Registry::edit`], [`Registry::insert`] and [`Registry::remove`]; each marks the agent
/// dirty (its view must be sent again) and, where it matters, the registry unsaved.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    agents: BTreeMap<String, AgentRecord>,
    dirty: BTreeSet<String>,
    unsaved: bool,
    /// Ids and names of launches under way (their panes are being opened): taken already.
    reserved: BTreeMap<String, String>,
}

/// A state change found by [`Registry::reevaluate_all`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub id: String,
    pub before: AgentState,
    pub after: AgentState,
    /// How long the state before lasted.
    pub lasted_ms: Millis,
}

/// Characters of generated ids: lowercase letters and digits without look-alikes.
const ID_ALPHABET: &[u8] = b"abcdefghjkmnpqrstuvwxyz23456789";

impl Registry {
    pub fn from_file(file: RegistryFile) -> Registry {
        Registry {
            agents: file.agents.into_iter().map(|a| (a.id.clone(), a)).collect(),
            dirty: BTreeSet::new(),
            unsaved: false,
            reserved: BTreeMap::new(),
        }
    }

    pub fn to_file(&self) -> RegistryFile {
        RegistryFile {
            format: REGISTRY_FORMAT,
            agents: self.agents.values().cloned().collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.agents.len()
    }

    pub fn is_empty(&self) -> bool {
        self.agents.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &AgentRecord> {
        self.agents.values()
    }

    pub fn get(&self, id: &str) -> Option<&AgentRecord> {
        self.agents.get(id)
    }

    /// Hold id `id` and name `name` for a launch under way: no other agent gets them until
    /// the launch's record is inserted or [`Registry::release`]d.
    pub fn reserve(&mut self, id: &str, name: &str) {
        self.reserved.insert(id.to_string(), name.to_string());
    }

    /// Is a launch holding `id` now?
    pub fn is_reserved(&self, id: &str) -> bool {
        self.reserved.contains_key(id)
    }

    /// The launch holding `id` ended (recorded or failed).
    pub fn release(&mut self, id: &str) {
        self.reserved.remove(id);
    }

    pub fn insert(&mut self, record: AgentRecord) {
        self.reserved.remove(&record.id);
        self.dirty.insert(record.id.clone());
        self.unsaved = true;
        self.agents.insert(record.id.clone(), record);
    }

    pub fn remove(&mut self, id: &str) -> Option<AgentRecord> {
        let removed = self.agents.remove(id);
        if removed.is_some() {
            self.dirty.insert(id.to_string());
            self.unsaved = true;
        }
        removed
    }

    /// Something was seen about agent `id`. Ignored for an unknown or ended agent, and when it
    /// changes nothing (an older report than the one held, the same title again); otherwise
    /// the agent is dirty when the observation shows in its view, and the registry unsaved
    /// when it is durable ([`Observation::shows_in_view`], [`Observation::is_durable`]). The state
    /// itself is decided again by [`Registry::reevaluate_all`] (or [`Registry::reevaluate`]).
    /// Returns whether the signals changed.
    pub fn observe(&mut self, id: &str, observation: Observation) -> bool {
        let Some(agent) = self.agents.get_mut(id).filter(|a| !a.is_ended()) else {
            return false;
        };
        let (durable, shown) = (observation.is_durable(), observation.shows_in_view());
        if !agent.signals.apply(observation) {
            return false;
        }
        if shown {
            self.dirty.insert(id.to_string());
        }
        self.unsaved |= durable;
        true
    }

    /// Change agent `id`'s facts other than its signals (session id, pid, name, version, typed
    /// prompt); marks it dirty and the registry unsaved. None for an unknown id.
    pub fn edit<T>(&mut self, id: &str, f: impl FnOnce(&mut AgentRecord) -> T) -> Option<T> {
        let out = f(self.agents.get_mut(id)?);
        self.dirty.insert(id.to_string());
        self.unsaved = true;
        Some(out)
    }

    /// Decide agent `id`'s state again now (an ending that later code must see at once).
    pub fn reevaluate(&mut self, id: &str, now: Millis, cfg: &ArbiterConfig) {
        if let Some(agent) = self.agents.get_mut(id) {
            if agent.reevaluate(now, cfg) {
                self.dirty.insert(id.to_string());
            }
        }
    }

    /// Decide every agent's state again at `now`: the visible changes mark agents dirty, state
    /// changes also the registry unsaved and are returned.
    pub fn reevaluate_all(&mut self, now: Millis, cfg: &ArbiterConfig) -> Vec<Transition> {
        let mut transitions = Vec::new();
        for agent in self.agents.values_mut() {
            let before = agent.decision.state;
            let since = agent.state_since;
            if !agent.reevaluate(now, cfg) {
                continue;
            }
            self.dirty.insert(agent.id.clone());
            if agent.decision.state != before {
                self.unsaved = true;
                transitions.push(Transition {
                    id: agent.id.clone(),
                    before,
                    after: agent.decision.state,
                    lasted_ms: now.saturating_sub(since),
                });
            }
        }
        transitions
    }

    /// The agents whose view changed since the last call.
    pub fn take_dirty(&mut self) -> BTreeSet<String> {
        std::mem::take(&mut self.dirty)
    }

    /// Agent `id`'s view must be sent again though nothing of it changed here (its screen or
    /// place on the status line did).
    pub fn touch(&mut self, id: &str) {
        self.dirty.insert(id.to_string());
    }

    /// Something of the registry's changed since the last save.
    pub fn is_unsaved(&self) -> bool {
        self.unsaved
    }

    /// Something kept with the registry (but outside it) changed: save with it.
    pub fn mark_unsaved(&mut self) {
        self.unsaved = true;
    }

    /// The registry was written.
    pub fn mark_saved(&mut self) {
        self.unsaved = false;
    }

    /// An exact id wins, then an exact name (live agents first), then a unique id prefix.
    pub fn resolve(&self, query: &str) -> Result<&AgentRecord, ResolveError> {
        if let Some(a) = self.agents.get(query) {
            return Ok(a);
        }
        let named: Vec<&AgentRecord> = self.agents.values().filter(|a| a.name == query).collect();
        let live_named: Vec<&AgentRecord> =
            named.iter().copied().filter(|a| !a.is_ended()).collect();
        match (live_named.as_slice(), named.as_slice()) {
            ([one], _) | ([], [one]) => return Ok(one),
            ([], []) => {}
            (live, all) => {
                let pool = if live.is_empty() { all } else { live };
                return Err(ResolveError::Ambiguous {
                    query: query.into(),
                    candidates: pool.iter().map(|a| describe(a)).collect(),
                });
            }
        }
        let prefixed: Vec<&AgentRecord> = if query.is_empty() {
            Vec::new()
        } else {
            self.agents
                .values()
                .filter(|a| a.id.starts_with(query))
                .collect()
        };
        match prefixed.as_slice() {
            [one] => Ok(one),
            [] => Err(ResolveError::Unknown {
                query: query.into(),
            }),
            many => Err(ResolveError::Ambiguous {
                query: query.into(),
                candidates: many.iter().map(|a| describe(a)).collect(),
            }),
        }
    }

    /// A new id of `len` characters from `random` bytes (the caller supplies entropy); None when
    /// every candidate drawn from these bytes is taken.
    pub fn new_id(&self, random: &[u8], len: usize) -> Option<String> {
        random
            .chunks(len)
            .filter(|c| c.len() == len)
            .map(|chunk| {
                chunk
                    .iter()
                    .map(|b| ID_ALPHABET[usize::from(*b) % ID_ALPHABET.len()] as char)
                    .collect::<String>()
            })
            .find(|id| {
                !self.agents.contains_key(id)
                    && !self.reserved.contains_key(id)
                    && !self.agents.values().any(|a| &a.name == id)
                    && !self.reserved.values().any(|name| name == id)
            })
    }

    /// Check a user-chosen name for a new agent: printable, short, no `:` (a remote agent is
    /// written `MACHINE:ID`), not an id of another agent, unique among live agents.
    pub fn check_name(&self, name: &str) -> Result<(), NameError> {
        if name.contains(':') {
            return Err(NameError::Invalid {
                name: name.into(),
                why: "it contains ':', which volee keeps for MACHINE:ID",
            });
        }
        self.check_kept_name(name)
    }

    /// Check a name an agent had before (rebuilt from its pane's options): the rules of
    /// [`Registry::check_name`] but `:`, which names could contain before machines existed.
    pub fn check_kept_name(&self, name: &str) -> Result<(), NameError> {
        let invalid = |why| {
            Err(NameError::Invalid {
                name: name.into(),
                why,
            })
        };
        if name.is_empty() {
            return invalid("it is empty");
        }
        if name.chars().count() > 64 {
            return invalid("it is longer than 64 characters");
        }
        if name.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return invalid("it contains spaces or control characters");
        }
        if let Some(a) = self.agents.get(name) {
            return Err(NameError::Taken {
                name: name.into(),
                id: a.id.clone(),
            });
        }
        if let Some(a) = self
            .agents
            .values()
            .find(|a| a.name == name && !a.is_ended())
        {
            return Err(NameError::Taken {
                name: name.into(),
                id: a.id.clone(),
            });
        }
        if let Some((id, _)) = self
            .reserved
            .iter()
            .find(|(id, n)| *n == name || *id == name)
        {
            return Err(NameError::Taken {
                name: name.into(),
                id: id.clone(),
            });
        }
        Ok(())
    }

    /// A free name derived from a command (`sh`, `sh-2`, …).
    pub fn default_name(&self, command: &[String]) -> String {
        let base: String = command
            .first()
            .map(|c| c.rsplit('/').next().unwrap_or(c).to_string())
            .unwrap_or_else(|| "agent".into())
            .chars()
            .filter(|c| !c.is_control() && !c.is_whitespace() && *c != ':')
            .take(32)
            .collect();
        let base = if base.is_empty() {
            "agent".to_string()
        } else {
            base
        };
        (1..)
            .map(|n| {
                if n == 1 {
                    base.clone()
                } else {
                    format!("{base}-{n}")
                }
            })
            .find(|candidate| self.check_name(candidate).is_ok())
            .unwrap_or(base)
    }

    /// Ended agents that ended before `cutoff` (what `prune` forgets).
    pub fn expired(&self, cutoff: Millis) -> Vec<String> {
        self.agents
            .values()
            .filter(|a| a.is_ended() && a.ended_at.unwrap_or(a.created_at) < cutoff)
            // A restorable agent waits for `volee restore` or `volee rm`.
            .filter(|a| !a.is_restorable())
            .map(|a| a.id.clone())
            .collect()
    }
}

fn describe(a: &AgentRecord) -> String {
    format!("{} ({}, {})", a.id, a.name, a.decision.state)
}

/// RFC 3339 UTC with seconds.
pub fn rfc3339(ms: Millis) -> String {
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
        .to_string()
}

/// RFC 3339 UTC with milliseconds.
pub fn rfc3339_ms(ms: Millis) -> String {
    humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, name: &str) -> AgentRecord {
        AgentRecord::launched(
            NewAgent {
                id: id.into(),
                name: name.into(),
                harness: "generic".into(),
                command: vec!["sh".into()],
                cwd: "/tmp".into(),
                host: Host::None,
                harness_version: None,
                profile_fit: ProfileFit::Generic,
                session_id: None,
            },
            1000,
            &ArbiterConfig::default(),
        )
    }

    fn end(r: &mut AgentRecord) {
        r.signals.exit = Some(crate::arbiter::ExitFact {
            at: 2000,
            status: Some(0),
            signal: None,
        });
        r.reevaluate(2000, &ArbiterConfig::default());
    }

    #[test]
    fn an_agent_whose_host_went_away_is_restorable_and_kept_past_retention() {
        let mut reg = Registry::default();
        let mut lost = record("ab12", "lost");
        lost.signals.host_lost = Some(2000);
        lost.reevaluate(2000, &ArbiterConfig::default());
        assert_eq!(lost.state(), AgentState::Stopped);
        assert!(lost.is_restorable());
        assert!(lost.view().restorable);
        let mut done = record("cd34", "done");
        end(&mut done);
        assert!(!done.is_restorable(), "an exit is not a lost host");
        let mut bare = record("ef56", "bare");
        bare.command.clear();
        bare.signals.host_lost = Some(2000);
        bare.reevaluate(2000, &ArbiterConfig::default());
        assert!(!bare.is_restorable(), "nothing to resume it with");
        reg.insert(lost);
        reg.insert(done);
        reg.insert(bare);
        assert_eq!(
            reg.expired(u64::MAX),
            vec!["cd34".to_string(), "ef56".to_string()]
        );
    }

    #[test]
    fn resolution_order_is_id_name_prefix() {
        let mut reg = Registry::default();
        reg.insert(record("ab12", "fixer"));
        reg.insert(record("ab34", "ab12x"));
        reg.insert(record("cd56", "ab"));
        assert_eq!(reg.resolve("ab12").map(|a| a.id.as_str()), Ok("ab12"));
        assert_eq!(reg.resolve("fixer").map(|a| a.id.as_str()), Ok("ab12"));
        // an exact name beats an id prefix
        assert_eq!(reg.resolve("ab").map(|a| a.id.as_str()), Ok("cd56"));
        assert_eq!(reg.resolve("cd").map(|a| a.id.as_str()), Ok("cd56"));
        match reg.resolve("a") {
            Err(ResolveError::Ambiguous { candidates, .. }) => assert_eq!(candidates.len(), 2),
            other => panic!("expected ambiguity, got {other:?}"),
        }
        assert!(matches!(
            reg.resolve("zz"),
            Err(ResolveError::Unknown { .. })
        ));
        assert!(matches!(reg.resolve(""), Err(ResolveError::Unknown { .. })));
    }

    #[test]
    fn names_are_unique_among_live_agents_only() {
        let mut reg = Registry::default();
        let mut old = record("aaaa", "fixer");
        end(&mut old);
        reg.insert(old);
        assert!(reg.check_name("fixer").is_ok());
        reg.insert(record("bbbb", "fixer"));
        assert!(matches!(
            reg.check_name("fixer"),
            Err(NameError::Taken { .. })
        ));
        // the live one wins the name
        assert_eq!(reg.resolve("fixer").map(|a| a.id.as_str()), Ok("bbbb"));
        assert!(reg.check_name("bad name").is_err());
        // `:` is kept for MACHINE:ID: refused for new names, kept for old ones.
        assert!(matches!(
            reg.check_name("a:b"),
            Err(NameError::Invalid { why, .. }) if why.contains("MACHINE:ID")
        ));
        assert!(reg.check_kept_name("a:b").is_ok());
        assert_eq!(reg.default_name(&["/bin/x:y".into()]), "xy");
        assert!(reg.check_name("bbbb").is_err());
        assert_eq!(reg.default_name(&["/bin/fixer".into()]), "fixer-2");
    }

    #[test]
    fn new_ids_avoid_taken_ones() {
        let mut reg = Registry::default();
        let first = reg.new_id(&[0, 1, 2, 3, 4, 5, 6, 7], 4);
        assert_eq!(first.as_deref(), Some("abcd"));
        reg.insert(record("abcd", "x"));
        assert_eq!(
            reg.new_id(&[0, 1, 2, 3, 4, 5, 6, 7], 4).as_deref(),
            Some("efgh")
        );
        assert_eq!(reg.new_id(&[0, 1, 2, 3], 4), None);
    }

    #[test]
    fn a_launch_under_way_holds_its_id_and_name() {
        let mut reg = Registry::default();
        reg.reserve("abcd", "sh");
        assert!(matches!(reg.check_name("sh"), Err(NameError::Taken { .. })));
        assert!(
            reg.check_name("abcd").is_err(),
            "its id is no name for another"
        );
        assert_eq!(reg.default_name(&["sh".into()]), "sh-2");
        assert_eq!(
            reg.new_id(&[0, 1, 2, 3, 4, 5, 6, 7], 4).as_deref(),
            Some("efgh")
        );
        // Recorded: the record holds them now; a failed launch gives them back.
        reg.insert(record("abcd", "sh"));
        reg.remove("abcd");
        assert!(reg.check_name("sh").is_ok());
        reg.reserve("wxyz", "w");
        reg.release("wxyz");
        assert!(reg.check_name("w").is_ok());
    }

    #[test]
    fn only_old_ended_agents_expire() {
        let mut reg = Registry::default();
        let mut ended = record("aaaa", "a");
        end(&mut ended);
        reg.insert(ended);
        reg.insert(record("bbbb", "b"));
        assert!(reg.expired(1500).is_empty());
        assert_eq!(reg.expired(5000), vec!["aaaa".to_string()]);
    }

    #[test]
    fn ended_state_is_sticky() {
        let mut r = record("aaaa", "a");
        end(&mut r);
        assert_eq!(r.state(), AgentState::Done);
        r.signals.last_output = Some(3000);
        assert!(!r.reevaluate(3000, &ArbiterConfig::default()));
        assert_eq!(r.state(), AgentState::Done);
        assert_eq!(r.view().exit_status, Some(0));
    }

    #[test]
    fn observations_mark_the_agent_dirty_and_durable_ones_the_registry_unsaved() {
        let cfg = ArbiterConfig::default();
        let mut reg = Registry::default();
        reg.insert(record("aaaa", "a"));
        reg.take_dirty();
        reg.mark_saved();
        assert!(reg.observe("aaaa", Observation::Output { at: 1500 }));
        assert!(
            reg.take_dirty().is_empty(),
            "output shows through the state it leads to"
        );
        assert!(
            !reg.is_unsaved(),
            "output is saved with the state change it causes"
        );
        let title = Observation::Title {
            at: 1600,
            title: "fixing".into(),
        };
        assert!(reg.observe("aaaa", title));
        assert_eq!(reg.take_dirty().into_iter().collect::<Vec<_>>(), ["aaaa"]);
        assert!(!reg.is_unsaved());
        // Nothing new: nothing dirty.
        assert!(!reg.observe("aaaa", Observation::Output { at: 1500 }));
        assert!(reg.take_dirty().is_empty());
        assert!(!reg.observe("zzzz", Observation::Bell { at: 1 }));
        // A state change is returned, once, and makes the registry unsaved.
        let moved = reg.reevaluate_all(9000, &cfg);
        assert_eq!(moved.len(), 1);
        assert_eq!(
            (moved[0].before, moved[0].after),
            (AgentState::Working, AgentState::Idle)
        );
        assert!(reg.is_unsaved());
        assert!(reg.reevaluate_all(9000, &cfg).is_empty());
        reg.mark_saved();
        assert!(reg.observe("aaaa", Observation::ProcessGone { at: 9500 }));
        assert!(reg.is_unsaved());
        reg.reevaluate("aaaa", 9500, &cfg);
        assert_eq!(reg.get("aaaa").unwrap().state(), AgentState::Stopped);
        // An ended agent takes no more observations.
        assert!(!reg.observe("aaaa", Observation::Bell { at: 9600 }));
        assert_eq!(reg.get("aaaa").unwrap().signals().last_bell, None);
        assert_eq!(reg.edit("aaaa", |a| a.name.clone()).as_deref(), Some("a"));
        assert_eq!(reg.edit("zzzz", |_| ()), None);
    }
}
