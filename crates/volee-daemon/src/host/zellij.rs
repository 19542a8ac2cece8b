//! zellij as a host: one [`watch::ZellijWatch`] per session that holds live agents (the volee
//! plugin's stream, else `list-panes` + `subscribe`), whose reports become [`HostEvent`]s; panes
//! opened in a new tab with `action new-tab`, typed into with `write-chars`/`send-keys`, read
//! with `dump-screen`, closed with `close-pane`; the plugins told the agents to show. zellij
//! pushes screens of visible panes, so the last one of each watched pane is kept here; output of
//! a pane in a hidden tab comes from its pty ([`ptys`]), and its screen is then read by the
//! plugin when the daemon asks.

pub mod ptys;
pub mod watch;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::mpsc;
use volee_core::{Millis, Registry};
use volee_protocol::zellij::{PastSession, PluginEvent};
use volee_protocol::{AgentView, Host};
use volee_zellij::{ZellijCli, ZellijError};

use self::watch::{ZellijMsg, ZellijWatch};
use super::{HostError, HostEvent, PaneEvent, PaneKey, PaneRef};

/// A terminal pane of a zellij session (`terminal_N` at the protocol's edge).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ZellijPane(pub u32);

impl ZellijPane {
    /// `terminal_N` (or a bare `N`).
    pub fn parse(id: &str) -> Option<ZellijPane> {
        volee_protocol::zellij::parse_terminal_id(id).map(ZellijPane)
    }

    /// As the agent object names it.
    pub fn terminal_id(self) -> String {
        format!("terminal_{}", self.0)
    }
}

/// How a zellij watch hands its reports to the actor (session, report).
pub type Sink = Arc<dyn Fn(String, ZellijMsg) + Send + Sync>;

/// The daemon's side of every zellij session it watches.
pub struct ZellijHost {
    watches: HashMap<String, ZellijWatch>,
    tx: mpsc::UnboundedSender<(String, ZellijMsg)>,
    /// The last screen text of each watched pane.
    screens: HashMap<(String, ZellijPane), String>,
    /// The agents' ptys (their output, wherever their tab is).
    ptys: ptys::Ptys<(String, ZellijPane)>,
    /// Panes whose tab is not shown (the plugins' last pane list): zellij pushes nothing for them.
    hidden: HashSet<(String, ZellijPane)>,
    /// Screens asked of the plugins, with the output each must show.
    reading: HashMap<(String, ZellijPane), Millis>,
    /// Panes whose pty was written to while their agent waited for the user: output only if the
    /// read the plugins were asked for shows another screen.
    confirming: HashSet<(String, ZellijPane)>,
    /// When each pane's screen was last read on request (a read after the output a settled read
    /// wants to see already shows it).
    read_at: HashMap<(String, ZellijPane), Millis>,
    /// Each pane's process as the plugins listed it (a pane is listed before its agent is
    /// recorded, and a hidden pane is not listed again).
    pids: HashMap<(String, ZellijPane), u32>,
    /// The past sessions the plugins list (the index's newest, from the daemon's history
    /// thread); `None` before its first read.
    past: Option<Vec<PastSession>>,
}

/// A zellij agent's screen, as it can be had now.
pub enum ZellijScreen {
    /// Pushed by zellij (a visible pane) or read before.
    Now(String),
    /// Asked of the plugins: it comes as a [`PaneEvent::Screen`].
    Asked,
    Unknown,
}

/// A terminal pane of a zellij session, with the command line that reaches it.
#[derive(Debug, Clone)]
pub struct ZellijPaneRef {
    cli: ZellijCli,
    pane: ZellijPane,
}

/// What a new agent tab needs.
#[derive(Debug, Clone)]
pub struct OpenZellij {
    pub session: String,
    /// The launcher's environment: its zellij, PATH and zellij directories.
    pub env: Vec<(String, String)>,
    pub tab_name: String,
    pub cwd: String,
    pub command: Vec<String>,
}

/// A tab opened for a new agent.
pub struct Opened {
    pub host: Host,
    /// The variables that say which zellij server the agent's pane is on.
    pub host_env: Vec<(String, String)>,
    pub pane: PaneRef,
}

/// A tmux key name (as profiles give them) in zellij's `send-keys` syntax: `C-c` → `Ctrl c`,
/// `Escape` → `Esc`.
fn zellij_key(tmux_key: &str) -> String {
    if let Some(k) = tmux_key.strip_prefix("C-") {
        return format!("Ctrl {k}");
    }
    match tmux_key {
        "Escape" => "Esc".into(),
        other => other.into(),
    }
}

/// The variables that say which zellij server a process talks to (and how volee finds zellij).
pub fn zellij_env(env: &[(String, String)]) -> Vec<(String, String)> {
    env.iter()
        .filter(|(k, _)| {
            matches!(
                k.as_str(),
                "ZELLIJ_SOCKET_DIR"
                    | "ZELLIJ_CONFIG_DIR"
                    | "XDG_CACHE_HOME"
                    | "XDG_DATA_HOME"
                    | "TMPDIR"
                    | "VOLEE_ZELLIJ"
                    | "PATH"
            )
        })
        .cloned()
        .collect()
}

/// The zellij binary for a launcher's environment: its `VOLEE_ZELLIJ`, else `zellij` on its
/// PATH, else on the daemon's.
fn zellij_binary(env: &[(String, String)]) -> Result<PathBuf, ZellijError> {
    let var = |k: &str| env.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
    if let Some(bin) = var("VOLEE_ZELLIJ").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(bin));
    }
    if let Some(found) = var("PATH").and_then(|p| volee_os::program::find_in("zellij", p.as_ref()))
    {
        return Ok(found);
    }
    volee_zellij::find_binary()
}

impl ZellijPaneRef {
    /// `write-chars` types keys, never a bracketed paste.
    pub async fn type_text(&self, text: &str) -> Result<(), HostError> {
        Ok(self.cli.write_chars(self.pane.0, text).await?)
    }

    pub async fn key(&self, key: &str) -> Result<(), HostError> {
        Ok(self.cli.send_keys(self.pane.0, &zellij_key(key)).await?)
    }

    pub async fn screen(&self) -> Result<String, HostError> {
        Ok(self.cli.dump_screen(self.pane.0).await?)
    }

    pub async fn close(&self) -> Result<(), HostError> {
        Ok(self.cli.close_pane(self.pane.0).await?)
    }
}

impl ZellijHost {
    /// Reports of every watch go to `sink`.
    pub fn new(sink: Sink) -> ZellijHost {
        let (tx, mut rx) = mpsc::unbounded_channel::<(String, ZellijMsg)>();
        tokio::spawn(async move {
            while let Some((session, msg)) = rx.recv().await {
                sink(session, msg);
            }
        });
        let pty_tx = tx.clone();
        let ptys = ptys::Ptys::new(Arc::new(move |path, event| {
            let _ = pty_tx.send((String::new(), ZellijMsg::Pty { path, event }));
        }));
        ZellijHost {
            watches: HashMap::new(),
            tx,
            screens: HashMap::new(),
            ptys,
            hidden: HashSet::new(),
            reading: HashMap::new(),
            pids: HashMap::new(),
            confirming: HashSet::new(),
            read_at: HashMap::new(),
            past: None,
        }
    }

    /// Agent pane `pane`'s pty was written to while it waited for its user: ask the plugins to
    /// read it, and report output only if its screen changed. False when no plugin can read it
    /// (the write then counts as output).
    pub fn confirm(&mut self, session: &str, pane: ZellijPane) -> bool {
        let Some(watch) = self.watches.get(session).filter(|w| w.plugin_alive()) else {
            return false;
        };
        watch.read(pane.0);
        self.confirming.insert((session.to_string(), pane));
        true
    }

    /// Agent pane `pane`'s screen showing the output of `output_at`: pushed already when its tab
    /// is shown, else asked of the plugins (zellij pushes nothing for a hidden tab).
    pub fn read(&mut self, session: &str, pane: ZellijPane, output_at: Millis) -> ZellijScreen {
        let key = (session.to_string(), pane);
        let watch = self.watches.get(session).filter(|w| w.plugin_alive());
        let fresh = self.read_at.get(&key).is_some_and(|&at| at > output_at);
        match watch {
            Some(watch)
                if !fresh && (self.hidden.contains(&key) || !self.screens.contains_key(&key)) =>
            {
                watch.read(pane.0);
                self.reading.insert(key, output_at);
                ZellijScreen::Asked
            }
            _ => match self.screens.get(&key) {
                Some(text) => ZellijScreen::Now(text.clone()),
                None => ZellijScreen::Unknown,
            },
        }
    }

    /// A handle on a pane: through its session's watch, else the agent's own zellij.
    pub fn pane(
        &self,
        session: &str,
        pane: ZellijPane,
        env: &[(String, String)],
    ) -> Option<ZellijPaneRef> {
        let cli = match self.watches.get(session) {
            Some(w) => w.cli.clone(),
            None => ZellijCli::new(zellij_binary(env).ok()?, session).with_env(env),
        };
        Some(ZellijPaneRef { cli, pane })
    }

    /// The last screen pushed for a pane.
    pub fn screen(&self, session: &str, pane: ZellijPane) -> Option<String> {
        self.screens.get(&(session.to_string(), pane)).cloned()
    }

    /// Watch zellij session `session` (with the agent's zellij environment), once.
    pub fn watch(&mut self, session: &str, env: &[(String, String)]) -> Result<(), HostError> {
        if self.watches.contains_key(session) {
            return Ok(());
        }
        let cli = ZellijCli::new(zellij_binary(env)?, session).with_env(env);
        let watch = ZellijWatch::start(cli, self.tx.clone());
        self.watches.insert(session.to_string(), watch);
        Ok(())
    }

    /// Each watch's set of agent panes; watches of sessions without live agents end.
    pub fn keep_watching(&mut self, registry: &Registry) {
        let mut panes: HashMap<String, BTreeSet<u32>> = HashMap::new();
        let mut ptys: Vec<((String, ZellijPane), u32)> = Vec::new();
        for a in registry.iter().filter(|a| !a.is_ended()) {
            if let Host::Zellij { session, pane, .. } = &a.host {
                if let Some(p) = ZellijPane::parse(pane) {
                    panes.entry(session.clone()).or_default().insert(p.0);
                    let key = (session.clone(), p);
                    if let Some(pid) = a.pid.or_else(|| self.pids.get(&key).copied()) {
                        ptys.push((key, pid));
                    }
                }
            }
        }
        self.ptys.sync(&ptys);
        self.watches
            .retain(|session, watch| match panes.remove(session) {
                Some(set) => {
                    watch.set_watched(set);
                    true
                }
                None => {
                    tracing::info!("no live agent in zellij session {session:?}: watch ended");
                    false
                }
            });
    }

    /// Send each session's plugins the agents to show and the panes to watch, when that
    /// changed (a short `zellij pipe` process per change; changes made while one is under way
    /// are sent as one).
    pub fn show_agents(&mut self, views: &[AgentView]) {
        for (session, watch) in self.watches.iter_mut() {
            if !watch.plugin_alive() {
                continue;
            }
            let panes: Vec<u32> = views
                .iter()
                .filter(|v| !v.state.is_final() && v.machine.is_none())
                .filter_map(|v| match PaneKey::of(&v.host)? {
                    PaneKey::Zellij { session: s, pane } if s == *session => Some(pane.0),
                    _ => None,
                })
                .collect();
            watch.send_agents(views, panes);
        }
    }

    /// The past sessions for the plugins' pane (newest first, bounded): sent to the plugins
    /// connected now when they changed, kept for those that connect later.
    pub fn show_sessions(&mut self, sessions: Vec<PastSession>) {
        for watch in self.watches.values_mut().filter(|w| w.plugin_alive()) {
            watch.send_sessions(&sessions);
        }
        self.past = Some(sessions);
    }

    pub fn is_empty(&self) -> bool {
        self.watches.is_empty()
    }

    /// The sessions watched, and volee's plugin in each.
    pub fn sessions(&self) -> Vec<volee_protocol::ZellijSession> {
        let mut sessions: Vec<volee_protocol::ZellijSession> = self
            .watches
            .iter()
            .map(|(name, w)| volee_protocol::ZellijSession {
                name: name.clone(),
                plugin: w.plugin_state(),
            })
            .collect();
        sessions.sort_by(|a, b| a.name.cmp(&b.name));
        sessions
    }

    /// A pane of a forgotten agent: its screen is no longer kept.
    pub fn forget_pane(&mut self, session: &str, pane: ZellijPane) {
        let key = (session.to_string(), pane);
        self.screens.remove(&key);
        self.hidden.remove(&key);
        self.reading.remove(&key);
        self.confirming.remove(&key);
        self.read_at.remove(&key);
        self.pids.remove(&key);
    }

    /// What a session's watch reported, as the actor needs it.
    pub fn on_msg(&mut self, session: &str, msg: ZellijMsg) -> Vec<HostEvent> {
        let key = |pane: u32| PaneKey::Zellij {
            session: session.to_string(),
            pane: ZellijPane(pane),
        };
        let listed = |id: u32, title: &str, exited: bool, status: Option<i32>, tab: usize| {
            let mut events = vec![HostEvent::Pane(key(id), PaneEvent::Tab(tab as u32))];
            events.push(HostEvent::Pane(
                key(id),
                PaneEvent::Title(title.to_string()),
            ));
            if exited {
                events.push(HostEvent::Pane(
                    key(id),
                    PaneEvent::Exit {
                        status,
                        signal: None,
                    },
                ));
            }
            events
        };
        match msg {
            ZellijMsg::Event(PluginEvent::Hello { plugin_id, .. }) => {
                tracing::info!("zellij session {session:?}: volee plugin {plugin_id} connected");
                if let Some(w) = self.watches.get_mut(session) {
                    w.plugin_hello();
                    // The agents follow at the actor's next flush.
                    if let Some(past) = &self.past {
                        w.send_sessions(past);
                    }
                }
                vec![HostEvent::PluginHello(session.to_string())]
            }
            ZellijMsg::Event(PluginEvent::Mismatch {
                plugin_version,
                hint,
                ..
            }) => {
                if let Some(w) = self.watches.get_mut(session) {
                    w.plugin_mismatch(plugin_version, hint);
                }
                Vec::new()
            }
            ZellijMsg::Event(PluginEvent::Panes { panes }) => {
                for p in &panes {
                    let id = (session.to_string(), ZellijPane(p.id));
                    if let Some(pid) = p.pid {
                        self.pids.insert(id.clone(), pid);
                    }
                    if p.tab_active {
                        self.hidden.remove(&id);
                    } else {
                        self.hidden.insert(id);
                    }
                }
                panes
                    .iter()
                    .flat_map(|p| {
                        let title = own_title(&p.title, p.terminal_command.as_deref());
                        listed(p.id, title, p.exited, p.exit_status, p.tab)
                    })
                    .collect()
            }
            ZellijMsg::Panes(panes) => {
                let terminals = panes.iter().filter(|p| !p.is_plugin);
                let mut events: Vec<HostEvent> = terminals
                    .clone()
                    .flat_map(|p| {
                        let title = own_title(&p.title, p.terminal_command.as_deref());
                        listed(p.id, title, p.exited, p.exit_status, p.tab_position)
                    })
                    .collect();
                events.push(HostEvent::SessionPanes {
                    session: session.to_string(),
                    alive: terminals.map(|p| ZellijPane(p.id)).collect::<HashSet<_>>(),
                });
                events
            }
            ZellijMsg::Event(PluginEvent::Screen { pane, lines }) => {
                self.screen_pushed(session, pane, lines, true)
            }
            ZellijMsg::Event(PluginEvent::Read { pane, lines }) => {
                let id = (session.to_string(), ZellijPane(pane));
                let text = lines.join("\n");
                let changed = self.screens.get(&id) != Some(&text);
                self.screens.insert(id.clone(), text.clone());
                self.read_at.insert(id.clone(), volee_os::clock::now_ms());
                let mut events = Vec::new();
                if self.confirming.remove(&id) && changed {
                    events.push(HostEvent::Pane(key(pane), PaneEvent::Output));
                }
                if let Some(output_at) = self.reading.remove(&id) {
                    events.push(HostEvent::Pane(
                        key(pane),
                        PaneEvent::Screen { text, output_at },
                    ));
                }
                events
            }
            ZellijMsg::Pty { path, event } => {
                let Some((session, pane)) = self.ptys.pane(&path).cloned() else {
                    return Vec::new();
                };
                match event {
                    ptys::PtyEvent::Written => vec![HostEvent::Pane(
                        PaneKey::Zellij { session, pane },
                        PaneEvent::Written,
                    )],
                    // A program that wrote to it ended, perhaps the agent: its exit is in the
                    // plugins' answer.
                    ptys::PtyEvent::Closed => {
                        if let Some(w) = self.watches.get(&session).filter(|w| w.plugin_alive()) {
                            w.read(pane.0);
                        }
                        Vec::new()
                    }
                }
            }
            ZellijMsg::Screen {
                pane,
                lines,
                activity,
            } => self.screen_pushed(session, pane, lines, activity),
            ZellijMsg::Event(PluginEvent::Bell { panes, .. }) => panes
                .into_iter()
                .map(|p| HostEvent::Pane(key(p), PaneEvent::Bell))
                .collect(),
            ZellijMsg::Event(PluginEvent::Closed { pane }) => {
                vec![HostEvent::Pane(key(pane), PaneEvent::Closed)]
            }
            ZellijMsg::SessionGone => {
                tracing::info!("zellij session {session:?} is gone");
                self.watches.remove(session);
                self.screens.retain(|(s, _), _| s != session);
                self.hidden.retain(|(s, _)| s != session);
                self.reading.retain(|(s, _), _| s != session);
                self.confirming.retain(|(s, _)| s != session);
                self.read_at.retain(|(s, _), _| s != session);
                self.pids.retain(|(s, _), _| s != session);
                vec![HostEvent::SessionGone(session.to_string())]
            }
        }
    }

    /// A pane's screen text, which is new output when `activity` (else the screen as it is when
    /// a subscription starts).
    fn screen_pushed(
        &mut self,
        session: &str,
        pane: u32,
        lines: Vec<String>,
        activity: bool,
    ) -> Vec<HostEvent> {
        let pane = ZellijPane(pane);
        self.screens
            .insert((session.to_string(), pane), lines.join("\n"));
        let what = if activity {
            PaneEvent::Output
        } else {
            PaneEvent::Shown
        };
        vec![HostEvent::Pane(
            PaneKey::Zellij {
                session: session.to_string(),
                pane,
            },
            what,
        )]
    }

    /// Open a new agent tab (for a task; one agent per tab; the pane is not named, so the
    /// program's own title stays visible).
    pub async fn open(o: OpenZellij) -> Result<Opened, HostError> {
        let cli = ZellijCli::new(zellij_binary(&o.env)?, &o.session).with_env(&o.env);
        cli.list_panes().await?;
        let pane = cli.open(&o.tab_name, &o.cwd, &o.command).await?;
        let listed = cli.list_panes().await.unwrap_or_default();
        let tab = listed
            .iter()
            .find(|p| !p.is_plugin && p.id == pane)
            .map(|p| p.tab_position as u32)
            .unwrap_or(0);
        let pane = ZellijPane(pane);
        Ok(Opened {
            host: Host::Zellij {
                session: o.session.clone(),
                tab,
                pane: pane.terminal_id(),
            },
            host_env: zellij_env(&o.env),
            pane: PaneRef::Zellij(ZellijPaneRef { cli, pane }),
        })
    }
}

/// The title a pane's program set: zellij titles a pane with its command line until the program
/// sets one (for an agent volee launched, `…/volee pane-exec …`), which is no title of the agent's.
fn own_title<'a>(title: &'a str, command: Option<&str>) -> &'a str {
    match command {
        Some(command) if title.trim() == command.trim() => "",
        _ => title,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_named_the_zellij_way() {
        assert_eq!(zellij_key("C-c"), "Ctrl c");
        assert_eq!(zellij_key("Escape"), "Esc");
        assert_eq!(zellij_key("Enter"), "Enter");
    }

    #[tokio::test]
    async fn a_listing_reports_titles_exits_tabs_and_which_panes_live() {
        let mut host = ZellijHost::new(Arc::new(|_, _| {}));
        let panes: Vec<volee_zellij::ListedPane> = volee_zellij::parse_panes(
            r#"[{"id":1,"is_plugin":false,"title":"a","exited":true,"exit_status":3,"tab_position":2},
                {"id":0,"is_plugin":true,"title":"plugin"}]"#,
        )
        .unwrap();
        let events = host.on_msg("s", ZellijMsg::Panes(panes));
        let key = PaneKey::Zellij {
            session: "s".into(),
            pane: ZellijPane(1),
        };
        assert_eq!(
            events,
            vec![
                HostEvent::Pane(key.clone(), PaneEvent::Tab(2)),
                HostEvent::Pane(key.clone(), PaneEvent::Title("a".into())),
                HostEvent::Pane(
                    key,
                    PaneEvent::Exit {
                        status: Some(3),
                        signal: None
                    }
                ),
                HostEvent::SessionPanes {
                    session: "s".into(),
                    alive: [ZellijPane(1)].into_iter().collect(),
                },
            ]
        );
    }

    #[tokio::test]
    async fn pushed_screens_are_kept_and_a_first_one_is_not_output() {
        let mut host = ZellijHost::new(Arc::new(|_, _| {}));
        let first = ZellijMsg::Screen {
            pane: 4,
            lines: vec!["$ ".into(), "x".into()],
            activity: false,
        };
        let events = host.on_msg("s", first);
        assert!(matches!(
            events.as_slice(),
            [HostEvent::Pane(_, PaneEvent::Shown)]
        ));
        assert_eq!(host.screen("s", ZellijPane(4)).as_deref(), Some("$ \nx"));
        host.forget_pane("s", ZellijPane(4));
        assert_eq!(host.screen("s", ZellijPane(4)), None);
    }
}
