//! Typing into an agent's pane, for every host: volee types text; until it settles, what the pane
//! prints is the echo of that typing, not the agent's own activity; then the submit key goes,
//! once.
//!
//! Pure: the caller says when volee typed and when the pane printed, and asks which submit keys
//! are due. `K` is whatever the caller needs to send a key later (a pane handle and a key name).

use std::collections::HashMap;

use volee_core::Millis;
use volee_harness::InputRules;

/// Echo times and held-back submit keys, per agent.
#[derive(Debug)]
pub struct Typing<K> {
    /// Until when an agent's output is the echo of text volee typed (between the text and the
    /// submit key that follows after the profile's delay).
    echo_until: HashMap<String, Millis>,
    /// Submit keys waiting for the pane to settle ([`InputRules::settle_ms`]); the pane's
    /// output meanwhile is echo.
    pending: HashMap<String, Pending<K>>,
}

#[derive(Debug)]
struct Pending<K> {
    /// Not before this (the typing time plus the profile's delay).
    not_before: Millis,
    /// Submitted by then whatever the pane does.
    deadline: Millis,
    /// Quiet time wanted after the typing and after the pane's latest output.
    settle: Millis,
    /// The typing time, then the pane's latest output.
    last_output: Millis,
    key: K,
}

impl<K> Pending<K> {
    fn due(&self) -> Millis {
        self.not_before
            .max(self.last_output + self.settle)
            .min(self.deadline)
    }
}

/// When to send the submit key of text just typed.
#[derive(Debug, PartialEq, Eq)]
pub enum Submit<K> {
    /// After this many milliseconds, whatever the pane does.
    After(Millis, K),
    /// Held until the pane settles ([`Typing::take_due`] gives it back).
    Held,
}

impl<K> Default for Typing<K> {
    fn default() -> Self {
        Typing {
            echo_until: HashMap::new(),
            pending: HashMap::new(),
        }
    }
}

impl<K> Typing<K> {
    /// Text is about to be sent before the previous text's submit: that submit goes first.
    pub fn take_pending(&mut self, id: &str) -> Option<K> {
        self.pending.remove(id).map(|p| p.key)
    }

    /// volee typed into agent `id` at `now` (`text`: something was typed, not only the submit
    /// key) per `input`; says when `key` is to be sent.
    pub fn typed(
        &mut self,
        id: &str,
        now: Millis,
        input: &InputRules,
        text: bool,
        key: K,
    ) -> Submit<K> {
        if text && input.enter_delay_ms > 0 {
            self.echo_until
                .insert(id.to_string(), now + input.enter_delay_ms);
        }
        if input.settle_ms == 0 {
            return Submit::After(input.enter_delay_ms, key);
        }
        self.pending.insert(
            id.to_string(),
            Pending {
                not_before: now + input.enter_delay_ms,
                deadline: now + volee_harness::profile::SUBMIT_SETTLE_MAX_MS,
                settle: input.settle_ms,
                last_output: now,
                key,
            },
        );
        Submit::Held
    }

    /// The typing failed: nothing is held for agent `id` any more.
    pub fn cancel(&mut self, id: &str) {
        self.pending.remove(id);
        self.echo_until.remove(id);
    }

    /// Agent `id`'s pane printed at `now`: true when that is the agent's own output, false when
    /// it is the echo of what volee typed (a held submit then waits for the pane to settle).
    pub fn output(&mut self, id: &str, now: Millis) -> bool {
        if let Some(p) = self.pending.get_mut(id) {
            p.last_output = now;
            return false;
        }
        self.echo_until.get(id).is_none_or(|until| now >= *until)
    }

    /// When the next held submit is due.
    pub fn next_due(&self) -> Option<Millis> {
        self.pending.values().map(Pending::due).min()
    }

    /// The held submits due at `now`, with their agents.
    pub fn take_due(&mut self, now: Millis) -> Vec<(String, K)> {
        let due: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, p)| now >= p.due())
            .map(|(id, _)| id.clone())
            .collect();
        due.into_iter()
            .filter_map(|id| {
                let p = self.pending.remove(&id)?;
                Some((id, p.key))
            })
            .collect()
    }

    /// Agent `id` is gone.
    pub fn forget(&mut self, id: &str) {
        self.cancel(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(enter_delay_ms: u64, settle_ms: u64) -> InputRules {
        InputRules {
            bracketed_paste: true,
            enter_delay_ms,
            submit_key: "Enter",
            interrupt_key: "C-c",
            settle_ms,
        }
    }

    #[test]
    fn without_settling_the_key_goes_after_the_delay_and_echo_is_not_activity() {
        let mut t = Typing::default();
        assert_eq!(
            t.typed("a", 1000, &rules(200, 0), true, "k"),
            Submit::After(200, "k")
        );
        assert!(!t.output("a", 1100), "echo of the typing");
        assert!(
            t.output("a", 1200),
            "the agent's own output after the delay"
        );
        assert!(t.output("b", 1100), "another agent is not affected");
        assert_eq!(t.next_due(), None);
    }

    #[test]
    fn a_held_submit_waits_for_the_pane_to_settle() {
        let mut t = Typing::default();
        assert_eq!(
            t.typed("a", 1000, &rules(100, 300), true, "k"),
            Submit::Held
        );
        assert_eq!(t.next_due(), Some(1300));
        assert!(!t.output("a", 1250));
        assert_eq!(t.next_due(), Some(1550), "output pushes the submit back");
        assert!(t.take_due(1549).is_empty());
        assert_eq!(t.take_due(1550), vec![("a".to_string(), "k")]);
        assert_eq!(t.next_due(), None);
    }

    #[test]
    fn a_pane_that_never_settles_is_submitted_at_the_deadline() {
        let mut t = Typing::default();
        t.typed("a", 0, &rules(0, 500), true, "k");
        let mut now = 0;
        while now < volee_harness::profile::SUBMIT_SETTLE_MAX_MS {
            assert!(!t.output("a", now));
            now += 100;
        }
        assert_eq!(
            t.next_due(),
            Some(volee_harness::profile::SUBMIT_SETTLE_MAX_MS)
        );
        assert_eq!(t.take_due(now).len(), 1);
    }

    #[test]
    fn new_text_takes_the_held_submit_first() {
        let mut t = Typing::default();
        t.typed("a", 0, &rules(0, 500), true, 1);
        assert_eq!(t.take_pending("a"), Some(1));
        assert_eq!(t.take_pending("a"), None);
        assert_eq!(t.next_due(), None);
    }

    #[test]
    fn a_failed_or_forgotten_typing_holds_nothing() {
        let mut t = Typing::default();
        t.typed("a", 0, &rules(500, 500), true, 1);
        t.cancel("a");
        assert!(t.output("a", 10));
        assert_eq!(t.next_due(), None);
        t.typed("b", 0, &rules(500, 0), true, 2);
        t.forget("b");
        assert!(t.output("b", 10));
    }

    #[test]
    fn only_the_submit_key_has_no_echo() {
        let mut t = Typing::default();
        t.typed("a", 0, &rules(500, 0), false, 1);
        assert!(t.output("a", 10));
    }
}
