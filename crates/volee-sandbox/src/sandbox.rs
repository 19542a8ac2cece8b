//! The Docker side: connect (with errors that tell "not running" from "permission denied"), one
//! locked-down container per session run, exec with time and output limits, removal, and the
//! removal of containers left behind by crashed runs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bollard::container::LogOutput;
use bollard::exec::{StartExecOptions, StartExecResults};
use bollard::models::{ContainerCreateBody, ExecConfig, HostConfig, Mount, MountType};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, ListContainersOptionsBuilder, RemoveContainerOptionsBuilder,
};
use bollard::{Docker, API_DEFAULT_VERSION};
use futures_util::{Stream, StreamExt};

use crate::config::{
    container_name, effective_user, resolve_mount, whole_seconds, SandboxConfig, LABEL_OWNER_PID,
    LABEL_SANDBOX, LABEL_SESSION,
};
use crate::error::SandboxError;
use crate::image::ensure_image;
use crate::output::CappedOutput;

/// The default daemon address when `DOCKER_HOST` is unset.
pub const DEFAULT_DOCKER_SOCKET: &str = "/var/run/docker.sock";

/// Appended to stderr when a command was killed at its time limit.
pub const TIMEOUT_MARKER: &str = "[volee: timed out after";

/// PATH inside the container.
const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The container's main process (PID 1): waits forever, a second at a time, so it reaps orphans
/// (a killed command's children are re-parented to it) and survives `kill -1`.
const KEEP_ALIVE: &str = "trap 'exit 0' TERM INT; while :; do sleep 1 & wait; done";

/// Time the in-container `timeout` gets before volee kills the command's processes itself.
const KILL_GRACE: Duration = Duration::from_secs(1);
/// How long output may still flow after the kill.
const AFTER_KILL: Duration = Duration::from_secs(5);

static CONTAINERS: AtomicU64 = AtomicU64::new(0);

/// `DOCKER_HOST` when set, else `unix:///var/run/docker.sock`.
pub fn docker_endpoint() -> String {
    std::env::var("DOCKER_HOST")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| format!("unix://{DEFAULT_DOCKER_SOCKET}"))
}

/// Connect to the daemon at [`docker_endpoint`] and check it answers.
pub async fn connect() -> Result<Docker, SandboxError> {
    connect_to(&docker_endpoint()).await
}

/// Connect to `endpoint` (`unix:///path`, `/path`, or `tcp://host:port`) and check it answers.
pub async fn connect_to(endpoint: &str) -> Result<Docker, SandboxError> {
    let not_running =
        |source: Option<Box<dyn std::error::Error + Send + Sync>>| SandboxError::DockerNotRunning {
            endpoint: endpoint.to_string(),
            source,
        };
    let socket = endpoint
        .strip_prefix("unix://")
        .or_else(|| endpoint.starts_with('/').then_some(endpoint));
    let docker = match socket {
        Some(path) => {
            // Open the socket first: its io error tells "not running" from "permission denied",
            // which bollard's errors blur.
            if let Err(e) = std::os::unix::net::UnixStream::connect(path) {
                return Err(socket_error(endpoint, path, e));
            }
            Docker::connect_with_socket(path, 120, API_DEFAULT_VERSION)
        }
        None => Docker::connect_with_http(endpoint, 120, API_DEFAULT_VERSION),
    }
    .map_err(|e| not_running(Some(Box::new(e))))?;
    match tokio::time::timeout(Duration::from_secs(10), docker.ping()).await {
        Ok(Ok(_)) => Ok(docker),
        Ok(Err(e)) => Err(not_running(Some(Box::new(e)))),
        Err(_) => Err(not_running(None)),
    }
}

/// The error for a socket that cannot be opened: permission denied, or not running.
pub fn socket_error(endpoint: &str, socket: &str, e: std::io::Error) -> SandboxError {
    if e.kind() == std::io::ErrorKind::PermissionDenied {
        SandboxError::PermissionDenied {
            socket: socket.to_string(),
            source: e,
        }
    } else {
        SandboxError::DockerNotRunning {
            endpoint: endpoint.to_string(),
            source: Some(Box::new(e)),
        }
    }
}

/// A command to run in the sandbox (`sh -c COMMAND`).
#[derive(Debug, Clone, PartialEq)]
pub struct ExecRequest {
    pub command: String,
    /// Killed after this long (rounded up to whole seconds).
    pub timeout: Duration,
    /// Bytes kept of each of stdout and stderr (head and tail halves, a marker between).
    pub max_output_bytes: usize,
    /// Working directory in the container; default the project directory.
    pub cwd: Option<PathBuf>,
    pub env: Vec<(String, String)>,
}

impl ExecRequest {
    /// Timeout 120 s, 64 KiB per stream.
    pub fn new(command: &str) -> ExecRequest {
        ExecRequest {
            command: command.into(),
            timeout: Duration::from_secs(120),
            max_output_bytes: 64 * 1024,
            cwd: None,
            env: Vec::new(),
        }
    }
    pub fn timeout(mut self, timeout: Duration) -> ExecRequest {
        self.timeout = timeout;
        self
    }
    pub fn max_output_bytes(mut self, n: usize) -> ExecRequest {
        self.max_output_bytes = n;
        self
    }
}

/// What a command did.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecOutput {
    /// Lossy UTF-8; a truncation marker where the middle was dropped.
    pub stdout: String,
    /// Lossy UTF-8; a truncation marker where the middle was dropped, and [`TIMEOUT_MARKER`]
    /// text at the end when the command was killed at its limit.
    pub stderr: String,
    /// None when Docker did not report one.
    pub exit_code: Option<i64>,
    pub timed_out: bool,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    /// Bytes the command wrote, kept or not.
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    pub duration: Duration,
}

impl ExecOutput {
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }
}

type OutputStream = Pin<Box<dyn Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>>;

/// A running sandbox container. Call [`Sandbox::remove`] at the end of the run; dropping it
/// without does a best-effort removal in the background, and [`remove_leftovers`] finds what a
/// crash left.
#[derive(Debug)]
pub struct Sandbox {
    docker: Docker,
    id: String,
    name: String,
    user: String,
    project_dir: PathBuf,
    workdir: PathBuf,
    session_id: String,
    env: Vec<String>,
    removed: bool,
}

fn docker_err(what: impl Into<String>) -> impl FnOnce(bollard::errors::Error) -> SandboxError {
    let what = what.into();
    move |source| SandboxError::Docker { what, source }
}

impl Sandbox {
    /// Create and start a fresh container for `config` (building volee's image on first use).
    pub async fn start(docker: &Docker, config: &SandboxConfig) -> Result<Sandbox, SandboxError> {
        let (host_dir, workdir) = resolve_mount(&config.project_dir, &config.mount)?;
        let user = effective_user(config, &host_dir)?;
        ensure_image(docker, &config.image).await?;

        let name = container_name(
            &config.session_id,
            CONTAINERS.fetch_add(1, Ordering::Relaxed),
        );
        let labels = HashMap::from([
            (LABEL_SANDBOX.to_string(), "1".to_string()),
            (LABEL_SESSION.to_string(), config.session_id.clone()),
            (LABEL_OWNER_PID.to_string(), std::process::id().to_string()),
        ]);
        let mut env = vec![
            format!("PATH={PATH}"),
            "HOME=/tmp".to_string(),
            "LANG=C.UTF-8".to_string(),
        ];
        env.extend(config.env.iter().map(|(k, v)| format!("{k}={v}")));
        let host_cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let cpus = config.cpus.clamp(0.01, host_cpus);
        let workdir_text = workdir.to_string_lossy().into_owned();
        let body = ContainerCreateBody {
            image: Some(config.image.clone()),
            user: Some(user.clone()),
            working_dir: Some(workdir_text.clone()),
            env: Some(env.clone()),
            entrypoint: Some(vec!["sh".into(), "-c".into(), KEEP_ALIVE.into()]),
            cmd: Some(Vec::new()),
            network_disabled: Some(true),
            tty: Some(false),
            attach_stdin: Some(false),
            attach_stdout: Some(false),
            attach_stderr: Some(false),
            labels: Some(labels),
            stop_timeout: Some(1),
            host_config: Some(HostConfig {
                network_mode: Some("none".into()),
                cap_drop: Some(vec!["ALL".into()]),
                security_opt: Some(vec!["no-new-privileges:true".into()]),
                privileged: Some(false),
                readonly_rootfs: Some(true),
                tmpfs: Some(HashMap::from([(
                    "/tmp".to_string(),
                    format!("rw,nosuid,nodev,size={},mode=1777", config.tmp_bytes),
                )])),
                mounts: Some(vec![Mount {
                    target: Some(workdir_text),
                    source: Some(host_dir.to_string_lossy().into_owned()),
                    typ: Some(MountType::BIND),
                    read_only: Some(false),
                    ..Default::default()
                }]),
                pids_limit: Some(config.pids_limit),
                memory: Some(config.memory_bytes),
                memory_swap: Some(config.memory_bytes),
                nano_cpus: Some((cpus * 1e9) as i64),
                ipc_mode: Some("private".into()),
                init: Some(false),
                auto_remove: Some(false),
                ..Default::default()
            }),
            ..Default::default()
        };
        let created = docker
            .create_container(
                Some(CreateContainerOptionsBuilder::default().name(&name).build()),
                body,
            )
            .await
            .map_err(docker_err(format!("create the sandbox container {name}")))?;
        for w in &created.warnings {
            tracing::warn!("docker create {name}: {w}");
        }
        let sandbox = Sandbox {
            docker: docker.clone(),
            id: created.id,
            name,
            user,
            project_dir: host_dir,
            workdir,
            session_id: config.session_id.clone(),
            env,
            removed: false,
        };
        if let Err(source) = docker.start_container(&sandbox.id, None).await {
            let _ = sandbox.remove().await;
            return Err(SandboxError::Docker {
                what: "start the sandbox container".into(),
                source,
            });
        }
        Ok(sandbox)
    }

    pub fn id(&self) -> &str {
        &self.id
    }
    pub fn name(&self) -> &str {
        &self.name
    }
    /// `uid:gid` commands run as.
    pub fn user(&self) -> &str {
        &self.user
    }
    /// The project directory on the host (canonical).
    pub fn project_dir(&self) -> &Path {
        &self.project_dir
    }
    /// The project directory inside the container (the default working directory).
    pub fn workdir(&self) -> &Path {
        &self.workdir
    }
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    async fn start_exec(
        &self,
        cmd: Vec<String>,
        cwd: &Path,
        extra_env: &[(String, String)],
    ) -> Result<(String, OutputStream), SandboxError> {
        let mut env = self.env.clone();
        env.extend(extra_env.iter().map(|(k, v)| format!("{k}={v}")));
        let exec = self
            .docker
            .create_exec(
                &self.id,
                ExecConfig {
                    cmd: Some(cmd),
                    attach_stdin: Some(false),
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    tty: Some(false),
                    env: Some(env),
                    user: Some(self.user.clone()),
                    working_dir: Some(cwd.to_string_lossy().into_owned()),
                    privileged: Some(false),
                    ..Default::default()
                },
            )
            .await
            .map_err(docker_err("create an exec in the sandbox"))?;
        let started = self
            .docker
            .start_exec(
                &exec.id,
                Some(StartExecOptions {
                    detach: false,
                    tty: false,
                    output_capacity: None,
                }),
            )
            .await
            .map_err(docker_err("start an exec in the sandbox"))?;
        match started {
            StartExecResults::Attached { output, .. } => Ok((exec.id, output)),
            StartExecResults::Detached => Err(SandboxError::Docker {
                what: "attach to an exec (it started detached)".into(),
                source: bollard::errors::Error::DockerStreamError {
                    error: "detached".into(),
                },
            }),
        }
    }

    /// Run `sh -c COMMAND` as the sandbox user, stdout and stderr apart, within the time and
    /// output limits. The command runs under `timeout -s KILL` in the container; if its output
    /// is still open a second later (children that outlived it), every process of the sandbox
    /// user but the container's main one is killed from a second exec.
    pub async fn exec(&self, req: &ExecRequest) -> Result<ExecOutput, SandboxError> {
        let secs = whole_seconds(req.timeout);
        let cmd = vec![
            "timeout".to_string(),
            "-s".into(),
            "KILL".into(),
            secs.to_string(),
            "sh".into(),
            "-c".into(),
            req.command.clone(),
        ];
        let cwd = req.cwd.clone().unwrap_or_else(|| self.workdir.clone());
        let started = Instant::now();
        let (exec_id, mut output) = self.start_exec(cmd, &cwd, &req.env).await?;
        let mut out = CappedOutput::new(req.max_output_bytes);
        let mut err = CappedOutput::new(req.max_output_bytes);
        let deadline =
            tokio::time::Instant::from_std(started + Duration::from_secs(secs) + KILL_GRACE);
        let mut killed = false;
        if !drain(&mut output, &mut out, &mut err, deadline).await? {
            killed = true;
            self.kill_user_processes().await;
            let after = tokio::time::Instant::now() + AFTER_KILL;
            if !drain(&mut output, &mut out, &mut err, after).await? {
                tracing::warn!(
                    "sandbox {}: output of a killed command still open after {AFTER_KILL:?}",
                    self.name
                );
            }
        }
        drop(output);
        let exit_code = self.exit_code(&exec_id).await?;
        let duration = started.elapsed();
        let timed_out = killed
            || (duration + Duration::from_millis(50) >= req.timeout
                && matches!(exit_code, Some(124 | 137)));
        let mut stderr = String::from_utf8_lossy(&err.render("stderr")).into_owned();
        if timed_out {
            if !stderr.is_empty() && !stderr.ends_with('\n') {
                stderr.push('\n');
            }
            stderr.push_str(&format!(
                "{TIMEOUT_MARKER} {secs} s; the command was killed]\n"
            ));
        }
        Ok(ExecOutput {
            stdout: String::from_utf8_lossy(&out.render("stdout")).into_owned(),
            stderr,
            exit_code,
            timed_out,
            stdout_truncated: out.truncated(),
            stderr_truncated: err.truncated(),
            stdout_bytes: out.total(),
            stderr_bytes: err.total(),
            duration,
        })
    }

    /// `kill -KILL -1` as the sandbox user: every process it may signal except itself and PID 1
    /// (the keep-alive loop), i.e. whatever a timed-out or interrupted command left running.
    pub async fn kill_user_processes(&self) {
        let cmd = vec!["sh".into(), "-c".into(), "kill -KILL -1".into()];
        match self.start_exec(cmd, Path::new("/"), &[]).await {
            Ok((_, mut output)) => {
                let mut sink = CappedOutput::new(0);
                let mut sink2 = CappedOutput::new(0);
                let until = tokio::time::Instant::now() + Duration::from_secs(5);
                let _ = drain(&mut output, &mut sink, &mut sink2, until).await;
            }
            Err(e) => tracing::warn!(
                "sandbox {}: cannot kill a timed-out command: {e}",
                self.name
            ),
        }
    }

    /// The exec's exit code, once Docker reports it finished (bounded wait).
    async fn exit_code(&self, exec_id: &str) -> Result<Option<i64>, SandboxError> {
        let until = Instant::now() + Duration::from_secs(3);
        loop {
            let info = self
                .docker
                .inspect_exec(exec_id)
                .await
                .map_err(docker_err("inspect an exec"))?;
            if info.running != Some(true) || Instant::now() > until {
                return Ok(info.exit_code);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stop and remove the container (with its anonymous volumes).
    pub async fn remove(mut self) -> Result<(), SandboxError> {
        self.removed = true;
        remove_container(&self.docker, &self.id).await
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        // Best effort: a runtime may be shutting down; `remove_leftovers` catches what remains.
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let docker = self.docker.clone();
            let id = self.id.clone();
            handle.spawn(async move {
                let _ = remove_container(&docker, &id).await;
            });
        }
    }
}

/// Read the exec's output into `out`/`err` until it ends (true) or `deadline` passes (false).
async fn drain(
    output: &mut OutputStream,
    out: &mut CappedOutput,
    err: &mut CappedOutput,
    deadline: tokio::time::Instant,
) -> Result<bool, SandboxError> {
    loop {
        match tokio::time::timeout_at(deadline, output.next()).await {
            Err(_) => return Ok(false),
            Ok(None) => return Ok(true),
            Ok(Some(Ok(LogOutput::StdOut { message } | LogOutput::Console { message }))) => {
                out.push(&message)
            }
            Ok(Some(Ok(LogOutput::StdErr { message }))) => err.push(&message),
            Ok(Some(Ok(LogOutput::StdIn { .. }))) => {}
            Ok(Some(Err(source))) => {
                return Err(SandboxError::Docker {
                    what: "read a command's output".into(),
                    source,
                })
            }
        }
    }
}

async fn remove_container(docker: &Docker, id: &str) -> Result<(), SandboxError> {
    match docker
        .remove_container(
            id,
            Some(
                RemoveContainerOptionsBuilder::default()
                    .force(true)
                    .v(true)
                    .build(),
            ),
        )
        .await
    {
        Ok(()) => Ok(()),
        // Already gone (removed by another cleanup).
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(()),
        // Removal already in progress elsewhere.
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 409, ..
        }) => Ok(()),
        Err(source) => Err(SandboxError::Docker {
            what: format!("remove the sandbox container {id}"),
            source,
        }),
    }
}

/// Which sandbox containers [`remove_leftovers`] removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leftovers {
    /// Those of one session.
    Session(String),
    /// Those whose owner process (label `dev.volee.owner-pid`) no longer runs on this machine:
    /// what crashed runs left. Safe while other sessions run.
    Orphaned,
    /// Every volee sandbox container.
    All,
}

/// A sandbox container as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxContainer {
    pub id: String,
    pub name: String,
    pub session_id: Option<String>,
    pub owner_pid: Option<u32>,
}

/// Every container labelled `dev.volee.sandbox=1` (running or not), optionally of one session.
pub async fn list_sandboxes(
    docker: &Docker,
    session: Option<&str>,
) -> Result<Vec<SandboxContainer>, SandboxError> {
    let mut labels = vec![format!("{LABEL_SANDBOX}=1")];
    if let Some(s) = session {
        labels.push(format!("{LABEL_SESSION}={s}"));
    }
    let filters = HashMap::from([("label".to_string(), labels)]);
    let list = docker
        .list_containers(Some(
            ListContainersOptionsBuilder::default()
                .all(true)
                .filters(&filters)
                .build(),
        ))
        .await
        .map_err(docker_err("list the sandbox containers"))?;
    Ok(list
        .into_iter()
        .filter_map(|c| {
            let labels = c.labels.unwrap_or_default();
            Some(SandboxContainer {
                id: c.id?,
                name: c
                    .names
                    .and_then(|n| n.first().cloned())
                    .unwrap_or_default()
                    .trim_start_matches('/')
                    .to_string(),
                session_id: labels.get(LABEL_SESSION).cloned(),
                owner_pid: labels.get(LABEL_OWNER_PID).and_then(|p| p.parse().ok()),
            })
        })
        .collect())
}

fn process_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Remove leftover sandbox containers; returns the ids removed.
pub async fn remove_leftovers(
    docker: &Docker,
    which: &Leftovers,
) -> Result<Vec<String>, SandboxError> {
    let session = match which {
        Leftovers::Session(s) => Some(s.as_str()),
        _ => None,
    };
    let mut removed = Vec::new();
    for c in list_sandboxes(docker, session).await? {
        if *which == Leftovers::Orphaned && c.owner_pid.is_none_or(process_alive) {
            continue;
        }
        remove_container(docker, &c.id).await?;
        removed.push(c.id);
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_errors_say_what_to_do() {
        let e = socket_error(
            "unix:///var/run/docker.sock",
            "/var/run/docker.sock",
            std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        );
        assert!(matches!(e, SandboxError::PermissionDenied { .. }));
        assert!(e.hint().unwrap().contains("usermod -aG docker"));
        let e = socket_error(
            "unix:///x",
            "/x",
            std::io::Error::from(std::io::ErrorKind::NotFound),
        );
        assert!(matches!(e, SandboxError::DockerNotRunning { .. }));
        assert!(e.hint().unwrap().contains("systemctl start docker"));
    }
}
