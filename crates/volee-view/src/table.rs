//! Plain terminal output: the `volee ls` table, `volee show` and `volee explain`.
//!
//! Every line ends with `\n`; agent text goes through [`plain_text`], so no escape sequence reaches
//! the user's terminal.

use volee_protocol::{AgentView, Explanation, Host, Origin, ProfileFit};

use crate::text::{age_of, display_width, pad_to, plain_text};

const ID_MAX: usize = 16;
const NAME_MAX: usize = 24;
const HARNESS_MAX: usize = 16;
const WHERE_MAX: usize = 48;
/// Bound for single values in `show` and `explain`, long enough for a path or a command line.
const VALUE_MAX: usize = 500;

/// The `volee ls` table in the order given, with a header and columns aligned by display width;
/// `no agents` when there are none.
pub fn agents_table(agents: &[AgentView], now_epoch_secs: u64) -> String {
    table(agents, now_epoch_secs, false)
}

/// `volee ls --wide`: the table with a TOKENS column (what each agent's harness recorded:
/// input + output + cache writes, with cache reads after a `+`; `?` when unknown).
pub fn agents_table_wide(agents: &[AgentView], now_epoch_secs: u64) -> String {
    table(agents, now_epoch_secs, true)
}

/// Tokens in short: `1234`, `12.3k`, `4.5M`.
pub fn tokens_short(n: u64) -> String {
    match n {
        0..=9_999 => n.to_string(),
        10_000..=999_999 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

/// An agent's usage in a few words: `12.3k (+40.1k cached)`, `unknown`.
pub fn tokens_text(a: &AgentView) -> String {
    match &a.usage {
        None => "unknown".into(),
        Some(u) if u.cache_read > 0 => format!(
            "{} (+{} cached)",
            tokens_short(u.counted()),
            tokens_short(u.cache_read)
        ),
        Some(u) => tokens_short(u.counted()),
    }
}

/// Every field of an agent's usage, for `show` and `explain`.
fn usage_detail(a: &AgentView) -> String {
    match &a.usage {
        None => "unknown (its harness records none where volee reads, or none yet)".into(),
        Some(u) => format!(
            "{} input, {} output, {} cache read, {} cache write{}{}, cost {} (from {})",
            u.input,
            u.output,
            u.cache_read,
            u.cache_write,
            u.requests
                .map(|r| format!(", {r} requests"))
                .unwrap_or_default(),
            u.model
                .as_deref()
                .map(|m| format!(", model {m}"))
                .unwrap_or_default(),
            cost_text(u.cost_usd),
            u.source
        ),
    }
}

/// A cost in USD: `$0.1108`, `$12.40`, `unknown`.
pub fn cost_text(usd: Option<f64>) -> String {
    match usd {
        None => "unknown".into(),
        Some(c) if c < 1.0 => format!("${c:.4}"),
        Some(c) => format!("${c:.2}"),
    }
}

fn table(agents: &[AgentView], now_epoch_secs: u64, wide: bool) -> String {
    if agents.is_empty() {
        return "no agents\n".to_owned();
    }
    // A MACHINE column only when some agent runs on a machine, a BRANCH column only when some
    // agent works in a linked worktree.
    let machines = agents.iter().any(|a| a.machine.is_some());
    let branches = agents.iter().any(|a| a.worktree.is_some());
    let rows = agents.iter().map(|a| {
        let harness = crate::harness_label(a, HARNESS_MAX);
        let mut row = vec![
            crate::address_text(a, ID_MAX),
            plain_text(&a.name, NAME_MAX),
            harness,
            crate::state_text(a),
            age_of(&a.state_since, now_epoch_secs),
            a.state_source.to_string(),
        ];
        if machines {
            row.push(
                a.machine
                    .as_deref()
                    .map_or_else(|| "-".into(), |m| plain_text(m, crate::MACHINE_MAX)),
            );
        }
        row.push(host_text(&a.host));
        if branches {
            row.push(crate::worktree_tag(a).unwrap_or_else(|| "-".into()));
        }
        if wide {
            row.push(match &a.usage {
                None => "?".into(),
                Some(u) if u.cache_read > 0 => format!(
                    "{} +{}",
                    tokens_short(u.counted()),
                    tokens_short(u.cache_read)
                ),
                Some(u) => tokens_short(u.counted()),
            });
            row.push(match a.usage.as_ref().and_then(|u| u.cost_usd) {
                None => "?".into(),
                c => cost_text(c),
            });
        }
        row
    });
    let mut header: Vec<String> = ["ID", "NAME", "HARNESS", "STATE", "FOR", "SOURCE"]
        .map(String::from)
        .to_vec();
    if machines {
        header.push("MACHINE".into());
    }
    header.push("WHERE".into());
    if branches {
        header.push("BRANCH".into());
    }
    if wide {
        header.extend(["TOKENS".into(), "COST".into()]);
    }
    let mut text = columns(std::iter::once(header).chain(rows).collect(), "");
    if agents
        .iter()
        .any(|a| a.profile_fit == ProfileFit::OtherVersion)
    {
        text.push_str(
            "* installed version outside the profile's measured range: hooks used, screen states generic\n",
        );
    }
    if agents.iter().any(|a| !a.reachable) {
        text.push_str(&format!(
            "{} its machine cannot be reached: the last state known (volee machine ls)\n",
            crate::UNREACHABLE_SUFFIX
        ));
    }
    text
}

/// Where an agent lives, in short: `tmux work:@3 %7`, `zellij S tab 2`, `tty /dev/pts/3`, `-`.
pub fn host_text(host: &Host) -> String {
    let text = match host {
        Host::Tmux {
            session,
            window,
            pane,
            ..
        } => format!("tmux {session}:{window} {pane}"),
        Host::Zellij { session, tab, .. } => format!("zellij {session} tab {tab}"),
        Host::Tty { tty } => format!("tty {tty}"),
        Host::None => "-".to_owned(),
    };
    plain_text(&text, WHERE_MAX)
}

/// Every field of one agent as aligned `key: value` lines, for `volee show`.
pub fn agent_detail(agent: &AgentView, now_epoch_secs: u64) -> String {
    let a = agent;
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".to_owned());
    let mut fields = vec![("id", a.id.clone())];
    if let Some(machine) = &a.machine {
        fields.push(("machine", machine.clone()));
        if !a.reachable {
            fields.push((
                "reachable",
                format!(
                    "no, since {} (the state is the last one known)",
                    a.unreachable_since.as_deref().unwrap_or("?")
                ),
            ));
        }
    }
    fields.extend([
        ("name", a.name.clone()),
        ("harness", a.harness.clone()),
        ("harness_version", opt(a.harness_version.clone())),
        ("profile_fit", profile_fit_name(a.profile_fit).to_owned()),
        ("origin", origin_name(a.origin).to_owned()),
        ("state", a.state.to_string()),
        ("reason", opt(a.reason.map(|r| r.to_string()))),
        ("state_source", a.state_source.to_string()),
        (
            "state_since",
            format!(
                "{} ({} ago)",
                a.state_since,
                age_of(&a.state_since, now_epoch_secs)
            ),
        ),
        ("evidence", a.evidence.clone()),
        ("exit_status", opt(a.exit_status.map(|s| s.to_string()))),
        ("pid", opt(a.pid.map(|p| p.to_string()))),
        ("cwd", a.cwd.clone()),
        (
            "worktree",
            opt(a.worktree.as_ref().map(|w| match &w.branch {
                Some(b) => format!("{} (branch {b})", w.path),
                None => format!("{} (detached HEAD)", w.path),
            })),
        ),
        ("session_id", opt(a.session_id.clone())),
        ("usage", usage_detail(a)),
        ("where", host_text(&a.host)),
    ]);
    match &a.host {
        Host::Tmux { socket, .. } => fields.push(("tmux_socket", socket.clone())),
        Host::Zellij { pane, .. } => fields.push(("zellij_pane", pane.clone())),
        Host::Tty { .. } | Host::None => {}
    }
    fields.extend([
        ("title", opt(a.title.clone())),
        (
            "command",
            a.command
                .iter()
                .map(|w| shell_word(w))
                .collect::<Vec<_>>()
                .join(" "),
        ),
        ("created_at", a.created_at.clone()),
        ("ended_at", opt(a.ended_at.clone())),
    ]);
    let width = fields.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 1;
    fields
        .into_iter()
        .map(|(key, value)| {
            let value = plain_text(&value, VALUE_MAX);
            let value = if value.is_empty() {
                "-".to_owned()
            } else {
                value
            };
            format!("{:width$} {value}\n", format!("{key}:"))
        })
        .collect()
}

/// Why an agent is in its state, for `volee explain`: a summary line, the deciding rule, then
/// each source's latest observation.
pub fn explanation_text(ex: &Explanation, now_epoch_secs: u64) -> String {
    let a = &ex.agent;
    let mut out = format!(
        "{} {}: {} (source {}, since {})\n",
        crate::address_text(a, ID_MAX),
        plain_text(&a.name, NAME_MAX),
        match a.reason {
            Some(r) => format!("{} ({r})", a.state),
            None => a.state.to_string(),
        },
        a.state_source,
        age_of(&a.state_since, now_epoch_secs),
    );
    if let (Some(machine), false) = (&a.machine, a.reachable) {
        out.push_str(&format!(
            "machine {} cannot be reached since {}: this is the last state known\n",
            plain_text(machine, crate::MACHINE_MAX),
            plain_text(a.unreachable_since.as_deref().unwrap_or("?"), 40)
        ));
    }
    out.push_str(&format!(
        "decided by: {}\n",
        plain_text(&ex.decision, VALUE_MAX)
    ));
    out.push_str(&format!(
        "usage: {}\n",
        plain_text(&usage_detail(a), VALUE_MAX)
    ));
    if let Some(screen) = &ex.screen {
        out.push_str(&format!("screen: {}", plain_text(&screen.kind, 16)));
        if screen.checks > 0 {
            out.push_str(&format!(
                " (checked against tmux {} times, {} differences)",
                screen.checks, screen.differences
            ));
        }
        out.push('\n');
    }
    if ex.observations.is_empty() {
        out.push_str("observations: none\n");
        return out;
    }
    out.push_str("observations:\n");
    let rows = ex.observations.iter().map(|o| {
        [
            o.source.to_string(),
            plain_text(&o.kind, 16),
            format!("{} ago", age_of(&o.at, now_epoch_secs)),
            plain_text(&o.evidence, VALUE_MAX),
        ]
    });
    out.push_str(&columns(rows.collect(), "  "));
    out
}

/// Rows as lines of columns two spaces apart, each column but the last padded to its widest cell.
fn columns<R: AsRef<[String]>>(rows: Vec<R>, indent: &str) -> String {
    let n = rows.iter().map(|r| r.as_ref().len()).max().unwrap_or(0);
    let mut widths = vec![0; n];
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row.as_ref()) {
            *w = (*w).max(display_width(cell));
        }
    }
    let mut out = String::new();
    for row in &rows {
        let cells: Vec<String> = row
            .as_ref()
            .iter()
            .zip(&widths)
            .map(|(c, w)| pad_to(c, *w))
            .collect();
        out.push_str(indent);
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// A command-line word as a POSIX shell would need it, so `show` prints a command one can rerun.
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_alphanumeric() || "-_./=:,+@%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_owned()
    } else {
        crate::text::sh_quote(word)
    }
}

fn profile_fit_name(fit: ProfileFit) -> &'static str {
    match fit {
        ProfileFit::Measured => "measured",
        ProfileFit::OtherVersion => "other_version",
        ProfileFit::Generic => "generic",
    }
}

fn origin_name(origin: Origin) -> &'static str {
    match origin {
        Origin::Launched => "launched",
        Origin::Discovered => "discovered",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{agent, NOW};
    use volee_protocol::{AgentState::*, ObservationView, StateSource};

    #[test]
    fn other_versions_are_marked() {
        let mut a = agent(
            "k3f9",
            "fix",
            volee_protocol::AgentState::Idle,
            "2025-01-01T00:09:00Z",
        );
        a.profile_fit = ProfileFit::OtherVersion;
        let t = agents_table(&[a], NOW);
        assert!(t.contains("claude*"), "{t}");
        assert!(t.contains("outside the profile's measured range"), "{t}");
    }

    #[test]
    fn table_aligns_unicode_names() {
        let mut agents = vec![
            agent("k3f9", "fix-auth", NeedsYou, "2025-01-01T00:07:00Z"),
            agent(
                "p2x1",
                "日本語のエージェント",
                Working,
                "2025-01-01T00:09:55Z",
            ),
            agent("z9", "évite\x1b[2J", Done, "2024-12-30T00:00:00Z"),
        ];
        agents[1].host = Host::Zellij {
            session: "S".into(),
            tab: 2,
            pane: "terminal_1".into(),
        };
        agents[2].host = Host::None;
        agents[2].state_source = StateSource::Process;
        let expected = "\
ID    NAME                  HARNESS  STATE      FOR  SOURCE   WHERE
k3f9  fix-auth              claude   needs_you  3m   hooks    tmux work:@3 %7
p2x1  日本語のエージェント  claude   working    5s   hooks    zellij S tab 2
z9    évite[2J              claude   done       2d   process  -
";
        assert_eq!(agents_table(&agents, NOW), expected);
        assert_eq!(agents_table(&[], NOW), "no agents\n");
    }

    #[test]
    fn detail_lists_every_field() {
        let mut a = agent("k3f9", "fix-auth", Failed, "2025-01-01T00:07:00Z");
        a.exit_status = Some(1);
        a.title = Some("\x1b]0;pwned\x07Tests".into());
        a.command = vec!["claude".into(), "--model".into(), "it's big".into()];
        let text = agent_detail(&a, NOW);
        for line in [
            "id:              k3f9\n",
            "harness_version: 2.0.14\n",
            "state:           failed\n",
            "state_since:     2025-01-01T00:07:00Z (3m ago)\n",
            "exit_status:     1\n",
            "session_id:      -\n",
            "where:           tmux work:@3 %7\n",
            "tmux_socket:     /tmp/tmux-1000/default\n",
            "title:           ]0;pwnedTests\n",
            "command:         claude --model 'it'\\''s big'\n",
            "ended_at:        -\n",
            "worktree:        -\n",
            "usage:           unknown (its harness records none where volee reads, or none yet)\n",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        assert_eq!(text.lines().count(), 23);
        assert!(!text.contains('\x1b'));
    }

    #[test]
    fn wide_adds_tokens_known_or_not_and_show_says_where_they_come_from() {
        let unknown = agent("k3f9", "fix-auth", Idle, "2025-01-01T00:07:00Z");
        let mut known = agent("p2x1", "tests", Idle, "2025-01-01T00:07:00Z");
        known.usage = Some(volee_protocol::AgentUsage {
            input: 12_000,
            output: 345,
            cache_read: 40_100,
            cache_write: 0,
            requests: Some(3),
            model: Some("claude-opus-5-5".into()),
            source: "/home/me/.claude/projects/x/s.jsonl".into(),
            cost_usd: Some(0.1108),
        });
        assert!(!agents_table(&[known.clone()], NOW).contains("TOKENS"));
        let table = agents_table_wide(&[unknown, known.clone()], NOW);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].ends_with("TOKENS        COST"), "{table}");
        assert!(lines[1].ends_with(" ?             ?"), "{table}");
        assert!(lines[2].ends_with(" 12.3k +40.1k  $0.1108"), "{table}");
        let detail = agent_detail(&known, NOW);
        assert!(
            detail.contains(
                "usage:           12000 input, 345 output, 40100 cache read, 0 cache write, 3 requests, model claude-opus-5-5, cost $0.1108 (from /home/me/.claude/projects/x/s.jsonl)"
            ),
            "{detail}"
        );
        assert_eq!(tokens_short(9_999), "9999");
        assert_eq!(tokens_short(1_500_000), "1.5M");
    }

    #[test]
    fn a_branch_column_only_when_an_agent_has_a_worktree() {
        let plain = agent("k3f9", "fix-auth", NeedsYou, "2025-01-01T00:07:00Z");
        assert!(!agents_table(std::slice::from_ref(&plain), 0).contains("BRANCH"));
        let mut wt = agent("b2c3", "wt#[evil]", NeedsYou, "2025-01-01T00:07:00Z");
        wt.worktree = Some(volee_protocol::Worktree {
            path: "/r.worktrees/x".into(),
            branch: Some("volee/x\x1b[2J".into()),
        });
        let table = agents_table(&[plain, wt.clone()], 0);
        assert!(table.lines().next().unwrap().ends_with("BRANCH"), "{table}");
        assert!(table.contains("[volee/x"), "{table}");
        assert!(!table.contains('\x1b'));
        assert!(agent_detail(&wt, 0).contains("/r.worktrees/x (branch volee/x"));
        wt.worktree.as_mut().unwrap().branch = None;
        assert!(agent_detail(&wt, 0).contains("(detached HEAD)"));
        assert_eq!(crate::worktree_tag(&wt).as_deref(), Some("[detached]"));
    }

    #[test]
    fn remote_agents_get_a_machine_column_and_their_address() {
        let local = agent("k3f9", "fix-auth", NeedsYou, "2025-01-01T00:07:00Z");
        assert!(!agents_table(std::slice::from_ref(&local), NOW).contains("MACHINE"));
        let mut remote = agent("p2x1", "build", Working, "2025-01-01T00:09:55Z");
        remote.machine = Some("box".into());
        let mut gone = agent("q7", "tests", NeedsYou, "2025-01-01T00:09:00Z");
        gone.machine = Some("gpu-1".into());
        gone.reachable = false;
        gone.unreachable_since = Some("2025-01-01T00:09:30Z".into());
        let expected = "\
ID        NAME      HARNESS  STATE       FOR  SOURCE  MACHINE  WHERE
k3f9      fix-auth  claude   needs_you   3m   hooks   -        tmux work:@3 %7
box:p2x1  build     claude   working     5s   hooks   box      tmux work:@3 %7
gpu-1:q7  tests     claude   needs_you?  1m   hooks   gpu-1    tmux work:@3 %7
? its machine cannot be reached: the last state known (volee machine ls)
";
        assert_eq!(agents_table(&[local, remote, gone.clone()], NOW), expected);
        let detail = agent_detail(&gone, NOW);
        assert!(detail.contains("machine:         gpu-1\n"), "{detail}");
        assert!(
            detail.contains("reachable:       no, since 2025-01-01T00:09:30Z"),
            "{detail}"
        );
        let ex = Explanation {
            agent: gone,
            observations: vec![],
            decision: "d".into(),
            screen: None,
        };
        let text = explanation_text(&ex, NOW);
        assert!(text.starts_with("gpu-1:q7 tests: needs_you"), "{text}");
        assert!(
            text.contains("machine gpu-1 cannot be reached since 2025-01-01T00:09:30Z"),
            "{text}"
        );
    }

    #[test]
    fn explanation_lists_observations() {
        let ex = Explanation {
            agent: agent("k3f9", "fix-auth", NeedsYou, "2025-01-01T00:07:00Z"),
            observations: vec![
                ObservationView {
                    source: StateSource::Hooks,
                    kind: "prompt".into(),
                    at: "2025-01-01T00:07:00.123Z".into(),
                    evidence: "Notification: permission\nrequest".into(),
                },
                ObservationView {
                    source: StateSource::Multiplexer,
                    kind: "output".into(),
                    at: "2025-01-01T00:09:58.000Z".into(),
                    evidence: "\x1b[1mspinner".into(),
                },
            ],
            decision: "hooks report a permission prompt, newer than screen output".into(),
            screen: None,
        };
        let expected = "\
k3f9 fix-auth: needs_you (source hooks, since 3m)
decided by: hooks report a permission prompt, newer than screen output
usage: unknown (its harness records none where volee reads, or none yet)
observations:
  hooks        prompt  3m ago  Notification: permission request
  multiplexer  output  2s ago  [1mspinner
";
        assert_eq!(explanation_text(&ex, NOW), expected);
        let bare = Explanation {
            observations: vec![],
            ..ex
        };
        assert!(explanation_text(&bare, NOW).ends_with("observations: none\n"));
        let modelled = Explanation {
            screen: Some(volee_protocol::ScreenSource {
                kind: "model".into(),
                checks: 3,
                differences: 0,
            }),
            ..bare
        };
        assert!(explanation_text(&modelled, NOW)
            .contains("\nscreen: model (checked against tmux 3 times, 0 differences)\n"));
    }
}
