//! Where volee keeps its files (ARCHITECTURE.md section 9).
//!
//! `VOLEE_HOME=DIR` puts every directory under one root (every test uses it); otherwise the XDG
//! base directories apply. Directories are created 0700, files 0600.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
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

    /// Create every directory volee writes to, private to the user.
    pub fn ensure(&self) -> io::Result<()> {
        for dir in [
            &self.config_dir,
            &self.data_dir,
            &self.state_dir,
            &self.runtime_dir,
            &self.launch_dir(),
            &self.state_dir.join("spool"),
        ] {
            ensure_private_dir(dir)?;
        }
        Ok(())
    }
}

/// Create `dir` (and parents) with mode 0700, and tighten it if it already exists with a wider mode.
pub fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let meta = fs::metadata(dir)?;
    if meta.permissions().mode() & 0o077 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
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
}
