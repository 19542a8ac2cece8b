//! When an agent's screen is read, and what it says: a pane's screen is read once its output
//! settled ([`SCREEN_SETTLE_MS`] after the last output), again when its title changed (at most
//! twice a second, only for agents without hooks or a listing), and classified by the screen
//! rules of its harness (embedded, merged with the user's `rules/NAME.toml`).
//!
//! A tmux pane's screen is its connection's model (`volee_tmux::screen`), fed by the output
//! volee reads anyway, so a read costs no tmux command and the settle time can be short; on a
//! sample ([`MODEL_CHECK_MS`]) the model is compared with tmux's own screen.

use std::collections::HashMap;
use std::path::PathBuf;

use volee_core::{AgentRecord, Millis, Observation, PromptMatch, Registry};
use volee_protocol::ProfileFit;

/// How long after the last output the screen is read for a prompt: longer than the gaps inside
/// one redraw of the real harnesses (docs/benchmarks.md, "Screen models"), so a prompt drawn in
/// several writes is read whole.
pub const SCREEN_SETTLE_MS: u64 = 40;
/// A screen that says `idle` (or `working`) counts only once output has been quiet this long: a TUI
/// shows its idle footer for a moment between redraws of a turn (OpenCode 1.18.33, 74 ms, seen in
/// its conformance test). A prompt (`needs_you`, `failed`) counts at [`SCREEN_SETTLE_MS`].
pub const CALM_SETTLE_MS: u64 = 250;
/// At most one check of a pane's screen model against tmux's screen per agent in this long (a
/// check is one `capture-pane` over the connection: a busy agent costs tmux one every 5 s).
pub const MODEL_CHECK_MS: u64 = 5_000;
/// At most one title-triggered screen read per agent in this long.
const TITLE_READ_MS: u64 = 500;

/// Screen reads and the rules that classify them.
pub struct Screens {
    config_dir: PathBuf,
    /// Compiled screen rules per (harness, measured version).
    rules: HashMap<(String, bool), volee_harness::RuleSet>,
    /// The `last_output` value whose screen was already read, per agent.
    checked: HashMap<String, Millis>,
    /// When each agent's screen was last read because its title changed.
    title_read_at: HashMap<String, Millis>,
    /// When each agent's screen model was last checked against tmux.
    checked_model_at: HashMap<String, Millis>,
    /// When each agent's model was last checked again after a difference.
    rechecked_at: HashMap<String, Millis>,
    /// Screens that said idle or working too soon after their output: read again at
    /// [`CALM_SETTLE_MS`] if no output came since (the output each showed).
    deferred: HashMap<String, Millis>,
}

impl Screens {
    pub fn new(config_dir: PathBuf) -> Screens {
        Screens {
            config_dir,
            rules: HashMap::new(),
            checked: HashMap::new(),
            title_read_at: HashMap::new(),
            checked_model_at: HashMap::new(),
            rechecked_at: HashMap::new(),
            deferred: HashMap::new(),
        }
    }

    /// Does a screen showing the output of `output_at` that says `state` count at `now`? Not
    /// yet for a calm state read sooner than [`CALM_SETTLE_MS`] after its output: it is read
    /// again then (unless more output comes).
    pub fn counts_now(
        &mut self,
        id: &str,
        state: volee_protocol::AgentState,
        output_at: Millis,
        now: Millis,
    ) -> bool {
        use volee_protocol::AgentState::{Idle, Working};
        if matches!(state, Idle | Working) && now < output_at + CALM_SETTLE_MS {
            self.deferred.insert(id.to_string(), output_at);
            return false;
        }
        true
    }

    /// A check found agent `id`'s model different: check once more? At most once in
    /// [`MODEL_CHECK_MS`], so a model that keeps differing costs no more than the checks do.
    pub fn recheck_model(&mut self, id: &str, now: Millis) -> bool {
        once_in(&mut self.rechecked_at, id, now, MODEL_CHECK_MS)
    }

    /// Check agent `id`'s screen model against tmux with this read? The first read does (the
    /// seed and the first output agree), then one in [`MODEL_CHECK_MS`].
    pub fn check_model(&mut self, id: &str, now: Millis) -> bool {
        once_in(&mut self.checked_model_at, id, now, MODEL_CHECK_MS)
    }

    /// When the next settled screen is due to be read.
    pub fn next_due(&self, registry: &Registry) -> Option<Millis> {
        let settled = registry
            .iter()
            .filter(|a| !a.is_ended())
            .filter_map(|a| {
                let out = a.signals().last_output?;
                (self.checked.get(&a.id) != Some(&out)).then_some(out + SCREEN_SETTLE_MS)
            })
            .min();
        let calm = self.deferred.values().map(|out| out + CALM_SETTLE_MS).min();
        settled.into_iter().chain(calm).min()
    }

    /// The agents whose output has settled at `now` and whose screen was not read since, with
    /// the output each screen will show; they count as read.
    pub fn take_due(&mut self, registry: &Registry, now: Millis) -> Vec<(String, Millis)> {
        let due: Vec<(String, Millis)> = registry
            .iter()
            .filter(|a| !a.is_ended())
            .filter_map(|a| {
                let out = a.signals().last_output?;
                (self.checked.get(&a.id) != Some(&out) && now >= out + SCREEN_SETTLE_MS)
                    .then(|| (a.id.clone(), out))
            })
            .collect();
        for (id, out) in &due {
            self.checked.insert(id.clone(), *out);
        }
        // Deferred calm screens whose output is still the newest.
        let mut due = due;
        let calm: Vec<(String, Millis)> = self
            .deferred
            .iter()
            .filter(|(_, out)| now >= **out + CALM_SETTLE_MS)
            .map(|(id, out)| (id.clone(), *out))
            .collect();
        for (id, out) in calm {
            self.deferred.remove(&id);
            let newest = registry
                .get(&id)
                .filter(|a| !a.is_ended())
                .and_then(|a| a.signals().last_output);
            if newest == Some(out) && !due.iter().any(|(d, _)| *d == id) {
                due.push((id, out));
            }
        }
        due
    }

    /// The screen of an agent watched from now on, dated by the last output volee saw (else
    /// `now`) so it never outranks a newer hook; None while output is still settling (the
    /// settled read follows).
    pub fn initial_read(agent: &AgentRecord, now: Millis) -> Option<Millis> {
        let out = agent.signals().last_output;
        if out.is_some_and(|o| now < o + SCREEN_SETTLE_MS) {
            return None;
        }
        Some(out.unwrap_or(now))
    }

    /// A title changed: read the screen too? Titles carry state (Codex's "[ ! ] Action
    /// Required"), but only for agents without hooks or a listing (those mark turns better, and a
    /// screen read right after a hook may still show the screen before it), at most twice a
    /// second.
    pub fn read_on_title(&mut self, agent: &AgentRecord, now: Millis) -> bool {
        let hookless = agent.signals().hook.is_none() && agent.signals().listing.is_none();
        hookless && once_in(&mut self.title_read_at, &agent.id, now, TITLE_READ_MS)
    }

    /// Read agent `id`'s screen again once its output settles (its rules or title changed).
    pub fn read_again(&mut self, id: &str) {
        self.checked.remove(id);
    }

    /// What a screen of `agent`, showing its output of `output_at`, says: a prompt or state
    /// matched by its rules, dated by that output (a hook that came in between is newer than
    /// this screen), or by its title for a title rule (Gemini's "Working…" title outlives the
    /// permission hook by more than a second under load).
    pub fn classify(
        &mut self,
        agent: &AgentRecord,
        text: &str,
        output_at: Millis,
    ) -> Option<Observation> {
        let (title_at, title) = agent.signals().title.clone().unwrap_or_default();
        let measured = agent.profile_fit == ProfileFit::Measured;
        let m = self
            .rules_for(&agent.harness, measured)
            .classify(text, &title)?;
        let at = if m.from_title {
            title_at.min(output_at)
        } else {
            output_at
        };
        Some(Observation::Screen(PromptMatch {
            at,
            rule: m.rule,
            text: m.text,
            state: m.state,
            reason: m.reason,
        }))
    }

    /// The screen rules for an agent: the embedded ones of its harness (generic ones outside the
    /// measured versions), merged with `rules/<name>.toml` from the config dir when present (a
    /// rule with the same id replaces the embedded one).
    fn rules_for(&mut self, harness: &str, measured: bool) -> &volee_harness::RuleSet {
        let config_dir = &self.config_dir;
        self.rules
            .entry((harness.to_string(), measured))
            .or_insert_with(|| {
                let embedded = volee_harness::screen_rules(harness, measured);
                let name = if measured { harness } else { "generic" };
                let user = config_dir.join("rules").join(format!("{name}.toml"));
                let Ok(text) = std::fs::read_to_string(&user) else {
                    return embedded;
                };
                match volee_harness::RuleSet::from_toml(&text, &user.display().to_string()) {
                    Ok(overrides) => {
                        tracing::info!(
                            "screen rules of {name}: using overrides from {}",
                            user.display()
                        );
                        volee_harness::RuleSet::merged(&embedded, &overrides)
                    }
                    Err(e) => {
                        tracing::error!("ignoring {}: {e}", user.display());
                        embedded
                    }
                }
            })
    }

    /// Agent `id` is gone.
    pub fn forget(&mut self, id: &str) {
        self.checked.remove(id);
        self.title_read_at.remove(id);
        self.checked_model_at.remove(id);
        self.rechecked_at.remove(id);
        self.deferred.remove(id);
    }
}

/// True at most once per `every` ms per agent (`last` keeps when it last was).
fn once_in(last: &mut HashMap<String, Millis>, id: &str, now: Millis, every: Millis) -> bool {
    let due = last.get(id).is_none_or(|&at| now >= at + every);
    if due {
        last.insert(id.to_string(), now);
    }
    due
}
