//! [`volee_harness::ListingSource::StatusFile`]: the JSON file a harness keeps per process
//! (Claude Code's `~/.claude/sessions/<pid>.json`), read when its mtime changes — inotify on its
//! directory brings the change at once, the once-a-second poll is the fallback.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use volee_core::{HookSignal, Observation, Registry};

use super::{Sink, SourceMsg};

/// A status file is a few hundred bytes; anything over this is not one.
const MAX_STATUS_BYTES: u64 = 1 << 20;

pub struct StatusFiles {
    sink: Sink,
    watcher: Option<notify::RecommendedWatcher>,
    watched_dirs: HashSet<PathBuf>,
    /// Modification time of each agent's status file when last read.
    seen: HashMap<String, SystemTime>,
}

impl StatusFiles {
    pub fn new(sink: Sink) -> StatusFiles {
        StatusFiles {
            sink,
            watcher: None,
            watched_dirs: HashSet::new(),
            seen: HashMap::new(),
        }
    }

    pub fn forget(&mut self, id: &str) {
        self.seen.remove(id);
    }

    /// Watch the directories of live agents' status files (once each).
    fn watch_dirs(&mut self, registry: &Registry) {
        use notify::Watcher;
        let dirs: Vec<PathBuf> = registry
            .iter()
            .filter(|a| !a.is_ended())
            .filter_map(|a| {
                Path::new(a.status_file.as_deref()?)
                    .parent()
                    .map(Path::to_path_buf)
            })
            .filter(|d| !self.watched_dirs.contains(d) && d.is_dir())
            .collect();
        if dirs.is_empty() {
            return;
        }
        if self.watcher.is_none() {
            let sink = self.sink.clone();
            match notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
                if res.is_ok() {
                    sink(SourceMsg::StatusFilesChanged);
                }
            }) {
                Ok(w) => self.watcher = Some(w),
                Err(e) => {
                    tracing::warn!("cannot watch status files (polling instead): {e}");
                    return;
                }
            }
        }
        if let Some(watcher) = self.watcher.as_mut() {
            for dir in dirs {
                match watcher.watch(&dir, notify::RecursiveMode::NonRecursive) {
                    Ok(()) => {
                        self.watched_dirs.insert(dir);
                    }
                    Err(e) => tracing::warn!("cannot watch {}: {e}", dir.display()),
                }
            }
        }
    }

    /// Read the status files that changed since the last poll (a stat per agent; no process).
    pub fn poll(&mut self, registry: &mut Registry) {
        self.watch_dirs(registry);
        let files: Vec<(String, String, String, bool)> = registry
            .iter()
            .filter(|a| !a.is_ended())
            .filter_map(|a| {
                let path = a.status_file.clone()?;
                Some((
                    a.id.clone(),
                    a.harness.clone(),
                    path,
                    a.session_id.is_none(),
                ))
            })
            .collect();
        for (id, harness, path, unnamed) in files {
            // Only a regular file of a sane size: a FIFO put in its place would block the
            // actor's read.
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            if !meta.is_file() || meta.len() > MAX_STATUS_BYTES {
                continue;
            }
            let Ok(mtime) = meta.modified() else {
                continue;
            };
            if self.seen.get(&id) == Some(&mtime) {
                continue;
            }
            self.seen.insert(id.clone(), mtime);
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let Some(obs) = volee_harness::listing::parse_status(&harness, &text) else {
                continue;
            };
            let at = volee_os::clock::ms_since_epoch(mtime);
            if let (true, Some(session)) = (unnamed, obs.session_id) {
                registry.edit(&id, |a| a.session_id = Some(session));
            }
            registry.observe(
                &id,
                Observation::Listing(HookSignal {
                    at,
                    event: obs.evidence,
                    state: obs.state,
                    reason: None,
                }),
            );
        }
    }
}
