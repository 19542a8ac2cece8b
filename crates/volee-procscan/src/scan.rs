//! One pass over a `/proc`-like tree. The root is injectable so tests run on fixture trees.

use std::io::Read;
use std::path::{Path, PathBuf};

use procfs_core::FromRead as _;

/// Read a whole file into `buf` (cleared first); false when it cannot be read. `/proc` files
/// are generated whole at the first read, so one read into a buffer with room for them is the
/// common case: the second, empty read that `read_to_end` does costs a quarter of a scan.
fn read_into(path: &Path, buf: &mut Vec<u8>) -> bool {
    buf.clear();
    let Ok(mut f) = std::fs::File::open(path) else {
        return false;
    };
    if buf.capacity() < 4096 {
        buf.reserve(4096);
    }
    buf.resize(buf.capacity(), 0);
    match f.read(buf) {
        Ok(n) if n < buf.len() => {
            buf.truncate(n);
            true
        }
        Ok(n) => {
            buf.truncate(n);
            f.read_to_end(buf).is_ok()
        }
        Err(_) => {
            buf.clear();
            false
        }
    }
}

use crate::parse::{parse_cmdline, parse_environ, parse_stat, parse_status_owner, Owner, Stat};

/// A process as one scan saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proc {
    pub stat: Stat,
    pub argv: Vec<String>,
    /// Who runs it (`status`), read with `argv`, for candidates only; None when not read or
    /// unreadable — and then it is nobody's agent.
    pub owner: Option<Owner>,
}

/// A `/proc` tree: the real one or a fixture.
#[derive(Debug, Clone)]
pub struct ProcRoot {
    root: PathBuf,
}

impl Default for ProcRoot {
    fn default() -> Self {
        ProcRoot::new("/proc")
    }
}

impl ProcRoot {
    pub fn new(root: impl Into<PathBuf>) -> ProcRoot {
        ProcRoot { root: root.into() }
    }

    fn file(&self, pid: u32, name: &str) -> PathBuf {
        self.root.join(pid.to_string()).join(name)
    }

    /// Every process with a readable `stat` (processes that vanish mid-scan are skipped), with
    /// its `cmdline` and owner read too.
    pub fn scan(&self) -> Vec<Proc> {
        self.scan_filtered(|_| true)
    }

    /// Every process's `stat`; `cmdline` and `status` only where `wants_argv(stat)` (the
    /// candidates), so a scan of thousands of processes reads one small file each. Buffers are
    /// reused.
    pub fn scan_filtered(&self, wants_argv: impl Fn(&Stat) -> bool) -> Vec<Proc> {
        // A scanner's first scan reads everything.
        Scanner::new(self.clone()).scan(wants_argv)
    }

    /// The process's environment, when readable (same user).
    pub fn environ(&self, pid: u32) -> Option<Vec<(String, String)>> {
        std::fs::read(self.file(pid, "environ"))
            .ok()
            .map(|b| parse_environ(&b))
    }

    /// Its working directory.
    pub fn cwd(&self, pid: u32) -> Option<PathBuf> {
        std::fs::read_link(self.file(pid, "cwd")).ok()
    }

    /// What its open file descriptors point at (files only; sockets, pipes and anonymous
    /// inodes are left out). Empty when they cannot be read (another user's process).
    pub fn open_files(&self, pid: u32) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(self.file(pid, "fd")) else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .filter_map(|e| std::fs::read_link(e.path()).ok())
            .filter(|p| p.is_absolute())
            .collect()
    }

    /// Who runs it now (`status`).
    pub fn owner(&self, pid: u32) -> Option<Owner> {
        std::fs::read(self.file(pid, "status"))
            .ok()
            .and_then(|b| parse_status_owner(&b))
    }

    /// One process's `stat`, read afresh.
    pub fn stat(&self, pid: u32) -> Option<Stat> {
        std::fs::read(self.file(pid, "stat"))
            .ok()
            .and_then(|b| parse_stat(&b))
            .filter(|s| s.pid == pid)
    }

    /// One process read afresh: `stat`, `cmdline` and owner (to recheck a stored pid before
    /// acting on it, since pids are reused).
    pub fn read(&self, pid: u32) -> Option<Proc> {
        let stat = std::fs::read(self.file(pid, "stat"))
            .ok()
            .and_then(|b| parse_stat(&b))
            .filter(|s| s.pid == pid)?;
        let argv = std::fs::read(self.file(pid, "cmdline"))
            .map(|b| parse_cmdline(&b))
            .unwrap_or_default();
        Some(Proc {
            stat,
            argv,
            owner: self.owner(pid),
        })
    }

    /// Its executable.
    pub fn exe(&self, pid: u32) -> Option<PathBuf> {
        std::fs::read_link(self.file(pid, "exe")).ok()
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
}

/// Seconds a process counts as young: a young process may still `exec` into something else
/// (`env node …`, `sh -c 'exec claude'`), so it is re-read at every scan.
pub const YOUNG_SECS: u64 = 30;
/// An old process that was not a candidate is re-read at one scan in this many (spread by pid),
/// which bounds how long a late `exec` in an old process goes unseen.
pub const REFRESH_EVERY: u32 = 10;

#[derive(Debug)]
struct Cached {
    proc_: Proc,
    candidate: bool,
}

/// Figures of the last [`Scanner::scan`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanStats {
    /// Processes in the scan.
    pub procs: usize,
    /// Of which `stat` was read (new, young, candidate or due for a refresh).
    pub read: usize,
    /// The clock of the scan, in the ticks of `start_time` (None without `uptime`).
    pub now_ticks: Option<u64>,
}

/// Repeated scans of one root that skip re-reading what cannot have changed in a way that
/// matters: an old process that was no candidate at its last read keeps its entry until its
/// refresh turn. New processes, young ones and candidates are read at every scan, so a new agent
/// is seen at the next scan and a candidate's state and arguments are always fresh.
#[derive(Debug)]
pub struct Scanner {
    root: ProcRoot,
    cache: std::collections::HashMap<u32, Cached>,
    scans: u32,
    clock_ticks: u64,
    last: ScanStats,
}

impl Scanner {
    pub fn new(root: ProcRoot) -> Scanner {
        Scanner {
            root,
            cache: std::collections::HashMap::new(),
            scans: 0,
            // USER_HZ is 100 on every Linux architecture volee runs on.
            clock_ticks: 100,
            last: ScanStats::default(),
        }
    }

    pub fn root(&self) -> &ProcRoot {
        &self.root
    }

    /// Drop what earlier scans read: the next scan reads every process.
    pub fn forget(&mut self) {
        self.cache.clear();
    }

    pub fn last_stats(&self) -> ScanStats {
        self.last
    }

    /// Seconds since boot from `uptime`, when the root has one (fixture trees need not).
    fn uptime_ticks(&self, buf: &mut Vec<u8>) -> Option<u64> {
        if !read_into(&self.root.root.join("uptime"), buf) {
            return None;
        }
        let uptime = procfs_core::Uptime::from_read(&buf[..]).ok()?;
        Some((uptime.uptime * self.clock_ticks as f64) as u64)
    }

    /// Every process, as [`ProcRoot::scan_filtered`] sees it, re-reading only what may have
    /// changed (see the type's documentation).
    pub fn scan(&mut self, wants_argv: impl Fn(&Stat) -> bool) -> Vec<Proc> {
        self.scans = self.scans.wrapping_add(1);
        let Ok(entries) = std::fs::read_dir(&self.root.root) else {
            self.cache.clear();
            return Vec::new();
        };
        let mut buf = Vec::with_capacity(4096);
        let now = self.uptime_ticks(&mut buf);
        let young = YOUNG_SECS * self.clock_ticks;
        let mut path = self.root.root.clone();
        let mut seen = std::collections::HashSet::new();
        let mut read = 0;
        for entry in entries.filter_map(Result::ok) {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            seen.insert(pid);
            let keep = self.cache.get(&pid).is_some_and(|c| {
                !c.candidate
                    && now.is_some_and(|now| now.saturating_sub(c.proc_.stat.start_time) > young)
                    && pid % REFRESH_EVERY != self.scans % REFRESH_EVERY
            });
            if keep {
                continue;
            }
            read += 1;
            path.push(entry.file_name());
            path.push("stat");
            let stat = read_into(&path, &mut buf)
                .then(|| parse_stat(&buf))
                .flatten()
                .filter(|s| s.pid == pid);
            path.pop();
            let Some(stat) = stat else {
                path.pop();
                self.cache.remove(&pid);
                continue;
            };
            let candidate = wants_argv(&stat);
            let (argv, owner) = if candidate {
                path.push("cmdline");
                let argv = if read_into(&path, &mut buf) {
                    parse_cmdline(&buf)
                } else {
                    Vec::new()
                };
                path.pop();
                // Read at every scan of a candidate: a process may change its uid (setuid).
                path.push("status");
                let owner = read_into(&path, &mut buf)
                    .then(|| parse_status_owner(&buf))
                    .flatten();
                path.pop();
                (argv, owner)
            } else {
                (Vec::new(), None)
            };
            path.pop();
            self.cache.insert(
                pid,
                Cached {
                    proc_: Proc { stat, argv, owner },
                    candidate,
                },
            );
        }
        self.cache.retain(|pid, _| seen.contains(pid));
        let mut procs: Vec<Proc> = self.cache.values().map(|c| c.proc_.clone()).collect();
        procs.sort_by_key(|p| p.stat.pid);
        self.last = ScanStats {
            procs: procs.len(),
            read,
            now_ticks: now,
        };
        procs
    }
}
