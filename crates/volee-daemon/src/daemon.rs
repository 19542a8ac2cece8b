//! The daemon: one actor that owns the registry, the tmux control connections and the clock.
//!
//! Every input — a client request, a control-mode notification, a timer — is handled on one task,
//! so the registry has exactly one writer and state changes are ordered. Client connections and
//! tmux connections are separate tasks that only pass messages.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};
use volee_core::{
    AgentRecord, ArbiterConfig, ExitFact, HookSignal, Millis, NewAgent, Observation, PromptMatch,
    Registry,
};
use volee_protocol::{
    AgentView, ErrorKind, HookEvent, Host, LaunchRequest, Origin, ProfileFit, Request, Response,
    PROTOCOL_VERSION,
};
use volee_tmux::connection::{ConnectionEvent, ControlConnection, SessionKey};
use volee_tmux::control::ControlEvent;
use volee_tmux::format::{command_line, fields_format, split_fields};
use volee_tmux::server::{TmuxError, TmuxServer};

use crate::config::Config;
use crate::paths::Paths;
use crate::persist::{self, Loaded};

/// Why the daemon could not run.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("a volee daemon is already running (pid {pid})")]
    AlreadyRunning { pid: String },
    #[error("could not set up {}", path.display())]
    Setup {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the generic profile's rules do not load")]
    Rules(#[source] volee_harness::RulesError),
    /// The runtime (or state) directory, or a file in it, is not the user's own.
    #[error("volee's directories are not safe to use")]
    Paths(#[source] crate::paths::PathError),
}

/// Name of the subscription that reports pane deaths (tmux 3.3a has no exit notification).
const DEAD_SUB: &str = "volee-dead";
/// How long after the last output the screen is read for a prompt.
const SCREEN_SETTLE_MS: u64 = 250;
/// At most one title-triggered screen read per agent in this long.
const TITLE_READ_MS: u64 = 500;
/// How long `volee stop` waits after SIGTERM before SIGKILL.
const STOP_GRACE_MS: u64 = 3000;

/// What the daemon persists besides the agents.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct DaemonFile {
    format: u32,
    agents: Vec<AgentRecord>,
    /// tmux servers where `volee tmux-init` ran: their status line gets pushed.
    #[serde(default)]
    tmux_servers: Vec<PathBuf>,
    /// Hook files volee placed in a harness's own directory (Grok), with their harness.
    #[serde(default)]
    hook_files: Vec<(PathBuf, String)>,
    /// `volee quiet`: no notifications until then (epoch ms); kept across daemon restarts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    quiet_until: Option<Millis>,
}

enum Msg {
    Request(Box<Request>, oneshot::Sender<Response>),
    Watch(String, mpsc::UnboundedSender<Response>),
    /// A pane's screen, read after the output of `output_at` settled.
    ScreenCaptured {
        id: String,
        text: String,
        output_at: Millis,
    },
    PaneStatus {
        id: String,
        value: String,
    },
    EscalateStop {
        id: String,
    },
    /// A listing source's background work (`sources`).
    Source(crate::sources::SourceMsg),
    /// What a zellij session's watch saw.
    Zellij(String, crate::zellij_host::ZellijMsg),
    /// A discovered agent's version, learnt off the actor (a native binary's `--version` can take
    /// seconds, longer on a harness's first run).
    VersionRead {
        id: String,
        version: String,
    },
    Shutdown,
}

/// Run the daemon until it is told to stop. Holds the lock file for its whole life.
pub async fn run(paths: Paths, config: Config) -> Result<(), DaemonError> {
    let setup = |path: &Path| {
        let path = path.to_path_buf();
        move |source| DaemonError::Setup { path, source }
    };
    paths.ensure().map_err(DaemonError::Paths)?;
    let mut lock_opts = std::fs::OpenOptions::new();
    lock_opts.create(true).truncate(false).write(true);
    let lock_file =
        crate::paths::open_private(&paths.lock_file(), lock_opts).map_err(DaemonError::Paths)?;
    let _lock =
        match nix::fcntl::Flock::lock(lock_file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
            Ok(lock) => lock,
            Err(_) => {
                return Err(DaemonError::AlreadyRunning {
                    pid: crate::client::read_pid(&paths)
                        .map(|p| p.to_string())
                        .unwrap_or_else(|| "unknown".into()),
                })
            }
        };
    // We hold the lock, so a temp file of a save whose writer is gone (killed mid-save) is stale.
    for dir in [&paths.state_dir, &paths.runtime_dir] {
        for path in persist::remove_stale_temp_files(dir) {
            tracing::info!("removed {}, left by a killed save", path.display());
        }
    }
    // We hold the lock, so any socket file left behind is stale.
    let socket = paths.socket();
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket).map_err(setup(&socket))?;
    set_mode(&socket, 0o600).map_err(setup(&socket))?;
    persist::write_atomic(
        &paths.pid_file(),
        format!("{}\n", std::process::id()).as_bytes(),
    )
    .map_err(|e| DaemonError::Setup {
        path: paths.pid_file(),
        source: std::io::Error::other(e.to_string()),
    })?;

    // Fail early and clearly if an embedded rules file does not compile.
    volee_harness::screen_rules("generic", false).map_err(DaemonError::Rules)?;
    let (tx, rx) = mpsc::unbounded_channel();
    let (conn_tx, conn_rx) = mpsc::unbounded_channel();
    let mut daemon = Daemon::new(paths.clone(), config, tx.clone(), conn_tx);
    daemon.load();
    daemon.replay_spool();
    tokio::spawn(accept_loop(listener, tx.clone()));
    daemon.startup_resync().await;
    daemon.run(rx, conn_rx).await;

    let _ = std::fs::remove_file(&socket);
    let _ = std::fs::remove_file(paths.pid_file());
    tracing::info!("daemon stopped");
    Ok(())
}

fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

async fn accept_loop(listener: UnixListener, tx: mpsc::UnboundedSender<Msg>) {
    let me = nix::unistd::getuid().as_raw();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        match stream.peer_cred() {
            Ok(cred) if cred.uid() == me => {
                tokio::spawn(serve_client(stream, tx.clone()));
            }
            Ok(cred) => tracing::warn!("refused a client of uid {}", cred.uid()),
            Err(e) => tracing::warn!("refused a client without credentials: {e}"),
        }
    }
}

/// Largest request line accepted (a launch carries the caller's environment).
const MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;

async fn serve_client(stream: UnixStream, tx: mpsc::UnboundedSender<Msg>) {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader)
            .take(MAX_REQUEST_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.len() > MAX_REQUEST_BYTES {
            let _ = write_response(&mut write, &user_error("request too large", vec![])).await;
            return;
        }
        let request: Request = match serde_json::from_slice(&line) {
            Ok(r) => r,
            Err(e) => {
                let resp = user_error(&format!("unreadable request: {e}"), vec![]);
                if write_response(&mut write, &resp).await.is_err() {
                    return;
                }
                continue;
            }
        };
        // A waiting client hears from us every KEEPALIVE_SECS, so it can tell a slow answer from
        // a stopped daemon.
        let every = Duration::from_secs(volee_protocol::KEEPALIVE_SECS);
        let mut keepalive = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        if let Request::Watch { id } = request {
            let (wtx, mut wrx) = mpsc::unbounded_channel();
            if tx.send(Msg::Watch(id, wtx)).is_err() {
                return;
            }
            loop {
                let resp = tokio::select! {
                    resp = wrx.recv() => match resp {
                        Some(resp) => resp,
                        None => return,
                    },
                    _ = keepalive.tick() => Response::KeepAlive,
                };
                if write_response(&mut write, &resp).await.is_err() {
                    return;
                }
            }
        }
        let shutdown = matches!(request, Request::Shutdown);
        let (rtx, mut rrx) = oneshot::channel();
        if tx.send(Msg::Request(Box::new(request), rtx)).is_err() {
            return;
        }
        let resp = loop {
            tokio::select! {
                resp = &mut rrx => match resp {
                    Ok(resp) => break resp,
                    Err(_) => return,
                },
                _ = keepalive.tick() => {
                    if write_response(&mut write, &Response::KeepAlive).await.is_err() {
                        return;
                    }
                }
            }
        };
        if write_response(&mut write, &resp).await.is_err() {
            return;
        }
        if shutdown {
            let _ = tx.send(Msg::Shutdown);
            return;
        }
    }
}

async fn write_response(
    write: &mut tokio::net::unix::OwnedWriteHalf,
    resp: &Response,
) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec(resp).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    write.write_all(&bytes).await
}

fn user_error(message: &str, hints: Vec<String>) -> Response {
    Response::Error {
        kind: ErrorKind::User,
        message: message.into(),
        hints,
    }
}

fn env_error(message: &str, hints: Vec<String>) -> Response {
    Response::Error {
        kind: ErrorKind::Environment,
        message: message.into(),
        hints,
    }
}

fn internal_error(message: &str) -> Response {
    Response::Error {
        kind: ErrorKind::Internal,
        message: message.into(),
        hints: vec!["see the daemon log: volee.log in the state directory".into()],
    }
}

fn tmux_error_response(e: &TmuxError) -> Response {
    match e {
        TmuxError::Missing => env_error("tmux is not installed", e.hint().into_iter().collect()),
        TmuxError::NoServer { socket } => env_error(
            &format!("no tmux server is running on {}", socket.display()),
            e.hint().into_iter().collect(),
        ),
        other => internal_error(&other.to_string()),
    }
}

/// The variables that say which zellij server a process talks to (and how volee finds zellij).
fn zellij_env(env: &[(String, String)]) -> Vec<(String, String)> {
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

/// The socket of the app server that lists an agent's sessions, for its harness and
/// environment (none for most harnesses).
fn listing_socket(harness: &str, env: &[(String, String)]) -> Option<String> {
    volee_harness::listing::app_server_socket(harness, env).map(|p| p.display().to_string())
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

fn zellij_error_response(e: &volee_zellij::ZellijError) -> Response {
    let hints = e.hint().into_iter().collect();
    match e {
        volee_zellij::ZellijError::NotInstalled => env_error(&e.to_string(), hints),
        volee_zellij::ZellijError::NoSession(_) => user_error(&e.to_string(), hints),
        _ => internal_error(&e.to_string()),
    }
}

/// The zellij binary for a launcher's environment: its `VOLEE_ZELLIJ`, else `zellij` on its
/// PATH, else on the daemon's.
fn zellij_binary(env: &[(String, String)]) -> Result<PathBuf, volee_zellij::ZellijError> {
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

/// Milliseconds since the epoch.
pub use volee_os::clock::now_ms;

/// Pane fields read on resync, separated by `\x1f` (titles may hold quotes).
const PANE_FIELDS: &[&str] = &[
    "pane_id",
    "pane_pid",
    "session_name",
    "window_id",
    "pane_dead",
    "pane_dead_status",
    "pane_dead_signal",
    "@volee-agent",
    "@volee-name",
    "@volee-harness",
    "pane_current_path",
    "pane_start_command",
    "window_activity",
];

struct PaneRow {
    pane: String,
    pid: Option<u32>,
    session: String,
    window: String,
    dead: bool,
    status: Option<i32>,
    signal: Option<i32>,
    agent: String,
    name: String,
    harness: String,
    path: String,
    start_command: String,
    /// Last activity of the pane's window, epoch seconds.
    activity: Option<u64>,
}

fn parse_pane_rows(text: &str) -> Vec<PaneRow> {
    text.lines()
        .filter_map(|line| {
            let f = split_fields(line.as_bytes());
            if f.len() < PANE_FIELDS.len() {
                return None;
            }
            Some(PaneRow {
                pane: f[0].clone(),
                pid: f[1].parse().ok(),
                session: f[2].clone(),
                window: f[3].clone(),
                dead: f[4] == "1",
                status: f[5].parse().ok(),
                signal: f[6].parse().ok(),
                agent: f[7].clone(),
                name: f[8].clone(),
                harness: f[9].clone(),
                path: f[10].clone(),
                start_command: f[11].clone(),
                activity: f[12].parse().ok(),
            })
        })
        .collect()
}

/// `dead:status:signal` as the subscription and `display-message` report it.
fn parse_dead(value: &str, at: Millis) -> Option<ExitFact> {
    let mut parts = value.trim().splitn(3, ':');
    let dead = parts.next()? == "1";
    let status = parts.next().and_then(|s| s.parse().ok());
    let signal = parts.next().and_then(|s| s.parse().ok());
    dead.then_some(ExitFact { at, status, signal })
}

const DEAD_FORMAT: &str = "#{pane_dead}:#{pane_dead_status}:#{pane_dead_signal}";

/// A submit key held back until the agent's pane settles.
struct PendingSubmit {
    /// Not before this (the typing time plus the profile's delay).
    not_before: Millis,
    /// Submitted by then whatever the pane does.
    deadline: Millis,
    /// Quiet time wanted after the typing and after the pane's latest output.
    settle: Millis,
    /// The typing time, then the pane's latest output.
    last_output: Millis,
    key: SubmitKey,
}

enum SubmitKey {
    Tmux(volee_tmux::connection::CommandSender, String),
    Zellij(volee_zellij::ZellijCli, u32, String),
}

impl PendingSubmit {
    fn due(&self) -> Millis {
        self.not_before
            .max(self.last_output + self.settle)
            .min(self.deadline)
    }

    fn fire(self) {
        match self.key {
            SubmitKey::Tmux(sender, line) => {
                let _ = sender.send(line);
            }
            SubmitKey::Zellij(cli, pane, key) => {
                tokio::spawn(async move {
                    if let Err(e) = cli.send_keys(pane, &key).await {
                        tracing::warn!("zellij send-keys terminal_{pane}: {e}");
                    }
                });
            }
        }
    }
}

struct Daemon {
    paths: Paths,
    config: Config,
    arbiter: ArbiterConfig,
    /// Compiled screen rules per (harness, measured version).
    rules: HashMap<(String, bool), volee_harness::RuleSet>,
    registry: Registry,
    tmux_servers: BTreeSet<PathBuf>,
    hook_files: BTreeMap<PathBuf, String>,
    conns: HashMap<SessionKey, ControlConnection>,
    conn_tx: mpsc::UnboundedSender<ConnectionEvent>,
    tx: mpsc::UnboundedSender<Msg>,
    watchers: Vec<(String, mpsc::UnboundedSender<Response>)>,
    /// The `last_output` value whose screen was already read, per agent.
    screen_checked: HashMap<String, Millis>,
    /// Until when a pane's output is the echo of text volee typed (between its paste and the
    /// Enter that follows after the profile's delay): not the agent's own activity.
    echo_until: HashMap<String, Millis>,
    /// Submit keys waiting for the pane to settle after volee typed ([`InputRules::settle_ms`]);
    /// the pane's output meanwhile is echo.
    pending_submits: HashMap<String, PendingSubmit>,
    /// Ids of the hook events seen lately: a hook whose answer came too late is spooled too.
    recent_hooks: RecentIds,
    /// Notifications: their rate limits, quiet mode, the status line's flash.
    limiter: crate::notify::Limiter,
    quiet_until: Option<Millis>,
    flash_until: Millis,
    flashing: bool,
    last_status: HashMap<PathBuf, String>,
    /// When `/proc` was last scanned for harness processes started outside volee.
    last_scan: Millis,
    process_rules: Vec<volee_procscan::ProcessRule>,
    /// Repeated `/proc` scans (old processes that are no candidates are re-read in turn).
    scanner: volee_procscan::Scanner,
    /// What the last scan saw of each discovered agent's process: its start time (with the pid,
    /// it tells that process from a later one that got the same pid), launcher and terminal.
    discovered: HashMap<String, crate::discovery::Seen>,
    /// When each agent's screen was last read because its title changed.
    title_read_at: HashMap<String, Millis>,
    /// How often a dead pane without a status was asked again, per agent.
    exit_retries: HashMap<String, u32>,
    /// The harnesses' own reports of their state.
    sources: crate::sources::Sources,
    /// One watch per zellij session that holds live agents.
    zellij: HashMap<String, crate::zellij_host::ZellijWatch>,
    zellij_tx: mpsc::UnboundedSender<(String, crate::zellij_host::ZellijMsg)>,
    /// The last screen text of each zellij agent (zellij pushes screens; tmux is asked).
    zellij_screens: HashMap<String, String>,
    /// The status line must be drawn again though no agent changed (a flash ended, quiet).
    status_dirty: bool,
    shutting_down: bool,
}

impl Daemon {
    fn new(
        paths: Paths,
        config: Config,
        tx: mpsc::UnboundedSender<Msg>,
        conn_tx: mpsc::UnboundedSender<ConnectionEvent>,
    ) -> Daemon {
        let arbiter = ArbiterConfig {
            working_window_ms: config.working_window.as_millis() as u64,
        };
        let (zellij_tx, mut zellij_rx) = mpsc::unbounded_channel();
        let forward = tx.clone();
        tokio::spawn(async move {
            while let Some((session, msg)) = zellij_rx.recv().await {
                if forward.send(Msg::Zellij(session, msg)).is_err() {
                    break;
                }
            }
        });
        let source_tx = tx.clone();
        let sources = crate::sources::Sources::new(std::sync::Arc::new(move |msg| {
            let _ = source_tx.send(Msg::Source(msg));
        }));
        Daemon {
            sources,
            zellij: HashMap::new(),
            zellij_tx,
            zellij_screens: HashMap::new(),
            paths,
            config,
            arbiter,
            rules: HashMap::new(),
            registry: Registry::default(),
            tmux_servers: BTreeSet::new(),
            hook_files: BTreeMap::new(),
            conns: HashMap::new(),
            conn_tx,
            tx,
            watchers: Vec::new(),
            screen_checked: HashMap::new(),
            echo_until: HashMap::new(),
            pending_submits: HashMap::new(),
            recent_hooks: RecentIds::new(4096),
            limiter: crate::notify::Limiter::default(),
            quiet_until: None,
            flash_until: 0,
            flashing: false,
            last_status: HashMap::new(),
            exit_retries: HashMap::new(),
            title_read_at: HashMap::new(),
            last_scan: 0,
            process_rules: crate::discovery::rules(),
            scanner: volee_procscan::Scanner::new(volee_procscan::ProcRoot::default()),
            discovered: HashMap::new(),
            status_dirty: false,
            shutting_down: false,
        }
    }

    fn load(&mut self) {
        match persist::load_json::<DaemonFile>(&self.paths.registry(), now_ms()) {
            Ok(Loaded::Ok(file)) => {
                self.registry = Registry::from_file(volee_core::RegistryFile {
                    format: file.format,
                    agents: file.agents,
                });
                self.tmux_servers = file.tmux_servers.into_iter().collect();
                self.hook_files = file.hook_files.into_iter().collect();
                self.quiet_until = file.quiet_until.filter(|u| *u > now_ms());
                tracing::info!("loaded {} agents", self.registry.len());
                self.drop_foreign_restored();
            }
            Ok(Loaded::Missing) => {}
            Ok(Loaded::Corrupt { kept_as, error }) => {
                tracing::error!(
                    "agents.json was corrupt ({error}); kept as {}; rebuilding from tmux",
                    kept_as.display()
                );
            }
            Err(e) => tracing::error!("could not read the registry: {e}"),
        }
    }

    /// A discovered agent restored from the registry whose pid is now another user's process (or
    /// no process) is not that agent any more: its process is gone. Checked at once, before any
    /// request could signal that pid.
    fn drop_foreign_restored(&mut self) {
        let root = self.scanner.root().clone();
        let uid = nix::unistd::getuid().as_raw();
        let now = now_ms();
        let foreign: Vec<String> = self
            .registry
            .iter()
            .filter(|a| a.origin == Origin::Discovered && !a.is_ended())
            .filter(|a| {
                !a.pid
                    .and_then(|pid| root.read(pid))
                    .is_some_and(|p| volee_procscan::owned_by(&p, uid))
            })
            .map(|a| a.id.clone())
            .collect();
        for id in foreign {
            tracing::info!(
                "restored agent {id}: pid {:?} is no longer the user's process",
                self.registry.get(&id).and_then(|a| a.pid)
            );
            self.registry
                .observe(&id, Observation::ProcessGone { at: now });
            self.registry.reevaluate(&id, now, &self.arbiter);
        }
    }

    /// Is a discovered agent's stored pid still its process? Pids are reused: the pid must be a
    /// process of the user's (real and effective uid), started when the one found was (when that
    /// is known: agents restored from the registry), and of the agent's harness. Launched agents
    /// are volee's own panes' processes and always count.
    fn still_its_process(&self, id: &str) -> bool {
        let Some(agent) = self.registry.get(id) else {
            return false;
        };
        if agent.origin != Origin::Discovered {
            return true;
        }
        let Some(p) = agent.pid.and_then(|pid| self.scanner.root().read(pid)) else {
            return false;
        };
        if !volee_procscan::owned_by(&p, nix::unistd::getuid().as_raw()) {
            return false;
        }
        match self.discovered.get(id) {
            Some(seen) => p.stat.start_time == seen.start_time,
            None => self
                .process_rules
                .iter()
                .any(|r| r.harness == agent.harness && volee_procscan::matches(r, &p)),
        }
    }

    /// The discovered agent's pid is no longer its process: it ended, "process gone".
    fn end_vanished(&mut self, id: &str) {
        let now = now_ms();
        if let Some(a) = self.registry.get(id) {
            tracing::info!("agent {id}: pid {:?} is no longer its process", a.pid);
        }
        self.registry
            .observe(id, Observation::ProcessGone { at: now });
        self.registry.reevaluate(id, now, &self.arbiter);
    }

    fn save(&mut self) {
        let file = DaemonFile {
            format: volee_core::registry::REGISTRY_FORMAT,
            agents: self.registry.to_file().agents,
            tmux_servers: self.tmux_servers.iter().cloned().collect(),
            hook_files: self
                .hook_files
                .iter()
                .map(|(p, h)| (p.clone(), h.clone()))
                .collect(),
            quiet_until: self.quiet_until.filter(|u| *u > now_ms()),
        };
        match persist::save_json(&self.paths.registry(), &file) {
            Ok(()) => self.registry.mark_saved(),
            Err(e) => tracing::error!("could not save the registry: {e}"),
        }
    }

    async fn run(
        &mut self,
        mut rx: mpsc::UnboundedReceiver<Msg>,
        mut conn_rx: mpsc::UnboundedReceiver<ConnectionEvent>,
    ) {
        let mut housekeeping = tokio::time::interval(Duration::from_secs(60));
        let mut sigterm =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        loop {
            self.flush().await;
            if self.shutting_down {
                break;
            }
            let sleep = self
                .next_deadline()
                .map(|at| Duration::from_millis(at.saturating_sub(now_ms())))
                .unwrap_or(Duration::from_secs(3600));
            tokio::select! {
                msg = rx.recv() => match msg {
                    Some(msg) => self.on_msg(msg).await,
                    None => break,
                },
                Some(event) = conn_rx.recv() => self.on_connection_event(event).await,
                _ = tokio::time::sleep(sleep) => {
                    self.on_timer();
                    if self
                        .config
                        .discovery_interval
                        .is_some_and(|i| now_ms() >= self.last_scan + i.as_millis() as u64)
                    {
                        self.rescan(false).await;
                    }
                }
                _ = housekeeping.tick() => self.prune(),
                _ = async { match sigterm.as_mut() { Some(s) => { s.recv().await; } None => std::future::pending().await } } => {
                    tracing::info!("SIGTERM");
                    break;
                }
            }
        }
        if self.registry.is_unsaved() {
            self.save();
        }
        self.conns.clear();
    }

    /// The earliest time a decision may change without a new observation.
    fn next_deadline(&self) -> Option<Millis> {
        let scan = self
            .config
            .discovery_interval
            .map(|i| self.last_scan + i.as_millis() as u64);
        let agents = self
            .registry
            .iter()
            .filter(|a| !a.is_ended())
            .flat_map(|a| {
                let screen = a.signals().last_output.and_then(|out| {
                    (self.screen_checked.get(&a.id) != Some(&out)).then_some(out + SCREEN_SETTLE_MS)
                });
                [a.decision.recheck_at, screen]
            })
            .flatten()
            .min();
        let submits = self.pending_submits.values().map(PendingSubmit::due).min();
        let summary = self.limiter.summary_due(&self.config.notify);
        let flash = self.flashing.then_some(self.flash_until);
        let listing = self.sources.next_poll(&self.registry);
        [
            agents,
            scan,
            submits,
            summary,
            flash,
            listing,
            self.quiet_until,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn on_timer(&mut self) {
        let now = now_ms();
        let due: Vec<String> = self
            .pending_submits
            .iter()
            .filter(|(_, p)| now >= p.due())
            .map(|(id, _)| id.clone())
            .collect();
        for id in due {
            if let Some(p) = self.pending_submits.remove(&id) {
                p.fire();
            }
        }
        self.sources.poll(&mut self.registry, now);
        let due: Vec<(String, Millis)> = self
            .registry
            .iter()
            .filter(|a| !a.is_ended())
            .filter_map(|a| {
                let out = a.signals().last_output?;
                (self.screen_checked.get(&a.id) != Some(&out) && now >= out + SCREEN_SETTLE_MS)
                    .then(|| (a.id.clone(), out))
            })
            .collect();
        for (id, out) in due {
            self.screen_checked.insert(id.clone(), out);
            self.capture_screen(&id, out);
        }
    }

    /// One pass over `/proc` for harness processes volee did not launch: new ones are recorded
    /// with their host (a tmux pane is then watched like a launched agent's), vanished ones end
    /// as `stopped`. At steady state this reads /proc only; `tmux list-panes -a` runs once per
    /// server and only when a new process must be placed.
    async fn rescan(&mut self, full: bool) {
        let now = now_ms();
        self.last_scan = now;
        let root = self.scanner.root().clone();
        let rules = &self.process_rules;
        if full {
            self.scanner.forget();
        }
        let procs = self
            .scanner
            .scan(|s| volee_procscan::could_match(rules, &s.comm));
        let parents = crate::discovery::parents(&procs);
        let mut launched: HashSet<u32> = self
            .registry
            .iter()
            .filter(|a| a.origin == Origin::Launched && !a.is_ended())
            .filter_map(|a| a.pid)
            .collect();
        // The daemon's own children are never agents: a discovered agent's `--version` run
        // (native `codex --version` looks like the agent) found as a new agent asked its
        // version again, and so on — hundreds of processes on a loaded machine (seen in CI).
        launched.insert(std::process::id());
        // Only the user's own processes: another user's `claude` is their program, not an agent.
        let uid = nix::unistd::getuid().as_raw();
        let found: Vec<volee_procscan::Found> =
            volee_procscan::find_agents(&procs, &self.process_rules, uid)
                .into_iter()
                .filter(|f| !crate::discovery::is_launched(f, &parents, &launched))
                .filter(|f| {
                    // A harness with its own server spawns helper processes of the same program.
                    !volee_harness::listing::has_own_server(&f.harness)
                        || !procs.iter().any(|p| {
                            p.stat.pid == f.pid
                                && volee_harness::listing::not_an_agent(
                                    &f.harness,
                                    &p.argv,
                                    &root.environ(f.pid).unwrap_or_default(),
                                )
                        })
                })
                .collect();
        // A harness may go on in another process: a launcher chain still growing when a scan
        // saw it (Qwen's launcher starts a second and then a third node process), or a relaunch
        // of its inner process (Gemini and Qwen restart it for more heap or new settings). The
        // agent follows it, same id, instead of ending and being found again as a new one.
        let by_pid: HashMap<u32, &volee_procscan::Proc> =
            procs.iter().map(|p| (p.stat.pid, p)).collect();
        let now_ticks = self.scanner.last_stats().now_ticks;
        let mut taken: HashSet<u32> = self
            .registry
            .iter()
            .filter(|a| a.origin == Origin::Discovered && !a.is_ended())
            .filter_map(|a| a.pid)
            .collect();
        let live_discovered: Vec<(String, String, u32)> = self
            .registry
            .iter()
            .filter(|a| a.origin == Origin::Discovered && !a.is_ended())
            .filter_map(|a| Some((a.id.clone(), a.harness.clone(), a.pid?)))
            .collect();
        for (id, harness, pid) in live_discovered {
            let seen = self.discovered.get(&id);
            let next = crate::discovery::successor(
                &harness, pid, seen, &found, &by_pid, &taken, now_ticks,
            );
            let Some(f) = next else {
                // Still its process: remember how it looks now (restored agents start unknown).
                if let Some(p) = found
                    .iter()
                    .find(|f| f.pid == pid && f.harness == harness)
                    .and(by_pid.get(&pid))
                {
                    let start_time = seen.map_or(p.stat.start_time, |s| s.start_time);
                    let wrappers = found
                        .iter()
                        .find(|f| f.pid == pid)
                        .map(|f| f.wrappers.clone())
                        .unwrap_or_default();
                    self.discovered.insert(
                        id.clone(),
                        crate::discovery::Seen {
                            start_time,
                            wrappers,
                            tty_nr: p.stat.tty_nr,
                        },
                    );
                }
                continue;
            };
            tracing::info!(
                "agent {id} moves from pid {pid} to pid {} (its harness went on there)",
                f.pid
            );
            taken.remove(&pid);
            taken.insert(f.pid);
            if let Some(p) = by_pid.get(&f.pid) {
                self.discovered.insert(
                    id.clone(),
                    crate::discovery::Seen {
                        start_time: p.stat.start_time,
                        wrappers: f.wrappers.clone(),
                        tty_nr: p.stat.tty_nr,
                    },
                );
            }
            self.registry.edit(&id, |agent| {
                agent.pid = Some(f.pid);
                // Published per process: ask again for the new one.
                agent.session_id = None;
                // Status files are named by pid (`sessions/<pid>.json`).
                agent.status_file = agent.status_file.as_deref().and_then(|status| {
                    let dir = Path::new(status).parent()?;
                    Some(dir.join(format!("{}.json", f.pid)).display().to_string())
                });
            });
        }
        // Discovered agents whose process is gone.
        let gone: Vec<String> = self
            .registry
            .iter()
            .filter(|a| {
                a.origin == Origin::Discovered
                    && !a.is_ended()
                    && !found
                        .iter()
                        .any(|f| Some(f.pid) == a.pid && f.harness == a.harness)
            })
            .map(|a| a.id.clone())
            .collect();
        for id in gone {
            self.registry
                .observe(&id, Observation::ProcessGone { at: now });
        }
        let live: HashSet<&str> = self
            .registry
            .iter()
            .filter(|a| a.origin == Origin::Discovered && a.signals().process_gone.is_none())
            .map(|a| a.id.as_str())
            .collect();
        self.discovered.retain(|id, _| live.contains(id.as_str()));
        // A harness may publish its session id after it started (Qwen and Grok write theirs at
        // the first prompt; Codex opens its rollout file then): ask again for those without.
        let unnamed: Vec<(String, String, u32)> = self
            .registry
            .iter()
            .filter(|a| a.origin == Origin::Discovered && !a.is_ended() && a.session_id.is_none())
            .filter_map(|a| Some((a.id.clone(), a.harness.clone(), a.pid?)))
            .collect();
        for (id, harness, pid) in unnamed {
            let env = root.environ(pid).unwrap_or_default();
            if let Some(session) = published_session_id(&root, &harness, pid, &env) {
                tracing::info!("agent {id} published its session id {session}");
                self.registry.edit(&id, |a| a.session_id = Some(session));
            }
        }
        let known: HashSet<u32> = self
            .registry
            .iter()
            .filter(|a| a.origin == Origin::Discovered && !a.is_ended())
            .filter_map(|a| a.pid)
            .collect();
        let new: Vec<&volee_procscan::Found> =
            found.iter().filter(|f| !known.contains(&f.pid)).collect();
        if new.is_empty() {
            return;
        }
        let mut panes_by_socket: HashMap<PathBuf, Vec<crate::discovery::PaneInfo>> = HashMap::new();
        for f in new {
            let Some(proc_) = by_pid.get(&f.pid) else {
                continue;
            };
            let env = root.environ(f.pid).unwrap_or_default();
            let var = |k: &str| env.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
            let tty = volee_procscan::pts_path(proc_.stat.tty_nr);
            let chain = crate::discovery::ancestry(f.pid, &parents);
            let mut host = match (&tty, var("ZELLIJ_SESSION_NAME"), var("ZELLIJ_PANE_ID")) {
                (_, Some(session), Some(pane)) => Host::Zellij {
                    session,
                    tab: 0,
                    pane: format!("terminal_{pane}"),
                },
                (Some(tty), _, _) => Host::Tty { tty: tty.clone() },
                _ => Host::None,
            };
            if let Some(tmux) = var("TMUX") {
                let socket = volee_tmux::connection::default_socket(
                    Some(&tmux),
                    None,
                    nix::unistd::getuid().as_raw(),
                );
                if !panes_by_socket.contains_key(&socket) {
                    let panes = list_all_panes(&socket).await;
                    panes_by_socket.insert(socket.clone(), panes);
                }
                if let Some(p) = panes_by_socket
                    .get(&socket)
                    .and_then(|panes| crate::discovery::pane_of(&chain, tty.as_deref(), panes))
                {
                    host = Host::Tmux {
                        socket: socket.display().to_string(),
                        session: p.session.clone(),
                        window: p.window.clone(),
                        pane: p.pane.clone(),
                    };
                }
            }
            let Some(id) = self.registry.new_id(&volee_os::random::unique_bytes(64), 4) else {
                continue;
            };
            let name = self
                .registry
                .default_name(&[format!("{}-{}", f.harness, f.pid)]);
            let cwd = root
                .cwd(f.pid)
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            // The installed version decides the screen rules (profile_fit), as at launch. Learnt
            // off the actor (a native binary's `--version` can take seconds: Copilot unpacks
            // itself on its first run); generic rules until it is known.
            {
                let ask = VersionAsk {
                    root: root.clone(),
                    pid: f.pid,
                    uid: nix::unistd::getuid().as_raw(),
                    start_time: proc_.stat.start_time,
                    argv: proc_.argv.clone(),
                    package: volee_harness::profile(&f.harness).and_then(|p| p.package),
                    home: var("HOME"),
                };
                let (tx, id) = (self.tx.clone(), id.clone());
                tokio::spawn(async move {
                    if let Some(version) = learn_version(ask).await {
                        let _ = tx.send(Msg::VersionRead { id, version });
                    }
                });
            }
            let version = None;
            let fit = ProfileFit::Generic;
            let mut record = AgentRecord::launched(
                NewAgent {
                    id: id.clone(),
                    name,
                    harness: f.harness.clone(),
                    command: proc_.argv.clone(),
                    cwd,
                    host: host.clone(),
                    harness_version: version,
                    profile_fit: fit,
                    session_id: None,
                },
                // Found, not started now: no "just launched" working window.
                now.saturating_sub(self.arbiter.working_window_ms),
                &self.arbiter,
            );
            record.origin = Origin::Discovered;
            record.pid = Some(f.pid);
            self.discovered.insert(
                id.clone(),
                crate::discovery::Seen {
                    start_time: proc_.stat.start_time,
                    wrappers: f.wrappers.clone(),
                    tty_nr: proc_.stat.tty_nr,
                },
            );
            record.worktree = crate::worktree::linked_worktree(Path::new(&record.cwd));
            record.status_file = var("HOME")
                .and_then(|home| {
                    volee_harness::listing::status_file(
                        &f.harness,
                        std::path::Path::new(&home),
                        f.pid,
                    )
                })
                .map(|p| p.display().to_string());
            record.listing_socket = listing_socket(&f.harness, &env);
            // A zellij pane is watched like a launched agent's, with the process's own zellij
            // variables (its server may use another socket directory than the daemon's).
            if matches!(host, Host::Zellij { .. }) {
                record.host_env = zellij_env(&env);
            }
            // Identity from what the harness publishes, never from the newest transcript file.
            record.session_id = published_session_id(&root, &f.harness, f.pid, &env);
            tracing::info!(
                "discovered {} agent {id} (pid {}) at {:?}",
                f.harness,
                f.pid,
                host
            );
            self.registry.insert(record);
            let record_id = id.clone();
            if let Host::Tmux {
                socket, session, ..
            } = &host
            {
                let key = SessionKey {
                    socket: socket.into(),
                    session: session.clone(),
                };
                match self.ensure_connection(&key).await {
                    // Found with its screen already drawn (a prompt waiting for the user).
                    Ok(()) => self.read_initial_screen(&record_id, now),
                    Err(e) => {
                        tracing::warn!(
                            "could not watch discovered agent's session {session:?}: {e}"
                        )
                    }
                }
            }
            if let Host::Zellij { session, .. } = &host {
                let env = self
                    .registry
                    .iter()
                    .find(|a| a.pid == Some(f.pid) && a.origin == Origin::Discovered)
                    .map(|a| a.host_env.clone())
                    .unwrap_or_default();
                if self.ensure_zellij(session, &env).is_err() {
                    tracing::warn!("could not watch discovered agent's zellij session {session:?}");
                } else {
                    self.update_zellij_watches();
                }
            }
        }
    }

    /// Ask tmux for the pane's screen without blocking the actor; the text comes back as a message.
    fn capture_screen(&self, id: &str, output_at: Millis) {
        // zellij pushes its screens (plugin render reports, `zellij subscribe`).
        if let Some(text) = self.zellij_screens.get(id) {
            let _ = self.tx.send(Msg::ScreenCaptured {
                id: id.to_string(),
                output_at,
                text: text.clone(),
            });
            return;
        }
        let Some((conn, pane)) = self.conn_of(id) else {
            return;
        };
        let Ok(line) = command_line(&["capture-pane", "-p", "-J", "-t", &pane]) else {
            return;
        };
        let Ok(reply) = conn.send(line) else { return };
        let tx = self.tx.clone();
        let id = id.to_string();
        tokio::spawn(async move {
            if let Ok(reply) = reply.await {
                if reply.ok {
                    let _ = tx.send(Msg::ScreenCaptured {
                        id,
                        output_at,
                        text: reply.text(),
                    });
                }
            }
        });
    }

    /// Read a pane's dead status now (after a stop) instead of waiting for the 1 s subscription.
    fn probe_pane(&self, id: &str, after: Duration) {
        let Some((conn, pane)) = self.conn_of(id) else {
            return;
        };
        let Ok(line) = command_line(&["display-message", "-p", "-t", &pane, DEAD_FORMAT]) else {
            return;
        };
        let tx = self.tx.clone();
        let id = id.to_string();
        let sender = conn.handle();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            let Ok(rx) = sender.send(line) else { return };
            if let Ok(reply) = rx.await {
                if reply.ok {
                    let _ = tx.send(Msg::PaneStatus {
                        id,
                        value: reply.text(),
                    });
                }
            }
        });
    }

    fn conn_of(&self, id: &str) -> Option<(&ControlConnection, String)> {
        let agent = self.registry.get(id)?;
        let Host::Tmux {
            socket,
            session,
            pane,
            ..
        } = &agent.host
        else {
            return None;
        };
        let key = SessionKey {
            socket: socket.into(),
            session: session.clone(),
        };
        self.conns.get(&key).map(|c| (c, pane.clone()))
    }

    fn agent_by_pane(&self, socket: &Path, pane_id: &str) -> Option<String> {
        self.registry
            .iter()
            .filter(|a| !a.is_ended())
            .find(|a| {
                matches!(&a.host, Host::Tmux { socket: s, pane, .. } if Path::new(s) == socket && pane == pane_id)
            })
            .map(|a| a.id.clone())
    }

    async fn on_msg(&mut self, msg: Msg) {
        match msg {
            Msg::Request(req, reply) => {
                let resp = self.on_request(*req).await;
                let _ = reply.send(resp);
            }
            Msg::Watch(query, tx) => match self.registry.resolve(&query) {
                Ok(agent) => {
                    let id = agent.id.clone();
                    let _ = tx.send(Response::Agent {
                        agent: agent.view(),
                    });
                    self.watchers.push((id, tx));
                }
                Err(e) => {
                    let _ = tx.send(user_error(&e.to_string(), vec![]));
                }
            },
            Msg::ScreenCaptured {
                id,
                text,
                output_at,
            } => {
                let (title_at, title) = self
                    .registry
                    .get(&id)
                    .and_then(|a| a.signals().title.clone())
                    .unwrap_or_default();
                let Some((harness, measured)) = self
                    .registry
                    .get(&id)
                    .map(|a| (a.harness.clone(), a.profile_fit == ProfileFit::Measured))
                else {
                    return;
                };
                let found = self.rules_for(&harness, measured).classify(&text, &title);
                if let Some(m) = found {
                    // Dated by the output the screen shows, not by when it was read: a hook
                    // that came in between is newer than this screen. A title rule is as old
                    // as the title (Gemini's "Working…" title outlives the permission hook by
                    // more than a second under load).
                    let at = if m.from_title {
                        title_at.min(output_at)
                    } else {
                        output_at
                    };
                    self.registry.observe(
                        &id,
                        Observation::Screen(PromptMatch {
                            at,
                            rule: m.rule,
                            text: m.text,
                            state: m.state,
                        }),
                    );
                }
            }
            Msg::PaneStatus { id, value } => {
                if let Some(exit) = parse_dead(&value, now_ms()) {
                    self.record_exit(&id, exit);
                }
            }
            Msg::EscalateStop { id } => {
                if !self.still_its_process(&id) {
                    if self.registry.get(&id).is_some_and(|a| !a.is_ended()) {
                        self.end_vanished(&id);
                    }
                } else if let Some(agent) = self.registry.get(&id) {
                    if !agent.is_ended() {
                        if let Some(pid) = agent.pid {
                            tracing::info!("agent {id} ignored SIGTERM; sending SIGKILL");
                            signal_group(pid, Signal::SIGKILL);
                        }
                        self.probe_pane(&id, Duration::from_millis(100));
                    }
                }
            }
            Msg::Source(msg) => self.sources.on_msg(&mut self.registry, msg, now_ms()),
            Msg::Zellij(session, msg) => self.on_zellij(&session, msg),
            Msg::VersionRead { id, version } => self.on_version(&id, version),
            Msg::Shutdown => self.shutting_down = true,
        }
    }

    /// A discovered agent's version: its profile fit, hence its screen rules, from now on.
    fn on_version(&mut self, id: &str, version: String) {
        let Some(a) = self
            .registry
            .get(id)
            .filter(|a| a.harness_version.is_none())
        else {
            return;
        };
        let fit = match volee_harness::profile(&a.harness).and_then(|p| p.measured) {
            Some(range) if range.contains(&version) => ProfileFit::Measured,
            Some(_) => ProfileFit::OtherVersion,
            None => ProfileFit::Generic,
        };
        self.registry.edit(id, |a| {
            a.profile_fit = fit;
            a.harness_version = Some(version);
        });
        self.screen_checked.remove(id);
    }

    /// The live agent in terminal pane `pane` of zellij session `session`.
    fn zellij_agent(&self, session: &str, pane: u32) -> Option<String> {
        let want = format!("terminal_{pane}");
        self.registry
            .iter()
            .find(|a| {
                !a.is_ended()
                    && matches!(&a.host, Host::Zellij { session: s, pane: p, .. } if s == session && *p == want)
            })
            .map(|a| a.id.clone())
    }

    /// One observation of a zellij session: from the plugin's stream, or the headless fallback.
    fn on_zellij(&mut self, session: &str, msg: crate::zellij_host::ZellijMsg) {
        use crate::zellij_host::ZellijMsg;
        use volee_protocol::zellij::PluginEvent;
        let now = now_ms();
        match msg {
            ZellijMsg::Event(PluginEvent::Hello { plugin_id, .. }) => {
                tracing::info!("zellij session {session:?}: volee plugin {plugin_id} connected");
                // Tell it which agents to show and watch.
                if let Some(w) = self.zellij.get_mut(session) {
                    w.last_agents.clear();
                }
                self.status_dirty = true;
            }
            ZellijMsg::Event(PluginEvent::Mismatch { .. }) => {}
            ZellijMsg::Event(PluginEvent::Panes { panes }) => {
                for p in panes {
                    self.zellij_pane(session, p.id, &p.title, p.exited, p.exit_status, p.tab, now);
                }
            }
            ZellijMsg::Panes(listed) => {
                let alive: HashSet<String> = listed
                    .iter()
                    .filter(|p| !p.is_plugin)
                    .map(|p| format!("terminal_{}", p.id))
                    .collect();
                for p in listed.iter().filter(|p| !p.is_plugin) {
                    self.zellij_pane(
                        session,
                        p.id,
                        &p.title,
                        p.exited,
                        p.exit_status,
                        p.tab_position,
                        now,
                    );
                }
                // A pane that is no longer listed was closed.
                let closed: Vec<String> = self
                    .registry
                    .iter()
                    .filter(|a| {
                        matches!(&a.host, Host::Zellij { session: s, pane, .. }
                            if s == session && !alive.contains(pane))
                    })
                    .map(|a| a.id.clone())
                    .collect();
                for id in closed {
                    self.registry
                        .observe(&id, Observation::ProcessGone { at: now });
                }
            }
            ZellijMsg::Event(PluginEvent::Screen { pane, lines }) => {
                self.zellij_screen(session, pane, lines, true, now)
            }
            ZellijMsg::Screen {
                pane,
                lines,
                activity,
            } => self.zellij_screen(session, pane, lines, activity, now),
            ZellijMsg::Event(PluginEvent::Bell { panes, .. }) => {
                for pane in panes {
                    if let Some(id) = self.zellij_agent(session, pane) {
                        self.registry.observe(&id, Observation::Bell { at: now });
                    }
                }
            }
            ZellijMsg::Event(PluginEvent::Closed { pane }) => {
                if let Some(id) = self.zellij_agent(session, pane) {
                    if self
                        .registry
                        .get(&id)
                        .is_some_and(|a| a.signals().exit.is_none())
                    {
                        self.registry
                            .observe(&id, Observation::ProcessGone { at: now });
                    }
                }
            }
            ZellijMsg::SessionGone => {
                tracing::info!("zellij session {session:?} is gone");
                let gone: Vec<String> = self
                    .registry
                    .iter()
                    .filter(|a| matches!(&a.host, Host::Zellij { session: s, .. } if s == session))
                    .map(|a| a.id.clone())
                    .collect();
                for id in gone {
                    self.registry
                        .observe(&id, Observation::ProcessGone { at: now });
                }
                self.zellij.remove(session);
            }
        }
    }

    /// A zellij pane's title, exit and tab.
    #[allow(clippy::too_many_arguments)]
    fn zellij_pane(
        &mut self,
        session: &str,
        pane: u32,
        title: &str,
        exited: bool,
        exit_status: Option<i32>,
        tab_position: usize,
        now: Millis,
    ) {
        let Some(id) = self.zellij_agent(session, pane) else {
            return;
        };
        let Some(a) = self.registry.get(&id) else {
            return;
        };
        let position = tab_position as u32;
        if matches!(&a.host, Host::Zellij { tab, .. } if *tab != position) {
            self.registry.edit(&id, |a| {
                if let Host::Zellij { tab, .. } = &mut a.host {
                    *tab = position;
                }
            });
        }
        let title = Observation::Title {
            at: now,
            title: title.to_string(),
        };
        if self.registry.observe(&id, title) {
            // Titles carry state for some harnesses: read the screen again.
            self.screen_checked.remove(&id);
        }
        if exited {
            let exit = ExitFact {
                at: now,
                status: exit_status,
                signal: None,
            };
            self.registry.observe(&id, Observation::Exit(exit));
        }
    }

    /// A zellij pane's screen text, and (when it is new output) its activity.
    fn zellij_screen(
        &mut self,
        session: &str,
        pane: u32,
        lines: Vec<String>,
        activity: bool,
        now: Millis,
    ) {
        let Some(id) = self.zellij_agent(session, pane) else {
            return;
        };
        self.zellij_screens.insert(id.clone(), lines.join("\n"));
        if let Some(p) = self.pending_submits.get_mut(&id).filter(|_| activity) {
            p.last_output = now;
            return;
        }
        if !activity {
            // A subscription's first delivery (`is_initial`): the screen as it already is.
            self.read_initial_screen(&id, now);
            return;
        }
        if self.echo_until.get(&id).is_some_and(|until| now < *until) {
            return;
        }
        self.registry.observe(&id, Observation::Output { at: now });
        if self.watchers.iter().any(|(w, _)| *w == id) {
            self.registry.touch(&id);
        }
    }

    /// Watch zellij session `session` (with the launcher's zellij environment), once.
    fn ensure_zellij(
        &mut self,
        session: &str,
        env: &[(String, String)],
    ) -> Result<(), Box<Response>> {
        if self.zellij.contains_key(session) {
            return Ok(());
        }
        let bin = zellij_binary(env).map_err(|e| Box::new(zellij_error_response(&e)))?;
        let cli = volee_zellij::ZellijCli::new(bin, session).with_env(env);
        let watch = crate::zellij_host::ZellijWatch::start(cli, self.zellij_tx.clone());
        self.zellij.insert(session.to_string(), watch);
        self.update_zellij_watches();
        Ok(())
    }

    /// Each watch's set of agent panes; watches of sessions without live agents end.
    fn update_zellij_watches(&mut self) {
        let mut panes: HashMap<String, BTreeSet<u32>> = HashMap::new();
        for a in self.registry.iter().filter(|a| !a.is_ended()) {
            if let Host::Zellij { session, pane, .. } = &a.host {
                if let Some(n) = volee_protocol::zellij::parse_terminal_id(pane) {
                    panes.entry(session.clone()).or_default().insert(n);
                }
            }
        }
        self.zellij
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

    /// Send each zellij session's plugins the agents to show and the panes to watch, when that
    /// changed (a short `zellij pipe` process per change; changes made while one is under way
    /// are sent as one).
    fn push_zellij_agents(&mut self) {
        if self.zellij.is_empty() {
            return;
        }
        let views: Vec<AgentView> = self.registry.iter().map(|a| a.view()).collect();
        for (session, watch) in self.zellij.iter_mut() {
            if !watch.plugin_alive.load(std::sync::atomic::Ordering::SeqCst) {
                continue;
            }
            let watch_panes: Vec<u32> = views
                .iter()
                .filter(|v| !v.state.is_final())
                .filter_map(|v| match &v.host {
                    Host::Zellij {
                        session: s, pane, ..
                    } if s == session => volee_protocol::zellij::parse_terminal_id(pane),
                    _ => None,
                })
                .collect();
            let command = volee_protocol::zellij::PluginCommand::Agents {
                version: volee_protocol::zellij::PIPE_VERSION,
                agents: views.clone(),
                watch: watch_panes,
            };
            let Ok(json) = serde_json::to_string(&command) else {
                continue;
            };
            if json == watch.last_agents {
                continue;
            }
            watch.last_agents = json;
            watch.send_agents(command);
        }
    }

    /// The screen rules for an agent: the embedded ones of its harness (generic ones outside the
    /// measured versions), merged with `rules/<name>.toml` from the config dir when present (a
    /// rule with the same id replaces the embedded one).
    fn rules_for(&mut self, harness: &str, measured: bool) -> &volee_harness::RuleSet {
        let config_dir = self.paths.config_dir.clone();
        self.rules
            .entry((harness.to_string(), measured))
            .or_insert_with(|| {
                let embedded = volee_harness::screen_rules(harness, measured).unwrap_or_else(|e| {
                    tracing::error!("screen rules of {harness}: {e}");
                    volee_harness::RuleSet::default()
                });
                let name = if measured { harness } else { "generic" };
                let user = config_dir.join("rules").join(format!("{name}.toml"));
                match std::fs::read_to_string(&user) {
                    Ok(text) => {
                        match volee_harness::RuleSet::from_toml(&text, &user.display().to_string())
                        {
                            Ok(overrides) => {
                                tracing::info!(
                                    "screen rules of {name}: using overrides from {}",
                                    user.display()
                                );
                                volee_harness::RuleSet::merged(&embedded, &overrides)
                            }
                            Err(e) => {
                                tracing::error!("ignoring {}: {e}", user.display());
                                embedded
                            }
                        }
                    }
                    Err(_) => embedded,
                }
            })
    }

    /// A hook event: the harness says what its agent is doing. Names and errors are logged
    /// escaped (`{:?}`): they come from whoever ran `volee hook` and may hold line breaks.
    fn on_hook(&mut self, event: HookEvent) {
        if let Some(error) = &event.error {
            tracing::warn!(
                "rejected {:?} hook {:?} for agent {:?}: {error:?}",
                event.harness,
                event.event,
                event.agent
            );
            return;
        }
        // A hook from a session volee did not launch (volee's own hooks file or extension is
        // loaded by every session of the harness) carries no agent id: it belongs to the
        // discovered agent whose published session id it names, else to nobody.
        let agent_id = if event.agent.is_empty() {
            let by_session = event.session_id.as_deref().and_then(|s| {
                self.registry
                    .iter()
                    .find(|a| {
                        a.origin == Origin::Discovered
                            && !a.is_ended()
                            && a.harness == event.harness
                            && a.session_id.as_deref() == Some(s)
                    })
                    .map(|a| a.id.clone())
            });
            match by_session {
                Some(id) => id,
                None => {
                    tracing::debug!(
                        "hook {:?} {:?} from a session volee does not know",
                        event.harness,
                        event.event
                    );
                    return;
                }
            }
        } else {
            event.agent.clone()
        };
        let Some(agent) = self.registry.get(&agent_id) else {
            tracing::warn!(
                "hook {:?} {:?} names unknown agent {:?}",
                event.harness,
                event.event,
                event.agent
            );
            return;
        };
        // Launched with a token: only its own hooks (which have it in their environment) count.
        if let Some(token) = &agent.hook_token {
            if !token.matches(event.token.as_ref()) {
                tracing::warn!(
                    "ignored {:?} hook {:?} for agent {}: {} token",
                    event.harness,
                    event.event,
                    agent.id,
                    if event.token.is_some() { "wrong" } else { "no" }
                );
                return;
            }
        }
        if let Some(event_id) = &event.event_id {
            if !self.recent_hooks.insert(event_id) {
                tracing::debug!(
                    "agent {}: hook {:?} delivered twice, counted once",
                    agent.id,
                    event.event
                );
                return;
            }
        }
        if agent.harness != event.harness || agent.is_ended() {
            tracing::warn!(
                "hook {:?} {:?} does not fit agent {} ({}, {})",
                event.harness,
                event.event,
                agent.id,
                agent.harness,
                agent.state()
            );
            return;
        }
        let unnamed = agent.session_id.is_none();
        if let (true, Some(session)) = (unnamed, &event.session_id) {
            self.registry
                .edit(&agent_id, |a| a.session_id = Some(session.clone()));
        }
        let payload = serde_json::Value::Object(
            event
                .fields
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect(),
        );
        match volee_harness::hook_meaning(&event.harness, &event.event, &payload) {
            Some(volee_harness::HookMeaning::State(state)) => {
                let hook = HookSignal {
                    at: event.at_ms,
                    event: event.event.clone(),
                    state,
                };
                self.registry.observe(&agent_id, Observation::Hook(hook));
            }
            Some(volee_harness::HookMeaning::Evidence) => {
                tracing::debug!("agent {agent_id}: hook {:?} (evidence)", event.event);
            }
            None => tracing::debug!("agent {agent_id}: hook {:?} ignored", event.event),
        }
    }

    /// Hook events written while the daemon was down, in order.
    fn replay_spool(&mut self) {
        let path = self.paths.hook_spool();
        let Ok(bytes) = std::fs::read(&path) else {
            return;
        };
        let _ = std::fs::remove_file(&path);
        let (events, bad) = volee_harness::hooks::parse_hook_spool(&bytes);
        for (line, why) in bad {
            tracing::warn!("skipped spooled hook line {line}: {why}");
        }
        let replayed = events.len();
        for event in events {
            self.on_hook(event);
        }
        tracing::info!("replayed {replayed} spooled hook events");
    }

    fn record_exit(&mut self, id: &str, exit: ExitFact) {
        let Some(agent) = self.registry.get(id) else {
            return;
        };
        if agent.signals().exit.is_some() || agent.is_ended() {
            return;
        }
        tracing::debug!(
            "agent {id}: pane dead, status {:?}, signal {:?}",
            exit.status,
            exit.signal
        );
        let mut exit = exit;
        // tmux 3.3a sometimes leaves a dead pane's process unreaped (a zombie) until some other
        // child of the server exits, so #{pane_dead_status} stays empty: the zombie still holds
        // its wait status in /proc.
        if exit.status.is_none() && exit.signal.is_none() {
            if let Some((status, signal)) = agent.pid.and_then(zombie_wait_status) {
                exit.status = status;
                exit.signal = signal;
            }
        }
        // A pane can also be marked dead (pty closed) a moment before its process exits: ask
        // again shortly rather than record "status unknown".
        if exit.status.is_none() && exit.signal.is_none() {
            let tries = self.exit_retries.entry(id.to_string()).or_insert(0);
            *tries += 1;
            if *tries <= 20 {
                self.probe_pane(id, Duration::from_millis(50));
                return;
            }
        }
        self.exit_retries.remove(id);
        self.registry.observe(id, Observation::Exit(exit));
    }

    async fn on_connection_event(&mut self, event: ConnectionEvent) {
        match event {
            ConnectionEvent::Event(key, event) => self.on_control_event(key, event).await,
            ConnectionEvent::Closed(key, serial) => {
                // A connection replaced or dropped on purpose still reports its end: only the
                // current one's end means the session or server went away.
                if self.conns.get(&key).map(ControlConnection::serial) != Some(serial) {
                    return;
                }
                tracing::info!("control connection to {:?} closed", key.session);
                self.conns.remove(&key);
                self.resync_server(&key.socket).await;
            }
        }
    }

    async fn on_control_event(&mut self, key: SessionKey, event: ControlEvent) {
        let now = now_ms();
        match event {
            ControlEvent::Output {
                pane,
                activity: true,
                ..
            } => {
                if let Some(id) = self.agent_by_pane(&key.socket, &pane) {
                    if let Some(p) = self.pending_submits.get_mut(&id) {
                        // Still drawing what volee typed: the submit waits for it to settle.
                        p.last_output = now;
                        return;
                    }
                    if self.echo_until.get(&id).is_some_and(|until| now < *until) {
                        // The harness drawing what volee is typing into its input box.
                        return;
                    }
                    self.registry.observe(&id, Observation::Output { at: now });
                    // Someone waits for this agent to react (`volee send`, `volee wait`).
                    if self.watchers.iter().any(|(w, _)| *w == id) {
                        self.registry.touch(&id);
                    }
                }
            }
            ControlEvent::Bell { pane } => {
                if let Some(id) = self.agent_by_pane(&key.socket, &pane) {
                    self.registry.observe(&id, Observation::Bell { at: now });
                }
            }
            ControlEvent::Title { pane, title } => {
                if let Some(id) = self.agent_by_pane(&key.socket, &pane) {
                    // A title set again to the same text is no news: it keeps its age.
                    self.registry
                        .observe(&id, Observation::Title { at: now, title });
                    // A title is not output, but titles carry state (Codex's "[ ! ] Action
                    // Required"): read the screen and title rules, at most twice a second.
                    // Only for agents without hooks or a status file: those mark turns better, and
                    // a screen read right after a hook may still show the screen before it.
                    let hookless = self.registry.get(&id).is_some_and(|a| {
                        a.signals().hook.is_none() && a.signals().listing.is_none()
                    });
                    let due = hookless
                        && self
                            .title_read_at
                            .get(&id)
                            .is_none_or(|&at| now >= at + TITLE_READ_MS);
                    if due {
                        self.title_read_at.insert(id.clone(), now);
                        self.capture_screen(&id, now);
                    }
                }
            }
            ControlEvent::SubscriptionChanged {
                name,
                pane: Some(pane),
                value,
                ..
            } if name == DEAD_SUB => {
                if let Some(id) = self.agent_by_pane(&key.socket, &pane) {
                    if let Some(exit) = parse_dead(&String::from_utf8_lossy(&value), now) {
                        self.record_exit(&id, exit);
                    }
                }
            }
            ControlEvent::WindowClose { .. }
            | ControlEvent::LayoutChange { .. }
            | ControlEvent::SessionsChanged => {
                self.resync_server(&key.socket).await;
            }
            ControlEvent::Pause { pane } => {
                // The reader fell behind; resume, the state only needs recent activity.
                if let Some(conn) = self.conns.get(&key) {
                    if let Ok(line) =
                        command_line(&["refresh-client", "-A", &format!("{pane}:continue")])
                    {
                        let _ = conn.send(line);
                    }
                }
            }
            _ => {}
        }
    }

    /// Re-read every pane of a server: exits missed, panes killed, agents moved, agents known
    /// only from their `@volee-agent` pane option (the registry file was lost).
    async fn resync_server(&mut self, socket: &Path) {
        let server = TmuxServer::new(socket);
        let now = now_ms();
        let listing = server
            .run_async(&["list-panes", "-a", "-F", &fields_format(PANE_FIELDS)])
            .await;
        let rows = match listing {
            Ok(text) => parse_pane_rows(&text),
            Err(TmuxError::NoServer { .. }) => {
                let lost: Vec<String> = self
                    .registry
                    .iter()
                    .filter(|a| host_socket(&a.host) == Some(socket))
                    .map(|a| a.id.clone())
                    .collect();
                for id in lost {
                    self.registry
                        .observe(&id, Observation::HostLost { at: now });
                }
                self.conns.retain(|k, _| k.socket != socket);
                return;
            }
            Err(e) => {
                tracing::warn!("resync of {} failed: {e}", socket.display());
                return;
            }
        };
        let socket_text = socket.display().to_string();
        let mut exits = Vec::new();
        for row in rows.iter().filter(|r| !r.agent.is_empty()) {
            match self.registry.get(&row.agent) {
                Some(agent) if !agent.is_ended() => {
                    let host = Host::Tmux {
                        socket: socket_text.clone(),
                        session: row.session.clone(),
                        window: row.window.clone(),
                        pane: row.pane.clone(),
                    };
                    let pid = row.pid.or(agent.pid);
                    if agent.host != host || agent.pid != pid {
                        self.registry.edit(&row.agent, |a| {
                            a.host = host;
                            a.pid = pid;
                        });
                    }
                    if row.dead {
                        exits.push((
                            row.agent.clone(),
                            ExitFact {
                                at: now,
                                status: row.status,
                                signal: row.signal,
                            },
                        ));
                    }
                }
                Some(_) => {}
                None => {
                    tracing::info!("rebuilt agent {} from its pane option", row.agent);
                    let name =
                        if row.name.is_empty() || self.registry.check_name(&row.name).is_err() {
                            row.agent.clone()
                        } else {
                            row.name.clone()
                        };
                    let mut record = AgentRecord::launched(
                        NewAgent {
                            id: row.agent.clone(),
                            name,
                            harness: if row.harness.is_empty() {
                                "generic".into()
                            } else {
                                row.harness.clone()
                            },
                            command: vec![row.start_command.clone()],
                            cwd: row.path.clone(),
                            host: Host::Tmux {
                                socket: socket_text.clone(),
                                session: row.session.clone(),
                                window: row.window.clone(),
                                pane: row.pane.clone(),
                            },
                            harness_version: None,
                            profile_fit: ProfileFit::Generic,
                            session_id: None,
                        },
                        now,
                        &self.arbiter,
                    );
                    record.pid = row.pid;
                    // Found, not launched: date it by its window's last activity so a quiet
                    // agent is idle at once rather than "working" for the first window.
                    if let Some(activity) = row.activity {
                        record.created_at = (activity * 1000).min(now);
                        record.state_since = record.created_at;
                    }
                    self.registry.insert(record);
                    if row.dead {
                        let exit = ExitFact {
                            at: now,
                            status: row.status,
                            signal: row.signal,
                        };
                        self.registry.observe(&row.agent, Observation::Exit(exit));
                    }
                }
            }
        }
        for (id, exit) in exits {
            self.record_exit(&id, exit);
        }
        let present: HashSet<&str> = rows
            .iter()
            .filter(|r| !r.agent.is_empty())
            .map(|r| r.agent.as_str())
            .collect();
        // Discovered agents carry no @volee-agent option: the /proc rescan follows them.
        let gone: Vec<(String, Option<u32>)> = self
            .registry
            .iter()
            .filter(|a| {
                !a.is_ended()
                    && a.origin == Origin::Launched
                    && host_socket(&a.host) == Some(socket)
                    && !present.contains(a.id.as_str())
            })
            .map(|a| (a.id.clone(), a.pid))
            .collect();
        let mut orphans = Vec::new();
        for (id, pid) in gone {
            self.registry
                .observe(&id, Observation::PaneGone { at: now });
            orphans.extend(pid);
        }
        // Some harnesses (Gemini) ignore the hangup of a killed pane and live on, reparented:
        // the agent is stopped, so is its whole process group.
        for pid in orphans {
            if process_group_leader_alive(pid) {
                tracing::info!("pane gone, ending the process group of {pid}");
                signal_group(pid, Signal::SIGTERM);
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(STOP_GRACE_MS)).await;
                    if process_group_leader_alive(pid) {
                        signal_group(pid, Signal::SIGKILL);
                    }
                });
            }
        }
        // Watch every session that holds a live agent.
        let sessions: BTreeSet<String> = self
            .registry
            .iter()
            .filter(|a| !a.is_ended())
            .filter_map(|a| match &a.host {
                Host::Tmux {
                    socket: s, session, ..
                } if Path::new(s) == socket => Some(session.clone()),
                _ => None,
            })
            .collect();
        for session in sessions {
            let key = SessionKey {
                socket: socket.to_path_buf(),
                session,
            };
            if let Err(e) = self.ensure_connection(&key).await {
                tracing::warn!("could not watch {:?}: {e}", key.session);
            }
        }
    }

    async fn startup_resync(&mut self) {
        let mut sockets: BTreeSet<PathBuf> = self
            .registry
            .iter()
            .filter_map(|a| host_socket(&a.host).map(Path::to_path_buf))
            .collect();
        sockets.extend(self.tmux_servers.iter().cloned());
        // With the registry lost, the agents' panes are still marked: look at every server of
        // this user in tmux's socket directory.
        sockets.extend(user_tmux_sockets());
        for socket in sockets {
            self.resync_server(&socket).await;
        }
        // zellij agents: watch their sessions again (a session that is gone ends them).
        let zellij: Vec<(String, Vec<(String, String)>)> = self
            .registry
            .iter()
            .filter(|a| !a.is_ended())
            .filter_map(|a| match &a.host {
                Host::Zellij { session, .. } => Some((session.clone(), a.host_env.clone())),
                _ => None,
            })
            .collect();
        for (session, env) in zellij {
            if self.ensure_zellij(&session, &env).is_err() {
                tracing::warn!("cannot watch zellij session {session:?} again");
            }
        }
        self.cancel_unfinished_launches();
        self.flush().await;
        self.remove_unneeded_hook_files();
    }

    /// Panes whose `volee pane-exec` still waits for the environment file of a launch the last
    /// daemon never finished: their agents failed now (not idle until the pane's timeout), and
    /// the panes are told to give up at once.
    fn cancel_unfinished_launches(&mut self) {
        let now = now_ms();
        let waiting = crate::handover::waiting_panes(
            Path::new("/proc"),
            &self.paths.launch_dir(),
            nix::unistd::getuid().as_raw(),
        );
        for pane in waiting {
            tracing::warn!(
                "launch of agent {} never finished (pane-exec pid {} still waits): failed",
                pane.agent,
                pane.pid
            );
            if let Err(e) = persist::write_atomic(&pane.env_file, crate::handover::CANCELLED) {
                tracing::warn!("could not tell pane-exec pid {}: {e}", pane.pid);
            }
            self.registry
                .observe(&pane.agent, Observation::LaunchInterrupted { at: now });
        }
    }

    /// Tell the user about agent `id` (one transition), by every channel the config enables —
    /// unless notifications are off or quiet, the limiter holds it, or the user is looking at
    /// the agent's pane right now.
    async fn notify(&mut self, id: &str, kind: crate::notify::Kind, now: Millis) {
        let cfg = self.config.notify.clone();
        if !cfg.enabled || self.quiet_until.is_some_and(|u| now < u) {
            return;
        }
        let Some(view) = self.registry.get(id).map(|a| a.view()) else {
            return;
        };
        // Only what the user cannot see: a client showing the pane needs no ping.
        let clients = match &view.host {
            Host::Tmux { pane, .. } => {
                let clients = self.tmux_clients(id).await;
                if clients.iter().any(|c| &c.pane == pane) {
                    tracing::debug!(
                        "{id} {}: its pane is on screen, no notification",
                        kind.as_str()
                    );
                    return;
                }
                clients
            }
            _ => Vec::new(),
        };
        match self.limiter.admit(id, kind, now, &cfg) {
            crate::notify::Admit::Send => {}
            other => {
                tracing::debug!("{id} {}: {other:?}", kind.as_str());
                return;
            }
        }
        let text = crate::notify::message(&view.name, &view.id, kind, &view.evidence);
        tracing::info!("notify: {text}");
        self.deliver(&text, &clients).await;
        if let Some(command) = cfg.command(kind) {
            run_notify_command(command, kind, &view);
        }
    }

    /// One message for the notifications the burst limit held back.
    async fn notify_summary(&mut self, held: u32) {
        if held == 0 || self.quiet_until.is_some_and(|u| now_ms() < u) {
            return;
        }
        let text = format!(
            "volee: {held} more agent change{} (volee ls)",
            if held == 1 { "" } else { "s" }
        );
        tracing::info!("notify: {text}");
        // Every attached client of every server volee watches.
        let ids: Vec<String> = self
            .registry
            .iter()
            .filter(|a| !a.is_ended() && matches!(a.host, Host::Tmux { .. }))
            .map(|a| a.id.clone())
            .collect();
        let mut seen = HashSet::new();
        let mut clients = Vec::new();
        for id in ids {
            for c in self.tmux_clients(&id).await {
                if seen.insert((c.socket.clone(), c.name.clone())) {
                    clients.push(c);
                }
            }
        }
        self.deliver(&text, &clients).await;
    }

    /// The tmux clients attached to agent `id`'s server (control-mode clients excluded).
    async fn tmux_clients(&self, id: &str) -> Vec<TmuxClient> {
        let socket = self
            .registry
            .get(id)
            .and_then(|a| host_socket(&a.host).map(Path::to_path_buf))
            .unwrap_or_default();
        let format = "#{client_name}\t#{client_control_mode}\t#{pane_id}\t#{client_tty}";
        match self.tmux_command(id, &["list-clients", "-F", format]).await {
            Ok(text) => text
                .lines()
                .filter_map(|l| {
                    let f: Vec<&str> = l.split('\t').collect();
                    (f.len() == 4 && f[1] != "1").then(|| TmuxClient {
                        socket: socket.clone(),
                        name: f[0].to_string(),
                        pane: f[2].to_string(),
                        tty: f[3].to_string(),
                    })
                })
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    /// The message on those clients, the status line's flash, the desktop, bell and OSC 9, as
    /// configured.
    async fn deliver(&mut self, text: &str, clients: &[TmuxClient]) {
        let cfg = self.config.notify.clone();
        if cfg.tmux_message {
            let escaped = volee_view::tmux_message_text(text, 200);
            let ms = cfg.message_time.as_millis().to_string();
            for c in clients {
                let shown = match self
                    .conns
                    .iter()
                    .find(|(k, conn)| k.socket == c.socket && conn.is_open())
                {
                    Some((_, conn)) => {
                        match command_line(&["display-message", "-c", &c.name, "-d", &ms, &escaped])
                        {
                            Ok(line) => conn.request(line).await.is_ok_and(|r| r.ok),
                            Err(_) => false,
                        }
                    }
                    None => TmuxServer::new(&c.socket)
                        .run_async(&["display-message", "-c", &c.name, "-d", &ms, &escaped])
                        .await
                        .is_ok(),
                };
                if !shown {
                    tracing::debug!("display-message on {} failed", c.name);
                }
            }
        }
        if cfg.flash_status {
            self.flashing = true;
            self.flash_until = now_ms() + 3000;
            self.status_dirty = true;
        }
        if cfg.bell || cfg.osc9 {
            let mut bytes = Vec::new();
            if cfg.osc9 {
                let plain: String = text.chars().filter(|c| !c.is_control()).collect();
                bytes.extend_from_slice(format!("\x1b]9;{plain}\x1b\\").as_bytes());
            }
            if cfg.bell {
                bytes.push(0x07);
            }
            for c in clients {
                write_to_tty(&c.tty, &bytes);
            }
        }
        if cfg.desktop && desktop_available() {
            // Servers that announce `body-markup` read the body as markup: an agent's name or
            // title must show as written.
            let text = text
                .replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;");
            tokio::task::spawn_blocking(move || {
                if let Err(e) = notify_rust::Notification::new()
                    .summary("volee")
                    .body(&text)
                    .appname("volee")
                    .timeout(notify_rust::Timeout::Milliseconds(6000))
                    .show()
                {
                    tracing::debug!("desktop notification: {e}");
                }
            });
        }
    }

    /// Type the first prompt of each agent that waits for one and whose screen now says idle
    /// (a screen rule, not mere silence: a harness still starting up, or asking a question, is
    /// not ready for it).
    async fn type_first_prompts(&mut self) {
        let ready: Vec<(String, String)> = self
            .registry
            .iter()
            .filter(|a| {
                a.decision.state == volee_protocol::AgentState::Idle
                    && a.decision.source == volee_protocol::StateSource::Screen
            })
            .filter_map(|a| Some((a.id.clone(), a.typed_prompt.clone()?)))
            .collect();
        for (id, prompt) in ready {
            self.registry.edit(&id, |a| a.typed_prompt = None);
            match self.send_text(&id, &prompt, false).await {
                Response::Agent { .. } => {
                    tracing::info!("agent {id}: typed its first prompt");
                }
                other => tracing::warn!("agent {id}: could not type its first prompt: {other:?}"),
            }
        }
    }

    async fn ensure_connection(&mut self, key: &SessionKey) -> Result<(), String> {
        if self.conns.get(key).is_some_and(|c| c.is_open()) {
            return Ok(());
        }
        let conn = ControlConnection::open(key.clone(), self.conn_tx.clone())
            .map_err(|e| e.to_string())?;
        let sub = format!("{DEAD_SUB}:%*:{DEAD_FORMAT}");
        let line = command_line(&["refresh-client", "-B", &sub]).map_err(|e| e.to_string())?;
        // The reply also proves the client is attached before the agent's command runs.
        let reply = tokio::time::timeout(Duration::from_secs(5), conn.request(line))
            .await
            .map_err(|_| "tmux did not answer within 5 s".to_string())?
            .map_err(|e| e.to_string())?;
        if !reply.ok {
            return Err(reply.text());
        }
        self.conns.insert(key.clone(), conn);
        // Control mode reports only new output: what the session's panes already show (a prompt
        // printed while no daemon ran) is read once now.
        let now = now_ms();
        let shown: Vec<String> = self
            .registry
            .iter()
            .filter(|a| !a.is_ended())
            .filter(|a| {
                matches!(&a.host, Host::Tmux { socket, session, .. }
                    if Path::new(socket) == key.socket && *session == key.session)
            })
            .map(|a| a.id.clone())
            .collect();
        for id in shown {
            self.read_initial_screen(&id, now);
        }
        Ok(())
    }

    /// Classify what a pane shows when volee starts watching it, like a screen read after output:
    /// a prompt already on screen produces no output event. Dated by the last output volee saw
    /// (else now), so it never outranks a newer hook; skipped while output is still settling
    /// (the settled read follows).
    fn read_initial_screen(&mut self, id: &str, now: Millis) {
        let Some(out) = self.registry.get(id).map(|a| a.signals().last_output) else {
            return;
        };
        if out.is_some_and(|o| now < o + SCREEN_SETTLE_MS) {
            return;
        }
        self.capture_screen(id, out.unwrap_or(now));
    }

    /// Re-decide states, notify watchers, persist and push the status line.
    async fn flush(&mut self) {
        let now = now_ms();
        self.sources.sync(&self.registry, now);
        let transitions = self.registry.reevaluate_all(now, &self.arbiter);
        let state_changed = !transitions.is_empty();
        let mut news: Vec<(String, crate::notify::Kind)> = Vec::new();
        for t in transitions {
            let working_ms = if t.before == volee_protocol::AgentState::Working {
                t.lasted_ms
            } else {
                0
            };
            if let Some(kind) =
                crate::notify::classify(t.before, t.after, working_ms, self.config.notify.long_turn)
            {
                news.push((t.id.clone(), kind));
            }
            tracing::debug!(
                "{} {} -> {} ({})",
                t.id,
                t.before,
                t.after,
                self.registry
                    .get(&t.id)
                    .map_or("", |a| a.decision.evidence.as_str())
            );
        }
        for (id, kind) in news {
            self.notify(&id, kind, now).await;
        }
        if let Some(held) = self.limiter.take_summary(now, &self.config.notify) {
            self.notify_summary(held).await;
        }
        // The flash ends: the plain status line again.
        if self.flashing && now >= self.flash_until {
            self.flashing = false;
            self.status_dirty = true;
        }
        // Quiet ends: notifications on again, and the status line says so.
        if self.quiet_until.is_some_and(|u| now >= u) {
            self.quiet_until = None;
            self.registry.mark_unsaved();
            self.status_dirty = true;
        }
        if state_changed {
            self.type_first_prompts().await;
            self.drop_unwatched_connections();
            self.update_zellij_watches();
            self.remove_unneeded_hook_files();
        }
        if self.registry.is_unsaved() {
            self.save();
        }
        let changed = self.registry.take_dirty();
        if !changed.is_empty() || std::mem::take(&mut self.status_dirty) {
            let registry = &self.registry;
            self.watchers.retain(|(id, tx)| {
                if !changed.contains(id) {
                    return !tx.is_closed();
                }
                match registry.get(id) {
                    Some(agent) => tx
                        .send(Response::Agent {
                            agent: agent.view(),
                        })
                        .is_ok(),
                    None => {
                        let _ = tx.send(user_error(&format!("agent {id} was removed"), vec![]));
                        false
                    }
                }
            });
            self.push_status().await;
            self.push_zellij_agents();
        }
    }

    /// Grok Build and Copilot CLI have no per-launch hooks: the launch puts one file of volee's
    /// own into `~/.grok/hooks/` or `~/.copilot/hooks/` (`$COPILOT_HOME/hooks/`); it goes as soon
    /// as no live agent of that harness needs it.
    fn remove_unneeded_hook_files(&mut self) {
        let unneeded: Vec<(PathBuf, String)> = self
            .hook_files
            .iter()
            .filter(|(_, harness)| {
                !self
                    .registry
                    .iter()
                    .any(|a| &a.harness == *harness && !a.is_ended())
            })
            .map(|(p, h)| (p.clone(), h.clone()))
            .collect();
        for (path, harness) in unneeded {
            // Only ever a file volee wrote (it calls `volee hook HARNESS`).
            match crate::instrument::remove_kept_file(&path, &harness) {
                Ok(true) => {
                    tracing::info!("removed {} (no {harness} agent needs it)", path.display())
                }
                Ok(false) => {}
                Err(e) => tracing::warn!("could not remove {}: {e}", path.display()),
            }
            self.hook_files.remove(&path);
            self.registry.mark_unsaved();
        }
    }

    /// Close control clients of sessions that no longer hold a live agent.
    fn drop_unwatched_connections(&mut self) {
        let watched: HashSet<SessionKey> = self
            .registry
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
    }

    fn views(&self, all: bool) -> Vec<AgentView> {
        let mut agents: Vec<&AgentRecord> = self
            .registry
            .iter()
            .filter(|a| all || !a.is_ended())
            .collect();
        agents.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        agents.into_iter().map(AgentRecord::view).collect()
    }

    /// Push the summary into `@volee-status` of every server that shows it; only on change, over
    /// an existing control connection when there is one (no process spawned).
    async fn push_status(&mut self) {
        let views: Vec<AgentView> = self.views(true);
        let mut text = volee_view::status_tmux(&volee_view::Counts::from_agents(&views));
        if self.flashing {
            text = format!("#[reverse]{text}#[noreverse]");
        }
        // `volee quiet` is on: say so, or agents that need the user go unnoticed for hours.
        if self.quiet_until.is_some() {
            text.push_str(volee_view::QUIET_TMUX);
        }
        let mut sockets: BTreeSet<PathBuf> = self.tmux_servers.clone();
        // A server that only hosts discovered agents is the user's own business until they
        // `tmux-init` it: volee sets nothing there.
        sockets.extend(
            self.registry
                .iter()
                .filter(|a| !a.is_ended() && a.origin == Origin::Launched)
                .filter_map(|a| host_socket(&a.host).map(Path::to_path_buf)),
        );
        for socket in sockets {
            if self.last_status.get(&socket) == Some(&text) {
                continue;
            }
            let Ok(line) = command_line(&["set-option", "-g", "@volee-status", &text]) else {
                continue;
            };
            let conn = self
                .conns
                .iter()
                .find(|(k, c)| k.socket == socket && c.is_open())
                .map(|(_, c)| c);
            let pushed = match conn {
                Some(conn) => conn.send(line).is_ok(),
                None => TmuxServer::new(&socket)
                    .run_async(&["set-option", "-g", "@volee-status", &text])
                    .await
                    .is_ok(),
            };
            if pushed {
                self.last_status.insert(socket, text.clone());
            }
        }
    }

    fn prune(&mut self) {
        let cutoff = now_ms().saturating_sub(self.config.retention.as_millis() as u64);
        let old = self.registry.expired(cutoff);
        for id in &old {
            self.forget(id);
        }
        if !old.is_empty() {
            tracing::info!("pruned {} ended agents", old.len());
        }
    }

    /// Remove an ended agent and its dead pane.
    fn forget(&mut self, id: &str) {
        self.echo_until.remove(id);
        self.pending_submits.remove(id);
        self.zellij_screens.remove(id);
        if let Some(agent) = self.registry.remove(id) {
            if let Host::Tmux { socket, pane, .. } = &agent.host {
                // Only a dead pane is closed: remain-on-exit kept it for the user to read.
                let server = TmuxServer::new(socket);
                let pane = pane.clone();
                tokio::spawn(async move {
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
        }
        // Everything kept per agent goes with it.
        self.screen_checked.remove(id);
        self.title_read_at.remove(id);
        self.sources.forget(id);
        self.exit_retries.remove(id);
        self.discovered.remove(id);
    }

    async fn on_request(&mut self, req: Request) -> Response {
        match req {
            Request::Hello { .. } => Response::Hello {
                version: PROTOCOL_VERSION,
                pid: std::process::id(),
            },
            Request::List { all } => Response::Agents {
                agents: self.views(all),
            },
            Request::Show { id } => match self.registry.resolve(&id) {
                Ok(a) => Response::Agent { agent: a.view() },
                Err(e) => resolve_error(e),
            },
            Request::Explain { id } => match self.registry.resolve(&id) {
                Ok(a) => Response::Explanation {
                    explanation: a.explain(),
                },
                Err(e) => resolve_error(e),
            },
            Request::Launch(req) => self.launch(req).await,
            Request::Hook(event) => {
                self.on_hook(event);
                Response::Ok
            }
            Request::Stop { id } => self.stop(&id),
            Request::Interrupt { id } => self.interrupt(&id).await,
            Request::Send { id, text, raw } => self.send_text(&id, &text, raw).await,
            Request::Peek { id, lines } => self.peek(&id, lines).await,
            Request::Remove { id } => {
                let (id, ended) = match self.registry.resolve(&id) {
                    Ok(a) => (a.id.clone(), a.is_ended()),
                    Err(e) => return resolve_error(e),
                };
                if !ended {
                    return user_error(
                        &format!("agent {id} is still running"),
                        vec![format!("stop it first: volee stop {id}")],
                    );
                }
                self.forget(&id);
                Response::Ok
            }
            Request::Rescan => {
                // Asked for: read every process, not only those due.
                self.rescan(true).await;
                Response::Ok
            }
            Request::Prune => {
                let before = self.registry.len();
                self.prune();
                Response::Text {
                    text: format!("pruned {}", before - self.registry.len()),
                }
            }
            Request::Watch { .. } => user_error("watch is a streaming request", vec![]),
            Request::TmuxInit { socket, .. } => {
                let socket = PathBuf::from(socket);
                self.last_status.remove(&socket);
                self.tmux_servers.insert(socket.clone());
                self.registry.mark_unsaved();
                self.resync_server(&socket).await;
                self.status_dirty = true;
                Response::Ok
            }
            Request::TmuxDown { socket } => {
                let socket = PathBuf::from(socket);
                self.tmux_servers.remove(&socket);
                self.last_status.remove(&socket);
                self.registry.mark_unsaved();
                Response::Ok
            }
            Request::Shutdown => Response::Ok,
            Request::QuietState => Response::Quiet {
                until_ms: self.quiet_until.filter(|u| *u > now_ms()),
            },
            Request::Quiet { until_ms } => {
                self.quiet_until = until_ms.filter(|u| *u > now_ms());
                // Saved before the answer: a daemon killed right after still keeps quiet.
                self.save();
                self.status_dirty = true;
                Response::Text {
                    text: match self.quiet_until {
                        Some(u) => format!("quiet until {}", volee_core::registry::rfc3339(u)),
                        None => "notifications on".into(),
                    },
                }
            }
        }
    }

    async fn launch(&mut self, req: LaunchRequest) -> Response {
        if req.command.is_empty() {
            return user_error("nothing to launch: no command", vec![]);
        }
        if volee_harness::profile(&req.harness).is_none() {
            let names: Vec<&str> = volee_harness::profiles().iter().map(|p| p.name).collect();
            return user_error(
                &format!("unknown harness {:?}", req.harness),
                vec![format!("known harnesses: {}", names.join(", "))],
            );
        }
        let name = match &req.name {
            Some(n) => match self.registry.check_name(n) {
                Ok(()) => n.clone(),
                Err(e) => return user_error(&e.to_string(), vec![]),
            },
            None => self.registry.default_name(&req.command),
        };
        let Some(id) = self.registry.new_id(&volee_os::random::unique_bytes(64), 4) else {
            return internal_error("could not draw a free agent id");
        };
        if let Some(session) = req.zellij_session.clone() {
            return self.launch_zellij(req, session, id, name).await;
        }
        let server = TmuxServer::new(&req.tmux_socket);
        let session = match self.target_session(&server, &req).await {
            Ok(s) => s,
            Err(resp) => return *resp,
        };
        let Ok(volee_bin) = std::env::current_exe() else {
            return internal_error("cannot find the volee executable");
        };
        let env_file = self.paths.launch_dir().join(format!("{id}.env"));
        let window_name: String = name.replace('#', "_");
        let mut args: Vec<String> = vec![
            "new-window".into(),
            "-d".into(),
            "-P".into(),
            "-F".into(),
            fields_format(&["window_id", "pane_id", "pane_pid", "session_name"]),
            "-t".into(),
            format!("={session}:"),
            "-c".into(),
            req.cwd.clone(),
            "-n".into(),
            window_name,
            volee_bin.display().to_string(),
            "pane-exec".into(),
            env_file.display().to_string(),
            "--".into(),
        ];
        args.extend(req.command.iter().cloned());
        let created = match server.run_async(&args).await {
            Ok(out) => split_fields(out.trim_end().as_bytes()),
            Err(e) => return tmux_error_response(&e),
        };
        let [window, pane, pid, session] = created.as_slice() else {
            return internal_error("tmux new-window printed an unexpected line");
        };
        // Before the command runs (pane-exec waits for its env file): keep the pane when it exits,
        // and mark it as ours so a restarted daemon finds it.
        let set = server
            .run_commands_async(&[
                &["set-option", "-p", "-t", pane, "remain-on-exit", "on"][..],
                &["set-option", "-p", "-t", pane, "@volee-agent", &id],
                &["set-option", "-p", "-t", pane, "@volee-name", &name],
                &[
                    "set-option",
                    "-p",
                    "-t",
                    pane,
                    "@volee-harness",
                    &req.harness,
                ],
            ])
            .await;
        if let Err(e) = set {
            let _ = server.run_async(&["kill-pane", "-t", pane]).await;
            return tmux_error_response(&e);
        }
        let key = SessionKey {
            socket: PathBuf::from(&req.tmux_socket),
            session: session.clone(),
        };
        if let Err(e) = self.ensure_connection(&key).await {
            let _ = server.run_async(&["kill-pane", "-t", pane]).await;
            return internal_error(&format!("could not watch tmux session {session:?}: {e}"));
        }
        let now = now_ms();
        let mut record = AgentRecord::launched(
            NewAgent {
                id: id.clone(),
                name,
                harness: req.harness.clone(),
                command: req.command.clone(),
                cwd: req.cwd.clone(),
                host: Host::Tmux {
                    socket: req.tmux_socket.clone(),
                    session: session.clone(),
                    window: window.clone(),
                    pane: pane.clone(),
                },
                harness_version: req.harness_version.clone(),
                profile_fit: req.profile_fit,
                session_id: req.session_id.clone(),
            },
            now,
            &self.arbiter,
        );
        record.pid = pid.parse().ok();
        let home = req
            .env
            .iter()
            .find(|(k, _)| k == "HOME")
            .map(|(_, v)| PathBuf::from(v));
        record.status_file = home
            .zip(record.pid)
            .and_then(|(home, pid)| volee_harness::listing::status_file(&req.harness, &home, pid))
            .map(|p| p.display().to_string());
        record.listing_socket = listing_socket(&req.harness, &req.env);
        record.typed_prompt = req.typed_prompt.clone().filter(|p| !p.is_empty());
        record.worktree = crate::worktree::linked_worktree(Path::new(&req.cwd));
        let view = record.view();
        self.registry.insert(record);
        self.save();
        if let Err(resp) = self.prepare_launch(&req, &id, &volee_bin, &env_file) {
            let _ = server.run_async(&["kill-pane", "-t", pane]).await;
            return *resp;
        }
        self.registry.touch(&id);
        Response::Agent { agent: view }
    }

    /// Launch into a new tab of zellij session `session` (one agent per tab; the pane is not
    /// named, so the program's own title stays visible).
    async fn launch_zellij(
        &mut self,
        req: LaunchRequest,
        session: String,
        id: String,
        name: String,
    ) -> Response {
        let Ok(volee_bin) = std::env::current_exe() else {
            return internal_error("cannot find the volee executable");
        };
        let bin = match zellij_binary(&req.env) {
            Ok(b) => b,
            Err(e) => return zellij_error_response(&e),
        };
        let cli = volee_zellij::ZellijCli::new(bin, &session).with_env(&req.env);
        if let Err(e) = cli.list_panes().await {
            return zellij_error_response(&e);
        }
        let env_file = self.paths.launch_dir().join(format!("{id}.env"));
        let mut command = vec![
            volee_bin.display().to_string(),
            "pane-exec".into(),
            env_file.display().to_string(),
            "--".into(),
        ];
        command.extend(req.command.iter().cloned());
        let tab_name = format!("{} ({id})", name.replace(['"', '\\'], "_"));
        let pane = match cli.open(&tab_name, &req.cwd, &command).await {
            Ok(p) => p,
            Err(e) => return zellij_error_response(&e),
        };
        let listed = cli.list_panes().await.unwrap_or_default();
        let tab = listed
            .iter()
            .find(|p| !p.is_plugin && p.id == pane)
            .map(|p| p.tab_position as u32)
            .unwrap_or(0);
        let host_env = zellij_env(&req.env);
        let mut record = AgentRecord::launched(
            NewAgent {
                id: id.clone(),
                name,
                harness: req.harness.clone(),
                command: req.command.clone(),
                cwd: req.cwd.clone(),
                host: Host::Zellij {
                    session: session.clone(),
                    tab,
                    pane: format!("terminal_{pane}"),
                },
                harness_version: req.harness_version.clone(),
                profile_fit: req.profile_fit,
                session_id: req.session_id.clone(),
            },
            now_ms(),
            &self.arbiter,
        );
        record.host_env = host_env.clone();
        record.listing_socket = listing_socket(&req.harness, &req.env);
        record.typed_prompt = req.typed_prompt.clone().filter(|p| !p.is_empty());
        record.worktree = crate::worktree::linked_worktree(Path::new(&req.cwd));
        let view = record.view();
        self.registry.insert(record);
        self.save();
        if let Err(resp) = self
            .prepare_launch(&req, &id, &volee_bin, &env_file)
            .and_then(|()| self.ensure_zellij(&session, &host_env))
        {
            let _ = cli.close_pane(pane).await;
            self.forget(&id);
            return *resp;
        }
        self.registry.touch(&id);
        Response::Agent { agent: view }
    }

    /// The zellij command line of a live zellij agent, and its pane number.
    fn live_zellij(
        &self,
        query: &str,
    ) -> Option<Result<(String, volee_zellij::ZellijCli, u32), Box<Response>>> {
        let agent = match self.registry.resolve(query) {
            Ok(a) => a,
            Err(e) => return Some(Err(Box::new(resolve_error(e)))),
        };
        let Host::Zellij { session, pane, .. } = &agent.host else {
            return None;
        };
        if agent.is_ended() {
            return Some(Err(Box::new(user_error(
                &format!("agent {} has already ended ({})", agent.id, agent.state()),
                vec![],
            ))));
        }
        let cli = match self.zellij.get(session) {
            Some(w) => w.cli.clone(),
            None => match zellij_binary(&agent.host_env) {
                Ok(bin) => volee_zellij::ZellijCli::new(bin, session).with_env(&agent.host_env),
                Err(e) => return Some(Err(Box::new(zellij_error_response(&e)))),
            },
        };
        let pane = volee_protocol::zellij::parse_terminal_id(pane)?;
        Some(Ok((agent.id.clone(), cli, pane)))
    }

    /// What every launch needs once its agent is recorded, whatever the host: volee's hooks
    /// file or extension where the harness needs one, and the environment file the pane's
    /// `volee pane-exec` waits for (the caller's environment, the agent id for hooks, the
    /// profile's variables). On error the caller closes its pane.
    fn prepare_launch(
        &mut self,
        req: &LaunchRequest,
        id: &str,
        volee_bin: &Path,
        env_file: &Path,
    ) -> Result<(), Box<Response>> {
        // The instrumentation plan's files under HOME; the CLI carried out the rest.
        let kept = crate::instrument::write_kept_files(req, volee_bin)
            .map_err(|e| Box::new(env_error(&e.to_string(), vec![])))?;
        for path in kept {
            self.hook_files.insert(path, req.harness.clone());
        }
        let mut env = req.env.clone();
        env.retain(|(k, _)| k != "VOLEE_AGENT_ID" && k != "VOLEE_AGENT_TOKEN");
        // Hooks find their agent by this id, never by guessing from transcript files.
        env.push(("VOLEE_AGENT_ID".into(), id.to_string()));
        // And prove they run in its pane with this secret: the id alone is no secret.
        let token = match new_hook_token() {
            Ok(t) => t,
            Err(e) => {
                return Err(Box::new(internal_error(&format!(
                    "could not make the agent's hook token: {e}"
                ))))
            }
        };
        env.push(("VOLEE_AGENT_TOKEN".into(), token.0.clone()));
        self.registry.edit(id, |a| a.hook_token = Some(token));
        // The end-to-end test of a daemon killed mid-launch stops here (debug builds only).
        if cfg!(debug_assertions)
            && std::env::var_os("VOLEE_FAULT").is_some_and(|v| v == "die-before-handover")
        {
            let _ = nix::sys::signal::raise(Signal::SIGKILL);
        }
        if let Err(e) = write_env_file(env_file, &req.cwd, &env) {
            return Err(Box::new(internal_error(&format!(
                "could not hand the environment to the pane: {e}"
            ))));
        }
        Ok(())
    }

    /// The session to launch into: the one asked for, else the caller's, else `volee`.
    async fn target_session(
        &self,
        server: &TmuxServer,
        req: &LaunchRequest,
    ) -> Result<String, Box<Response>> {
        if let Some(s) = &req.tmux_session {
            if !server.has_session(s) {
                return Err(Box::new(user_error(
                    &format!("tmux session {s:?} does not exist"),
                    vec!["list sessions with: tmux ls".into()],
                )));
            }
            return Ok(s.clone());
        }
        if let Some(pane) = &req.caller_pane {
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
        if server.has_session("volee") {
            return Ok("volee".into());
        }
        match server
            .run_async(&["new-session", "-d", "-s", "volee", "-c", &req.cwd])
            .await
        {
            Ok(_) => Ok("volee".into()),
            Err(e) => Err(Box::new(tmux_error_response(&e))),
        }
    }

    fn live_tmux(&self, query: &str) -> Result<(String, String, Option<u32>), Box<Response>> {
        let agent = self
            .registry
            .resolve(query)
            .map_err(|e| Box::new(resolve_error(e)))?;
        if agent.is_ended() {
            return Err(Box::new(user_error(
                &format!("agent {} has already ended ({})", agent.id, agent.state()),
                vec![],
            )));
        }
        match &agent.host {
            Host::Tmux { pane, .. } => Ok((agent.id.clone(), pane.clone(), agent.pid)),
            _ => Err(Box::new(user_error(
                &format!("agent {} is not in a tmux pane", agent.id),
                vec![],
            ))),
        }
    }

    fn stop(&mut self, query: &str) -> Response {
        if let Some(found) = self.live_zellij(query) {
            let (id, cli, pane) = match found {
                Ok(x) => x,
                Err(resp) => return *resp,
            };
            self.registry
                .observe(&id, Observation::StopRequested { at: now_ms() });
            // Closing the pane hangs its program up; the watch then sees the pane gone.
            tokio::spawn(async move {
                if let Err(e) = cli.close_pane(pane).await {
                    tracing::warn!("zellij close-pane terminal_{pane}: {e}");
                }
            });
            return match self.registry.get(&id) {
                Some(a) => Response::Agent { agent: a.view() },
                None => Response::Ok,
            };
        }
        let (id, _pane, pid) = match self.live_tmux(query) {
            Ok(x) => x,
            Err(resp) => return *resp,
        };
        // Never signal a pid that is now someone else's process.
        if !self.still_its_process(&id) {
            self.end_vanished(&id);
            return match self.registry.get(&id) {
                Some(a) => Response::Agent { agent: a.view() },
                None => Response::Ok,
            };
        }
        let now = now_ms();
        self.registry
            .observe(&id, Observation::StopRequested { at: now });
        if let Some(pid) = pid {
            signal_group(pid, Signal::SIGTERM);
            signal_group(pid, Signal::SIGHUP);
        }
        self.probe_pane(&id, Duration::from_millis(50));
        self.probe_pane(&id, Duration::from_millis(300));
        let tx = self.tx.clone();
        let escalate = id.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(STOP_GRACE_MS)).await;
            let _ = tx.send(Msg::EscalateStop { id: escalate });
        });
        match self.registry.get(&id) {
            Some(a) => Response::Agent { agent: a.view() },
            None => Response::Ok,
        }
    }

    /// Type `text` into the agent per its profile's input rules, then submit it once (unless
    /// `raw`, the text is made inert first: [`volee_harness::sanitize_input`]). Answers with the
    /// agent as it was before, so the caller can see it react.
    async fn send_text(&mut self, query: &str, text: &str, raw: bool) -> Response {
        if let Some(found) = self.live_zellij(query) {
            return match found {
                Ok((id, cli, pane)) => self.send_text_zellij(&id, &cli, pane, text, raw).await,
                Err(resp) => *resp,
            };
        }
        let (id, pane, _) = match self.live_tmux(query) {
            Ok(x) => x,
            Err(resp) => return *resp,
        };
        if text.contains('\0') {
            return user_error("the text contains a NUL byte", vec![]);
        }
        let Some(agent) = self.registry.get(&id) else {
            return internal_error("agent vanished");
        };
        let before = agent.view();
        // Text sent before the previous text's submit: that one goes first.
        if let Some(p) = self.pending_submits.remove(&id) {
            p.fire();
        }
        let input = volee_harness::profile(&agent.harness)
            .map(|p| p.input)
            .unwrap_or(volee_harness::InputRules {
                bracketed_paste: false,
                enter_delay_ms: 0,
                submit_key: "Enter",
                interrupt_key: "C-c",
                settle_ms: 0,
            });
        // Line breaks survive only inside the one bracketed paste; elsewhere each would submit.
        let clean;
        let text = if raw {
            text
        } else {
            clean = volee_harness::sanitize_input(text, input.bracketed_paste);
            clean.as_str()
        };
        // An answer to a prompt or dialog (`y`, `1`) is a keystroke, not a paste: selection
        // dialogs ignore pasted text.
        let is_answer = before.state == volee_protocol::AgentState::NeedsYou
            && text.chars().count() <= 3
            && !text.chars().any(char::is_whitespace);
        if !text.is_empty() {
            let typed = if input.bracketed_paste && !is_answer {
                let buffer = format!("volee-send-{id}");
                match self
                    .tmux_command(&id, &["set-buffer", "-b", &buffer, "--", text])
                    .await
                {
                    Ok(_) => {
                        self.tmux_command(
                            &id,
                            &["paste-buffer", "-p", "-d", "-b", &buffer, "-t", &pane],
                        )
                        .await
                    }
                    Err(e) => Err(e),
                }
            } else {
                self.tmux_command(&id, &["send-keys", "-l", "-t", &pane, "--", text])
                    .await
            };
            if let Err(resp) = typed {
                return *resp;
            }
            if input.enter_delay_ms > 0 {
                self.echo_until
                    .insert(id.clone(), now_ms() + input.enter_delay_ms);
            }
        }
        // Some TUIs drop an Enter that arrives with the paste: submit after the profile's delay,
        // without holding the daemon up.
        let submit = command_line(&["send-keys", "-t", &pane, input.submit_key]);
        match (self.conn_of(&id).map(|(c, _)| c.handle()), submit) {
            (Some(sender), Ok(line)) if input.settle_ms > 0 => {
                let now = now_ms();
                self.pending_submits.insert(
                    id.clone(),
                    PendingSubmit {
                        not_before: now + input.enter_delay_ms,
                        deadline: now + volee_harness::profile::SUBMIT_SETTLE_MAX_MS,
                        settle: input.settle_ms,
                        last_output: now,
                        key: SubmitKey::Tmux(sender, line),
                    },
                );
            }
            (Some(sender), Ok(line)) => {
                let delay = Duration::from_millis(input.enter_delay_ms);
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let _ = sender.send(line);
                });
            }
            _ => {
                if let Err(resp) = self
                    .tmux_command(&id, &["send-keys", "-t", &pane, input.submit_key])
                    .await
                {
                    return *resp;
                }
            }
        }
        Response::Agent { agent: before }
    }

    /// `send_text` for a zellij pane: pasted (bracketed) or typed, then the submit key after
    /// the profile's delay.
    async fn send_text_zellij(
        &mut self,
        id: &str,
        cli: &volee_zellij::ZellijCli,
        pane: u32,
        text: &str,
        raw: bool,
    ) -> Response {
        if text.contains('\0') {
            return user_error("the text contains a NUL byte", vec![]);
        }
        // `write-chars` types keys, never a bracketed paste: a line break would submit.
        let clean;
        let text = if raw {
            text
        } else {
            clean = volee_harness::sanitize_input(text, false);
            clean.as_str()
        };
        let Some(agent) = self.registry.get(id) else {
            return internal_error("agent vanished");
        };
        let before = agent.view();
        if let Some(p) = self.pending_submits.remove(id) {
            p.fire();
        }
        let input = volee_harness::profile(&agent.harness).map(|p| p.input);
        let delay = input.map(|i| i.enter_delay_ms).unwrap_or(0);
        let submit = zellij_key(input.map(|i| i.submit_key).unwrap_or("Enter"));
        if !text.is_empty() {
            if let Err(e) = cli.write_chars(pane, text).await {
                return zellij_error_response(&e);
            }
            if delay > 0 {
                self.echo_until.insert(id.to_string(), now_ms() + delay);
            }
        }
        let settle = input.map(|i| i.settle_ms).unwrap_or(0);
        if settle > 0 {
            let now = now_ms();
            self.pending_submits.insert(
                id.to_string(),
                PendingSubmit {
                    not_before: now + delay,
                    deadline: now + volee_harness::profile::SUBMIT_SETTLE_MAX_MS,
                    settle,
                    last_output: now,
                    key: SubmitKey::Zellij(cli.clone(), pane, submit),
                },
            );
            return Response::Agent { agent: before };
        }
        let cli = cli.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(delay)).await;
            if let Err(e) = cli.send_keys(pane, &submit).await {
                tracing::warn!("zellij send-keys terminal_{pane}: {e}");
            }
        });
        Response::Agent { agent: before }
    }

    /// The interrupt key of an agent's profile (tmux syntax).
    fn interrupt_key(&self, id: &str) -> &'static str {
        self.registry
            .get(id)
            .and_then(|a| volee_harness::profile(&a.harness))
            .map(|p| p.input.interrupt_key)
            .unwrap_or("C-c")
    }

    async fn interrupt(&mut self, query: &str) -> Response {
        if let Some(found) = self.live_zellij(query) {
            let (id, cli, pane) = match found {
                Ok(x) => x,
                Err(resp) => return *resp,
            };
            let key = zellij_key(self.interrupt_key(&id));
            return match cli.send_keys(pane, &key).await {
                Ok(()) => Response::Ok,
                Err(e) => zellij_error_response(&e),
            };
        }
        let (id, pane, _) = match self.live_tmux(query) {
            Ok(x) => x,
            Err(resp) => return *resp,
        };
        let key = self.interrupt_key(&id);
        match self
            .tmux_command(&id, &["send-keys", "-t", &pane, key])
            .await
        {
            Ok(_) => Response::Ok,
            Err(resp) => *resp,
        }
    }

    async fn peek(&mut self, query: &str, lines: u32) -> Response {
        let agent = match self.registry.resolve(query) {
            Ok(a) => a,
            Err(e) => return resolve_error(e),
        };
        if let Host::Zellij { .. } = &agent.host {
            let id = agent.id.clone();
            let text = match self.live_zellij(&id) {
                Some(Ok((_, cli, pane))) => match cli.dump_screen(pane).await {
                    // zellij 0.45.1 answers a command-line action after at most 1 s: when its
                    // screen thread is slower (a loaded machine), `dump-screen` prints nothing
                    // and succeeds. The screen `zellij subscribe` (or the plugin) last pushed is
                    // then the best there is.
                    Ok(t) if t.trim().is_empty() => {
                        self.zellij_screens.get(&id).cloned().unwrap_or(t)
                    }
                    Ok(t) => t,
                    Err(e) => return zellij_error_response(&e),
                },
                // An ended agent: the last screen volee saw.
                _ => self.zellij_screens.get(&id).cloned().unwrap_or_default(),
            };
            let mut kept: Vec<String> = text
                .lines()
                .map(|l| volee_view::plain_text(l, 4096))
                .collect();
            while kept.last().is_some_and(|l| l.is_empty()) {
                kept.pop();
            }
            let skip = kept.len().saturating_sub(lines as usize);
            return Response::Text {
                text: kept[skip..].join("\n"),
            };
        }
        let Host::Tmux { pane, .. } = &agent.host else {
            return user_error(&format!("agent {} is not in a tmux pane", agent.id), vec![]);
        };
        let (id, pane) = (agent.id.clone(), pane.clone());
        let start = format!("-{}", lines.clamp(1, 10_000));
        match self
            .tmux_command(
                &id,
                &["capture-pane", "-p", "-J", "-t", &pane, "-S", &start],
            )
            .await
        {
            Ok(text) => {
                let mut kept: Vec<String> = text
                    .lines()
                    .map(|l| volee_view::plain_text(l, 4096))
                    .collect();
                while kept.last().is_some_and(|l| l.is_empty()) {
                    kept.pop();
                }
                let skip = kept.len().saturating_sub(lines as usize);
                Response::Text {
                    text: kept[skip..].join("\n"),
                }
            }
            Err(resp) => *resp,
        }
    }

    /// Run a tmux command for an agent: over its control connection when there is one.
    async fn tmux_command(&self, id: &str, args: &[&str]) -> Result<String, Box<Response>> {
        if let Some((conn, _)) = self.conn_of(id) {
            let line =
                command_line(args).map_err(|e| Box::new(user_error(&e.to_string(), vec![])))?;
            if let Ok(reply) = conn.request(line).await {
                return if reply.ok {
                    Ok(reply.text())
                } else {
                    Err(Box::new(internal_error(&format!("tmux: {}", reply.text()))))
                };
            }
        }
        let socket = self
            .registry
            .get(id)
            .and_then(|a| host_socket(&a.host).map(Path::to_path_buf))
            .ok_or_else(|| Box::new(internal_error("agent has no tmux host")))?;
        TmuxServer::new(socket)
            .run_async(args)
            .await
            .map_err(|e| Box::new(tmux_error_response(&e)))
    }
}

/// A tmux client attached to a server volee watches.
#[derive(Debug, Clone)]
struct TmuxClient {
    socket: PathBuf,
    name: String,
    /// The pane it shows.
    pane: String,
    tty: String,
}

/// Is there a session bus to send desktop notifications to?
pub fn desktop_available() -> bool {
    std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some_and(|v| !v.is_empty())
}

/// Write `bytes` to a client's terminal (a tty device of the user's), never blocking.
fn write_to_tty(tty: &str, bytes: &[u8]) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if !tty.starts_with("/dev/") || bytes.is_empty() {
        return;
    }
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK)
        .open(tty)
    {
        let _ = f.write_all(bytes);
    }
}

/// The user's command for a notification (`sh -c`), the agent's JSON on its stdin,
/// `VOLEE_EVENT` and `VOLEE_AGENT_ID` in its environment; killed after 30 s.
fn run_notify_command(command: &str, kind: crate::notify::Kind, view: &AgentView) {
    let json = match serde_json::to_vec(view) {
        Ok(j) => j,
        Err(_) => return,
    };
    let child = tokio::process::Command::new("sh")
        .args(["-c", command])
        .env("VOLEE_EVENT", kind.as_str())
        .env("VOLEE_AGENT_ID", &view.id)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("notification command {command:?}: {e}");
            return;
        }
    };
    tokio::spawn(async move {
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(&json).await;
        }
        if tokio::time::timeout(Duration::from_secs(30), child.wait())
            .await
            .is_err()
        {
            let _ = child.kill().await;
        }
    });
}

/// Is `pid` alive, not a zombie, and still the leader of its own process group (so signalling
/// the group cannot hit an unrelated process that reused the pid)?
fn process_group_leader_alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let Some(rest) = stat.rfind(')').and_then(|i| stat.get(i + 2..)) else {
        return false;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] = state, fields[2] = pgrp
    fields.first().is_some_and(|s| *s != "Z") && fields.get(2) == Some(&pid.to_string().as_str())
}

/// The wait status of a zombie process, from field 52 (`exit_code`) of `/proc/PID/stat`:
/// `(exit status, signal)`. None when the process is not a zombie (running, or already reaped).
fn zombie_wait_status(pid: u32) -> Option<(Option<i32>, Option<i32>)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_zombie_stat(&stat)
}

fn parse_zombie_stat(stat: &str) -> Option<(Option<i32>, Option<i32>)> {
    // The command name may contain spaces and parentheses: fields start after the last ')'.
    let fields: Vec<&str> = stat
        .get(stat.rfind(')')? + 2..)?
        .split_whitespace()
        .collect();
    if fields.first() != Some(&"Z") {
        return None;
    }
    let code: i32 = fields.last()?.parse().ok()?;
    Some(if code & 0x7f == 0 {
        (Some((code >> 8) & 0xff), None)
    } else {
        (None, Some(code & 0x7f))
    })
}

/// What is known of a found process for learning its version.
struct VersionAsk {
    root: volee_procscan::ProcRoot,
    pid: u32,
    /// The daemon's user: the process and its executable must be theirs (or root's, for the file).
    uid: u32,
    start_time: u64,
    argv: Vec<String>,
    /// The profile's package (`package.json` name or PyPI distribution).
    package: Option<&'static str>,
    /// The process's HOME, where a native binary keeps its state (Copilot unpacks itself there).
    home: Option<String>,
}

/// A found process's version, as [`crate::discovery::version_source`] says to learn it: read from
/// its package's files, or asked of its checked native executable (3 s, then once more for up to
/// 30 s), or not at all.
async fn learn_version(ask: VersionAsk) -> Option<String> {
    use crate::discovery::VersionSource;
    let (ask, source) = tokio::task::spawn_blocking(move || {
        let exe = ask.root.exe(ask.pid);
        let cwd = ask.root.cwd(ask.pid);
        let source = crate::discovery::version_source(
            exe.as_deref(),
            &ask.argv,
            cwd.as_deref(),
            ask.package,
        );
        (ask, source)
    })
    .await
    .ok()?;
    match source {
        VersionSource::PackageJson(_) | VersionSource::PythonMetadata(_) => {
            let package = ask.package;
            tokio::task::spawn_blocking(move || {
                crate::discovery::read_manifest_version(&source, package)
            })
            .await
            .ok()
            .flatten()
        }
        VersionSource::Executable => {
            if let Some(v) = ask_executable(&ask, Duration::from_secs(3)).await {
                return Some(v);
            }
            ask_executable(&ask, Duration::from_secs(30)).await
        }
        VersionSource::Unknown => {
            tracing::info!("pid {}: no safe way to learn its version", ask.pid);
            None
        }
    }
}

/// `EXE --version` of the found process's own executable, opened and checked by
/// [`crate::discovery::open_executable`] and run through that open file (so the file checked is
/// the file run), bounded to `limit`; the first line when it holds a version number.
async fn ask_executable(ask: &VersionAsk, limit: Duration) -> Option<String> {
    use std::os::fd::AsRawFd;
    let (file, path) =
        match crate::discovery::open_executable(&ask.root, ask.pid, ask.uid, ask.start_time) {
            Ok(x) => x,
            Err(e) => {
                tracing::info!("pid {}: not asking its version: {e}", ask.pid);
                return None;
            }
        };
    // The child inherits the descriptor across fork and execs it before close-on-exec applies.
    let mut cmd = tokio::process::Command::new(format!("/proc/self/fd/{}", file.as_raw_fd()));
    cmd.arg0(&path)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    if let Some(home) = &ask.home {
        cmd.env("HOME", home);
    }
    let out = tokio::time::timeout(limit, cmd.output()).await.ok()?.ok()?;
    drop(file);
    volee_harness::profile::version_line(&String::from_utf8_lossy(&out.stdout))
}

/// The session id a harness process publishes: its harness's session file (Claude and Qwen
/// `sessions/<pid>.json`, Grok `active_sessions.json`, under the process's own HOME), else a
/// transcript it holds open (Codex's rollout file; Copilot's `inuse.<pid>.hold`), else Copilot's
/// `inuse.<pid>.lock`. Never the newest transcript on disk: with two
/// agents in one folder that guess is wrong half the time.
fn published_session_id(
    root: &volee_procscan::ProcRoot,
    harness: &str,
    pid: u32,
    env: &[(String, String)],
) -> Option<String> {
    let home = env
        .iter()
        .find(|(k, _)| k == "HOME")
        .map(|(_, v)| v.as_str());
    home.and_then(|home| {
        let path = volee_harness::listing::session_file(harness, Path::new(home), pid)?;
        let text = std::fs::read_to_string(path).ok()?;
        volee_harness::listing::parse_session_id(harness, &text, pid)
    })
    .or_else(|| {
        if !volee_harness::listing::holds_transcript_open(harness) {
            return None;
        }
        root.open_files(pid)
            .iter()
            .find_map(|p| volee_harness::listing::session_id_from_open_file(harness, p))
    })
    .or_else(|| volee_harness::listing::session_id_from_lock_files(harness, env, pid))
}

/// Every pane of a tmux server (for placing discovered processes); empty when it does not answer.
async fn list_all_panes(socket: &Path) -> Vec<crate::discovery::PaneInfo> {
    let format = fields_format(&[
        "pane_id",
        "pane_pid",
        "pane_tty",
        "session_name",
        "window_id",
    ]);
    let Ok(text) = TmuxServer::new(socket)
        .run_async(&["list-panes", "-a", "-F", &format])
        .await
    else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let f = split_fields(line.as_bytes());
            Some(crate::discovery::PaneInfo {
                pane: f.first()?.clone(),
                pid: f.get(1)?.parse().ok()?,
                tty: f.get(2)?.clone(),
                session: f.get(3)?.clone(),
                window: f.get(4)?.clone(),
            })
        })
        .collect()
}

/// Sockets in tmux's own directory for this user (`$TMUX_TMPDIR/tmux-UID`, `/tmp` by default),
/// plus the server of `$TMUX`.
fn user_tmux_sockets() -> Vec<PathBuf> {
    use std::os::unix::fs::FileTypeExt;
    let uid = nix::unistd::getuid().as_raw();
    let default = volee_tmux::connection::default_socket(
        None,
        std::env::var("TMUX_TMPDIR").ok().as_deref(),
        uid,
    );
    let mut sockets: Vec<PathBuf> = default
        .parent()
        .and_then(|dir| std::fs::read_dir(dir).ok())
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_socket()))
        .map(|e| e.path())
        .collect();
    if let Ok(tmux) = std::env::var("TMUX") {
        sockets.push(volee_tmux::connection::default_socket(
            Some(&tmux),
            None,
            uid,
        ));
    }
    sockets
}

fn host_socket(host: &Host) -> Option<&Path> {
    match host {
        Host::Tmux { socket, .. } => Some(Path::new(socket)),
        _ => None,
    }
}

fn resolve_error(e: volee_core::ResolveError) -> Response {
    let hints = match &e {
        volee_core::ResolveError::Unknown { .. } => {
            vec!["list agents with: volee ls --all".to_string()]
        }
        volee_core::ResolveError::Ambiguous { .. } => {
            vec!["type more of the id, or use the exact name".to_string()]
        }
    };
    user_error(&e.to_string(), hints)
}

/// Signal the agent's whole process group (tmux makes the pane's process a group leader).
fn signal_group(pid: u32, signal: Signal) {
    let Ok(raw) = i32::try_from(pid) else { return };
    if kill(Pid::from_raw(-raw), signal).is_err() {
        let _ = kill(Pid::from_raw(raw), signal);
    }
}

/// Hand the caller's cwd and environment to `volee pane-exec`: NUL-separated, 0600, renamed into
/// place so the pane never reads half a file; the pane deletes it at once.
/// A fresh hook token: 256 bits from the kernel, as hex.
fn new_hook_token() -> std::io::Result<volee_protocol::HookToken> {
    volee_os::random::hex(32).map(volee_protocol::HookToken)
}

/// The last `cap` ids seen, oldest forgotten first.
struct RecentIds {
    order: std::collections::VecDeque<String>,
    seen: HashSet<String>,
    cap: usize,
}

impl RecentIds {
    fn new(cap: usize) -> RecentIds {
        RecentIds {
            order: std::collections::VecDeque::new(),
            seen: HashSet::new(),
            cap,
        }
    }

    /// Remember `id`; false when it was seen already.
    fn insert(&mut self, id: &str) -> bool {
        if self.seen.contains(id) {
            return false;
        }
        if self.order.len() >= self.cap {
            if let Some(old) = self.order.pop_front() {
                self.seen.remove(&old);
            }
        }
        self.order.push_back(id.to_string());
        self.seen.insert(id.to_string());
        true
    }
}

fn write_env_file(path: &Path, cwd: &str, env: &[(String, String)]) -> std::io::Result<()> {
    let mut bytes = Vec::new();
    bytes.extend_from_slice(cwd.as_bytes());
    bytes.push(0);
    for (k, v) in env {
        if k.is_empty() || k.contains('=') || k.contains('\0') || v.contains('\0') {
            continue;
        }
        bytes.extend_from_slice(k.as_bytes());
        bytes.push(b'=');
        bytes.extend_from_slice(v.as_bytes());
        bytes.push(0);
    }
    persist::write_atomic(path, &bytes).map_err(|e| std::io::Error::other(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_ids_count_a_repeat_once_and_stay_bounded() {
        let mut ids = RecentIds::new(2);
        assert!(ids.insert("a"));
        assert!(!ids.insert("a"), "a repeat is seen");
        assert!(ids.insert("b"));
        assert!(ids.insert("c"), "the oldest is forgotten");
        assert_eq!(ids.order.len(), 2);
        assert_eq!(ids.seen.len(), 2);
        assert!(ids.insert("a"));
        assert!(!ids.insert("c"));
    }

    #[test]
    fn hook_tokens_are_long_random_and_never_printed() {
        let (a, b) = (new_hook_token().unwrap(), new_hook_token().unwrap());
        assert_eq!(a.0.len(), 64, "256 bits as hex");
        assert_ne!(a, b);
        assert!(!format!("{a:?}").contains(&a.0));
        assert!(a.matches(Some(&a.clone())));
        assert!(!a.matches(Some(&b)));
        assert!(!a.matches(None));
        assert!(!a.matches(Some(&volee_protocol::HookToken(a.0[..63].to_string()))));
    }

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

    #[test]
    fn zombie_stat_gives_the_wait_status() {
        let exited = "15890 (s h) x) Z 1 15890 15890 0 -1 4227084 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 768";
        assert_eq!(parse_zombie_stat(exited), Some((Some(3), None)));
        let killed = exited.replace(" 768", " 9");
        assert_eq!(parse_zombie_stat(&killed), Some((None, Some(9))));
        let running = exited.replace(") Z ", ") S ");
        assert_eq!(parse_zombie_stat(&running), None);
        assert_eq!(parse_zombie_stat("garbage"), None);
    }

    #[test]
    fn pane_rows_survive_quotes_in_fields() {
        let line = [
            "%3",
            "42",
            "work's",
            "@1",
            "0",
            "",
            "",
            "ab12",
            "na'me",
            "generic",
            "/tmp",
            "sh -c 'x'",
            "1796012403",
        ]
        .join("\x1f");
        let rows = parse_pane_rows(&line);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].session, "work's");
        assert_eq!(rows[0].agent, "ab12");
        assert_eq!(rows[0].start_command, "sh -c 'x'");
    }
}
