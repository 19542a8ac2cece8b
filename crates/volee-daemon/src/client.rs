//! The daemon's client side: connect, ask, and start the daemon on demand.

use std::io::{self, BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use volee_protocol::{Request, Response, PROTOCOL_VERSION};

use crate::paths::{check_own_file, PathError, Paths};

/// How long a connect may take (a full listen backlog: the daemon accepts nothing).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the daemon may stay silent: on a request it owes an answer, on a `Watch` stream a
/// keep-alive every `volee_protocol::KEEPALIVE_SECS` (so this is more than two missed ones).
pub const SILENCE_LIMIT: Duration = Duration::from_secs(5);

/// Talking to the daemon failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("could not reach the volee daemon at {path}")]
    Connect {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("the volee daemon did not start within {secs} s (see {log})")]
    StartTimeout { secs: u64, log: String },
    #[error("could not start the volee daemon")]
    Spawn(#[source] io::Error),
    #[error("lost the connection to the volee daemon")]
    Io(#[source] io::Error),
    #[error("the volee daemon sent something unreadable: {0}")]
    Protocol(String),
    #[error("volee's directories are not safe to use")]
    Dirs(#[source] PathError),
    /// The socket path is not the user's own socket (planted, or a leftover of another user).
    #[error("refusing the daemon socket")]
    Untrusted(#[source] PathError),
    /// What listens on the socket runs as another user.
    #[error("the process listening on {path} runs as uid {uid}, not as you (uid {me})")]
    ForeignDaemon { path: String, uid: u32, me: u32 },
    /// The daemon accepted nothing, or said nothing, for too long (stopped, or hung).
    #[error("the volee daemon{} stopped answering (nothing for {secs} s)", pid.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    NotAnswering { pid: Option<u32>, secs: u64 },
}

/// One connection to the daemon.
pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    /// Bytes of a line not complete yet (a read timed out in its middle).
    pending: Vec<u8>,
    /// The daemon's pid, when known (for messages).
    pid: Option<u32>,
    /// The daemon's pid by the socket's credentials (Linux).
    peer_pid: Option<u32>,
    /// When the daemon last sent a line (or we last asked it something).
    last_heard: Instant,
}

/// What one read gave.
enum Line {
    Response(Box<Response>),
    KeepAlive,
    /// Nothing yet, but the daemon has not been silent for `SILENCE_LIMIT`.
    Timeout,
}

impl Client {
    /// Connect without starting anything: the socket must be the user's own, and so must the
    /// process on the other end.
    pub fn connect(paths: &Paths) -> Result<Client, ClientError> {
        let path = paths.socket();
        let connect_err = |source| ClientError::Connect {
            path: path.display().to_string(),
            source,
        };
        match check_own_file(&paths.runtime_dir, "directory", |t| t.is_dir()) {
            Ok(true) => {}
            Ok(false) => {
                return Err(connect_err(io::Error::from(io::ErrorKind::NotFound)));
            }
            Err(e) => return Err(ClientError::Untrusted(e)),
        }
        match check_own_file(&path, "socket", |t| t.is_socket()) {
            Ok(true) => {}
            Ok(false) => {
                return Err(connect_err(io::Error::from(io::ErrorKind::NotFound)));
            }
            Err(e) => return Err(ClientError::Untrusted(e)),
        }
        let stream = connect_within(&path, CONNECT_TIMEOUT).map_err(|e| {
            if e.kind() == io::ErrorKind::TimedOut {
                ClientError::NotAnswering {
                    pid: read_pid(paths),
                    secs: CONNECT_TIMEOUT.as_secs(),
                }
            } else {
                connect_err(e)
            }
        })?;
        let me = nix::unistd::getuid().as_raw();
        let (uid, peer_pid) = peer_cred(&stream).map_err(connect_err)?;
        if uid != me {
            return Err(ClientError::ForeignDaemon {
                path: path.display().to_string(),
                uid,
                me,
            });
        }
        stream
            .set_write_timeout(Some(SILENCE_LIMIT))
            .map_err(ClientError::Io)?;
        let writer = stream.try_clone().map_err(ClientError::Io)?;
        Ok(Client {
            reader: BufReader::new(stream),
            writer,
            pending: Vec::new(),
            pid: read_pid(paths).or(peer_pid),
            peer_pid,
            last_heard: Instant::now(),
        })
    }

    /// Send one request and read one response; the daemon must answer (or keep the connection
    /// alive) within `SILENCE_LIMIT`.
    pub fn request(&mut self, req: &Request) -> Result<Response, ClientError> {
        self.send(req)?;
        self.next_response()
    }

    /// Send a request without reading (for `Watch`).
    pub fn send(&mut self, req: &Request) -> Result<(), ClientError> {
        let mut line = serde_json::to_vec(req).map_err(|e| ClientError::Protocol(e.to_string()))?;
        line.push(b'\n');
        self.writer.write_all(&line).map_err(|e| self.io_error(e))?;
        // The daemon owes an answer (or keep-alives) from now on.
        self.last_heard = Instant::now();
        Ok(())
    }

    /// Read the next response (keep-alives skipped); an error when the daemon says nothing,
    /// not even a keep-alive, for `SILENCE_LIMIT`.
    pub fn next_response(&mut self) -> Result<Response, ClientError> {
        loop {
            if let Line::Response(resp) = self.next_line_within(SILENCE_LIMIT)? {
                return Ok(*resp);
            }
        }
    }

    /// Wait at most `timeout` for the next response (keep-alives skipped); `Ok(None)` on timeout.
    /// Silence (no keep-alive either) for `SILENCE_LIMIT` is an error, not a timeout.
    pub fn next_response_within(
        &mut self,
        timeout: Duration,
    ) -> Result<Option<Response>, ClientError> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            if let Line::Response(resp) = self.next_line_within(left)? {
                return Ok(Some(*resp));
            }
        }
    }

    /// One line, waiting at most `within`; `NotAnswering` once nothing at all has come for
    /// `SILENCE_LIMIT` (counted across calls, from the last line or request).
    fn next_line_within(&mut self, within: Duration) -> Result<Line, ClientError> {
        let silence_left = SILENCE_LIMIT.saturating_sub(self.last_heard.elapsed());
        let wait = within.min(silence_left).max(Duration::from_millis(1));
        self.reader
            .get_ref()
            .set_read_timeout(Some(wait))
            .map_err(ClientError::Io)?;
        let n = match self.reader.read_until(b'\n', &mut self.pending) {
            Ok(n) => n,
            Err(e) if is_timeout(&e) => {
                if self.last_heard.elapsed() >= SILENCE_LIMIT {
                    return Err(self.not_answering());
                }
                return Ok(Line::Timeout);
            }
            Err(e) => return Err(ClientError::Io(e)),
        };
        if n == 0 || self.pending.last() != Some(&b'\n') {
            return Err(ClientError::Io(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the daemon closed the connection",
            )));
        }
        self.last_heard = Instant::now();
        let line = std::mem::take(&mut self.pending);
        match serde_json::from_slice(&line) {
            Ok(Response::KeepAlive) => Ok(Line::KeepAlive),
            Ok(resp) => Ok(Line::Response(Box::new(resp))),
            Err(e) => Err(ClientError::Protocol(e.to_string())),
        }
    }

    fn not_answering(&self) -> ClientError {
        ClientError::NotAnswering {
            pid: self.pid,
            secs: SILENCE_LIMIT.as_secs(),
        }
    }

    fn io_error(&self, e: io::Error) -> ClientError {
        if is_timeout(&e) {
            self.not_answering()
        } else {
            ClientError::Io(e)
        }
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Connect to the Unix socket at `path`, giving up after `timeout` (a connect blocks while the
/// listener's backlog is full, which a stopped daemon never drains).
fn connect_within(path: &Path, timeout: Duration) -> io::Result<UnixStream> {
    use nix::sys::socket::{connect, socket, AddressFamily, SockFlag, SockType, UnixAddr};
    let addr = UnixAddr::new(path).map_err(io::Error::from)?;
    let deadline = Instant::now() + timeout;
    loop {
        let fd = socket(
            AddressFamily::Unix,
            SockType::Stream,
            SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
            None,
        )
        .map_err(io::Error::from)?;
        match connect(fd.as_raw_fd(), &addr) {
            Ok(()) => {
                let stream = UnixStream::from(fd);
                stream.set_nonblocking(false)?;
                return Ok(stream);
            }
            // A Unix socket answers a full backlog with EAGAIN: try again until the deadline.
            Err(nix::errno::Errno::EAGAIN) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(nix::errno::Errno::EAGAIN) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the daemon accepts no connection",
                ))
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// The uid (and on Linux the pid) of the process on the other end of `stream`.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn peer_cred(stream: &UnixStream) -> io::Result<(u32, Option<u32>)> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    let cred = getsockopt(stream, PeerCredentials).map_err(io::Error::from)?;
    Ok((
        cred.uid(),
        u32::try_from(cred.pid()).ok().filter(|p| *p > 1),
    ))
}

/// The uid (and on Linux the pid) of the process on the other end of `stream`.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn peer_cred(stream: &UnixStream) -> io::Result<(u32, Option<u32>)> {
    let (uid, _) = nix::unistd::getpeereid(stream).map_err(io::Error::from)?;
    Ok((uid.as_raw(), None))
}

/// Connect to a daemon speaking our protocol, starting (or restarting) one as needed.
/// `volee_bin` is the executable to run as `volee daemon`.
pub fn ensure_daemon(paths: &Paths, volee_bin: &Path) -> Result<Client, ClientError> {
    // Refuse a planted runtime dir before anything is sent or started.
    paths.ensure().map_err(ClientError::Dirs)?;
    match Client::connect(paths) {
        Ok(mut client) => match client.request(&Request::Hello {
            version: PROTOCOL_VERSION,
        }) {
            Ok(Response::Hello { version, .. }) if version == PROTOCOL_VERSION => {
                return Ok(client)
            }
            // A stopped or hung daemon is the user's to look at (kill -CONT, a debugger), not
            // ours to kill and replace.
            Err(e @ ClientError::NotAnswering { .. }) => return Err(e),
            Ok(Response::Hello { .. }) | Ok(_) | Err(_) => {
                // A daemon from another volee build: replace it; the registry survives on disk.
                // Only the pid file or the socket's own credentials name the pid to signal.
                let pid = read_pid(paths).or(client.peer_pid);
                stop_daemon(paths, &mut client, pid);
            }
        },
        Err(
            e @ (ClientError::Untrusted(_)
            | ClientError::ForeignDaemon { .. }
            | ClientError::NotAnswering { .. }),
        ) => return Err(e),
        Err(_) => {}
    }
    start_daemon(volee_bin)?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match Client::connect(paths) {
            Ok(mut client) => {
                if let Ok(Response::Hello { .. }) = client.request(&Request::Hello {
                    version: PROTOCOL_VERSION,
                }) {
                    return Ok(client);
                }
            }
            Err(e @ (ClientError::Untrusted(_) | ClientError::ForeignDaemon { .. })) => {
                return Err(e)
            }
            Err(_) if Instant::now() < deadline => {}
            Err(_) => {
                return Err(ClientError::StartTimeout {
                    secs: 10,
                    log: paths.log_file().display().to_string(),
                })
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The pid the running daemon wrote; None unless the pid file is a regular file of the user's
/// own (a planted or symlinked one names a process we must never signal).
pub fn read_pid(paths: &Paths) -> Option<u32> {
    read_pid_file(&paths.pid_file())
}

fn read_pid_file(path: &Path) -> Option<u32> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    // O_NOFOLLOW, then fstat: what is checked is what is read.
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.uid() != nix::unistd::getuid().as_raw() {
        return None;
    }
    let mut text = String::new();
    Read::by_ref(&mut file)
        .take(64)
        .read_to_string(&mut text)
        .ok()?;
    text.trim().parse().ok()
}

/// Is process `pid` running as the user (its `/proc` entry is theirs)? Elsewhere than Linux,
/// trust the caller's checks.
fn runs_as_me(pid: i32) -> bool {
    use std::os::unix::fs::MetadataExt;
    if !Path::new("/proc/self").exists() {
        return true;
    }
    std::fs::metadata(format!("/proc/{pid}"))
        .is_ok_and(|m| m.uid() == nix::unistd::getuid().as_raw())
}

/// Ask the daemon to exit, and make sure it did (SIGTERM, then SIGKILL, by its recorded pid).
pub fn stop_daemon(paths: &Paths, client: &mut Client, pid: Option<u32>) {
    let _ = client.request(&Request::Shutdown);
    let Some(pid) = pid.or_else(|| read_pid(paths)).or(client.peer_pid) else {
        return;
    };
    // Never signal init or a process group by mistake.
    let Ok(raw) = i32::try_from(pid) else { return };
    if raw <= 1 {
        return;
    }
    let target = nix::unistd::Pid::from_raw(raw);
    let alive = || nix::sys::signal::kill(target, None).is_ok();
    let wait = |ms: u64| {
        let deadline = Instant::now() + Duration::from_millis(ms);
        while alive() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    wait(2000);
    // Another user's process (a reused pid) is never ours to signal.
    if alive() && runs_as_me(raw) {
        let _ = nix::sys::signal::kill(target, nix::sys::signal::Signal::SIGTERM);
        wait(2000);
    }
    if alive() && runs_as_me(raw) {
        let _ = nix::sys::signal::kill(target, nix::sys::signal::Signal::SIGKILL);
        wait(1000);
    }
}

fn start_daemon(volee_bin: &Path) -> Result<(), ClientError> {
    Command::new(volee_bin)
        .arg("daemon")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(|_| ())
        .map_err(ClientError::Spawn)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::net::UnixListener;
    use std::path::PathBuf;

    fn paths_in(root: &Path) -> Paths {
        let p = Paths {
            config_dir: root.join("config"),
            data_dir: root.join("data"),
            state_dir: root.join("state"),
            runtime_dir: root.join("run"),
        };
        p.ensure().unwrap();
        p
    }

    /// A process (not this one) that listens on `socket` and answers `ok` to every line.
    fn fake_daemon(socket: &Path) -> Option<std::process::Child> {
        if !volee_test_support::require("python3", "a fake daemon in another process") {
            return None;
        }
        let script = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1]); s.listen(8)
while True:
    c, _ = s.accept()
    f = c.makefile("rb")
    for line in f:
        c.sendall(b'{"type":"ok"}\n')
"#;
        let child = Command::new("python3")
            .args(["-c", script])
            .arg(socket)
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !socket.exists() {
            assert!(Instant::now() < deadline, "the fake daemon did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(child)
    }

    fn sleeper() -> std::process::Child {
        Command::new("sleep").arg("60").spawn().unwrap()
    }

    /// Plant `pid` as daemon.pid the way `plant` says, run stop_daemon against a fake daemon,
    /// and check the process of that pid survived.
    fn planted_pid_is_not_signalled(plant: impl FnOnce(&Path, u32)) {
        let tmp = tempfile::tempdir().unwrap();
        let paths = paths_in(tmp.path());
        let mut victim = sleeper();
        plant(&paths.pid_file(), victim.id());
        assert_eq!(
            read_pid(&paths),
            None,
            "a planted pid file must not be read"
        );
        let Some(mut fake) = fake_daemon(&paths.socket()) else {
            let _ = victim.kill();
            let _ = victim.wait();
            return;
        };
        let mut client = Client::connect(&paths).unwrap();
        stop_daemon(&paths, &mut client, None);
        let victim_alive = victim.try_wait().unwrap().is_none();
        let _ = victim.kill();
        let _ = victim.wait();
        let _ = fake.kill();
        let _ = fake.wait();
        assert!(
            victim_alive,
            "the process named by a planted pid file was signalled"
        );
    }

    #[test]
    fn a_symlinked_pid_file_is_never_signalled() {
        planted_pid_is_not_signalled(|pid_file, pid| {
            let target = pid_file.with_file_name("elsewhere.pid");
            std::fs::write(&target, format!("{pid}\n")).unwrap();
            std::os::unix::fs::symlink(&target, pid_file).unwrap();
        });
    }

    #[test]
    fn a_pid_file_of_another_user_is_never_signalled() {
        if !volee_test_support::require_root("a pid file owned by another user") {
            return;
        }
        planted_pid_is_not_signalled(|pid_file, pid| {
            std::fs::write(pid_file, format!("{pid}\n")).unwrap();
            std::os::unix::fs::chown(pid_file, Some(65534), Some(65534)).unwrap();
        });
    }

    #[test]
    fn our_own_pid_file_is_read() {
        let tmp = tempfile::tempdir().unwrap();
        let paths = paths_in(tmp.path());
        std::fs::write(paths.pid_file(), "4242\n").unwrap();
        assert_eq!(read_pid(&paths), Some(4242));
    }

    fn assert_nothing_connected(listener: &UnixListener) {
        listener.set_nonblocking(true).unwrap();
        match listener.accept() {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Ok(_) => panic!("a refused socket path was connected to"),
            Err(e) => panic!("accept: {e}"),
        }
    }

    #[test]
    fn a_symlink_or_a_regular_file_as_socket_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let paths = paths_in(tmp.path());
        let real = tmp.path().join("real.sock");
        let listener = UnixListener::bind(&real).unwrap();
        std::os::unix::fs::symlink(&real, paths.socket()).unwrap();
        let err = Client::connect(&paths).err().unwrap();
        assert!(
            matches!(&err, ClientError::Untrusted(PathError::Symlink { .. })),
            "{err:?}"
        );
        assert_nothing_connected(&listener);

        std::fs::remove_file(paths.socket()).unwrap();
        std::fs::write(paths.socket(), "").unwrap();
        let err = Client::connect(&paths).err().unwrap();
        assert!(
            matches!(&err, ClientError::Untrusted(PathError::WrongType { .. })),
            "{err:?}"
        );
    }

    #[test]
    fn a_daemon_of_another_uid_is_refused() {
        if !volee_test_support::require_root("a listener running as another user") {
            return;
        }
        if !volee_test_support::require("python3", "a listener running as another user") {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let paths = paths_in(tmp.path());
        let got = tmp.path().join("received");
        // Bound as root (so the socket file is ours), listening as uid 65534: the credentials
        // on the socket are the listener's.
        let script = r#"
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
out = open(sys.argv[2], "wb")
os.setgid(65534); os.setuid(65534)
s.listen(8)
while True:
    c, _ = s.accept()
    out.write(c.recv(65536)); out.flush()
"#;
        let mut fake = Command::new("python3")
            .args(["-c", script])
            .arg(paths.socket())
            .arg(&got)
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !got.exists() {
            assert!(Instant::now() < deadline, "the listener did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(200));
        let result = Client::connect(&paths);
        std::thread::sleep(Duration::from_millis(200));
        let received = std::fs::read(&got).unwrap();
        let _ = fake.kill();
        let _ = fake.wait();
        match result {
            Err(ClientError::ForeignDaemon { uid, .. }) => assert_eq!(uid, 65534),
            Err(e) => panic!("expected ForeignDaemon, got {e:?}"),
            Ok(_) => panic!("a daemon of another uid was accepted"),
        }
        assert!(received.is_empty(), "the foreign listener got {received:?}");
    }

    #[test]
    fn a_daemon_that_accepts_nothing_times_out_on_connect() {
        use nix::sys::socket::{
            bind, listen, socket, AddressFamily, Backlog, SockFlag, SockType, UnixAddr,
        };
        let tmp = tempfile::tempdir().unwrap();
        let paths = paths_in(tmp.path());
        let fd = socket(
            AddressFamily::Unix,
            SockType::Stream,
            SockFlag::empty(),
            None,
        )
        .unwrap();
        bind(fd.as_raw_fd(), &UnixAddr::new(&paths.socket()).unwrap()).unwrap();
        listen(&fd, Backlog::new(0).unwrap()).unwrap();
        // Fill the backlog the way clients of a stopped daemon do.
        let mut queued = Vec::new();
        for _ in 0..16 {
            match connect_within(&paths.socket(), Duration::ZERO) {
                Ok(s) => queued.push(s),
                Err(_) => break,
            }
        }
        let started = Instant::now();
        let err = Client::connect(&paths).err().unwrap();
        let took = started.elapsed();
        assert!(matches!(err, ClientError::NotAnswering { .. }), "{err:?}");
        assert!(
            took >= CONNECT_TIMEOUT && took < CONNECT_TIMEOUT + Duration::from_secs(2),
            "took {took:?}"
        );
    }

    /// A daemon stand-in in this process: for each request line, what to send back.
    fn scripted(
        paths: &Paths,
        script: Vec<Vec<(Duration, &'static str)>>,
    ) -> std::thread::JoinHandle<()> {
        let listener = UnixListener::bind(paths.socket()).unwrap();
        std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut writer = stream;
            for answers in script {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                for (after, text) in answers {
                    std::thread::sleep(after);
                    if writer.write_all(format!("{text}\n").as_bytes()).is_err() {
                        return;
                    }
                }
            }
            // Hold the connection open, silent, until the client goes.
            let mut rest = Vec::new();
            let _ = reader.read_to_end(&mut rest);
        })
    }

    #[test]
    fn keepalives_keep_a_slow_answer_alive_and_silence_is_not_answering() {
        let tmp = tempfile::tempdir().unwrap();
        let paths = paths_in(tmp.path());
        let second = Duration::from_millis(1500);
        let server = scripted(
            &paths,
            vec![
                vec![
                    (second, r#"{"type":"keep_alive"}"#),
                    (second, r#"{"type":"keep_alive"}"#),
                    (second, r#"{"type":"keep_alive"}"#),
                    (second, r#"{"type":"keep_alive"}"#),
                    (second, r#"{"type":"ok"}"#),
                ],
                vec![],
            ],
        );
        let mut client = Client::connect(&paths).unwrap();
        let started = Instant::now();
        // 7.5 s, longer than the silence limit: the keep-alives carry it.
        assert_eq!(client.request(&Request::Prune).unwrap(), Response::Ok);
        assert!(started.elapsed() > SILENCE_LIMIT);
        let started = Instant::now();
        let err = client.request(&Request::Prune).unwrap_err();
        let took = started.elapsed();
        assert!(matches!(err, ClientError::NotAnswering { .. }), "{err:?}");
        assert!(
            took >= SILENCE_LIMIT && took < SILENCE_LIMIT + Duration::from_secs(2),
            "took {took:?}"
        );
        drop(client);
        server.join().unwrap();
    }

    #[test]
    fn a_line_split_by_a_timeout_is_read_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let paths = paths_in(tmp.path());
        let listener = UnixListener::bind(paths.socket()).unwrap();
        let server = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            stream.write_all(br#"{"type":"#).unwrap();
            std::thread::sleep(Duration::from_millis(300));
            stream.write_all(b"\"ok\"}\n").unwrap();
            std::thread::sleep(Duration::from_millis(300));
        });
        let mut client = Client::connect(&paths).unwrap();
        let mut got = None;
        for _ in 0..20 {
            if let Some(resp) = client
                .next_response_within(Duration::from_millis(50))
                .unwrap()
            {
                got = Some(resp);
                break;
            }
        }
        assert_eq!(got, Some(Response::Ok));
        server.join().unwrap();
        let _: PathBuf = paths.socket();
    }
}
