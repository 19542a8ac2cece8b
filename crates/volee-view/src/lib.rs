//! Rendering of volee's agents for every front end: the tmux status-line segment, the
//! `display-menu` picker rows, and the plain tables of `volee ls`, `show` and `explain`.
//!
//! Everything here is a pure function of [`AgentView`]s and a `now` passed in by the caller, so the
//! crate builds for `wasm32-wasip1` and the zellij plugin renders exactly what the CLI does. Agent
//! text (names, titles, evidence) is hostile input: it only reaches output through
//! [`text::tmux_text`] or [`text::plain_text`].

pub mod picker;
pub mod status;
pub mod table;
pub mod text;
pub mod zellij;

pub use picker::{menu_items, next_needing_you, MenuItem};
pub use status::{
    counts_as_unreachable, status_json, status_plain, status_tmux, Counts, QUIET_TMUX,
    UNREACHABLE_MARKER,
};
pub use table::{
    agent_detail, agents_table, agents_table_wide, cost_text, explanation_text, host_text,
    tokens_short, tokens_text,
};
pub use text::{
    ago, is_invisible, literal_text, plain_lines, plain_text, sh_quote, tmux_message_text,
    tmux_text,
};

use volee_protocol::{AgentState, AgentView};

/// The order states are shown in everywhere: what waits on the user first (a prompt, then a
/// failure), ended agents last.
pub const DISPLAY_ORDER: [AgentState; 6] = [
    AgentState::NeedsYou,
    AgentState::Failed,
    AgentState::Working,
    AgentState::Idle,
    AgentState::Done,
    AgentState::Stopped,
];

/// A one-character marker per state, distinct so the state reads without colour.
pub fn state_marker(state: AgentState) -> &'static str {
    match state {
        AgentState::NeedsYou => "●",
        AgentState::Working => "▶",
        AgentState::Idle => "○",
        AgentState::Failed => "✗",
        AgentState::Done => "✓",
        AgentState::Stopped => "■",
    }
}

/// The state in words for people (`needs you`; [`AgentState::as_str`] is the machine name).
pub fn state_words(state: AgentState) -> &'static str {
    match state {
        AgentState::NeedsYou => "needs you",
        other => other.as_str(),
    }
}

/// Agents in display order: by state as in [`DISPLAY_ORDER`], then by name, then by id, then by
/// machine (local first): a row moves only when its agent's state changes.
pub fn in_display_order(agents: &[AgentView]) -> Vec<&AgentView> {
    let mut sorted: Vec<&AgentView> = agents.iter().collect();
    sorted.sort_by(|a, b| {
        let rank = |a: &AgentView| DISPLAY_ORDER.iter().position(|s| *s == a.state);
        (rank(a), &a.name, &a.id, &a.machine).cmp(&(rank(b), &b.name, &b.id, &b.machine))
    });
    sorted
}

/// `[branch]` of the worktree an agent works in (`[detached]` on a detached HEAD), plain text;
/// None outside a linked worktree.
pub fn worktree_tag(agent: &AgentView) -> Option<String> {
    agent.worktree.as_ref().map(|w| {
        let branch = w.branch.as_deref().unwrap_or("detached");
        format!("[{}]", text::plain_text(branch, 40))
    })
}

/// The title column with the worktree tag in front.
pub fn tagged_title(agent: &AgentView, max_chars: usize) -> String {
    let title = agent
        .title
        .as_deref()
        .map(|t| text::plain_text(t, max_chars))
        .unwrap_or_default();
    match worktree_tag(agent) {
        Some(tag) if title.is_empty() => tag,
        Some(tag) => format!("{tag} {title}"),
        None => title,
    }
}

/// The harness name as every view shows it: marked `*` when the installed version is outside the
/// profile's measured range (its screen states are then the generic ones).
pub fn harness_label(agent: &AgentView, max_chars: usize) -> String {
    let name = plain_text(&agent.harness, max_chars);
    match agent.profile_fit {
        volee_protocol::ProfileFit::OtherVersion => format!("{name}*"),
        _ => name,
    }
}

/// The longest machine name (`volee machine add` takes at most 32 characters).
pub const MACHINE_MAX: usize = 32;

/// How an agent is addressed, as plain text: `ID`, or `MACHINE:ID` for an agent on a machine.
pub fn address_text(agent: &AgentView, max_id_chars: usize) -> String {
    match &agent.machine {
        Some(m) => format!(
            "{}:{}",
            plain_text(m, MACHINE_MAX),
            plain_text(&agent.id, max_id_chars)
        ),
        None => plain_text(&agent.id, max_id_chars),
    }
}

/// A name as the lists show it: `MACHINE:NAME` for an agent on a machine, so a remote agent is
/// told apart from a local one of the same name.
pub fn machine_name_text(agent: &AgentView, max_name_chars: usize) -> String {
    match &agent.machine {
        Some(m) => format!(
            "{}:{}",
            plain_text(m, MACHINE_MAX),
            plain_text(&agent.name, max_name_chars)
        ),
        None => plain_text(&agent.name, max_name_chars),
    }
}

/// What follows the state of an agent whose machine cannot be reached: its state is the last one
/// known (`working?`).
pub const UNREACHABLE_SUFFIX: &str = "?";

/// The state as a list shows it: its machine name (`needs_you`), with [`UNREACHABLE_SUFFIX`]
/// while its machine cannot be reached.
pub fn state_text(agent: &AgentView) -> String {
    let state = match agent.reason {
        Some(r) => format!("{}:{}", agent.state, r.short()),
        None => agent.state.to_string(),
    };
    if agent.reachable {
        state
    } else {
        format!("{state}{UNREACHABLE_SUFFIX}")
    }
}

/// What a list's filter looks in for a past session (`volee browse`, the zellij pane): its id,
/// harness, title, first prompt, project and branch, lower case.
pub fn session_haystack(
    id: &str,
    harness: &str,
    title: Option<&str>,
    first_prompt: Option<&str>,
    project: Option<&str>,
    branch: Option<&str>,
) -> String {
    format!(
        "{id} {harness} {} {} {} {}",
        title.unwrap_or(""),
        first_prompt.unwrap_or(""),
        project.unwrap_or(""),
        branch.unwrap_or("")
    )
    .to_lowercase()
}

#[cfg(test)]
pub(crate) mod test_support {
    use volee_protocol::{AgentState, AgentView, Host, Origin, ProfileFit, StateSource};

    /// 2025-01-01T00:10:00Z, the fixed "now" of every test.
    pub const NOW: u64 = 1_735_690_200;

    /// An agent in tmux pane `%<n>` whose state began `since` (RFC 3339).
    pub fn agent(id: &str, name: &str, state: AgentState, since: &str) -> AgentView {
        AgentView {
            id: id.into(),
            name: name.into(),
            harness: "claude".into(),
            harness_version: Some("2.0.14".into()),
            profile_fit: ProfileFit::Measured,
            origin: Origin::Launched,
            state,
            state_source: StateSource::Hooks,
            state_since: since.into(),
            evidence: "hook Notification".into(),
            reason: None,
            exit_status: None,
            pid: Some(4242),
            cwd: "/home/u/src/app".into(),
            session_id: None,
            host: Host::Tmux {
                socket: "/tmp/tmux-1000/default".into(),
                session: "work".into(),
                window: "@3".into(),
                pane: "%7".into(),
            },
            title: None,
            command: vec!["claude".into()],
            created_at: "2025-01-01T00:00:00Z".into(),
            ended_at: None,
            last_output: None,
            worktree: None,
            machine: None,
            reachable: true,
            unreachable_since: None,
            restorable: false,
            placement: None,
            restored: Vec::new(),
            usage: None,
            budget: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::agent;
    use super::*;

    #[test]
    fn display_order_is_state_then_name_then_id() {
        let agents = [
            agent("a", "z1", AgentState::Idle, "2025-01-01T00:01:00Z"),
            agent("b", "z7", AgentState::NeedsYou, "2025-01-01T00:05:00Z"),
            agent("c", "z2", AgentState::NeedsYou, "2025-01-01T00:02:00Z"),
            agent("d", "z0", AgentState::Stopped, "2025-01-01T00:00:00Z"),
            agent("e", "z5", AgentState::Working, "garbage"),
            agent("f", "z5", AgentState::Working, "2025-01-01T00:09:00Z"),
            agent("g", "z9", AgentState::Failed, "2025-01-01T00:09:00Z"),
        ];
        let ids: Vec<&str> = in_display_order(&agents)
            .iter()
            .map(|a| a.id.as_str())
            .collect();
        assert_eq!(ids, ["c", "b", "g", "e", "f", "a", "d"]);
    }
}
