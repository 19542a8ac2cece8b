//! Docker sandbox for volee's own agent, via bollard.
//!
//! - [`Sandbox::start`]: one fresh container per session run from [`SandboxConfig`]: no network
//!   (`network_mode: none`), every capability dropped, `no-new-privileges`, read-only root with a
//!   tmpfs `/tmp`, pids/memory/CPU limits, a non-root user (the project directory's owner, never
//!   root), and only the project directory bind-mounted read-write — at its own path by default
//!   ([`MountTarget`]). Labelled `dev.volee.sandbox=1`, `dev.volee.session=<id>` and
//!   `dev.volee.owner-pid=<pid>`.
//! - [`Sandbox::exec`]: `sh -c COMMAND` with stdout and stderr apart, the exit code, a time limit
//!   (`timeout -s KILL` in the container, then `kill -KILL -1` from a second exec for children
//!   that outlive it; [`TIMEOUT_MARKER`] in stderr) and an output limit per stream (head and
//!   tail kept, a marker between: [`CappedOutput`]).
//! - [`Sandbox::remove`] at the end of the run; [`remove_leftovers`] for what crashed runs left.
//! - The image: [`BUSYBOX_IMAGE`] (`volee-sandbox:busybox`) is built on first use from the host's
//!   static busybox (Debian `busybox-static`) by importing a tar made here — no registry needed
//!   (docs/adr/0006-sandbox-image.md). Another image must already be loaded.
//! - [`connect`]: errors say what to do ([`SandboxError::hint`]): Docker not running,
//!   permission denied on the socket, image missing.
//!
//! docs/sandbox.md lists the lockdown and what the tests verify against a real daemon.

mod config;
mod error;
mod image;
mod output;
mod sandbox;

pub use config::{
    container_name, default_user, effective_user, resolve_mount, whole_seconds, MountTarget,
    SandboxConfig, LABEL_OWNER_PID, LABEL_SANDBOX, LABEL_SESSION, NOBODY,
};
pub use error::SandboxError;
pub use image::{
    applets, build_busybox_image, ensure_image, find_busybox, image_exists, is_static_elf,
    parse_applets, rootfs_tar, BUSYBOX_IMAGE, BUSYBOX_PATHS,
};
pub use output::{CappedOutput, TRUNCATION_MARKER};
pub use sandbox::{
    connect, connect_to, docker_endpoint, list_sandboxes, remove_leftovers, socket_error,
    ExecOutput, ExecRequest, Leftovers, Sandbox, SandboxContainer, DEFAULT_DOCKER_SOCKET,
    TIMEOUT_MARKER,
};

/// The bollard client type, so callers need not depend on bollard.
pub use bollard::Docker;
