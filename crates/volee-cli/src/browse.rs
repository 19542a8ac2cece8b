//! `volee browse`: live agents (needs-you first) and every harness's past sessions in one list,
//! filtered as you type, full-text search on `/`, a preview of the selected row (a live tmux
//! agent's screen in colour, a past session's last messages); Enter jumps to a live agent or
//! resumes a past session. A TUI on `ratatui` (crossterm backend).

use std::time::Duration;

use ratatui::buffer::Buffer;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, List, ListItem, ListState, Paragraph, Widget, Wrap};
use volee_history::{Index, SessionRow};
use volee_protocol::{AgentView, Host, Request};
use volee_view::plain_text;

use crate::ask::{agents_of, ask};
use crate::error::{CliError, CliResult};

enum Row {
    Live(Box<AgentView>),
    Past(Box<SessionRow>),
}

impl Row {
    /// What the filter looks in.
    fn haystack(&self) -> String {
        match self {
            Row::Live(a) => format!(
                "{} {} {} {} {} {}",
                a.id,
                a.name,
                a.harness,
                a.title.as_deref().unwrap_or(""),
                a.cwd,
                a.state
            ),
            Row::Past(s) => format!(
                "{} {} {} {} {} {}",
                s.id,
                s.harness,
                s.title.as_deref().unwrap_or(""),
                s.first_prompt.as_deref().unwrap_or(""),
                s.project.as_deref().unwrap_or(""),
                s.branch.as_deref().unwrap_or("")
            ),
        }
        .to_lowercase()
    }
}

struct App {
    rows: Vec<Row>,
    /// Indices of `rows` the filter keeps.
    shown: Vec<usize>,
    filter: String,
    /// `/` pressed: typing a full-text query (Enter runs it).
    searching: Option<String>,
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
    Jump(String),
    Resume(Box<SessionRow>),
}

pub fn run() -> CliResult {
    let (index, _roots, _scan) = crate::sessions_cmd::open_scanned()?;
    let listed = agents_of(ask(&Request::List { all: false })?)?;
    let agents: Vec<AgentView> = volee_view::in_display_order(&listed)
        .into_iter()
        .cloned()
        .collect();
    let past = index
        .sessions()
        .map_err(|e| CliError::internal(e.to_string()))?;
    let live_sessions: Vec<String> = agents.iter().filter_map(|a| a.session_id.clone()).collect();
    let mut rows: Vec<Row> = agents.into_iter().map(|a| Row::Live(Box::new(a))).collect();
    rows.extend(
        past.into_iter()
            // A session that is live shows as its agent.
            .filter(|s| !live_sessions.contains(&s.id))
            .map(|s| Row::Past(Box::new(s))),
    );
    let mut app = App {
        shown: (0..rows.len()).collect(),
        rows,
        filter: String::new(),
        searching: None,
        list: ListState::default(),
        status: String::new(),
        confirm_stop: None,
        help: false,
        color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
    };
    if !app.shown.is_empty() {
        app.list.select(Some(0));
    }
    let mut terminal = ratatui::init();
    let outcome = event_loop(&mut terminal, &mut app, &index);
    ratatui::restore();
    match outcome? {
        Outcome::Quit => Ok(()),
        Outcome::Jump(id) => crate::attach::attach(&id),
        Outcome::Resume(s) => {
            let project = s.project.clone().unwrap_or_default();
            crate::launch::resume_session(
                &s.harness,
                &s.id,
                std::path::Path::new(&project),
                None,
                None,
                false,
            )
        }
    }
}

fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    app: &mut App,
    index: &Index,
) -> CliResult<Outcome> {
    loop {
        terminal
            .draw(|f| draw(f, app, index))
            .map_err(|e| CliError::internal(e.to_string()))?;
        if !event::poll(Duration::from_secs(2)).map_err(|e| CliError::internal(e.to_string()))? {
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
                Some(Row::Live(a)) => return Ok(Outcome::Jump(a.id.clone())),
                Some(Row::Past(s)) => return Ok(Outcome::Resume(s.clone())),
                None => {}
            },
            KeyCode::Char('/') if app.filter.is_empty() => app.searching = Some(String::new()),
            KeyCode::Char('?') if app.filter.is_empty() => app.help = true,
            KeyCode::Char('x') if app.filter.is_empty() => {
                if let Some(Row::Live(a)) = selected.map(|i| &app.rows[i]) {
                    app.status = format!("stop {} ({})? y/n", a.name, a.id);
                    app.confirm_stop = Some(a.id.clone());
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
        .map(|&i| ListItem::new(row_line(&app.rows[i], now, app.color)))
        .collect();
    let title = match (&app.searching, app.filter.is_empty()) {
        (Some(q), _) => format!(" search: {q}_ "),
        (None, false) => format!(" filter: {} ", app.filter),
        (None, true) => format!(
            " {} agents and sessions — type to filter, / search, ? keys ",
            app.shown.len()
        ),
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
        Some(Row::Live(a)) => f.render_widget(
            LivePreview {
                agent: a,
                color: app.color,
            },
            inner,
        ),
        Some(Row::Past(s)) => {
            f.render_widget(past_preview(s, index, inner.width), inner);
        }
        None => {}
    }
    let status = if app.help {
        "↑↓ move · Enter jump / resume · type to filter · / full text · x stop (empty filter) · Esc back/quit".to_owned()
    } else {
        app.status.clone()
    };
    f.render_widget(Paragraph::new(status), bottom);
}

fn row_line(row: &Row, now: u64, color: bool) -> Line<'static> {
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
            Line::from(vec![
                Span::styled(format!("● {:<9}", a.state.to_string()), style(c)),
                Span::raw(format!(
                    " {:<10} {:<8} {}",
                    plain_text(&a.name, 10),
                    a.harness,
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
            Line::from(vec![
                Span::styled(format!("  {age:<9}"), style(Color::DarkGray)),
                Span::raw(format!(
                    " {:<10} {:<8} {}",
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
        Line::from(""),
    ];
    for m in index.messages(&s.file, 12).unwrap_or_default() {
        lines.push(Line::from(format!(
            "{}: {}",
            m.role.as_str(),
            plain_text(&m.text, 600)
        )));
    }
    Paragraph::new(lines).wrap(Wrap { trim: false })
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
                id: self.agent.id.clone(),
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
