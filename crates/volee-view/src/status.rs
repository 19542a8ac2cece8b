//! The status summary: agents counted by state, for the tmux status line (`@volee-status`), for
//! `volee status` and for its `--json`; live agents of machines that cannot be reached are counted
//! apart (`unreachable`).

use serde_json::{Map, Value};
use volee_protocol::{AgentState, AgentView};

use crate::{state_marker, state_words, DISPLAY_ORDER};

/// The marker of agents whose machine cannot be reached (their state is the last one known).
pub const UNREACHABLE_MARKER: &str = "⚠";

/// How many agents are in each state, and how many are unreachable.
///
/// A live agent (not done, failed or stopped) whose machine cannot be reached (`reachable`
/// false) is counted in `unreachable` only, not in its last known state: the state counts are
/// what the user can act on now, and every agent is counted once (`total` is the sum). An
/// ended agent keeps counting by its state, which can no longer change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub working: usize,
    pub needs_you: usize,
    pub idle: usize,
    pub done: usize,
    pub failed: usize,
    pub stopped: usize,
    /// Live agents of machines that cannot be reached now.
    pub unreachable: usize,
}

/// Is `agent` counted as unreachable rather than by its state (see [`Counts`])?
pub fn counts_as_unreachable(agent: &AgentView) -> bool {
    !agent.reachable && !agent.state.is_final()
}

impl Counts {
    pub fn from_agents(agents: &[AgentView]) -> Counts {
        let mut counts = Counts::default();
        for agent in agents {
            if counts_as_unreachable(agent) {
                counts.unreachable += 1;
                continue;
            }
            let slot = match agent.state {
                AgentState::Working => &mut counts.working,
                AgentState::NeedsYou => &mut counts.needs_you,
                AgentState::Idle => &mut counts.idle,
                AgentState::Done => &mut counts.done,
                AgentState::Failed => &mut counts.failed,
                AgentState::Stopped => &mut counts.stopped,
            };
            *slot += 1;
        }
        counts
    }

    pub fn get(&self, state: AgentState) -> usize {
        match state {
            AgentState::Working => self.working,
            AgentState::NeedsYou => self.needs_you,
            AgentState::Idle => self.idle,
            AgentState::Done => self.done,
            AgentState::Failed => self.failed,
            AgentState::Stopped => self.stopped,
        }
    }

    /// Every agent counted: by state, and unreachable.
    pub fn total(&self) -> usize {
        AgentState::ALL
            .into_iter()
            .map(|s| self.get(s))
            .sum::<usize>()
            + self.unreachable
    }

    /// The states that have agents, in display order.
    fn present(&self) -> impl Iterator<Item = (AgentState, usize)> + '_ {
        DISPLAY_ORDER
            .into_iter()
            .map(|s| (s, self.get(s)))
            .filter(|&(_, n)| n > 0)
    }
}

/// The tmux style of a state's segment in the status line.
fn tmux_style(state: AgentState) -> &'static str {
    match state {
        AgentState::NeedsYou => "fg=red,bold",
        AgentState::Working => "fg=yellow",
        AgentState::Idle => "fg=green",
        AgentState::Failed => "fg=magenta",
        AgentState::Done => "fg=blue",
        AgentState::Stopped => "dim",
    }
}

/// The tmux style of the unreachable count.
const UNREACHABLE_STYLE: &str = "fg=cyan";

/// The status-line segment for `@volee-status`, e.g.
/// `#[fg=red,bold]● 2 needs you#[default] #[fg=yellow]▶ 1 working#[default]`, then
/// `#[fg=cyan]⚠ 1 unreachable#[default]` when some are.
///
/// Holds only numbers and fixed words, never agent text, so tmux may expand it as a format.
pub fn status_tmux(counts: &Counts) -> String {
    if counts.total() == 0 {
        return "#[dim]volee: no agents#[default]".to_owned();
    }
    counts
        .present()
        .map(|(s, n)| {
            format!(
                "#[{}]{} {n} {}#[default]",
                tmux_style(s),
                state_marker(s),
                state_words(s)
            )
        })
        .chain((counts.unreachable > 0).then(|| {
            format!(
                "#[{UNREACHABLE_STYLE}]{UNREACHABLE_MARKER} {} unreachable#[default]",
                counts.unreachable
            )
        }))
        .collect::<Vec<_>>()
        .join(" ")
}

/// What the tmux status line adds while `volee quiet` holds notifications back (agents that
/// need the user would otherwise go unnoticed for hours).
pub const QUIET_TMUX: &str = " #[dim]quiet#[default]";

/// The summary as plain text: `2 needs_you, 1 working, 3 idle` (then `, 1 unreachable` when
/// some are), or `no agents`.
pub fn status_plain(counts: &Counts) -> String {
    if counts.total() == 0 {
        return "no agents".to_owned();
    }
    counts
        .present()
        .map(|(s, n)| format!("{n} {s}"))
        .chain((counts.unreachable > 0).then(|| format!("{} unreachable", counts.unreachable)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The summary as JSON: every state name with its count (zeros included), `unreachable` and
/// `total` (the sum of all of them).
pub fn status_json(counts: &Counts) -> Value {
    let mut map: Map<String, Value> = AgentState::ALL
        .into_iter()
        .map(|s| (s.as_str().to_owned(), counts.get(s).into()))
        .collect();
    map.insert("unreachable".to_owned(), counts.unreachable.into());
    map.insert("total".to_owned(), counts.total().into());
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::agent;

    fn counts(states: &[AgentState]) -> Counts {
        let agents: Vec<AgentView> = states
            .iter()
            .map(|&s| agent("x", "x", s, "2025-01-01T00:00:00Z"))
            .collect();
        Counts::from_agents(&agents)
    }

    #[test]
    fn counts_by_state() {
        use AgentState::*;
        let c = counts(&[Idle, NeedsYou, Idle, Stopped]);
        assert_eq!(
            c,
            Counts {
                idle: 2,
                needs_you: 1,
                stopped: 1,
                ..Counts::default()
            }
        );
        assert_eq!(c.total(), 4);
        assert_eq!(c.get(Idle), 2);
    }

    #[test]
    fn tmux_segment_puts_needs_you_first_and_omits_zeros() {
        use AgentState::*;
        let c = counts(&[Working, Idle, NeedsYou, Idle, NeedsYou, Idle]);
        assert_eq!(
            status_tmux(&c),
            "#[fg=red,bold]● 2 needs you#[default] #[fg=yellow]▶ 1 working#[default] \
             #[fg=green]○ 3 idle#[default]"
        );
        assert_eq!(
            status_tmux(&counts(&[Done])),
            "#[fg=blue]✓ 1 done#[default]"
        );
        assert_eq!(
            status_tmux(&Counts::default()),
            "#[dim]volee: no agents#[default]"
        );
    }

    #[test]
    fn plain_and_json() {
        use AgentState::*;
        let c = counts(&[Failed, Working, NeedsYou, NeedsYou]);
        assert_eq!(status_plain(&c), "2 needs_you, 1 failed, 1 working");
        assert_eq!(status_plain(&Counts::default()), "no agents");
        let json = status_json(&c);
        assert_eq!(json["needs_you"], 2);
        assert_eq!(json["idle"], 0);
        assert_eq!(json["total"], 4);
        assert_eq!(json["unreachable"], 0);
        assert_eq!(json.as_object().map(Map::len), Some(8));
    }

    #[test]
    fn live_agents_of_unreachable_machines_are_counted_apart() {
        use AgentState::*;
        let mut agents: Vec<AgentView> = [NeedsYou, Working, Working, Done, Idle]
            .iter()
            .map(|&s| agent("x", "x", s, "2025-01-01T00:00:00Z"))
            .collect();
        // Two live ones and an ended one on a machine that went away.
        for a in &mut agents[1..4] {
            a.machine = Some("box".into());
            a.reachable = false;
            a.unreachable_since = Some("2025-01-01T00:05:00Z".into());
        }
        let c = Counts::from_agents(&agents);
        assert_eq!(
            c,
            Counts {
                needs_you: 1,
                done: 1,
                idle: 1,
                unreachable: 2,
                ..Counts::default()
            }
        );
        assert_eq!(c.total(), 5);
        assert_eq!(
            status_tmux(&c),
            "#[fg=red,bold]● 1 needs you#[default] #[fg=green]○ 1 idle#[default] \
             #[fg=blue]✓ 1 done#[default] #[fg=cyan]⚠ 2 unreachable#[default]"
        );
        assert_eq!(
            status_plain(&c),
            "1 needs_you, 1 idle, 1 done, 2 unreachable"
        );
        let json = status_json(&c);
        assert_eq!(
            (json["unreachable"].clone(), json["working"].clone()),
            (2.into(), 0.into())
        );
        assert_eq!(json["total"], 5);
        let only = Counts {
            unreachable: 1,
            ..Counts::default()
        };
        assert_eq!(status_tmux(&only), "#[fg=cyan]⚠ 1 unreachable#[default]");
        assert_eq!(status_plain(&only), "1 unreachable");
    }
}
