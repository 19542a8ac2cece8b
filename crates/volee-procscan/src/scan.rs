//! One pass over a `/proc`-like tree. The root is injectable so tests run on fixture trees.

use std::io::Read;
use std::path::{Path, PathBuf};

/// Read a whole file into `buf` (cleared first); false when it cannot be read.
fn read_into(path: &Path, buf: &mut Vec<u8>) -> bool {
    buf.clear();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(buf))
        .is_ok()
}

use crate::parse::{parse_cmdline, parse_environ, parse_stat, Stat};

/// A process as one scan saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proc {
    pub stat: Stat,
    pub argv: Vec<String>,
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
    /// its `cmdline` read too.
    pub fn scan(&self) -> Vec<Proc> {
        self.scan_filtered(|_| true)
    }

    /// Every process's `stat`; `cmdline` only where `wants_argv(stat)` (the candidates), so a
    /// scan of thousands of processes reads one small file each. Buffers are reused.
    pub fn scan_filtered(&self, wants_argv: impl Fn(&Stat) -> bool) -> Vec<Proc> {
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return Vec::new();
        };
        let mut buf = Vec::with_capacity(4096);
        let mut path = self.root.clone();
        let mut procs = Vec::new();
        for entry in entries.filter_map(Result::ok) {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            path.push(entry.file_name());
            path.push("stat");
            let stat = read_into(&path, &mut buf)
                .then(|| parse_stat(&buf))
                .flatten();
            path.pop();
            let argv = match &stat {
                Some(s) if wants_argv(s) => {
                    path.push("cmdline");
                    let argv = if read_into(&path, &mut buf) {
                        parse_cmdline(&buf)
                    } else {
                        Vec::new()
                    };
                    path.pop();
                    argv
                }
                _ => Vec::new(),
            };
            path.pop();
            if let Some(stat) = stat.filter(|s| s.pid == pid) {
                procs.push(Proc { stat, argv });
            }
        }
        procs.sort_by_key(|p| p.stat.pid);
        procs
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

    /// Its executable.
    pub fn exe(&self, pid: u32) -> Option<PathBuf> {
        std::fs::read_link(self.file(pid, "exe")).ok()
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
}
