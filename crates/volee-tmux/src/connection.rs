//! One control-mode client (`tmux -C attach`) per tmux session that holds watched agents.
//!
//! The daemon owns these connections. Notifications go to an event channel; commands are written
//! to the client's stdin and answered through a oneshot in the order tmux replies (only blocks
//! flagged as coming from this client count: the attach command's own block is flagged 0).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};

use crate::control::{ControlEvent, ControlParser};

/// Identifies a connection: which server, which session.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionKey {
    pub socket: PathBuf,
    pub session: String,
}

/// What a connection reports to its owner.
#[derive(Debug)]
pub enum ConnectionEvent {
    Event(SessionKey, ControlEvent),
    /// The control client ended (session destroyed, server gone, or killed). The number is the
    /// connection's [`ControlConnection::serial`]: a newer connection may hold the same key.
    Closed(SessionKey, u64),
}

/// A command's reply block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandReply {
    pub ok: bool,
    pub lines: Vec<Vec<u8>>,
}

impl CommandReply {
    /// The reply lines as lossy UTF-8 text, one per line.
    pub fn text(&self) -> String {
        self.lines
            .iter()
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Why a command got no reply.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    #[error("could not start tmux for session {session:?}")]
    Spawn {
        session: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the control connection to session {session:?} is closed")]
    Closed { session: String },
}

struct Pending {
    line: String,
    reply: oneshot::Sender<CommandReply>,
}

/// Sends commands on a connection; cheap to clone.
#[derive(Clone)]
pub struct CommandSender {
    session: String,
    commands: mpsc::UnboundedSender<Pending>,
}

impl CommandSender {
    /// Send one command line; the receiver yields its reply.
    pub fn send(&self, line: String) -> Result<oneshot::Receiver<CommandReply>, ConnectionError> {
        let (reply, rx) = oneshot::channel();
        self.commands
            .send(Pending { line, reply })
            .map_err(|_| ConnectionError::Closed {
                session: self.session.clone(),
            })?;
        Ok(rx)
    }
}

static NEXT_SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Handle to a running control client. Dropping it ends the client.
pub struct ControlConnection {
    key: SessionKey,
    serial: u64,
    commands: mpsc::UnboundedSender<Pending>,
    pid: Option<u32>,
}

impl ControlConnection {
    /// Attach a control client to `session` on the server at `socket`.
    pub fn open(
        key: SessionKey,
        events: mpsc::UnboundedSender<ConnectionEvent>,
    ) -> Result<ControlConnection, ConnectionError> {
        let mut child = Command::new("tmux")
            .arg("-S")
            .arg(&key.socket)
            .args(["-C", "attach-session", "-f", "ignore-size", "-t"])
            .arg(format!("={}", key.session))
            .env_remove("TMUX")
            .env_remove("TMUX_PANE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| ConnectionError::Spawn {
                session: key.session.clone(),
                source,
            })?;
        let pid = child.id();
        let serial = NEXT_SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(
            key.clone(),
            serial,
            child_io(&mut child),
            child,
            rx,
            events,
        ));
        Ok(ControlConnection {
            key,
            serial,
            commands: tx,
            pid,
        })
    }

    pub fn key(&self) -> &SessionKey {
        &self.key
    }

    /// Unique among the connections of this process (tells a replaced connection's `Closed` from
    /// the current one's).
    pub fn serial(&self) -> u64 {
        self.serial
    }

    /// The control client's process id (to recognise it in `list-clients`).
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// True while the client runs.
    pub fn is_open(&self) -> bool {
        !self.commands.is_closed()
    }

    /// Send one command line (already quoted, see [`crate::format::command_line`]); the returned
    /// receiver yields its reply.
    pub fn send(&self, line: String) -> Result<oneshot::Receiver<CommandReply>, ConnectionError> {
        self.handle().send(line)
    }

    /// A cloneable sender for tasks that send commands later.
    pub fn handle(&self) -> CommandSender {
        CommandSender {
            session: self.key.session.clone(),
            commands: self.commands.clone(),
        }
    }

    /// Send a command and wait for its reply.
    pub async fn request(&self, line: String) -> Result<CommandReply, ConnectionError> {
        let rx = self.send(line)?;
        rx.await.map_err(|_| ConnectionError::Closed {
            session: self.key.session.clone(),
        })
    }
}

type ChildIo = (
    Option<tokio::process::ChildStdin>,
    Option<tokio::process::ChildStdout>,
);

fn child_io(child: &mut Child) -> ChildIo {
    (child.stdin.take(), child.stdout.take())
}

async fn run(
    key: SessionKey,
    serial: u64,
    (stdin, stdout): ChildIo,
    child: Child,
    mut commands: mpsc::UnboundedReceiver<Pending>,
    events: mpsc::UnboundedSender<ConnectionEvent>,
) {
    let (Some(mut stdin), Some(mut stdout)) = (stdin, stdout) else {
        let _ = events.send(ConnectionEvent::Closed(key, serial));
        return;
    };
    let mut parser = ControlParser::new();
    let mut waiting: VecDeque<oneshot::Sender<CommandReply>> = VecDeque::new();
    // Commands written before the attach completes run without a client ("no current client"),
    // so they wait for the attach command's own reply block (the one not flagged as ours).
    let mut attached = false;
    let mut held: Vec<Pending> = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        tokio::select! {
            read = stdout.read(&mut buf) => {
                let n = match read {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                for event in parser.feed(&buf[..n]) {
                    match event {
                        ControlEvent::Reply { ok, lines, from_client: true, .. } => {
                            if let Some(tx) = waiting.pop_front() {
                                let _ = tx.send(CommandReply { ok, lines });
                            }
                        }
                        ControlEvent::Reply { .. } => {
                            if !attached {
                                attached = true;
                                for pending in std::mem::take(&mut held) {
                                    if write_command(&mut stdin, pending, &mut waiting).await.is_err() {
                                        return finish(key, serial, stdin, child, events).await;
                                    }
                                }
                            }
                        }
                        other => {
                            if events.send(ConnectionEvent::Event(key.clone(), other)).is_err() {
                                return;
                            }
                        }
                    }
                }
            }
            cmd = commands.recv() => {
                let Some(pending) = cmd else { break };
                if !attached {
                    held.push(pending);
                } else if write_command(&mut stdin, pending, &mut waiting).await.is_err() {
                    break;
                }
            }
        }
    }
    finish(key, serial, stdin, child, events).await;
}

async fn write_command(
    stdin: &mut tokio::process::ChildStdin,
    Pending { line, reply }: Pending,
    waiting: &mut VecDeque<oneshot::Sender<CommandReply>>,
) -> std::io::Result<()> {
    let mut bytes = line.into_bytes();
    bytes.push(b'\n');
    stdin.write_all(&bytes).await?;
    waiting.push_back(reply);
    Ok(())
}

async fn finish(
    key: SessionKey,
    serial: u64,
    stdin: tokio::process::ChildStdin,
    mut child: Child,
    events: mpsc::UnboundedSender<ConnectionEvent>,
) {
    // Closing stdin detaches the control client; kill it in case it lingers.
    drop(stdin);
    let _ = child.start_kill();
    let _ = child.wait().await;
    let _ = events.send(ConnectionEvent::Closed(key, serial));
}

/// The default server socket, as tmux itself finds it: `$TMUX` inside tmux, else
/// `$TMUX_TMPDIR/tmux-UID/default` (`/tmp` when unset).
pub fn default_socket(tmux_env: Option<&str>, tmux_tmpdir: Option<&str>, uid: u32) -> PathBuf {
    if let Some(path) = tmux_env
        .and_then(|t| t.split(',').next())
        .filter(|p| !p.is_empty())
    {
        return PathBuf::from(path);
    }
    let dir = tmux_tmpdir.filter(|d| !d.is_empty()).unwrap_or("/tmp");
    Path::new(dir).join(format!("tmux-{uid}")).join("default")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_socket_follows_tmux_rules() {
        assert_eq!(
            default_socket(Some("/tmp/tmux-0/work,123,4"), None, 0),
            PathBuf::from("/tmp/tmux-0/work")
        );
        assert_eq!(
            default_socket(None, Some("/run/x"), 1000),
            PathBuf::from("/run/x/tmux-1000/default")
        );
        assert_eq!(
            default_socket(Some(""), None, 7),
            PathBuf::from("/tmp/tmux-7/default")
        );
    }
}
