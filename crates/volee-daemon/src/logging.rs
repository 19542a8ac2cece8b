//! The daemon's log file, rotated by size (`volee.log` → `volee.log.1`).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// An append-only log file that rotates itself past `max_bytes`.
#[derive(Clone)]
pub struct RotatingLog {
    inner: Arc<Mutex<Inner>>,
}

struct Inner {
    path: PathBuf,
    file: Option<File>,
    written: u64,
    max_bytes: u64,
}

impl RotatingLog {
    pub fn open(path: PathBuf, max_bytes: u64) -> io::Result<RotatingLog> {
        let mut inner = Inner {
            path,
            file: None,
            written: 0,
            max_bytes: max_bytes.max(4096),
        };
        inner.reopen()?;
        Ok(RotatingLog {
            inner: Arc::new(Mutex::new(inner)),
        })
    }
}

impl Inner {
    fn reopen(&mut self) -> io::Result<()> {
        // The user's own 0600 file only: a log predating that (or a symlink) is not written to.
        let mut opts = OpenOptions::new();
        opts.create(true).append(true);
        let file = crate::paths::open_private(&self.path, opts).map_err(io::Error::other)?;
        self.written = file.metadata()?.len();
        self.file = Some(file);
        if self.written >= self.max_bytes {
            self.rotate()?;
        }
        Ok(())
    }

    fn rotate(&mut self) -> io::Result<()> {
        self.file = None;
        let mut old = self.path.clone().into_os_string();
        old.push(".1");
        std::fs::rename(&self.path, old)?;
        let mut opts = OpenOptions::new();
        opts.create(true).append(true);
        self.file = Some(crate::paths::open_private(&self.path, opts).map_err(io::Error::other)?);
        self.written = 0;
        Ok(())
    }
}

impl Write for RotatingLog {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut inner = self
            .inner
            .lock()
            .map_err(|_| io::Error::other("log lock poisoned"))?;
        if inner.written + buf.len() as u64 > inner.max_bytes {
            inner.rotate()?;
        }
        let n = match inner.file.as_mut() {
            Some(f) => f.write(buf)?,
            None => buf.len(),
        };
        inner.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.inner.lock() {
            Ok(mut inner) => inner.file.as_mut().map_or(Ok(()), |f| f.flush()),
            Err(_) => Ok(()),
        }
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for RotatingLog {
    type Writer = RotatingLog;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_past_the_limit() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("volee.log");
        let mut log = RotatingLog::open(path.clone(), 4096).unwrap();
        let line = [b'x'; 1000];
        for _ in 0..5 {
            log.write_all(&line).unwrap();
        }
        assert!(tmp.path().join("volee.log.1").exists());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 1000);
    }
}
