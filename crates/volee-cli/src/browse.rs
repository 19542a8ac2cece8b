//! `volee browse`: live agents (needs-you first) and every harness's past sessions in one list,
//! filtered as you type, full-text search on `/`, a preview of the selected row (a live tmux
//! agent's screen in colour, a past session's last messages); Enter jumps to a live agent or
//! resumes a past session. An agent on a machine shows as `MACHINE:NAME`, its screen read through
//! the daemon, and Enter opens a tmux window attached to it there. A TUI on `ratatui` (crossterm
//! backend).

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use clap::Args;
use ratatui::buffer::Buffer;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, List, ListItem, ListState, Paragraph, Widget, Wrap};
use volee_history::{Index, SessionRow};
use volee_protocol::{AgentView, Host, Request};
use volee_tmux::server::TmuxServer;
use volee_view::{plain_text, sh_quote};

use crate::ask::{agents_of, ask};
use crate::error::{CliError, CliResult, Exit};

#[derive(Args, Debug, Default)]
pub struct BrowseArgs {
    /// Open in a tmux popup on --client and return (what the picker key runs on tmux ≥ 3.2).
    #[arg(long)]
    popup: bool,
    /// The tmux server's socket (default: the one you are in).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// The tmux client Enter switches to the agent (default: the one tmux picks for you).
    #[arg(long)]
    client: Option<String>,
    /// The tmux pane a resumed session opens beside (default: yours).
    #[arg(long)]
    pane: Option<String>,
}

enum Row {
    Live(Box<AgentView>),
    Past(Box<SessionRow>),
}

impl Row {
    /// What the filter looks in.
    fn haystack(&self) -> String {
        match self {
            Row::Live(a) => format!(
                "{} {} {} {} {} {} {}",
                a.address(),
                a.name,
                a.harness,
                a.title.as_deref().unwrap_or(""),
                a.cwd,
                a.state,
                a.machine.as_deref().unwrap_or("")
            )
            .to_lowercase(),
            Row::Past(s) => volee_view::session_haystack(
                &s.id,
                &s.harness,
                s.title.as_deref(),
                s.first_prompt.as_deref(),
                s.project.as_deref(),
                s.branch.as_deref(),
            ),
        }
    }

    /// What stays the same row when the list is read again.
    fn key(&self) -> String {
        match self {
            Row::Live(a) => format!("agent {}", a.address()),
            Row::Past(s) => format!("session {}/{}", s.harness, s.id),
        }
    }
}

struct App {
    rows: Vec<Row>,
    /// The indexed sessions of live agents (a discovered agent's earlier turns).
    joined: Vec<SessionRow>,
    /// Indices of `rows` the filter keeps.
    shown: Vec<usize>,
    filter: String,
    /// `/` pressed: typing a full-text query (Enter runs it).
    searching: Option<String>,
    /// A full-text search's hits are listed (the rows are not re-read under them).
    searched: bool,
    list: ListState,
    /// A confirmation or a message on the last line.
    status: String,
    confirm_stop: Option<String>,
    help: bool,
    color: bool,
}

/// What the browser ends with.
enum Outcome {
    Quit,
    Jump(Box<AgentView>),
    Resume(Box<SessionRow>),
}

pub fn run(args: BrowseArgs) -> CliResult {
    if args.popup {
        return open_popup(&args);
    }
    let socket = crate::caller::tmux_socket(args.socket.clone());
    let result = browse(&args, &socket);
    // In a popup an error would vanish with it: say it on the client's status line too.
    if let (Err(e), Some(client)) = (&result, &args.client) {
        crate::tmux_ui::tell(
            &TmuxServer::new(&socket),
            Some(client),
            &format!("volee: {}", e.message),
        );
    }
    result
}

/// The popup: `display-popup` runs `volee browse` with the client, pane and socket given here
/// (it expands no format itself), and closes when the browser exits.
fn open_popup(args: &BrowseArgs) -> CliResult {
    let socket = crate::caller::tmux_socket(args.socket.clone());
    let bin = std::env::current_exe().map_err(|e| CliError::from_error(Exit::Internal, &e))?;
    let mut inner = vec![
        sh_quote(&bin.display().to_string()),
        "browse".into(),
        "--socket".into(),
        sh_quote(&socket.display().to_string()),
    ];
    for (flag, value) in [("--client", &args.client), ("--pane", &args.pane)] {
        if let Some(v) = value {
            inner.extend([flag.to_string(), sh_quote(v)]);
        }
    }
    let mut argv: Vec<String> = vec!["display-popup".into()];
    if let Some(c) = &args.client {
        argv.extend(["-c".into(), c.clone()]);
    }
    if let Some(p) = &args.pane {
        argv.extend(["-t".into(), p.clone()]);
    }
    argv.extend([
        "-E".into(),
        "-w".into(),
        "90%".into(),
        "-h".into(),
        "85%".into(),
        "-T".into(),
        " volee ".into(),
        inner.join(" "),
    ]);
    // display-popup returns when the popup closes: leave it to tmux.
    crate::tmux_ui::leave_to_tmux(&TmuxServer::new(&socket), &argv)
}

/// The live agents, needs-you first.
fn live_agents() -> CliResult<Vec<AgentView>> {
    let listed = agents_of(ask(&Request::List { all: false })?)?;
    Ok(volee_view::in_display_order(&listed)
        .into_iter()
        .cloned()
        .collect())
}

/// Live agents, then the past sessions that are not live now (a live one shows as its agent);
/// and the indexed sessions of the live agents (their earlier turns join their preview).
fn rows_of(agents: Vec<AgentView>, past: Vec<SessionRow>) -> (Vec<Row>, Vec<SessionRow>) {
    // Past sessions are this machine's: an agent on another one never hides one.
    let is_live = |s: &SessionRow| {
        agents.iter().any(|a| {
            a.machine.is_none()
                && a.session_id.as_deref() == Some(s.id.as_str())
                && a.harness == s.harness
        })
    };
    let (joined, past): (Vec<SessionRow>, Vec<SessionRow>) = past.into_iter().partition(is_live);
    let mut rows: Vec<Row> = agents.into_iter().map(|a| Row::Live(Box::new(a))).collect();
    rows.extend(past.into_iter().map(|s| Row::Past(Box::new(s))));
    (rows, joined)
}

fn browse(args: &BrowseArgs, socket: &Path) -> CliResult {
    // The first frame shows what the index has; the scan runs on a thread and the list is read
    // again when it ends (a cold index fills in under the user's eyes).
    let (index, roots) = crate::sessions_cmd::open_index()?;
    let agents = live_agents()?;
    let past = index
        .sessions()
        .map_err(|e| CliError::internal(e.to_string()))?;
    let (scanned_tx, scanned) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = scanned_tx.send(crate::sessions_cmd::scan_into_index(&roots));
    });
    let (rows, joined) = rows_of(agents, past);
    let mut app = App {
        shown: Vec::new(),
        rows,
        joined,
        filter: String::new(),
        searching: None,
        searched: false,
        list: ListState::default(),
        status: "reading past sessions…".into(),
        confirm_stop: None,
        help: false,
        color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
    };
    refilter(&mut app);
    let mut terminal = ratatui::init();
    let outcome = event_loop(&mut terminal, &mut app, &index, &scanned);
    ratatui::restore();
    match outcome? {
        Outcome::Quit => Ok(()),
        // A machine's agent: a window of its own attached there (from the popup, beside the pane
        // it was opened over); from a plain terminal, this terminal.
        Outcome::Jump(agent) if agent.machine.is_some() => {
            let pane = args
                .pane
                .clone()
                .or_else(|| std::env::var("TMUX_PANE").ok());
            if args.client.is_some() || crate::caller::inside_server(socket) {
                crate::tmux_ui::open_remote_window(
                    &TmuxServer::new(socket),
                    pane.as_deref(),
                    &agent,
                )
            } else {
                crate::attach::attach(&agent.address())
            }
        }
        Outcome::Jump(agent) => match (&agent.host, &args.client) {
            // From the popup: the client that opened it goes to the agent's pane.
            (
                Host::Tmux {
                    socket: s, pane, ..
                },
                Some(client),
            ) if Path::new(s) == socket => {
                TmuxServer::new(socket).run(&["switch-client", "-c", client, "-t", pane])?;
                Ok(())
            }
            _ => crate::attach::attach(&agent.id),
        },
        Outcome::Resume(s) => {
            let project = s.project.clone().unwrap_or_default();
            let beside = args.pane.as_deref().map(|p| (socket, p));
            let agent = crate::launch::resume_session_beside(
                &s.harness,
                &s.id,
                Path::new(&project),
                None,
                None,
                beside,
            )?;
            match (&agent.host, &args.client) {
                (
                    Host::Tmux {
                        socket: s, pane, ..
                    },
                    Some(client),
                ) if Path::new(s) == socket => {
                    TmuxServer::new(socket).run(&["switch-client", "-c", client, "-t", pane])?;
                }
                _ => crate::output::out(&agent.id),
            }
            Ok(())
        }
    }
}

/// Read the rows again (live agents changed, a scan ended), keeping the filter and the
/// selected row where it still is.
fn reload(app: &mut App, index: &Index) {
    if app.searched {
        return;
    }
    let (Ok(agents), Ok(past)) = (live_agents(), index.sessions()) else {
        return;
    };
    let selected = app
        .list
        .selected()
        .and_then(|i| app.shown.get(i))
        .map(|&i| app.rows[i].key());
    (app.rows, app.joined) = rows_of(agents, past);
    refilter(app);
    if let Some(key) = selected {
        if let Some(pos) = app.shown.iter().position(|&i| app.rows[i].key() == key) {
            app.list.select(Some(pos));
        }
    }
}

fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    app: &mut App,
    index: &Index,
    scanned: &mpsc::Receiver<Result<volee_history::Scan, String>>,
) -> CliResult<Outcome> {
    let mut scanning = true;
    loop {
        terminal
            .draw(|f| draw(f, app, index))
            .map_err(|e| CliError::internal(e.to_string()))?;
        // While the scan runs, look for its end often; after, redraw every 2 s (live screens).
        let tick = if scanning {
            Duration::from_millis(100)
        } else {
            Duration::from_secs(2)
        };
        if !event::poll(tick).map_err(|e| CliError::internal(e.to_string()))? {
            if scanning {
                match scanned.try_recv() {
                    Ok(result) => {
                        scanning = false;
                        app.status = match result {
                            Ok(scan) if !scan.unreadable.is_empty() => format!(
                                "{} file(s) could not be read: volee sessions --json",
                                scan.unreadable.len()
                            ),
                            Ok(_) => String::new(),
                            Err(e) => format!("past sessions: {e}"),
                        };
                        reload(app, index);
                    }
                    Err(mpsc::TryRecvError::Empty) => {}
                    Err(mpsc::TryRecvError::Disconnected) => scanning = false,
                }
            } else {
                reload(app, index);
            }
            continue;
        }
        let Event::Key(key) = event::read().map_err(|e| CliError::internal(e.to_string()))? else {
            continue;
        };
        if key.kind != KeyEventKind::Press {
            continue;
        }
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return Ok(Outcome::Quit);
        }
        if app.help {
            app.help = false;
            continue;
        }
        if let Some(id) = app.confirm_stop.take() {
            if key.code == KeyCode::Char('y') {
                app.status = match ask(&Request::Stop { id: id.clone() }) {
                    Ok(_) => format!("stopped {id}"),
                    Err(e) => e.message,
                };
            } else {
                app.status = "not stopped".into();
            }
            continue;
        }
        if let Some(query) = &mut app.searching {
            match key.code {
                KeyCode::Esc => app.searching = None,
                KeyCode::Backspace => {
                    query.pop();
                }
                KeyCode::Char(c) => query.push(c),
                KeyCode::Enter => {
                    let q = query.clone();
                    app.searching = None;
                    search(app, index, &q)?;
                }
                _ => {}
            }
            continue;
        }
        let selected = app.list.selected().and_then(|i| app.shown.get(i)).copied();
        match key.code {
            KeyCode::Esc if app.searched => {
                app.searched = false;
                app.status.clear();
                reload(app, index);
            }
            KeyCode::Esc if app.filter.is_empty() => return Ok(Outcome::Quit),
            KeyCode::Esc => {
                app.filter.clear();
                refilter(app);
            }
            KeyCode::Up => app.list.select_previous(),
            KeyCode::Down => app.list.select_next(),
            KeyCode::PageUp => app.list.scroll_up_by(10),
            KeyCode::PageDown => app.list.scroll_down_by(10),
            KeyCode::Enter => match selected.map(|i| &app.rows[i]) {
                Some(Row::Live(a)) => return Ok(Outcome::Jump(a.clone())),
                Some(Row::Past(s)) => return Ok(Outcome::Resume(s.clone())),
                None => {}
            },
            KeyCode::Char('/') if app.filter.is_empty() => app.searching = Some(String::new()),
            KeyCode::Char('?') if app.filter.is_empty() => app.help = true,
            KeyCode::Char('x') if app.filter.is_empty() => {
                if let Some(Row::Live(a)) = selected.map(|i| &app.rows[i]) {
                    app.status = format!(
                        "stop {} ({})? y/n",
                        plain_text(&a.name, 40),
                        volee_view::address_text(a, 64)
                    );
                    app.confirm_stop = Some(a.address());
                }
            }
            KeyCode::Backspace => {
                app.filter.pop();
                refilter(app);
            }
            KeyCode::Char(c) => {
                app.filter.push(c);
                refilter(app);
            }
            _ => {}
        }
    }
}

fn refilter(app: &mut App) {
    let words: Vec<String> = app
        .filter
        .to_lowercase()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    app.shown = (0..app.rows.len())
        .filter(|&i| {
            let hay = app.rows[i].haystack();
            words.iter().all(|w| hay.contains(w.as_str()))
        })
        .collect();
    app.list.select((!app.shown.is_empty()).then_some(0));
}

/// Full text: the list becomes the sessions whose messages match.
fn search(app: &mut App, index: &Index, query: &str) -> CliResult {
    let hits = index
        .search(query, 200)
        .map_err(|e| CliError::internal(e.to_string()))?;
    app.status = format!("{} session(s) mention {query:?} (Esc: back)", hits.len());
    app.rows.retain(|r| matches!(r, Row::Live(_)));
    let live = app.rows.len();
    app.rows
        .extend(hits.into_iter().map(|h| Row::Past(Box::new(h.session))));
    app.filter.clear();
    app.searched = true;
    app.shown = (live..app.rows.len()).collect();
    app.list.select((!app.shown.is_empty()).then_some(0));
    Ok(())
}

fn draw(f: &mut ratatui::Frame, app: &mut App, index: &Index) {
    let area = f.area();
    let [main, bottom] = Layout::vertical([Constraint::Min(3), Constraint::Length(1)]).areas(area);
    // Side by side when there is room, else the preview below (a phone over ssh).
    let wide = main.width >= 100;
    let parts = Layout::default()
        .direction(if wide {
            Direction::Horizontal
        } else {
            Direction::Vertical
        })
        .constraints([Constraint::Percentage(45), Constraint::Percentage(55)])
        .split(main);
    let now = crate::output::now_secs();
    let items: Vec<ListItem> = app
        .shown
        .iter()
        // The reasons and a TOKENS column where they leave the title room.
        .map(|&i| ListItem::new(row_line(&app.rows[i], now, app.color, parts[0].width >= 64)))
        .collect();
    let title = match (&app.searching, app.filter.is_empty()) {
        (Some(q), _) => format!(" search: {q}_ "),
        (None, false) => format!(" filter: {} ", app.filter),
        (None, true) => {
            let live = app
                .shown
                .iter()
                .filter(|&&i| matches!(app.rows[i], Row::Live(_)))
                .count();
            format!(" {live} live, {} past ", app.shown.len() - live)
        }
    };
    let highlight = if app.color {
        Style::default().bg(Color::Blue).fg(Color::White)
    } else {
        Style::default().add_modifier(Modifier::REVERSED)
    };
    let list = List::new(items)
        .block(Block::default().borders(Borders::ALL).title(title))
        .highlight_style(highlight);
    f.render_stateful_widget(list, parts[0], &mut app.list);

    let selected = app.list.selected().and_then(|i| app.shown.get(i)).copied();
    let block = Block::default().borders(Borders::ALL).title(" preview ");
    let inner = block.inner(parts[1]);
    f.render_widget(block, parts[1]);
    match selected.map(|i| &app.rows[i]) {
        Some(Row::Live(a)) => {
            let joined = a.session_id.as_deref().and_then(|sid| {
                app.joined
                    .iter()
                    .find(|s| s.id == sid && s.harness == a.harness)
            });
            let screen = LivePreview {
                agent: a,
                color: app.color,
            };
            match joined {
                // No pane to read (found in a plain terminal): its turns are what there is.
                Some(s) if matches!(a.host, Host::Tty { .. } | Host::None) => {
                    f.render_widget(past_preview(s, index, inner.width), inner);
                }
                Some(s) => {
                    let [top, bottom] =
                        Layout::vertical([Constraint::Percentage(60), Constraint::Percentage(40)])
                            .areas(inner);
                    f.render_widget(screen, top);
                    let block = Block::default()
                        .borders(Borders::TOP)
                        .title(" earlier turns ");
                    let below = block.inner(bottom);
                    f.render_widget(block, bottom);
                    f.render_widget(
                        Paragraph::new(message_lines(s, index)).wrap(Wrap { trim: false }),
                        below,
                    );
                }
                None => f.render_widget(screen, inner),
            }
        }
        Some(Row::Past(s)) => {
            f.render_widget(past_preview(s, index, inner.width), inner);
        }
        None => {}
    }
    let status = if app.help {
        "↑↓ move · Enter jump / resume · type to filter · / full text · x stop (empty filter) · Esc back/quit".to_owned()
    } else if app.status.is_empty() {
        "type to filter · / search · Enter jump or resume · ? keys · Esc quit".to_owned()
    } else {
        app.status.clone()
    };
    f.render_widget(Paragraph::new(status), bottom);
}

/// One row of the list; `wide`: room for the state's reason and a TOKENS column.
fn row_line(row: &Row, now: u64, color: bool, wide: bool) -> Line<'static> {
    let state_width = if wide { 14 } else { 10 };
    let column = |t: String| {
        if wide {
            format!(" {t:>6}")
        } else {
            String::new()
        }
    };
    let style = |c: Color| {
        if color {
            Style::default().fg(c)
        } else {
            Style::default()
        }
    };
    match row {
        Row::Live(a) => {
            let c = match a.state.to_string().as_str() {
                "needs_you" => Color::Red,
                "failed" => Color::Magenta,
                "working" => Color::Yellow,
                "idle" => Color::Green,
                _ => Color::Gray,
            };
            // A machine's agent is `MACHINE:NAME`, its state marked `?` while unreachable.
            let tokens = column(
                a.usage
                    .as_ref()
                    .map_or("-".into(), |u| volee_view::tokens_short(u.counted())),
            );
            Line::from(vec![
                Span::styled(
                    format!("● {:<state_width$}", volee_view::state_text(a)),
                    style(c),
                ),
                Span::raw(format!(
                    " {:<10} {:<8}{tokens} {}",
                    volee_view::machine_name_text(a, 10),
                    plain_text(&a.harness, 16),
                    plain_text(a.title.as_deref().unwrap_or(""), 50)
                )),
            ])
        }
        Row::Past(s) => {
            let age = if s.last_ms > 0 {
                volee_view::ago(now.saturating_sub((s.last_ms / 1000) as u64))
            } else {
                "-".into()
            };
            let title = s
                .title
                .as_deref()
                .or(s.first_prompt.as_deref())
                .unwrap_or("");
            // Tokens as a budget counts them: input + output + cache writes.
            let tokens = column(s.usage.as_ref().map_or("-".into(), |u| {
                volee_view::tokens_short(u.input + u.output + u.cache_write)
            }));
            Line::from(vec![
                Span::styled(format!("  {age:<state_width$}"), style(Color::DarkGray)),
                Span::raw(format!(
                    " {:<10} {:<8}{tokens} {}",
                    s.id.chars().take(8).collect::<String>(),
                    s.harness,
                    plain_text(title, 50)
                )),
            ])
        }
    }
}

fn past_preview<'a>(s: &SessionRow, index: &Index, width: u16) -> Paragraph<'a> {
    let mut lines = vec![
        Line::from(format!("{} {}", s.harness, s.id)),
        Line::from(format!(
            "project: {}",
            plain_text(s.project.as_deref().unwrap_or("-"), width as usize)
        )),
        Line::from(format!(
            "branch: {}  model: {}",
            s.branch.as_deref().unwrap_or("-"),
            plain_text(s.model.as_deref().unwrap_or("-"), 40)
        )),
        Line::from(format!("last: {}", s.last.as_deref().unwrap_or("-"))),
        Line::from(format!("tokens: {}", session_tokens(s))),
        Line::from(""),
    ];
    lines.extend(message_lines(s, index));
    Paragraph::new(lines).wrap(Wrap { trim: false })
}

/// A past session's tokens as its file recorded them: `12.3k (+40.1k cached)`, `unknown`.
fn session_tokens(s: &SessionRow) -> String {
    match &s.usage {
        None => "unknown".into(),
        Some(u) if u.cache_read > 0 => format!(
            "{} (+{} cached)",
            volee_view::tokens_short(u.input + u.output + u.cache_write),
            volee_view::tokens_short(u.cache_read)
        ),
        Some(u) => volee_view::tokens_short(u.input + u.output + u.cache_write),
    }
}

/// A session's last messages, as text.
fn message_lines(s: &SessionRow, index: &Index) -> Vec<Line<'static>> {
    index
        .messages(s, 12)
        .unwrap_or_default()
        .into_iter()
        .map(|m| Line::from(format!("{}: {}", m.role.as_str(), plain_text(&m.text, 600))))
        .collect()
}

/// A live agent's screen: a tmux pane's `capture-pane -e` drawn cell by cell through a `vt100`
/// model (colours kept, nothing of the agent's bytes reaches the terminal as is); other hosts
/// through the daemon's peek (text).
struct LivePreview<'a> {
    agent: &'a AgentView,
    color: bool,
}

impl Widget for LivePreview<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let rows = area.height.max(1);
        let cols = area.width.max(1);
        let screen = match &self.agent.host {
            // A machine's pane is in its tmux: read through the daemon, never a local server.
            _ if self.agent.machine.is_some() => None,
            Host::Tmux { socket, pane, .. } => {
                let server = volee_tmux::server::TmuxServer::new(socket);
                server
                    .command()
                    .args(["capture-pane", "-p", "-e", "-t", pane])
                    .output()
                    .ok()
                    .filter(|o| o.status.success())
                    .map(|o| o.stdout)
            }
            _ => None,
        };
        let bytes = match screen {
            Some(b) => b,
            None => match ask(&Request::Peek {
                id: self.agent.address(),
                lines: u32::from(rows),
            }) {
                Ok(volee_protocol::Response::Text { text }) => text.into_bytes(),
                _ => b"(no screen)".to_vec(),
            },
        };
        // Only the last `rows` lines matter: the bottom of the screen is where prompts are.
        let text = String::from_utf8_lossy(&bytes);
        let mut all: Vec<&str> = text.lines().collect();
        // The pane's blank rows below its last output are not the screen's bottom.
        while all.last().is_some_and(|l| l.trim().is_empty()) {
            all.pop();
        }
        let tail = &all[all.len().saturating_sub(rows as usize)..];
        let (Some(r), Some(c)) = (
            std::num::NonZeroU16::new(rows),
            std::num::NonZeroU16::new(cols),
        ) else {
            return;
        };
        let mut parser = vt100::Parser::new(r, c, 0);
        for (i, line) in tail.iter().enumerate() {
            if i > 0 {
                parser.process(b"\r\n");
            }
            parser.process(line.as_bytes());
            parser.process(b"\x1b[0m");
        }
        let screen = parser.screen();
        for r in 0..rows {
            for c in 0..cols {
                let Some(cell) = screen.cell(r, c) else {
                    continue;
                };
                let mut style = Style::default();
                if self.color {
                    style = style
                        .fg(color_of(cell.fgcolor()))
                        .bg(color_of(cell.bgcolor()));
                }
                if cell.bold() {
                    style = style.add_modifier(Modifier::BOLD);
                }
                if cell.inverse() {
                    style = style.add_modifier(Modifier::REVERSED);
                }
                let contents = cell.contents();
                let symbol = if contents.is_empty() || contents.chars().any(char::is_control) {
                    " "
                } else {
                    contents
                };
                if let Some(target) = buf.cell_mut((area.x + c, area.y + r)) {
                    target.set_symbol(symbol).set_style(style);
                }
            }
        }
    }
}

fn color_of(c: vt100::Color) -> Color {
    match c {
        vt100::Color::Default => Color::Reset,
        vt100::Color::Idx(i) => Color::Indexed(i),
        vt100::Color::Rgb(r, g, b) => Color::Rgb(r, g, b),
    }
}

#[cfg(test)]
mod tests {
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    use super::*;

    fn past(id: &str, title: &str) -> SessionRow {
        SessionRow {
            harness: "codex".into(),
            id: id.into(),
            project: Some("/home/u/src/app".into()),
            branch: Some("main".into()),
            title: Some(title.into()),
            first_prompt: None,
            started: None,
            last: Some("2026-12-01T10:00:00Z".into()),
            last_ms: 0,
            messages: 4,
            model: Some("gpt-5".into()),
            usage: None,
            file: "/nonexistent/rollout.jsonl".into(),
        }
    }

    /// The screen's lines after one frame at `width`×`height`.
    fn frame(width: u16, height: u16, rows: Vec<Row>) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(&dir.path().join("sessions.db")).unwrap();
        frame_with(width, height, rows, Vec::new(), &index)
    }

    fn frame_with(
        width: u16,
        height: u16,
        rows: Vec<Row>,
        joined: Vec<SessionRow>,
        index: &Index,
    ) -> Vec<String> {
        let mut app = App {
            shown: Vec::new(),
            rows,
            joined,
            filter: String::new(),
            searching: None,
            searched: false,
            list: ListState::default(),
            status: String::new(),
            confirm_stop: None,
            help: false,
            color: true,
        };
        refilter(&mut app);
        let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        terminal.draw(|f| draw(f, &mut app, index)).unwrap();
        let buf = terminal.backend().buffer().clone();
        (0..height)
            .map(|y| {
                (0..width)
                    .map(|x| buf[(x, y)].symbol().to_string())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn at_50_columns_the_preview_goes_below_the_list() {
        let lines = frame(
            50,
            24,
            vec![
                Row::Past(Box::new(past("0199aaaa-1111", "fix the login bug"))),
                Row::Past(Box::new(past("0199bbbb-2222", "add the export"))),
            ],
        );
        let at = |needle: &str| lines.iter().position(|l| l.contains(needle));
        let (Some(first), Some(second), Some(preview)) =
            (at("fix the login"), at("add the export"), at(" preview "))
        else {
            panic!("{}", lines.join("\n"));
        };
        assert!(first < second && second < preview, "{}", lines.join("\n"));
        // The preview shows the selected session's metadata in full width.
        assert!(
            lines[preview..]
                .iter()
                .any(|l| l.contains("codex 0199aaaa-1111")),
            "{}",
            lines.join("\n")
        );
        assert!(lines.iter().all(|l| l.chars().count() == 50));
    }

    #[test]
    fn at_80_by_24_the_preview_is_beside_the_list_until_100_columns() {
        let rows = || {
            vec![Row::Past(Box::new(past(
                "0199aaaa-1111",
                "fix the login bug",
            )))]
        };
        let narrow = frame(80, 24, rows());
        let wide = frame(120, 30, rows());
        let row_of = |lines: &[String], needle: &str| lines.iter().position(|l| l.contains(needle));
        assert!(row_of(&narrow, " preview ") > row_of(&narrow, "fix the login"));
        assert_eq!(row_of(&wide, " preview "), Some(0), "{}", wide.join("\n"));
    }

    /// Agent-controlled text (a title, a first prompt) reaches the terminal as text: no escape
    /// sequence, no control character, no tmux style.
    #[test]
    fn hostile_titles_are_drawn_as_text() {
        let hostile = "\u{1b}[31mred\u{7}\r\n#[fg=red]x";
        let lines = frame(
            160,
            24,
            vec![Row::Past(Box::new(past("0199cccc-3333", hostile)))],
        );
        let all = lines.join("\n");
        assert!(!all.contains('\u{1b}') && !all.contains('\u{7}'), "{all:?}");
        assert!(all.contains("red"), "{all}");
        assert!(all.contains("#[fg=red]"), "drawn literally: {all}");
    }

    /// An agent on a machine is drawn as `MACHINE:NAME`, its state marked while unreachable, and
    /// never hides a past session of this machine.
    #[test]
    fn a_machines_agent_is_marked_with_its_machine() {
        let mut agent: AgentView = serde_json::from_value(serde_json::json!({
            "id": "k3f9", "name": "build", "harness": "codex", "harness_version": null,
            "profile_fit": "generic", "origin": "launched", "state": "working",
            "state_source": "process", "state_since": "2026-01-01T00:00:00Z", "evidence": "",
            "exit_status": null, "pid": 1, "cwd": "/", "session_id": "0199aaaa-1111",
            "host": {"kind": "none"}, "machine": "box", "reachable": false,
        }))
        .unwrap();
        let (rows, joined) = rows_of(vec![agent.clone()], vec![past("0199aaaa-1111", "t")]);
        assert_eq!((rows.len(), joined.len()), (2, 0));
        assert_eq!(rows[0].key(), "agent box:k3f9");
        assert!(rows[0].haystack().contains("box"));
        agent.title = Some("compiling".into());
        let line = row_line(&Row::Live(Box::new(agent.clone())), 0, false, true);
        let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
        assert_eq!(
            text,
            "● working?       box:build  codex         - compiling"
        );
        // Its usage, as a budget counts it (cache reads are not).
        agent.usage = Some(volee_protocol::AgentUsage {
            input: 12_000,
            output: 300,
            cache_read: 90_000,
            cache_write: 45,
            ..Default::default()
        });
        let line = row_line(&Row::Live(Box::new(agent)), 0, false, true);
        let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
        assert_eq!(
            text,
            "● working?       box:build  codex     12.3k compiling"
        );
    }

    /// A past session shows the tokens its file recorded, in its row and its preview.
    #[test]
    fn a_past_sessions_tokens_are_in_its_row_and_preview() {
        let mut session = past("0199dddd-4444", "tune the cache");
        session.usage = Some(volee_history::Usage {
            input: 1_500,
            output: 700,
            cache_read: 52_000,
            cache_write: 300,
            requests: 3,
        });
        let line = row_line(&Row::Past(Box::new(session.clone())), 0, false, true);
        let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
        assert!(text.contains("codex      2500 tune the cache"), "{text:?}");
        let lines = frame(160, 24, vec![Row::Past(Box::new(session))]);
        let all = lines.join("\n");
        assert!(all.contains("tokens: 2500 (+52.0k cached)"), "{all}");
    }

    /// Discovery joins the history: an agent found by the /proc scan in a plain terminal (no
    /// pane to read) whose session is indexed shows that session's turns, and the session is
    /// listed once, as the agent.
    #[test]
    fn a_discovered_agent_shows_its_indexed_turns() {
        const SESSION: &str = "d4a8abe5-742d-4002-a1ab-379c1b005cb4";
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let projects = home.join(".claude/projects/-tmp-work");
        std::fs::create_dir_all(&projects).unwrap();
        std::fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
                "../volee-history/tests/fixtures/home/.claude/projects/-tmp-work/{SESSION}.jsonl"
            )),
            projects.join(format!("{SESSION}.jsonl")),
        )
        .unwrap();
        let mut index = Index::open(&dir.path().join("sessions.db")).unwrap();
        let h = home.display().to_string();
        index
            .scan(&volee_history::roots(|k| (k == "HOME").then(|| h.clone())))
            .unwrap();
        let agent = AgentView {
            id: "k3f9".into(),
            name: "found".into(),
            harness: "claude".into(),
            harness_version: None,
            profile_fit: volee_protocol::ProfileFit::Measured,
            origin: volee_protocol::Origin::Discovered,
            state: volee_protocol::AgentState::Working,
            state_source: volee_protocol::StateSource::Process,
            state_since: "2026-12-04T10:00:00Z".into(),
            evidence: "process".into(),
            reason: None,
            exit_status: None,
            pid: Some(1),
            cwd: "/tmp/work".into(),
            session_id: Some(SESSION.into()),
            host: Host::Tty {
                tty: "/dev/pts/9".into(),
            },
            title: None,
            command: vec!["claude".into()],
            created_at: "2026-12-04T10:00:00Z".into(),
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
        };
        let (rows, joined) = rows_of(vec![agent], index.sessions().unwrap());
        assert_eq!(rows.len(), 1, "the session is listed as its agent only");
        assert_eq!(joined.len(), 1);
        let lines = frame_with(120, 30, rows, joined, &index);
        let all = lines.join("\n");
        assert!(all.contains("found"), "{all}");
        assert!(
            all.contains("user: Run the touch command to create the marker file."),
            "{all}"
        );
    }
}
