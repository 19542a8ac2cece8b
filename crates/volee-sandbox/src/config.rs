//! What a sandbox is made of: image, project directory and where it is mounted, user, limits.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::SandboxError;
use crate::image::BUSYBOX_IMAGE;

/// Label on every sandbox container (value `1`).
pub const LABEL_SANDBOX: &str = "dev.volee.sandbox";
/// Label naming the session the container belongs to.
pub const LABEL_SESSION: &str = "dev.volee.session";
/// Label with the pid of the process that made the container (to find crashed sessions' ones).
pub const LABEL_OWNER_PID: &str = "dev.volee.owner-pid";

/// The uid:gid used when the project directory belongs to root (the sandbox never runs as root).
pub const NOBODY: &str = "65534:65534";

/// Where the project directory appears inside the container.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum MountTarget {
    /// At its own (canonical) path, so paths in commands, output and compiler messages mean the
    /// same inside and outside.
    #[default]
    SamePath,
    /// At a fixed path, e.g. `/work`.
    At(PathBuf),
}

/// A sandbox to start.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxConfig {
    /// Default [`BUSYBOX_IMAGE`], built on first use.
    pub image: String,
    /// The only host directory the container sees (read-write).
    pub project_dir: PathBuf,
    pub mount: MountTarget,
    /// Labels the container (`dev.volee.session`).
    pub session_id: String,
    /// `uid:gid` to run as; None: the project directory's owner, or [`NOBODY`] when that is root.
    pub user: Option<String>,
    /// Memory limit (no swap beyond it).
    pub memory_bytes: i64,
    /// CPU limit in CPUs.
    pub cpus: f64,
    pub pids_limit: i64,
    /// Size of the writable `/tmp` (a tmpfs; counts against memory).
    pub tmp_bytes: u64,
    /// Extra environment of every command (no credentials unless the user granted them).
    pub env: Vec<(String, String)>,
}

impl SandboxConfig {
    /// The defaults: 1 GiB memory, 2 CPUs, 256 processes, 256 MiB `/tmp`, same-path mount.
    pub fn new(project_dir: impl Into<PathBuf>, session_id: &str) -> SandboxConfig {
        SandboxConfig {
            image: BUSYBOX_IMAGE.into(),
            project_dir: project_dir.into(),
            mount: MountTarget::SamePath,
            session_id: session_id.into(),
            user: None,
            memory_bytes: 1 << 30,
            cpus: 2.0,
            pids_limit: 256,
            tmp_bytes: 256 << 20,
            env: Vec::new(),
        }
    }
}

/// Kernel file systems the container needs: nothing may be mounted inside them.
const KERNEL_DIRS: &[&str] = &["/proc", "/sys", "/dev"];
/// Directories of the image the container needs: the mount must not hide them (be one of them
/// or an ancestor); below them is fine (`/usr/src/x`, `/tmp/x`).
const SYSTEM_DIRS: &[&str] = &[
    "/bin",
    "/sbin",
    "/usr/bin",
    "/usr/sbin",
    "/usr/lib",
    "/lib",
    "/lib64",
    "/etc",
    "/tmp",
];

/// The canonical project directory and its path inside the container.
pub fn resolve_mount(
    project_dir: &Path,
    mount: &MountTarget,
) -> Result<(PathBuf, PathBuf), SandboxError> {
    let err = |why: &str| SandboxError::ProjectDir {
        path: project_dir.to_path_buf(),
        why: why.into(),
    };
    let canonical = project_dir
        .canonicalize()
        .map_err(|e| err(&format!("it cannot be resolved ({e})")))?;
    if !canonical.is_dir() {
        return Err(err("it is not a directory"));
    }
    let target = match mount {
        MountTarget::SamePath => canonical.clone(),
        MountTarget::At(p) => p.clone(),
    };
    if !target.is_absolute() {
        return Err(err("the mount target must be an absolute path"));
    }
    if target == Path::new("/") {
        return Err(err("it would be mounted over the container's root"));
    }
    for k in KERNEL_DIRS {
        if target.starts_with(k) {
            return Err(err(&format!(
                "it would be mounted inside the container's {k}"
            )));
        }
    }
    for d in SYSTEM_DIRS {
        if Path::new(d).starts_with(&target) {
            return Err(err(&format!(
                "it would be mounted at {}, hiding the container's {d}",
                target.display()
            )));
        }
    }
    Ok((canonical, target))
}

/// `uid:gid` of `dir`'s owner, [`NOBODY`] when that is root.
pub fn default_user(dir: &Path) -> Result<String, SandboxError> {
    let meta = std::fs::metadata(dir).map_err(|source| SandboxError::Io {
        what: format!("read the owner of {}", dir.display()),
        source,
    })?;
    if meta.uid() == 0 {
        return Ok(NOBODY.into());
    }
    Ok(format!("{}:{}", meta.uid(), meta.gid()))
}

/// The user to run as: explicit (never root) or [`default_user`].
pub fn effective_user(config: &SandboxConfig, dir: &Path) -> Result<String, SandboxError> {
    match &config.user {
        Some(u) => {
            let uid = u.split(':').next().unwrap_or("");
            if uid == "0" || uid == "root" {
                return Err(SandboxError::ProjectDir {
                    path: dir.to_path_buf(),
                    why: "the sandbox never runs as root (user 0 asked)".into(),
                });
            }
            Ok(u.clone())
        }
        None => default_user(dir),
    }
}

/// A container name from the session id: `volee-sbx-<session>-<pid>-<n>`, Docker's alphabet only.
pub fn container_name(session_id: &str, n: u64) -> String {
    let clean: String = session_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    format!("volee-sbx-{clean}-{}-{n}", std::process::id())
}

/// Busybox and coreutils `timeout` take whole seconds: round up, at least 1.
pub fn whole_seconds(d: Duration) -> u64 {
    let s = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    s.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_targets_are_checked() {
        let dir = std::env::temp_dir();
        let (canon, target) = resolve_mount(&dir, &MountTarget::At("/work".into())).unwrap();
        assert_eq!(target, PathBuf::from("/work"));
        assert!(canon.is_absolute());
        assert!(resolve_mount(&dir, &MountTarget::At("/".into())).is_err());
        assert!(resolve_mount(&dir, &MountTarget::At("/usr/src/x".into())).is_ok());
        assert!(resolve_mount(&dir, &MountTarget::At("/usr".into())).is_err());
        assert!(resolve_mount(&dir, &MountTarget::At("/proc/x".into())).is_err());
        assert!(resolve_mount(&dir, &MountTarget::At("/tmp".into())).is_err());
        assert!(resolve_mount(&dir, &MountTarget::At("/tmp/project".into())).is_ok());
        assert!(resolve_mount(&dir, &MountTarget::At("relative".into())).is_err());
        assert!(resolve_mount(Path::new("/nonexistent/volee"), &MountTarget::SamePath).is_err());
    }

    #[test]
    fn never_root() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = SandboxConfig::new(dir.path(), "s");
        c.user = Some("0:0".into());
        assert!(effective_user(&c, dir.path()).is_err());
        c.user = Some("1000:1000".into());
        assert_eq!(effective_user(&c, dir.path()).unwrap(), "1000:1000");
        c.user = None;
        let u = effective_user(&c, dir.path()).unwrap();
        assert!(!u.starts_with("0:"), "{u}");
    }

    #[test]
    fn names_and_seconds() {
        assert!(container_name("a b/c", 3).starts_with("volee-sbx-a_b_c-"));
        assert_eq!(whole_seconds(Duration::from_millis(1)), 1);
        assert_eq!(whole_seconds(Duration::from_millis(2500)), 3);
        assert_eq!(whole_seconds(Duration::from_secs(2)), 2);
        assert_eq!(whole_seconds(Duration::ZERO), 1);
    }
}
