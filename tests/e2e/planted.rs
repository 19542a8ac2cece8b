//! Files of another user in volee's place: a runtime dir and a socket planted by another Unix user
//! in a shared TMPDIR are refused (exit 3, a hint), and the fake daemon listening there hears
//! nothing — not a Hello, not a launch's environment.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use volee_test_support::TempUser;

use crate::{output_within, setup};

/// A child process killed (by its pid) on drop.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A python3 another user can run (root's PATH may hold a per-user shim).
fn system_python() -> Option<PathBuf> {
    ["/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

/// As `user`: make `dir` (mode 0755) and listen on `dir/daemon.sock`, appending whatever any
/// client sends to `record`. Returns once it listens.
fn plant_fake_daemon(user: &TempUser, python: &Path, dir: &Path, record: &Path) -> Killed {
    let script = r#"
import os, socket, sys
d, record = sys.argv[1], sys.argv[2]
os.mkdir(d, 0o755)
open(record, "wb").close()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(os.path.join(d, "daemon.sock"))
os.chmod(os.path.join(d, "daemon.sock"), 0o777)
s.listen(8)
open(os.path.join(d, "listening"), "w").close()
while True:
    c, _ = s.accept()
    while True:
        b = c.recv(65536)
        if not b:
            break
        with open(record, "ab") as f:
            f.write(b)
"#;
    let child = user
        .command(&python.display().to_string())
        .args(["-c", script])
        .arg(dir)
        .arg(record)
        .env_clear()
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let fake = Killed(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !dir.join("listening").exists() {
        assert!(
            Instant::now() < deadline,
            "the other user's fake daemon did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    fake
}

#[test]
fn a_runtime_dir_planted_by_another_user_is_refused() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    if !volee_test_support::require_root("planting files as another Unix user") {
        return;
    }
    let Some(python) = system_python() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "a system python3 is required for the fake daemon (CI is set, so this fails)"
        );
        eprintln!("SKIPPED: no system python3 for the fake daemon");
        return;
    };
    let user = TempUser::create();
    // A shared TMPDIR like /tmp (sticky, world-writable), inside a dir the other user can enter.
    std::fs::set_permissions(env.root(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let tmpdir = env.root().join("shared-tmp");
    std::fs::create_dir(&tmpdir).unwrap();
    std::fs::set_permissions(&tmpdir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let me = nix::unistd::getuid().as_raw();
    let planted = tmpdir.join(format!("volee-{me}"));
    let record = tmpdir.join("received");
    let _fake = plant_fake_daemon(&user, &python, &planted, &record);
    // Without VOLEE_HOME and XDG_RUNTIME_DIR the runtime dir is $TMPDIR/volee-UID: the planted one.
    let xdg = env.root().join("xdg");
    let run = |args: &[&str]| {
        let mut cmd = env.volee(args);
        cmd.env_remove("VOLEE_HOME")
            .env_remove("XDG_RUNTIME_DIR")
            .env("TMPDIR", &tmpdir)
            .env("XDG_CONFIG_HOME", xdg.join("config"))
            .env("XDG_DATA_HOME", xdg.join("data"))
            .env("XDG_STATE_HOME", xdg.join("state"))
            .env("SECRET_TOKEN", "must-not-leak");
        output_within(cmd, Duration::from_secs(20))
    };
    for args in [
        &["ls"][..],
        &["launch", "--host", "tmux:main", "--", "sh", "-c", "true"][..],
    ] {
        let out = run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "volee {args:?}: {stderr}");
        assert!(
            stderr.contains(&format!("owned by uid {}", user.uid))
                && stderr.contains(&planted.display().to_string()),
            "volee {args:?} names the planted dir and its owner: {stderr}"
        );
        assert!(
            stderr.contains("hint: set XDG_RUNTIME_DIR"),
            "volee {args:?} says what to do: {stderr}"
        );
        let received = std::fs::read(&record).unwrap();
        assert!(
            received.is_empty(),
            "the fake daemon received {:?}",
            String::from_utf8_lossy(&received)
        );
    }
    // Refused, not taken over: the planted dir is as the other user left it.
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(&planted).unwrap();
    assert_eq!(meta.uid(), user.uid);
    assert_eq!(meta.mode() & 0o777, 0o755);
}
