//! The zellij plugin's pane: the agent list it draws, its key handling (selection, focus, the
//! inline launch prompt) and the screen excerpt it reports to the daemon.
//!
//! Pure, so it is tested natively while the plugin (`zellij-plugin/`, wasm only) stays a thin
//! shell: it turns zellij keys into [`Key`], calls [`Ui::key`], carries out the [`UiAction`] and
//! prints [`Ui::lines`].

use volee_protocol::zellij::parse_terminal_id;
use volee_protocol::{AgentState, AgentView, Host};

use crate::status::Counts;
use crate::text::{age_of, display_width, pad_to, plain_text};
use crate::{harness_label, in_display_order, next_needing_you, state_marker, state_words};

/// How many lines of a pane's screen go into one `Screen` event.
pub const SCREEN_LINES: usize = 40;

/// What the launch prompt offers, in this order; `generic` runs a command line.
pub const HARNESSES: &[&str] = &[
    "generic", "claude", "codex", "gemini", "qwen", "grok", "copilot", "opencode", "aider", "amp",
    "cursor", "volee",
];

const NAME_MAX: usize = 24;
const HARNESS_MAX: usize = 12;
const TITLE_MAX: usize = 60;
/// Bound for a message (a launch's stderr) before it is fitted to the pane's width.
const MESSAGE_MAX: usize = 300;

const RESET: &str = "\x1b[0m";
const BOLD: &str = "1";
const DIM: &str = "2";

/// The SGR parameters of a state's colour, the same colours as the tmux status line.
fn state_style(state: AgentState) -> &'static str {
    match state {
        AgentState::NeedsYou => "1;31",
        AgentState::Working => "33",
        AgentState::Idle => "32",
        AgentState::Failed => "35",
        AgentState::Done => "34",
        AgentState::Stopped => "2",
    }
}

/// The last [`SCREEN_LINES`] lines of a viewport, each without trailing spaces, trailing blank
/// lines dropped (zellij pads every row to the pane's width).
pub fn screen_tail(viewport: &[String]) -> Vec<String> {
    let lines: Vec<&str> = viewport.iter().map(|l| l.trim_end()).collect();
    let used = lines
        .iter()
        .rposition(|l| !l.is_empty())
        .map_or(0, |i| i + 1);
    let start = used.saturating_sub(SCREEN_LINES);
    lines[start..used].iter().map(|l| (*l).to_owned()).collect()
}

/// The command line that launches `harness` from the plugin's prompt: a harness gets `text` as
/// its first prompt, `generic` runs `text` through `sh -c` (as the tmux launch prompt does).
pub fn launch_argv(volee_bin: &str, harness: &str, text: &str) -> Vec<String> {
    let mut argv: Vec<String> = [volee_bin, "launch", "--host", "zellij"]
        .map(String::from)
        .to_vec();
    let text = text.trim();
    if harness == "generic" {
        argv.extend(["--", "sh", "-c", text].map(String::from));
    } else {
        argv.extend(["--harness", harness].map(String::from));
        if !text.is_empty() {
            // A prompt starting with `-` would be read as an option of `volee launch`.
            let prompt = if text.starts_with('-') {
                format!(" {text}")
            } else {
                text.to_owned()
            };
            argv.push(prompt);
        }
    }
    argv
}

/// The terminal pane id of an agent running in zellij (`terminal_7` → 7).
pub fn zellij_pane(agent: &AgentView) -> Option<u32> {
    match &agent.host {
        Host::Zellij { pane, .. } => parse_terminal_id(pane),
        _ => None,
    }
}

/// The mark in front of the name of a tab whose agent needs you while the tab is not shown.
pub const NEEDS_YOU_MARK: &str = "! ";

/// Tab renames that mark (or unmark) tabs: a tab not shown (`active` false) holding an agent that
/// needs you gets [`NEEDS_YOU_MARK`] in front of its name; a marked tab holding a volee agent
/// loses it once none of its agents needs you or it is shown. `pane_tabs`: terminal pane id →
/// tab position; `tabs`: (position, name, active). Stateless, so every plugin instance agrees.
pub fn tab_marks(
    agents: &[AgentView],
    pane_tabs: &[(u32, usize)],
    tabs: &[(usize, String, bool)],
) -> Vec<(usize, String)> {
    let tab_of = |agent: &AgentView| {
        zellij_pane(agent).and_then(|p| pane_tabs.iter().find(|(id, _)| *id == p).map(|(_, t)| *t))
    };
    let mut renames = Vec::new();
    for (pos, name, active) in tabs {
        let mine: Vec<&AgentView> = agents
            .iter()
            .filter(|a| !a.state.is_final() && tab_of(a) == Some(*pos))
            .collect();
        if mine.is_empty() {
            continue;
        }
        let want = !active && mine.iter().any(|a| a.state == AgentState::NeedsYou);
        match (want, name.strip_prefix(NEEDS_YOU_MARK)) {
            (true, None) => renames.push((*pos, format!("{NEEDS_YOU_MARK}{name}"))),
            (false, Some(base)) => renames.push((*pos, base.to_string())),
            _ => {}
        }
    }
    renames
}

/// The toast for agents that have just come to need you (their state in `before` was another,
/// or they were not there).
pub fn needs_you_toast(before: &[AgentView], now: &[AgentView]) -> Option<String> {
    let fresh: Vec<&AgentView> = now
        .iter()
        .filter(|a| a.state == AgentState::NeedsYou)
        .filter(|a| {
            !before
                .iter()
                .any(|b| b.id == a.id && b.state == AgentState::NeedsYou)
        })
        .collect();
    match fresh.as_slice() {
        [] => None,
        [one] => Some(format!(
            "{} needs you: {}",
            plain_text(&one.name, NAME_MAX),
            plain_text(&one.evidence, 60)
        )),
        many => Some(format!("{} agents need you", many.len())),
    }
}

/// One output line under construction: styled pieces cut to the pane's width as a whole.
#[derive(Default)]
struct Line {
    pieces: Vec<(String, Option<&'static str>)>,
}

impl Line {
    fn plain(mut self, text: impl Into<String>) -> Self {
        self.pieces.push((text.into(), None));
        self
    }

    fn styled(mut self, text: impl Into<String>, style: &'static str) -> Self {
        self.pieces.push((text.into(), Some(style)));
        self
    }

    /// At most `cols` display columns (the last one `…` when something was cut), colours only when
    /// `color`; trailing spaces dropped.
    fn finish(self, cols: usize, color: bool) -> String {
        let all: String = self.pieces.iter().map(|(t, _)| t.as_str()).collect();
        let cutting = display_width(all.trim_end()) > cols;
        let mut left = cols;
        let mut out = String::new();
        for (text, style) in &self.pieces {
            let width = display_width(text);
            let last = cutting && width >= left;
            let piece = if last {
                cut_to(text, left)
            } else {
                text.clone()
            };
            left = left.saturating_sub(width);
            match style {
                Some(style) if color && !piece.trim().is_empty() => {
                    out.push_str(&format!("\x1b[{style}m{piece}{RESET}"));
                }
                _ => out.push_str(&piece),
            }
            if last {
                break;
            }
        }
        out.truncate(out.trim_end_matches(' ').len());
        out
    }
}

/// `text` cut to fewer than `width` display columns plus a final `…` (never splits a character).
fn cut_to(text: &str, width: usize) -> String {
    if width == 0 {
        return String::new();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = display_width(c.encode_utf8(&mut [0; 4]));
        if used + w > width - 1 {
            break;
        }
        out.push(c);
        used += w;
    }
    out.truncate(out.trim_end().len());
    out.push('…');
    out
}

/// The header: `volee  ● 1 needs you  ▶ 2 working`, or `volee  no agents`.
fn header(agents: &[AgentView]) -> Line {
    let counts = Counts::from_agents(agents);
    let mut line = Line::default().styled("volee", BOLD);
    if counts.total() == 0 {
        return line.plain("  ").styled("no agents", DIM);
    }
    for state in crate::DISPLAY_ORDER {
        let n = counts.get(state);
        if n > 0 {
            line = line.plain("  ").styled(
                format!("{} {n} {}", state_marker(state), state_words(state)),
                state_style(state),
            );
        }
    }
    line
}

fn footer() -> Line {
    Line::default().styled(
        "↑↓/jk select  enter focus  n next needing you  l launch  q close",
        DIM,
    )
}

/// The plugin pane's list: a header with counts, one row per agent in display order (state in its
/// colour, name, harness, age, source, title) with `>` on row `selected`, scrolled so that row is
/// visible, and a key hint at the bottom. At most `rows` lines of at most `cols` columns; agent
/// text stripped of control characters; ANSI colours only when `color`.
pub fn plugin_lines(
    agents: &[AgentView],
    selected: usize,
    rows: usize,
    cols: usize,
    now_epoch_secs: u64,
    color: bool,
) -> Vec<String> {
    list_lines(agents, selected, rows, cols, now_epoch_secs, color, None)
}

fn list_lines(
    agents: &[AgentView],
    selected: usize,
    rows: usize,
    cols: usize,
    now_epoch_secs: u64,
    color: bool,
    message: Option<&str>,
) -> Vec<String> {
    let mut top = vec![header(agents)];
    let mut bottom = Vec::new();
    if let Some(message) = message.map(|m| plain_text(m, MESSAGE_MAX)) {
        if !message.is_empty() && rows >= 4 {
            bottom.push(Line::default().styled(message, BOLD));
        }
    }
    if rows >= 3 {
        bottom.push(footer());
    }
    let room = rows.saturating_sub(top.len() + bottom.len());
    if agents.is_empty() {
        if room > 0 {
            top.push(Line::default().plain("  press l to launch an agent"));
        }
    } else {
        let selected = selected.min(agents.len() - 1);
        let offset = (selected + 1).saturating_sub(room);
        top.extend(
            agent_rows(agents, selected, now_epoch_secs)
                .into_iter()
                .skip(offset)
                .take(room),
        );
    }
    top.into_iter()
        .chain(bottom)
        .take(rows)
        .map(|l| l.finish(cols, color))
        .collect()
}

fn agent_rows(agents: &[AgentView], selected: usize, now_epoch_secs: u64) -> Vec<Line> {
    let ordered = in_display_order(agents);
    let cells: Vec<[String; 5]> = ordered
        .iter()
        .map(|a| {
            [
                plain_text(&a.name, NAME_MAX),
                harness_label(a, HARNESS_MAX),
                age_of(&a.state_since, now_epoch_secs),
                a.state_source.as_str().to_owned(),
                crate::tagged_title(a, TITLE_MAX),
            ]
        })
        .collect();
    let width = |col: usize| {
        cells
            .iter()
            .map(|c| display_width(&c[col]))
            .max()
            .unwrap_or(0)
    };
    let widths = [width(0), width(1), width(2), width(3)];
    let state_width = ordered
        .iter()
        .map(|a| display_width(state_words(a.state)))
        .max()
        .unwrap_or(0);
    ordered
        .iter()
        .zip(cells)
        .enumerate()
        .map(|(i, (agent, [name, harness, age, source, title]))| {
            let marker = if i == selected { "> " } else { "  " };
            let state = format!(
                "{} {}",
                state_marker(agent.state),
                pad_to(state_words(agent.state), state_width)
            );
            let name = pad_to(&name, widths[0]);
            let line = Line::default()
                .styled(marker, BOLD)
                .styled(state, state_style(agent.state))
                .plain("  ");
            let line = if i == selected {
                line.styled(name, BOLD)
            } else {
                line.plain(name)
            };
            line.plain(format!(
                "  {}  {age:>aw$}  {}  ",
                pad_to(&harness, widths[1]),
                pad_to(&source, widths[3]),
                aw = widths[2],
            ))
            .styled(title, DIM)
        })
        .collect()
}

/// A key of the plugin pane, as the plugin translates zellij's (modifier keys are not passed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Up,
    Down,
    Enter,
    Esc,
    Backspace,
    Char(char),
}

/// What the plugin must do after a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UiAction {
    /// Focus this terminal pane for the plugin's client.
    Focus { pane: u32 },
    /// Launch an agent: run [`launch_argv`] with the plugin's `volee` binary.
    Launch { harness: &'static str, text: String },
    /// Hide the plugin pane.
    Close,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
enum Mode {
    #[default]
    List,
    /// Choosing a harness, the index into [`HARNESSES`].
    PickHarness(usize),
    /// Typing the prompt (or, for `generic`, the command line).
    Prompt { harness: usize, text: String },
}

/// The plugin pane's state: the selected agent (kept by id, so it stays put when the list
/// changes), the launch prompt, and a one-line message.
#[derive(Debug, Clone, Default)]
pub struct Ui {
    selected_id: Option<String>,
    mode: Mode,
    message: Option<String>,
}

/// Longest launch text accepted from the keyboard.
const PROMPT_MAX: usize = 4_000;

impl Ui {
    /// Shows `message` (agent or command output is fine: it is stripped when rendered) until the
    /// next key.
    pub fn set_message(&mut self, message: impl Into<String>) {
        self.message = Some(message.into());
    }

    /// Is the launch prompt open (keys are text then)?
    pub fn is_prompting(&self) -> bool {
        self.mode != Mode::List
    }

    /// Row of the selected agent in display order (0 when none is selected or it is gone).
    pub fn selected_index(&self, agents: &[AgentView]) -> usize {
        self.selected_id
            .as_deref()
            .and_then(|id| in_display_order(agents).iter().position(|a| a.id == id))
            .unwrap_or(0)
    }

    fn select(&mut self, agents: &[AgentView], index: usize) {
        self.selected_id = in_display_order(agents).get(index).map(|a| a.id.clone());
    }

    /// Handles one key. `agents` is the latest list from the daemon; `local_panes` the terminal
    /// panes of this zellij session's agents (the daemon's watch list): only those can be focused,
    /// since a `terminal_N` of another session names some other pane here.
    pub fn key(&mut self, key: Key, agents: &[AgentView], local_panes: &[u32]) -> Option<UiAction> {
        self.message = None;
        match std::mem::take(&mut self.mode) {
            Mode::List => self.list_key(key, agents, local_panes),
            Mode::PickHarness(index) => {
                self.mode = match key {
                    Key::Up | Key::Char('k') => {
                        Mode::PickHarness(index.checked_sub(1).unwrap_or(HARNESSES.len() - 1))
                    }
                    Key::Down | Key::Char('j') => Mode::PickHarness((index + 1) % HARNESSES.len()),
                    Key::Enter => Mode::Prompt {
                        harness: index,
                        text: String::new(),
                    },
                    Key::Esc | Key::Char('q') => Mode::List,
                    _ => Mode::PickHarness(index),
                };
                None
            }
            Mode::Prompt { harness, mut text } => match key {
                Key::Enter => {
                    let name = HARNESSES.get(harness).copied().unwrap_or("generic");
                    if name == "generic" && text.trim().is_empty() {
                        self.message = Some("type the command line to run".into());
                        self.mode = Mode::Prompt { harness, text };
                        return None;
                    }
                    self.message = Some(format!("launching {name}…"));
                    Some(UiAction::Launch {
                        harness: name,
                        text,
                    })
                }
                Key::Esc => None,
                Key::Backspace => {
                    text.pop();
                    self.mode = Mode::Prompt { harness, text };
                    None
                }
                Key::Char(c) if !c.is_control() && text.chars().count() < PROMPT_MAX => {
                    text.push(c);
                    self.mode = Mode::Prompt { harness, text };
                    None
                }
                _ => {
                    self.mode = Mode::Prompt { harness, text };
                    None
                }
            },
        }
    }

    fn list_key(
        &mut self,
        key: Key,
        agents: &[AgentView],
        local_panes: &[u32],
    ) -> Option<UiAction> {
        let current = self.selected_index(agents);
        match key {
            Key::Up | Key::Char('k') => {
                self.select(agents, current.saturating_sub(1));
                None
            }
            Key::Down | Key::Char('j') => {
                self.select(agents, (current + 1).min(agents.len().saturating_sub(1)));
                None
            }
            Key::Enter => {
                let agent = in_display_order(agents).get(current).copied()?;
                self.focus(agent, local_panes)
            }
            Key::Char('n') => {
                let Some(agent) = next_needing_you(agents, self.selected_id.as_deref()) else {
                    self.message = Some("no agent needs you".into());
                    return None;
                };
                self.selected_id = Some(agent.id.clone());
                self.focus(agent, local_panes)
            }
            Key::Char('l') => {
                self.mode = Mode::PickHarness(0);
                None
            }
            Key::Esc | Key::Char('q') => Some(UiAction::Close),
            _ => None,
        }
    }

    fn focus(&mut self, agent: &AgentView, local_panes: &[u32]) -> Option<UiAction> {
        match zellij_pane(agent) {
            Some(pane) if local_panes.contains(&pane) => Some(UiAction::Focus { pane }),
            _ => {
                self.message = Some(format!(
                    "{} is not in this zellij session: volee attach {}",
                    plain_text(&agent.name, NAME_MAX),
                    plain_text(&agent.id, NAME_MAX)
                ));
                None
            }
        }
    }

    /// The pane's lines: the launch prompt when open, else the agent list; `agents` is `None`
    /// until the daemon first sent them; `notice` (missing permissions) replaces the list.
    pub fn lines(
        &self,
        agents: Option<&[AgentView]>,
        notice: Option<&str>,
        rows: usize,
        cols: usize,
        now_epoch_secs: u64,
        color: bool,
    ) -> Vec<String> {
        let fixed = |texts: Vec<Line>| -> Vec<String> {
            texts
                .into_iter()
                .take(rows)
                .map(|l| l.finish(cols, color))
                .collect()
        };
        match &self.mode {
            Mode::PickHarness(index) => {
                let mut lines = vec![Line::default()
                    .styled("volee", BOLD)
                    .plain("  launch: pick a harness (↑↓ enter, esc cancels)")];
                for (i, name) in HARNESSES.iter().enumerate() {
                    let line = if i == *index {
                        Line::default().styled(format!("> {name}"), BOLD)
                    } else {
                        Line::default().plain(format!("  {name}"))
                    };
                    lines.push(line);
                }
                fixed(lines)
            }
            Mode::Prompt { harness, text } => {
                let name = HARNESSES.get(*harness).copied().unwrap_or("generic");
                let what = if name == "generic" {
                    "command line to run"
                } else {
                    "first prompt (may be empty)"
                };
                // Show the end of a long text, where the cursor is.
                let shown = plain_text(text, PROMPT_MAX);
                let room = cols.saturating_sub(3);
                let mut tail: Vec<char> = Vec::new();
                let mut used = 0;
                for c in shown.chars().rev() {
                    let w = display_width(c.encode_utf8(&mut [0; 4]));
                    if used + w > room {
                        break;
                    }
                    used += w;
                    tail.push(c);
                }
                let tail: String = tail.into_iter().rev().collect();
                let mut lines = vec![
                    Line::default()
                        .styled("volee", BOLD)
                        .plain(format!("  launch {name}: {what}")),
                    Line::default().styled("> ", BOLD).plain(format!("{tail}_")),
                    Line::default().styled("enter launches, esc cancels", DIM),
                ];
                if let Some(message) = &self.message {
                    lines.push(Line::default().styled(plain_text(message, MESSAGE_MAX), BOLD));
                }
                fixed(lines)
            }
            Mode::List => {
                if let Some(notice) = notice {
                    return fixed(vec![
                        Line::default().styled("volee", BOLD),
                        Line::default().plain(plain_text(notice, MESSAGE_MAX)),
                    ]);
                }
                match agents {
                    None => fixed(vec![
                        Line::default().styled("volee", BOLD),
                        Line::default()
                            .plain("waiting for volee (is the daemon running? volee ls)"),
                        Line::default().plain(
                            self.message
                                .as_deref()
                                .map(|m| plain_text(m, MESSAGE_MAX))
                                .unwrap_or_default(),
                        ),
                        footer(),
                    ]),
                    Some(agents) => list_lines(
                        agents,
                        self.selected_index(agents),
                        rows,
                        cols,
                        now_epoch_secs,
                        color,
                        self.message.as_deref(),
                    ),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{agent, NOW};
    use AgentState::*;

    fn in_zellij(mut a: AgentView, pane: u32) -> AgentView {
        a.host = Host::Zellij {
            session: "work".into(),
            tab: 0,
            pane: format!("terminal_{pane}"),
        };
        a
    }

    fn agents() -> Vec<AgentView> {
        let mut working = in_zellij(agent("w", "builder", Working, "2025-01-01T00:09:50Z"), 2);
        working.title = Some("Running tests".into());
        vec![
            working,
            in_zellij(agent("n", "fix-auth", NeedsYou, "2025-01-01T00:05:00Z"), 1),
            agent("d", "docs", Done, "2025-01-01T00:00:00Z"),
        ]
    }

    #[test]
    fn list_has_header_rows_in_display_order_and_footer() {
        let lines = plugin_lines(&agents(), 1, 10, 100, NOW, false);
        assert_eq!(
            lines,
            [
                "volee  ● 1 needs you  ▶ 1 working  ✓ 1 done",
                "  ● needs you  fix-auth  claude   5m  hooks",
                "> ▶ working    builder   claude  10s  hooks  Running tests",
                "  ✓ done       docs      claude  10m  hooks",
                "↑↓/jk select  enter focus  n next needing you  l launch  q close",
            ]
        );
    }

    #[test]
    fn colours_are_per_state_and_only_when_asked() {
        let lines = plugin_lines(&agents(), 0, 10, 100, NOW, true);
        assert!(
            lines[1].contains("\x1b[1;31m● needs you\x1b[0m"),
            "{:?}",
            lines[1]
        );
        assert!(lines[2].contains("\x1b[33m▶ working"), "{:?}", lines[2]);
        assert!(lines[0].starts_with("\x1b[1mvolee\x1b[0m"));
        let plain = plugin_lines(&agents(), 0, 10, 100, NOW, false);
        assert!(plain.iter().all(|l| !l.contains('\x1b')));
    }

    #[test]
    fn lines_are_bounded_by_rows_and_columns() {
        let many: Vec<AgentView> = (0..30)
            .map(|i| {
                agent(
                    &format!("a{i:02}"),
                    "日本語の名前",
                    Idle,
                    "2025-01-01T00:00:00Z",
                )
            })
            .collect();
        for cols in [0, 1, 5, 17, 40] {
            for rows in [0, 1, 2, 3, 5, 12] {
                let lines = plugin_lines(&many, 25, rows, cols, NOW, false);
                assert!(lines.len() <= rows, "{rows}x{cols}: {lines:?}");
                for line in &lines {
                    assert!(display_width(line) <= cols, "{cols}: {line:?}");
                }
                let colored = plugin_lines(&many, 25, rows, cols, NOW, true);
                assert_eq!(colored.len(), lines.len());
            }
        }
        let cut = plugin_lines(&many, 0, 3, 20, NOW, false);
        assert_eq!(cut[1], "> ○ idle  日本語の…");
    }

    #[test]
    fn selection_scrolls_into_view() {
        let many: Vec<AgentView> = (0..30)
            .map(|i| {
                agent(
                    &format!("a{i:02}"),
                    &format!("n{i:02}"),
                    Idle,
                    "2025-01-01T00:00:00Z",
                )
            })
            .collect();
        let lines = plugin_lines(&many, 20, 6, 60, NOW, false);
        assert_eq!(lines.len(), 6);
        assert!(lines[4].starts_with("> ○ idle  n20"), "{lines:?}");
        assert!(lines[1].contains("n17"), "{lines:?}");
    }

    #[test]
    fn hostile_text_is_stripped() {
        let mut evil = agent("e", "evil\x1b[2J\x07name", Working, "2025-01-01T00:09:00Z");
        evil.title = Some("\x1b]0;pwned\x07\r\nx\u{202e}y".into());
        for color in [false, true] {
            let lines = plugin_lines(std::slice::from_ref(&evil), 0, 5, 200, NOW, color);
            let text = lines.join("\n").replace("\x1b[0m", "");
            // Only our own SGR sequences may carry ESC.
            let stripped: String = text
                .split('\x1b')
                .enumerate()
                .map(|(i, part)| {
                    if i == 0 {
                        part.to_owned()
                    } else {
                        part.split_once('m')
                            .map(|(_, rest)| rest.to_owned())
                            .unwrap_or_default()
                    }
                })
                .collect();
            assert!(
                !stripped.chars().any(|c| c.is_control() && c != '\n'),
                "{text:?}"
            );
            assert!(stripped.contains("evil[2Jname"), "{stripped:?}");
            assert!(stripped.contains("]0;pwned xy"), "{stripped:?}");
        }
    }

    #[test]
    fn empty_and_waiting_screens() {
        let ui = Ui::default();
        let waiting = ui.lines(None, None, 10, 80, NOW, false);
        assert_eq!(
            waiting[1],
            "waiting for volee (is the daemon running? volee ls)"
        );
        let none = ui.lines(Some(&[]), None, 10, 80, NOW, false);
        assert_eq!(none[0], "volee  no agents");
        assert_eq!(none[1], "  press l to launch an agent");
        let denied = ui.lines(
            Some(&agents()),
            Some("permissions not granted"),
            10,
            80,
            NOW,
            false,
        );
        assert_eq!(denied, ["volee", "permissions not granted"]);
    }

    #[test]
    fn keys_move_the_selection_and_focus_local_panes() {
        let agents = agents();
        let mut ui = Ui::default();
        assert_eq!(ui.selected_index(&agents), 0);
        assert_eq!(ui.key(Key::Down, &agents, &[1, 2]), None);
        assert_eq!(ui.key(Key::Char('j'), &agents, &[1, 2]), None);
        assert_eq!(ui.key(Key::Down, &agents, &[1, 2]), None);
        assert_eq!(ui.selected_index(&agents), 2);
        assert_eq!(ui.key(Key::Char('k'), &agents, &[1, 2]), None);
        assert_eq!(ui.selected_index(&agents), 1);
        assert_eq!(
            ui.key(Key::Enter, &agents, &[1, 2]),
            Some(UiAction::Focus { pane: 2 })
        );
        // The selection follows the agent when the order changes.
        let mut reordered = agents.clone();
        reordered[0].state = NeedsYou;
        reordered[0].state_since = "2025-01-01T00:00:00Z".into();
        assert_eq!(ui.selected_index(&reordered), 0);
        // A pane the daemon did not list for this session is not focused.
        assert_eq!(ui.key(Key::Enter, &agents, &[1]), None);
        let shown = ui.lines(Some(&agents), None, 10, 100, NOW, false);
        assert!(
            shown.contains(&"builder is not in this zellij session: volee attach w".to_owned()),
            "{shown:?}"
        );
        ui.key(Key::Char('k'), &agents, &[]);
        ui.key(Key::Char('k'), &agents, &[]);
        assert_eq!(
            ui.key(Key::Enter, &agents, &[1]),
            Some(UiAction::Focus { pane: 1 })
        );
        assert_eq!(ui.key(Key::Char('q'), &agents, &[]), Some(UiAction::Close));
        assert_eq!(ui.key(Key::Esc, &[], &[]), Some(UiAction::Close));
        assert_eq!(ui.key(Key::Enter, &[], &[]), None);
    }

    #[test]
    fn n_jumps_to_the_next_agent_needing_you() {
        let mut agents = agents();
        agents.push(in_zellij(
            agent("m", "migrate", NeedsYou, "2025-01-01T00:08:00Z"),
            5,
        ));
        let mut ui = Ui::default();
        let local = [1, 2, 5];
        assert_eq!(
            ui.key(Key::Char('n'), &agents, &local),
            Some(UiAction::Focus { pane: 1 })
        );
        assert_eq!(
            ui.key(Key::Char('n'), &agents, &local),
            Some(UiAction::Focus { pane: 5 })
        );
        assert_eq!(ui.selected_index(&agents), 1);
        assert_eq!(
            ui.key(Key::Char('n'), &agents, &local),
            Some(UiAction::Focus { pane: 1 })
        );
        let calm = [agent("i", "i", Idle, "2025-01-01T00:00:00Z")];
        assert_eq!(ui.key(Key::Char('n'), &calm, &local), None);
        assert!(ui
            .lines(Some(&calm), None, 5, 80, NOW, false)
            .contains(&"no agent needs you".to_owned()));
    }

    #[test]
    fn launch_prompt_picks_a_harness_then_takes_text() {
        let mut ui = Ui::default();
        assert_eq!(ui.key(Key::Char('l'), &[], &[]), None);
        assert!(ui.is_prompting());
        let pick = ui.lines(Some(&[]), None, 10, 80, NOW, false);
        assert_eq!(pick[1], "> generic");
        ui.key(Key::Down, &[], &[]);
        assert_eq!(ui.lines(Some(&[]), None, 10, 80, NOW, false)[2], "> claude");
        ui.key(Key::Enter, &[], &[]);
        for c in "fix q\x07".chars() {
            // `q` and `n` are text here, controls are dropped.
            assert_eq!(ui.key(Key::Char(c), &[], &[]), None);
        }
        ui.key(Key::Backspace, &[], &[]);
        ui.key(Key::Char('n'), &[], &[]);
        let prompt = ui.lines(Some(&[]), None, 10, 80, NOW, false);
        assert_eq!(
            prompt[0],
            "volee  launch claude: first prompt (may be empty)"
        );
        assert_eq!(prompt[1], "> fix n_");
        assert_eq!(
            ui.key(Key::Enter, &[], &[]),
            Some(UiAction::Launch {
                harness: "claude",
                text: "fix n".into()
            })
        );
        assert!(!ui.is_prompting());
        // Esc backs out of both steps without closing the pane.
        ui.key(Key::Char('l'), &[], &[]);
        assert_eq!(ui.key(Key::Esc, &[], &[]), None);
        assert!(!ui.is_prompting());
        ui.key(Key::Char('l'), &[], &[]);
        ui.key(Key::Up, &[], &[]);
        ui.key(Key::Enter, &[], &[]);
        assert_eq!(
            ui.lines(Some(&[]), None, 10, 80, NOW, false)[0],
            "volee  launch volee: first prompt (may be empty)"
        );
        assert_eq!(ui.key(Key::Esc, &[], &[]), None);
        assert!(!ui.is_prompting());
        // generic needs a command line.
        ui.key(Key::Char('l'), &[], &[]);
        ui.key(Key::Enter, &[], &[]);
        assert_eq!(ui.key(Key::Enter, &[], &[]), None);
        assert!(ui.is_prompting());
    }

    #[test]
    fn long_prompt_shows_its_end() {
        let mut ui = Ui::default();
        ui.key(Key::Char('l'), &[], &[]);
        ui.key(Key::Enter, &[], &[]);
        for c in "echo 0123456789abcdefghij".chars() {
            ui.key(Key::Char(c), &[], &[]);
        }
        let lines = ui.lines(Some(&[]), None, 5, 12, NOW, false);
        assert_eq!(lines[1], "> bcdefghij_");
        assert!(lines.iter().all(|l| display_width(l) <= 12));
    }

    #[test]
    fn launch_command_lines() {
        assert_eq!(
            launch_argv("volee", "generic", " python3 agent.py "),
            [
                "volee",
                "launch",
                "--host",
                "zellij",
                "--",
                "sh",
                "-c",
                "python3 agent.py"
            ]
        );
        assert_eq!(
            launch_argv("/bin/volee", "codex", ""),
            [
                "/bin/volee",
                "launch",
                "--host",
                "zellij",
                "--harness",
                "codex"
            ]
        );
        assert_eq!(
            launch_argv("volee", "claude", "--help me"),
            [
                "volee",
                "launch",
                "--host",
                "zellij",
                "--harness",
                "claude",
                " --help me"
            ]
        );
    }

    #[test]
    fn screen_tail_trims_padding_and_keeps_the_last_lines() {
        let mut viewport: Vec<String> = (0..50).map(|i| format!("line {i}   ")).collect();
        viewport.extend(["".into(), "     ".into()]);
        let tail = screen_tail(&viewport);
        assert_eq!(tail.len(), SCREEN_LINES);
        assert_eq!(tail[0], "line 10");
        assert_eq!(tail[39], "line 49");
        assert_eq!(screen_tail(&["$ ".into(), "".into()]), ["$"]);
        assert!(screen_tail(&["   ".into()]).is_empty());
        assert!(screen_tail(&[]).is_empty());
    }

    #[test]
    fn hidden_tabs_of_agents_that_need_you_are_marked_and_unmarked() {
        let mut agents = agents();
        // agents()[0] is in zellij pane 2.
        agents[0].state = AgentState::NeedsYou;
        let pane_tabs = [(2, 1)];
        let tabs = vec![
            (0, "Tab #1".to_string(), true),
            (1, "fix (k3f9)".to_string(), false),
        ];
        assert_eq!(
            tab_marks(&agents, &pane_tabs, &tabs),
            vec![(1, "! fix (k3f9)".to_string())]
        );
        // Already marked: nothing to do; shown, or answered: unmarked.
        let marked = vec![
            (0, "Tab #1".to_string(), true),
            (1, "! fix (k3f9)".to_string(), false),
        ];
        assert!(tab_marks(&agents, &pane_tabs, &marked).is_empty());
        let shown = vec![(1, "! fix (k3f9)".to_string(), true)];
        assert_eq!(
            tab_marks(&agents, &pane_tabs, &shown),
            vec![(1, "fix (k3f9)".to_string())]
        );
        agents[0].state = AgentState::Working;
        assert_eq!(
            tab_marks(&agents, &pane_tabs, &marked),
            vec![(1, "fix (k3f9)".to_string())]
        );
        // A tab with no volee agent keeps its name, whatever it is.
        let users = vec![(5, "! mine".to_string(), false)];
        assert!(tab_marks(&agents, &pane_tabs, &users).is_empty());
    }

    #[test]
    fn a_toast_for_agents_that_just_came_to_need_you() {
        let mut before = agents();
        before[1].state = Working;
        let mut now = before.clone();
        assert_eq!(needs_you_toast(&before, &now), None);
        now[0].state = AgentState::NeedsYou;
        let toast = needs_you_toast(&before, &now).unwrap();
        assert!(toast.contains("needs you"), "{toast}");
        assert_eq!(needs_you_toast(&now, &now), None);
        now[1].state = AgentState::NeedsYou;
        assert_eq!(
            needs_you_toast(&before, &now).as_deref(),
            Some("2 agents need you")
        );
    }

    #[test]
    fn zellij_panes_of_agents() {
        let agents = agents();
        assert_eq!(zellij_pane(&agents[0]), Some(2));
        assert_eq!(zellij_pane(&agents[2]), None);
    }
}
