//! A real OpenSSH server for the remote-machine tests (issue 20): Debian's `sshd`, started by the
//! test on a free loopback port with its own host key and its own `sshd_config` (never the
//! system's), a second Unix user created by the test as the remote account (its own HOME, removed
//! at drop), and for the local side a client key pair, a private `known_hosts` (empty: the test
//! decides when the host key becomes known) and an ssh config naming them, so nothing reads or
//! writes the real `~/.ssh`. volee is pointed at that config through `VOLEE_SSH_CONFIG`.
//!
//! It needs root (to create the user and run sshd): [`require_sshd`] says so, skipping by hand and
//! failing under `CI`.

use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::users::TempUser;

/// Where Debian puts sshd (not on an ordinary user's PATH).
const SSHD_PATHS: &[&str] = &["/usr/sbin/sshd", "/usr/local/sbin/sshd", "/sbin/sshd"];

fn sshd_path() -> Option<PathBuf> {
    SSHD_PATHS
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .or_else(|| volee_os::program::find("sshd"))
}

/// True when this test can run a real sshd with a user of its own: root (checked with
/// `geteuid`), `sshd` (Debian's `openssh-server`), `ssh`, `ssh-keygen`, `ssh-keyscan`. Otherwise
/// panics under `CI`, else prints why the test is skipped and returns false (the caller returns).
pub fn require_sshd(why: &str) -> bool {
    let missing = if !nix::unistd::geteuid().is_root() {
        Some("root (to create the remote user and run sshd)".to_string())
    } else if sshd_path().is_none() {
        Some("sshd (apt-get install openssh-server)".to_string())
    } else {
        ["ssh", "ssh-keygen", "ssh-keyscan", "useradd", "userdel"]
            .into_iter()
            .find(|p| !crate::on_path(p))
            .map(|p| format!("{p} (openssh-client, passwd)"))
    };
    let Some(missing) = missing else {
        return true;
    };
    if std::env::var_os("CI").is_some() {
        panic!("{missing} is required for {why} (CI is set, so this fails)");
    }
    eprintln!("SKIPPED: {missing} is missing; needed for {why}");
    false
}

/// A running sshd, its remote user and the local side's private ssh files.
pub struct SshServer {
    /// Everything of this server: config, keys, logs, the remote user's HOME, volee's copy.
    pub dir: tempfile::TempDir,
    pub port: u16,
    /// The remote account.
    pub user: TempUser,
    /// The local side's ssh config (`ssh -F`, `VOLEE_SSH_CONFIG`).
    pub ssh_config: PathBuf,
    /// The local side's known_hosts: empty until [`SshServer::trust_host_key`].
    pub known_hosts: PathBuf,
    /// The local side's private key (named by `ssh_config`).
    pub client_key: PathBuf,
    child: Child,
}

/// What the remote account finds on its PATH.
pub enum RemotePath<'a> {
    /// A copy of this `volee` binary (the test's `CARGO_BIN_EXE_volee` lives where the remote user
    /// may not read) in a directory on the remote's PATH.
    WithVolee(&'a Path),
    /// Only `/usr/bin:/bin`: no volee there.
    WithoutVolee,
    /// `~/.local/bin` first, then `/usr/bin:/bin`, with no volee yet (`machine install` puts
    /// one there).
    LocalBinFirst,
}

fn run(cmd: &mut Command) {
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl SshServer {
    /// Start sshd on a free loopback port. Needs [`require_sshd`] first.
    pub fn start(remote_path: RemotePath<'_>) -> SshServer {
        let dir = tempfile::Builder::new()
            .prefix("volee-sshd-")
            .tempdir()
            .unwrap();
        let root = dir.path().to_path_buf();
        // The remote user walks into its HOME and to volee's copy through this directory; the
        // keys in it are 0600 files of root's.
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();

        let home = root.join("remote-home");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        let user = TempUser::create_login(&home);
        let chown = |p: &Path| {
            nix::unistd::chown(
                p,
                Some(nix::unistd::Uid::from_raw(user.uid)),
                Some(nix::unistd::Gid::from_raw(user.gid)),
            )
            .unwrap()
        };

        let host_key = root.join("host_ed25519");
        let client_key = root.join("client_ed25519");
        for (key, comment) in [
            (&host_key, "volee-test-host"),
            (&client_key, "volee-test-client"),
        ] {
            run(Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f"])
                .arg(key));
        }
        let authorized = home.join(".ssh/authorized_keys");
        std::fs::copy(client_key.with_extension("pub"), &authorized).unwrap();
        for p in [&home, &home.join(".ssh"), &authorized] {
            chown(p);
        }
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();

        let path = match remote_path {
            RemotePath::WithVolee(volee) => {
                let bin = root.join("bin");
                std::fs::create_dir_all(&bin).unwrap();
                std::fs::copy(volee, bin.join("volee")).unwrap();
                std::fs::set_permissions(bin.join("volee"), std::fs::Permissions::from_mode(0o755))
                    .unwrap();
                format!("{}:/usr/bin:/bin", bin.display())
            }
            RemotePath::WithoutVolee => "/usr/bin:/bin".to_string(),
            RemotePath::LocalBinFirst => format!("{}/.local/bin:/usr/bin:/bin", home.display()),
        };

        let port = free_port();
        let config = root.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "# The tests' own sshd (volee-test-support::sshd), never the system's config.
ListenAddress 127.0.0.1:{port}
HostKey {host_key}
PidFile {pid}
AuthorizedKeysFile {home}/.ssh/authorized_keys
AllowUsers {user}
UsePAM no
StrictModes no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
PermitUserEnvironment no
AllowTcpForwarding no
AllowAgentForwarding no
X11Forwarding no
PrintMotd no
UseDNS no
LogLevel VERBOSE
SetEnv PATH={path}
",
                host_key = host_key.display(),
                pid = root.join("sshd.pid").display(),
                home = home.display(),
                user = user.name,
            ),
        )
        .unwrap();
        // Debian's sshd wants its privilege separation directory.
        std::fs::create_dir_all("/run/sshd").unwrap();
        let sshd = sshd_path().unwrap();
        run(Command::new(&sshd).arg("-t").arg("-f").arg(&config));
        let child = Command::new(&sshd)
            .args(["-D", "-f"])
            .arg(&config)
            .arg("-E")
            .arg(root.join("sshd.log"))
            .stdin(Stdio::null())
            .spawn()
            .unwrap();

        let known_hosts = root.join("known_hosts");
        std::fs::write(&known_hosts, "").unwrap();
        let ssh_config = root.join("ssh_config");
        std::fs::write(
            &ssh_config,
            format!(
                "# The local side's ssh config for volee's tests (VOLEE_SSH_CONFIG): nothing of ~/.ssh.
Host *
  UserKnownHostsFile {known}
  GlobalKnownHostsFile /dev/null
  IdentityFile {key}
  IdentitiesOnly yes
  IdentityAgent none
  UpdateHostKeys no
",
                known = known_hosts.display(),
                key = client_key.display(),
            ),
        )
        .unwrap();
        std::fs::set_permissions(&ssh_config, std::fs::Permissions::from_mode(0o600)).unwrap();

        let server = SshServer {
            dir,
            port,
            user,
            ssh_config,
            known_hosts,
            client_key,
            child,
        };
        crate::wait_until(
            "the test sshd listens",
            Duration::from_secs(10),
            || TcpStream::connect(("127.0.0.1", port)).ok(),
            || server.log(),
        );
        server
    }

    /// `USER@127.0.0.1`, the destination `volee machine add` is given (with `--port`).
    pub fn dest(&self) -> String {
        format!("{}@127.0.0.1", self.user.name)
    }

    /// The remote user's HOME.
    pub fn remote_home(&self) -> PathBuf {
        self.dir.path().join("remote-home")
    }

    /// sshd's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
    }

    /// Accept the host key the way a user would after checking it: `ssh-keyscan -p PORT
    /// 127.0.0.1` into the private known_hosts.
    pub fn trust_host_key(&self) {
        let out = Command::new("ssh-keyscan")
            .args(["-p", &self.port.to_string(), "-t", "ed25519", "127.0.0.1"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success() && !out.stdout.is_empty(),
            "ssh-keyscan: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::write(&self.known_hosts, &out.stdout).unwrap();
    }

    /// Cut every connection as a network failure would: SIGKILL the listener and every sshd
    /// process serving a connection (its descendants named `sshd…`), not only the listener.
    pub fn cut(&mut self) {
        let listener = self.child.id();
        let mut doomed = vec![listener];
        // Descendants: walk /proc until no new child of a doomed process turns up.
        loop {
            let before = doomed.len();
            for (pid, ppid, comm) in processes() {
                if doomed.contains(&ppid) && !doomed.contains(&pid) && comm.starts_with("sshd") {
                    doomed.push(pid);
                }
            }
            if doomed.len() == before {
                break;
            }
        }
        for pid in &doomed {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(*pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = self.child.wait();
    }

    /// Start sshd again after [`SshServer::cut`], on the same port with the same keys.
    pub fn restart(&mut self) {
        let root = self.dir.path();
        self.child = Command::new(sshd_path().unwrap())
            .args(["-D", "-f"])
            .arg(root.join("sshd_config"))
            .arg("-E")
            .arg(root.join("sshd.log"))
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let port = self.port;
        crate::wait_until(
            "the test sshd listens again",
            Duration::from_secs(10),
            || TcpStream::connect(("127.0.0.1", port)).ok(),
            || self.log(),
        );
    }

    /// `ssh -F CONFIG -p PORT DEST ARGS…` as the local side, for checks of the server itself.
    pub fn ssh(&self) -> Command {
        let mut c = Command::new("ssh");
        c.arg("-F")
            .arg(&self.ssh_config)
            .args(["-p", &self.port.to_string(), "-o", "BatchMode=yes"])
            .arg(self.dest())
            .stdin(Stdio::null());
        c
    }
}

impl Drop for SshServer {
    fn drop(&mut self) {
        // sshd first (its session processes are the user's, ended when the user is removed).
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.child.wait();
        if std::env::var_os("VOLEE_TEST_KEEP").is_some() {
            self.dir.disable_cleanup(true);
            eprintln!("kept {}", self.dir.path().display());
        }
    }
}

/// Every process: pid, parent pid, command name.
fn processes() -> Vec<(u32, u32, String)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // `pid (comm) state ppid …`: comm may hold spaces and parentheses.
            let open = stat.find('(')?;
            let close = stat.rfind(')')?;
            let comm = stat[open + 1..close].to_string();
            let ppid = stat[close + 2..].split(' ').nth(1)?.parse().ok()?;
            Some((pid, ppid, comm))
        })
        .collect()
}
