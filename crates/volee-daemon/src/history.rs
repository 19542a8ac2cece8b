//! Keeping the past-sessions index (`volee-history`) up to date from the daemon: a thread of
//! its own (SQLite is synchronous) that watches every harness's sessions directory with inotify
//! (`notify`) and, once the writes to a directory have paused and the machine is not busy,
//! brings that directory's sessions up to date. Nothing runs while nothing is written.
//!
//! The directories are those under the daemon's environment plus those in the environment of
//! every agent it has known (launched or discovered, this user's processes only): a harness
//! started with its own `CLAUDE_CONFIG_DIR` keeps its sessions there, and they stay findable
//! after the agent ended — the roots are remembered in `history-roots.json` (0600).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use volee_core::Registry;
use volee_history::{project_roots, roots, Index, Reader, Root};
use volee_protocol::{Response, SessionRoot, UnreadableFile};

use crate::paths::Paths;

/// Writes to a directory are read once they have paused this long (a harness writes its
/// transcript in bursts while it works).
const SETTLE: Duration = Duration::from_secs(2);
/// The first look, for what changed while no daemon ran.
const FIRST_LOOK: Duration = Duration::from_secs(3);
/// While the machine is busy, reading waits, at most this long.
const MOST_DEFERRED: Duration = Duration::from_secs(300);
/// A database a harness rewrites as it works (OpenCode's) is copied to be read: read after a
/// longer pause.
const DATABASE_SETTLE: Duration = Duration::from_secs(30);
/// How often a deferred read looks at the load again.
const BUSY_RETRY: Duration = Duration::from_secs(15);

/// A new agent's environment is read when it is first seen and once more after this long (its
/// first process may `exec` the harness with more variables).
const SECOND_LOOK: Duration = Duration::from_secs(10);

enum Cmd {
    /// A live agent: its process's environment may name other roots, its working directory
    /// may hold a project's history (Aider's).
    Agent {
        pid: Option<u32>,
        id: String,
        cwd: String,
    },
    /// Something under a watched directory changed.
    Changed(PathBuf),
    /// Follow the usage of live agent `id`'s session (its harness's profile reads usage from
    /// its session file): reported at once and at each write to that file.
    Usage {
        id: String,
        harness: String,
        session: String,
    },
    /// Agent `id` ended: its usage is read a last time, then no more.
    UsageDone {
        id: String,
    },
    /// Agent `id` changed state (a turn began or ended): its session's file is read now, in
    /// case a write came before its directory was watched.
    UsageNow {
        id: String,
    },
    /// A command reads the index now: bring these roots up to date first, then answer.
    IndexNow {
        roots: Vec<Root>,
        reply: tokio::sync::oneshot::Sender<Response>,
    },
    Stop,
}

/// A root as remembered (its format comes from the harness's profile when it is read back).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Remembered {
    harness: String,
    path: PathBuf,
    from: String,
}

/// How the thread tells the actor that the newest past sessions changed (the zellij plugins list
/// them): called on the thread, so it only sends a message.
pub type OnSessions = Box<dyn Fn(Vec<volee_protocol::zellij::PastSession>) + Send>;

/// How the thread tells the actor an agent's usage changed (called on the thread).
pub type OnUsage = Box<dyn Fn(String, volee_protocol::AgentUsage) + Send>;

/// A live agent's session whose usage the thread follows.
struct Followed {
    harness: String,
    session: String,
    /// Once its file is found.
    tail: Option<volee_history::UsageTail>,
}

/// The daemon's side: hands agents' processes to the thread, answers which roots are known.
pub struct History {
    tx: mpsc::Sender<Cmd>,
    /// Agents (with their process, once known) already handed over.
    seen: HashSet<(String, Option<u32>)>,
    /// Agents whose usage the thread follows, with their session.
    followed: HashMap<String, String>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl History {
    /// Start the thread; the index is `sessions.db` in the state directory. `on_sessions` hears
    /// the newest sessions when the thread starts and whenever the index changed them.
    pub fn start(paths: &Paths, on_sessions: OnSessions, on_usage: OnUsage) -> History {
        let (tx, rx) = mpsc::channel();
        let mut known = roots(|k| std::env::var(k).ok());
        let remembered_file = remembered_file(paths);
        for root in remembered_roots(paths) {
            if !known.iter().any(|k| k.path == root.path) {
                known.push(root);
            }
        }
        let worker = Worker {
            index_path: paths.state_dir.join("sessions.db"),
            listing: Listing {
                on_sessions,
                stamp: None,
                listed: None,
            },
            remembered_file,
            roots: known,
            watched: HashSet::new(),
            due: HashMap::new(),
            busy_since: HashMap::new(),
            second_looks: Vec::new(),
            unreadable: HashMap::new(),
            followed: HashMap::new(),
            on_usage,
            tx: tx.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("volee-history".into())
            .spawn(move || worker.run(rx))
            .map_err(|e| tracing::warn!("past sessions are not kept up to date: {e}"))
            .ok();
        History {
            tx,
            seen: HashSet::new(),
            followed: HashMap::new(),
            thread,
        }
    }

    /// Hand every live agent's process not yet seen to the thread (called at each flush: a set
    /// lookup per agent).
    pub fn sync(&mut self, registry: &Registry) {
        // Usage: each live agent's session, when its profile reads usage from the session's
        // file; an ended one's a last time.
        for agent in registry.iter() {
            let reads_usage = volee_harness::profile(&agent.harness)
                .is_some_and(|p| p.usage == volee_harness::UsageSource::SessionFile);
            match (&agent.session_id, agent.is_ended()) {
                (Some(session), false)
                    if reads_usage && self.followed.get(&agent.id) != Some(session) =>
                {
                    self.followed.insert(agent.id.clone(), session.clone());
                    let _ = self.tx.send(Cmd::Usage {
                        id: agent.id.clone(),
                        harness: agent.harness.clone(),
                        session: session.clone(),
                    });
                }
                (_, true) if self.followed.remove(&agent.id).is_some() => {
                    let _ = self.tx.send(Cmd::UsageDone {
                        id: agent.id.clone(),
                    });
                }
                _ => {}
            }
        }
        for agent in registry.iter().filter(|a| !a.is_ended()) {
            if self.seen.insert((agent.id.clone(), agent.pid)) {
                let _ = self.tx.send(Cmd::Agent {
                    pid: agent.pid,
                    id: agent.id.clone(),
                    cwd: agent.cwd.clone(),
                });
            }
        }
    }

    /// `IndexSessions`: the thread reads what it saw change under `roots` and those it does
    /// not watch, then answers `reply` (with what could not be read under them).
    pub fn index_now(
        &self,
        roots: Vec<SessionRoot>,
        reply: tokio::sync::oneshot::Sender<Response>,
    ) {
        let roots = roots
            .into_iter()
            .filter_map(|r| {
                root_of(&Remembered {
                    harness: r.harness,
                    path: PathBuf::from(r.path),
                    from: r.from,
                })
            })
            // A relative path would be read relative to the daemon's directory.
            .filter(|r| r.path.is_absolute())
            .collect();
        if let Err(mpsc::SendError(Cmd::IndexNow { reply, .. })) =
            self.tx.send(Cmd::IndexNow { roots, reply })
        {
            let _ = reply.send(Response::Error {
                kind: volee_protocol::ErrorKind::Internal,
                message: "the daemon's past-sessions thread is not running".into(),
                hints: Vec::new(),
            });
        }
    }

    /// Agent `id` changed state: read its usage now when it is followed (a message only).
    pub fn usage_now(&self, id: &str) {
        if self.followed.contains_key(id) {
            let _ = self.tx.send(Cmd::UsageNow { id: id.to_string() });
        }
    }

    /// Tell the thread to end (not waited for: a read in the middle of its transaction is
    /// rolled back by SQLite if the process ends first).
    pub fn stop(&mut self) {
        let _ = self.tx.send(Cmd::Stop);
        self.thread.take();
    }
}

struct Worker {
    index_path: PathBuf,
    /// The newest sessions as the actor last heard them.
    listing: Listing,
    remembered_file: PathBuf,
    /// This environment's roots, then those of agents.
    roots: Vec<Root>,
    /// Roots under an inotify watch.
    watched: HashSet<PathBuf>,
    /// Roots to read, and when.
    due: HashMap<PathBuf, Instant>,
    /// Since when a due root has waited for the machine to calm down.
    busy_since: HashMap<PathBuf, Instant>,
    /// Agents whose environment is read again, and when.
    second_looks: Vec<(u32, String, Instant)>,
    /// What could not be read under each root, at its last read.
    unreadable: HashMap<PathBuf, Vec<UnreadableFile>>,
    /// Live agents' sessions whose usage is followed, by agent id.
    followed: HashMap<String, Followed>,
    on_usage: OnUsage,
    tx: mpsc::Sender<Cmd>,
}

impl Worker {
    fn run(mut self, rx: mpsc::Receiver<Cmd>) {
        let tx = self.tx.clone();
        let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            let Ok(event) = res else { return };
            // Reads (our own included) change nothing.
            if matches!(
                event.kind,
                notify::EventKind::Access(_) | notify::EventKind::Other
            ) {
                return;
            }
            for path in event.paths {
                let _ = tx.send(Cmd::Changed(path));
            }
        });
        let mut watcher = match watcher {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::warn!("cannot watch the harnesses' sessions (each volee command reads them instead): {e}");
                None
            }
        };
        let start = Instant::now() + FIRST_LOOK;
        for root in self.all_roots() {
            self.due.insert(root.path, start);
        }
        loop {
            // Before each wait: a read (this thread's or a command's) changed the index.
            self.listing.publish(&self.index_path);
            self.watch_new(watcher.as_mut());
            let timeout = self
                .due
                .values()
                .chain(self.second_looks.iter().map(|(_, _, at)| at))
                .min()
                .map(|at| at.saturating_duration_since(Instant::now()))
                .unwrap_or(Duration::from_secs(3600));
            match rx.recv_timeout(timeout) {
                Ok(Cmd::Stop) | Err(RecvTimeoutError::Disconnected) => break,
                Ok(Cmd::Changed(path)) => {
                    self.usage_changed(&path);
                    if let Some(root) = self.root_under(&path) {
                        let settle = if root.1 { DATABASE_SETTLE } else { SETTLE };
                        self.due.insert(root.0, Instant::now() + settle);
                    }
                }
                Ok(Cmd::Agent { pid, id, cwd }) => {
                    self.project(&cwd, &id);
                    if let Some(pid) = pid {
                        self.agent(pid, &id);
                        self.second_looks
                            .push((pid, id, Instant::now() + SECOND_LOOK));
                    }
                }
                Ok(Cmd::Usage {
                    id,
                    harness,
                    session,
                }) => {
                    self.followed.insert(
                        id.clone(),
                        Followed {
                            harness,
                            session,
                            tail: None,
                        },
                    );
                    self.follow(&id, None);
                }
                Ok(Cmd::UsageNow { id }) => self.follow(&id, None),
                Ok(Cmd::UsageDone { id }) => {
                    self.follow(&id, None);
                    self.followed.remove(&id);
                }
                Ok(Cmd::IndexNow { roots, reply }) => {
                    let answer = self.index_now(roots, watcher.is_some());
                    let _ = reply.send(answer);
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            let now = Instant::now();
            let looks: Vec<(u32, String, Instant)> = self.second_looks.clone();
            self.second_looks.retain(|(_, _, at)| *at > now);
            for (pid, id, _) in looks.into_iter().filter(|(_, _, at)| *at <= now) {
                self.agent(pid, &id);
            }
            let ready: Vec<PathBuf> = self
                .due
                .iter()
                .filter(|(_, at)| **at <= now)
                .map(|(p, _)| p.clone())
                .collect();
            if ready.is_empty() {
                continue;
            }
            if busy() {
                let mut deferred = false;
                for path in &ready {
                    let since = *self.busy_since.entry(path.clone()).or_insert(now);
                    if now.duration_since(since) < MOST_DEFERRED {
                        self.due.insert(path.clone(), now + BUSY_RETRY);
                        deferred = true;
                    }
                }
                if deferred {
                    continue;
                }
            }
            let roots: Vec<Root> = self
                .all_roots()
                .into_iter()
                .filter(|r| ready.contains(&r.path))
                .collect();
            if let Err(e) = self.read(&roots) {
                // Another writer held it (a CLI's first scan): try again later.
                tracing::info!("past sessions not read now: {e}");
                for r in &roots {
                    self.due.insert(r.path.clone(), Instant::now() + BUSY_RETRY);
                }
            }
        }
    }

    /// Read `roots` into the index (opened for the read and closed after: SQLite's caches are
    /// not kept in an idle daemon); what could not be read is kept per root.
    fn read(&mut self, roots: &[Root]) -> Result<(), String> {
        for r in roots {
            self.due.remove(&r.path);
            self.busy_since.remove(&r.path);
        }
        if roots.is_empty() {
            return Ok(());
        }
        let mut index = Index::open(&self.index_path).map_err(|e| e.to_string())?;
        let t = Instant::now();
        let scan = index.scan(roots).map_err(|e| e.to_string())?;
        tracing::debug!(
            "past sessions: {} file(s) read of {} under {} root(s) in {:?}",
            scan.read,
            scan.files,
            roots.len(),
            t.elapsed()
        );
        for r in roots {
            self.unreadable.insert(r.path.clone(), Vec::new());
        }
        for u in scan.unreadable {
            let root = roots
                .iter()
                .filter(|r| u.path.starts_with(&r.path))
                .max_by_key(|r| r.path.components().count());
            if let Some(r) = root {
                self.unreadable
                    .entry(r.path.clone())
                    .or_default()
                    .push(UnreadableFile {
                        harness: u.harness,
                        path: u.path.display().to_string(),
                        reason: u.reason,
                    });
            }
        }
        Ok(())
    }

    /// A command's `IndexSessions`: the roots it names that this thread does not know are kept
    /// (not remembered: they are that command's environment's); those not watched, and those
    /// that changed since their last read, are read now, whatever the load.
    fn index_now(&mut self, asked: Vec<Root>, watching: bool) -> Response {
        for root in &asked {
            if !self.roots.iter().any(|r| r.path == root.path) {
                self.roots.push(root.clone());
            }
        }
        let now: Vec<Root> = asked
            .iter()
            .filter(|r| {
                !watching
                    || !self.watched.contains(&r.path)
                    || self.due.contains_key(&r.path)
                    || !self.unreadable.contains_key(&r.path)
            })
            .cloned()
            .collect();
        if let Err(e) = self.read(&now) {
            return Response::Error {
                kind: volee_protocol::ErrorKind::Environment,
                message: format!("past sessions' index: {e}"),
                hints: Vec::new(),
            };
        }
        let mut unreadable = Vec::new();
        for r in &asked {
            unreadable.extend(self.unreadable.get(&r.path).into_iter().flatten().cloned());
        }
        Response::SessionsIndexed { unreadable }
    }

    /// A write under a watched directory: the followed sessions it concerns are read (at once:
    /// usage is wanted per response, not after the index's pause).
    fn usage_changed(&mut self, path: &Path) {
        let ids: Vec<String> = self
            .followed
            .iter()
            .filter(|(_, f)| f.tail.as_ref().is_none_or(|t| t.concerns(path)))
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            self.follow(&id, Some(path));
        }
    }

    /// Read agent `id`'s session file (found first when not yet: under its harness's roots,
    /// looking only at `changed` when a write named one) and report its usage when it changed.
    fn follow(&mut self, id: &str, changed: Option<&Path>) {
        let roots = self.all_roots();
        let Some(f) = self.followed.get_mut(id) else {
            return;
        };
        if f.tail.is_none() {
            let found = roots
                .iter()
                .filter(|r| r.harness == f.harness)
                .find_map(|r| {
                    let reader = Reader::new(r.kind)?;
                    match changed {
                        Some(path) => {
                            let rel: Vec<String> = path
                                .strip_prefix(&r.path)
                                .ok()?
                                .iter()
                                .map(|c| c.to_string_lossy().into_owned())
                                .collect();
                            let rel: Vec<&str> = rel.iter().map(String::as_str).collect();
                            volee_history::is_file_of(&reader, &rel, &f.session)
                                .then(|| (reader, path.to_path_buf()))
                        }
                        None => volee_history::find_file(&r.path, &reader, &f.session)
                            .map(|p| (reader, p)),
                    }
                });
            let Some((reader, path)) = found else {
                return;
            };
            tracing::debug!("usage of agent {id}: {}", path.display());
            f.tail = Some(volee_history::UsageTail::new(reader, path));
        }
        let Some(tail) = f.tail.as_mut() else {
            return;
        };
        let t = Instant::now();
        match tail.read() {
            Ok(true) => {
                if let Some(u) = tail.usage() {
                    tracing::debug!("usage of agent {id} read in {:?}", t.elapsed());
                    (self.on_usage)(
                        id.to_string(),
                        volee_protocol::AgentUsage {
                            input: u.input,
                            output: u.output,
                            cache_read: u.cache_read,
                            cache_write: u.cache_write,
                            requests: (u.requests > 0).then_some(u.requests),
                            model: tail.model().map(str::to_owned),
                            source: tail.path().display().to_string(),
                            cost_usd: None,
                        },
                    );
                }
            }
            Ok(false) => {}
            Err(e) => tracing::debug!("usage of agent {id}: {}: {e}", tail.path().display()),
        }
    }

    fn all_roots(&self) -> Vec<Root> {
        self.roots.clone()
    }

    /// The known root `path` lies under (the deepest one), and whether it is a database.
    fn root_under(&self, path: &Path) -> Option<(PathBuf, bool)> {
        self.all_roots()
            .into_iter()
            .filter(|r| path.starts_with(&r.path))
            .max_by_key(|r| r.path.components().count())
            .map(|r| {
                let database = Reader::new(r.kind).is_some_and(|r| r.is_database());
                (r.path, database)
            })
    }

    /// Watch the roots that exist and are not watched yet (a harness creates its directory on
    /// its first run: looked at again each time an agent comes).
    fn watch_new(&mut self, watcher: Option<&mut notify::RecommendedWatcher>) {
        use notify::Watcher;
        let Some(watcher) = watcher else { return };
        for root in self.all_roots() {
            if self.watched.contains(&root.path) || !is_own_dir(&root.path) {
                continue;
            }
            // Files one level down (a database, a project's history file): that directory
            // only, not what lies below it (OpenCode's snapshots, a project's sources).
            let mode = if Reader::new(root.kind).map_or(1, |r| r.max_depth()) <= 1 {
                notify::RecursiveMode::NonRecursive
            } else {
                notify::RecursiveMode::Recursive
            };
            match watcher.watch(&root.path, mode) {
                Ok(()) => {
                    self.watched.insert(root.path.clone());
                    // Written before the watch began: read it.
                    self.due
                        .entry(root.path)
                        .or_insert_with(|| Instant::now() + SETTLE);
                }
                Err(e) => tracing::warn!("cannot watch {}: {e}", root.path.display()),
            }
        }
    }

    /// A live agent's environment: the roots it names that are new are kept (and remembered).
    fn agent(&mut self, pid: u32, id: &str) {
        let Some(env) = own_environ(pid) else { return };
        let get = |k: &str| env.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
        let new: Vec<Root> = roots(get)
            .into_iter()
            .filter(|root| !self.roots.iter().any(|r| r.path == root.path))
            .map(|root| Root {
                from: format!("{} of agent {id}", root.from),
                ..root
            })
            .collect();
        self.keep(new);
    }

    /// A live agent's working directory: the history a harness keeps in the project (Aider's).
    fn project(&mut self, cwd: &str, id: &str) {
        if cwd.is_empty() {
            return;
        }
        let new = project_roots(
            &[(PathBuf::from(cwd), format!("cwd of agent {id}"))],
            &self.roots,
        );
        self.keep(new);
    }

    /// Add roots, and remember those that came from agents.
    fn keep(&mut self, new: Vec<Root>) {
        if new.is_empty() {
            return;
        }
        self.roots.extend(new);
        {
            let remembered: Vec<Remembered> = self
                .all_roots()
                .iter()
                .filter(|r| r.from.contains(" of agent "))
                .map(|r| Remembered {
                    harness: r.harness.clone(),
                    path: r.path.clone(),
                    from: r.from.clone(),
                })
                .collect();
            if let Err(e) = crate::persist::save_json(&self.remembered_file, &remembered) {
                tracing::warn!("cannot remember the sessions' roots: {e}");
            }
        }
    }
}

/// What the actor last heard of the index's newest sessions ([`OnSessions`]).
struct Listing {
    on_sessions: OnSessions,
    /// The index files' sizes and times when it was last listed.
    stamp: Option<Vec<Option<(u64, std::time::SystemTime)>>>,
    listed: Option<Vec<volee_protocol::zellij::PastSession>>,
}

impl Listing {
    /// When the index's files changed since the last look (a `stat` of the database and its
    /// log; nothing else while nothing was read), list its newest sessions (bounded for the
    /// zellij plugins) and tell the actor if they are not what it heard last.
    fn publish(&mut self, index_path: &Path) {
        let stamp = || {
            ["", "-wal"]
                .iter()
                .map(|suffix| {
                    let mut path = index_path.as_os_str().to_owned();
                    path.push(suffix);
                    let meta = std::fs::metadata(path).ok()?;
                    Some((meta.len(), meta.modified().ok()?))
                })
                .collect::<Vec<_>>()
        };
        if self.stamp.as_ref() == Some(&stamp()) {
            return;
        }
        let rows = match Index::open(index_path).and_then(|index| index.sessions()) {
            Ok(rows) => rows,
            Err(e) => {
                tracing::debug!("past sessions not listed: {e}");
                return;
            }
        };
        // After the read: opening and closing the index may touch its files.
        self.stamp = Some(stamp());
        let newest = volee_protocol::zellij::newest_sessions(rows.iter().filter_map(|r| {
            volee_protocol::zellij::PastSession::new(
                &r.harness,
                &r.id,
                r.title.as_deref(),
                r.first_prompt.as_deref(),
                r.project.as_deref(),
                r.branch.as_deref(),
                u64::try_from(r.last_ms / 1000).unwrap_or(0),
            )
        }));
        if self.listed.as_ref() != Some(&newest) {
            (self.on_sessions)(newest.clone());
            self.listed = Some(newest);
        }
    }
}

fn remembered_file(paths: &Paths) -> PathBuf {
    paths.state_dir.join("history-roots.json")
}

/// The roots the daemon remembers from the agents it has known (`volee sessions` lists them with
/// the agent each came from, whether a daemon runs or not).
pub fn remembered_roots(paths: &Paths) -> Vec<Root> {
    load_remembered(&remembered_file(paths))
        .iter()
        .filter_map(root_of)
        .collect()
}

/// A remembered root back as a root of its harness's format (a harness no longer known, or one
/// that keeps no history now, gives none).
fn root_of(r: &Remembered) -> Option<Root> {
    let profile = volee_harness::profile(&r.harness)?;
    let kind = profile.history.kind;
    (kind != volee_harness::HistoryKind::None).then(|| Root {
        harness: r.harness.clone(),
        kind,
        path: r.path.clone(),
        from: r.from.clone(),
    })
}

/// The remembered roots; a missing one is none, a corrupt one is moved aside (it is only a
/// memory: the next agents fill it again), a symlink or another user's file is not read.
fn load_remembered(path: &Path) -> Vec<Remembered> {
    match crate::paths::check_own_file(path, "regular file", |k| k.is_file()) {
        Ok(true) => {}
        Ok(false) => return Vec::new(),
        Err(e) => {
            tracing::warn!("not reading the remembered sessions' roots: {e}");
            return Vec::new();
        }
    }
    match crate::persist::load_json(path, crate::daemon::now_ms()) {
        Ok(crate::persist::Loaded::Ok(roots)) => roots,
        Ok(crate::persist::Loaded::Missing) => Vec::new(),
        Ok(crate::persist::Loaded::Corrupt { kept_as, error }) => {
            tracing::warn!(
                "{} did not parse ({error}); kept as {}",
                path.display(),
                kept_as.display()
            );
            Vec::new()
        }
        Err(e) => {
            tracing::warn!("{e}");
            Vec::new()
        }
    }
}

/// A directory this user owns (a root in another user's home is not read).
fn is_own_dir(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .is_ok_and(|m| m.is_dir() && m.uid() == nix::unistd::getuid().as_raw())
}

/// A process's environment, when the process is this user's.
fn own_environ(pid: u32) -> Option<Vec<(String, String)>> {
    use std::os::unix::fs::MetadataExt;
    let dir = PathBuf::from(format!("/proc/{pid}"));
    if std::fs::metadata(&dir).ok()?.uid() != nix::unistd::getuid().as_raw() {
        return None;
    }
    let bytes = std::fs::read(dir.join("environ")).ok()?;
    Some(volee_procscan::parse_environ(&bytes))
}

/// Is the machine busy: the last minute's load at or above the number of cores?
fn busy() -> bool {
    use procfs_core::FromRead;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f32;
    std::fs::read("/proc/loadavg")
        .ok()
        .and_then(|b| procfs_core::LoadAverage::from_read(b.as_slice()).ok())
        .is_some_and(|l| l.one >= cores)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    const SESSION: &str = "d4a8abe5-742d-4002-a1ab-379c1b005cb4";

    /// The actor hears the index's newest sessions once at first, then only after a read
    /// changed them: a look with nothing new is a `stat` of the index's files.
    #[test]
    fn the_actor_hears_the_newest_sessions_when_the_index_changed() {
        let dir = tempfile::tempdir().unwrap();
        let index_path = dir.path().join("sessions.db");
        let heard: Arc<Mutex<Vec<Vec<volee_protocol::zellij::PastSession>>>> = Arc::default();
        let sink = heard.clone();
        let mut listing = Listing {
            on_sessions: Box::new(move |s| sink.lock().unwrap().push(s)),
            stamp: None,
            listed: None,
        };
        listing.publish(&index_path);
        listing.publish(&index_path);
        assert_eq!(*heard.lock().unwrap(), vec![Vec::new()]);

        // The real Claude transcript under a home, read into the index.
        let home = dir.path().join("home");
        let projects = home.join(".claude/projects/-tmp-work");
        std::fs::create_dir_all(&projects).unwrap();
        std::fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
                "../volee-history/tests/fixtures/home/.claude/projects/-tmp-work/{SESSION}.jsonl"
            )),
            projects.join(format!("{SESSION}.jsonl")),
        )
        .unwrap();
        let h = home.display().to_string();
        let mut index = Index::open(&index_path).unwrap();
        index
            .scan(&roots(|k| (k == "HOME").then(|| h.clone())))
            .unwrap();
        drop(index);
        listing.publish(&index_path);
        listing.publish(&index_path);
        let heard = heard.lock().unwrap();
        assert_eq!(heard.len(), 2, "{heard:?}");
        let session = &heard[1][0];
        assert_eq!(session.harness, "claude");
        assert_eq!(session.id, SESSION);
        assert_eq!(session.title.as_deref(), Some("conformance"));
        assert_eq!(
            session.first_prompt.as_deref(),
            Some("Run the touch command to create the marker file.")
        );
        assert_eq!(
            session.project.as_deref(),
            Some("/tmp/volee-test-yFo20s/work")
        );
        assert!(session.last > 0);
    }
}
