//! A second Unix user for tests about other users' processes: created by the test, removed (with
//! every process it still runs) when dropped, also on panic.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// A command run as root: as is when the tests run as root, else through `sudo -n`.
pub fn root_command(program: &str) -> Command {
    if nix::unistd::geteuid().is_root() {
        Command::new(program)
    } else {
        let mut c = Command::new("sudo");
        c.args(["-n", "--", program]);
        c
    }
}

/// Can this test act as root (it is root, or `sudo -n` works)?
pub fn root_available() -> bool {
    nix::unistd::geteuid().is_root()
        || Command::new("sudo")
            .args(["-n", "true"])
            .output()
            .is_ok_and(|o| o.status.success())
}

/// True when the test can act as root. Otherwise: panics under `CI`, else prints why the test is
/// skipped and returns false (the caller returns).
pub fn require_root(why: &str) -> bool {
    if root_available() {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("root (or sudo -n) is required for {why} (CI is set, so this fails)");
    }
    eprintln!("SKIPPED: neither root nor sudo -n; needed for {why}");
    false
}

/// A Unix user that exists while this value lives.
pub struct TempUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

static NEXT: AtomicU32 = AtomicU32::new(0);

impl TempUser {
    /// A new user without a home directory or a login shell. Needs [`require_root`] first.
    pub fn create() -> TempUser {
        let name = format!(
            "vtu{}x{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let out = root_command("useradd")
            .args([
                "--no-create-home",
                "--no-user-group",
                "--gid",
                "nogroup",
                "--shell",
                "/usr/sbin/nologin",
                &name,
            ])
            .output()
            .unwrap();
        // Some systems have no `nogroup`: a group of the user's own then.
        let out = if out.status.success() {
            out
        } else {
            root_command("useradd")
                .args([
                    "--no-create-home",
                    "--user-group",
                    "--shell",
                    "/usr/sbin/nologin",
                    &name,
                ])
                .output()
                .unwrap()
        };
        assert!(
            out.status.success(),
            "useradd {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let id = |flag: &str| -> u32 {
            let out = Command::new("id").args([flag, &name]).output().unwrap();
            String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
        };
        let (uid, gid) = (id("-u"), id("-g"));
        TempUser { name, uid, gid }
    }

    /// A new user who can log in (over the tests' own sshd): `home` as its HOME (the caller makes
    /// it and gives it to the user), `/bin/sh` as its shell, a password field of `*` (no password
    /// works, and the account is not locked, which sshd without PAM refuses for keys too). Needs
    /// [`require_root`] first.
    pub fn create_login(home: &std::path::Path) -> TempUser {
        let name = format!(
            "vtu{}x{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let home = home.to_string_lossy().into_owned();
        let out = root_command("useradd")
            .args([
                "--no-create-home",
                "--user-group",
                "--home-dir",
                &home,
                "--shell",
                "/bin/sh",
                "--password",
                "*",
                &name,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "useradd {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let id = |flag: &str| -> u32 {
            let out = Command::new("id").args([flag, &name]).output().unwrap();
            String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
        };
        let (uid, gid) = (id("-u"), id("-g"));
        TempUser { name, uid, gid }
    }

    /// `program args…` as this user (real and effective uid and gid, no supplementary groups).
    pub fn command(&self, program: &str) -> Command {
        let mut c = root_command("setpriv");
        c.args([
            &format!("--reuid={}", self.uid),
            &format!("--regid={}", self.gid),
            "--clear-groups",
            "--",
            program,
        ]);
        c
    }

    /// Pids of the processes this user runs (real uid).
    pub fn pids(&self) -> Vec<i32> {
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                let status =
                    std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
                status
                    .lines()
                    .find_map(|l| l.strip_prefix("Uid:"))
                    .and_then(|ids| ids.split_whitespace().next()?.parse::<u32>().ok())
                    == Some(self.uid)
            })
            .collect()
    }
}

impl Drop for TempUser {
    fn drop(&mut self) {
        // The user's processes are the test's: end each by its pid, then remove the user.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let pids = self.pids();
            if pids.is_empty() || std::time::Instant::now() > deadline {
                break;
            }
            for pid in pids {
                let _ = root_command("kill")
                    .args(["-KILL", &pid.to_string()])
                    .output();
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let removed = root_command("userdel")
            .arg(&self.name)
            .output()
            .is_ok_and(|o| o.status.success());
        if !removed {
            // A process not yet reaped makes userdel refuse; the user must not outlive the test.
            let _ = root_command("userdel").args(["-f", &self.name]).output();
        }
    }
}
