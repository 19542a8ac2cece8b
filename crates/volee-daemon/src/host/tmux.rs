//! tmux as a host: one control-mode connection per session that holds a watched agent (its
//! `%output`, bells, titles and the `volee-dead` subscription become [`HostEvent`]s), panes
//! opened with `new-window`, typed into with `send-keys`/`paste-buffer`, read with
//! `capture-pane`, the status line pushed into `@volee-status`, messages shown with
//! `display-message`. Commands go over the session's connection when there is one (no process
//! spawned), else through a one-shot `tmux` process; either way on a task, never on the actor.

pub mod panes;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use volee_core::{ExitFact, Millis, Registry};
use volee_protocol::Host;
use volee_tmux::connection::{CommandSender, ConnectionEvent, ControlConnection, SessionKey};
use volee_tmux::control::ControlEvent;
use volee_tmux::format::{command_line, fields_format, split_fields};
use volee_tmux::screen::first_difference;
use volee_tmux::server::TmuxServer;

use super::{HostError, HostEvent, PaneEvent, PaneKey, PaneRef};

/// Name of the subscription that reports pane deaths (tmux 3.3a has no exit notification).
const DEAD_SUB: &str = "volee-dead";
const DEAD_FORMAT: &str = "#{pane_dead}:#{pane_dead_status}:#{pane_dead_signal}";

/// `dead:status:signal` as the subscription and `display-message` report it.
pub fn parse_dead(value: &str, at: Millis) -> Option<ExitFact> {
    let mut parts = value.trim().splitn(3, ':');
    let dead = parts.next()? == "1";
    let status = parts.next().and_then(|s| s.parse().ok());
    let signal = parts.next().and_then(|s| s.parse().ok());
    dead.then_some(ExitFact { at, status, signal })
}

/// The socket of an agent's tmux server.
pub fn host_socket(host: &Host) -> Option<&Path> {
    match host {
        Host::Tmux { socket, .. } => Some(Path::new(socket)),
        _ => None,
    }
}

/// The daemon's side of every tmux server it watches.
pub struct TmuxHost {
    conns: HashMap<SessionKey, ControlConnection>,
    /// Sessions whose connection is being opened (on a task).
    connecting: HashSet<SessionKey>,
    conn_tx: mpsc::UnboundedSender<ConnectionEvent>,
    /// Servers where `volee tmux-init` ran: their status line gets pushed.
    servers: BTreeSet<PathBuf>,
    /// The status line each server was last given (a failed push removes its entry).
    last_status: Arc<Mutex<HashMap<PathBuf, String>>>,
    /// How often a dead pane without a status was asked again, per agent (tmux 3.3a marks a
    /// pane dead a moment before its process's status is known).
    exit_retries: HashMap<String, u32>,
    /// The panes each connection (by serial) was asked to model.
    modelled: HashMap<SessionKey, (u64, HashSet<String>)>,
    /// Checks of each pane's model against tmux, and how many found it different.
    model_checks: HashMap<(PathBuf, String), ModelChecks>,
}

/// How a pane's screen model fared against tmux's own screen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModelChecks {
    pub checks: u64,
    pub differences: u64,
}

/// A pane on a tmux server, with the session's connection when it has one.
#[derive(Clone)]
pub struct TmuxPane {
    socket: PathBuf,
    pane: String,
    sender: Option<CommandSender>,
}

/// A tmux client attached to a server volee watches.
#[derive(Debug, Clone)]
pub struct Viewer {
    pub socket: PathBuf,
    pub name: String,
    /// The pane it shows.
    pub pane: String,
    pub tty: String,
}

/// What a new agent pane needs.
#[derive(Debug, Clone)]
pub struct OpenTmux {
    pub socket: PathBuf,
    /// The session asked for; else the caller's pane's session; else `volee` (made if missing).
    pub session: Option<String>,
    pub caller_pane: Option<String>,
    pub cwd: String,
    pub window_name: String,
    pub command: Vec<String>,
    /// Pane options that mark it as volee's: `@volee-agent`, `@volee-name`, `@volee-harness`.
    pub marks: Vec<(&'static str, String)>,
    /// `volee restore`: into the window of this name (split into it when the session has one,
    /// else a new window of that name at that index when free); the session is made when
    /// missing.
    pub place: Option<volee_protocol::WindowPlace>,
}

/// A pane opened for a new agent.
pub struct Opened {
    pub host: Host,
    pub pid: Option<u32>,
    pub pane: PaneRef,
    /// A new connection to the pane's session, attached before the agent's command runs.
    pub conn: Option<ControlConnection>,
}

impl TmuxPane {
    /// Run a tmux command about this pane: over the session's connection when there is one.
    async fn run(&self, args: &[&str]) -> Result<String, HostError> {
        if let Some(sender) = &self.sender {
            let line = command_line(args).map_err(|e| HostError::BadArgument(e.to_string()))?;
            if let Ok(reply) = sender.send(line) {
                if let Ok(reply) = reply.await {
                    return if reply.ok {
                        Ok(reply.text())
                    } else {
                        Err(HostError::Refused(reply.text()))
                    };
                }
            }
        }
        Ok(TmuxServer::new(&self.socket).run_async(args).await?)
    }

    pub async fn type_text(&self, text: &str, paste: bool) -> Result<(), HostError> {
        if paste {
            let buffer = format!("volee-send-{}", self.pane.trim_start_matches('%'));
            self.run(&["set-buffer", "-b", &buffer, "--", text]).await?;
            self.run(&["paste-buffer", "-p", "-d", "-b", &buffer, "-t", &self.pane])
                .await?;
        } else {
            self.run(&["send-keys", "-l", "-t", &self.pane, "--", text])
                .await?;
        }
        Ok(())
    }

    pub async fn key(&self, key: &str) -> Result<(), HostError> {
        self.run(&["send-keys", "-t", &self.pane, key]).await?;
        Ok(())
    }

    /// The screen: the pane's model when its connection keeps one (no tmux command), else
    /// `capture-pane`.
    pub async fn screen(&self, history: u32) -> Result<String, HostError> {
        if history == 0 {
            if let Some(text) = self.modelled_screen().await {
                return Ok(text);
            }
            return self
                .run(&["capture-pane", "-p", "-J", "-t", &self.pane])
                .await;
        }
        let start = format!("-{}", history.clamp(1, 10_000));
        self.run(&["capture-pane", "-p", "-J", "-t", &self.pane, "-S", &start])
            .await
    }

    pub async fn exit(&self) -> Option<ExitFact> {
        let value = self
            .run(&["display-message", "-p", "-t", &self.pane, DEAD_FORMAT])
            .await
            .ok()?;
        parse_dead(&value, volee_os::clock::now_ms())
    }

    pub async fn close(&self) -> Result<(), HostError> {
        self.run(&["kill-pane", "-t", &self.pane]).await?;
        Ok(())
    }

    /// Is this pane's session watched (reads then cost no process)?
    pub fn watched(&self) -> bool {
        self.sender.is_some()
    }

    /// The screen as the connection's model of the pane has it (None: not modelled, or not
    /// seeded yet).
    pub async fn modelled_screen(&self) -> Option<String> {
        self.sender.as_ref()?.screen(&self.pane).await
    }

    /// Have the model compared with tmux's screen (and replaced by it).
    pub fn check_model(&self) {
        if let Some(sender) = &self.sender {
            let _ = sender.check(&self.pane);
        }
    }
}

impl TmuxHost {
    pub fn new(conn_tx: mpsc::UnboundedSender<ConnectionEvent>) -> TmuxHost {
        TmuxHost {
            conns: HashMap::new(),
            connecting: HashSet::new(),
            conn_tx,
            servers: BTreeSet::new(),
            last_status: Arc::default(),
            exit_retries: HashMap::new(),
            modelled: HashMap::new(),
            model_checks: HashMap::new(),
        }
    }

    /// How agent pane `pane`'s model fared in its checks so far (None: never checked).
    pub fn model_checks(&self, socket: &Path, pane: &str) -> Option<ModelChecks> {
        self.model_checks
            .get(&(socket.to_path_buf(), pane.to_string()))
            .copied()
    }

    /// Pane `pane` holds no agent any more: its checks go.
    pub fn forget_checks(&mut self, socket: &Path, pane: &str) {
        self.model_checks
            .remove(&(socket.to_path_buf(), pane.to_string()));
    }

    /// Is `pane` of session `key` modelled?
    pub fn is_modelled(&self, key: &SessionKey, pane: &str) -> bool {
        self.open_conn(key).is_some_and(|c| {
            self.modelled
                .get(key)
                .is_some_and(|(serial, panes)| *serial == c.serial() && panes.contains(pane))
        })
    }

    /// Ask agent `id`'s dead pane for its status once more? True at most `max` times.
    pub fn retry_exit(&mut self, id: &str, max: u32) -> bool {
        let tries = self.exit_retries.entry(id.to_string()).or_insert(0);
        *tries += 1;
        *tries <= max
    }

    /// Agent `id`'s exit is known (or it is gone): no more retries kept.
    pub fn exit_seen(&mut self, id: &str) {
        self.exit_retries.remove(id);
    }

    /// Is session `key` watched by an open connection?
    pub fn is_watched(&self, key: &SessionKey) -> bool {
        self.open_conn(key).is_some()
    }

    /// Servers where `volee tmux-init` ran.
    pub fn servers(&self) -> &BTreeSet<PathBuf> {
        &self.servers
    }

    /// `volee tmux-init` ran on `socket` (true) or `volee down` (false).
    pub fn set_initialised(&mut self, socket: &Path, on: bool) {
        if let Ok(mut last) = self.last_status.lock() {
            last.remove(socket);
        }
        if on {
            self.servers.insert(socket.to_path_buf());
        } else {
            self.servers.remove(socket);
        }
    }

    /// A handle on a pane; its session's connection is used when open.
    pub fn pane(&self, socket: &str, session: &str, pane: &str) -> TmuxPane {
        let key = SessionKey {
            socket: socket.into(),
            session: session.to_string(),
        };
        TmuxPane {
            socket: socket.into(),
            pane: pane.to_string(),
            sender: self.open_conn(&key).map(ControlConnection::handle),
        }
    }

    fn open_conn(&self, key: &SessionKey) -> Option<&ControlConnection> {
        self.conns.get(key).filter(|c| c.is_open())
    }

    fn any_conn(&self, socket: &Path) -> Option<&ControlConnection> {
        self.conns
            .iter()
            .find(|(k, c)| k.socket == socket && c.is_open())
            .map(|(_, c)| c)
    }

    /// What a control connection reported, as the actor needs it (None for what the host
    /// handles itself).
    pub fn on_event(&mut self, event: ConnectionEvent) -> Option<HostEvent> {
        let (key, event) = match event {
            ConnectionEvent::Event(key, event) => (key, event),
            ConnectionEvent::Closed(key, serial) => {
                // A connection replaced or dropped on purpose still reports its end: only the
                // current one's end means the session or server went away.
                if self.conns.get(&key).map(ControlConnection::serial) != Some(serial) {
                    return None;
                }
                tracing::info!("control connection to {:?} closed", key.session);
                self.conns.remove(&key);
                return Some(HostEvent::ServerChanged(key.socket));
            }
            ConnectionEvent::ModelChecked { key, pane } => {
                self.model_checks
                    .entry((key.socket, pane))
                    .or_default()
                    .checks += 1;
                return None;
            }
            ConnectionEvent::ModelDiffered {
                key,
                pane,
                model,
                tmux,
            } => {
                // A defect of the model (or of its seed), logged to be fixed (the first line
                // that differs; whole screens only at debug level); the model has tmux's screen
                // now.
                let (line, ours, theirs) = first_difference(&model, &tmux);
                tracing::warn!(
                    "screen model of {pane} differed from tmux's screen at line {line}: model {ours:?}, tmux {theirs:?}"
                );
                tracing::debug!("--- model of {pane}\n{model}\n--- tmux\n{tmux}");
                self.model_checks
                    .entry((key.socket.clone(), pane.clone()))
                    .or_default()
                    .differences += 1;
                return Some(HostEvent::Pane(
                    PaneKey::Tmux {
                        socket: key.socket,
                        pane,
                    },
                    PaneEvent::ModelDiffered,
                ));
            }
        };
        let pane_event = |pane: String, what| {
            Some(HostEvent::Pane(
                PaneKey::Tmux {
                    socket: key.socket.clone(),
                    pane,
                },
                what,
            ))
        };
        match event {
            ControlEvent::Output {
                pane,
                activity: true,
                ..
            } => pane_event(pane, PaneEvent::Output),
            ControlEvent::Bell { pane } => pane_event(pane, PaneEvent::Bell),
            ControlEvent::Title { pane, title } => pane_event(pane, PaneEvent::Title(title)),
            ControlEvent::SubscriptionChanged {
                name,
                pane: Some(pane),
                value,
                ..
            } if name == DEAD_SUB => {
                let exit = parse_dead(&String::from_utf8_lossy(&value), 0)?;
                pane_event(
                    pane,
                    PaneEvent::Exit {
                        status: exit.status,
                        signal: exit.signal,
                    },
                )
            }
            ControlEvent::WindowClose { .. }
            | ControlEvent::LayoutChange { .. }
            | ControlEvent::SessionsChanged => Some(HostEvent::ServerChanged(key.socket.clone())),
            // A renamed window changes where `volee restore` puts its agents back.
            ControlEvent::Other { line } if line.starts_with(b"%window-renamed ") => {
                Some(HostEvent::ServerChanged(key.socket.clone()))
            }
            _ => None,
        }
    }

    /// Watch session `key`: None when it is watched (or being connected) already, else the
    /// work of connecting, for a task; its result goes to [`TmuxHost::connected`].
    pub fn connect(
        &mut self,
        key: &SessionKey,
    ) -> Option<impl Future<Output = Result<ControlConnection, String>> + Send + 'static> {
        if self.open_conn(key).is_some() || !self.connecting.insert(key.clone()) {
            return None;
        }
        Some(connect(key.clone(), self.conn_tx.clone()))
    }

    /// A connection opened for `key` (by [`TmuxHost::connect`] or a launch); true when it is now
    /// the session's watch (a connection already open stays, the new one is dropped).
    pub fn connected(&mut self, key: SessionKey, conn: Result<ControlConnection, String>) -> bool {
        self.connecting.remove(&key);
        match conn {
            Ok(conn) if self.open_conn(&key).is_none() && conn.is_open() => {
                self.conns.insert(key, conn);
                true
            }
            Ok(_) => false,
            Err(e) => {
                tracing::warn!("could not watch tmux session {:?}: {e}", key.session);
                false
            }
        }
    }

    /// Close control clients of sessions that no longer hold a live agent.
    pub fn keep_watching(&mut self, registry: &Registry) {
        let watched: HashSet<SessionKey> = registry
            .iter()
            .filter(|a| !a.is_ended())
            .filter_map(|a| match &a.host {
                Host::Tmux {
                    socket, session, ..
                } => Some(SessionKey {
                    socket: socket.into(),
                    session: session.clone(),
                }),
                _ => None,
            })
            .collect();
        self.conns.retain(|key, _| watched.contains(key));
        self.model(registry);
    }

    /// Every live agent's pane in a watched session is modelled by its connection, no other.
    fn model(&mut self, registry: &Registry) {
        let mut want: HashMap<SessionKey, HashSet<String>> = HashMap::new();
        for a in registry.iter().filter(|a| !a.is_ended()) {
            if let Host::Tmux {
                socket,
                session,
                pane,
                ..
            } = &a.host
            {
                let key = SessionKey {
                    socket: socket.into(),
                    session: session.clone(),
                };
                want.entry(key).or_default().insert(pane.clone());
            }
        }
        let modelled = &mut self.modelled;
        modelled.retain(|key, _| self.conns.contains_key(key));
        for (key, conn) in self.conns.iter().filter(|(_, c)| c.is_open()) {
            let want = want.remove(key).unwrap_or_default();
            let entry = modelled
                .entry(key.clone())
                .or_insert_with(|| (conn.serial(), HashSet::new()));
            if entry.0 != conn.serial() {
                *entry = (conn.serial(), HashSet::new());
            }
            let sender = conn.handle();
            for pane in want.difference(&entry.1) {
                let _ = sender.model(pane, true);
            }
            for pane in entry.1.difference(&want) {
                let _ = sender.model(pane, false);
            }
            entry.1 = want;
        }
    }

    /// The server at `socket` is gone.
    pub fn server_lost(&mut self, socket: &Path) {
        self.conns.retain(|k, _| k.socket != socket);
    }

    /// The clients attached to the server at `socket` (control-mode clients excluded), asked
    /// on a task.
    pub fn viewers(&self, socket: &Path) -> impl Future<Output = Vec<Viewer>> + Send + 'static {
        let pane = TmuxPane {
            socket: socket.to_path_buf(),
            pane: String::new(),
            sender: self.any_conn(socket).map(ControlConnection::handle),
        };
        async move {
            let format = "#{client_name}\t#{client_control_mode}\t#{pane_id}\t#{client_tty}";
            let Ok(text) = pane.run(&["list-clients", "-F", format]).await else {
                return Vec::new();
            };
            text.lines()
                .filter_map(|l| {
                    let f: Vec<&str> = l.split('\t').collect();
                    (f.len() == 4 && f[1] != "1").then(|| Viewer {
                        socket: pane.socket.clone(),
                        name: f[0].to_string(),
                        pane: f[2].to_string(),
                        tty: f[3].to_string(),
                    })
                })
                .collect()
        }
    }

    /// Show `text` (already escaped for `display-message`) on these clients for `ms`.
    pub fn show_message(
        &self,
        viewers: &[Viewer],
        text: String,
        ms: u128,
    ) -> impl Future<Output = ()> + Send + 'static {
        let targets: Vec<(TmuxPane, String)> = viewers
            .iter()
            .map(|v| {
                let pane = TmuxPane {
                    socket: v.socket.clone(),
                    pane: String::new(),
                    sender: self.any_conn(&v.socket).map(ControlConnection::handle),
                };
                (pane, v.name.clone())
            })
            .collect();
        async move {
            let ms = ms.to_string();
            for (pane, client) in targets {
                let shown = pane
                    .run(&["display-message", "-c", &client, "-d", &ms, &text])
                    .await;
                if shown.is_err() {
                    tracing::debug!("display-message on {client} failed");
                }
            }
        }
    }

    /// Put `text` into `@volee-status` of these servers, where it is not there already: over a
    /// connection when there is one (no process spawned), else by a `tmux` process on a task.
    pub fn set_status(&self, sockets: BTreeSet<PathBuf>, text: &str) {
        let Ok(mut last) = self.last_status.lock() else {
            return;
        };
        for socket in sockets {
            if last.get(&socket).map(String::as_str) == Some(text) {
                continue;
            }
            let args = ["set-option", "-g", "@volee-status", text];
            match self.any_conn(&socket) {
                Some(conn) => {
                    let Ok(line) = command_line(&args) else {
                        continue;
                    };
                    if conn.send(line).is_ok() {
                        last.insert(socket, text.to_string());
                    }
                }
                None => {
                    last.insert(socket.clone(), text.to_string());
                    let (last, text) = (self.last_status.clone(), text.to_string());
                    tokio::spawn(async move {
                        let args = ["set-option", "-g", "@volee-status", &text];
                        if TmuxServer::new(&socket).run_async(&args).await.is_err() {
                            if let Ok(mut last) = last.lock() {
                                if last.get(&socket) == Some(&text) {
                                    last.remove(&socket);
                                }
                            }
                        }
                    });
                }
            }
        }
    }

    /// Open a new agent pane (for a task): in its session, marked as volee's, kept when its
    /// program exits, with the session watched before the program runs.
    pub fn open(&self, o: OpenTmux) -> impl Future<Output = Result<Opened, HostError>> + Send {
        let senders: Vec<(SessionKey, CommandSender)> = self
            .conns
            .iter()
            .filter(|(k, c)| k.socket == o.socket && c.is_open())
            .map(|(k, c)| (k.clone(), c.handle()))
            .collect();
        let conn_tx = self.conn_tx.clone();
        async move {
            let server = TmuxServer::new(&o.socket);
            let out = match &o.place {
                Some(place) => open_in_place(&server, &o, place).await?,
                None => {
                    let session = target_session(&server, &o).await?;
                    let mut args = open_args("new-window", &o);
                    args.extend(["-t".into(), format!("={session}:"), "-n".into()]);
                    args.push(o.window_name.clone());
                    args.extend(o.command.iter().cloned());
                    server.run_async(&args).await?
                }
            };
            let created = split_fields(out.trim_end().as_bytes());
            let [window, pane, pid, session] = created.as_slice() else {
                return Err(HostError::Unexpected(
                    "tmux new-window printed an unexpected line".into(),
                ));
            };
            // Before the command runs (pane-exec waits for its env file): keep the pane when it
            // exits, and mark it as ours so a restarted daemon finds it.
            let mut commands: Vec<Vec<&str>> = vec![vec![
                "set-option",
                "-p",
                "-t",
                pane.as_str(),
                "remain-on-exit",
                "on",
            ]];
            for (option, value) in &o.marks {
                commands.push(vec![
                    "set-option",
                    "-p",
                    "-t",
                    pane.as_str(),
                    option,
                    value.as_str(),
                ]);
            }
            let commands: Vec<&[&str]> = commands.iter().map(Vec::as_slice).collect();
            if let Err(e) = server.run_commands_async(&commands).await {
                let _ = server.run_async(&["kill-pane", "-t", pane]).await;
                return Err(e.into());
            }
            let key = SessionKey {
                socket: o.socket.clone(),
                session: session.clone(),
            };
            let existing = senders.into_iter().find(|(k, _)| *k == key).map(|(_, s)| s);
            let conn = match existing {
                Some(_) => None,
                None => match connect(key, conn_tx).await {
                    Ok(c) => Some(c),
                    Err(why) => {
                        let _ = server.run_async(&["kill-pane", "-t", pane]).await;
                        return Err(HostError::Unwatched {
                            session: session.clone(),
                            why,
                        });
                    }
                },
            };
            let sender = existing.or_else(|| conn.as_ref().map(ControlConnection::handle));
            Ok(Opened {
                host: Host::Tmux {
                    socket: o.socket.display().to_string(),
                    session: session.clone(),
                    window: window.clone(),
                    pane: pane.clone(),
                },
                pid: pid.parse().ok(),
                pane: PaneRef::Tmux(TmuxPane {
                    socket: o.socket.clone(),
                    pane: pane.clone(),
                    sender,
                }),
                conn,
            })
        }
    }
}

/// Attach a control client to a session and subscribe to its panes' deaths; the reply also
/// proves the client is attached before an agent's command runs.
async fn connect(
    key: SessionKey,
    conn_tx: mpsc::UnboundedSender<ConnectionEvent>,
) -> Result<ControlConnection, String> {
    let conn = ControlConnection::open(key, conn_tx).map_err(|e| e.to_string())?;
    let sub = format!("{DEAD_SUB}:%*:{DEAD_FORMAT}");
    let line = command_line(&["refresh-client", "-B", &sub]).map_err(|e| e.to_string())?;
    let reply = tokio::time::timeout(Duration::from_secs(5), conn.request(line))
        .await
        .map_err(|_| "tmux did not answer within 5 s".to_string())?
        .map_err(|e| e.to_string())?;
    if !reply.ok {
        return Err(reply.text());
    }
    Ok(conn)
}

/// `tmux VERB -d -P -F FIELDS -c CWD` of a pane opened for an agent (the rest follows).
fn open_args(verb: &str, o: &OpenTmux) -> Vec<String> {
    vec![
        verb.into(),
        "-d".into(),
        "-P".into(),
        "-F".into(),
        fields_format(&["window_id", "pane_id", "pane_pid", "session_name"]),
        "-c".into(),
        o.cwd.clone(),
    ]
}

/// `volee restore`'s pane: a new session when the session is missing (its first window the
/// agent's), else split into the session's window of that name, else a new window of that name
/// at its old index (any index when that one is taken). What tmux printed of the new pane.
async fn open_in_place(
    server: &TmuxServer,
    o: &OpenTmux,
    place: &volee_protocol::WindowPlace,
) -> Result<String, HostError> {
    let session = o
        .session
        .clone()
        .ok_or_else(|| HostError::BadArgument("a restore names its session".into()))?;
    let target = format!("={session}");
    if let Some(pane) = &place.pane {
        if let Some(out) = respawn_in(server, o, &session, pane).await? {
            return Ok(out);
        }
    }
    if server
        .run_async(&["has-session", "-t", &target])
        .await
        .is_err()
    {
        let mut args = open_args("new-session", o);
        args.extend([
            "-s".into(),
            session.clone(),
            "-n".into(),
            place.name.clone(),
        ]);
        args.extend(o.command.iter().cloned());
        return Ok(server.run_async(&args).await?);
    }
    let windows = server
        .run_async(&[
            "list-windows",
            "-t",
            &target,
            "-F",
            &fields_format(&["window_id", "window_name"]),
        ])
        .await?;
    let existing = windows.lines().find_map(|l| {
        let f = split_fields(l.as_bytes());
        (f.len() >= 2 && f[1..].join("\x1f") == place.name).then(|| f[0].clone())
    });
    if let Some(window) = existing {
        let mut args = open_args("split-window", o);
        args.extend(["-t".into(), window]);
        args.extend(o.command.iter().cloned());
        return Ok(server.run_async(&args).await?);
    }
    let mut at_index = None;
    if let Some(index) = place.index {
        let mut args = open_args("new-window", o);
        args.extend(["-t".into(), format!("{target}:{index}"), "-n".into()]);
        args.push(place.name.clone());
        args.extend(o.command.iter().cloned());
        at_index = server.run_async(&args).await.ok();
    }
    match at_index {
        Some(out) => Ok(out),
        None => {
            let mut args = open_args("new-window", o);
            args.extend(["-t".into(), format!("{target}:"), "-n".into()]);
            args.push(place.name.clone());
            args.extend(o.command.iter().cloned());
            Ok(server.run_async(&args).await?)
        }
    }
}

/// `volee restore --into-resurrect`: run the agent in `pane` (tmux-resurrect's shell in its
/// place), replacing what runs there, when that pane is still in `session`. What tmux prints of
/// it, as for a new pane; None when the pane is not there (a pane is opened instead).
async fn respawn_in(
    server: &TmuxServer,
    o: &OpenTmux,
    session: &str,
    pane: &str,
) -> Result<Option<String>, HostError> {
    let fields = fields_format(&["window_id", "pane_id", "pane_pid", "session_name"]);
    let Ok(before) = server
        .run_async(&["display-message", "-p", "-t", pane, &fields])
        .await
    else {
        return Ok(None);
    };
    let f = split_fields(before.trim_end().as_bytes());
    if f.get(1).map(String::as_str) != Some(pane) || f.get(3).map(String::as_str) != Some(session) {
        return Ok(None);
    }
    let mut args: Vec<String> = vec![
        "respawn-pane".into(),
        "-k".into(),
        "-t".into(),
        pane.into(),
        "-c".into(),
        o.cwd.clone(),
    ];
    args.extend(o.command.iter().cloned());
    server.run_async(&args).await?;
    Ok(Some(
        server
            .run_async(&["display-message", "-p", "-t", pane, &fields])
            .await?,
    ))
}

/// The session to launch into: the one asked for, else the caller's, else `volee`.
async fn target_session(server: &TmuxServer, o: &OpenTmux) -> Result<String, HostError> {
    let has = |s: &str| {
        let target = format!("={s}");
        async move {
            server
                .run_async(&["has-session", "-t", &target])
                .await
                .is_ok()
        }
    };
    if let Some(s) = &o.session {
        if !has(s).await {
            return Err(HostError::NoSession(s.clone()));
        }
        return Ok(s.clone());
    }
    if let Some(pane) = &o.caller_pane {
        if let Ok(s) = server
            .run_async(&["display-message", "-p", "-t", pane, "#{session_name}"])
            .await
        {
            let s = s.trim_end_matches('\n').to_string();
            if !s.is_empty() {
                return Ok(s);
            }
        }
    }
    if has("volee").await {
        return Ok("volee".into());
    }
    server
        .run_async(&["new-session", "-d", "-s", "volee", "-c", &o.cwd])
        .await?;
    Ok("volee".into())
}

/// Close a forgotten agent's pane if it is dead (remain-on-exit kept it for the user to read).
pub fn close_if_dead(socket: PathBuf, pane: String) {
    tokio::spawn(async move {
        let server = TmuxServer::new(socket);
        if let Ok(dead) = server
            .run_async(&["display-message", "-p", "-t", &pane, "#{pane_dead}"])
            .await
        {
            if dead.trim() == "1" {
                let _ = server.run_async(&["kill-pane", "-t", &pane]).await;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dead_values_parse() {
        assert_eq!(
            parse_dead("1:3:", 5),
            Some(ExitFact {
                at: 5,
                status: Some(3),
                signal: None
            })
        );
        assert_eq!(
            parse_dead("1::9", 5),
            Some(ExitFact {
                at: 5,
                status: None,
                signal: Some(9)
            })
        );
        assert_eq!(parse_dead("0::", 5), None);
        assert_eq!(parse_dead("", 5), None);
    }
}
