//! The picker: rows of the tmux `display-menu` that jumps to an agent, and the "next agent
//! needing you" choice behind the jump key.

use volee_protocol::{AgentState, AgentView};

use crate::text::{age_of, display_width, pad_to, tmux_escape};
use crate::{in_display_order, state_marker, state_words};

/// Menu shortcuts in row order; `q` is left out because the menu's own Quit item uses it.
const KEYS: &str = "123456789abcdefghijklmnoprstuvwxyz";

const NAME_MAX: usize = 24;
const HARNESS_MAX: usize = 12;
const TITLE_MAX: usize = 30;

/// One `display-menu` item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MenuItem {
    /// The item name, already tmux-escaped (a format in which `#` is doubled).
    pub label: String,
    /// The shortcut key, empty once the keys run out (tmux then shows no shortcut).
    pub key: String,
    /// How the agent is addressed: `ID`, or `MACHINE:ID` for an agent on a machine.
    pub agent_id: String,
}

/// One menu row per agent, in display order (needs_you first, then failed, working, idle, done,
/// stopped; by name within one), columns padded to the widest cell in the menu. An agent on a
/// machine shows as `MACHINE:NAME`, its state with `?` while the machine cannot be reached.
pub fn menu_items(agents: &[AgentView], now_epoch_secs: u64) -> Vec<MenuItem> {
    let ordered = in_display_order(agents);
    let rows: Vec<[String; 5]> = ordered
        .iter()
        .map(|a| {
            [
                format!(
                    "{} {}{}",
                    state_marker(a.state),
                    state_words(a.state),
                    if a.reachable {
                        ""
                    } else {
                        crate::UNREACHABLE_SUFFIX
                    }
                ),
                crate::machine_name_text(a, NAME_MAX),
                crate::harness_label(a, HARNESS_MAX),
                age_of(&a.state_since, now_epoch_secs),
                crate::tagged_title(a, TITLE_MAX),
            ]
        })
        .collect();
    let width = |col: usize| {
        rows.iter()
            .map(|r| display_width(&r[col]))
            .max()
            .unwrap_or(0)
    };
    let widths = [width(0), width(1), width(2), width(3)];
    let mut keys = KEYS.chars();
    ordered
        .iter()
        .zip(&rows)
        .map(|(agent, [state, name, harness, age, title])| {
            let age = format!("{age:>w$}", w = widths[3]);
            let line = format!(
                "{}  {}  {}  {age}  {title}",
                pad_to(state, widths[0]),
                pad_to(name, widths[1]),
                pad_to(harness, widths[2]),
            );
            MenuItem {
                // Padding never contains `#`, so escaping after it keeps the columns.
                label: tmux_escape(line.trim_end()),
                key: keys.next().map(String::from).unwrap_or_default(),
                agent_id: agent.address(),
            }
        })
        .collect()
}

/// The needs_you agent to jump to: the one after `after_id` (an address: `ID` or `MACHINE:ID`) in
/// display order (wrapping), or the first when `after_id` is `None` or not waiting on the user.
pub fn next_needing_you<'a>(
    agents: &'a [AgentView],
    after_id: Option<&str>,
) -> Option<&'a AgentView> {
    let waiting: Vec<&AgentView> = in_display_order(agents)
        .into_iter()
        .filter(|a| a.state == AgentState::NeedsYou)
        .collect();
    let next = after_id
        .and_then(|id| waiting.iter().position(|a| a.address() == id))
        .map_or(0, |i| (i + 1) % waiting.len());
    waiting.get(next).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{agent, NOW};
    use AgentState::*;

    #[test]
    fn hostile_title_and_name_are_escaped() {
        let mut a = agent(
            "k3f9",
            "#{pane_id}\x1b]0;x\x07",
            NeedsYou,
            "2025-01-01T00:07:00Z",
        );
        a.title = Some("#[fg=red]x#(touch /tmp/pwned)".into());
        let items = menu_items(&[a], NOW);
        assert_eq!(
            items[0].label,
            "● needs you  ##{pane_id}]0;x  claude  3m  ##[fg=red]x##(touch /tmp/pwned)"
        );
        assert_eq!(items[0].key, "1");
        assert_eq!(items[0].agent_id, "k3f9");
    }

    #[test]
    fn long_title_is_bounded_without_splitting_escapes() {
        let mut a = agent("a", "a", Idle, "2025-01-01T00:00:00Z");
        a.title = Some("#".repeat(50));
        let label = &menu_items(&[a], NOW)[0].label;
        assert!(label.ends_with(&format!("{}…", "##".repeat(29))), "{label}");
    }

    #[test]
    fn rows_are_ordered_needs_you_first_and_aligned() {
        let mut agents = vec![
            agent("w", "builder", Working, "2025-01-01T00:09:50Z"),
            agent("d", "docs", Done, "2025-01-01T00:00:00Z"),
            agent("n2", "日本語", NeedsYou, "2025-01-01T00:08:00Z"),
            agent("n1", "fix-auth", NeedsYou, "2025-01-01T00:05:00Z"),
        ];
        agents[0].title = Some("Running tests".into());
        let items = menu_items(&agents, NOW);
        let labels: Vec<&str> = items.iter().map(|i| i.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "● needs you  fix-auth  claude   5m",
                "● needs you  日本語    claude   2m",
                "▶ working    builder   claude  10s  Running tests",
                "✓ done       docs      claude  10m",
            ]
        );
        let ids: Vec<&str> = items.iter().map(|i| i.agent_id.as_str()).collect();
        assert_eq!(ids, ["n1", "n2", "w", "d"]);
    }

    #[test]
    fn remote_agents_show_their_machine_and_address() {
        let local = agent("k3f9", "fix", NeedsYou, "2025-01-01T00:07:00Z");
        let mut remote = agent("k3f9", "fix", NeedsYou, "2025-01-01T00:07:00Z");
        remote.machine = Some("box".into());
        remote.reachable = false;
        let items = menu_items(&[remote, local], NOW);
        let rows: Vec<(&str, &str)> = items
            .iter()
            .map(|i| (i.label.as_str(), i.agent_id.as_str()))
            .collect();
        assert_eq!(
            rows,
            [
                ("● needs you   fix      claude  3m", "k3f9"),
                ("● needs you?  box:fix  claude  3m", "box:k3f9"),
            ]
        );
    }

    #[test]
    fn keys_skip_q_and_run_out() {
        let agents: Vec<AgentView> = (0..40)
            .map(|i| agent(&format!("a{i:02}"), "x", Idle, "2025-01-01T00:00:00Z"))
            .collect();
        let keys: String = menu_items(&agents, NOW)
            .iter()
            .map(|i| i.key.as_str())
            .collect();
        assert_eq!(keys, "123456789abcdefghijklmnoprstuvwxyz");
        assert_eq!(menu_items(&agents, NOW)[39].key, "");
    }

    #[test]
    fn next_needing_you_cycles_and_wraps() {
        let agents = [
            agent("late", "l", NeedsYou, "2025-01-01T00:08:00Z"),
            agent("idle", "i", Idle, "2025-01-01T00:00:00Z"),
            agent("early", "e", NeedsYou, "2025-01-01T00:01:00Z"),
        ];
        let next = |after| next_needing_you(&agents, after).map(|a| a.id.as_str());
        assert_eq!(next(None), Some("early"));
        assert_eq!(next(Some("early")), Some("late"));
        assert_eq!(next(Some("late")), Some("early"));
        assert_eq!(next(Some("idle")), Some("early"));
        assert_eq!(next(Some("gone")), Some("early"));
        assert_eq!(next_needing_you(&agents[1..2], None), None);
    }
}
