//! One control-mode client (`tmux -C attach`) per tmux session that holds watched agents.
//!
//! The daemon owns these connections. Notifications go to an event channel; commands are written
//! to the client's stdin and answered through a oneshot in the order tmux replies (only blocks
//! flagged as coming from this client count: the attach command's own block is flagged 0).

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};

use crate::control::{ControlEvent, ControlParser};
use crate::format::command_line;
use crate::screen::{layout_panes, PaneGeometry, PaneScreen, GEOMETRY_FORMAT};

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
    /// A check found a pane's screen model different from what tmux shows (a defect of the
    /// model: the model now has tmux's screen).
    ModelDiffered {
        key: SessionKey,
        pane: String,
        model: String,
        tmux: String,
    },
    /// A check of a pane's model ran (whether or not it differed).
    ModelChecked {
        key: SessionKey,
        pane: String,
    },
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

/// What the owner asks of a connection's reader.
enum Request {
    /// A command; its reply goes back.
    Command(Pending),
    /// Model this pane's screen from now on (`true`, seeded from tmux), or stop.
    Model { pane: String, on: bool },
    /// Compare the pane's model with what tmux shows, and take tmux's.
    Check { pane: String },
    /// The modelled pane's screen text, at this point of the stream.
    Screen {
        pane: String,
        reply: oneshot::Sender<Option<String>>,
    },
}

/// Sends commands on a connection; cheap to clone.
#[derive(Clone)]
pub struct CommandSender {
    session: String,
    commands: mpsc::UnboundedSender<Request>,
}

impl CommandSender {
    /// Send one command line; the receiver yields its reply.
    pub fn send(&self, line: String) -> Result<oneshot::Receiver<CommandReply>, ConnectionError> {
        let (reply, rx) = oneshot::channel();
        self.request(Request::Command(Pending { line, reply }))?;
        Ok(rx)
    }

    /// Keep a screen model of `pane` (`%N`) from its output, seeded from tmux now; or stop.
    pub fn model(&self, pane: &str, on: bool) -> Result<(), ConnectionError> {
        self.request(Request::Model {
            pane: pane.to_owned(),
            on,
        })
    }

    /// Compare `pane`'s model with tmux's screen and take tmux's; a difference is reported as
    /// [`ConnectionEvent::ModelDiffered`].
    pub fn check(&self, pane: &str) -> Result<(), ConnectionError> {
        self.request(Request::Check {
            pane: pane.to_owned(),
        })
    }

    /// `pane`'s modelled screen: None when it is not modelled or not seeded yet (ask tmux).
    pub async fn screen(&self, pane: &str) -> Option<String> {
        let (reply, rx) = oneshot::channel();
        self.request(Request::Screen {
            pane: pane.to_owned(),
            reply,
        })
        .ok()?;
        rx.await.ok().flatten()
    }

    fn request(&self, request: Request) -> Result<(), ConnectionError> {
        self.commands
            .send(request)
            .map_err(|_| ConnectionError::Closed {
                session: self.session.clone(),
            })
    }
}

static NEXT_SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Handle to a running control client. Dropping it ends the client.
pub struct ControlConnection {
    key: SessionKey,
    serial: u64,
    commands: mpsc::UnboundedSender<Request>,
    pid: Option<u32>,
}

impl ControlConnection {
    /// Attach a control client to `session` on the server at `socket`.
    pub fn open(
        key: SessionKey,
        events: mpsc::UnboundedSender<ConnectionEvent>,
    ) -> Result<ControlConnection, ConnectionError> {
        // `-u`: replies in UTF-8 whatever the daemon's locale (server.rs: `TmuxServer::command`).
        let mut child = Command::new("tmux")
            .arg("-u")
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
        let (stdin, stdout) = child_io(&mut child);
        let reader = Reader {
            key: key.clone(),
            serial,
            parser: ControlParser::new(),
            waiting: VecDeque::new(),
            seeding: HashMap::new(),
            events,
        };
        tokio::spawn(reader.run(stdin, stdout, child, rx));
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

/// Who a reply block is for: a caller, or one step of seeding a pane's model (the geometry,
/// the visible screen, the normal screen behind an alternate one, asked back to back).
enum Waiter {
    Caller(oneshot::Sender<CommandReply>),
    Geometry(String),
    Visible(String),
    Main(String),
}

/// A seed being collected: the replies so far, and whether a difference from the model is a
/// defect to report (a check) or expected (a resize: tmux reflows, the model cuts).
#[derive(Default)]
struct Seed {
    geometry: Option<PaneGeometry>,
    visible: Option<Vec<Vec<u8>>>,
    report: bool,
}

/// The reading side of one connection: tmux's stream in, events out, commands and seeds in the
/// order tmux answers them.
struct Reader {
    key: SessionKey,
    serial: u64,
    parser: ControlParser,
    waiting: VecDeque<Waiter>,
    seeding: HashMap<String, Seed>,
    events: mpsc::UnboundedSender<ConnectionEvent>,
}

impl Reader {
    async fn run(
        mut self,
        stdin: Option<tokio::process::ChildStdin>,
        stdout: Option<tokio::process::ChildStdout>,
        child: Child,
        mut requests: mpsc::UnboundedReceiver<Request>,
    ) {
        let (Some(mut stdin), Some(mut stdout)) = (stdin, stdout) else {
            let _ = self
                .events
                .send(ConnectionEvent::Closed(self.key, self.serial));
            return;
        };
        let mut attached = false;
        let mut held: Vec<Request> = Vec::new();
        let mut out: Vec<u8> = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            tokio::select! {
                read = stdout.read(&mut buf) => {
                    let n = match read {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    if !self.read(&buf[..n], &mut attached, &mut held, &mut out) {
                        return;
                    }
                }
                request = requests.recv() => {
                    let Some(request) = request else { break };
                    if attached {
                        self.handle(request, &mut out);
                    } else {
                        held.push(request);
                    }
                }
            }
            if !out.is_empty() && stdin.write_all(&out).await.is_err() {
                break;
            }
            out.clear();
        }
        drop(stdin);
        finish(self.key, self.serial, child, self.events).await;
    }

    /// Take bytes read from tmux: replies to their waiters, notifications out as events.
    /// Returns false once nobody listens any more. A reply is handled before the lines after it
    /// are parsed, so a seed replaces the model at its place in the stream, not after output that
    /// followed it in the same read (seen: a read holding a seed's last reply and then output).
    fn read(
        &mut self,
        bytes: &[u8],
        attached: &mut bool,
        held: &mut Vec<Request>,
        out: &mut Vec<u8>,
    ) -> bool {
        let mut rest = bytes;
        while !rest.is_empty() {
            let (events, used) = self.parser.feed_to_reply(rest);
            rest = &rest[used..];
            for event in events {
                match event {
                    ControlEvent::Reply {
                        ok,
                        lines,
                        from_client: true,
                        ..
                    } => self.reply(ok, lines),
                    ControlEvent::Reply { .. } => {
                        // Commands written before the attach completes run without a client
                        // ("no current client"), so they wait for the attach command's own
                        // reply block (the one not flagged as ours).
                        if !*attached {
                            *attached = true;
                            for request in std::mem::take(held) {
                                self.handle(request, out);
                            }
                        }
                    }
                    other => {
                        self.notice(&other, out);
                        let event = ConnectionEvent::Event(self.key.clone(), other);
                        if self.events.send(event).is_err() {
                            return false;
                        }
                    }
                }
            }
        }
        true
    }

    /// Queue command `line` (its reply goes to `waiter`) for the next write.
    fn write(&mut self, line: &str, waiter: Waiter, out: &mut Vec<u8>) {
        out.extend_from_slice(line.as_bytes());
        out.push(b'\n');
        self.waiting.push_back(waiter);
    }

    fn handle(&mut self, request: Request, out: &mut Vec<u8>) {
        match request {
            Request::Command(Pending { line, reply }) => {
                self.write(&line, Waiter::Caller(reply), out);
            }
            Request::Model { pane, on } => {
                let was = self.parser.is_modelled(&pane);
                self.parser.model_pane(&pane, on);
                if on && !was {
                    self.seed(&pane, false, out);
                }
            }
            Request::Check { pane } => {
                if self.parser.is_modelled(&pane) {
                    self.seed(&pane, true, out);
                }
            }
            Request::Screen { pane, reply } => {
                let _ = reply.send(self.parser.screen(&pane).map(PaneScreen::text));
            }
        }
    }

    /// Ask tmux for `pane`'s screen, to (re)seed its model: three commands written together, so
    /// tmux runs them back to back with no output of the pane in between.
    fn seed(&mut self, pane: &str, report: bool, out: &mut Vec<u8>) {
        if let Some(seed) = self.seeding.get_mut(pane) {
            seed.report |= report;
            return;
        }
        let (Ok(geometry), Ok(visible), Ok(main)) = (
            command_line(&["display-message", "-p", "-t", pane, GEOMETRY_FORMAT]),
            command_line(&["capture-pane", "-p", "-e", "-J", "-t", pane]),
            command_line(&["capture-pane", "-p", "-e", "-J", "-a", "-q", "-t", pane]),
        ) else {
            return;
        };
        self.seeding.insert(
            pane.to_owned(),
            Seed {
                report,
                ..Seed::default()
            },
        );
        self.write(&geometry, Waiter::Geometry(pane.to_owned()), out);
        self.write(&visible, Waiter::Visible(pane.to_owned()), out);
        self.write(&main, Waiter::Main(pane.to_owned()), out);
    }

    fn reply(&mut self, ok: bool, lines: Vec<Vec<u8>>) {
        let Some(waiter) = self.waiting.pop_front() else {
            return;
        };
        match waiter {
            Waiter::Caller(tx) => {
                let _ = tx.send(CommandReply { ok, lines });
            }
            Waiter::Geometry(pane) => {
                if let Some(seed) = self.seeding.get_mut(&pane) {
                    seed.geometry = lines
                        .first()
                        .filter(|_| ok)
                        .and_then(|l| PaneGeometry::parse(&String::from_utf8_lossy(l)));
                }
            }
            Waiter::Visible(pane) => {
                if let Some(seed) = self.seeding.get_mut(&pane) {
                    seed.visible = ok.then_some(lines);
                }
            }
            Waiter::Main(pane) => {
                // The last step: the seed is complete, or a step failed (the pane is gone) and
                // the model stays as it was.
                let Some(seed) = self.seeding.remove(&pane) else {
                    return;
                };
                let (Some(geometry), Some(visible)) = (seed.geometry, seed.visible) else {
                    return;
                };
                if geometry.alternate && !ok {
                    return;
                }
                let main = geometry.alternate.then_some(lines.as_slice());
                let screen = PaneScreen::seeded(geometry, main, &visible);
                let tmux = screen.text();
                let differed = self.parser.seed(&pane, screen);
                if !seed.report {
                    return;
                }
                if let Some(model) = differed {
                    let _ = self.events.send(ConnectionEvent::ModelDiffered {
                        key: self.key.clone(),
                        pane: pane.clone(),
                        model,
                        tmux,
                    });
                }
                let _ = self.events.send(ConnectionEvent::ModelChecked {
                    key: self.key.clone(),
                    pane,
                });
            }
        }
    }

    /// What the reader itself does about a notification: a resized modelled pane is seeded
    /// again at its new size; a paused one is resumed (and seeded: its output was dropped).
    fn notice(&mut self, event: &ControlEvent, out: &mut Vec<u8>) {
        match event {
            ControlEvent::LayoutChange { layout, .. } => {
                for (id, cols, rows) in layout_panes(layout) {
                    let pane = format!("%{id}");
                    let resized = self
                        .parser
                        .screen(&pane)
                        .is_some_and(|s| s.size() != (rows, cols));
                    if resized {
                        self.seed(&pane, false, out);
                    }
                }
            }
            ControlEvent::Pause { pane } => {
                if let Ok(line) =
                    command_line(&["refresh-client", "-A", &format!("{pane}:continue")])
                {
                    let (reply, _) = oneshot::channel();
                    self.write(&line, Waiter::Caller(reply), out);
                }
                if self.parser.is_modelled(pane) {
                    self.seed(pane, false, out);
                }
            }
            _ => {}
        }
    }
}

async fn finish(
    key: SessionKey,
    serial: u64,
    mut child: Child,
    events: mpsc::UnboundedSender<ConnectionEvent>,
) {
    // Closing stdin (done by the caller) detaches the control client; kill it in case it
    // lingers.
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
