//! The state arbiter: observations in, one state with its source and evidence out.
//!
//! Pure: the caller passes the clock (`now`, epoch milliseconds) so every rule is testable and
//! `volee explain` can replay the decision exactly.

use serde::{Deserialize, Serialize};
use volee_protocol::{AgentState, Reason, StateSource};

/// Epoch milliseconds.
pub type Millis = u64;

/// Tunables of the generic rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArbiterConfig {
    /// Output within this window means `working` (ARCHITECTURE.md section 4: ~2 s).
    pub working_window_ms: u64,
}

impl Default for ArbiterConfig {
    fn default() -> Self {
        ArbiterConfig {
            working_window_ms: 2000,
        }
    }
}

/// A screen rule that matched the pane's text or title.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptMatch {
    pub at: Millis,
    /// Rule id from the profile (`generic.yes-no`).
    pub rule: String,
    /// The matched text (agent-controlled).
    pub text: String,
    /// The state the rule means (older registries only held prompts).
    #[serde(default = "needs_you")]
    pub state: AgentState,
    /// Why, as the rule says (`reason = "usage_limit"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
}

fn needs_you() -> AgentState {
    AgentState::NeedsYou
}

/// The latest hook event that meant a state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookSignal {
    pub at: Millis,
    /// The harness's event name (`PermissionRequest`).
    pub event: String,
    pub state: AgentState,
    /// Why, as the profile's hook row (or the listing) says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
}

/// How the agent's process ended, as the multiplexer reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitFact {
    pub at: Millis,
    /// Exit status when it exited normally.
    pub status: Option<i32>,
    /// Signal number when it was killed.
    pub signal: Option<i32>,
}

/// Everything observed about one agent, latest per kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signals {
    /// Last output that was more than a bare bell.
    pub last_output: Option<Millis>,
    pub last_bell: Option<Millis>,
    pub prompt: Option<PromptMatch>,
    /// Latest state-bearing hook event (harness profiles).
    #[serde(default)]
    pub hook: Option<HookSignal>,
    /// Latest change of the harness's own status file (`listing` source).
    #[serde(default)]
    pub listing: Option<HookSignal>,
    pub title: Option<(Millis, String)>,
    pub exit: Option<ExitFact>,
    /// `volee stop` asked for it.
    pub stop_requested: Option<Millis>,
    /// Its pane or window disappeared without an exit status (the user killed it).
    pub pane_gone: Option<Millis>,
    /// A discovered agent's process is gone (volee cannot read its exit status).
    #[serde(default)]
    pub process_gone: Option<Millis>,
    /// Its multiplexer server is gone.
    pub host_lost: Option<Millis>,
    /// The daemon stopped during its launch, before the pane got its command: it never ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_interrupted: Option<Millis>,
    /// A hook that ends the session came (`SessionEnd`): a process that dies after it did not
    /// die silently.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_end: Option<Millis>,
    /// Its hooks work and its profile has one that ends the session: dying without it is dying
    /// silently.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub expects_session_end: bool,
    /// Its usage reached its budget: volee interrupted its turn and holds it (`needs_you`)
    /// until the budget is raised or taken off; when, and what it used of what.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_hold: Option<(Millis, String)>,
}

/// The arbiter's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    pub state: AgentState,
    pub source: StateSource,
    /// When the evidence for this state appeared (the transition time).
    pub at: Millis,
    /// Short evidence: `bell`, `exit 3`, `rule generic.yes-no: "Continue? [y/N]"`.
    pub evidence: String,
    /// The rule that decided, in one sentence, for `volee explain`.
    pub rule: String,
    /// When the decision may change without a new observation (working → idle).
    pub recheck_at: Option<Millis>,
    /// Why, for `failed` and `needs_you` (None for the other states).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
}

/// Exit status and signal of a dead process, as `exit_status` in the agent object shows them
/// (signals as 128 + number, the shell convention).
pub fn exit_status_of(exit: &ExitFact) -> Option<i32> {
    match (exit.status, exit.signal) {
        (_, Some(sig)) => Some(128 + sig),
        (Some(status), None) => Some(status),
        (None, None) => None,
    }
}

/// Decide the state of an agent started at `created` from its signals at time `now`.
pub fn decide(signals: &Signals, created: Millis, now: Millis, cfg: &ArbiterConfig) -> Decision {
    if let Some(d) = decide_final(signals) {
        return d;
    }
    // Held at its budget: whatever the harness shows after the interrupt, it waits for the user.
    if let Some((at, evidence)) = &signals.budget_hold {
        return Decision {
            state: AgentState::NeedsYou,
            source: StateSource::Listing,
            at: *at,
            evidence: evidence.clone(),
            rule: "its harness's own record of its tokens reached its budget: volee interrupted \
                   its turn and types nothing more until `volee budget ID +AMOUNT` or `off`"
                .into(),
            recheck_at: None,
            reason: Some(Reason::Budget),
        };
    }
    // Hooks and the harness's status file both report turn boundaries: the newer one counts
    // (a tie goes to the hook, the more direct report) — except that the status file's `idle`
    // never ends a turn a hook says is running or failed: Claude writes `idle` for a moment
    // between a tool's end and the model's next step (seen in the conformance runs); `Stop`, or a
    // screen rule, ends the turn.
    let listing_counts = |h: &HookSignal, l: &HookSignal| {
        l.at > h.at
            && !(l.state == AgentState::Idle
                && matches!(h.state, AgentState::Working | AgentState::Failed))
    };
    let reported = match (&signals.hook, &signals.listing) {
        (Some(h), Some(l)) if listing_counts(h, l) => Some((l, StateSource::Listing)),
        (Some(h), _) => Some((h, StateSource::Hooks)),
        (None, Some(l)) => Some((l, StateSource::Listing)),
        (None, None) => None,
    };
    if let Some((report, source)) = reported {
        return decide_hooked(signals, report, source);
    }
    let last_output = signals.last_output;
    let active_since = last_output.unwrap_or(created).max(created);

    // needs_you needs positive evidence newer than the last output; silence never implies it.
    let bell = signals
        .last_bell
        .filter(|&b| last_output.is_none_or(|o| b >= o));
    let prompt = signals
        .prompt
        .as_ref()
        .filter(|p| last_output.is_none_or(|o| p.at >= o));
    // A screen rule for another state (a title that says working, a failed turn on screen).
    if let Some(p) = prompt.filter(|p| p.state != AgentState::NeedsYou) {
        if bell.is_none_or(|b| b < p.at) {
            return screen_decision(p);
        }
    }
    let prompt = prompt.filter(|p| p.state == AgentState::NeedsYou);
    match (bell, prompt) {
        (Some(b), Some(p)) if p.at < b => return prompt_decision(p),
        (Some(b), _) => {
            return Decision {
                state: AgentState::NeedsYou,
                source: StateSource::Multiplexer,
                at: b,
                evidence: "bell".into(),
                rule: "the pane rang the bell after its last output; new output clears it".into(),
                recheck_at: None,
                reason: Some(Reason::Bell),
            }
        }
        (None, Some(p)) => return prompt_decision(p),
        (None, None) => {}
    }

    let quiet_at = active_since.saturating_add(cfg.working_window_ms);
    if now < quiet_at {
        let (evidence, rule) = if last_output.is_some() {
            (
                "output",
                "the pane printed output within the working window",
            )
        } else {
            ("launched", "the agent started within the working window")
        };
        Decision {
            state: AgentState::Working,
            source: StateSource::Multiplexer,
            at: active_since,
            evidence: evidence.into(),
            rule: format!("{rule} ({} ms)", cfg.working_window_ms),
            recheck_at: Some(quiet_at),
            reason: None,
        }
    } else {
        Decision {
            state: AgentState::Idle,
            source: StateSource::Multiplexer,
            at: quiet_at,
            evidence: "silence".into(),
            rule: format!(
                "no output for {} ms and no prompt or bell",
                cfg.working_window_ms
            ),
            recheck_at: None,
            reason: None,
        }
    }
}

fn prompt_decision(p: &PromptMatch) -> Decision {
    Decision {
        state: AgentState::NeedsYou,
        source: StateSource::Screen,
        at: p.at,
        evidence: format!("rule {}: {:?}", p.rule, p.text),
        rule: "the screen shows a known prompt; new output clears it".into(),
        recheck_at: None,
        reason: reason_for(AgentState::NeedsYou, p.reason),
    }
}

fn screen_decision(p: &PromptMatch) -> Decision {
    Decision {
        state: p.state,
        source: StateSource::Screen,
        at: p.at,
        evidence: format!("rule {}: {:?}", p.rule, p.text),
        rule: format!("screen rule {} says {}", p.rule, p.state),
        recheck_at: None,
        reason: reason_for(p.state, p.reason),
    }
}

/// An agent whose harness reports hooks: hooks mark turn boundaries; a screen rule or bell seen
/// *after* the latest hook corrects it (Claude's Stop does not fire on Esc or API errors, Codex
/// has no failure hook). Output activity alone never overrides a hook: TUIs redraw constantly.
fn decide_hooked(signals: &Signals, hook: &HookSignal, source: StateSource) -> Decision {
    // A newer screen corrects a turn boundary the hooks missed (Claude fires nothing on Esc or an
    // API error) — but a screen that says `working` never ends one the hooks or the status file
    // reported: spinners and titles linger for a moment after a turn ends (Qwen's after Stop,
    // Gemini's "Working…" title after its permission notification), and every turn start has a
    // hook of its own.
    let screen = signals.prompt.as_ref().filter(|p| {
        p.at > hook.at && !(p.state == AgentState::Working && hook.state != AgentState::Working)
    });
    let bell = signals
        .last_bell
        .filter(|&b| b > hook.at && screen.is_none_or(|p| b > p.at));
    if let Some(b) = bell {
        return Decision {
            state: AgentState::NeedsYou,
            source: StateSource::Multiplexer,
            at: b,
            evidence: "bell".into(),
            rule: "the pane rang the bell after the last hook event".into(),
            recheck_at: None,
            reason: Some(Reason::Bell),
        };
    }
    if let Some(p) = screen {
        let mut d = screen_decision(p);
        d.rule = format!(
            "screen rule {} (newer than hook {}) says {}",
            p.rule, hook.event, p.state
        );
        return d;
    }
    let (evidence, rule) = match source {
        StateSource::Listing => (
            format!("listing {}", hook.event),
            format!("the harness's status file says {}", hook.event),
        ),
        _ => (
            format!("hook {}", hook.event),
            format!(
                "the harness reported {} (hooks mark turn boundaries)",
                hook.event
            ),
        ),
    };
    Decision {
        state: hook.state,
        source,
        at: hook.at,
        evidence,
        rule,
        recheck_at: None,
        reason: reason_for(hook.state, hook.reason),
    }
}

/// Exit facts win over everything else.
fn decide_final(signals: &Signals) -> Option<Decision> {
    // The cause comes first: the pane's own exit (volee pane-exec giving up) follows from it.
    if let Some(at) = signals.launch_interrupted {
        return Some(Decision {
            state: AgentState::Failed,
            source: StateSource::Process,
            at,
            evidence: "launch interrupted".into(),
            rule: "the volee daemon stopped during the launch, before the command started".into(),
            recheck_at: None,
            reason: Some(Reason::CrashedSilently),
        });
    }
    if let Some(stop) = signals.stop_requested {
        if signals.exit.is_some()
            || signals.pane_gone.is_some()
            || signals.host_lost.is_some()
            || signals.process_gone.is_some()
        {
            return Some(Decision {
                state: AgentState::Stopped,
                source: StateSource::Process,
                at: stop,
                evidence: "volee stop".into(),
                rule: "ended through volee stop".into(),
                recheck_at: None,
                reason: None,
            });
        }
    }
    if let Some(exit) = &signals.exit {
        // A harness that reports hooks says when its session ends: dying without that, it died
        // silently (a crash, SIGKILL, the OOM killer).
        let silent = signals.expects_session_end && signals.session_end.is_none();
        let (state, evidence, rule, reason) = match (exit.status, exit.signal) {
            (_, Some(sig)) if silent => (
                AgentState::Failed,
                format!("killed by signal {sig}, no session-end hook"),
                "killed by a signal volee did not send, and its harness never said its session ended",
                Reason::CrashedSilently,
            ),
            (_, Some(sig)) => (
                AgentState::Failed,
                format!("killed by signal {sig}"),
                "killed by a signal volee did not send",
                Reason::Killed,
            ),
            (Some(0), None) => (
                AgentState::Done,
                "exit 0".to_string(),
                "the process exited with status 0",
                Reason::ExitNonzero,
            ),
            (Some(code), None) => (
                AgentState::Failed,
                format!("exit {code}"),
                "the process exited with a non-zero status",
                Reason::ExitNonzero,
            ),
            (None, None) => (
                AgentState::Failed,
                "exit (status unknown)".to_string(),
                "the process ended and its status could not be read",
                Reason::CrashedSilently,
            ),
        };
        return Some(Decision {
            state,
            source: StateSource::Multiplexer,
            at: exit.at,
            evidence,
            rule: rule.into(),
            recheck_at: None,
            reason: reason_for(state, Some(reason)),
        });
    }
    if let Some(gone) = signals.process_gone {
        return Some(Decision {
            state: AgentState::Stopped,
            source: StateSource::Process,
            at: gone,
            evidence: "process gone".into(),
            rule: "the discovered process ended; volee did not start it, so its exit status is unknown"
                .into(),
            recheck_at: None,
            reason: None,
        });
    }
    if let Some(gone) = signals.pane_gone {
        return Some(Decision {
            state: AgentState::Stopped,
            source: StateSource::Multiplexer,
            at: gone,
            evidence: "pane closed".into(),
            rule: "its pane or window was killed before the process reported an exit".into(),
            recheck_at: None,
            reason: None,
        });
    }
    if let Some(lost) = signals.host_lost {
        return Some(Decision {
            state: AgentState::Stopped,
            source: StateSource::Multiplexer,
            at: lost,
            evidence: "tmux server gone".into(),
            rule: "its multiplexer server is no longer running".into(),
            recheck_at: None,
            reason: None,
        });
    }
    None
}

/// The reason a decision for `state` carries: the one its evidence gave, or the default of the
/// state (a prompt is a question, a failed turn an API error); none for other states.
fn reason_for(state: AgentState, given: Option<Reason>) -> Option<Reason> {
    match state {
        AgentState::NeedsYou => Some(
            given
                .filter(|r| r.state() == AgentState::NeedsYou)
                .unwrap_or(Reason::Question),
        ),
        AgentState::Failed => Some(
            given
                .filter(|r| r.state() == AgentState::Failed)
                .unwrap_or(Reason::ApiError),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CFG: ArbiterConfig = ArbiterConfig {
        working_window_ms: 2000,
    };

    fn signals() -> Signals {
        Signals::default()
    }

    #[test]
    fn fresh_agent_is_working_then_idle() {
        let s = signals();
        let d = decide(&s, 1000, 1500, &CFG);
        assert_eq!(d.state, AgentState::Working);
        assert_eq!(d.recheck_at, Some(3000));
        let d = decide(&s, 1000, 3000, &CFG);
        assert_eq!(d.state, AgentState::Idle);
        assert_eq!(d.at, 3000);
        assert_eq!(d.evidence, "silence");
    }

    #[test]
    fn output_keeps_it_working() {
        let s = Signals {
            last_output: Some(5000),
            ..signals()
        };
        assert_eq!(decide(&s, 1000, 6999, &CFG).state, AgentState::Working);
        assert_eq!(decide(&s, 1000, 7000, &CFG).state, AgentState::Idle);
    }

    #[test]
    fn bell_means_needs_you_until_new_output() {
        let mut s = Signals {
            last_output: Some(5000),
            last_bell: Some(5000),
            ..signals()
        };
        let d = decide(&s, 1000, 9000, &CFG);
        assert_eq!(d.state, AgentState::NeedsYou);
        assert_eq!(d.source, StateSource::Multiplexer);
        assert_eq!(d.evidence, "bell");
        s.last_output = Some(9100);
        assert_eq!(decide(&s, 1000, 9200, &CFG).state, AgentState::Working);
    }

    #[test]
    fn prompt_line_means_needs_you() {
        let s = Signals {
            last_output: Some(5000),
            prompt: Some(PromptMatch {
                reason: None,
                at: 5200,
                rule: "generic.yes-no".into(),
                text: "Continue? [y/N]".into(),
                state: AgentState::NeedsYou,
            }),
            ..signals()
        };
        let d = decide(&s, 1000, 5300, &CFG);
        assert_eq!(d.state, AgentState::NeedsYou);
        assert_eq!(d.source, StateSource::Screen);
        assert!(d.evidence.contains("generic.yes-no"));
    }

    #[test]
    fn stale_prompt_does_not_count() {
        let s = Signals {
            last_output: Some(6000),
            prompt: Some(PromptMatch {
                reason: None,
                at: 5200,
                rule: "generic.yes-no".into(),
                text: "x".into(),
                state: AgentState::NeedsYou,
            }),
            ..signals()
        };
        assert_eq!(decide(&s, 1000, 6100, &CFG).state, AgentState::Working);
    }

    #[test]
    fn exits_decide_done_failed_stopped() {
        let exit = |status, signal| Signals {
            exit: Some(ExitFact {
                at: 7000,
                status,
                signal,
            }),
            last_bell: Some(6000),
            ..signals()
        };
        assert_eq!(
            decide(&exit(Some(0), None), 0, 8000, &CFG).state,
            AgentState::Done
        );
        let failed = decide(&exit(Some(3), None), 0, 8000, &CFG);
        assert_eq!(failed.state, AgentState::Failed);
        assert_eq!(failed.evidence, "exit 3");
        assert_eq!(
            decide(&exit(None, Some(9)), 0, 8000, &CFG).state,
            AgentState::Failed
        );
        let mut stopped = exit(None, Some(15));
        stopped.stop_requested = Some(6900);
        assert_eq!(decide(&stopped, 0, 8000, &CFG).state, AgentState::Stopped);
        let gone = Signals {
            pane_gone: Some(7000),
            ..signals()
        };
        assert_eq!(decide(&gone, 0, 8000, &CFG).state, AgentState::Stopped);
    }

    #[test]
    fn an_interrupted_launch_failed_whatever_the_pane_did() {
        let s = Signals {
            launch_interrupted: Some(7000),
            last_output: Some(6000),
            exit: Some(ExitFact {
                at: 7100,
                status: Some(4),
                signal: None,
            }),
            ..signals()
        };
        let d = decide(&s, 0, 8000, &CFG);
        assert_eq!(
            (d.state, d.evidence.as_str(), d.at),
            (AgentState::Failed, "launch interrupted", 7000)
        );
    }

    #[test]
    fn stop_request_alone_is_not_final() {
        let s = Signals {
            stop_requested: Some(5000),
            last_output: Some(4900),
            ..signals()
        };
        assert_eq!(decide(&s, 0, 5100, &CFG).state, AgentState::Working);
    }

    fn hook(at: Millis, event: &str, state: AgentState) -> Option<HookSignal> {
        Some(HookSignal {
            reason: None,
            at,
            event: event.into(),
            state,
        })
    }

    /// `failed` and `needs_you` carry why; the other states none.
    #[test]
    fn reasons_come_from_the_evidence_or_the_states_default() {
        use Reason::*;
        let reason = |s: &Signals| decide(s, 0, 100_000, &CFG).reason;
        assert_eq!(reason(&Signals::default()), None, "idle has none");
        let bell = Signals {
            last_output: Some(10),
            last_bell: Some(20),
            ..Signals::default()
        };
        assert_eq!(reason(&bell), Some(Bell));
        let screen = |state, given| Signals {
            prompt: Some(PromptMatch {
                at: 30,
                rule: "x.y".into(),
                text: "t".into(),
                state,
                reason: given,
            }),
            ..Signals::default()
        };
        assert_eq!(reason(&screen(AgentState::NeedsYou, None)), Some(Question));
        assert_eq!(
            reason(&screen(AgentState::NeedsYou, Some(Permission))),
            Some(Permission)
        );
        assert_eq!(reason(&screen(AgentState::Failed, None)), Some(ApiError));
        assert_eq!(
            reason(&screen(AgentState::Failed, Some(UsageLimit))),
            Some(UsageLimit)
        );
        // A reason of the other state is not taken.
        assert_eq!(
            reason(&screen(AgentState::Failed, Some(Login))),
            Some(ApiError)
        );
        assert_eq!(reason(&screen(AgentState::Idle, Some(Login))), None);
        let mut hooked = Signals {
            hook: Some(HookSignal {
                at: 40,
                event: "PermissionRequest".into(),
                state: AgentState::NeedsYou,
                reason: Some(Permission),
            }),
            ..Signals::default()
        };
        assert_eq!(reason(&hooked), Some(Permission));
        hooked.budget_hold = Some((50, "budget reached: 9 of 5 tokens".into()));
        assert_eq!(reason(&hooked), Some(Budget));
        // Endings.
        let exit = |status, signal| ExitFact {
            at: 60,
            status,
            signal,
        };
        let mut ended = Signals {
            exit: Some(exit(Some(3), None)),
            ..Signals::default()
        };
        assert_eq!(reason(&ended), Some(ExitNonzero));
        ended.exit = Some(exit(Some(0), None));
        assert_eq!(reason(&ended), None, "done has none");
        ended.exit = Some(exit(None, Some(9)));
        assert_eq!(reason(&ended), Some(Killed), "no hooks: a kill is a kill");
        // A harness whose hooks work and that has a session-end hook: dead without it is silent.
        ended.expects_session_end = true;
        let d = decide(&ended, 0, 100_000, &CFG);
        assert_eq!(d.reason, Some(CrashedSilently));
        assert!(d.evidence.contains("no session-end hook"), "{}", d.evidence);
        ended.session_end = Some(55);
        assert_eq!(reason(&ended), Some(Killed));
    }

    #[test]
    fn hooks_win_over_output_activity() {
        let s = Signals {
            last_output: Some(9000),
            hook: hook(5000, "PermissionRequest", AgentState::NeedsYou),
            ..signals()
        };
        let d = decide(&s, 0, 9100, &CFG);
        assert_eq!(d.state, AgentState::NeedsYou);
        assert_eq!(d.source, StateSource::Hooks);
        assert_eq!(d.evidence, "hook PermissionRequest");
    }

    #[test]
    fn newer_screen_rule_corrects_a_hook() {
        // Claude: no Stop on an API error; the screen shows the failed turn.
        let s = Signals {
            hook: hook(5000, "UserPromptSubmit", AgentState::Working),
            prompt: Some(PromptMatch {
                reason: None,
                at: 6000,
                rule: "claude.api-error".into(),
                text: "API Error".into(),
                state: AgentState::Failed,
            }),
            ..signals()
        };
        let d = decide(&s, 0, 7000, &CFG);
        assert_eq!(d.state, AgentState::Failed);
        assert_eq!(d.source, StateSource::Screen);
        // A later hook (a new turn) clears it.
        let mut s2 = s.clone();
        s2.hook = hook(8000, "UserPromptSubmit", AgentState::Working);
        assert_eq!(decide(&s2, 0, 8100, &CFG).state, AgentState::Working);
    }

    #[test]
    fn screen_rule_for_working_applies_without_hooks() {
        let s = Signals {
            last_output: Some(5000),
            prompt: Some(PromptMatch {
                reason: None,
                at: 5300,
                rule: "codex.title-working".into(),
                text: "⠏ task | codex".into(),
                state: AgentState::Working,
            }),
            ..signals()
        };
        assert_eq!(decide(&s, 0, 9000, &CFG).state, AgentState::Working);
        assert_eq!(decide(&s, 0, 9000, &CFG).source, StateSource::Screen);
    }

    #[test]
    fn a_lingering_working_screen_never_ends_a_reported_turn_boundary() {
        let cfg = ArbiterConfig::default();
        let prompt = |at, state| {
            Some(PromptMatch {
                reason: None,
                at,
                rule: "x.spinner".into(),
                text: String::new(),
                state,
            })
        };
        // Stop said idle; a spinner still on screen 600 ms later does not make it working.
        let s = Signals {
            hook: hook(5000, "Stop", AgentState::Idle),
            prompt: prompt(5600, AgentState::Working),
            ..Signals::default()
        };
        assert_eq!(decide(&s, 0, 6000, &cfg).state, AgentState::Idle);
        // Nor after a permission notification.
        let s = Signals {
            hook: hook(5000, "Notification", AgentState::NeedsYou),
            prompt: prompt(5600, AgentState::Working),
            ..Signals::default()
        };
        assert_eq!(decide(&s, 0, 6000, &cfg).state, AgentState::NeedsYou);
        // A newer idle screen still corrects a hook that said working (Esc fires no hook).
        let s = Signals {
            hook: hook(5000, "UserPromptSubmit", AgentState::Working),
            prompt: prompt(5600, AgentState::Idle),
            ..Signals::default()
        };
        assert_eq!(decide(&s, 0, 6000, &cfg).state, AgentState::Idle);
    }

    #[test]
    fn the_newer_of_hook_and_listing_decides() {
        let s = Signals {
            hook: hook(5000, "Stop", AgentState::Idle),
            listing: hook(
                6000,
                "status waiting (permission prompt)",
                AgentState::NeedsYou,
            ),
            ..signals()
        };
        let d = decide(&s, 0, 7000, &CFG);
        assert_eq!(d.state, AgentState::NeedsYou);
        assert_eq!(d.source, StateSource::Listing);
        let mut s2 = s.clone();
        s2.hook = hook(6500, "UserPromptSubmit", AgentState::Working);
        assert_eq!(decide(&s2, 0, 7000, &CFG).source, StateSource::Hooks);
    }

    #[test]
    fn a_listed_idle_does_not_end_a_running_turn() {
        let s = Signals {
            hook: hook(5000, "PostToolUse", AgentState::Working),
            listing: hook(5100, "status idle", AgentState::Idle),
            ..signals()
        };
        assert_eq!(decide(&s, 0, 5200, &CFG).state, AgentState::Working);
        // After a permission prompt, though (denied with Esc: no hook), it does.
        let mut s2 = s.clone();
        s2.hook = hook(5000, "PermissionRequest", AgentState::NeedsYou);
        assert_eq!(decide(&s2, 0, 5200, &CFG).state, AgentState::Idle);
    }

    #[test]
    fn exit_status_uses_shell_convention_for_signals() {
        let e = ExitFact {
            at: 0,
            status: None,
            signal: Some(9),
        };
        assert_eq!(exit_status_of(&e), Some(137));
    }
}
