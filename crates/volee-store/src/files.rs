//! Crash-safe file primitives: private directories, atomic replace with fsync of the file and
//! its directory, durable appends.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use crate::error::{io_err, Result};

/// Create `dir` (and parents) 0700; tighten an existing wider one.
pub(crate) fn ensure_private_dir(dir: &Path) -> Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io_err("create directory", dir))?;
    let meta = fs::metadata(dir).map_err(io_err("read", dir))?;
    if meta.permissions().mode() & 0o077 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
            .map_err(io_err("set permissions of", dir))?;
    }
    Ok(())
}

/// Open (create) a 0600 file for appending.
pub(crate) fn open_append(path: &Path) -> Result<File> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .map_err(io_err("open", path))
}

pub(crate) fn fsync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("sync directory", dir))
}

/// Write `bytes` to a 0600 temp file beside `path` and fsync it; returns the temp path. The
/// caller renames it into place (several files can then share one directory fsync).
pub(crate) fn write_temp(path: &Path, bytes: &[u8]) -> Result<std::path::PathBuf> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io_err("write", &tmp))?;
    file.write_all(bytes).map_err(io_err("write", &tmp))?;
    file.sync_all().map_err(io_err("sync", &tmp))?;
    Ok(tmp)
}

/// Replace the files atomically, in order: temp file, fsync, rename each; then fsync the
/// directory once. A crash leaves each file old or new, never torn.
pub(crate) fn replace_all(dir: &Path, files: &[(&Path, &[u8])]) -> Result<()> {
    let mut temps = Vec::with_capacity(files.len());
    for (path, bytes) in files {
        temps.push((write_temp(path, bytes)?, *path));
    }
    for (tmp, path) in temps {
        fs::rename(&tmp, path).map_err(io_err("replace", path))?;
    }
    fsync_dir(dir)
}
