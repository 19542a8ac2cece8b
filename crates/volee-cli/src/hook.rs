//! `volee hook HARNESS EVENT`: the command a harness's hook runs. It reads the payload, names
//! the agent (its `VOLEE_AGENT_ID` and `VOLEE_AGENT_TOKEN`) and hands the event to the daemon,
//! or spools it for the next daemon when none answers in time. Never fails the harness, never
//! prints.

use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use volee_protocol::{HookEvent, Request};

use crate::error::CliResult;

/// How long `volee hook` waits for its payload's end: a harness that keeps the pipe open must
/// not hold its hook (and so its turn) forever.
const HOOK_STDIN_WAIT: Duration = Duration::from_secs(2);

/// How long the daemon has to answer before the event is spooled instead.
const DELIVERY_WAIT: Duration = Duration::from_millis(500);

/// The spool stops growing here (a daemon that never comes back must not fill the disk).
const SPOOL_MAX_BYTES: u64 = 8 * 1024 * 1024;

/// Stdin up to EOF, at most `max` bytes, or what arrived within `wait`.
fn read_stdin_within(max: usize, wait: Duration) -> Vec<u8> {
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    // The reader may block for good; the process exits without it.
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut read = 0;
        let mut buf = vec![0u8; 64 * 1024];
        while read <= max {
            match stdin.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    read += n;
                    if tx.send(buf[..n].to_vec()).is_err() {
                        break;
                    }
                }
            }
        }
    });
    let deadline = Instant::now() + wait;
    let mut input = Vec::new();
    while let Ok(chunk) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        input.extend_from_slice(&chunk);
        if input.len() > max {
            break;
        }
    }
    input
}

/// `volee hook HARNESS EVENT`.
pub fn hook(harness: &str, event: &str) -> CliResult {
    let max = volee_harness::hooks::MAX_HOOK_BYTES;
    let input = read_stdin_within(max, HOOK_STDIN_WAIT);
    let base = HookEvent {
        agent: std::env::var("VOLEE_AGENT_ID").unwrap_or_default(),
        token: std::env::var("VOLEE_AGENT_TOKEN")
            .ok()
            .filter(|t| !t.is_empty())
            .map(volee_protocol::HookToken),
        // Counted once by the daemon, even when it also arrives through the spool.
        event_id: volee_os::random::hex(16).ok(),
        harness: harness.chars().take(32).collect(),
        event: event.chars().take(64).collect(),
        at_ms: volee_os::clock::now_ms(),
        session_id: None,
        fields: Vec::new(),
        error: None,
    };
    let ev = volee_harness::hooks::read_hook_payload(base, &input[..input.len().min(max + 1)]);
    let paths = crate::ask::paths();
    let delivered = volee_daemon::Client::connect(&paths)
        .ok()
        .and_then(|mut c| {
            c.send(&Request::Hook(ev.clone())).ok()?;
            c.next_response_within(DELIVERY_WAIT).ok()?
        })
        .is_some();
    if !delivered {
        spool(&paths, &paths.hook_spool(), &ev);
    }
    Ok(())
}

/// Append one event to the spool the next daemon replays (0600, bounded).
fn spool(paths: &volee_daemon::Paths, path: &Path, ev: &HookEvent) {
    // Only into volee's own directories (a hook must not write where someone else reads).
    if paths.ensure().is_err() {
        return;
    }
    if let Some(dir) = path.parent() {
        if volee_daemon::paths::ensure_private_dir(dir).is_err() {
            return;
        }
    }
    if std::fs::metadata(path).map(|m| m.len()).unwrap_or(0) > SPOOL_MAX_BYTES {
        return;
    }
    let Ok(mut line) = serde_json::to_vec(ev) else {
        return;
    };
    line.push(b'\n');
    let mut opts = std::fs::OpenOptions::new();
    opts.create(true).append(true);
    if let Ok(mut f) = volee_daemon::paths::open_private(path, opts) {
        let _ = f.write_all(&line);
    }
}
