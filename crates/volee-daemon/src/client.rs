//! The daemon's client side: connect, ask, and start the daemon on demand.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use volee_protocol::{Request, Response, PROTOCOL_VERSION};

use crate::paths::Paths;

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
    #[error("could not create volee's directories")]
    Dirs(#[source] io::Error),
}

/// One connection to the daemon.
pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Client {
    /// Connect without starting anything.
    pub fn connect(paths: &Paths) -> Result<Client, ClientError> {
        let path = paths.socket();
        let stream = UnixStream::connect(&path).map_err(|source| ClientError::Connect {
            path: path.display().to_string(),
            source,
        })?;
        let writer = stream.try_clone().map_err(ClientError::Io)?;
        Ok(Client {
            reader: BufReader::new(stream),
            writer,
        })
    }

    /// Send one request and read one response.
    pub fn request(&mut self, req: &Request) -> Result<Response, ClientError> {
        self.send(req)?;
        self.next_response()
    }

    /// Send a request without reading (for `Watch`).
    pub fn send(&mut self, req: &Request) -> Result<(), ClientError> {
        let mut line = serde_json::to_vec(req).map_err(|e| ClientError::Protocol(e.to_string()))?;
        line.push(b'\n');
        self.writer.write_all(&line).map_err(ClientError::Io)
    }

    /// Read the next response line (blocks).
    pub fn next_response(&mut self) -> Result<Response, ClientError> {
        let mut line = String::new();
        let n = self.reader.read_line(&mut line).map_err(ClientError::Io)?;
        if n == 0 {
            return Err(ClientError::Io(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the daemon closed the connection",
            )));
        }
        serde_json::from_str(&line).map_err(|e| ClientError::Protocol(e.to_string()))
    }

    /// Wait at most `timeout` for the next response; `Ok(None)` on timeout.
    pub fn next_response_within(
        &mut self,
        timeout: Duration,
    ) -> Result<Option<Response>, ClientError> {
        self.reader
            .get_ref()
            .set_read_timeout(Some(timeout.max(Duration::from_millis(1))))
            .map_err(ClientError::Io)?;
        let result = self.next_response();
        let _ = self.reader.get_ref().set_read_timeout(None);
        match result {
            Err(ClientError::Io(e))
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Ok(None)
            }
            other => other.map(Some),
        }
    }
}

/// Connect to a daemon speaking our protocol, starting (or restarting) one as needed.
/// `volee_bin` is the executable to run as `volee daemon`.
pub fn ensure_daemon(paths: &Paths, volee_bin: &Path) -> Result<Client, ClientError> {
    if let Ok(mut client) = Client::connect(paths) {
        match client.request(&Request::Hello {
            version: PROTOCOL_VERSION,
        }) {
            Ok(Response::Hello { version, .. }) if version == PROTOCOL_VERSION => {
                return Ok(client)
            }
            Ok(Response::Hello { pid, .. }) => {
                // A daemon from another volee build: replace it; the registry survives on disk.
                // The pid file is what our daemons write; the Hello pid is only a fallback.
                stop_daemon(paths, &mut client, read_pid(paths).or(Some(pid)));
            }
            _ => stop_daemon(paths, &mut client, read_pid(paths)),
        }
    }
    start_daemon(paths, volee_bin)?;
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

/// The pid the running daemon wrote.
pub fn read_pid(paths: &Paths) -> Option<u32> {
    std::fs::read_to_string(paths.pid_file())
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Ask the daemon to exit, and make sure it did (SIGTERM, then SIGKILL, by its recorded pid).
pub fn stop_daemon(paths: &Paths, client: &mut Client, pid: Option<u32>) {
    let _ = client.request(&Request::Shutdown);
    let Some(pid) = pid.or_else(|| read_pid(paths)) else {
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
    if alive() {
        let _ = nix::sys::signal::kill(target, nix::sys::signal::Signal::SIGTERM);
        wait(2000);
    }
    if alive() {
        let _ = nix::sys::signal::kill(target, nix::sys::signal::Signal::SIGKILL);
        wait(1000);
    }
}

fn start_daemon(paths: &Paths, volee_bin: &Path) -> Result<(), ClientError> {
    paths.ensure().map_err(ClientError::Dirs)?;
    Command::new(volee_bin)
        .arg("daemon")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(|_| ())
        .map_err(ClientError::Spawn)
}
