//! Observations: the one way anything seen about an agent reaches its [`Signals`].
//!
//! Every source — the multiplexer's output, bells, titles and exit reports, screen rules, hooks,
//! the harnesses' own listings, `/proc`, `volee stop` — hands the registry an [`Observation`]
//! with its time ([`crate::Registry::observe`]). The rules for merging it live here, once: an
//! older report never undoes a newer one, a repeated listing report keeps the time it first
//! said so, the first ending counts.

use volee_protocol::AgentState;

use crate::arbiter::{ExitFact, HookSignal, Millis, PromptMatch, Signals};

/// One thing seen about one agent, dated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observation {
    /// Pane output that was more than a bare bell (and not the echo of text volee typed).
    Output { at: Millis },
    /// A bare BEL, or a bell in a tab the user does not see.
    Bell { at: Millis },
    /// The pane's (or tab's) title.
    Title { at: Millis, title: String },
    /// A screen rule matched what the pane shows; dated by the output the screen shows.
    Screen(PromptMatch),
    /// A state-bearing hook event, dated when the hook ran.
    Hook(HookSignal),
    /// The harness wrote its own status (a status file): every write is a new report, dated by
    /// the write.
    Listing(HookSignal),
    /// A listing asked for the agent's state (Codex's app server each second, OpenCode's event
    /// stream and its snapshots): the same answer again keeps the time it was first given.
    ListingPoll(HookSignal),
    /// The multiplexer reported how the agent's process ended.
    Exit(ExitFact),
    /// Its pane or window disappeared without an exit status.
    PaneGone { at: Millis },
    /// A discovered agent's process is gone (or its pid is another process now).
    ProcessGone { at: Millis },
    /// Its multiplexer server is gone.
    HostLost { at: Millis },
    /// `volee stop` asked for it.
    StopRequested { at: Millis },
    /// The daemon stopped during its launch, before the pane got its command.
    LaunchInterrupted { at: Millis },
    /// Its usage reached its budget (`evidence`: what of what), or — None — the budget was
    /// raised or taken off.
    Budget { at: Millis, hold: Option<String> },
    /// A hook that ends the session (its profile's row says `ends_session`).
    SessionEnd { at: Millis },
    /// A hook came from a harness whose profile has a session-ending one: its death without
    /// that hook is silent.
    ExpectsSessionEnd { at: Millis },
}

impl Observation {
    /// Worth writing `agents.json` for at once. Output, bells, titles and screens change often;
    /// they are saved with the state change they cause.
    pub fn is_durable(&self) -> bool {
        !matches!(
            self,
            Observation::Output { .. }
                | Observation::Bell { .. }
                | Observation::Title { .. }
                | Observation::Screen(_)
        )
    }

    /// Shows in the agent's view by itself (its title, its ending). Output, bells and screens
    /// show only through the state they lead to, which marks the agent dirty when it changes:
    /// a chunk of output does not redraw every status line.
    pub fn shows_in_view(&self) -> bool {
        matches!(self, Observation::Title { .. }) || self.is_durable()
    }

    /// When it was seen.
    pub fn at(&self) -> Millis {
        match self {
            Observation::Output { at }
            | Observation::Bell { at }
            | Observation::Title { at, .. }
            | Observation::PaneGone { at }
            | Observation::ProcessGone { at }
            | Observation::HostLost { at }
            | Observation::StopRequested { at }
            | Observation::LaunchInterrupted { at }
            | Observation::SessionEnd { at }
            | Observation::ExpectsSessionEnd { at }
            | Observation::Budget { at, .. } => *at,
            Observation::Screen(p) => p.at,
            Observation::Hook(h) | Observation::Listing(h) | Observation::ListingPoll(h) => h.at,
            Observation::Exit(e) => e.at,
        }
    }
}

impl Signals {
    /// Merge one observation; true when the signals changed.
    pub fn apply(&mut self, observation: Observation) -> bool {
        match observation {
            Observation::Output { at } => newest(&mut self.last_output, at),
            Observation::Bell { at } => newest(&mut self.last_bell, at),
            Observation::Title { at, title } => {
                if self.title.as_ref().is_some_and(|(_, t)| *t == title) {
                    return false;
                }
                self.title = Some((at, title));
                true
            }
            Observation::Screen(m) => {
                // Two reads of the screen can come back out of order: the one showing older
                // output never replaces the newer one.
                if self.prompt.as_ref().is_some_and(|p| p.at > m.at)
                    || self.prompt == Some(m.clone())
                {
                    return false;
                }
                self.prompt = Some(m);
                true
            }
            Observation::Hook(h) => {
                // Spooled events replay in order after live ones: never let an older one undo a
                // newer one.
                if self.hook.as_ref().is_some_and(|old| old.at > h.at) {
                    return false;
                }
                self.hook = Some(h);
                true
            }
            Observation::Listing(l) => {
                if self
                    .listing
                    .as_ref()
                    .is_some_and(|old| old.at > l.at || *old == l)
                {
                    return false;
                }
                self.listing = Some(l);
                true
            }
            Observation::ListingPoll(l) => {
                let stale = self
                    .listing
                    .as_ref()
                    .is_some_and(|old| same_report(old, &l) || old.at > l.at);
                if stale {
                    return false;
                }
                self.listing = Some(l);
                true
            }
            Observation::Exit(e) => first(&mut self.exit, e),
            Observation::PaneGone { at } => first(&mut self.pane_gone, at),
            Observation::ProcessGone { at } => first(&mut self.process_gone, at),
            Observation::HostLost { at } => first(&mut self.host_lost, at),
            Observation::LaunchInterrupted { at } => first(&mut self.launch_interrupted, at),
            Observation::SessionEnd { at } => first(&mut self.session_end, at),
            Observation::ExpectsSessionEnd { .. } => {
                !std::mem::replace(&mut self.expects_session_end, true)
            }
            Observation::StopRequested { at } => newest(&mut self.stop_requested, at),
            Observation::Budget { at, hold } => {
                let new = hold.map(|evidence| (at, evidence));
                if self.budget_hold.as_ref().map(|(_, e)| e) == new.as_ref().map(|(_, e)| e) {
                    return false;
                }
                self.budget_hold = new;
                true
            }
        }
    }
}

fn same_report(old: &HookSignal, new: &HookSignal) -> bool {
    old.event == new.event && old.state == new.state
}

/// Keep the later time.
fn newest(slot: &mut Option<Millis>, at: Millis) -> bool {
    if slot.is_some_and(|old| old >= at) {
        return false;
    }
    *slot = Some(at);
    true
}

/// Keep the first fact.
fn first<T>(slot: &mut Option<T>, value: T) -> bool {
    if slot.is_some() {
        return false;
    }
    *slot = Some(value);
    true
}

/// What a listing answered when asked: `state`, with its evidence.
pub fn listing_poll(at: Millis, event: impl Into<String>, state: AgentState) -> Observation {
    listing_poll_because(at, event, state, None)
}

/// What a listing answered when asked, with why (an OpenCode session error's kind).
pub fn listing_poll_because(
    at: Millis,
    event: impl Into<String>,
    state: AgentState,
    reason: Option<volee_protocol::Reason>,
) -> Observation {
    Observation::ListingPoll(HookSignal {
        at,
        event: event.into(),
        state,
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use volee_protocol::AgentState::*;

    fn hook(at: Millis, event: &str, state: AgentState) -> Observation {
        Observation::Hook(HookSignal {
            reason: None,
            at,
            event: event.into(),
            state,
        })
    }

    #[test]
    fn an_older_hook_never_undoes_a_newer_one() {
        let mut s = Signals::default();
        assert!(s.apply(hook(200, "Stop", Idle)));
        assert!(!s.apply(hook(100, "PreToolUse", Working)));
        assert_eq!(s.hook.as_ref().unwrap().event, "Stop");
        // The same time is a later event of the same moment: it counts.
        assert!(s.apply(hook(200, "Notification", NeedsYou)));
        assert_eq!(s.hook.as_ref().unwrap().state, NeedsYou);
    }

    #[test]
    fn a_repeated_listing_answer_keeps_its_first_time() {
        let mut s = Signals::default();
        assert!(s.apply(listing_poll(100, "app-server active", Working)));
        assert!(!s.apply(listing_poll(1100, "app-server active", Working)));
        assert_eq!(s.listing.as_ref().unwrap().at, 100);
        assert!(s.apply(listing_poll(2100, "app-server idle", Idle)));
        assert!(!s.apply(listing_poll(1500, "app-server active", Working)));
        assert_eq!(s.listing.as_ref().unwrap().state, Idle);
    }

    #[test]
    fn every_write_of_a_status_file_is_a_new_report() {
        let mut s = Signals::default();
        let written = |at| {
            Observation::Listing(HookSignal {
                reason: None,
                at,
                event: "status working".into(),
                state: Working,
            })
        };
        assert!(s.apply(written(100)));
        // Rewritten with the same text for a new turn: a hook in between must not outrank it.
        assert!(s.apply(written(300)));
        assert_eq!(s.listing.as_ref().unwrap().at, 300);
        assert!(!s.apply(written(200)));
        assert!(!s.apply(written(300)));
    }

    #[test]
    fn the_first_ending_counts_and_a_later_stop_request_moves() {
        let mut s = Signals::default();
        let exit = |at, status| {
            Observation::Exit(ExitFact {
                at,
                status: Some(status),
                signal: None,
            })
        };
        assert!(s.apply(exit(10, 3)));
        assert!(!s.apply(exit(20, 0)));
        assert_eq!(s.exit.as_ref().unwrap().status, Some(3));
        assert!(s.apply(Observation::PaneGone { at: 5 }));
        assert!(!s.apply(Observation::PaneGone { at: 50 }));
        assert_eq!(s.pane_gone, Some(5));
        assert!(s.apply(Observation::StopRequested { at: 30 }));
        assert!(s.apply(Observation::StopRequested { at: 40 }));
        assert_eq!(s.stop_requested, Some(40));
    }

    #[test]
    fn a_screen_showing_older_output_never_replaces_a_newer_one() {
        let mut s = Signals::default();
        let screen = |at, rule: &str| {
            Observation::Screen(PromptMatch {
                reason: None,
                at,
                rule: rule.into(),
                text: "x".into(),
                state: NeedsYou,
            })
        };
        assert!(s.apply(screen(200, "new")));
        assert!(!s.apply(screen(100, "old")));
        assert!(!s.apply(screen(200, "new")));
        assert!(s.apply(screen(200, "other")));
        assert_eq!(s.prompt.as_ref().unwrap().rule, "other");
    }

    #[test]
    fn titles_change_only_when_the_text_does() {
        let mut s = Signals::default();
        let title = |at, t: &str| Observation::Title {
            at,
            title: t.into(),
        };
        assert!(s.apply(title(1, "a")));
        assert!(!s.apply(title(2, "a")));
        assert_eq!(s.title, Some((1, "a".into())));
        assert!(s.apply(title(3, "b")));
    }

    #[test]
    fn only_frequent_observations_wait_for_a_state_change_to_be_saved() {
        assert!(!Observation::Output { at: 1 }.is_durable());
        assert!(!Observation::Bell { at: 1 }.is_durable());
        assert!(Observation::ProcessGone { at: 1 }.is_durable());
        assert!(hook(1, "Stop", Idle).is_durable());
        assert_eq!(hook(7, "Stop", Idle).at(), 7);
        assert!(!Observation::Output { at: 1 }.shows_in_view());
        assert!(Observation::Title {
            at: 1,
            title: "t".into()
        }
        .shows_in_view());
    }
}
