//! The seed harness kept its sessions in `~/.agent-harness/memory`; volee keeps its own in
//! `$XDG_DATA_HOME/volee/sessions` (docs/store.md says why). A user who comes from the seed
//! may look for sessions there: `volee agent --list-sessions` says that volee does not read that
//! directory, and how a file in volee's export format gets in.

use std::path::{Path, PathBuf};

/// The seed's store, relative to the home directory.
pub const SEED_STORE: &str = ".agent-harness/memory";

/// Files counted at most (the note says "at least" beyond).
const COUNT_MAX: usize = 10_000;

/// The note for `--list-sessions`, when `~/.agent-harness/memory` exists and holds files
/// (none of which volee reads); None otherwise.
pub fn note(home: Option<&Path>, store_root: &Path) -> Option<String> {
    let dir = home?.join(SEED_STORE);
    let files = count_files(&dir);
    if files == 0 {
        return None;
    }
    Some(format!(
        "note: {} holds {}{} file{} that volee does not read: volee's sessions live in {} (docs/store.md).\n\
         hint: a file in volee's export format (volee agent --export ID) comes in with: volee agent --import FILE",
        dir.display(),
        files,
        if files >= COUNT_MAX { "+" } else { "" },
        if files == 1 { "" } else { "s" },
        store_root.display()
    ))
}

/// The home directory, from `$HOME`.
pub fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// Regular files under `dir` (symlinks not followed), up to [`COUNT_MAX`].
fn count_files(dir: &Path) -> usize {
    let mut stack = vec![dir.to_path_buf()];
    let mut count = 0;
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(entry.path()),
                Ok(t) if t.is_file() => count += 1,
                _ => {}
            }
            if count >= COUNT_MAX {
                return count;
            }
        }
    }
    count
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_note_only_when_the_seed_store_holds_files() {
        let home = tempfile::tempdir().unwrap();
        let store = Path::new("/s");
        assert_eq!(note(Some(home.path()), store), None);
        let seed = home.path().join(SEED_STORE);
        std::fs::create_dir_all(seed.join("sub")).unwrap();
        assert_eq!(note(Some(home.path()), store), None, "empty directories");
        std::fs::write(seed.join("sub/a.json"), "{}").unwrap();
        let n = note(Some(home.path()), store).unwrap();
        assert!(n.contains("holds 1 file that volee does not read"), "{n}");
        assert!(n.contains("volee agent --import FILE"), "{n}");
        assert_eq!(note(None, store), None);
    }
}
