//! Crash-safe files: atomic replace with fsync, and loading that never loses a corrupt file.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;

/// A file that could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    #[error("could not write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("could not read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("could not encode {}", path.display())]
    Encode {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

/// Write `bytes` to `path` atomically: a 0600 temp file in the same directory, fsync, rename, fsync
/// the directory. A crash leaves either the old or the new file, never a torn one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), PersistError> {
    let err = |source| PersistError::Write {
        path: path.to_path_buf(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp.{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
        std::process::id()
    ));
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .map_err(err)?;
    file.write_all(bytes).map_err(err)?;
    file.sync_all().map_err(err)?;
    drop(file);
    fs::rename(&tmp, path).map_err(err)?;
    File::open(dir).and_then(|d| d.sync_all()).map_err(err)?;
    Ok(())
}

/// Remove the temp files `write_atomic` left in `dir` when its writer was killed mid-save
/// (`.NAME.tmp.PID`, regular files only, only when process PID is gone); returns what went.
pub fn remove_stale_temp_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(pid) = temp_file_pid(name) else {
            continue;
        };
        // file_type() does not follow symlinks: a link or a directory is left alone.
        if !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let ours = pid == std::process::id();
        if !ours && process_alive(pid) {
            continue;
        }
        if fs::remove_file(entry.path()).is_ok() {
            removed.push(entry.path());
        }
    }
    removed
}

/// The writer's pid of a `write_atomic` temp file name (`.NAME.tmp.PID`).
fn temp_file_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix('.')?;
    let (stem, pid) = rest.rsplit_once(".tmp.")?;
    if stem.is_empty() || pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// Does process `pid` exist (EPERM: it does, as someone else)?
fn process_alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    if raw <= 0 {
        return false;
    }
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None) {
        Ok(()) => true,
        Err(e) => e == nix::errno::Errno::EPERM,
    }
}

/// Serialize as pretty JSON and write atomically.
pub fn save_json<T: Serialize>(path: &Path, value: &T) -> Result<(), PersistError> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|source| PersistError::Encode {
        path: path.to_path_buf(),
        source,
    })?;
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

/// What loading found.
#[derive(Debug)]
pub enum Loaded<T> {
    Missing,
    Ok(T),
    /// The file did not parse; it was moved aside to `kept_as` so nothing is lost.
    Corrupt {
        kept_as: PathBuf,
        error: String,
    },
}

/// Load JSON; a corrupt file is renamed to `NAME.corrupt-EPOCHMS` and reported, never deleted.
pub fn load_json<T: DeserializeOwned>(path: &Path, now_ms: u64) -> Result<Loaded<T>, PersistError> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Loaded::Missing),
        Err(source) => {
            return Err(PersistError::Read {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    match serde_json::from_slice(&bytes) {
        Ok(v) => Ok(Loaded::Ok(v)),
        Err(e) => Ok(Loaded::Corrupt {
            kept_as: keep_aside(path, now_ms)?,
            error: e.to_string(),
        }),
    }
}

/// Rename a file that did not load to `NAME.corrupt-EPOCHMS` beside it; where it went.
pub fn keep_aside(path: &Path, now_ms: u64) -> Result<PathBuf, PersistError> {
    let kept_as = path.with_file_name(format!(
        "{}.corrupt-{now_ms}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file")
    ));
    fs::rename(path, &kept_as).map_err(|source| PersistError::Write {
        path: kept_as.clone(),
        source,
    })?;
    Ok(kept_as)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn atomic_write_is_private_and_replaces() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("agents.json");
        save_json(&path, &vec![1, 2]).unwrap();
        save_json(&path, &vec![3]).unwrap();
        let back: Loaded<Vec<u8>> = load_json(&path, 0).unwrap();
        assert!(matches!(back, Loaded::Ok(v) if v == vec![3]));
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            fs::read_dir(tmp.path()).unwrap().count(),
            1,
            "no temp file left"
        );
    }

    #[test]
    fn corrupt_file_is_kept_aside() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("agents.json");
        fs::write(&path, b"{ not json").unwrap();
        match load_json::<Vec<u8>>(&path, 42).unwrap() {
            Loaded::Corrupt { kept_as, .. } => {
                assert_eq!(fs::read(&kept_as).unwrap(), b"{ not json");
                assert!(kept_as.ends_with("agents.json.corrupt-42"));
            }
            other => panic!("expected corrupt, got {other:?}"),
        }
        assert!(matches!(
            load_json::<Vec<u8>>(&path, 0).unwrap(),
            Loaded::Missing
        ));
    }

    /// The pid of a process that has exited (and been reaped).
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    #[test]
    fn stale_temp_files_of_dead_writers_go_and_others_stay() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let dead = dead_pid();
        let mut live = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let stale = dir.join(format!(".agents.json.tmp.{dead}"));
        let in_use = dir.join(format!(".agents.json.tmp.{}", live.id()));
        let link = dir.join(format!(".x.json.tmp.{dead}"));
        let subdir = dir.join(format!(".d.tmp.{dead}"));
        let unrelated = dir.join("agents.json.tmp.notapid");
        fs::write(&stale, "half a registry").unwrap();
        fs::write(&in_use, "being written").unwrap();
        fs::write(&unrelated, "x").unwrap();
        let target = dir.join("target");
        fs::write(&target, "keep").unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        fs::create_dir(&subdir).unwrap();
        let removed = remove_stale_temp_files(dir);
        let _ = live.kill();
        let _ = live.wait();
        assert_eq!(removed, vec![stale.clone()]);
        assert!(!stale.exists());
        assert!(in_use.exists(), "a live writer's temp file was removed");
        assert!(fs::symlink_metadata(&link).is_ok(), "a symlink was removed");
        assert!(subdir.is_dir());
        assert!(unrelated.exists());
        assert_eq!(fs::read_to_string(&target).unwrap(), "keep");
    }

    #[test]
    fn temp_file_names_parse() {
        assert_eq!(temp_file_pid(".agents.json.tmp.123"), Some(123));
        assert_eq!(temp_file_pid(".tmp.123"), None);
        assert_eq!(temp_file_pid("agents.json.tmp.123"), None);
        assert_eq!(temp_file_pid(".agents.json.tmp."), None);
        assert_eq!(temp_file_pid(".agents.json.tmp.12a"), None);
    }
}
