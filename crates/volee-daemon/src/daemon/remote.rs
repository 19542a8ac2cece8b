//! Machines (issue 20, docs/adr/0013): the daemon's kept connection to each, the mirror of their
//! agents, and requests for `MACHINE:ID` forwarded.

use volee_protocol::Response;

use super::request_error::RequestError;
use super::{Daemon, Reply};

impl Daemon {
    pub(super) fn machines_request(&mut self, _ping: bool, reply: Reply) {
        let _ = reply.send(Response::Machines {
            machines: Vec::new(),
        });
    }

    pub(super) fn reload_machines(&mut self) {}

    pub(super) fn run_on(&mut self, machine: &str, _args: Vec<String>, reply: Reply) {
        let _ = reply.send(RequestError::user(format!("no machine named {machine}")).response());
    }
}
