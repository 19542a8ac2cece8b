//! The daemon's kept connection to one machine (docs/adr/0013): one `ssh` ControlMaster running
//! `volee serve --stdio` there, its hello checked, requests written down it by id and answers
//! matched back, the machine's agent lists passed on; when it ends, every waiting request is
//! answered with why, and it is opened again after a backoff (1 s doubling to 30 s; 60 s for a
//! remote of another protocol, which only an update there mends).
//!
//! What comes back is hostile: lines are bounded ([`MAX_FRAME_BYTES`]), a line that does not
//! parse is logged (the first few) and skipped, ssh's stderr is kept bounded and control-free.
//! Agent views are cleaned by the daemon before anything shows them.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};
use volee_protocol::remote::{
    RemoteFrame, RemoteHello, RemoteRequest, MAX_FRAME_BYTES, MAX_HELLO_BYTES,
};
use volee_protocol::{AgentView, ErrorKind, Request, Response, PROTOCOL_VERSION};

use super::ssh::{SshOptions, SERVE_COMMAND};
use super::Machine;

/// How long the hello may take after ssh starts (connect, log in, start volee).
const HELLO_DEADLINE: Duration = Duration::from_secs(20);
/// Backoff between attempts: from the first to the most.
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// A remote of another protocol is asked again this rarely.
const BACKOFF_INCOMPATIBLE: Duration = Duration::from_secs(60);
/// A connection that lasted this long starts the backoff over.
const STABLE: Duration = Duration::from_secs(30);
/// How much of ssh's stderr is kept for the error message.
const STDERR_KEPT: usize = 4096;
/// Unparsable lines logged per connection (the rest are counted).
const BAD_LINES_LOGGED: u32 = 5;

/// What a link tells the daemon.
#[derive(Debug)]
pub enum LinkEvent {
    /// ssh is starting (an attempt).
    Connecting,
    /// The remote said hello at our protocol.
    Up {
        version: String,
        ssh_pid: Option<u32>,
    },
    /// The machine's agents (every one, ended ones too), as it sent them.
    Agents(Vec<AgentView>),
    /// The connection ended or could not be made; `incompatible`: the remote's protocol.
    Down {
        error: String,
        incompatible: Option<(u32, String)>,
    },
}

/// The daemon's end of a link: requests go down it; dropping it ends the link (and its ssh).
pub struct Link {
    tx: mpsc::UnboundedSender<(Request, oneshot::Sender<Response>)>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Link {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Link {
    /// Start keeping a connection to `machine`, its ControlMaster at `control`.
    pub fn start(
        machine: Machine,
        options: SshOptions,
        control: PathBuf,
        on_event: Arc<dyn Fn(LinkEvent) + Send + Sync>,
    ) -> Link {
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(keep(machine, options, control, rx, on_event));
        Link { tx, task }
    }

    /// Send `request` to the machine; the answer (or why there is none) comes on the receiver.
    pub fn request(&self, request: Request) -> oneshot::Receiver<Response> {
        let (tx, rx) = oneshot::channel();
        if let Err(mpsc::error::SendError((_, tx))) = self.tx.send((request, tx)) {
            let _ = tx.send(unreachable("its connection has ended"));
        }
        rx
    }
}

/// The answer to a request the machine cannot take now.
pub fn unreachable(why: &str) -> Response {
    Response::Error {
        kind: ErrorKind::Environment,
        message: format!("the machine is unreachable: {why}"),
        hints: vec!["volee machine ls".into()],
    }
}

type Requests = mpsc::UnboundedReceiver<(Request, oneshot::Sender<Response>)>;

/// Connect, serve, and connect again, until the daemon drops the link.
async fn keep(
    machine: Machine,
    options: SshOptions,
    control: PathBuf,
    mut requests: Requests,
    on_event: Arc<dyn Fn(LinkEvent) + Send + Sync>,
) {
    let mut backoff = BACKOFF_FIRST;
    loop {
        on_event(LinkEvent::Connecting);
        let started = Instant::now();
        let down = connect_and_serve(&machine, &options, &control, &mut requests, &*on_event).await;
        let wait = if down.incompatible.is_some() {
            BACKOFF_INCOMPATIBLE
        } else if started.elapsed() >= STABLE {
            BACKOFF_FIRST
        } else {
            backoff
        };
        backoff = (wait * 2).min(BACKOFF_MAX);
        tracing::info!(
            "machine {}: {} (again in {} s)",
            machine.name,
            down.error,
            wait.as_secs()
        );
        let message = down.error.clone();
        on_event(LinkEvent::Down {
            error: down.error,
            incompatible: down.incompatible,
        });
        // While down, a request is answered at once: the machine cannot take it.
        let sleep = tokio::time::sleep(wait);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                _ = &mut sleep => break,
                req = requests.recv() => match req {
                    Some((_, reply)) => { let _ = reply.send(unreachable(&message)); }
                    None => return,
                },
            }
        }
    }
}

/// Why a connection ended.
struct Down {
    error: String,
    incompatible: Option<(u32, String)>,
}

impl Down {
    fn new(error: impl Into<String>) -> Down {
        Down {
            error: error.into(),
            incompatible: None,
        }
    }
}

/// A ControlPath left by a master that is gone (a daemon killed with its ssh) would make the new
/// master give up multiplexing: remove it when nothing listens there.
fn clear_stale_control(control: &std::path::Path) {
    use std::os::unix::fs::FileTypeExt;
    let Ok(meta) = std::fs::symlink_metadata(control) else {
        return;
    };
    if meta.file_type().is_socket() && std::os::unix::net::UnixStream::connect(control).is_ok() {
        return;
    }
    let _ = std::fs::remove_file(control);
}

async fn connect_and_serve(
    machine: &Machine,
    options: &SshOptions,
    control: &std::path::Path,
    requests: &mut Requests,
    on_event: &(dyn Fn(LinkEvent) + Send + Sync),
) -> Down {
    clear_stale_control(control);
    let mut child = match Command::new("ssh")
        .args(options.master_args(machine, control, SERVE_COMMAND))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return Down::new(format!("could not run ssh: {e}")),
    };
    let (Some(mut stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Down::new("ssh's pipes were not there");
    };
    let stderr_task = tokio::spawn(keep_tail(stderr));
    let mut reader = BufReader::new(stdout);
    let down = serve(
        machine,
        &mut child,
        &mut stdin,
        &mut reader,
        requests,
        on_event,
    )
    .await;
    drop(stdin);
    let _ = child.start_kill();
    let _ = tokio::time::timeout(Duration::from_secs(2), child.wait()).await;
    let said = match tokio::time::timeout(Duration::from_secs(1), stderr_task).await {
        Ok(Ok(tail)) => tail,
        _ => String::new(),
    };
    if said.is_empty() || down.incompatible.is_some() {
        down
    } else {
        Down {
            error: format!("{}: {said}", down.error),
            incompatible: None,
        }
    }
}

/// The hello, then frames and requests until either side ends.
async fn serve<R: AsyncRead + Unpin>(
    machine: &Machine,
    child: &mut Child,
    stdin: &mut tokio::process::ChildStdin,
    reader: &mut BufReader<R>,
    requests: &mut Requests,
    on_event: &(dyn Fn(LinkEvent) + Send + Sync),
) -> Down {
    let mut line = Vec::new();
    let hello = tokio::time::timeout(
        HELLO_DEADLINE,
        read_line(reader, &mut line, MAX_HELLO_BYTES),
    )
    .await;
    match hello {
        Err(_) => return Down::new("no answer within 20 s"),
        Ok(Err(e)) => return Down::new(e),
        Ok(Ok(false)) => return Down::new("ssh ended before volee said hello"),
        Ok(Ok(true)) => {}
    }
    let hello: RemoteHello = match serde_json::from_slice(&line) {
        Ok(h) => h,
        Err(_) => return Down::new("what answered is not volee serve (no hello line)"),
    };
    line.clear();
    let version = super::ssh::clean_version(&hello.version);
    if hello.protocol != PROTOCOL_VERSION {
        return Down {
            error: format!(
                "volee {version} there speaks protocol {}, this volee speaks {PROTOCOL_VERSION}",
                hello.protocol
            ),
            incompatible: Some((hello.protocol, version)),
        };
    }
    on_event(LinkEvent::Up {
        version,
        ssh_pid: child.id(),
    });
    let mut pending: HashMap<u64, oneshot::Sender<Response>> = HashMap::new();
    let mut next_id: u64 = 1;
    let mut bad_lines: u32 = 0;
    let down = loop {
        tokio::select! {
            read = read_line(reader, &mut line, MAX_FRAME_BYTES) => match read {
                Ok(true) => match serde_json::from_slice::<RemoteFrame>(&std::mem::take(&mut line)) {
                    Ok(RemoteFrame { id: Some(id), response }) => {
                        if let Some(reply) = pending.remove(&id) {
                            let _ = reply.send(response);
                        }
                    }
                    Ok(RemoteFrame { id: None, response: Response::Agents { agents } }) => {
                        on_event(LinkEvent::Agents(agents));
                    }
                    Ok(RemoteFrame { id: None, .. }) => {}
                    Err(e) => {
                        bad_lines += 1;
                        if bad_lines <= BAD_LINES_LOGGED {
                            tracing::warn!("machine {}: an unreadable line: {e}", machine.name);
                        }
                    }
                },
                Ok(false) => break Down::new("the connection ended"),
                Err(e) => break Down::new(e),
            },
            req = requests.recv() => match req {
                Some((request, reply)) => {
                    let id = next_id;
                    next_id += 1;
                    let mut bytes = match serde_json::to_vec(&RemoteRequest { id, request }) {
                        Ok(b) => b,
                        Err(e) => {
                            let _ = reply.send(unreachable(&e.to_string()));
                            continue;
                        }
                    };
                    bytes.push(b'\n');
                    if let Err(e) = stdin.write_all(&bytes).await {
                        let _ = reply.send(unreachable(&e.to_string()));
                        break Down::new(format!("writing to ssh: {e}"));
                    }
                    pending.retain(|_, r| !r.is_closed());
                    pending.insert(id, reply);
                }
                None => break Down::new("the machine was removed"),
            },
            status = child.wait() => {
                break Down::new(match status {
                    Ok(s) => format!("ssh ended ({s})"),
                    Err(e) => format!("ssh: {e}"),
                });
            }
        }
    };
    if bad_lines > BAD_LINES_LOGGED {
        tracing::warn!(
            "machine {}: {bad_lines} unreadable lines in all",
            machine.name
        );
    }
    for (_, reply) in pending {
        let _ = reply.send(unreachable(&down.error));
    }
    down
}

/// One line into `line` (without its end): false at the end of the stream; an error for a line
/// longer than `max` (the connection is dropped: a remote that sends one is not trusted further).
/// Cancel-safe: what a cancelled read got stays in `line`, which the caller clears only after
/// a whole line.
async fn read_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    line: &mut Vec<u8>,
    max: usize,
) -> Result<bool, String> {
    let room = (max + 1).saturating_sub(line.len()).max(1) as u64;
    let n = reader
        .take(room)
        .read_until(b'\n', line)
        .await
        .map_err(|e| format!("reading from ssh: {e}"))?;
    if n == 0 {
        return Ok(false);
    }
    if line.last() == Some(&b'\n') {
        line.pop();
    } else if line.len() > max {
        return Err(format!("the machine sent a line longer than {max} bytes"));
    }
    Ok(true)
}

/// The last [`STDERR_KEPT`] bytes of ssh's stderr, as one control-free line.
async fn keep_tail(stderr: tokio::process::ChildStderr) -> String {
    let mut reader = BufReader::new(stderr);
    let mut tail: Vec<u8> = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                tail.extend_from_slice(&buf[..n]);
                if tail.len() > STDERR_KEPT {
                    tail.drain(..tail.len() - STDERR_KEPT);
                }
            }
        }
    }
    let text = String::from_utf8_lossy(&tail);
    let words: Vec<&str> = text.split_whitespace().collect();
    words
        .join(" ")
        .chars()
        .filter(|c| !c.is_control())
        .take(400)
        .collect()
}
