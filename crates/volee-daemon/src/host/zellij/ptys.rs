//! Output of zellij agents, from their terminals: zellij pushes nothing for a pane in a tab
//! nobody looks at (no render report, no `subscribe` update while a client is attached), so the
//! daemon watches each agent's pty itself. A write to a pty's slave side (`/dev/pts/N`, where
//! the agent's stdout is) is an inotify `IN_MODIFY` on that device's inode, 0–5 ms after the
//! write (measured on zellij 0.45.1); a close for writing is `IN_CLOSE_WRITE` (a program that
//! wrote to it ended — perhaps the agent). One inotify instance (`notify`'s watcher) for every
//! agent: no process, no timer, nothing at all while agents are idle.
//!
//! Only a terminal the user owns is watched (a pty whose owner is not the daemon's user is
//! someone else's).

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use notify::Watcher;

/// What a watched pty saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PtyEvent {
    Written,
    /// A program that had it open for writing closed it.
    Closed,
}

/// Where pty events go: the pty's path and what happened.
pub type PtySink = std::sync::Arc<dyn Fn(PathBuf, PtyEvent) + Send + Sync>;

/// The watched ptys, by path, with the pane each belongs to.
pub struct Ptys<K> {
    sink: PtySink,
    watcher: Option<notify::RecommendedWatcher>,
    /// Watched pty → the pane it drives.
    panes: HashMap<PathBuf, K>,
    /// Processes whose pty could not be found or watched: not asked again.
    unwatchable: HashMap<u32, String>,
}

impl<K: Clone + PartialEq> Ptys<K> {
    pub fn new(sink: PtySink) -> Ptys<K> {
        Ptys {
            sink,
            watcher: None,
            panes: HashMap::new(),
            unwatchable: HashMap::new(),
        }
    }

    /// The pane a watched pty drives.
    pub fn pane(&self, pty: &Path) -> Option<&K> {
        self.panes.get(pty)
    }

    /// Watch the ptys of these `(pane, process)` pairs, and no others.
    pub fn sync(&mut self, wanted: &[(K, u32)]) {
        let mut keep: HashMap<PathBuf, K> = HashMap::new();
        for (pane, pid) in wanted {
            if let Some((path, _)) = self.panes.iter().find(|(_, k)| *k == pane) {
                keep.insert(path.clone(), pane.clone());
                continue;
            }
            if self.unwatchable.contains_key(pid) {
                continue;
            }
            match self.watch(*pid) {
                Ok(path) => {
                    tracing::debug!("watching {} (process {pid})", path.display());
                    keep.insert(path, pane.clone());
                }
                Err(why) => {
                    tracing::info!("cannot watch the terminal of process {pid}: {why}");
                    self.unwatchable.insert(*pid, why);
                }
            }
        }
        let gone: Vec<PathBuf> = self
            .panes
            .keys()
            .filter(|p| !keep.contains_key(*p))
            .cloned()
            .collect();
        if let Some(watcher) = self.watcher.as_mut() {
            for path in &gone {
                let _ = watcher.unwatch(path);
            }
        }
        self.panes = keep;
        let pids: Vec<u32> = wanted.iter().map(|(_, pid)| *pid).collect();
        self.unwatchable.retain(|pid, _| pids.contains(pid));
    }

    /// Watch process `pid`'s terminal; its path.
    fn watch(&mut self, pid: u32) -> Result<PathBuf, String> {
        let path = pty_of(pid)?;
        if self.watcher.is_none() {
            let sink = self.sink.clone();
            let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
                let Ok(event) = res else {
                    return;
                };
                let what = match event.kind {
                    notify::EventKind::Modify(_) => PtyEvent::Written,
                    notify::EventKind::Access(notify::event::AccessKind::Close(
                        notify::event::AccessMode::Write,
                    )) => PtyEvent::Closed,
                    _ => return,
                };
                for path in event.paths {
                    sink(path, what);
                }
            })
            .map_err(|e| format!("no inotify: {e}"))?;
            self.watcher = Some(watcher);
        }
        let watcher = self.watcher.as_mut().ok_or("no watcher")?;
        watcher
            .watch(&path, notify::RecursiveMode::NonRecursive)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(path)
    }
}

/// Process `pid`'s terminal: where its stdout (else stderr, stdin) points, when that is a pty
/// (`/dev/pts/N`, a character device) the daemon's user owns.
pub fn pty_of(pid: u32) -> Result<PathBuf, String> {
    let uid = nix::unistd::getuid().as_raw();
    for fd in [1, 2, 0] {
        let Ok(target) = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")) else {
            continue;
        };
        if !target.starts_with("/dev/pts/") {
            continue;
        }
        let meta = std::fs::metadata(&target).map_err(|e| format!("{}: {e}", target.display()))?;
        use std::os::unix::fs::FileTypeExt;
        if !meta.file_type().is_char_device() {
            return Err(format!("{} is not a terminal", target.display()));
        }
        if meta.uid() != uid {
            return Err(format!(
                "{} belongs to uid {}, not to this user",
                target.display(),
                meta.uid()
            ));
        }
        return Ok(target);
    }
    Err("no terminal among its stdout, stderr and stdin".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    /// A real pty pair: writing to the slave side is seen as `Written`, closing it as `Closed`.
    #[test]
    fn a_write_to_a_watched_pty_is_seen_and_its_close_too() {
        let pty = nix::pty::openpty(None, None).unwrap();
        let slave = std::fs::read_link(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&pty.slave)
        ))
        .unwrap();
        let seen: Arc<Mutex<Vec<(PathBuf, PtyEvent)>>> = Arc::default();
        let sink_seen = seen.clone();
        let mut ptys: Ptys<u32> = Ptys::new(Arc::new(move |p, e| {
            sink_seen.lock().unwrap().push((p, e));
        }));
        // A child whose stdout is the slave, as a pane's program has it (ours is given away: a
        // close is reported when the last descriptor of the open file goes).
        let mut child = std::process::Command::new("sh")
            .args(["-c", "read x; printf 'hello'; read y"])
            .stdin(std::process::Stdio::piped())
            .stdout(pty.slave)
            .spawn()
            .unwrap();
        ptys.sync(&[(7, child.id())]);
        assert_eq!(ptys.pane(&slave), Some(&7));
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"go\n").unwrap();
        let wait_for = |what: PtyEvent| {
            let deadline = Instant::now() + Duration::from_secs(5);
            while !seen
                .lock()
                .unwrap()
                .iter()
                .any(|(p, e)| *p == slave && *e == what)
            {
                assert!(
                    Instant::now() < deadline,
                    "no {what:?}: {:?}",
                    seen.lock().unwrap()
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        wait_for(PtyEvent::Written);
        stdin.write_all(b"end\n").unwrap();
        child.wait().unwrap();
        wait_for(PtyEvent::Closed);
        // Not wanted any more: no longer watched.
        ptys.sync(&[]);
        assert_eq!(ptys.pane(&slave), None);
    }

    #[test]
    fn a_process_without_a_terminal_is_not_watched() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let err = pty_of(child.id()).unwrap_err();
        assert!(err.contains("no terminal"), "{err}");
        let _ = child.kill();
        let _ = child.wait();
    }
}
