//! Docker or a loud skip; a per-test session whose containers are removed on drop.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use volee_sandbox::{
    connect, remove_leftovers, Docker, ExecOutput, ExecRequest, Leftovers, Sandbox, SandboxConfig,
};

/// A connected daemon, or None after printing SKIPPED (panics instead when `CI` is set).
pub async fn docker(test: &str) -> Option<Docker> {
    match connect().await {
        Ok(d) => Some(d),
        Err(e) => {
            let hint = e.hint().unwrap_or_default();
            if std::env::var_os("CI").is_some() {
                panic!("{test}: Docker is required and is not available (CI is set, so this fails): {e}; hint: {hint}");
            }
            eprintln!("SKIPPED: {test}: Docker is not available: {e}; hint: {hint}");
            None
        }
    }
}

/// One test's session: a unique id, a project directory owned by uid 1000 (when we are root),
/// and on drop every container labelled with the id removed — from a thread with its own
/// runtime, since the test's runtime may be gone or panicking.
pub struct TestSession {
    pub id: String,
    pub project: tempfile::TempDir,
}

impl TestSession {
    pub fn new(test: &str) -> TestSession {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let id = format!("test-{test}-{}-{nanos:x}", std::process::id());
        let project = tempfile::Builder::new()
            .prefix("volee-sandbox-test-")
            .tempdir()
            .unwrap();
        if nix_is_root() {
            std::os::unix::fs::chown(project.path(), Some(1000), Some(1000)).unwrap();
        }
        TestSession { id, project }
    }

    pub fn dir(&self) -> PathBuf {
        self.project.path().canonicalize().unwrap()
    }

    pub fn config(&self) -> SandboxConfig {
        let mut c = SandboxConfig::new(self.project.path(), &self.id);
        c.memory_bytes = 256 << 20;
        c.cpus = 1.0;
        c.pids_limit = 64;
        c.tmp_bytes = 32 << 20;
        c
    }
}

impl Drop for TestSession {
    fn drop(&mut self) {
        let id = self.id.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                if let Ok(d) = connect().await {
                    let _ = remove_leftovers(&d, &Leftovers::Session(id)).await;
                }
            });
        })
        .join();
    }
}

pub fn nix_is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    // Our own /proc entry is owned by our uid.
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

/// Run `command` and return its output, panicking on a Docker error.
pub async fn run(sb: &Sandbox, command: &str) -> ExecOutput {
    sb.exec(&ExecRequest::new(command).timeout(std::time::Duration::from_secs(20)))
        .await
        .unwrap_or_else(|e| panic!("exec {command:?}: {e:?}"))
}

/// Run `command`, assert exit 0, return trimmed stdout.
pub async fn ok(sb: &Sandbox, command: &str) -> String {
    let out = run(sb, command).await;
    assert_eq!(
        out.exit_code,
        Some(0),
        "{command:?} failed: stdout {:?} stderr {:?}",
        out.stdout,
        out.stderr
    );
    out.stdout.trim().to_string()
}

pub fn owner_uid(path: &Path) -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().uid()
}
