//! One pass over a `/proc`-like tree. The root is injectable so tests run on fixture trees.

use std::path::{Path, PathBuf};

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

    /// Every process with a readable `stat` (processes that vanish mid-scan are skipped). Reads
    /// only `stat` and `cmdline`; the rest is read for candidates alone.
    pub fn scan(&self) -> Vec<Proc> {
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return Vec::new();
        };
        let mut procs: Vec<Proc> = entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter_map(|pid| {
                let stat = parse_stat(&std::fs::read(self.file(pid, "stat")).ok()?)?;
                let argv =
                    parse_cmdline(&std::fs::read(self.file(pid, "cmdline")).unwrap_or_default());
                Some(Proc { stat, argv })
            })
            .collect();
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
