//! The plugin itself: zellij events and pipes in, protocol lines and the pane out.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use volee_protocol::zellij::{
    PastSession, PluginCommand, PluginEvent, ZellijPane, COMMAND_PIPE, MISMATCH_HINT, PIPE_VERSION,
    STREAM_PIPE, VERSION_ARG,
};
use volee_protocol::AgentView;
use volee_view::zellij::{launch_argv, resume_argv, screen_tail, Key as UiKey, Ran, Ui, UiAction};
use zellij_tile::prelude::*;

/// How often the visible UI pane re-renders so the ages in it move. Nothing else runs on a
/// timer: panes in hidden tabs are read when the daemon asks (`PluginCommand::Read`, when their
/// pty was written to), so an idle session costs nothing.
const UI_TICK_SECS: f64 = 1.0;
/// Open stream pipes kept at most (the oldest is dropped first).
const MAX_STREAMS: usize = 4;
/// `RunCommandResult` context key marking our launch commands.
const LAUNCH_CONTEXT: &str = "volee-launch";
/// `RunCommandResult` context key marking our resume commands.
const RESUME_CONTEXT: &str = "volee-resume";

#[derive(Default)]
pub struct VoleePlugin {
    /// `None` until zellij answered the permission request.
    permitted: Option<bool>,
    plugin_id: u32,
    cwd: PathBuf,
    /// The `volee` binary the pane runs to launch and resume (plugin configuration `volee_bin`).
    volee_bin: String,
    session: Option<String>,
    /// Open stream pipes (ids of `zellij pipe --name volee-stream` CLIs).
    streams: Vec<String>,
    /// Terminal panes by tab position, as the last `PaneUpdate` (patched by polls) had them.
    manifest: Vec<(usize, PaneInfo)>,
    /// Tab position → (name, active).
    tabs: BTreeMap<usize, (String, bool)>,
    /// Tab position → zellij's stable tab id (renames go by id).
    tab_ids: BTreeMap<usize, usize>,
    /// Tab position → its bell flags as last seen: (`has_bell_notification`, `is_flashing_bell`).
    bells: BTreeMap<usize, (bool, bool)>,
    /// The last `Panes` list written (or that would have been, with no stream open).
    sent_panes: Option<Vec<ZellijPane>>,
    /// Last screen lines reported per watched pane.
    screens: HashMap<u32, Vec<String>>,
    /// Each terminal pane's process, once zellij said (a pane just opened has none yet).
    pids: HashMap<u32, u32>,
    /// From the daemon's `Agents`; `None` before the first one.
    agents: Option<Vec<AgentView>>,
    /// The past sessions from the daemon's `Sessions` (newest first), listed under the agents.
    sessions: Vec<PastSession>,
    watch: BTreeSet<u32>,
    timer_armed: bool,
    /// Started by `volee up` (configuration `background=true`): hidden once permitted.
    background: bool,
    /// This instance has a pane that is not suppressed (the manifest says so): the UI, opened
    /// by the user. A `load_plugins` plugin's pane is suppressed; zellij still renders it (once
    /// at load, and after every update that asks), so a render proves nothing.
    has_pane: bool,
    /// Its tab is hidden (`Visible(false)`, sent to tiled plugin panes when their tab is left).
    hidden: bool,
    pane_named: bool,
    ui: Ui,
}

impl ZellijPlugin for VoleePlugin {
    fn load(&mut self, configuration: BTreeMap<String, String>) {
        self.background = configuration
            .get(volee_protocol::zellij::BACKGROUND_KEY)
            .is_some_and(|v| v == "true");
        self.volee_bin = configuration
            .get("volee_bin")
            .cloned()
            .unwrap_or_else(|| "volee".to_owned());
        // Needs no permission; known before any PaneUpdate (which tells whether our pane shows).
        self.plugin_id = get_plugin_ids().plugin_id;
        request_permission(&[
            PermissionType::ReadApplicationState,
            PermissionType::ChangeApplicationState,
            PermissionType::ReadPaneContents,
            PermissionType::ReadCliPipes,
            PermissionType::RunCommands,
            PermissionType::OpenTerminalsOrPlugins,
        ]);
        subscribe(&[
            EventType::PermissionRequestResult,
            EventType::PaneUpdate,
            EventType::TabUpdate,
            EventType::PaneRenderReport,
            EventType::PaneClosed,
            EventType::Timer,
            EventType::Key,
            EventType::Visible,
            EventType::ModeUpdate,
            EventType::RunCommandResult,
        ]);
    }

    fn update(&mut self, event: Event) -> bool {
        match event {
            Event::PermissionRequestResult(status) => {
                let granted = status == PermissionStatus::Granted;
                self.permitted = Some(granted);
                if granted && self.background {
                    // Started by `volee up`: its floating pane showed the permission prompt; from
                    // now on it runs without a pane, as a `load_plugins` plugin does.
                    hide_self();
                }
                if granted {
                    let ids = get_plugin_ids();
                    self.plugin_id = ids.plugin_id;
                    self.cwd = ids.initial_cwd;
                    self.arm_timer();
                }
                true
            }
            Event::ModeUpdate(mode) => {
                self.session = mode.session_name;
                false
            }
            Event::PaneUpdate(manifest) => {
                let me = self.plugin_id;
                self.has_pane = manifest
                    .panes
                    .values()
                    .flatten()
                    .any(|p| p.is_plugin && p.id == me && !p.is_suppressed);
                let mut panes: Vec<(usize, PaneInfo)> = manifest
                    .panes
                    .into_iter()
                    .flat_map(|(tab, panes)| panes.into_iter().map(move |p| (tab, p)))
                    .filter(|(_, p)| !p.is_plugin)
                    .collect();
                panes.sort_by_key(|(tab, p)| (*tab, p.id));
                self.manifest = panes;
                self.fill_pids();
                self.send_panes_if_changed();
                self.arm_timer();
                false
            }
            Event::TabUpdate(tabs) => {
                self.tabs = tabs
                    .iter()
                    .map(|t| (t.position, (t.name.clone(), t.active)))
                    .collect();
                self.tab_ids = tabs.iter().map(|t| (t.position, t.tab_id)).collect();
                for tab in &tabs {
                    // The notification flag stays up until the user visits the tab; every
                    // later bell there only flashes the tab (`is_flashing_bell`, ≈400 ms).
                    let now = (tab.has_bell_notification, tab.is_flashing_bell);
                    let was = self
                        .bells
                        .insert(tab.position, now)
                        .unwrap_or((false, false));
                    if (now.0 && !was.0) || (now.1 && !was.1) {
                        let panes: Vec<u32> = self
                            .manifest
                            .iter()
                            .filter(|(t, _)| *t == tab.position)
                            .map(|(_, p)| p.id)
                            .collect();
                        // The screen as the bell found it goes first: what the program printed
                        // just before its bell must not arrive with the next poll, after the
                        // bell, and pass for new output that ends the needs-you.
                        let watched: Vec<u32> = panes
                            .iter()
                            .copied()
                            .filter(|p| self.watch.contains(p))
                            .collect();
                        for pane in watched {
                            if let Ok(contents) = get_pane_scrollback(PaneId::Terminal(pane), false)
                            {
                                self.report_screen(pane, &contents.viewport);
                            }
                        }
                        self.emit(&PluginEvent::Bell {
                            tab: tab.position,
                            panes,
                        });
                    }
                }
                self.bells.retain(|pos, _| self.tabs.contains_key(pos));
                self.mark_tabs();
                self.send_panes_if_changed();
                self.arm_timer();
                false
            }
            Event::PaneRenderReport(report) => {
                for (id, contents) in report {
                    // Our own pane is in the report too: reacting to it would loop forever.
                    let PaneId::Terminal(pane) = id else { continue };
                    if self.watch.contains(&pane) {
                        self.report_screen(pane, &contents.viewport);
                    }
                }
                false
            }
            Event::PaneClosed(PaneId::Terminal(pane)) => {
                self.screens.remove(&pane);
                self.emit(&PluginEvent::Closed { pane });
                false
            }
            Event::Timer(_) => {
                self.timer_armed = false;
                self.arm_timer();
                self.ui_visible()
            }
            Event::Visible(visible) => {
                self.hidden = !visible;
                self.arm_timer();
                self.ui_visible()
            }
            Event::Key(key) => self.on_key(&key),
            Event::RunCommandResult(exit, _stdout, stderr, context) => {
                let ran = if context.contains_key(LAUNCH_CONTEXT) {
                    Ran::Launch
                } else if context.contains_key(RESUME_CONTEXT) {
                    Ran::Resume
                } else {
                    return false;
                };
                self.ui
                    .command_finished(ran, exit, &String::from_utf8_lossy(&stderr));
                true
            }
            _ => false,
        }
    }

    fn pipe(&mut self, message: PipeMessage) -> bool {
        let PipeSource::Cli(pipe_id) = &message.source else {
            return false;
        };
        if message.name == STREAM_PIPE {
            self.on_stream(pipe_id, &message);
            false
        } else if message.name == COMMAND_PIPE {
            self.on_command(pipe_id, message.payload.as_deref())
        } else {
            false
        }
    }

    fn render(&mut self, rows: usize, cols: usize) {
        if !self.pane_named && self.permitted == Some(true) {
            // Instead of the wasm's path in the frame.
            rename_plugin_pane(self.plugin_id, "volee");
            self.pane_named = true;
        }
        let notice = match self.permitted {
            Some(true) => None,
            Some(false) => Some(
                "permissions not granted: volee needs them to see panes and talk to the daemon \
                 (delete this plugin's entry in zellij's permissions.kdl and reload it)",
            ),
            None => Some("waiting for permissions (answer zellij's prompt in this pane)"),
        };
        let lines = self.ui.lines(
            self.agents.as_deref(),
            &self.sessions,
            notice,
            rows,
            cols,
            now_secs(),
            true,
        );
        // No newline after the last line: a list that fills the pane (the past sessions do)
        // would scroll its header out of sight.
        print!("{}", lines.join("\n"));
        let _ = std::io::Write::flush(&mut std::io::stdout());
    }
}

impl VoleePlugin {
    /// Mark the tabs not shown whose agent needs you (`! ` before the name); unmark them when
    /// none does or the tab is shown (docs: zellij-plugin/README.md).
    fn mark_tabs(&mut self) {
        if self.permitted != Some(true) {
            return;
        }
        let Some(agents) = &self.agents else {
            return;
        };
        let pane_tabs: Vec<(u32, usize)> = self.manifest.iter().map(|(t, p)| (p.id, *t)).collect();
        let tabs: Vec<(usize, String, bool)> = self
            .tabs
            .iter()
            .map(|(pos, (name, active))| (*pos, name.clone(), *active))
            .collect();
        for (pos, name) in volee_view::zellij::tab_marks(agents, &pane_tabs, &tabs) {
            if let Some(id) = self.tab_ids.get(&pos) {
                rename_tab_with_id(*id as u64, &name);
            }
        }
    }

    /// Writes one event line to every open stream.
    fn emit(&self, event: &PluginEvent) {
        if self.streams.is_empty() {
            return;
        }
        let Ok(mut line) = serde_json::to_string(event) else {
            return;
        };
        line.push('\n');
        for pipe in &self.streams {
            cli_pipe_output(pipe, &line);
        }
    }

    fn panes(&self) -> Vec<ZellijPane> {
        self.manifest
            .iter()
            .map(|(tab, p)| {
                let (tab_name, tab_active) = self.tabs.get(tab).cloned().unwrap_or_default();
                ZellijPane {
                    id: p.id,
                    tab: *tab,
                    tab_name,
                    title: p.title.clone(),
                    exited: p.exited,
                    exit_status: p.exit_status,
                    is_focused: p.is_focused,
                    tab_active,
                    terminal_command: p.terminal_command.clone(),
                    pid: self.pids.get(&p.id).copied(),
                }
            })
            .collect()
    }

    fn send_panes_if_changed(&mut self) {
        let panes = self.panes();
        if self.sent_panes.as_ref() != Some(&panes) {
            self.emit(&PluginEvent::Panes {
                panes: panes.clone(),
            });
            self.sent_panes = Some(panes);
        }
    }

    fn report_screen(&mut self, pane: u32, viewport: &[String]) {
        let lines = screen_tail(viewport);
        if self.screens.get(&pane) != Some(&lines) {
            self.emit(&PluginEvent::Screen {
                pane,
                lines: lines.clone(),
            });
            self.screens.insert(pane, lines);
        }
    }

    /// A pane of ours is on screen: the ages in it must move.
    fn ui_visible(&self) -> bool {
        self.has_pane && !self.hidden
    }

    /// One timer at a time, and only while the UI pane is shown (its ages move): an idle
    /// background plugin costs nothing.
    fn arm_timer(&mut self) {
        if self.timer_armed || self.permitted != Some(true) || !self.ui_visible() {
            return;
        }
        set_timeout(UI_TICK_SECS);
        self.timer_armed = true;
    }

    /// Ask zellij for the process of each terminal pane that has none yet (the daemon watches its
    /// terminal); kept once known.
    fn fill_pids(&mut self) {
        if self.permitted != Some(true) {
            return;
        }
        let manifest = &self.manifest;
        self.pids
            .retain(|id, _| manifest.iter().any(|(_, p)| p.id == *id));
        for (_, p) in &self.manifest {
            if self.pids.contains_key(&p.id) {
                continue;
            }
            if let Some(pid) = get_pane_pid(PaneId::Terminal(p.id))
                .ok()
                .and_then(|pid| u32::try_from(pid).ok())
            {
                self.pids.insert(p.id, pid);
            }
        }
    }

    /// Read watched panes now (the daemon saw their ptys written to): each screen goes out as a
    /// `Read` (not activity: the daemon saw the write), titles and exits as `Panes` when they
    /// changed.
    fn read_panes(&mut self, panes: &[u32]) {
        self.fill_pids();
        for &pane in panes.iter().filter(|p| self.watch.contains(p)) {
            if let Some(info) = get_pane_info(PaneId::Terminal(pane)) {
                if let Some((_, known)) = self.manifest.iter_mut().find(|(_, p)| p.id == pane) {
                    known.title = info.title;
                    known.exited = info.exited;
                    known.exit_status = info.exit_status;
                    // Not `is_focused`: `get_pane_info` reports it for the caller's client and
                    // would flip against `PaneUpdate`'s value.
                }
            }
            if let Ok(contents) = get_pane_scrollback(PaneId::Terminal(pane), false) {
                let lines = screen_tail(&contents.viewport);
                self.emit(&PluginEvent::Read {
                    pane,
                    lines: lines.clone(),
                });
                self.screens.insert(pane, lines);
            }
        }
        self.send_panes_if_changed();
    }

    fn on_stream(&mut self, pipe_id: &str, message: &PipeMessage) {
        if message.payload.is_none() {
            // The end of the pipe: its reader went away.
            self.streams.retain(|p| p != pipe_id);
            eprintln!("volee: stream {pipe_id} ended");
            return;
        }
        let daemon_version = message
            .args
            .get(VERSION_ARG)
            .and_then(|v| v.trim().parse::<u32>().ok());
        if daemon_version != Some(PIPE_VERSION) {
            let event = PluginEvent::Mismatch {
                plugin_version: PIPE_VERSION,
                daemon_version: daemon_version.unwrap_or(0),
                hint: MISMATCH_HINT.to_owned(),
            };
            if let Ok(line) = serde_json::to_string(&event) {
                cli_pipe_output(pipe_id, &format!("{line}\n"));
            }
            unblock_cli_pipe_input(pipe_id);
            return;
        }
        // Keep the CLI waiting, so it prints every later line as it comes.
        block_cli_pipe_input(pipe_id);
        if !self.streams.iter().any(|p| p == pipe_id) {
            // zellij gives no error for output to a pipe whose reader died without an end
            // message: keep only the newest few, one daemon needs one.
            if self.streams.len() >= MAX_STREAMS {
                self.streams.remove(0);
            }
            self.streams.push(pipe_id.to_owned());
            eprintln!("volee: stream {pipe_id} opened");
        }
        let hello = PluginEvent::Hello {
            version: PIPE_VERSION,
            plugin_version: env!("CARGO_PKG_VERSION").to_owned(),
            plugin_id: self.plugin_id,
        };
        let panes = PluginEvent::Panes {
            panes: self.panes(),
        };
        let mut text = String::new();
        for event in [hello, panes] {
            if let Ok(line) = serde_json::to_string(&event) {
                text.push_str(&line);
                text.push('\n');
            }
        }
        cli_pipe_output(pipe_id, &text);
        self.sent_panes = Some(self.panes());
    }

    /// A one-shot command from the daemon; answers `ok` or a mismatch, then releases the CLI.
    fn on_command(&mut self, pipe_id: &str, payload: Option<&str>) -> bool {
        let Some(payload) = payload else {
            unblock_cli_pipe_input(pipe_id);
            return false;
        };
        let (reply, rerender) = self.command(payload);
        cli_pipe_output(pipe_id, &format!("{reply}\n"));
        unblock_cli_pipe_input(pipe_id);
        rerender
    }

    fn command(&mut self, payload: &str) -> (String, bool) {
        // Read the version first: a newer daemon's command may not parse at all.
        let version = serde_json::from_str::<serde_json::Value>(payload)
            .ok()
            .and_then(|v| v.get("version").and_then(serde_json::Value::as_u64));
        if version != Some(u64::from(PIPE_VERSION)) {
            let event = PluginEvent::Mismatch {
                plugin_version: PIPE_VERSION,
                daemon_version: version.and_then(|v| u32::try_from(v).ok()).unwrap_or(0),
                hint: MISMATCH_HINT.to_owned(),
            };
            return (serde_json::to_string(&event).unwrap_or_default(), false);
        }
        match serde_json::from_str::<PluginCommand>(payload) {
            Ok(PluginCommand::Agents { agents, watch, .. }) => {
                let watch: BTreeSet<u32> = watch.into_iter().collect();
                let added: Vec<u32> = watch.difference(&self.watch).copied().collect();
                self.screens.retain(|pane, _| watch.contains(pane));
                self.watch = watch;
                if let Some(toast) = volee_view::zellij::needs_you_toast(
                    self.agents.as_deref().unwrap_or(&[]),
                    &agents,
                ) {
                    self.ui.set_message(toast);
                }
                self.agents = Some(agents);
                self.mark_tabs();
                self.fill_pids();
                self.send_panes_if_changed();
                // A newly watched pane's current screen, without waiting for it to change.
                if self.permitted == Some(true) {
                    for pane in added {
                        if let Ok(contents) = get_pane_scrollback(PaneId::Terminal(pane), false) {
                            self.report_screen(pane, &contents.viewport);
                        }
                    }
                }
                self.arm_timer();
                ("ok".to_owned(), true)
            }
            Ok(PluginCommand::Sessions { sessions, .. }) => {
                self.sessions = sessions;
                ("ok".to_owned(), true)
            }
            Ok(PluginCommand::Focus { pane, .. }) => {
                focus_terminal_pane(pane, false, false);
                ("ok".to_owned(), false)
            }
            Ok(PluginCommand::Read { panes, .. }) => {
                if self.permitted == Some(true) {
                    self.read_panes(&panes);
                }
                ("ok".to_owned(), false)
            }
            Ok(PluginCommand::Ping { .. }) => {
                let hello = PluginEvent::Hello {
                    version: PIPE_VERSION,
                    plugin_version: env!("CARGO_PKG_VERSION").to_owned(),
                    plugin_id: self.plugin_id,
                };
                (serde_json::to_string(&hello).unwrap_or_default(), false)
            }
            Ok(PluginCommand::Quit { .. }) if self.background => {
                close_self();
                ("ok".to_owned(), false)
            }
            Ok(PluginCommand::Quit { .. }) => ("not mine".to_owned(), false),
            Err(err) => (format!("error: {err}"), false),
        }
    }

    fn on_key(&mut self, key: &KeyWithModifier) -> bool {
        let Some(key) = ui_key(key) else {
            return false;
        };
        let agents = self.agents.clone().unwrap_or_default();
        let watch: Vec<u32> = self.watch.iter().copied().collect();
        match self.ui.key(key, &agents, &self.sessions, &watch) {
            Some(UiAction::Focus { pane }) => focus_terminal_pane(pane, false, false),
            Some(UiAction::Launch { harness, text }) => self.launch(harness, &text),
            Some(UiAction::Resume { harness, id }) => self.resume(&harness, &id),
            Some(UiAction::Close) => hide_self(),
            None => {}
        }
        true
    }

    fn launch(&mut self, harness: &str, text: &str) {
        let argv = launch_argv(&self.volee_bin, harness, text);
        self.run_volee(&argv, LAUNCH_CONTEXT, harness);
    }

    /// `volee sessions resume` into this session: the harness's resume line in the session's
    /// project, in a new tab; a failure comes back as `RunCommandResult` with its stderr.
    fn resume(&mut self, harness: &str, id: &str) {
        let argv = resume_argv(&self.volee_bin, id, self.session.as_deref());
        self.run_volee(&argv, RESUME_CONTEXT, harness);
    }

    /// Run a `volee` command line (with zellij's environment, this session named) in the
    /// plugin's directory; `context` tells its `RunCommandResult` apart.
    fn run_volee(&self, argv: &[String], context: &str, harness: &str) {
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let mut env = BTreeMap::new();
        if let Some(session) = &self.session {
            env.insert("ZELLIJ_SESSION_NAME".to_owned(), session.clone());
        }
        let context = BTreeMap::from([(context.to_owned(), harness.to_owned())]);
        run_command_with_env_variables_and_cwd(&argv, env, self.cwd.clone(), context);
    }
}

/// zellij's key as the UI's; keys with Ctrl, Alt or Super are not ours.
fn ui_key(key: &KeyWithModifier) -> Option<UiKey> {
    let modified = key
        .key_modifiers
        .iter()
        .any(|m| !matches!(m, KeyModifier::Shift));
    if modified {
        return None;
    }
    Some(match key.bare_key {
        BareKey::Up => UiKey::Up,
        BareKey::Down => UiKey::Down,
        BareKey::Enter => UiKey::Enter,
        BareKey::Esc => UiKey::Esc,
        BareKey::Backspace => UiKey::Backspace,
        BareKey::Tab => UiKey::Tab,
        BareKey::Char(c) => UiKey::Char(c),
        _ => return None,
    })
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
