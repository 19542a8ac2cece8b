//! Watching one zellij session that holds agents: the volee plugin's event stream when a plugin
//! runs (a client is attached and `load_plugins` names volee's plugin), else — headless, or a
//! user without the plugin — `zellij action list-panes --json` once a second (titles, exits) and
//! one `zellij subscribe` over the agents' panes (screen text, which is also the activity).
//!
//! One watch per session, owned by the daemon: a `zellij pipe` process for the stream, plus the
//! fallback's processes only while no plugin answers.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use volee_protocol::zellij::{PastSession, PluginCommand, PluginEvent, PIPE_VERSION};
use volee_zellij::{ListedPane, ZellijCli};

/// At most one `Read` command per session in this long: a busy agent in a hidden tab settles
/// many times a second, and each command costs the zellij server ≈5 ms (measured on 0.45.1).
const READ_INTERVAL: Duration = Duration::from_millis(100);

/// What a watch reports to the daemon.
#[derive(Debug)]
pub enum ZellijMsg {
    /// An agent's pty was written to or closed (`ptys`); not tied to a session's watch.
    Pty {
        path: std::path::PathBuf,
        event: super::ptys::PtyEvent,
    },
    /// A line of the plugin's stream (or the headless fallback's equivalent `Screen`).
    Event(PluginEvent),
    /// The headless poll's pane list.
    Panes(Vec<ListedPane>),
    /// A pane's screen from `zellij subscribe`: new output, or (`activity: false`) the first
    /// delivery when the subscription starts.
    Screen {
        pane: u32,
        lines: Vec<String>,
        activity: bool,
    },
    /// The session is gone (every zellij command says so).
    SessionGone,
}

/// The daemon's side of one zellij session.
pub struct ZellijWatch {
    pub cli: ZellijCli,
    /// A plugin said hello on the stream (and the stream is still open).
    plugin_alive: Arc<AtomicBool>,
    /// Terminal panes whose screens the headless fallback subscribes to.
    watched: Arc<Mutex<BTreeSet<u32>>>,
    /// The last `Agents` command sent to the plugins (to send only changes).
    last_agents: String,
    /// The last `Sessions` command sent to the plugins (to send only changes).
    last_sessions: String,
    /// A plugin of another protocol version answered: its version and what to do.
    mismatch: Option<(u32, String)>,
    /// The newest `Agents` command for the plugins; one task sends it, skipping any that a newer
    /// one replaced while a send was under way.
    agents_tx: tokio::sync::watch::Sender<Option<PluginCommand>>,
    /// The newest `Sessions` command, sent the same way by a task of its own.
    sessions_tx: tokio::sync::watch::Sender<Option<PluginCommand>>,
    /// Panes to read now ([`PluginCommand::Read`], batched and paced by one task).
    read_tx: mpsc::UnboundedSender<u32>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for ZellijWatch {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl ZellijWatch {
    /// Start watching `cli`'s session; messages arrive on `tx` tagged with the session name.
    pub fn start(cli: ZellijCli, tx: mpsc::UnboundedSender<(String, ZellijMsg)>) -> ZellijWatch {
        let plugin_alive = Arc::new(AtomicBool::new(false));
        let watched = Arc::new(Mutex::new(BTreeSet::new()));
        let stream = tokio::spawn(stream_task(cli.clone(), plugin_alive.clone(), tx.clone()));
        let fallback = tokio::spawn(fallback_task(
            cli.clone(),
            plugin_alive.clone(),
            watched.clone(),
            tx,
        ));
        let (agents_tx, agents_rx) = tokio::sync::watch::channel(None);
        let sender = tokio::spawn(newest_command_task(cli.clone(), agents_rx));
        let (sessions_tx, sessions_rx) = tokio::sync::watch::channel(None);
        let sessions_sender = tokio::spawn(newest_command_task(cli.clone(), sessions_rx));
        let (read_tx, read_rx) = mpsc::unbounded_channel();
        let reader = tokio::spawn(reads_task(cli.clone(), read_rx));
        ZellijWatch {
            cli,
            plugin_alive,
            watched,
            last_agents: String::new(),
            last_sessions: String::new(),
            mismatch: None,
            agents_tx,
            sessions_tx,
            read_tx,
            tasks: vec![stream, fallback, sender, sessions_sender, reader],
        }
    }

    /// Have the plugins show these agents and watch these panes, when that changed (the newest
    /// command wins).
    pub fn send_agents(&mut self, agents: &[volee_protocol::AgentView], watch: Vec<u32>) {
        let command = PluginCommand::Agents {
            version: PIPE_VERSION,
            agents: agents.to_vec(),
            watch,
        };
        let Ok(json) = serde_json::to_string(&command) else {
            return;
        };
        if json == self.last_agents {
            return;
        }
        self.last_agents = json;
        self.agents_tx.send_replace(Some(command));
    }

    /// Have the plugins list these past sessions, when that changed (the newest list wins).
    pub fn send_sessions(&mut self, sessions: &[PastSession]) {
        let command = PluginCommand::Sessions {
            version: PIPE_VERSION,
            sessions: sessions.to_vec(),
        };
        let Ok(json) = serde_json::to_string(&command) else {
            return;
        };
        if json == self.last_sessions {
            return;
        }
        self.last_sessions = json;
        self.sessions_tx.send_replace(Some(command));
    }

    /// Have the plugins read `pane` (screen, title, exit) and answer on the stream.
    pub fn read(&self, pane: u32) {
        let _ = self.read_tx.send(pane);
    }

    /// A plugin said hello on the stream (and the stream is still open).
    pub fn plugin_alive(&self) -> bool {
        self.plugin_alive.load(Ordering::SeqCst)
    }

    /// A plugin (re)connected: it must be told the agents and the past sessions again.
    pub fn plugin_hello(&mut self) {
        self.last_agents.clear();
        self.last_sessions.clear();
        self.mismatch = None;
    }

    /// A plugin of another protocol version answered.
    pub fn plugin_mismatch(&mut self, plugin_version: u32, hint: String) {
        self.mismatch = Some((plugin_version, hint));
    }

    /// Whether volee's plugin runs in this session, as the daemon last heard.
    pub fn plugin_state(&self) -> volee_protocol::PluginState {
        match (&self.mismatch, self.plugin_alive()) {
            (_, true) => volee_protocol::PluginState::Running,
            (Some((plugin_version, hint)), false) => volee_protocol::PluginState::Mismatch {
                plugin_version: *plugin_version,
                hint: hint.clone(),
            },
            (None, false) => volee_protocol::PluginState::Missing,
        }
    }

    /// The agents' panes in this session.
    pub fn set_watched(&self, panes: BTreeSet<u32>) {
        if let Ok(mut w) = self.watched.lock() {
            *w = panes;
        }
    }
}

/// Keep a `zellij pipe --name volee-stream` open and forward its lines. A plugin that answers
/// blocks the pipe's input, so the process lives as long as the plugin does; when it ends (no
/// plugin, the plugin reloaded, the session gone) it is opened again after a pause.
async fn stream_task(
    cli: ZellijCli,
    plugin_alive: Arc<AtomicBool>,
    tx: mpsc::UnboundedSender<(String, ZellijMsg)>,
) {
    let session = cli.session().to_string();
    loop {
        match cli.spawn_stream() {
            Ok(mut child) => {
                // zellij delivers the pipe to the plugins only with its first line of input;
                // the rest of stdin stays open (and unwritten) for as long as the stream lives.
                let mut stdin = child.stdin.take();
                if let Some(input) = stdin.as_mut() {
                    use tokio::io::AsyncWriteExt;
                    let _ = input.write_all(b"volee\n").await;
                    let _ = input.flush().await;
                }
                if let Some(stdout) = child.stdout.take() {
                    let mut lines = BufReader::new(stdout).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        match serde_json::from_str::<PluginEvent>(&line) {
                            Ok(event) => {
                                match &event {
                                    PluginEvent::Hello { version, .. }
                                        if *version == PIPE_VERSION =>
                                    {
                                        plugin_alive.store(true, Ordering::SeqCst);
                                    }
                                    PluginEvent::Mismatch { hint, .. } => {
                                        tracing::warn!(
                                            "the volee plugin of zellij session {session:?} speaks another protocol: {hint}"
                                        );
                                    }
                                    _ => {}
                                }
                                if tx.send((session.clone(), ZellijMsg::Event(event))).is_err() {
                                    return;
                                }
                            }
                            Err(e) => tracing::debug!("zellij stream line not understood: {e}"),
                        }
                    }
                }
                drop(stdin);
                let _ = child.kill().await;
                plugin_alive.store(false, Ordering::SeqCst);
            }
            Err(e) => tracing::warn!("cannot run zellij pipe: {e}"),
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// Without a plugin: `list-panes --json` every second and one `zellij subscribe` over the
/// watched panes (restarted when they change).
async fn fallback_task(
    cli: ZellijCli,
    plugin_alive: Arc<AtomicBool>,
    watched: Arc<Mutex<BTreeSet<u32>>>,
    tx: mpsc::UnboundedSender<(String, ZellijMsg)>,
) {
    let session = cli.session().to_string();
    let mut subscribed: BTreeSet<u32> = BTreeSet::new();
    let mut subscriber: Option<JoinHandle<()>> = None;
    let mut missing = 0;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if plugin_alive.load(Ordering::SeqCst) {
            if let Some(s) = subscriber.take() {
                s.abort();
                subscribed.clear();
            }
            continue;
        }
        match cli.list_panes().await {
            Ok(panes) => {
                missing = 0;
                if tx.send((session.clone(), ZellijMsg::Panes(panes))).is_err() {
                    return;
                }
            }
            Err(volee_zellij::ZellijError::NoSession(_)) => {
                missing += 1;
                if missing >= 2 {
                    let _ = tx.send((session.clone(), ZellijMsg::SessionGone));
                    return;
                }
            }
            Err(e) => tracing::debug!("zellij list-panes: {e}"),
        }
        let want = watched.lock().map(|w| w.clone()).unwrap_or_default();
        if want != subscribed || subscriber.as_ref().is_some_and(|s| s.is_finished()) {
            if let Some(s) = subscriber.take() {
                s.abort();
            }
            subscribed = want.clone();
            if !want.is_empty() {
                subscriber = Some(tokio::spawn(subscribe_task(cli.clone(), want, tx.clone())));
            }
        }
    }
}

/// `zellij subscribe --pane-id … --format json`: each update of a pane's viewport becomes a
/// `Screen` message (the first delivery too: it is the screen, though not new output).
async fn subscribe_task(
    cli: ZellijCli,
    panes: BTreeSet<u32>,
    tx: mpsc::UnboundedSender<(String, ZellijMsg)>,
) {
    let session = cli.session().to_string();
    let Ok(mut child) = cli.spawn_subscribe(&panes.iter().copied().collect::<Vec<_>>()) else {
        return;
    };
    let Some(stdout) = child.stdout.take() else {
        return;
    };
    let mut lines = BufReader::new(stdout).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if let Some(update) = volee_zellij::parse_subscribe_line(&line) {
            let msg = ZellijMsg::Screen {
                pane: update.pane,
                lines: update.lines,
                activity: !update.initial,
            };
            if tx.send((session.clone(), msg)).is_err() {
                break;
            }
        }
    }
    let _ = child.kill().await;
}

/// Sends `Read` commands as lines of one long-lived command pipe (opened when first needed, again
/// when it ended or stopped taking lines): the panes asked for meanwhile go in one command, at
/// most one per [`READ_INTERVAL`].
async fn reads_task(cli: ZellijCli, mut rx: mpsc::UnboundedReceiver<u32>) {
    use tokio::io::AsyncWriteExt;
    let mut pipe: Option<(tokio::process::Child, tokio::process::ChildStdin)> = None;
    while let Some(first) = rx.recv().await {
        let mut panes = BTreeSet::from([first]);
        while let Ok(pane) = rx.try_recv() {
            panes.insert(pane);
        }
        let command = PluginCommand::Read {
            version: PIPE_VERSION,
            panes: panes.into_iter().collect(),
        };
        let Ok(mut line) = serde_json::to_string(&command) else {
            continue;
        };
        line.push('\n');
        if pipe.is_none() {
            match cli.spawn_command_pipe() {
                Ok(mut child) => {
                    // The plugins' answers ("ok") are not needed, but must be read.
                    if let Some(stdout) = child.stdout.take() {
                        tokio::spawn(async move {
                            let mut lines = BufReader::new(stdout).lines();
                            while let Ok(Some(_)) = lines.next_line().await {}
                        });
                    }
                    pipe = child.stdin.take().map(|stdin| (child, stdin));
                }
                Err(e) => tracing::warn!("cannot run zellij pipe: {e}"),
            }
        }
        if let Some((_, stdin)) = pipe.as_mut() {
            let written =
                tokio::time::timeout(Duration::from_secs(2), stdin.write_all(line.as_bytes()))
                    .await;
            if !matches!(written, Ok(Ok(()))) {
                tracing::debug!("the zellij command pipe took no more lines: opened again");
                pipe = None;
            }
        }
        tokio::time::sleep(READ_INTERVAL).await;
    }
}

/// Sends the newest command of its kind (`Agents`, `Sessions`) to the plugins, one `zellij pipe`
/// at a time; one replaced while a send was under way is never sent.
async fn newest_command_task(
    cli: ZellijCli,
    mut rx: tokio::sync::watch::Receiver<Option<PluginCommand>>,
) {
    while rx.changed().await.is_ok() {
        let command = rx.borrow_and_update().clone();
        if let Some(command) = command {
            if let Err(e) = cli.pipe_command(&command).await {
                // The error names the command line, whose JSON can be long (the sessions).
                let said: String = e.to_string().chars().take(300).collect();
                tracing::debug!("zellij pipe to the plugin: {said}");
            }
        }
    }
}
