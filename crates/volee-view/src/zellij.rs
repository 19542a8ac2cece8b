//! The zellij plugin's pane: the list it draws (live agents, then the past sessions the daemon
//! sends, filtered as you type), its key handling (selection, focus, resume, the inline launch
//! prompt) and the screen excerpt it reports to the daemon.
//!
//! Pure, so it is tested natively while the plugin (`zellij-plugin/`, wasm only) stays a thin
//! shell: it turns zellij keys into [`Key`], calls [`Ui::key`], carries out the [`UiAction`] and
//! prints [`Ui::lines`].

use volee_protocol::zellij::{parse_terminal_id, PastSession};
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

/// The terminal pane id of an agent running in zellij here (`terminal_7` → 7); None for an agent
/// on a machine (its pane is in the machine's zellij, not one of ours).
pub fn zellij_pane(agent: &AgentView) -> Option<u32> {
    if agent.machine.is_some() {
        return None;
    }
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

/// The header: `volee  ● 1 needs you  ▶ 2 working` (then `⚠ 1 unreachable`), or
/// `volee  no agents`.
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
    if counts.unreachable > 0 {
        line = line.plain("  ").styled(
            format!(
                "{} {} unreachable",
                crate::UNREACHABLE_MARKER,
                counts.unreachable
            ),
            UNREACHABLE_STYLE,
        );
    }
    line
}

/// The SGR parameters of the unreachable count (cyan, as on the tmux status line).
const UNREACHABLE_STYLE: &str = "36";

fn footer() -> Line {
    Line::default().styled(
        "type to filter  ↑↓ select  enter go  tab needs you  + launch  esc close",
        DIM,
    )
}

/// How a past session is marked in the state column (its word is [`PAST_WORD`]).
const PAST_MARK: &str = "↺";
const PAST_WORD: &str = "past";
/// Longest filter accepted from the keyboard.
const FILTER_MAX: usize = 200;
/// A past session's id is shown by its first characters (as `volee browse` does).
const SHORT_ID: usize = 8;
/// A past session's project is shown by its last component, at most this long.
const PROJECT_MAX: usize = 16;
const BRANCH_MAX: usize = 40;

/// One row of the pane's list: a live agent, or a past session from the daemon's index.
#[derive(Debug, Clone, Copy)]
enum Row<'a> {
    Live(&'a AgentView),
    Past(&'a PastSession),
}

/// What stays the same row when the lists change.
#[derive(Debug, Clone, PartialEq, Eq)]
enum RowKey {
    Agent(String),
    Session { harness: String, id: String },
}

impl Row<'_> {
    /// What the filter looks in (as `volee browse` does): a live agent's id, name, harness,
    /// title, directory, state and machine — and its session's id, so a session typed for is
    /// found once it is live —; a past session's id, harness, title, first prompt, project and
    /// branch.
    fn haystack(&self) -> String {
        match self {
            Row::Live(a) => format!(
                "{} {} {} {} {} {} {} {}",
                a.address(),
                a.name,
                a.harness,
                a.title.as_deref().unwrap_or(""),
                a.cwd,
                a.state,
                a.session_id.as_deref().unwrap_or(""),
                a.machine.as_deref().unwrap_or("")
            )
            .to_lowercase(),
            Row::Past(s) => crate::session_haystack(
                &s.id,
                &s.harness,
                s.title.as_deref(),
                s.first_prompt.as_deref(),
                s.project.as_deref(),
                s.branch.as_deref(),
            ),
        }
    }

    fn key(&self) -> RowKey {
        match self {
            Row::Live(a) => RowKey::Agent(a.address()),
            Row::Past(s) => RowKey::Session {
                harness: s.harness.clone(),
                id: s.id.clone(),
            },
        }
    }
}

/// The pane's rows: the agents in display order, then the past sessions newest first — but not
/// a session an agent has live now (it shows as that agent) — keeping those that hold every word
/// of `filter` (any order, any case).
fn list_rows<'a>(agents: &'a [AgentView], past: &'a [PastSession], filter: &str) -> Vec<Row<'a>> {
    let is_live = |s: &PastSession| {
        agents.iter().any(|a| {
            !a.state.is_final()
                && a.harness == s.harness
                && a.session_id.as_deref() == Some(s.id.as_str())
        })
    };
    let mut sessions: Vec<&PastSession> = past.iter().filter(|s| !is_live(s)).collect();
    sessions.sort_by_key(|s| std::cmp::Reverse(s.last));
    let words: Vec<String> = filter
        .to_lowercase()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    in_display_order(agents)
        .into_iter()
        .map(Row::Live)
        .chain(sessions.into_iter().map(Row::Past))
        .filter(|row| {
            if words.is_empty() {
                return true;
            }
            let hay = row.haystack();
            words.iter().all(|w| hay.contains(w.as_str()))
        })
        .collect()
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
    let list = list_rows(agents, &[], "");
    let view = ListView {
        agents,
        rows: &list,
        selected,
        filter: "",
        message: None,
    };
    view.lines(rows, cols, now_epoch_secs, color)
}

/// What the list screen shows.
struct ListView<'a> {
    /// Every agent (the header counts them all, whatever the filter).
    agents: &'a [AgentView],
    /// The rows the filter keeps.
    rows: &'a [Row<'a>],
    selected: usize,
    filter: &'a str,
    message: Option<&'a str>,
}

impl ListView<'_> {
    fn lines(&self, rows: usize, cols: usize, now_epoch_secs: u64, color: bool) -> Vec<String> {
        let mut top = vec![header(self.agents)];
        if !self.filter.is_empty() && rows >= 4 {
            top.push(
                Line::default()
                    .styled(
                        format!("filter: {}_", plain_text(self.filter, FILTER_MAX)),
                        BOLD,
                    )
                    .styled(format!("  {} shown", self.rows.len()), DIM),
            );
        }
        let mut bottom = Vec::new();
        if let Some(message) = self.message.map(|m| plain_text(m, MESSAGE_MAX)) {
            if !message.is_empty() && rows >= 4 {
                bottom.push(Line::default().styled(message, BOLD));
            }
        }
        if rows >= 3 {
            bottom.push(footer());
        }
        let room = rows.saturating_sub(top.len() + bottom.len());
        if self.rows.is_empty() {
            if room > 0 {
                top.push(Line::default().plain(if self.filter.is_empty() {
                    "  press + to launch an agent"
                } else {
                    "  nothing matches (esc clears the filter)"
                }));
            }
        } else {
            let selected = self.selected.min(self.rows.len() - 1);
            let offset = (selected + 1).saturating_sub(room);
            top.extend(
                row_lines(self.rows, selected, now_epoch_secs)
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
}

/// The last component of a project path (`/home/u/src/app` → `app`).
fn project_name(project: &str) -> &str {
    let trimmed = project.trim_end_matches('/');
    trimmed.rsplit('/').next().unwrap_or(trimmed)
}

/// One line per row, in columns: state (a past session: `↺ past`), name (a session: the start of
/// its id), harness, age, source (a session: its project's name), then the title (a session: its
/// title or first prompt, then its branch).
fn row_lines(rows: &[Row], selected: usize, now_epoch_secs: u64) -> Vec<Line> {
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|row| match row {
            Row::Live(a) => [
                crate::machine_name_text(a, NAME_MAX),
                harness_label(a, HARNESS_MAX),
                age_of(&a.state_since, now_epoch_secs),
                a.state_source.as_str().to_owned(),
                crate::tagged_title(a, TITLE_MAX),
            ],
            Row::Past(s) => [
                plain_text(&s.id.chars().take(SHORT_ID).collect::<String>(), SHORT_ID),
                plain_text(&s.harness, HARNESS_MAX),
                if s.last == 0 {
                    "-".to_owned()
                } else {
                    crate::ago(now_epoch_secs.saturating_sub(s.last))
                },
                s.project
                    .as_deref()
                    .map(|p| plain_text(project_name(p), PROJECT_MAX))
                    .unwrap_or_else(|| "-".to_owned()),
                plain_text(
                    s.title
                        .as_deref()
                        .filter(|t| !t.trim().is_empty())
                        .or(s.first_prompt.as_deref())
                        .unwrap_or(""),
                    TITLE_MAX,
                ),
            ],
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
    let state_width = rows
        .iter()
        .map(|row| match row {
            Row::Live(a) => display_width(&live_state_word(a)),
            Row::Past(_) => display_width(PAST_WORD),
        })
        .max()
        .unwrap_or(0);
    rows.iter()
        .zip(cells)
        .enumerate()
        .map(|(i, (row, [name, harness, age, source, title]))| {
            let marker = if i == selected { "> " } else { "  " };
            let (mark, word, style) = match row {
                Row::Live(a) => (
                    state_marker(a.state),
                    live_state_word(a),
                    state_style(a.state),
                ),
                Row::Past(_) => (PAST_MARK, PAST_WORD.to_owned(), DIM),
            };
            let state = format!("{mark} {}", pad_to(&word, state_width));
            let name = pad_to(&name, widths[0]);
            let line = Line::default()
                .styled(marker, BOLD)
                .styled(state, style)
                .plain("  ");
            let line = if i == selected {
                line.styled(name, BOLD)
            } else {
                line.plain(name)
            };
            let line = line.plain(format!(
                "  {}  {age:>aw$}  {}  ",
                pad_to(&harness, widths[1]),
                pad_to(&source, widths[3]),
                aw = widths[2],
            ));
            match row {
                Row::Live(_) => line.styled(title, DIM),
                Row::Past(s) => {
                    let line = line.plain(title);
                    match s.branch.as_deref().filter(|b| !b.trim().is_empty()) {
                        Some(branch) => {
                            line.styled(format!("  [{}]", plain_text(branch, BRANCH_MAX)), DIM)
                        }
                        None => line,
                    }
                }
            }
        })
        .collect()
}

/// A live agent's state in words, with `?` while its machine cannot be reached.
fn live_state_word(agent: &AgentView) -> String {
    if agent.reachable {
        state_words(agent.state).to_owned()
    } else {
        format!("{}{}", state_words(agent.state), crate::UNREACHABLE_SUFFIX)
    }
}

/// The command line that resumes past session `id` in zellij session `session` (the caller's
/// when None): `volee sessions resume`, the id after `--` (it is never read as an option).
pub fn resume_argv(volee_bin: &str, id: &str, session: Option<&str>) -> Vec<String> {
    let host = match session {
        Some(session) => format!("zellij:{session}"),
        None => "zellij".to_owned(),
    };
    [volee_bin, "sessions", "resume", "--host", &host, "--", id]
        .map(String::from)
        .to_vec()
}

/// A key of the plugin pane, as the plugin translates zellij's (modifier keys are not passed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Up,
    Down,
    Enter,
    Esc,
    Backspace,
    Tab,
    Char(char),
}

/// What the plugin must do after a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UiAction {
    /// Focus this terminal pane for the plugin's client.
    Focus { pane: u32 },
    /// Launch an agent: run [`launch_argv`] with the plugin's `volee` binary.
    Launch { harness: &'static str, text: String },
    /// Resume a past session in this zellij session: run [`resume_argv`] with the plugin's
    /// `volee` binary.
    Resume { harness: String, id: String },
    /// Hide the plugin pane.
    Close,
}

/// A command the plugin ran for the pane, whose end it reports ([`Ui::command_finished`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ran {
    Launch,
    Resume,
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

/// The plugin pane's state: the selected row (kept by agent id or session, so it stays put when
/// the lists change), the filter, the launch prompt, and a one-line message.
#[derive(Debug, Clone, Default)]
pub struct Ui {
    selected: Option<RowKey>,
    filter: String,
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

    /// The end of a command the plugin ran for a key: said on the message line, with the
    /// command's stderr when it failed (`exit` None: ended by a signal).
    pub fn command_finished(&mut self, ran: Ran, exit: Option<i32>, stderr: &str) {
        let (done, doing) = match ran {
            Ran::Launch => ("launched", "launch"),
            Ran::Resume => ("resumed", "resume"),
        };
        self.message = Some(match exit {
            Some(0) => done.to_owned(),
            _ => {
                let code = exit.map_or_else(|| "a signal".to_owned(), |c| c.to_string());
                format!("{doing} failed ({code}): {}", stderr.trim())
            }
        });
    }

    /// Is the launch prompt open (keys are text then)?
    pub fn is_prompting(&self) -> bool {
        self.mode != Mode::List
    }

    /// The filter typed so far.
    pub fn filter(&self) -> &str {
        &self.filter
    }

    /// Row of the selection among the rows the filter keeps (0 when none is selected or it is
    /// gone).
    pub fn selected_index(&self, agents: &[AgentView], past: &[PastSession]) -> usize {
        self.index_in(&list_rows(agents, past, &self.filter))
    }

    fn index_in(&self, rows: &[Row]) -> usize {
        self.selected
            .as_ref()
            .and_then(|key| rows.iter().position(|r| r.key() == *key))
            .unwrap_or(0)
    }

    /// Handles one key. `agents` is the latest list from the daemon, `past` its past sessions;
    /// `local_panes` the terminal panes of this zellij session's agents (the daemon's watch
    /// list): only those can be focused, since a `terminal_N` of another session names some
    /// other pane here.
    pub fn key(
        &mut self,
        key: Key,
        agents: &[AgentView],
        past: &[PastSession],
        local_panes: &[u32],
    ) -> Option<UiAction> {
        self.message = None;
        match std::mem::take(&mut self.mode) {
            Mode::List => self.list_key(key, agents, past, local_panes),
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

    /// The list's keys: text goes to the filter; ↑↓ move, Enter focuses an agent or resumes a
    /// past session, Tab goes to the next agent that needs you, `+` (on an empty filter) opens
    /// the launch prompt, Esc clears the filter, then closes the pane.
    fn list_key(
        &mut self,
        key: Key,
        agents: &[AgentView],
        past: &[PastSession],
        local_panes: &[u32],
    ) -> Option<UiAction> {
        let rows = list_rows(agents, past, &self.filter);
        let current = self.index_in(&rows);
        let select = |ui: &mut Ui, index: usize| {
            ui.selected = rows.get(index).map(Row::key);
        };
        match key {
            Key::Up => {
                select(self, current.saturating_sub(1));
                None
            }
            Key::Down => {
                select(self, (current + 1).min(rows.len().saturating_sub(1)));
                None
            }
            // Enter acts on the row and the filter goes: the pane stays open, and shows the
            // whole list when the user comes back to it.
            Key::Enter => match rows.get(current).copied()? {
                Row::Live(agent) => {
                    let action = self.focus(agent, local_panes);
                    if action.is_some() {
                        select(self, current);
                        self.filter.clear();
                    }
                    action
                }
                Row::Past(session) => {
                    select(self, current);
                    self.filter.clear();
                    self.message = Some(format!(
                        "resuming {} session {}…",
                        plain_text(&session.harness, HARNESS_MAX),
                        plain_text(&session.id, NAME_MAX)
                    ));
                    Some(UiAction::Resume {
                        harness: session.harness.clone(),
                        id: session.id.clone(),
                    })
                }
            },
            Key::Tab => {
                let after = match &self.selected {
                    Some(RowKey::Agent(id)) => Some(id.as_str()),
                    _ => None,
                };
                let Some(agent) = next_needing_you(agents, after) else {
                    self.message = Some("no agent needs you".into());
                    return None;
                };
                // It may not match the filter: the filter goes, so the selection shows.
                self.filter.clear();
                self.selected = Some(RowKey::Agent(agent.address()));
                self.focus(agent, local_panes)
            }
            Key::Esc if !self.filter.is_empty() => {
                self.filter.clear();
                None
            }
            Key::Esc => Some(UiAction::Close),
            Key::Backspace => {
                self.filter.pop();
                None
            }
            Key::Char('+') if self.filter.is_empty() => {
                self.mode = Mode::PickHarness(0);
                None
            }
            Key::Char(c) if !c.is_control() && self.filter.chars().count() < FILTER_MAX => {
                self.filter.push(c);
                None
            }
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
                    crate::address_text(agent, NAME_MAX)
                ));
                None
            }
        }
    }

    /// The pane's lines: the launch prompt when open, else the list (agents, then past
    /// sessions); `agents` is `None` until the daemon first sent them; `notice` (missing
    /// permissions) replaces the list.
    #[allow(clippy::too_many_arguments)]
    pub fn lines(
        &self,
        agents: Option<&[AgentView]>,
        past: &[PastSession],
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
                    Some(agents) => {
                        let list = list_rows(agents, past, &self.filter);
                        ListView {
                            agents,
                            rows: &list,
                            selected: self.index_in(&list),
                            filter: &self.filter,
                            message: self.message.as_deref(),
                        }
                        .lines(rows, cols, now_epoch_secs, color)
                    }
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
                "type to filter  ↑↓ select  enter go  tab needs you  + launch  esc close",
            ]
        );
    }

    #[test]
    fn remote_agents_show_their_machine_and_are_never_focused_here() {
        let mut agents = agents();
        // On machine box, in its zellij pane 2 (the same number as a local pane here).
        let mut remote = in_zellij(agent("w", "builder", Working, "2025-01-01T00:09:50Z"), 2);
        remote.machine = Some("box".into());
        remote.reachable = false;
        agents.push(remote);
        let lines = plugin_lines(&agents, 0, 10, 100, NOW, false);
        assert_eq!(
            lines[..4],
            [
                "volee  ● 1 needs you  ▶ 1 working  ✓ 1 done  ⚠ 1 unreachable",
                "> ● needs you  fix-auth     claude   5m  hooks",
                "  ▶ working    builder      claude  10s  hooks  Running tests",
                "  ▶ working?   box:builder  claude  10s  hooks",
            ]
        );
        let mut ui = Ui::default();
        for _ in 0..2 {
            ui.key(Key::Down, &agents, &[], &[1, 2]);
        }
        assert_eq!(ui.key(Key::Enter, &agents, &[], &[1, 2]), None);
        let shown = ui.lines(Some(&agents), &[], None, 10, 100, NOW, false);
        assert!(
            shown.contains(&"builder is not in this zellij session: volee attach box:w".to_owned()),
            "{shown:?}"
        );
        assert_eq!(zellij_pane(&agents[3]), None);
        // Typing the machine's name finds its agents.
        for c in "box".chars() {
            ui.key(Key::Char(c), &agents, &[], &[]);
        }
        assert_eq!(list_rows(&agents, &[], ui.filter()).len(), 1);
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
        let waiting = ui.lines(None, &[], None, 10, 80, NOW, false);
        assert_eq!(
            waiting[1],
            "waiting for volee (is the daemon running? volee ls)"
        );
        let none = ui.lines(Some(&[]), &[], None, 10, 80, NOW, false);
        assert_eq!(none[0], "volee  no agents");
        assert_eq!(none[1], "  press + to launch an agent");
        let denied = ui.lines(
            Some(&agents()),
            &[],
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
        assert_eq!(ui.selected_index(&agents, &[]), 0);
        assert_eq!(ui.key(Key::Down, &agents, &[], &[1, 2]), None);
        assert_eq!(ui.key(Key::Down, &agents, &[], &[1, 2]), None);
        assert_eq!(ui.key(Key::Down, &agents, &[], &[1, 2]), None);
        assert_eq!(ui.selected_index(&agents, &[]), 2);
        assert_eq!(ui.key(Key::Up, &agents, &[], &[1, 2]), None);
        assert_eq!(ui.selected_index(&agents, &[]), 1);
        assert_eq!(
            ui.key(Key::Enter, &agents, &[], &[1, 2]),
            Some(UiAction::Focus { pane: 2 })
        );
        // The selection follows the agent when the order changes.
        let mut reordered = agents.clone();
        reordered[0].state = NeedsYou;
        reordered[0].state_since = "2025-01-01T00:00:00Z".into();
        assert_eq!(ui.selected_index(&reordered, &[]), 0);
        // A pane the daemon did not list for this session is not focused.
        assert_eq!(ui.key(Key::Enter, &agents, &[], &[1]), None);
        let shown = ui.lines(Some(&agents), &[], None, 10, 100, NOW, false);
        assert!(
            shown.contains(&"builder is not in this zellij session: volee attach w".to_owned()),
            "{shown:?}"
        );
        ui.key(Key::Up, &agents, &[], &[]);
        ui.key(Key::Up, &agents, &[], &[]);
        assert_eq!(
            ui.key(Key::Enter, &agents, &[], &[1]),
            Some(UiAction::Focus { pane: 1 })
        );
        assert_eq!(ui.key(Key::Esc, &agents, &[], &[]), Some(UiAction::Close));
        assert_eq!(ui.key(Key::Esc, &[], &[], &[]), Some(UiAction::Close));
        assert_eq!(ui.key(Key::Enter, &[], &[], &[]), None);
    }

    #[test]
    fn tab_jumps_to_the_next_agent_needing_you() {
        let mut agents = agents();
        agents.push(in_zellij(
            agent("m", "migrate", NeedsYou, "2025-01-01T00:08:00Z"),
            5,
        ));
        let mut ui = Ui::default();
        let local = [1, 2, 5];
        assert_eq!(
            ui.key(Key::Tab, &agents, &[], &local),
            Some(UiAction::Focus { pane: 1 })
        );
        assert_eq!(
            ui.key(Key::Tab, &agents, &[], &local),
            Some(UiAction::Focus { pane: 5 })
        );
        assert_eq!(ui.selected_index(&agents, &[]), 1);
        assert_eq!(
            ui.key(Key::Tab, &agents, &[], &local),
            Some(UiAction::Focus { pane: 1 })
        );
        let calm = [agent("i", "i", Idle, "2025-01-01T00:00:00Z")];
        assert_eq!(ui.key(Key::Tab, &calm, &[], &local), None);
        assert!(ui
            .lines(Some(&calm), &[], None, 5, 80, NOW, false)
            .contains(&"no agent needs you".to_owned()));
    }

    #[test]
    fn launch_prompt_picks_a_harness_then_takes_text() {
        let mut ui = Ui::default();
        assert_eq!(ui.key(Key::Char('+'), &[], &[], &[]), None);
        assert!(ui.is_prompting());
        let pick = ui.lines(Some(&[]), &[], None, 10, 80, NOW, false);
        assert_eq!(pick[1], "> generic");
        ui.key(Key::Down, &[], &[], &[]);
        assert_eq!(
            ui.lines(Some(&[]), &[], None, 10, 80, NOW, false)[2],
            "> claude"
        );
        ui.key(Key::Enter, &[], &[], &[]);
        for c in "fix q\x07".chars() {
            // `q` and `n` are text here, controls are dropped.
            assert_eq!(ui.key(Key::Char(c), &[], &[], &[]), None);
        }
        ui.key(Key::Backspace, &[], &[], &[]);
        ui.key(Key::Char('n'), &[], &[], &[]);
        let prompt = ui.lines(Some(&[]), &[], None, 10, 80, NOW, false);
        assert_eq!(
            prompt[0],
            "volee  launch claude: first prompt (may be empty)"
        );
        assert_eq!(prompt[1], "> fix n_");
        assert_eq!(
            ui.key(Key::Enter, &[], &[], &[]),
            Some(UiAction::Launch {
                harness: "claude",
                text: "fix n".into()
            })
        );
        assert!(!ui.is_prompting());
        // Esc backs out of both steps without closing the pane.
        ui.key(Key::Char('+'), &[], &[], &[]);
        assert_eq!(ui.key(Key::Esc, &[], &[], &[]), None);
        assert!(!ui.is_prompting());
        ui.key(Key::Char('+'), &[], &[], &[]);
        ui.key(Key::Up, &[], &[], &[]);
        ui.key(Key::Enter, &[], &[], &[]);
        assert_eq!(
            ui.lines(Some(&[]), &[], None, 10, 80, NOW, false)[0],
            "volee  launch volee: first prompt (may be empty)"
        );
        assert_eq!(ui.key(Key::Esc, &[], &[], &[]), None);
        assert!(!ui.is_prompting());
        // generic needs a command line.
        ui.key(Key::Char('+'), &[], &[], &[]);
        ui.key(Key::Enter, &[], &[], &[]);
        assert_eq!(ui.key(Key::Enter, &[], &[], &[]), None);
        assert!(ui.is_prompting());
    }

    #[test]
    fn long_prompt_shows_its_end() {
        let mut ui = Ui::default();
        ui.key(Key::Char('+'), &[], &[], &[]);
        ui.key(Key::Enter, &[], &[], &[]);
        for c in "echo 0123456789abcdefghij".chars() {
            ui.key(Key::Char(c), &[], &[], &[]);
        }
        let lines = ui.lines(Some(&[]), &[], None, 5, 12, NOW, false);
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

    fn session(id: &str, title: &str, project: &str, branch: &str, ago: u64) -> PastSession {
        PastSession {
            harness: "codex".into(),
            id: id.into(),
            title: Some(title.into()),
            first_prompt: None,
            project: Some(project.into()),
            branch: Some(branch.into()),
            last: NOW - ago,
        }
    }

    /// Three past sessions, not in time order: `login` (2 h), `export` (3 d, a first prompt and
    /// no title), `old` (Claude's, 9 d).
    fn past() -> Vec<PastSession> {
        let mut export = session("0199bbbb-2222", "", "/srv/shop", "feature/csv", 3 * 86_400);
        export.title = None;
        export.first_prompt = Some("Add the CSV export\nto the orders page".into());
        let mut old = session(
            "d4a8abe5-742d",
            "conformance",
            "/tmp/work",
            "HEAD",
            9 * 86_400,
        );
        old.harness = "claude".into();
        vec![
            export,
            session(
                "0199aaaa-1111",
                "fix the login bug",
                "/home/u/src/app",
                "main",
                7_200,
            ),
            old,
        ]
    }

    fn shown(ui: &Ui, agents: &[AgentView], past: &[PastSession], cols: usize) -> Vec<String> {
        ui.lines(Some(agents), past, None, 20, cols, NOW, false)
    }

    #[test]
    fn past_sessions_follow_the_agents_newest_first() {
        let ui = Ui::default();
        let lines = shown(&ui, &agents(), &past(), 100);
        assert_eq!(
            lines,
            [
                "volee  ● 1 needs you  ▶ 1 working  ✓ 1 done",
                "> ● needs you  fix-auth  claude   5m  hooks  ",
                "  ▶ working    builder   claude  10s  hooks  Running tests",
                "  ✓ done       docs      claude  10m  hooks",
                "  ↺ past       0199aaaa  codex    2h  app    fix the login bug  [main]",
                "  ↺ past       0199bbbb  codex    3d  shop   Add the CSV export to the orders page  [feature/csv]",
                "  ↺ past       d4a8abe5  claude   9d  work   conformance  [HEAD]",
                "type to filter  ↑↓ select  enter go  tab needs you  + launch  esc close",
            ]
            .map(|l| l.trim_end().to_owned())
        );
        // Past rows are dim in colour; agents keep their state's colour.
        let coloured = ui.lines(Some(&agents()), &past(), None, 20, 100, NOW, true);
        assert!(coloured[4].contains("\x1b[2m↺ past"), "{:?}", coloured[4]);
    }

    #[test]
    fn a_session_live_now_shows_as_its_agent_only() {
        let past = past();
        let mut agents = agents();
        // builder holds Claude's old session live: listed once, as builder.
        agents[0].harness = "claude".into();
        agents[0].session_id = Some("d4a8abe5-742d".into());
        // docs is done: its session is past, and resumable.
        agents[2].session_id = Some("0199aaaa-1111".into());
        agents[2].harness = "codex".into();
        let lines = shown(&Ui::default(), &agents, &past, 100).join("\n");
        assert!(!lines.contains("d4a8abe5"), "{lines}");
        assert!(lines.contains("0199aaaa"), "{lines}");
        // Typing the session's id finds it as its agent; Enter focuses it, and the filter goes.
        let mut ui = Ui::default();
        for c in "d4a8".chars() {
            ui.key(Key::Char(c), &agents, &past, &[]);
        }
        let rows = shown(&ui, &agents, &past, 100);
        assert_eq!(rows.len(), 4, "{rows:?}");
        assert!(rows[2].starts_with("> ▶ working  builder"), "{rows:?}");
        assert_eq!(
            ui.key(Key::Enter, &agents, &past, &[2]),
            Some(UiAction::Focus { pane: 2 })
        );
        assert_eq!(ui.filter(), "");
        assert_eq!(ui.selected_index(&agents, &past), 1);
        // The same id under another harness is another session.
        agents[0].harness = "qwen".into();
        let lines = shown(&Ui::default(), &agents, &past, 100).join("\n");
        assert!(lines.contains("d4a8abe5"), "{lines}");
    }

    #[test]
    fn typing_filters_on_title_prompt_project_branch_and_harness() {
        let agents = agents();
        let past = past();
        let mut ui = Ui::default();
        let typed = |ui: &mut Ui, text: &str| {
            while !ui.filter().is_empty() {
                ui.key(Key::Backspace, &agents, &past, &[]);
            }
            for c in text.chars() {
                assert_eq!(ui.key(Key::Char(c), &agents, &past, &[]), None);
            }
            let lines = shown(ui, &agents, &past, 120);
            lines[2..lines.len() - 1].to_vec()
        };
        let rows = typed(&mut ui, "LOGIN");
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert!(rows[0].contains("0199aaaa"), "{rows:?}");
        assert!(typed(&mut ui, "csv export")[0].contains("0199bbbb"));
        assert!(
            typed(&mut ui, "orders")[0].contains("0199bbbb"),
            "the first prompt"
        );
        assert!(
            typed(&mut ui, "srv/shop")[0].contains("0199bbbb"),
            "the project"
        );
        assert!(typed(&mut ui, "head")[0].contains("d4a8abe5"), "the branch");
        let claude = typed(&mut ui, "claude");
        assert_eq!(claude.len(), 4, "three agents and one session: {claude:?}");
        // Agents filter too, by name, state, directory.
        assert_eq!(
            typed(&mut ui, "needs")[0].trim_start_matches("> "),
            "● needs you  fix-auth  claude  5m  hooks"
        );
        let none = typed(&mut ui, "nowhere");
        assert_eq!(none, ["  nothing matches (esc clears the filter)"]);
        // The filter shows under the header, with what it keeps.
        typed(&mut ui, "login");
        let lines = shown(&ui, &agents, &past, 120);
        assert_eq!(lines[1], "filter: login_  1 shown");
        // `+`, `q`, `j` are text once filtering; Esc clears, then closes.
        assert_eq!(ui.key(Key::Char('+'), &agents, &past, &[]), None);
        assert!(!ui.is_prompting());
        assert_eq!(ui.filter(), "login+");
        assert_eq!(ui.key(Key::Esc, &agents, &past, &[]), None);
        assert_eq!(ui.filter(), "");
        assert_eq!(ui.key(Key::Char('q'), &agents, &past, &[]), None);
        assert_eq!(ui.filter(), "q");
        ui.key(Key::Esc, &agents, &past, &[]);
        assert_eq!(ui.key(Key::Esc, &agents, &past, &[]), Some(UiAction::Close));
    }

    #[test]
    fn enter_on_a_past_session_resumes_it() {
        let agents = agents();
        let past = past();
        let mut ui = Ui::default();
        // Down past the three agents to the newest session.
        for _ in 0..3 {
            ui.key(Key::Down, &agents, &past, &[1, 2]);
        }
        assert_eq!(ui.selected_index(&agents, &past), 3);
        assert_eq!(
            ui.key(Key::Enter, &agents, &past, &[1, 2]),
            Some(UiAction::Resume {
                harness: "codex".into(),
                id: "0199aaaa-1111".into()
            })
        );
        let lines = shown(&ui, &agents, &past, 120);
        assert!(
            lines.contains(&"resuming codex session 0199aaaa-1111…".to_owned()),
            "{lines:?}"
        );
        // Filtered to one session, Enter resumes that one; the selection stays on it when the
        // lists change.
        for c in "d4a8".chars() {
            ui.key(Key::Char(c), &agents, &past, &[]);
        }
        assert_eq!(
            ui.key(Key::Enter, &agents, &past, &[]),
            Some(UiAction::Resume {
                harness: "claude".into(),
                id: "d4a8abe5-742d".into()
            })
        );
        assert_eq!(ui.filter(), "", "the filter goes once Enter acted");
        assert_eq!(ui.selected_index(&agents, &past), 5);
        let mut fewer = past.clone();
        fewer.remove(0);
        assert_eq!(ui.selected_index(&agents, &fewer), 4);
        // Its end is said on the message line, a failure with the command's stderr.
        ui.command_finished(Ran::Resume, Some(0), "");
        assert!(shown(&ui, &agents, &past, 120).contains(&"resumed".to_owned()));
        ui.command_finished(
            Ran::Resume,
            Some(2),
            "error: the session's project directory /tmp/work is gone\n",
        );
        let lines = shown(&ui, &agents, &past, 120);
        assert!(
            lines.contains(
                &"resume failed (2): error: the session's project directory /tmp/work is gone"
                    .to_owned()
            ),
            "{lines:?}"
        );
        ui.command_finished(Ran::Launch, None, "killed");
        assert!(shown(&ui, &agents, &past, 120)
            .contains(&"launch failed (a signal): killed".to_owned()));
    }

    #[test]
    fn tab_goes_to_the_agent_needing_you_whatever_the_filter() {
        let agents = agents();
        let past = past();
        let mut ui = Ui::default();
        for c in "login".chars() {
            ui.key(Key::Char(c), &agents, &past, &[]);
        }
        assert_eq!(
            ui.key(Key::Tab, &agents, &past, &[1, 2]),
            Some(UiAction::Focus { pane: 1 })
        );
        assert_eq!(ui.filter(), "");
        assert_eq!(ui.selected_index(&agents, &past), 0);
    }

    #[test]
    fn resume_command_line() {
        assert_eq!(
            resume_argv("/usr/bin/volee", "d4a8abe5", Some("work")),
            [
                "/usr/bin/volee",
                "sessions",
                "resume",
                "--host",
                "zellij:work",
                "--",
                "d4a8abe5"
            ]
        );
        // An id is never an option, whatever it looks like.
        let argv = resume_argv("volee", "--help", None);
        assert_eq!(argv[4], "zellij");
        assert_eq!(argv[5..], ["--", "--help"]);
    }

    /// Agent-controlled text of a past session (title, prompt, project, branch, even its id)
    /// reaches the pane as text: no escape sequence, no control character of its own.
    #[test]
    fn hostile_session_text_is_rendered_as_text() {
        let evil = PastSession {
            harness: "codex\x1b[5m".into(),
            id: "0199\x1b[2J".into(),
            title: Some("\x1b]0;pwned\x07\r\nred\u{202e}x".into()),
            first_prompt: Some("\x1b[31mprompt".into()),
            project: Some("/tmp/\x1b[1mproj\x07".into()),
            branch: Some("br\x1b[7manch\n".into()),
            last: NOW,
        };
        for color in [false, true] {
            let lines = Ui::default().lines(
                Some(&[]),
                std::slice::from_ref(&evil),
                None,
                10,
                200,
                NOW,
                color,
            );
            let text = lines.join("\n").replace("\x1b[0m", "");
            // Only our own SGR sequences (ESC [ digits ; m) may carry ESC.
            let stripped: String = text
                .split('\x1b')
                .enumerate()
                .map(|(i, part)| {
                    if i == 0 {
                        return part.to_owned();
                    }
                    let (sgr, rest) = part.split_once('m').unwrap_or(("", part));
                    assert!(
                        sgr.starts_with('[')
                            && sgr[1..].chars().all(|c| c.is_ascii_digit() || c == ';'),
                        "a foreign sequence: {part:?}"
                    );
                    rest.to_owned()
                })
                .collect();
            assert!(
                !stripped
                    .chars()
                    .any(|c| (c.is_control() && c != '\n') || c == '\u{202e}'),
                "{text:?}"
            );
            assert!(stripped.contains("]0;pwned red"), "{stripped:?}");
            assert!(stripped.contains("[1mproj"), "{stripped:?}");
            assert!(stripped.contains("[br[7manch]"), "{stripped:?}");
            assert!(stripped.contains("0199[2J"), "{stripped:?}");
        }
    }

    #[test]
    fn past_rows_fit_narrow_panes() {
        let agents = agents();
        let past = past();
        let mut ui = Ui::default();
        for cols in [0, 1, 5, 17, 30, 50] {
            for rows in [0, 1, 2, 3, 4, 6, 12] {
                for color in [false, true] {
                    let lines = ui.lines(Some(&agents), &past, None, rows, cols, NOW, color);
                    assert!(lines.len() <= rows, "{rows}x{cols}: {lines:?}");
                    if !color {
                        for line in &lines {
                            assert!(display_width(line) <= cols, "{cols}: {line:?}");
                        }
                    }
                }
            }
        }
        // At 50 columns (a phone over ssh) a past row still shows its title's start.
        for c in "login".chars() {
            ui.key(Key::Char(c), &agents, &past, &[]);
        }
        let lines = ui.lines(Some(&agents), &past, None, 8, 50, NOW, false);
        assert_eq!(
            lines[2],
            "> ↺ past  0199aaaa  codex  2h  app  fix the login…"
        );
        // The selected past row stays in view when the pane is short.
        ui.key(Key::Esc, &agents, &past, &[]);
        for _ in 0..5 {
            ui.key(Key::Down, &agents, &past, &[]);
        }
        let short = ui.lines(Some(&agents), &past, None, 4, 60, NOW, false);
        assert!(
            short[2].starts_with("> ↺ past") && short[2].contains("d4a8abe5"),
            "{short:?}"
        );
    }
}
