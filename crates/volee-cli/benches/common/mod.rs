//! What the CLI's benchmarks share: the test environment's daemon paths and agent list.

use volee_daemon::{Client, Paths};
use volee_protocol::{AgentView, Request, Response};
use volee_test_support::TestEnv;

/// The paths of the daemon of `env` (its `VOLEE_HOME`).
pub fn paths(env: &TestEnv) -> Paths {
    let home = env.volee_home();
    Paths::from_env(
        |k| (k == "VOLEE_HOME").then(|| home.display().to_string()),
        nix::unistd::getuid().as_raw(),
    )
}

/// The daemon's agents (`all`: ended ones too), asked over its socket.
#[allow(dead_code)] // not every benchmark lists agents
pub fn agents(paths: &Paths, all: bool) -> Vec<AgentView> {
    match Client::connect(paths)
        .unwrap()
        .request(&Request::List { all })
        .unwrap()
    {
        Response::Agents { agents } => agents,
        other => panic!("{other:?}"),
    }
}
