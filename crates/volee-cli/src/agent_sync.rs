//! `volee agent --sync MACHINE [SESSION_ID…] [--dry-run]`: the sessions of volee's own agent
//! pulled and pushed between this machine and MACHINE (issue 20; docs/store.md, "Sync").
//!
//! One `ssh` of the user's (over the daemon's kept connection when it listens, else its own)
//! runs the fixed line `volee agent --sync-serve` on the machine, which answers newline JSON on
//! its stdout: a hello, then one reply per request (`manifest`, `get`, `put`). Everything it
//! says is hostile: lines are bounded ([`MAX_BUNDLE_LINE`]), ids checked, bundles verified by
//! the store before anything is written, and replacements are compare-and-swap on both sides.
//!
//! What moves is decided by [`plan`] (pure) from both manifests and the record of the last sync
//! with the machine (`STATE/sync/MACHINE.json`: each session's digest here and there as of that
//! sync): a session changed on one side only goes to the other, one changed on both arrives
//! here as a fork (pushed too), one held by a writer or deleted on one side since the last sync
//! is skipped with the reason.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use volee_daemon::machines::ssh::{self, SshMissing, SshOptions};
use volee_daemon::machines::{self, Machine, MachinesFile};
use volee_daemon::persist::{self, Loaded};
use volee_os::error::chain as error_text;
use volee_store::{check_id, is_digest, Bundle, ManifestEntry, Store, StoreError, MAX_BUNDLE_LINE};
use volee_view::text::plain_text;

use crate::ask::paths;
use crate::error::{self, CliError, CliResult, Exit};
use crate::output::out;

/// What the ssh runs on the machine: fixed text, nothing of the user's or the remote's.
pub const SERVE_COMMAND: &str = "volee agent --sync-serve";

/// The sync protocol's version, in the hello; another one is refused with both numbers.
const SYNC_PROTOCOL: u32 = 1;

/// How long the machine may take to say its hello (connect, log in, start volee), and to
/// answer one request (a bundle may be large).
const HELLO_TIMEOUT: Duration = Duration::from_secs(30);
const REPLY_TIMEOUT: Duration = Duration::from_secs(300);

/// The version of the record of syncs with a machine.
const RECORD_VERSION: u32 = 1;

const TITLE_MAX: usize = 40;

// ---------------------------------------------------------------------------------------------
// The wire.

/// The first line `--sync-serve` writes.
#[derive(Debug, Serialize, Deserialize)]
struct Hello {
    volee_sync: u32,
    version: String,
}

/// A request, one line.
#[derive(Debug, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum SyncRequest {
    Manifest,
    Get {
        id: String,
    },
    Put {
        bundle: Bundle,
        #[serde(default)]
        expect: Option<String>,
    },
}

/// `put` as the client writes it (the bundle borrowed, never copied).
#[derive(Serialize)]
struct PutRequest<'a> {
    op: &'static str,
    bundle: &'a Bundle,
    expect: Option<&'a str>,
}

/// A reply, one line.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum SyncReply {
    Manifest(Vec<ManifestEntry>),
    Bundle(Bundle),
    Stored { digest: String },
    Error { kind: RefusalKind, message: String },
}

/// Why the other side refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum RefusalKind {
    /// A writer holds the session there.
    Locked,
    /// The session there is not at the digest the request expected.
    Conflict,
    /// What was sent does not check out (a bad id, a bundle that fails verification).
    Refused,
    /// No such session there.
    Unknown,
    Other,
}

/// Read one line of at most `max` bytes (without its newline); `None` at the end. A longer
/// line is an error and is not buffered; so is an incomplete last line.
fn read_line_bounded(reader: &mut impl BufRead, max: usize) -> std::io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    loop {
        let buf = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return if line.is_empty() {
                Ok(None)
            } else {
                Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the last line is incomplete",
                ))
            };
        }
        let (take, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (buf.len(), false),
        };
        if line.len() + take > max {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("a line longer than {max} bytes"),
            ));
        }
        line.extend_from_slice(&buf[..take]);
        reader.consume(if done { take + 1 } else { take });
        if done {
            return Ok(Some(line));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The machine's side: `volee agent --sync-serve`.

/// `volee agent --sync-serve` (not for use by hand): answer sync requests on stdin/stdout from `store` until
/// stdin ends. Run on a machine by `--sync` over ssh.
pub fn serve(store: &Store) -> CliResult {
    let mut input = BufReader::with_capacity(1 << 16, std::io::stdin().lock());
    let mut output = std::io::stdout().lock();
    let hello = Hello {
        volee_sync: SYNC_PROTOCOL,
        version: env!("CARGO_PKG_VERSION").into(),
    };
    if write_line(&mut output, &hello).is_err() {
        return Ok(());
    }
    loop {
        let line = match read_line_bounded(&mut input, MAX_BUNDLE_LINE) {
            Ok(Some(line)) => line,
            Ok(None) => return Ok(()),
            Err(e) => {
                // The framing is lost: say why and end.
                let _ = write_line(
                    &mut output,
                    &SyncReply::Error {
                        kind: RefusalKind::Refused,
                        message: format!("could not read the request: {e}"),
                    },
                );
                return Err(CliError::user(format!(
                    "--sync-serve: could not read a request: {e}"
                )));
            }
        };
        let reply = answer(store, &line);
        if write_line(&mut output, &reply).is_err() {
            // The other side went away.
            return Ok(());
        }
    }
}

/// The reply to one request line.
fn answer(store: &Store, line: &[u8]) -> SyncReply {
    let request = match serde_json::from_slice::<SyncRequest>(line) {
        Ok(r) => r,
        Err(e) => {
            return SyncReply::Error {
                kind: RefusalKind::Refused,
                message: format!("not a sync request: {e}"),
            }
        }
    };
    let result = match request {
        SyncRequest::Manifest => store.sync_manifest().map(SyncReply::Manifest),
        SyncRequest::Get { id } => check_id(&id)
            .and_then(|()| store.export_bundle(&id))
            .map(SyncReply::Bundle),
        SyncRequest::Put { bundle, expect } => {
            if expect.as_deref().is_some_and(|d| !is_digest(d)) {
                return SyncReply::Error {
                    kind: RefusalKind::Refused,
                    message: "the expected digest is not a SHA-256 in hex".into(),
                };
            }
            store
                .import_bundle(&bundle, expect.as_deref())
                .map(|digest| SyncReply::Stored { digest })
        }
    };
    result.unwrap_or_else(|e| SyncReply::Error {
        kind: refusal_kind(&e),
        message: error_text(&e),
    })
}

fn refusal_kind(e: &StoreError) -> RefusalKind {
    match e {
        StoreError::Locked { .. } => RefusalKind::Locked,
        StoreError::SyncConflict { .. } => RefusalKind::Conflict,
        StoreError::BadBundle { .. } | StoreError::InvalidId { .. } => RefusalKind::Refused,
        StoreError::UnknownId { .. } => RefusalKind::Unknown,
        _ => RefusalKind::Other,
    }
}

/// `value` as one JSON line, flushed; a value too long for the other side to read is an error.
fn write_line(w: &mut impl Write, value: &impl Serialize) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    if bytes.len() > MAX_BUNDLE_LINE {
        bytes = serde_json::to_vec(&SyncReply::Error {
            kind: RefusalKind::Other,
            message: format!(
                "the answer is {} bytes, more than the {MAX_BUNDLE_LINE} a line may have",
                bytes.len()
            ),
        })
        .map_err(std::io::Error::other)?;
    }
    bytes.push(b'\n');
    w.write_all(&bytes)?;
    w.flush()
}

// ---------------------------------------------------------------------------------------------
// This side: the connection.

/// The `--sync-serve` on the machine, over one ssh.
struct Remote {
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<std::io::Result<Option<Vec<u8>>>>,
    stderr: Option<std::thread::JoinHandle<Vec<u8>>>,
}

/// The connection failed: the rest of the sync cannot go on.
#[derive(Debug)]
struct Broken(CliError);

impl Remote {
    /// Start the ssh and read the hello.
    fn start(machine: &Machine, control: &Path) -> CliResult<Remote> {
        let argv = SshOptions::from_process_env().command_args(machine, control, SERVE_COMMAND);
        let mut child = Command::new("ssh")
            .args(&argv)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| error::ssh_missing(&SshMissing(e)))?;
        let (Some(stdin), Some(stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(CliError::internal("ssh was started without its pipes"));
        };
        // One line at a time: a bundle waits in the channel, never more than one.
        let (tx, lines) = mpsc::sync_channel(1);
        std::thread::spawn(move || {
            let mut reader = BufReader::with_capacity(1 << 16, stdout);
            loop {
                let line = read_line_bounded(&mut reader, MAX_BUNDLE_LINE);
                let end = !matches!(line, Ok(Some(_)));
                if tx.send(line).is_err() || end {
                    return;
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut kept = Vec::new();
            let _ = (&mut stderr).take(ssh::MAX_OUTPUT).read_to_end(&mut kept);
            // Drained to its end, so ssh never blocks on a full pipe.
            let _ = std::io::copy(&mut stderr, &mut std::io::sink());
            kept
        });
        let mut remote = Remote {
            name: machine.name.clone(),
            child,
            stdin: Some(stdin),
            lines,
            stderr: Some(stderr),
        };
        let first = remote.next_line(HELLO_TIMEOUT);
        match first {
            Ok(line) => match serde_json::from_slice::<Hello>(&line) {
                Ok(h) if h.volee_sync == SYNC_PROTOCOL => Ok(remote),
                Ok(h) => Err(CliError::env(format!(
                    "the volee on machine {} ({}) speaks sync protocol {}, this one {SYNC_PROTOCOL} (volee {})",
                    machine.name,
                    plain_text(&h.version, 40),
                    h.volee_sync,
                    env!("CARGO_PKG_VERSION")
                ))
                .with_hint(format!("use the same volee on both machines ({})", env!("CARGO_PKG_VERSION")))),
                Err(_) => Err(CliError::env(format!(
                    "machine {} did not answer as `volee agent --sync-serve` does",
                    machine.name
                ))
                .with_cause(plain_text(&String::from_utf8_lossy(&line), 200))),
            },
            Err(Broken(_)) => Err(remote.failed_to_start(machine)),
        }
    }

    /// Why the ssh ended before its hello, from its exit code and words.
    fn failed_to_start(&mut self, machine: &Machine) -> CliError {
        self.stdin = None;
        let code = wait_briefly(&mut self.child).and_then(|s| s.code());
        let stderr = self
            .stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        let words = String::from_utf8_lossy(&stderr);
        let detail = plain_text(words.lines().last().unwrap_or(""), 300);
        let name = &machine.name;
        let err = if words.contains("--sync-serve") {
            CliError::env(format!(
                "the volee on machine {name} does not know `agent --sync-serve` (it is older than this one)"
            ))
            .with_hint(format!(
                "put this volee ({}) there: volee machine install {name}; then again",
                env!("CARGO_PKG_VERSION")
            ))
        } else {
            use ssh::ProbeOutcome;
            match ssh::classify(code, b"", &stderr) {
                ProbeOutcome::HostKeyUnknown { .. } => CliError::env(format!(
                    "the host key of {} is not in your known_hosts, and volee never accepts one itself",
                    machine.dest
                ))
                .with_hint(format!(
                    "check the key's fingerprint, then accept it with: {}",
                    SshOptions::from_process_env().accept_command(machine)
                )),
                ProbeOutcome::HostKeyChanged { .. } => CliError::env(format!(
                    "the host key of {} is not the one in your known_hosts",
                    machine.dest
                ))
                .with_hint("find out why before anything else (a reinstalled machine, or someone in between)"),
                ProbeOutcome::AuthFailed { .. } => CliError::env(format!(
                    "{} refused every key ssh could offer without asking",
                    machine.dest
                ))
                .with_hint("load your key into ssh-agent (ssh-add); check with: volee machine ls"),
                ProbeOutcome::NoVolee { .. } => CliError::env(format!(
                    "there is no volee on the PATH of machine {name}"
                ))
                .with_hint(format!("put this volee there: volee machine install {name}")),
                ProbeOutcome::Unreachable { .. } => {
                    CliError::env(format!("ssh could not connect to machine {name}"))
                        .with_hint("check with: volee machine ls")
                }
                _ => CliError::env(format!(
                    "`{SERVE_COMMAND}` on machine {name} ended before it answered"
                ))
                .with_hint("check with: volee machine ls"),
            }
        };
        if detail.is_empty() {
            err
        } else {
            err.with_cause(detail)
        }
    }

    /// The next line from the machine within `limit`.
    fn next_line(&mut self, limit: Duration) -> Result<Vec<u8>, Broken> {
        let name = self.name.clone();
        match self.lines.recv_timeout(limit) {
            Ok(Ok(Some(line))) => Ok(line),
            Ok(Ok(None)) | Err(mpsc::RecvTimeoutError::Disconnected) => Err(Broken(CliError::env(
                format!("the connection to machine {name} ended"),
            ))),
            Ok(Err(e)) => {
                let _ = self.child.kill();
                Err(Broken(
                    CliError::env(format!("machine {name} sent what volee cannot read"))
                        .with_cause(e.to_string()),
                ))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = self.child.kill();
                Err(Broken(
                    CliError::env(format!(
                        "machine {name} did not answer within {} s",
                        limit.as_secs()
                    ))
                    .with_hint("run the sync again; volee machine ls says whether it is reachable"),
                ))
            }
        }
    }

    /// Send one request and read its reply.
    fn call(&mut self, request: &impl Serialize) -> Result<SyncReply, Broken> {
        let name = self.name.clone();
        let mut bytes = serde_json::to_vec(request)
            .map_err(|e| Broken(CliError::from_error(Exit::Internal, &e)))?;
        if bytes.len() > MAX_BUNDLE_LINE {
            return Ok(SyncReply::Error {
                kind: RefusalKind::Other,
                message: format!(
                    "it is {} bytes as one line, more than the {MAX_BUNDLE_LINE} the protocol allows",
                    bytes.len()
                ),
            });
        }
        bytes.push(b'\n');
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(Broken(CliError::env(format!(
                "the connection to machine {name} ended"
            ))));
        };
        if let Err(e) = stdin.write_all(&bytes).and_then(|()| stdin.flush()) {
            return Err(Broken(
                CliError::env(format!("the connection to machine {name} ended"))
                    .with_cause(e.to_string()),
            ));
        }
        let line = self.next_line(REPLY_TIMEOUT)?;
        serde_json::from_slice::<SyncReply>(&line).map_err(|e| {
            Broken(
                CliError::env(format!("machine {name} answered what volee cannot read"))
                    .with_cause(e.to_string()),
            )
        })
    }

    /// The machine's manifest, cleaned: entries with an id that is not one are dropped, a digest
    /// that is not one becomes a problem, a repeated id is kept once.
    fn manifest(&mut self) -> Result<Vec<ManifestEntry>, Broken> {
        match self.call(&serde_json::json!({"op": "manifest"}))? {
            SyncReply::Manifest(entries) => {
                let mut seen = BTreeSet::new();
                let mut clean = Vec::new();
                for mut e in entries {
                    if check_id(&e.id).is_err() || !seen.insert(e.id.clone()) {
                        continue;
                    }
                    if e.digest.as_deref().is_some_and(|d| !is_digest(d)) {
                        e.digest = None;
                        e.problem = Some("its digest is not a SHA-256".into());
                    }
                    clean.push(e);
                }
                Ok(clean)
            }
            other => Err(self.unexpected("its sessions", other)),
        }
    }

    fn unexpected(&self, what: &str, reply: SyncReply) -> Broken {
        match reply {
            SyncReply::Error { message, .. } => Broken(
                CliError::env(format!("machine {} could not list {what}", self.name))
                    .with_cause(plain_text(&message, 500)),
            ),
            _ => Broken(CliError::env(format!(
                "machine {} answered something else than {what}",
                self.name
            ))),
        }
    }

    /// Session `id` from the machine (checked by the store when it is imported or forked).
    fn get(&mut self, id: &str) -> Result<Result<Bundle, String>, Broken> {
        match self.call(&serde_json::json!({"op": "get", "id": id}))? {
            SyncReply::Bundle(b) if b.id == id => Ok(Ok(b)),
            SyncReply::Bundle(_) => Ok(Err(format!("{} sent another session", self.name))),
            SyncReply::Error { message, .. } => Ok(Err(format!(
                "on {}: {}",
                self.name,
                plain_text(&message, 500)
            ))),
            _ => Ok(Err(format!("{} answered something else", self.name))),
        }
    }

    /// Store `bundle` on the machine, if its session there is at `expect`; its digest there.
    fn put(
        &mut self,
        bundle: &Bundle,
        expect: Option<&str>,
    ) -> Result<Result<String, String>, Broken> {
        let request = PutRequest {
            op: "put",
            bundle,
            expect,
        };
        match self.call(&request)? {
            SyncReply::Stored { digest } if digest == bundle.digest => Ok(Ok(digest)),
            SyncReply::Stored { .. } => {
                Ok(Err(format!("{} stored it with another digest", self.name)))
            }
            SyncReply::Error { kind, message } => Ok(Err(format!(
                "{} refused it{}: {}",
                self.name,
                match kind {
                    RefusalKind::Locked => " (a writer holds it there)",
                    RefusalKind::Conflict => " (it changed there meanwhile)",
                    _ => "",
                },
                plain_text(&message, 500)
            ))),
            _ => Ok(Err(format!("{} answered something else", self.name))),
        }
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        // Closing stdin ends `--sync-serve`; a machine that does not end is not waited for.
        self.stdin = None;
        if wait_briefly(&mut self.child).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The child's exit status within a few seconds, else None.
fn wait_briefly(child: &mut Child) -> Option<std::process::ExitStatus> {
    for _ in 0..50 {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(_) => return None,
        }
    }
    None
}

/// Small builders for the CLI error (its own `hint`/`causes` are private to error.rs).
trait ErrorExt {
    fn with_hint(self, hint: impl Into<String>) -> Self;
    fn with_cause(self, cause: impl Into<String>) -> Self;
}

impl ErrorExt for CliError {
    fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hints.push(hint.into());
        self
    }
    fn with_cause(mut self, cause: impl Into<String>) -> Self {
        self.causes.push(cause.into());
        self
    }
}

// ---------------------------------------------------------------------------------------------
// The record of the last sync with a machine.

/// `STATE/sync/MACHINE.json`: for each session, its digest here and there as of the last sync
/// that saw it on both sides.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct SyncRecord {
    version: u32,
    machine: String,
    #[serde(default)]
    synced_at_ms: u64,
    #[serde(default)]
    sessions: BTreeMap<String, Seen>,
}

/// One session's digests as of the last sync.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Seen {
    here: String,
    there: String,
}

impl SyncRecord {
    /// Why this record is not one volee wrote for `machine`.
    fn problem(&self, machine: &str) -> Option<String> {
        if self.version != RECORD_VERSION {
            return Some(format!(
                "version {} (this volee writes {RECORD_VERSION})",
                self.version
            ));
        }
        if self.machine != machine {
            return Some(format!("it is of machine {:?}", self.machine));
        }
        self.sessions.iter().find_map(|(id, seen)| {
            if check_id(id).is_err() {
                Some(format!("{id:?} is not a session id"))
            } else if !is_digest(&seen.here) || !is_digest(&seen.there) {
                Some(format!("session {id}: a digest that is not one"))
            } else {
                None
            }
        })
    }
}

/// Load the record; a missing one is empty, one that does not parse or holds what volee would
/// not write is moved aside with a warning and counts as empty (every difference is then a
/// change on both sides: forks, never an overwrite).
fn load_record(path: &Path, machine: &str) -> CliResult<SyncRecord> {
    let empty = SyncRecord {
        version: RECORD_VERSION,
        machine: machine.to_string(),
        ..SyncRecord::default()
    };
    let now = volee_os::clock::now_ms();
    match persist::load_json::<SyncRecord>(path, now) {
        Ok(Loaded::Missing) => Ok(empty),
        Ok(Loaded::Ok(record)) => match record.problem(machine) {
            None => Ok(record),
            Some(problem) => {
                let kept = persist::keep_aside(path, now)
                    .map_err(|e| CliError::from_error(Exit::Environment, &e))?;
                warn_record(path, &problem, &kept);
                Ok(empty)
            }
        },
        Ok(Loaded::Corrupt { kept_as, error }) => {
            warn_record(path, &error, &kept_as);
            Ok(empty)
        }
        Err(e) => Err(CliError::from_error(Exit::Environment, &e)),
    }
}

fn warn_record(path: &Path, problem: &str, kept: &Path) {
    eprintln!(
        "warning: {} is not a sync record volee wrote ({problem}); it is kept as {}. Every session that differs is taken as changed on both sides (a fork, never an overwrite)",
        path.display(),
        kept.display()
    );
}

// ---------------------------------------------------------------------------------------------
// What moves.

/// What happens to one session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Move {
    /// Copied from here to the machine.
    Push,
    /// Copied from the machine to here.
    Pull,
    /// The machine's version comes in as a new session (then pushed too).
    Fork,
    /// Left as it is on both sides.
    Skip,
}

/// One session's move and why.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Planned {
    id: String,
    title: String,
    action: Move,
    reason: String,
    hint: Option<String>,
    /// The digests the plan saw (the compare-and-swap expectations).
    here: Option<String>,
    there: Option<String>,
}

/// The plan: what moves, and the sessions already equal on both sides.
#[derive(Debug, Default)]
struct Plan {
    moves: Vec<Planned>,
    in_sync: Vec<(String, String)>,
    /// Sessions on neither side any more: forgotten by the record.
    gone: Vec<String>,
}

/// Decide what moves (pure). `only`: the sessions asked for (all when None).
fn plan(
    machine: &Machine,
    here: &[ManifestEntry],
    there: &[ManifestEntry],
    record: &SyncRecord,
    only: Option<&BTreeSet<String>>,
) -> Plan {
    let name = &machine.name;
    let here: BTreeMap<&str, &ManifestEntry> = here.iter().map(|e| (e.id.as_str(), e)).collect();
    let there: BTreeMap<&str, &ManifestEntry> = there.iter().map(|e| (e.id.as_str(), e)).collect();
    let mut ids: BTreeSet<&str> = here.keys().chain(there.keys()).copied().collect();
    ids.extend(record.sessions.keys().map(String::as_str));
    let mut out = Plan::default();
    for id in ids {
        if only.is_some_and(|o| !o.contains(id)) {
            continue;
        }
        let h = here.get(id).copied();
        let t = there.get(id).copied();
        let seen = record.sessions.get(id);
        let title = h.or(t).map(|e| e.title.clone()).unwrap_or_default();
        let mut row = Planned {
            id: id.to_string(),
            title,
            action: Move::Skip,
            reason: String::new(),
            hint: None,
            here: h.and_then(|e| e.digest.clone()),
            there: t.and_then(|e| e.digest.clone()),
        };
        if let Some(problem) = h.and_then(|e| e.problem.as_ref()) {
            row.reason = format!("cannot be read here: {}", plain_text(problem, 300));
            out.moves.push(row);
            continue;
        }
        if let Some(problem) = t.and_then(|e| e.problem.as_ref()) {
            row.reason = format!("cannot be read on {name}: {}", plain_text(problem, 300));
            out.moves.push(row);
            continue;
        }
        match (&row.here, &row.there) {
            (None, None) => {
                out.gone.push(id.to_string());
                continue;
            }
            (Some(a), Some(b)) if a == b => {
                out.in_sync.push((id.to_string(), a.clone()));
                continue;
            }
            _ => {}
        }
        let (action, reason, hint) = match (&row.here, &row.there, seen) {
            (Some(_), None, Some(_)) => (
                Move::Skip,
                format!("deleted on {name} since the last sync; skipped"),
                Some(format!(
                    "to delete it here too: volee agent --delete {id} --yes"
                )),
            ),
            (Some(_), None, None) => (Move::Push, "new here".to_string(), None),
            (None, Some(_), Some(_)) => (
                Move::Skip,
                "deleted here since the last sync; skipped".to_string(),
                Some(format!(
                    "to delete it on {name} too: {} volee agent --delete {id} --yes",
                    ssh_line(machine)
                )),
            ),
            (None, Some(_), None) => (Move::Pull, format!("new on {name}"), None),
            (Some(h), Some(t), Some(seen)) => match (h != &seen.here, t != &seen.there) {
                (true, false) => (Move::Push, "changed here only".to_string(), None),
                (false, true) => (Move::Pull, format!("changed on {name} only"), None),
                (true, true) => (
                    Move::Fork,
                    "changed on both sides since the last sync".to_string(),
                    None,
                ),
                (false, false) => (
                    Move::Skip,
                    format!(
                        "differs from {name}'s since an earlier sync forked it; neither changed since"
                    ),
                    None,
                ),
            },
            (Some(_), Some(_), None) => (
                Move::Fork,
                format!("differs on both sides and there is no record of a sync with {name}"),
                None,
            ),
            (None, None, _) => continue,
        };
        row.action = action;
        row.reason = reason;
        row.hint = hint;
        // A session a writer holds is not read into a move, nor replaced.
        if action != Move::Skip {
            let held = |e: Option<&ManifestEntry>, place: &str| {
                e.filter(|e| e.held).map(|e| {
                    let pid = e.holder_pid.map(|p| format!(" by pid {p}")).unwrap_or_default();
                    format!("in use {place} (held{pid}); skipped: run the sync again once its writer has ended")
                })
            };
            if let Some(why) = held(h, "here").or_else(|| held(t, &format!("on {name}"))) {
                row.action = Move::Skip;
                row.reason = why;
            }
        }
        out.moves.push(row);
    }
    out
}

/// `ssh [-p P] DEST`, for a hint a user copies.
fn ssh_line(machine: &Machine) -> String {
    match machine.port {
        Some(p) => format!("ssh -p {p} {}", machine.dest),
        None => format!("ssh {}", machine.dest),
    }
}

// ---------------------------------------------------------------------------------------------
// `volee agent --sync`.

/// What became of one planned move.
#[derive(Debug, Serialize)]
struct Outcome {
    id: String,
    title: String,
    action: Move,
    reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    hint: Option<String>,
    /// `planned` (a dry run), `done`, `skipped`, `failed`.
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// A fork: the new session's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    fork_id: Option<String>,
}

/// `volee agent --sync MACHINE [SESSION_ID…] [--dry-run] [--json]`.
pub fn sync(store: &Store, name: &str, sids: &[String], dry_run: bool, json: bool) -> CliResult {
    let paths = paths();
    paths.ensure()?;
    let machine = saved_machine(&paths.machines_file(), name)?;
    let sync_dir = paths.state_dir.join("sync");
    volee_daemon::paths::ensure_private_dir(&sync_dir)?;
    let _guard = lock_machine(&sync_dir, name)?;
    let record_path = sync_dir.join(format!("{name}.json"));
    let mut record = load_record(&record_path, name)?;

    let mut remote = Remote::start(&machine, &paths.ssh_control(name))?;
    let there = remote.manifest().map_err(|b| b.0)?;
    let here = store.sync_manifest()?;
    let only = resolve_sids(sids, &here, &there, name)?;
    let planned = plan(&machine, &here, &there, &record, only.as_ref());

    let mut outcomes = Vec::new();
    let mut broken: Option<CliError> = None;
    for p in planned.moves {
        let mut o = Outcome {
            id: p.id.clone(),
            title: p.title.clone(),
            action: p.action,
            reason: p.reason.clone(),
            hint: p.hint.clone(),
            status: "planned",
            error: None,
            fork_id: None,
        };
        if p.action == Move::Skip {
            o.status = "skipped";
        } else if dry_run {
            // Listed only.
        } else if broken.is_some() {
            o.status = "failed";
            o.error = Some("not tried: the connection had ended".into());
        } else {
            match carry_out(store, &mut remote, &machine, &p, &mut record) {
                Ok(Ok(fork)) => {
                    o.status = "done";
                    o.fork_id = fork;
                }
                Ok(Err(e)) => {
                    o.status = "failed";
                    o.error = Some(e);
                }
                Err(Broken(e)) => {
                    o.status = "failed";
                    o.error = Some(e.message.clone());
                    broken = Some(e);
                }
            }
        }
        outcomes.push(o);
    }
    drop(remote);

    if !dry_run {
        for (id, digest) in &planned.in_sync {
            record.sessions.insert(
                id.clone(),
                Seen {
                    here: digest.clone(),
                    there: digest.clone(),
                },
            );
        }
        for id in &planned.gone {
            record.sessions.remove(id);
        }
        record.synced_at_ms = volee_os::clock::now_ms();
        persist::save_json(&record_path, &record)
            .map_err(|e| CliError::from_error(Exit::Environment, &e))?;
    }

    report(name, &outcomes, planned.in_sync.len(), dry_run, json)?;
    if let Some(e) = broken {
        return Err(e);
    }
    let failed = outcomes.iter().filter(|o| o.status == "failed").count();
    if failed > 0 {
        return Err(CliError::new(
            Exit::Negative,
            format!(
                "{failed} session{} could not be synced with {name}",
                if failed == 1 { "" } else { "s" }
            ),
        )
        .with_hint(format!(
            "nothing was overwritten; run `volee agent --sync {name}` again"
        )));
    }
    Ok(())
}

/// Carry out one move; the new fork's id for a fork. `Ok(Err)`: this session failed, the sync
/// goes on; `Err`: the connection is gone.
fn carry_out(
    store: &Store,
    remote: &mut Remote,
    machine: &Machine,
    p: &Planned,
    record: &mut SyncRecord,
) -> Result<Result<Option<String>, String>, Broken> {
    let local = |e: StoreError| error_text(&e);
    let mut remember = |id: &str, here: &str, there: &str| {
        record.sessions.insert(
            id.to_string(),
            Seen {
                here: here.to_string(),
                there: there.to_string(),
            },
        );
    };
    match p.action {
        Move::Skip => Ok(Ok(None)),
        Move::Push => {
            let bundle = match store.export_bundle(&p.id) {
                Ok(b) => b,
                Err(e) => return Ok(Err(local(e))),
            };
            Ok(remote.put(&bundle, p.there.as_deref())?.map(|there| {
                remember(&p.id, &bundle.digest, &there);
                None
            }))
        }
        Move::Pull => {
            let bundle = match remote.get(&p.id)? {
                Ok(b) => b,
                Err(e) => return Ok(Err(e)),
            };
            Ok(store
                .import_bundle(&bundle, p.here.as_deref())
                .map(|here| {
                    remember(&p.id, &here, &bundle.digest);
                    None
                })
                .map_err(local))
        }
        Move::Fork => {
            let bundle = match remote.get(&p.id)? {
                Ok(b) => b,
                Err(e) => return Ok(Err(e)),
            };
            let note = format!(
                "synced from {name}: changed on both sides since the last sync; this is {name}'s version of session {id}, which stays as it was on both machines",
                name = machine.name,
                id = p.id
            );
            let fork = match store.fork_from_bundle(&bundle, &machine.name, &note) {
                Ok(f) => f,
                Err(e) => return Ok(Err(local(e))),
            };
            // Both originals stay; the record keeps what each side had, so the next sync
            // neither forks them again nor takes one for the other.
            if let Some(here) = &p.here {
                remember(&p.id, here, &bundle.digest);
            }
            let pushed = match store.export_bundle(&fork) {
                Ok(b) => remote.put(&b, None)?.map(|there| {
                    remember(&fork, &b.digest, &there);
                }),
                Err(e) => Err(local(e)),
            };
            Ok(match pushed {
                Ok(()) => Ok(Some(fork)),
                Err(e) => Err(format!(
                    "the fork {fork} was made here but not pushed to {}: {e}",
                    machine.name
                )),
            })
        }
    }
}

/// The machine `name` of machines.toml.
fn saved_machine(path: &Path, name: &str) -> CliResult<Machine> {
    let file = match machines::load(path, volee_os::clock::now_ms())? {
        Loaded::Missing => MachinesFile::default(),
        Loaded::Ok(file) => file,
        Loaded::Corrupt { kept_as, error } => {
            eprintln!(
                "warning: {} was not a machines file volee wrote ({error}); it is kept as {}",
                path.display(),
                kept_as.display()
            );
            MachinesFile::default()
        }
    };
    match file.get(name) {
        Some(m) if machines::check_name(name).is_ok() => Ok(m.clone()),
        _ => Err(error::unknown_machine(name, &file)),
    }
}

/// One sync with a machine at a time (the record is read, then written).
fn lock_machine(dir: &Path, name: &str) -> CliResult<nix::fcntl::Flock<std::fs::File>> {
    let path: PathBuf = dir.join(format!("{name}.lock"));
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true).write(true).create(true).truncate(false);
    let file = volee_daemon::paths::open_private(&path, opts)?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(|_| {
        CliError::user(format!("another `volee agent --sync {name}` is running"))
            .with_hint("wait for it to end, then again")
    })
}

/// The sessions asked for: each an exact id or a unique prefix among the ids here and there.
fn resolve_sids(
    sids: &[String],
    here: &[ManifestEntry],
    there: &[ManifestEntry],
    name: &str,
) -> CliResult<Option<BTreeSet<String>>> {
    if sids.is_empty() {
        return Ok(None);
    }
    let all: BTreeSet<&str> = here.iter().chain(there).map(|e| e.id.as_str()).collect();
    let mut only = BTreeSet::new();
    for sid in sids {
        check_id(sid)?;
        if all.contains(sid.as_str()) {
            only.insert(sid.clone());
            continue;
        }
        let matching: Vec<&str> = all
            .iter()
            .copied()
            .filter(|id| id.starts_with(sid.as_str()))
            .collect();
        match matching.as_slice() {
            [one] => {
                only.insert(one.to_string());
            }
            [] => {
                return Err(
                    CliError::user(format!("no session {sid:?} here or on {name}"))
                        .with_hint("list them: volee agent --list-sessions --include-archived"),
                )
            }
            many => {
                return Err(CliError::user(format!(
                    "session id prefix {sid:?} is ambiguous: it matches {}",
                    many.join(", ")
                ))
                .with_hint("give more characters of the id"))
            }
        }
    }
    Ok(Some(only))
}

/// Print what moved (or would).
fn report(
    name: &str,
    outcomes: &[Outcome],
    in_sync: usize,
    dry_run: bool,
    json: bool,
) -> CliResult {
    if json {
        return crate::output::json(&serde_json::json!({
            "machine": name,
            "dry_run": dry_run,
            "in_sync": in_sync,
            "sessions": outcomes,
        }));
    }
    let mut text = String::new();
    for o in outcomes {
        let verb = match (o.action, o.status, dry_run) {
            (Move::Skip, _, _) => "skip",
            (Move::Push, _, true) => "would push",
            (Move::Pull, _, true) => "would pull",
            (Move::Fork, _, true) => "would fork",
            (_, "failed", _) => "FAILED",
            (Move::Push, _, false) => "pushed",
            (Move::Pull, _, false) => "pulled",
            (Move::Fork, _, false) => "forked",
        };
        let title = if o.title.is_empty() {
            String::new()
        } else {
            format!("  {:?}", plain_text(&o.title, TITLE_MAX))
        };
        let what = match o.action {
            Move::Fork if !dry_run && o.status == "done" => format!(
                "{}: {name}'s version is now session {} here and there",
                o.reason,
                o.fork_id.as_deref().unwrap_or("?")
            ),
            Move::Fork => format!("{}: {name}'s version comes in as a new session", o.reason),
            _ => o.reason.clone(),
        };
        text.push_str(&format!("{verb:<10}  {}{title}  {what}\n", o.id));
        if let Some(e) = &o.error {
            text.push_str(&format!("            error: {e}\n"));
        }
        if let Some(h) = &o.hint {
            text.push_str(&format!("            hint: {h}\n"));
        }
    }
    text.push_str(&match (dry_run, !outcomes.is_empty(), in_sync) {
        (true, _, n) => format!("{n} in sync with {name}; dry run: nothing was changed\n"),
        (false, false, n) => format!("nothing to sync: {n} in sync with {name}\n"),
        (false, true, n) => format!("{n} in sync with {name}\n"),
    });
    out(&text);
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn machine() -> Machine {
        Machine {
            name: "box".into(),
            dest: "me@box".into(),
            port: None,
            identity: None,
            added: "2026-12-04T10:00:00Z".into(),
        }
    }

    fn d(n: u8) -> String {
        format!("{n:064x}")
    }

    fn entry(id: &str, digest: u8) -> ManifestEntry {
        ManifestEntry {
            id: id.into(),
            digest: Some(d(digest)),
            held: false,
            holder_pid: None,
            title: format!("t-{id}"),
            updated_at_ms: 0,
            problem: None,
        }
    }

    fn record(rows: &[(&str, u8, u8)]) -> SyncRecord {
        SyncRecord {
            version: RECORD_VERSION,
            machine: "box".into(),
            synced_at_ms: 0,
            sessions: rows
                .iter()
                .map(|(id, h, t)| {
                    (
                        id.to_string(),
                        Seen {
                            here: d(*h),
                            there: d(*t),
                        },
                    )
                })
                .collect(),
        }
    }

    fn actions(p: &Plan) -> Vec<(String, Move)> {
        p.moves.iter().map(|m| (m.id.clone(), m.action)).collect()
    }

    #[test]
    fn each_side_moves_only_what_changed_on_it_and_both_changed_forks() {
        let here = [
            entry("same", 1),
            entry("newhere", 2),
            entry("changedhere", 3),
            entry("changedthere", 4),
            entry("both", 5),
            entry("gonethere", 6),
            entry("norecord", 7),
        ];
        let there = [
            entry("same", 1),
            entry("changedhere", 30),
            entry("changedthere", 40),
            entry("both", 50),
            entry("newthere", 8),
            entry("gonehere", 9),
            entry("norecord", 70),
        ];
        let rec = record(&[
            ("changedhere", 33, 30),
            ("changedthere", 4, 44),
            ("both", 55, 56),
            ("gonethere", 6, 6),
            ("gonehere", 9, 9),
            ("vanished", 1, 1),
        ]);
        let p = plan(&machine(), &here, &there, &rec, None);
        let got: BTreeMap<String, Move> = actions(&p).into_iter().collect();
        assert_eq!(got["newhere"], Move::Push);
        assert_eq!(got["newthere"], Move::Pull);
        assert_eq!(got["changedhere"], Move::Push);
        assert_eq!(got["changedthere"], Move::Pull);
        assert_eq!(got["both"], Move::Fork);
        assert_eq!(got["norecord"], Move::Fork, "no record: never an overwrite");
        assert_eq!(got["gonethere"], Move::Skip);
        assert_eq!(got["gonehere"], Move::Skip);
        assert!(!got.contains_key("same"));
        assert_eq!(p.in_sync, vec![("same".to_string(), d(1))]);
        assert_eq!(p.gone, vec!["vanished".to_string()]);
        let gone_there = p.moves.iter().find(|m| m.id == "gonethere").unwrap();
        assert!(gone_there
            .reason
            .contains("deleted on box since the last sync"));
        assert!(gone_there
            .hint
            .as_ref()
            .unwrap()
            .contains("volee agent --delete gonethere --yes"));
        let gone_here = p.moves.iter().find(|m| m.id == "gonehere").unwrap();
        assert!(gone_here
            .hint
            .as_ref()
            .unwrap()
            .contains("ssh me@box volee agent --delete gonehere --yes"));
        // The expectations are the digests seen.
        let push = p.moves.iter().find(|m| m.id == "changedhere").unwrap();
        assert_eq!(push.there.as_deref(), Some(d(30).as_str()));
    }

    #[test]
    fn held_and_unreadable_sessions_are_skipped_with_the_reason() {
        let mut held_here = entry("a", 1);
        held_here.held = true;
        held_here.holder_pid = Some(42);
        let mut held_there = entry("b", 2);
        held_there.held = true;
        let mut damaged = entry("c", 3);
        damaged.digest = None;
        damaged.problem = Some("damaged: x".into());
        // Held but equal: nothing to move, nothing to say.
        let mut equal_held = entry("e", 5);
        equal_held.held = true;
        let here = [held_here, entry("b", 20), damaged, equal_held.clone()];
        let there = [entry("a", 10), held_there, entry("c", 3), equal_held];
        let p = plan(&machine(), &here, &there, &record(&[]), None);
        let reason = |id: &str| p.moves.iter().find(|m| m.id == id).unwrap().reason.clone();
        assert!(
            p.moves.iter().all(|m| m.action == Move::Skip),
            "{:?}",
            p.moves
        );
        assert!(
            reason("a").contains("in use here (held by pid 42)"),
            "{}",
            reason("a")
        );
        assert!(reason("b").contains("in use on box"), "{}", reason("b"));
        assert!(
            reason("c").contains("cannot be read here"),
            "{}",
            reason("c")
        );
        assert_eq!(p.in_sync.len(), 1);
    }

    #[test]
    fn only_the_sessions_asked_for_are_planned() {
        let here = [entry("abc", 1), entry("xyz", 2)];
        let there: [ManifestEntry; 0] = [];
        let only = resolve_sids(&["ab".into()], &here, &there, "box").unwrap();
        let p = plan(&machine(), &here, &there, &record(&[]), only.as_ref());
        assert_eq!(actions(&p), vec![("abc".to_string(), Move::Push)]);
        assert!(resolve_sids(&["nope".into()], &here, &there, "box").is_err());
        assert!(resolve_sids(&["../x".into()], &here, &there, "box").is_err());
    }

    #[test]
    fn a_record_volee_would_not_write_is_refused() {
        let mut r = record(&[("abc", 1, 2)]);
        assert_eq!(r.problem("box"), None);
        assert!(r.problem("other").is_some());
        r.sessions.insert(
            "../x".into(),
            Seen {
                here: d(1),
                there: d(1),
            },
        );
        assert!(r.problem("box").is_some());
        let mut r = record(&[]);
        r.sessions.insert(
            "abc".into(),
            Seen {
                here: "x".into(),
                there: d(1),
            },
        );
        assert!(r.problem("box").is_some());

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("box.json");
        std::fs::write(&path, b"{ not json").unwrap();
        let loaded = load_record(&path, "box").unwrap();
        assert!(loaded.sessions.is_empty());
        assert!(!path.exists(), "moved aside");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn lines_are_bounded() {
        let mut r = std::io::Cursor::new(b"{\"a\":1}\nlong line here\npartial".to_vec());
        assert_eq!(read_line_bounded(&mut r, 8).unwrap().unwrap(), b"{\"a\":1}");
        assert!(read_line_bounded(&mut r, 8).is_err());
        let mut r = std::io::Cursor::new(b"ok\npartial".to_vec());
        assert_eq!(read_line_bounded(&mut r, 8).unwrap().unwrap(), b"ok");
        assert!(
            read_line_bounded(&mut r, 80).is_err(),
            "an incomplete last line"
        );
        let mut r = std::io::Cursor::new(Vec::new());
        assert_eq!(read_line_bounded(&mut r, 8).unwrap(), None);
    }

    #[test]
    fn the_serving_side_answers_and_refuses_bad_requests() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("sessions"));
        let mut w = store
            .create(volee_store::NewSession {
                title: "t".into(),
                project_root: "/w".into(),
                model: "m".into(),
            })
            .unwrap();
        w.checkpoint().unwrap();
        let id = w.id().to_string();
        drop(w);
        match answer(&store, br#"{"op":"manifest"}"#) {
            SyncReply::Manifest(m) => assert_eq!(m[0].id, id),
            other => panic!("{other:?}"),
        }
        let bundle = match answer(&store, format!(r#"{{"op":"get","id":"{id}"}}"#).as_bytes()) {
            SyncReply::Bundle(b) => b,
            other => panic!("{other:?}"),
        };
        // A writer came in after the bundle was taken.
        let mut w = store.open_writer(&id).unwrap();
        w.push_message(volee_store::Message::user("later")).unwrap();
        w.checkpoint().unwrap();
        drop(w);
        let put = |expect: serde_json::Value| {
            serde_json::json!({"op": "put", "bundle": bundle, "expect": expect}).to_string()
        };
        for (bad, kind) in [
            (
                r#"{"op":"get","id":"../etc"}"#.to_string(),
                RefusalKind::Refused,
            ),
            (r#"{"op":"nope"}"#.to_string(), RefusalKind::Refused),
            ("not json".to_string(), RefusalKind::Refused),
            (
                r#"{"op":"get","id":"zzzzzzzzzzzz"}"#.to_string(),
                RefusalKind::Unknown,
            ),
            (put(serde_json::Value::Null), RefusalKind::Conflict),
            (put(bundle.digest.clone().into()), RefusalKind::Conflict),
            (put("x".into()), RefusalKind::Refused),
        ] {
            match answer(&store, bad.as_bytes()) {
                SyncReply::Error { kind: k, .. } => assert_eq!(k, kind, "{bad}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
        // Expecting what is there now: replaced.
        let now = store.session_digest(&id).unwrap();
        assert!(matches!(
            answer(&store, put(now.into()).as_bytes()),
            SyncReply::Stored { .. }
        ));
        assert_eq!(store.session_digest(&id).unwrap(), bundle.digest);
    }
}
