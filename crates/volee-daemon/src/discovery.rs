//! Discovery glue: the profiles' process rules, which found processes volee launched itself, and
//! which tmux pane a found process lives in.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use volee_procscan::{Found, Proc, ProcRoot, ProcessRule};

/// The process rules of every harness profile.
pub fn rules() -> Vec<ProcessRule> {
    volee_harness::profiles()
        .into_iter()
        .filter(|p| !p.process_names.is_empty())
        .map(|p| ProcessRule {
            harness: p.name.to_string(),
            names: p.process_names.iter().map(|s| s.to_string()).collect(),
            script_markers: p.process_scripts.iter().map(|s| s.to_string()).collect(),
            helper_markers: p.process_helpers.iter().map(|s| s.to_string()).collect(),
        })
        .collect()
}

/// `pid` and its ancestors, innermost first (bounded against loops in a torn scan).
pub fn ancestry(pid: u32, parents: &HashMap<u32, u32>) -> Vec<u32> {
    let mut chain = vec![pid];
    let mut cur = pid;
    while let Some(&parent) = parents.get(&cur) {
        if parent == 0 || chain.contains(&parent) || chain.len() > 64 {
            break;
        }
        chain.push(parent);
        cur = parent;
    }
    chain
}

/// Is this found agent one volee launched (its process or an ancestor is a launched agent's)?
pub fn is_launched(found: &Found, parents: &HashMap<u32, u32>, launched: &HashSet<u32>) -> bool {
    ancestry(found.pid, parents)
        .iter()
        .any(|p| launched.contains(p))
}

/// Parent of every process in a scan.
pub fn parents(procs: &[Proc]) -> HashMap<u32, u32> {
    procs.iter().map(|p| (p.stat.pid, p.stat.ppid)).collect()
}

/// What the last scan saw of a discovered agent's process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// Its start time (`/proc` ticks after boot): with the pid, the process's identity.
    pub start_time: u64,
    /// Its launcher chain then, outermost first.
    pub wrappers: Vec<u32>,
    /// Its controlling terminal (0 = none).
    pub tty_nr: u32,
}

impl Seen {
    /// How a scan sees process `p`, launched through `wrappers`.
    pub fn of(p: &Proc, wrappers: Vec<u32>) -> Seen {
        Seen {
            start_time: p.stat.start_time,
            wrappers,
            tty_nr: p.stat.tty_nr,
        }
    }
}

/// A process started this long ago (in `/proc` ticks, 100 a second) or less counts as a fresh
/// exec of a harness that restarted itself on the same terminal.
pub const RESTART_TICKS: u64 = 30 * 100;

/// The process a discovered agent of `harness` at `pid` (as `seen` at the last scan, when known)
/// moves to, when its harness went on in another process, so that it keeps its id:
/// - its process is now a wrapper of a deeper one (a launcher chain still growing: Qwen starts
///   three node processes);
/// - its process is gone and a new one of the same harness runs under the same launcher (Gemini
///   and Qwen relaunch their inner node process, for more heap or after a settings change), or
///   is that launcher;
/// - its process is gone and a new one of the same harness, started within [`RESTART_TICKS`]
///   (`now_ticks`), runs on the same terminal (a relaunch whose launcher exited).
///
/// `taken`: pids of other agents, never moved to. None when the agent stays put or has no
/// successor.
pub fn successor<'a>(
    harness: &str,
    pid: u32,
    seen: Option<&Seen>,
    found: &'a [Found],
    procs: &HashMap<u32, &Proc>,
    taken: &HashSet<u32>,
    now_ticks: Option<u64>,
) -> Option<&'a Found> {
    let same = |f: &&Found| f.harness == harness && f.pid != pid && !taken.contains(&f.pid);
    if let Some(f) = found
        .iter()
        .filter(same)
        .find(|f| f.wrappers.contains(&pid))
    {
        return Some(f);
    }
    if found.iter().any(|f| f.pid == pid && f.harness == harness) {
        return None;
    }
    // Its process is gone (or is no agent any more).
    let seen = seen?;
    let started_after = |f: &Found| {
        procs
            .get(&f.pid)
            .is_some_and(|p| p.stat.start_time >= seen.start_time)
    };
    if let Some(f) = found.iter().filter(same).find(|f| {
        // A launcher that now runs the harness itself (its child exited, it `exec`ed on).
        seen.wrappers.contains(&f.pid)
            || (started_after(f) && f.wrappers.iter().any(|w| seen.wrappers.contains(w)))
    }) {
        return Some(f);
    }
    let now = now_ticks?;
    if seen.tty_nr == 0 {
        return None;
    }
    found.iter().filter(same).find(|f| {
        procs.get(&f.pid).is_some_and(|p| {
            p.stat.tty_nr == seen.tty_nr
                && p.stat.start_time >= seen.start_time
                && now.saturating_sub(p.stat.start_time) <= RESTART_TICKS
        })
    })
}

/// How a found process's version is learnt. Nothing named by a process's arguments is ever run:
/// whoever started the process chose them, and a script called `claude` is anybody's program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionSource {
    /// The `version` of this `package.json`: the package (the profile's) of the script a runtime
    /// or shell runs.
    PackageJson(PathBuf),
    /// The `Version:` of this Python `*.dist-info/METADATA` (the profile's PyPI package, installed
    /// beside the script).
    PythonMetadata(PathBuf),
    /// A native binary: ask the very file `/proc/PID/exe` opens to, if [`open_executable`]
    /// accepts it when it is run.
    Executable,
    /// No safe way: generic screen rules.
    Unknown,
}

/// Interpreters run the script named in their arguments, so their own `--version` says nothing
/// about the harness (node's, python's) and the script is never run: its package is read.
fn is_interpreter(exe: &Path) -> bool {
    let name = exe
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // A replaced binary reads `/usr/bin/node (deleted)`.
    let name = name.strip_suffix(" (deleted)").unwrap_or(&name);
    matches!(
        name,
        "node" | "nodejs" | "bun" | "deno" | "sh" | "bash" | "dash" | "zsh" | "ksh" | "busybox"
    ) || name.starts_with("python")
}

/// The profile's package, as npm names it (`@google/gemini-cli`) or, for `aider-chat (PyPI)`, as
/// a Python distribution (`aider_chat`, the spelling of its `dist-info` directory).
fn package_kind(package: &str) -> (bool, String) {
    match package.strip_suffix(" (PyPI)") {
        Some(dist) => (true, dist.trim().replace(['-', '.'], "_")),
        None => (false, package.to_string()),
    }
}

/// Files read to learn a version are small; anything bigger is not a package's manifest.
const MAX_MANIFEST: u64 = 1 << 20;

fn read_small(path: &Path) -> Option<String> {
    use std::io::Read;
    let file = std::fs::File::open(path).ok()?;
    let mut text = String::new();
    file.take(MAX_MANIFEST).read_to_string(&mut text).ok()?;
    Some(text)
}

/// The `(name, version)` of a `package.json`.
fn package_json(path: &Path) -> Option<(String, String)> {
    let v: serde_json::Value = serde_json::from_str(&read_small(path)?).ok()?;
    Some((
        v.get("name")?.as_str()?.to_string(),
        v.get("version")?.as_str()?.to_string(),
    ))
}

/// How to learn the version of a found process of a harness whose profile names `package`:
/// `exe` is where `/proc/PID/exe` points, `argv` its arguments, `cwd` its working directory (for
/// a relative script path). Reads the file system; runs nothing.
pub fn version_source(
    exe: Option<&Path>,
    argv: &[String],
    cwd: Option<&Path>,
    package: Option<&str>,
) -> VersionSource {
    let Some(exe) = exe else {
        return VersionSource::Unknown;
    };
    if !is_interpreter(exe) {
        return VersionSource::Executable;
    }
    let Some((python, package)) = package.map(package_kind) else {
        return VersionSource::Unknown;
    };
    // The script: the first argument after the interpreter's options. Code given inline
    // (`-c`, `-e`, `-m module`) has no file to read.
    let mut script = None;
    for a in argv.iter().skip(1) {
        if matches!(a.as_str(), "-c" | "-e" | "--eval" | "-p" | "--print" | "-m") {
            return VersionSource::Unknown;
        }
        if !a.starts_with('-') {
            script = Some(a);
            break;
        }
    }
    let Some(script) = script else {
        return VersionSource::Unknown;
    };
    let script = match (Path::new(script).is_absolute(), cwd) {
        (true, _) => PathBuf::from(script),
        (false, Some(cwd)) => cwd.join(script),
        (false, None) => return VersionSource::Unknown,
    };
    // `.bin/gemini` is a link into the package; the package is where it points.
    let Ok(script) = script.canonicalize() else {
        return VersionSource::Unknown;
    };
    let found = if python {
        python_metadata(&script, &package).map(VersionSource::PythonMetadata)
    } else {
        script
            .ancestors()
            .skip(1)
            .take(16)
            .map(|dir| dir.join("package.json"))
            // Nested manifests (`dist/package.json` holding only `"type"`) are passed by.
            .find(|p| package_json(p).is_some_and(|(name, _)| name == package))
            .map(VersionSource::PackageJson)
    };
    found.unwrap_or(VersionSource::Unknown)
}

/// `<venv>/lib/python3.X/site-packages/<dist>-<version>.dist-info/METADATA` for a script in
/// `<venv>/bin` (pip, pipx and uv tool installs all look so).
fn python_metadata(script: &Path, dist: &str) -> Option<PathBuf> {
    let prefix = format!("{}-", dist.to_ascii_lowercase());
    for root in script.ancestors().skip(1).take(3) {
        let Ok(libs) = std::fs::read_dir(root.join("lib")) else {
            continue;
        };
        for lib in libs.filter_map(Result::ok) {
            if !lib.file_name().to_string_lossy().starts_with("python") {
                continue;
            }
            let Ok(entries) = std::fs::read_dir(lib.path().join("site-packages")) else {
                continue;
            };
            for e in entries.filter_map(Result::ok) {
                let name = e.file_name().to_string_lossy().to_ascii_lowercase();
                if name.starts_with(&prefix) && name.ends_with(".dist-info") {
                    let metadata = e.path().join("METADATA");
                    if metadata.is_file() {
                        return Some(metadata);
                    }
                }
            }
        }
    }
    None
}

/// The version a manifest holds (a [`VersionSource::PackageJson`] or `PythonMetadata`), when it
/// is one; `package` is checked again (the file may have changed since it was chosen).
pub fn read_manifest_version(source: &VersionSource, package: Option<&str>) -> Option<String> {
    let version = match source {
        VersionSource::PackageJson(path) => {
            let (name, version) = package_json(path)?;
            if Some(name.as_str()) != package {
                return None;
            }
            version
        }
        VersionSource::PythonMetadata(path) => read_small(path)?
            .lines()
            .take_while(|l| !l.is_empty())
            .find_map(|l| l.strip_prefix("Version:"))?
            .trim()
            .to_string(),
        VersionSource::Executable | VersionSource::Unknown => return None,
    };
    volee_harness::profile::parse_version(&version).map(|_| version)
}

/// Why a native binary is not asked its version.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ExeRefused {
    #[error("its executable cannot be opened")]
    Unreadable,
    #[error("its executable is not a regular file")]
    NotAFile,
    #[error("its executable belongs to uid {0}, neither the user nor root")]
    Owner(u32),
    #[error("its executable is writable by group or others (mode {0:o})")]
    Writable(u32),
    #[error("its executable is setuid or setgid (mode {0:o})")]
    SetId(u32),
    #[error("the process is gone or is now another one")]
    Changed,
}

/// The executable a found process runs, opened, if it may be asked its version: the file
/// `/proc/PID/exe` opens to (the very inode running, whatever its path now holds), a regular file
/// owned by `uid` or root that nobody else can write and that does not change rights when run;
/// checked on the open file, so it cannot be swapped between check and run. The process must
/// still be the one found (`start_time`) and `uid`'s. Returns the file and its path (for
/// `argv[0]`).
pub fn open_executable(
    root: &ProcRoot,
    pid: u32,
    uid: u32,
    start_time: u64,
) -> Result<(std::fs::File, PathBuf), ExeRefused> {
    use std::os::unix::fs::MetadataExt;
    let link = root.root().join(pid.to_string()).join("exe");
    let file = std::fs::File::open(&link).map_err(|_| ExeRefused::Unreadable)?;
    let meta = file.metadata().map_err(|_| ExeRefused::Unreadable)?;
    if !meta.is_file() {
        return Err(ExeRefused::NotAFile);
    }
    if meta.uid() != uid && meta.uid() != 0 {
        return Err(ExeRefused::Owner(meta.uid()));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(ExeRefused::Writable(mode));
    }
    if mode & 0o6000 != 0 {
        return Err(ExeRefused::SetId(mode));
    }
    // Opened after the scan: the pid must still be the process found, and the user's.
    match root.read(pid) {
        Some(p) if p.stat.start_time == start_time && volee_procscan::owned_by(&p, uid) => {}
        _ => return Err(ExeRefused::Changed),
    }
    let path = std::fs::read_link(&link).unwrap_or_else(|_| link.clone());
    Ok((file, path))
}

/// A pane of some tmux server, as `list-panes -a` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaneInfo {
    pub pane: String,
    pub pid: u32,
    pub tty: String,
    pub session: String,
    pub window: String,
}

/// The pane a process lives in: the pane whose first process is it or one of its ancestors, else
/// the pane on its terminal.
pub fn pane_of<'a>(
    chain: &[u32],
    tty: Option<&str>,
    panes: &'a [PaneInfo],
) -> Option<&'a PaneInfo> {
    panes
        .iter()
        .find(|p| chain.contains(&p.pid))
        .or_else(|| tty.and_then(|t| panes.iter().find(|p| p.tty == t)))
}

/// What is known of a found process for learning its version.
pub struct VersionAsk {
    pub root: volee_procscan::ProcRoot,
    pub pid: u32,
    /// The daemon's user: the process and its executable must be theirs (or root's, for the file).
    pub uid: u32,
    pub start_time: u64,
    pub argv: Vec<String>,
    /// The profile's package (`package.json` name or PyPI distribution).
    pub package: Option<&'static str>,
    /// The process's HOME, where a native binary keeps its state (Copilot unpacks itself there).
    pub home: Option<String>,
}

/// A found process's version, as [`version_source`] says to learn it: read from
/// its package's files, or asked of its checked native executable (3 s, then once more for up to
/// 30 s), or not at all.
pub async fn learn_version(ask: VersionAsk) -> Option<String> {
    use VersionSource;
    let (ask, source) = tokio::task::spawn_blocking(move || {
        let exe = ask.root.exe(ask.pid);
        let cwd = ask.root.cwd(ask.pid);
        let source = version_source(exe.as_deref(), &ask.argv, cwd.as_deref(), ask.package);
        (ask, source)
    })
    .await
    .ok()?;
    match source {
        VersionSource::PackageJson(_) | VersionSource::PythonMetadata(_) => {
            let package = ask.package;
            tokio::task::spawn_blocking(move || read_manifest_version(&source, package))
                .await
                .ok()
                .flatten()
        }
        VersionSource::Executable => {
            if let Some(v) = ask_executable(&ask, Duration::from_secs(3)).await {
                return Some(v);
            }
            ask_executable(&ask, Duration::from_secs(30)).await
        }
        VersionSource::Unknown => {
            tracing::info!("pid {}: no safe way to learn its version", ask.pid);
            None
        }
    }
}

/// `EXE --version` of the found process's own executable, opened and checked by
/// [`open_executable`] and run through that open file (so the file checked is
/// the file run), bounded to `limit`; the first line when it holds a version number.
async fn ask_executable(ask: &VersionAsk, limit: Duration) -> Option<String> {
    use std::os::fd::AsRawFd;
    let (file, path) = match open_executable(&ask.root, ask.pid, ask.uid, ask.start_time) {
        Ok(x) => x,
        Err(e) => {
            tracing::info!("pid {}: not asking its version: {e}", ask.pid);
            return None;
        }
    };
    // The child inherits the descriptor across fork and execs it before close-on-exec applies.
    let mut cmd = tokio::process::Command::new(format!("/proc/self/fd/{}", file.as_raw_fd()));
    cmd.arg0(&path)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    if let Some(home) = &ask.home {
        cmd.env("HOME", home);
    }
    let out = tokio::time::timeout(limit, cmd.output()).await.ok()?.ok()?;
    drop(file);
    volee_harness::profile::version_line(&String::from_utf8_lossy(&out.stdout))
}

/// The session id a harness process publishes: its harness's session file (Claude and Qwen
/// `sessions/<pid>.json`, Grok `active_sessions.json`, under the process's own HOME), else a
/// transcript it holds open (Codex's rollout file; Copilot's `inuse.<pid>.hold`), else Copilot's
/// `inuse.<pid>.lock`. Never the newest transcript on disk: with two
/// agents in one folder that guess is wrong half the time.
pub fn published_session_id(
    root: &volee_procscan::ProcRoot,
    harness: &str,
    pid: u32,
    env: &[(String, String)],
) -> Option<String> {
    let home = env
        .iter()
        .find(|(k, _)| k == "HOME")
        .map(|(_, v)| v.as_str());
    home.and_then(|home| {
        let path = volee_harness::listing::session_file(harness, Path::new(home), pid)?;
        let text = std::fs::read_to_string(path).ok()?;
        volee_harness::listing::parse_session_id(harness, &text, pid)
    })
    .or_else(|| {
        if !volee_harness::listing::holds_transcript_open(harness) {
            return None;
        }
        root.open_files(pid)
            .iter()
            .find_map(|p| volee_harness::listing::session_id_from_open_file(harness, p))
    })
    .or_else(|| volee_harness::listing::session_id_from_lock_files(harness, env, pid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launched_agents_are_recognised_through_wrappers() {
        let parents: HashMap<u32, u32> = [(301, 300), (300, 50), (50, 1)].into();
        let found = Found {
            harness: "gemini".into(),
            pid: 301,
            wrappers: vec![300],
        };
        assert!(is_launched(&found, &parents, &[300].into()));
        assert!(!is_launched(&found, &parents, &[999].into()));
        assert_eq!(ancestry(301, &parents), [301, 300, 50, 1]);
    }

    #[test]
    fn panes_by_ancestry_then_tty() {
        let panes = vec![
            PaneInfo {
                pane: "%1".into(),
                pid: 50,
                tty: "/dev/pts/3".into(),
                session: "s".into(),
                window: "@1".into(),
            },
            PaneInfo {
                pane: "%2".into(),
                pid: 60,
                tty: "/dev/pts/4".into(),
                session: "s".into(),
                window: "@2".into(),
            },
        ];
        assert_eq!(
            pane_of(&[301, 300, 50, 1], None, &panes).map(|p| p.pane.as_str()),
            Some("%1")
        );
        assert_eq!(
            pane_of(&[7, 1], Some("/dev/pts/4"), &panes).map(|p| p.pane.as_str()),
            Some("%2")
        );
        assert_eq!(pane_of(&[7, 1], Some("/dev/pts/9"), &panes), None);
    }

    fn write(path: &Path, text: &str, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// A script that leaves `marker` behind when anything runs it.
    fn trap(path: &Path, marker: &Path) {
        write(
            path,
            &format!(
                "#!/bin/sh\necho ran \"$@\" >> {}\necho 9.9.9\n",
                marker.display()
            ),
            0o755,
        );
    }

    fn args(xs: &[&str]) -> Vec<String> {
        xs.iter().map(|s| s.to_string()).collect()
    }

    /// A wrapper's version (node, bun, a shell script) is read from its package's manifest,
    /// found by walking up from the script past nested manifests and links, and nothing from the
    /// process's arguments is run; a native binary is asked only as its checked executable.
    #[test]
    fn versions_are_read_from_packages_never_by_running_a_script() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let marker = d.join("ran");
        let pkg = d.join("lib/node_modules/@qwen-code/qwen-code");
        write(
            &pkg.join("package.json"),
            r#"{"name":"@qwen-code/qwen-code","version":"0.24.4","bin":{"qwen":"cli.js"}}"#,
            0o644,
        );
        write(
            &pkg.join("dist/package.json"),
            r#"{"type":"module"}"#,
            0o644,
        );
        trap(&pkg.join("dist/cli.js"), &marker);
        std::fs::create_dir_all(d.join("bin")).unwrap();
        std::os::unix::fs::symlink(pkg.join("dist/cli.js"), d.join("bin/qwen")).unwrap();
        let node = Path::new("/usr/bin/node");
        let qwen = Some("@qwen-code/qwen-code");

        // `node --expose-gc <link> -i x`: the link leads to the package.
        let argv = args(&["node", "--expose-gc", "bin/qwen", "-i", "run --version"]);
        let source = version_source(Some(node), &argv, Some(d), qwen);
        assert_eq!(source, VersionSource::PackageJson(pkg.join("package.json")));
        assert_eq!(
            read_manifest_version(&source, qwen).as_deref(),
            Some("0.24.4")
        );
        // Another package's manifest is not the harness's version.
        assert_eq!(
            version_source(Some(node), &argv, Some(d), Some("@google/gemini-cli")),
            VersionSource::Unknown
        );
        assert_eq!(
            read_manifest_version(&source, Some("@google/gemini-cli")),
            None
        );
        // A shell script (`comm` claude) is read the same way; a loose one has no version.
        let claude = d.join("node_modules/@anthropic-ai/claude-code");
        write(
            &claude.join("package.json"),
            r#"{"name":"@anthropic-ai/claude-code","version":"2.1.332"}"#,
            0o644,
        );
        trap(&claude.join("bin/claude"), &marker);
        let sh = Path::new("/usr/bin/dash");
        let argv = args(&["/bin/sh", claude.join("bin/claude").to_str().unwrap()]);
        let source = version_source(Some(sh), &argv, None, Some("@anthropic-ai/claude-code"));
        assert_eq!(
            read_manifest_version(&source, Some("@anthropic-ai/claude-code")).as_deref(),
            Some("2.1.332")
        );
        trap(&d.join("loose/claude"), &marker);
        let argv = args(&["/bin/sh", d.join("loose/claude").to_str().unwrap()]);
        assert_eq!(
            version_source(Some(sh), &argv, None, Some("@anthropic-ai/claude-code")),
            VersionSource::Unknown
        );
        // Inline code, no script, no package, no executable: unknown.
        for argv in [
            args(&["node", "-e", "require('x')", "qwen"]),
            args(&["node"]),
            args(&["sh", "-c", "exec qwen"]),
        ] {
            assert_eq!(
                version_source(Some(node), &argv, Some(d), qwen),
                VersionSource::Unknown,
                "{argv:?}"
            );
        }
        assert_eq!(
            version_source(Some(node), &args(&["node", "bin/qwen"]), Some(d), None),
            VersionSource::Unknown
        );
        assert_eq!(
            version_source(None, &args(&["qwen"]), Some(d), qwen),
            VersionSource::Unknown
        );
        // Python: the distribution's METADATA beside the venv's script.
        let venv = d.join("venvs/aider-chat");
        write(
            &venv.join("lib/python3.12/site-packages/aider_chat-0.86.2.dist-info/METADATA"),
            "Metadata-Version: 2.1\nName: aider-chat\nVersion: 0.86.2\n\nVersion: 1.0\n",
            0o644,
        );
        trap(&venv.join("bin/aider"), &marker);
        let argv = args(&[
            venv.join("bin/python3").to_str().unwrap(),
            venv.join("bin/aider").to_str().unwrap(),
        ]);
        let source = version_source(
            Some(Path::new("/usr/bin/python3.12")),
            &argv,
            None,
            Some("aider-chat (PyPI)"),
        );
        assert!(
            matches!(source, VersionSource::PythonMetadata(_)),
            "{source:?}"
        );
        assert_eq!(
            read_manifest_version(&source, Some("aider-chat (PyPI)")).as_deref(),
            Some("0.86.2")
        );
        // A native binary is the executable itself, whatever its arguments say.
        assert_eq!(
            version_source(
                Some(&pkg.join("dist/cli.js")),
                &args(&["/bin/sh", "x"]),
                None,
                qwen
            ),
            VersionSource::Executable
        );
        assert!(
            !marker.exists(),
            "a script was run: {:?}",
            std::fs::read_to_string(&marker)
        );
    }

    /// A fixture `/proc/<pid>` whose `exe` links to `target`, run by `uid`.
    fn fake_proc(root: &Path, pid: u32, target: &Path, uid: u32, start: u64) {
        let dir = root.join(pid.to_string());
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink(target, dir.join("exe")).unwrap();
        std::fs::write(
            dir.join("stat"),
            format!("{pid} (claude) S 1 {pid} 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 {start} 1 1 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0"),
        )
        .unwrap();
        std::fs::write(
            dir.join("status"),
            format!("Name:\tclaude\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n"),
        )
        .unwrap();
        std::fs::write(dir.join("cmdline"), "claude\0").unwrap();
    }

    /// A native binary is asked its version only when it is a regular file that only the user
    /// or root can change, not setuid, and the process is still the one found and the user's.
    #[test]
    fn native_executables_are_checked_before_they_are_asked() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let root = ProcRoot::new(d.join("proc"));
        let me = std::fs::metadata(d).unwrap().uid();
        let exe = d.join("claude.exe");
        write(&exe, "\x7fELF", 0o755);
        fake_proc(&d.join("proc"), 42, &exe, me, 777);
        let (_file, path) = open_executable(&root, 42, me, 777).unwrap();
        assert_eq!(path, exe);
        // The pid is now another process (other start time) or another user's.
        assert_eq!(
            open_executable(&root, 42, me, 778).err(),
            Some(ExeRefused::Changed)
        );
        fake_proc(&d.join("proc"), 42, &exe, me + 1, 777);
        assert_eq!(
            open_executable(&root, 42, me, 777).err(),
            Some(ExeRefused::Changed)
        );
        fake_proc(&d.join("proc"), 42, &exe, me, 777);
        for (mode, refused) in [
            (0o775, ExeRefused::Writable(0o775)),
            (0o757, ExeRefused::Writable(0o757)),
            (0o4755, ExeRefused::SetId(0o4755)),
            (0o2755, ExeRefused::SetId(0o2755)),
        ] {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(open_executable(&root, 42, me, 777).err(), Some(refused));
        }
        fake_proc(&d.join("proc"), 43, d, me, 777);
        assert_eq!(
            open_executable(&root, 43, me, 777).err(),
            Some(ExeRefused::NotAFile)
        );
        assert_eq!(
            open_executable(&root, 44, me, 777).err(),
            Some(ExeRefused::Unreadable)
        );
        // Owned by a third user (the one who could rewrite it): refused, for any daemon user.
        if volee_test_support::require_root("a file owned by another user") {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
            nix::unistd::chown(&exe, Some(nix::unistd::Uid::from_raw(54321)), None).unwrap();
            assert_eq!(
                open_executable(&root, 42, me, 777).err(),
                Some(ExeRefused::Owner(54321))
            );
            // Root's own files are trusted.
            nix::unistd::chown(&exe, Some(nix::unistd::Uid::from_raw(0)), None).unwrap();
            assert!(open_executable(&root, 42, me, 777).is_ok());
        }
    }

    fn found(harness: &str, pid: u32, wrappers: &[u32]) -> Found {
        Found {
            harness: harness.into(),
            pid,
            wrappers: wrappers.to_vec(),
        }
    }

    fn a_proc(pid: u32, ppid: u32, tty_nr: u32, start_time: u64) -> Proc {
        Proc {
            stat: volee_procscan::Stat {
                pid,
                comm: "node".into(),
                state: 'S',
                ppid,
                pgrp: pid as i32,
                session: 1,
                tty_nr,
                tpgid: pid as i32,
                start_time,
                exit_code: None,
            },
            argv: vec![],
            owner: None,
        }
    }

    /// A discovered agent follows its harness to its next process — a deeper one of its chain, a
    /// relaunch under the same launcher, a fresh one on the same terminal — and nothing else: not
    /// another agent's, not another harness's, not an old process on its terminal.
    #[test]
    fn an_agent_follows_its_harness_to_its_next_process() {
        let pty = 34818;
        let procs = [
            a_proc(400, 101, pty, 1000),
            a_proc(401, 400, pty, 1010),
            a_proc(402, 401, pty, 1020),
            a_proc(403, 400, pty, 1500),
            a_proc(500, 1, pty, 1600),
            a_proc(600, 1, pty, 900),
            a_proc(700, 1, 0, 1700),
        ];
        let by_pid: HashMap<u32, &Proc> = procs.iter().map(|p| (p.stat.pid, p)).collect();
        let none = HashSet::new();
        let seen = Seen {
            start_time: 1010,
            wrappers: vec![400],
            tty_nr: pty,
        };
        let next = |pid: u32, seen: Option<&Seen>, found: &[Found], taken: &HashSet<u32>| {
            successor("qwen", pid, seen, found, &by_pid, taken, Some(1800)).map(|f| f.pid)
        };
        // Found at 401; 402 appeared below it: the chain grew.
        let grown = [found("qwen", 402, &[400, 401])];
        assert_eq!(next(401, Some(&seen), &grown, &none), Some(402));
        // Still its innermost process: stays.
        assert_eq!(next(402, None, &grown, &none), None);
        // 401 exited and the launcher 400 started 403: a relaunch.
        let relaunched = [found("qwen", 403, &[400])];
        assert_eq!(next(401, Some(&seen), &relaunched, &none), Some(403));
        // …unless 403 is already another agent's.
        assert_eq!(next(401, Some(&seen), &relaunched, &[403].into()), None);
        // Another harness under the same launcher is not it.
        assert_eq!(
            next(401, Some(&seen), &[found("gemini", 403, &[400])], &none),
            None
        );
        // Launcher gone too: a fresh qwen on the same terminal, started after it.
        let fresh = [found("qwen", 500, &[])];
        assert_eq!(next(401, Some(&seen), &fresh, &none), Some(500));
        // Not one that is too old to be its restart (started 30 s before the scan's clock)…
        let late = |now| successor("qwen", 401, Some(&seen), &fresh, &by_pid, &none, now);
        assert!(late(Some(1600 + RESTART_TICKS + 1)).is_none());
        assert!(late(None).is_none());
        // …nor one older than the agent's process, nor one on another terminal.
        assert_eq!(
            next(401, Some(&seen), &[found("qwen", 600, &[])], &none),
            None
        );
        assert_eq!(
            next(401, Some(&seen), &[found("qwen", 700, &[])], &none),
            None
        );
        // Without what the last scan saw (a restored agent), only a grown chain is followed.
        assert_eq!(next(401, None, &relaunched, &none), None);
        // The launcher itself goes on as the harness (its child exited, it exec'ed on).
        assert_eq!(
            next(401, Some(&seen), &[found("qwen", 400, &[])], &none),
            Some(400)
        );
    }

    #[test]
    fn every_harness_profile_has_a_process_rule() {
        let names: Vec<String> = rules().into_iter().map(|r| r.harness).collect();
        for name in [
            "claude", "codex", "gemini", "qwen", "grok", "copilot", "opencode",
        ] {
            assert!(names.iter().any(|n| n == name), "{name}: {names:?}");
        }
    }
}
