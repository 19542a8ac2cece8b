//! Where volee keeps its files (ARCHITECTURE.md section 9).
//!
//! `VOLEE_HOME=DIR` puts every directory under one root (every test uses it); otherwise the XDG
//! base directories apply. Directories are created 0700, files 0600.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// volee's directories.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    pub config_dir: PathBuf,
    pub data_dir: PathBuf,
    pub state_dir: PathBuf,
    pub runtime_dir: PathBuf,
}

impl Paths {
    /// Resolve from an environment lookup (`std::env::var` in production, a map in tests).
    pub fn from_env(get: impl Fn(&str) -> Option<String>, uid: u32) -> Paths {
        let non_empty = |k: &str| get(k).filter(|v| !v.is_empty());
        if let Some(home) = non_empty("VOLEE_HOME") {
            let root = PathBuf::from(home);
            return Paths {
                config_dir: root.join("config"),
                data_dir: root.join("data"),
                state_dir: root.join("state"),
                runtime_dir: root.join("run"),
            };
        }
        let home = PathBuf::from(non_empty("HOME").unwrap_or_else(|| "/".into()));
        let xdg = |var: &str, fallback: &str| {
            non_empty(var)
                .map(PathBuf::from)
                .unwrap_or_else(|| home.join(fallback))
                .join("volee")
        };
        Paths {
            config_dir: xdg("XDG_CONFIG_HOME", ".config"),
            data_dir: xdg("XDG_DATA_HOME", ".local/share"),
            state_dir: xdg("XDG_STATE_HOME", ".local/state"),
            runtime_dir: non_empty("XDG_RUNTIME_DIR")
                .map(|d| PathBuf::from(d).join("volee"))
                .unwrap_or_else(|| std::env::temp_dir().join(format!("volee-{uid}"))),
        }
    }

    /// From the process environment.
    pub fn from_process_env() -> Paths {
        Paths::from_env(|k| std::env::var(k).ok(), nix::unistd::getuid().as_raw())
    }

    pub fn socket(&self) -> PathBuf {
        self.runtime_dir.join("daemon.sock")
    }
    pub fn lock_file(&self) -> PathBuf {
        self.runtime_dir.join("daemon.lock")
    }
    pub fn pid_file(&self) -> PathBuf {
        self.runtime_dir.join("daemon.pid")
    }
    pub fn launch_dir(&self) -> PathBuf {
        self.runtime_dir.join("launch")
    }
    pub fn registry(&self) -> PathBuf {
        self.state_dir.join("agents.json")
    }
    /// Hook events written while no daemon answered.
    pub fn hook_spool(&self) -> PathBuf {
        self.state_dir.join("spool").join("hooks.jsonl")
    }
    pub fn log_file(&self) -> PathBuf {
        self.state_dir.join("volee.log")
    }
    pub fn config_file(&self) -> PathBuf {
        self.config_dir.join("config.toml")
    }
    /// The machines of `volee machine add` (issue 20).
    /// The ControlPath of machine `name`'s kept ssh connection (in the 0700 runtime dir).
    pub fn ssh_control(&self, name: &str) -> PathBuf {
        self.runtime_dir.join(format!("ssh-{name}"))
    }
    pub fn machines_file(&self) -> PathBuf {
        self.config_dir.join("machines.toml")
    }

    /// Create every directory volee writes to, private to the user. A directory that exists but
    /// belongs to someone else, or a symlink in place of a runtime directory, is refused.
    pub fn ensure(&self) -> Result<(), PathError> {
        // Config, data and state live in the user's home, where a symlink to the user's own
        // directory (a dotfiles manager) is normal; the runtime dir may sit in a shared /tmp.
        for dir in [&self.config_dir, &self.data_dir, &self.state_dir] {
            ensure_private_dir_in(dir, Links::OwnedOnly)?;
        }
        for dir in [
            &self.runtime_dir,
            &self.launch_dir(),
            &self.state_dir.join("spool"),
        ] {
            ensure_private_dir(dir)?;
        }
        Ok(())
    }
}

/// A path volee will not use, or could not create.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("{} is owned by uid {owner}, not by you (uid {me})", path.display())]
    ForeignOwner { path: PathBuf, owner: u32, me: u32 },
    #[error("{} is a symbolic link, which volee does not follow there", path.display())]
    Symlink { path: PathBuf },
    #[error("{} is not a {expected}", path.display())]
    WrongType {
        path: PathBuf,
        expected: &'static str,
    },
    #[error("could not set up {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl PathError {
    /// The path in question.
    pub fn path(&self) -> &Path {
        match self {
            PathError::ForeignOwner { path, .. }
            | PathError::Symlink { path }
            | PathError::WrongType { path, .. }
            | PathError::Io { path, .. } => path,
        }
    }

    /// Is this a path someone else could have planted (rather than a plain I/O failure)?
    pub fn is_untrusted(&self) -> bool {
        !matches!(self, PathError::Io { .. })
    }

    fn io(path: &Path) -> impl FnOnce(io::Error) -> PathError + '_ {
        move |source| PathError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Whether a symlink may stand in place of a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Links {
    Never,
    /// A link the user owns, to a directory the user owns.
    OwnedOnly,
}

fn my_uid() -> u32 {
    nix::unistd::getuid().as_raw()
}

/// Create `dir` (and parents) with mode 0700. An existing one must be a real directory (no
/// symlink) owned by the user; if it is, a wider mode is tightened to 0700.
pub fn ensure_private_dir(dir: &Path) -> Result<(), PathError> {
    ensure_private_dir_in(dir, Links::Never)
}

fn ensure_private_dir_in(dir: &Path, links: Links) -> Result<(), PathError> {
    let me = my_uid();
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(PathError::io(parent))?;
    }
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(PathError::io(dir)(e)),
    }
    let meta = fs::symlink_metadata(dir).map_err(PathError::io(dir))?;
    let meta = if meta.file_type().is_symlink() {
        if links == Links::Never || meta.uid() != me {
            return Err(PathError::Symlink {
                path: dir.to_path_buf(),
            });
        }
        fs::metadata(dir).map_err(PathError::io(dir))?
    } else {
        meta
    };
    if !meta.is_dir() {
        return Err(PathError::WrongType {
            path: dir.to_path_buf(),
            expected: "directory",
        });
    }
    if meta.uid() != me {
        return Err(PathError::ForeignOwner {
            path: dir.to_path_buf(),
            owner: meta.uid(),
            me,
        });
    }
    if meta.permissions().mode() & 0o077 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(PathError::io(dir))?;
    }
    Ok(())
}

/// Open `path` with `opts` as a 0600 file of the user's own: no symlink followed, an existing file
/// of another owner (or not a regular file) refused, a wider mode tightened (daemon.lock was 0644
/// once, and a log file may predate volee's 0600).
pub fn open_private(path: &Path, mut opts: fs::OpenOptions) -> Result<fs::File, PathError> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = opts
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                PathError::Symlink {
                    path: path.to_path_buf(),
                }
            } else {
                PathError::io(path)(e)
            }
        })?;
    let meta = file.metadata().map_err(PathError::io(path))?;
    if !meta.is_file() {
        return Err(PathError::WrongType {
            path: path.to_path_buf(),
            expected: "regular file",
        });
    }
    let me = my_uid();
    if meta.uid() != me {
        return Err(PathError::ForeignOwner {
            path: path.to_path_buf(),
            owner: meta.uid(),
            me,
        });
    }
    if meta.mode() & 0o077 != 0 {
        file.set_permissions(fs::Permissions::from_mode(0o600))
            .map_err(PathError::io(path))?;
    }
    Ok(file)
}

/// Check that `path`, if it exists, is the user's own `expected` kind of file and no symlink:
/// `Ok(false)` when it does not exist.
pub fn check_own_file(
    path: &Path,
    expected: &'static str,
    is_kind: impl Fn(&fs::FileType) -> bool,
) -> Result<bool, PathError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(PathError::io(path)(e)),
    };
    let kind = meta.file_type();
    if kind.is_symlink() {
        return Err(PathError::Symlink {
            path: path.to_path_buf(),
        });
    }
    if !is_kind(&kind) {
        return Err(PathError::WrongType {
            path: path.to_path_buf(),
            expected,
        });
    }
    let me = my_uid();
    if meta.uid() != me {
        return Err(PathError::ForeignOwner {
            path: path.to_path_buf(),
            owner: meta.uid(),
            me,
        });
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn volee_home_puts_everything_under_one_root() {
        let env: HashMap<&str, &str> = [("VOLEE_HOME", "/v"), ("XDG_STATE_HOME", "/x")].into();
        let p = Paths::from_env(|k| env.get(k).map(|v| v.to_string()), 1000);
        assert_eq!(p.registry(), PathBuf::from("/v/state/agents.json"));
        assert_eq!(p.socket(), PathBuf::from("/v/run/daemon.sock"));
    }

    #[test]
    fn xdg_directories_apply_without_volee_home() {
        let env: HashMap<&str, &str> = [
            ("HOME", "/home/u"),
            ("XDG_STATE_HOME", "/st"),
            ("XDG_RUNTIME_DIR", "/run/user/1000"),
        ]
        .into();
        let p = Paths::from_env(|k| env.get(k).map(|v| v.to_string()), 1000);
        assert_eq!(p.registry(), PathBuf::from("/st/volee/agents.json"));
        assert_eq!(
            p.config_file(),
            PathBuf::from("/home/u/.config/volee/config.toml")
        );
        assert_eq!(
            p.socket(),
            PathBuf::from("/run/user/1000/volee/daemon.sock")
        );
    }

    #[test]
    fn private_dirs_are_0700() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        fs::create_dir_all(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        ensure_private_dir(&dir).unwrap();
        assert_eq!(
            fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
    }

    #[test]
    fn a_symlink_in_place_of_the_runtime_dir_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        fs::create_dir(&real).unwrap();
        fs::set_permissions(&real, fs::Permissions::from_mode(0o755)).unwrap();
        let link = tmp.path().join("volee-0");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let err = ensure_private_dir(&link).unwrap_err();
        assert!(matches!(err, PathError::Symlink { .. }), "{err:?}");
        assert!(err.is_untrusted());
        // Refused, not touched: the target keeps its mode.
        assert_eq!(
            fs::metadata(&real).unwrap().permissions().mode() & 0o777,
            0o755
        );
    }

    #[test]
    fn a_file_in_place_of_a_dir_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("run");
        fs::write(&file, "x").unwrap();
        let err = ensure_private_dir(&file).unwrap_err();
        assert!(matches!(err, PathError::WrongType { .. }), "{err:?}");
    }

    #[test]
    fn a_home_dir_may_be_the_users_own_symlink() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("dotfiles/volee");
        fs::create_dir_all(&real).unwrap();
        let link = tmp.path().join("config-volee");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        ensure_private_dir_in(&link, Links::OwnedOnly).unwrap();
        assert_eq!(
            fs::metadata(&real).unwrap().permissions().mode() & 0o777,
            0o700
        );
    }

    #[test]
    fn a_dir_of_another_user_is_refused_not_chmoded() {
        if !volee_test_support::require_root("chown to another user") {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("volee-0");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
        let err = ensure_private_dir(&dir).unwrap_err();
        match &err {
            PathError::ForeignOwner { owner, .. } => assert_eq!(*owner, 65534),
            other => panic!("expected ForeignOwner, got {other:?}"),
        }
        let meta = fs::metadata(&dir).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o777);
        assert_eq!(meta.uid(), 65534);
        // A home dir (symlinks allowed) of another user is refused just the same.
        assert!(matches!(
            ensure_private_dir_in(&dir, Links::OwnedOnly),
            Err(PathError::ForeignOwner { .. })
        ));
    }

    #[test]
    fn a_symlink_to_a_dir_of_another_user_is_refused() {
        if !volee_test_support::require_root("chown to another user") {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let theirs = tmp.path().join("theirs");
        fs::create_dir(&theirs).unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        let link = tmp.path().join("config-volee");
        std::os::unix::fs::symlink(&theirs, &link).unwrap();
        assert!(matches!(
            ensure_private_dir_in(&link, Links::OwnedOnly),
            Err(PathError::ForeignOwner { .. })
        ));
    }

    #[test]
    fn open_private_tightens_our_file_and_refuses_links_and_foreign_files() {
        let tmp = tempfile::tempdir().unwrap();
        let lock = tmp.path().join("daemon.lock");
        fs::write(&lock, "").unwrap();
        fs::set_permissions(&lock, fs::Permissions::from_mode(0o644)).unwrap();
        let mut opts = fs::OpenOptions::new();
        opts.create(true).write(true).truncate(false);
        open_private(&lock, opts.clone()).unwrap();
        assert_eq!(
            fs::metadata(&lock).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let fresh = tmp.path().join("new.lock");
        open_private(&fresh, opts.clone()).unwrap();
        assert_eq!(
            fs::metadata(&fresh).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let target = tmp.path().join("elsewhere");
        fs::write(&target, "keep").unwrap();
        let link = tmp.path().join("volee.log");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(matches!(
            open_private(&link, opts.clone()),
            Err(PathError::Symlink { .. })
        ));
        assert_eq!(fs::read_to_string(&target).unwrap(), "keep");
        if volee_test_support::require_root("chown to another user") {
            let theirs = tmp.path().join("theirs.lock");
            fs::write(&theirs, "").unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            assert!(matches!(
                open_private(&theirs, opts),
                Err(PathError::ForeignOwner { owner: 65534, .. })
            ));
        }
    }
}
