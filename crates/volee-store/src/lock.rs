//! The single-writer lock: an `fd-lock` (flock) write lock on `<session>/lock`, held for as long
//! as the writer lives. The kernel releases it when the process exits, however it exits. The
//! holder writes its pid into the file after locking, so a refused writer can name it.

use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use crate::error::{io_err, Result, StoreError};
use crate::files::{open_regular, read_regular};

/// How often, and how far apart, a held lock is tried again before the writer is refused.
const RETRIES: u32 = 20;
const RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(5);

/// A held writer lock; dropping it releases the lock.
#[derive(Debug)]
pub(crate) struct WriterLock {
    _file: fd_lock::RwLock<File>,
}

impl WriterLock {
    /// Take the lock of the session in `dir` without waiting.
    pub(crate) fn acquire(id: &str, dir: &Path) -> Result<WriterLock> {
        let path = dir.join("lock");
        let file = open_regular(
            &path,
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600),
        )
        .map_err(|e| match e.kind() {
            ErrorKind::NotFound => StoreError::UnknownId { id: id.to_string() },
            _ => io_err("open", &path)(e),
        })?;
        let mut lock = fd_lock::RwLock::new(file);
        let mut attempts = 1;
        loop {
            match lock.try_write() {
                Ok(guard) => {
                    let ino = guard.metadata().map_err(io_err("read", &path))?.ino();
                    // The session may have been deleted (its directory renamed away) between our
                    // open and our lock: then this lock file is no longer the session's.
                    let current = std::fs::metadata(&path).map(|m| m.ino()).ok();
                    if current != Some(ino) {
                        return Err(StoreError::UnknownId { id: id.to_string() });
                    }
                    let pid = format!("{}\n", std::process::id());
                    guard.set_len(0).map_err(io_err("write", &path))?;
                    guard
                        .write_all_at(pid.as_bytes(), 0)
                        .map_err(io_err("write", &path))?;
                    // The lock must outlive this borrow: forgetting the guard skips its unlock,
                    // and the flock is released when the file (kept below) is closed.
                    std::mem::forget(guard);
                    break;
                }
                // A short wait before refusing: a lock held for a moment (another management
                // command, or a child the holder forked that has not exec'd yet and so shares
                // its lock) is not a second writer.
                Err(e) if e.kind() == ErrorKind::WouldBlock && attempts < RETRIES => {
                    attempts += 1;
                    std::thread::sleep(RETRY_PAUSE);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    return Err(StoreError::Locked {
                        id: id.to_string(),
                        pid: holder_pid(&path),
                    })
                }
                Err(e) => return Err(io_err("lock", &path)(e)),
            }
        }
        Ok(WriterLock { _file: lock })
    }
}

/// Whether a writer holds the lock of the session in `dir`, without taking it or writing
/// anything: `Some(pid)` when held (the pid when the holder wrote it), `None` when free or when
/// there is no lock file. A shared `flock` is tried (refused while a writer holds the exclusive
/// one) the way [`WriterLock::acquire`] tries, so a lock held for a moment is not counted.
pub(crate) fn holder(dir: &Path) -> Result<Option<Option<u32>>> {
    let path = dir.join("lock");
    let file = match open_regular(&path, OpenOptions::new().read(true)) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err("open", &path)(e)),
    };
    let lock = fd_lock::RwLock::new(file);
    for attempt in 1..=RETRIES {
        match lock.try_read() {
            Ok(_guard) => return Ok(None),
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if attempt < RETRIES {
                    std::thread::sleep(RETRY_PAUSE);
                }
            }
            Err(e) => return Err(io_err("lock", &path)(e)),
        }
    }
    Ok(Some(holder_pid(&path)))
}

/// The pid the holder wrote into the lock file (absent in the instant between its lock and its
/// write).
pub(crate) fn holder_pid(path: &Path) -> Option<u32> {
    String::from_utf8(read_regular(path).ok()?)
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn second_writer_is_refused_with_the_holders_pid_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let first = WriterLock::acquire("s", dir.path()).unwrap();
        match WriterLock::acquire("s", dir.path()) {
            Err(StoreError::Locked { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("expected Locked, got {other:?}"),
        }
        assert_eq!(holder(dir.path()).unwrap(), Some(Some(std::process::id())));
        drop(first);
        assert_eq!(holder(dir.path()).unwrap(), None);
        WriterLock::acquire("s", dir.path()).unwrap();
    }
}
