//! Telling the user: which state changes are worth a notification, and how many to let through.
//! Pure decisions (the daemon delivers them: tmux messages, the status line, desktop, bell,
//! the user's command).
//!
//! - `needs_you` and `failed` always count; `idle` or `done` only after a turn longer than
//!   `long_turn` (a quick answer is no news).
//! - At most one per agent and kind within [`REPEAT_MS`] (an agent flapping between working and
//!   needs_you pings once).
//! - Across agents at most `burst` within `burst_window`; the rest are counted and told in one
//!   summary when the window has room again.
//!
//! The texts: the one-line [`message`] of the terminal channels, and the [`Push`] to the phone
//! (title, body, priority and tags for ntfy; sent by [`crate::push`]).

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use volee_core::Millis;
use volee_protocol::AgentState;

/// The same agent and kind again within this long is not news.
pub const REPEAT_MS: Millis = 15_000;

/// What a notification is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    NeedsYou,
    Failed,
    /// A turn longer than the threshold ended (idle or done).
    Finished,
    /// It used 80 % of its token budget.
    Budget,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::NeedsYou => "needs_you",
            Kind::Failed => "failed",
            Kind::Finished => "finished",
            Kind::Budget => "budget",
        }
    }
}

/// Is the change `before` → `after` worth telling? `working_ms`: how long the agent had been
/// working when it changed (0 unless `before` is working).
pub fn classify(
    before: AgentState,
    after: AgentState,
    working_ms: Millis,
    long_turn: Duration,
) -> Option<Kind> {
    use AgentState::*;
    match (before, after) {
        (b, NeedsYou) if b != NeedsYou => Some(Kind::NeedsYou),
        (b, Failed) if b != Failed => Some(Kind::Failed),
        (Working, Idle | Done) if working_ms >= long_turn.as_millis() as Millis => {
            Some(Kind::Finished)
        }
        _ => None,
    }
}

/// Notification settings (`[notify]` in `config.toml`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyConfig {
    /// Everything below at once.
    pub enabled: bool,
    /// A tmux message on every attached client not already showing the agent's pane.
    pub tmux_message: bool,
    /// How long the message stays.
    pub message_time: Duration,
    /// The status line's counts highlighted for a moment.
    pub flash_status: bool,
    /// A desktop notification through the session bus, when there is one.
    pub desktop: bool,
    /// A bell (BEL) to those clients' terminals.
    pub bell: bool,
    /// An OSC 9 notification to those clients' terminals (terminals that show them).
    pub osc9: bool,
    /// `idle`/`done` count only after a turn at least this long.
    pub long_turn: Duration,
    /// Commands run with the agent's JSON on stdin (`sh -c`), per kind.
    pub on_needs_you: Option<String>,
    pub on_failed: Option<String>,
    pub on_finished: Option<String>,
    /// At most this many notifications …
    pub burst: u32,
    /// … within this window; the rest are summed up in one.
    pub burst_window: Duration,
    /// An ntfy topic to push to (the phone), with its token.
    pub push: Option<crate::push::PushTarget>,
}

impl Default for NotifyConfig {
    fn default() -> Self {
        NotifyConfig {
            enabled: true,
            tmux_message: true,
            message_time: Duration::from_secs(4),
            flash_status: true,
            desktop: true,
            bell: false,
            osc9: false,
            long_turn: Duration::from_secs(30),
            on_needs_you: None,
            on_failed: None,
            on_finished: None,
            burst: 3,
            burst_window: Duration::from_secs(10),
            push: None,
        }
    }
}

impl NotifyConfig {
    pub fn command(&self, kind: Kind) -> Option<&str> {
        match kind {
            Kind::NeedsYou => self.on_needs_you.as_deref(),
            Kind::Failed => self.on_failed.as_deref(),
            Kind::Finished => self.on_finished.as_deref(),
            Kind::Budget => None,
        }
        .filter(|c| !c.trim().is_empty())
    }
}

/// What to do with one notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    Send,
    /// The same agent and kind a moment ago.
    Repeat,
    /// Over the burst: counted for the summary.
    Held,
}

/// The rate limits.
#[derive(Debug, Default)]
pub struct Limiter {
    last: HashMap<(String, Kind), Millis>,
    sent: VecDeque<Millis>,
    held: u32,
}

impl Limiter {
    pub fn admit(&mut self, agent: &str, kind: Kind, now: Millis, cfg: &NotifyConfig) -> Admit {
        let key = (agent.to_string(), kind);
        if self.last.get(&key).is_some_and(|t| now < t + REPEAT_MS) {
            return Admit::Repeat;
        }
        self.last.insert(key, now);
        self.last.retain(|_, t| now < *t + REPEAT_MS);
        let window = cfg.burst_window.as_millis() as Millis;
        while self.sent.front().is_some_and(|t| now >= t + window) {
            self.sent.pop_front();
        }
        if self.sent.len() as u32 >= cfg.burst.max(1) {
            self.held += 1;
            return Admit::Held;
        }
        self.sent.push_back(now);
        Admit::Send
    }

    /// When the held ones can be summed up (the window has room), if any are held.
    pub fn summary_due(&self, cfg: &NotifyConfig) -> Option<Millis> {
        (self.held > 0).then(|| {
            self.sent
                .front()
                .map(|t| t + cfg.burst_window.as_millis() as Millis)
                .unwrap_or(0)
        })
    }

    /// Take the count of held notifications for one summary (which counts as one sent).
    pub fn take_summary(&mut self, now: Millis, cfg: &NotifyConfig) -> Option<u32> {
        if self.summary_due(cfg).is_none_or(|due| now < due) {
            return None;
        }
        let held = std::mem::take(&mut self.held);
        let window = cfg.burst_window.as_millis() as Millis;
        while self.sent.front().is_some_and(|t| now >= t + window) {
            self.sent.pop_front();
        }
        self.sent.push_back(now);
        Some(held)
    }
}

/// The one-line text of a notification (plain; the caller escapes it for tmux).
pub fn message(name: &str, id: &str, kind: Kind, evidence: &str) -> String {
    let what = match kind {
        Kind::NeedsYou => "needs you",
        Kind::Failed => "failed",
        Kind::Finished => "finished its turn",
        Kind::Budget => "used 80 % of its budget",
    };
    let evidence: String = evidence.chars().take(80).collect();
    if evidence.is_empty() {
        format!("volee: {name} ({id}) {what}")
    } else {
        format!("volee: {name} ({id}) {what} — {evidence}")
    }
}

/// A reason on the phone is one line of at most this many characters.
pub const PUSH_REASON_CHARS: usize = 200;

/// One push to the phone, as ntfy's publish API takes it: the `Title` and `Priority` headers,
/// `Tags` (emoji short codes the app shows before the title), and the message as the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Push {
    pub title: String,
    pub body: String,
    /// ntfy's scale: 1 (min) … 3 (default) … 5 (max); 4 is "high" (a pop-over on Android).
    pub priority: u8,
    pub tags: &'static str,
}

/// The push for one agent: `volee: NAME needs you` as the title; the body says which agent
/// (`name (address)`), on which machine, in which state, and why (its evidence, one line).
pub fn push_for_agent(
    name: &str,
    address: &str,
    machine: &str,
    state: AgentState,
    kind: Kind,
    evidence: &str,
) -> Push {
    let (what, priority, tags) = match kind {
        Kind::NeedsYou => ("needs you", 4, "bell"),
        Kind::Failed => ("failed", 4, "x"),
        Kind::Finished => ("finished", 3, "white_check_mark"),
        Kind::Budget => ("used 80 % of its budget", 3, "warning"),
    };
    let name = one_line(name, 80);
    let reason = one_line(evidence, PUSH_REASON_CHARS);
    let mut body = format!(
        "{name} ({}) on {}: {state}",
        one_line(address, 120),
        one_line(machine, 80)
    );
    if !reason.is_empty() {
        body.push('\n');
        body.push_str(&reason);
    }
    Push {
        title: format!("volee: {name} {what}"),
        body,
        priority,
        tags,
    }
}

/// The push for the notifications the burst limit held back (`text`: the summary's message).
pub fn push_for_summary(text: &str) -> Push {
    Push {
        title: "volee: more agent changes".into(),
        body: one_line(text, PUSH_REASON_CHARS),
        priority: 3,
        tags: "bell",
    }
}

/// `text` without control characters (a newline, an escape sequence's ESC), whitespace runs as
/// one space, at most `max` characters (the last one `…` when cut).
pub(crate) fn one_line(text: &str, max: usize) -> String {
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect();
    let line = words.join(" ");
    if line.chars().count() <= max {
        return line;
    }
    let mut cut: String = line.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use AgentState::*;

    #[test]
    fn what_is_worth_telling() {
        let long = Duration::from_secs(30);
        assert_eq!(classify(Working, NeedsYou, 0, long), Some(Kind::NeedsYou));
        assert_eq!(classify(Idle, NeedsYou, 0, long), Some(Kind::NeedsYou));
        assert_eq!(classify(NeedsYou, NeedsYou, 0, long), None);
        assert_eq!(classify(Working, Failed, 0, long), Some(Kind::Failed));
        assert_eq!(classify(Working, Idle, 29_999, long), None);
        assert_eq!(classify(Working, Idle, 30_000, long), Some(Kind::Finished));
        assert_eq!(classify(Working, Done, 60_000, long), Some(Kind::Finished));
        assert_eq!(classify(NeedsYou, Idle, 60_000, long), None);
        assert_eq!(classify(Idle, Working, 0, long), None);
        assert_eq!(classify(Working, Stopped, 60_000, long), None);
    }

    #[test]
    fn one_per_agent_and_a_burst_across_agents() {
        let cfg = NotifyConfig::default();
        let mut l = Limiter::default();
        assert_eq!(l.admit("a", Kind::NeedsYou, 1000, &cfg), Admit::Send);
        // Flapping: once.
        assert_eq!(l.admit("a", Kind::NeedsYou, 2000, &cfg), Admit::Repeat);
        assert_eq!(l.admit("a", Kind::Failed, 2000, &cfg), Admit::Send);
        assert_eq!(l.admit("b", Kind::NeedsYou, 2000, &cfg), Admit::Send);
        // Twenty at once: the burst is full, the rest are held for one summary.
        for i in 0..17 {
            assert_eq!(
                l.admit(&format!("x{i}"), Kind::NeedsYou, 2500, &cfg),
                Admit::Held
            );
        }
        assert_eq!(l.summary_due(&cfg), Some(11_000));
        assert_eq!(l.take_summary(10_999, &cfg), None);
        assert_eq!(l.take_summary(11_000, &cfg), Some(17));
        assert_eq!(l.summary_due(&cfg), None);
        // After the repeat window the same agent may ping again.
        assert_eq!(
            l.admit("a", Kind::NeedsYou, 1000 + REPEAT_MS, &cfg),
            Admit::Send
        );
    }

    #[test]
    fn messages_are_one_line_and_bounded() {
        let m = message("fix", "k3f9", Kind::NeedsYou, &"x".repeat(500));
        assert!(m.starts_with("volee: fix (k3f9) needs you — "));
        assert!(m.chars().count() < 140);
        assert_eq!(
            message("n", "i", Kind::Finished, ""),
            "volee: n (i) finished its turn"
        );
    }

    #[test]
    fn a_push_says_who_where_what_and_why_on_one_line() {
        let p = push_for_agent(
            "fix",
            "k3f9",
            "devbox",
            NeedsYou,
            Kind::NeedsYou,
            "rule generic.yes-no: \"Continue? [y/N]\"",
        );
        assert_eq!(p.title, "volee: fix needs you");
        assert_eq!(
            p.body,
            "fix (k3f9) on devbox: needs_you\nrule generic.yes-no: \"Continue? [y/N]\""
        );
        assert_eq!((p.priority, p.tags), (4, "bell"));
        let p = push_for_agent("a", "box:k", "box", Failed, Kind::Failed, "");
        assert_eq!((p.title.as_str(), p.priority), ("volee: a failed", 4));
        assert_eq!(p.body, "a (box:k) on box: failed");
        let p = push_for_agent("a", "k", "m", Idle, Kind::Finished, "exit 0");
        assert_eq!((p.title.as_str(), p.priority), ("volee: a finished", 3));
        assert_eq!(p.body, "a (k) on m: idle\nexit 0");
    }

    #[test]
    fn a_push_reason_has_no_control_characters_and_is_bounded() {
        let evidence = format!("\x1b[31mred\x1b[0m\r\nnext\tline {}", "x".repeat(500));
        let p = push_for_agent("n\x07\nm", "i", "m", NeedsYou, Kind::NeedsYou, &evidence);
        assert_eq!(p.title, "volee: n m needs you");
        let reason = p.body.lines().nth(1).unwrap();
        assert!(reason.starts_with("[31mred [0m next line xxx"), "{reason}");
        assert_eq!(reason.chars().count(), PUSH_REASON_CHARS);
        assert!(reason.ends_with('…'));
        assert!(!p.body.chars().any(|c| c.is_control() && c != '\n'));
        assert_eq!(p.body.lines().count(), 2);
    }

    #[test]
    fn the_summary_is_pushed_at_default_priority() {
        let p = push_for_summary("volee: 17 more agent changes (volee ls)");
        assert_eq!(p.body, "volee: 17 more agent changes (volee ls)");
        assert_eq!(p.priority, 3);
    }
}
