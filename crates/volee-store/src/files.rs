//! Crash-safe file primitives: private directories, atomic replace with fsync of the file and
//! its directory, durable appends.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use crate::error::{io_err, NotRegular, Result, StoreError};

/// Create `dir` (and parents) 0700; tighten an existing wider one. It must then be a real
/// directory of this user ([`check_real_dir`]).
pub(crate) fn ensure_private_dir(dir: &Path) -> Result<()> {
    // Checked first too, so that a symlink is never followed to create or chmod its target.
    check_real_dir(dir)?;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io_err("create directory", dir))?;
    check_real_dir(dir)?;
    let meta = fs::symlink_metadata(dir).map_err(io_err("read", dir))?;
    if meta.permissions().mode() & 0o077 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
            .map_err(io_err("set permissions of", dir))?;
    }
    Ok(())
}

/// Whether `dir` (the store root or a session directory) exists, refusing what the store must
/// not go through: a symlink (a session directory linked elsewhere would have the lock written,
/// and files deleted, in its target), anything but a directory, or a directory of another user.
pub(crate) fn check_real_dir(dir: &Path) -> Result<bool> {
    let refuse = |reason: String| StoreError::Unsafe {
        path: dir.to_path_buf(),
        reason,
    };
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_err("read", dir)(e)),
        Ok(m) if m.file_type().is_symlink() => Err(refuse(
            "it is a symbolic link; the store never reads or writes through one (give the real path, or remove the link)".into(),
        )),
        Ok(m) if !m.is_dir() => Err(refuse(format!(
            "it is {}, not a directory",
            kind_of(m.file_type())
        ))),
        Ok(m) if m.uid() != effective_uid() => Err(refuse(format!(
            "it belongs to uid {}, not to this user (uid {}); only the user's own files are trusted",
            m.uid(),
            effective_uid()
        ))),
        Ok(_) => Ok(true),
    }
}

fn effective_uid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// What a file type is, for messages.
pub(crate) fn kind_of(t: fs::FileType) -> &'static str {
    if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() || t.is_char_device() {
        "a device"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_file() {
        "a regular file"
    } else {
        "a special file"
    }
}

/// Open `path` as `opts` says, but only a regular file: never following a symlink in its last
/// component (`O_NOFOLLOW`) and never waiting (`O_NONBLOCK`: opening a FIFO would block until
/// a writer came, hanging a listing for good), then refusing what `fstat` does not call a
/// regular file. The refusal is an I/O error that [`io_err`] turns into
/// [`StoreError::NotRegularFile`]; a missing file stays `NotFound`.
pub(crate) fn open_regular(path: &Path, opts: &mut OpenOptions) -> std::io::Result<File> {
    let file = opts
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(nix::libc::ELOOP) => std::io::Error::other(NotRegular("a symbolic link")),
            _ => e,
        })?;
    let kind = file.metadata()?.file_type();
    if kind.is_file() {
        Ok(file)
    } else {
        Err(std::io::Error::other(NotRegular(kind_of(kind))))
    }
}

/// Open an existing regular file for reading ([`open_regular`]).
pub(crate) fn open_read(path: &Path) -> std::io::Result<File> {
    open_regular(path, OpenOptions::new().read(true))
}

/// A regular file's bytes ([`open_regular`]).
pub(crate) fn read_regular(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    open_read(path)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Open (create) a 0600 file for appending.
pub(crate) fn open_append(path: &Path) -> Result<File> {
    open_regular(
        path,
        OpenOptions::new().append(true).create(true).mode(0o600),
    )
    .map_err(io_err("open", path))
}

pub(crate) fn fsync_dir(dir: &Path) -> Result<()> {
    OpenOptions::new()
        .read(true)
        .custom_flags(
            nix::libc::O_DIRECTORY
                | nix::libc::O_NOFOLLOW
                | nix::libc::O_NONBLOCK
                | nix::libc::O_CLOEXEC,
        )
        .open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("sync directory", dir))
}

/// Write `bytes` to a 0600 temp file beside `path` and fsync it; returns the temp path. The
/// caller renames it into place (several files can then share one directory fsync).
pub(crate) fn write_temp(path: &Path, bytes: &[u8]) -> Result<std::path::PathBuf> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let mut file = open_regular(
        &tmp,
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600),
    )
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
