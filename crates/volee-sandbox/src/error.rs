//! What can go wrong with the sandbox, each with what to do about it ([`SandboxError::hint`]).

use std::path::PathBuf;

/// An error of the sandbox. [`SandboxError::hint`] says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// No Docker daemon answers at the socket (missing, refused, or not answering).
    #[error("Docker is not running (no daemon answers at {endpoint})")]
    DockerNotRunning {
        endpoint: String,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// The socket exists but this user may not open it.
    #[error("permission denied on the Docker socket {socket}")]
    PermissionDenied {
        socket: String,
        #[source]
        source: std::io::Error,
    },
    /// A user-chosen image that the daemon does not have (and cannot pull: no registry).
    #[error("the Docker image {image:?} is not available")]
    ImageMissing { image: String },
    /// volee's own image cannot be built: no busybox binary on the host.
    #[error("cannot build the sandbox image: no busybox binary found (looked at {})", .tried.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))]
    BusyboxMissing { tried: Vec<PathBuf> },
    /// volee's own image cannot be built: the busybox found needs shared libraries.
    #[error("cannot build the sandbox image: {path} is not a static binary")]
    BusyboxNotStatic { path: PathBuf },
    /// The project directory cannot be mounted.
    #[error("cannot use {path} as the sandbox's project directory: {why}")]
    ProjectDir { path: PathBuf, why: String },
    /// A Docker API call failed.
    #[error("Docker failed to {what}")]
    Docker {
        what: String,
        #[source]
        source: bollard::errors::Error,
    },
    /// A local file operation failed.
    #[error("cannot {what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

impl SandboxError {
    /// What to do next, for a `hint:` line.
    pub fn hint(&self) -> Option<String> {
        Some(match self {
            SandboxError::DockerNotRunning { .. } => {
                "start Docker: `sudo systemctl start docker` (or run `sudo dockerd`); install it with `sudo apt-get install docker.io`"
                    .into()
            }
            SandboxError::PermissionDenied { .. } => {
                "add yourself to the docker group: `sudo usermod -aG docker $USER`, then log out and in again (or run `newgrp docker`)"
                    .into()
            }
            SandboxError::ImageMissing { image } => format!(
                "load or build {image} first (`docker pull {image}` where a registry is reachable, or `docker load`), or leave out --image to use volee's own busybox image"
            ),
            SandboxError::BusyboxMissing { .. } | SandboxError::BusyboxNotStatic { .. } => {
                "install a static busybox: `sudo apt-get install busybox-static` (or pass --image with an image you have)"
                    .into()
            }
            SandboxError::ProjectDir { .. } => {
                "run volee from the project directory, which must exist and not be / or a system directory"
                    .into()
            }
            SandboxError::Docker { .. } => {
                "check `docker info` and the daemon's log (`journalctl -u docker`)".into()
            }
            SandboxError::Io { .. } => return None,
        })
    }
}
