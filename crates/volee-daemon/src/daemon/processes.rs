//! The agents' processes: is a stored pid still the agent's process (pids are reused), signal
//! a process group, end an orphaned one, read a zombie's wait status — all through
//! `volee-procscan`'s parsers.

use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use volee_core::Observation;
use volee_protocol::Origin;

use super::{now_ms, Daemon};

/// How long `volee stop` (and the end of an orphaned group) waits after SIGTERM before SIGKILL.
pub(super) const STOP_GRACE_MS: u64 = 3000;

/// Signal the agent's whole process group (tmux makes the pane's process a group leader).
pub(super) fn signal_group(pid: u32, signal: Signal) {
    let Ok(raw) = i32::try_from(pid) else { return };
    if kill(Pid::from_raw(-raw), signal).is_err() {
        let _ = kill(Pid::from_raw(raw), signal);
    }
}

/// Is `pid` alive, not a zombie, and still the leader of its own process group (so signalling
/// the group cannot hit an unrelated process that reused the pid)?
fn leads_live_group(pid: u32) -> bool {
    volee_procscan::ProcRoot::default()
        .stat(pid)
        .is_some_and(|s| s.leads_live_group())
}

/// The wait status of a zombie process: `(exit status, signal)`. None when the process is not
/// a zombie (running, or already reaped).
pub(super) fn zombie_wait_status(pid: u32) -> Option<(Option<i32>, Option<i32>)> {
    volee_procscan::ProcRoot::default().stat(pid)?.zombie_exit()
}

/// A pane is gone but its process group lives on (Gemini ignores the hangup of a killed pane,
/// reparented): end the group, SIGKILL after the grace time.
pub(super) fn end_orphan_group(pid: u32) {
    if !leads_live_group(pid) {
        return;
    }
    tracing::info!("pane gone, ending the process group of {pid}");
    signal_group(pid, Signal::SIGTERM);
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(STOP_GRACE_MS)).await;
        if leads_live_group(pid) {
            signal_group(pid, Signal::SIGKILL);
        }
    });
}

impl Daemon {
    /// A discovered agent restored from the registry whose pid is now another user's process (or
    /// no process) is not that agent any more: its process is gone. Checked at once, before any
    /// request could signal that pid.
    pub(super) fn drop_foreign_restored(&mut self) {
        let root = self.discovery.root();
        let uid = nix::unistd::getuid().as_raw();
        let foreign: Vec<String> = self
            .registry
            .iter()
            .filter(|a| a.origin == Origin::Discovered && !a.is_ended())
            .filter(|a| {
                !a.pid
                    .and_then(|pid| root.read(pid))
                    .is_some_and(|p| volee_procscan::owned_by(&p, uid))
            })
            .map(|a| a.id.clone())
            .collect();
        for id in foreign {
            tracing::info!(
                "restored agent {id}: pid {:?} is no longer the user's process",
                self.registry.get(&id).and_then(|a| a.pid)
            );
            self.process_gone_now(&id);
        }
    }

    /// Is a discovered agent's stored pid still its process? Pids are reused: the pid must be a
    /// process of the user's (real and effective uid), started when the one found was (when that
    /// is known: agents restored from the registry), and of the agent's harness. Launched agents
    /// are volee's own panes' processes and always count.
    pub(super) fn still_its_process(&self, id: &str) -> bool {
        let Some(agent) = self.registry.get(id) else {
            return false;
        };
        agent.origin != Origin::Discovered || self.discovery.still_its_process(agent)
    }

    /// The discovered agent's pid is no longer its process: it ended, "process gone".
    pub(super) fn end_vanished(&mut self, id: &str) {
        if let Some(a) = self.registry.get(id) {
            tracing::info!("agent {id}: pid {:?} is no longer its process", a.pid);
        }
        self.process_gone_now(id);
    }

    fn process_gone_now(&mut self, id: &str) {
        let now = now_ms();
        self.registry
            .observe(id, Observation::ProcessGone { at: now });
        let arbiter = self.arbiter();
        self.registry.reevaluate(id, now, &arbiter);
    }
}
