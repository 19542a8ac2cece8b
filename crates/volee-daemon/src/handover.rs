//! The environment handover between the daemon and a pane's first process, `volee pane-exec
//! ENV_FILE -- COMMAND…` (docs/adr/0002): the daemon writes `ENV_FILE` once the agent is
//! recorded, and `pane-exec` execs the command with it. A daemon that stops in between leaves the
//! pane waiting for a file nobody will write; the next daemon finds such panes here and tells
//! them at once (the [`CANCELLED`] content) instead of letting them wait for their timeout.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What the daemon writes to `ENV_FILE` to say the launch will not be finished. An environment
/// file starts with the working directory, always absolute, so it never starts with a NUL.
pub const CANCELLED: &[u8] = b"\0volee: launch cancelled\0";

/// A `volee pane-exec` process of `uid` waiting for an environment file in `launch_dir`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitingPane {
    pub pid: u32,
    /// The agent id the file is named after (`ID.env`).
    pub agent: String,
    pub env_file: PathBuf,
}

/// The `pane-exec` processes of `uid` under `proc_root` (normally `/proc`) whose environment file
/// is in `launch_dir` and does not exist (a written file is about to be taken). Only the user's
/// own processes count, and only files named like an agent id, directly in `launch_dir`.
pub fn waiting_panes(proc_root: &Path, launch_dir: &Path, uid: u32) -> Vec<WaitingPane> {
    let Ok(entries) = std::fs::read_dir(proc_root) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if !std::fs::metadata(entry.path()).is_ok_and(|m| m.uid() == uid) {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
        let Some(at) = args.iter().position(|a| *a == b"pane-exec") else {
            continue;
        };
        let Some(file) = args
            .get(at + 1)
            .and_then(|a| std::str::from_utf8(a).ok())
            .map(PathBuf::from)
        else {
            continue;
        };
        if file.parent() != Some(launch_dir) {
            continue;
        }
        let Some(agent) = file
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".env"))
            .filter(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric()))
            .map(str::to_string)
        else {
            continue;
        };
        if std::fs::symlink_metadata(&file).is_ok() {
            continue;
        }
        found.push(WaitingPane {
            pid,
            agent,
            env_file: file,
        });
    }
    found.sort_by_key(|w| w.pid);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc_entry(root: &Path, pid: u32, argv: &[&str]) {
        let dir = root.join(pid.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        let mut bytes = argv.join("\0").into_bytes();
        bytes.push(0);
        std::fs::write(dir.join("cmdline"), bytes).unwrap();
    }

    #[test]
    fn only_panes_still_waiting_for_a_file_of_ours_are_found() {
        let tmp = tempfile::tempdir().unwrap();
        let proc_root = tmp.path().join("proc");
        let launch = tmp.path().join("run/launch");
        std::fs::create_dir_all(&launch).unwrap();
        let file = |id: &str| launch.join(format!("{id}.env")).display().to_string();
        let uid = nix::unistd::getuid().as_raw();
        proc_entry(
            &proc_root,
            10,
            &["/bin/volee", "pane-exec", &file("ab12"), "--", "sh"],
        );
        // Written already: pane-exec is about to take it.
        std::fs::write(launch.join("cd34.env"), b"/w\0").unwrap();
        proc_entry(
            &proc_root,
            11,
            &["/bin/volee", "pane-exec", &file("cd34"), "--", "sh"],
        );
        // Another directory, a path trick, a name that is no id, not pane-exec at all.
        proc_entry(
            &proc_root,
            12,
            &["volee", "pane-exec", "/elsewhere/ef56.env", "--", "x"],
        );
        let trick = format!("{}/../ef56.env", launch.display());
        proc_entry(&proc_root, 13, &["volee", "pane-exec", &trick, "--", "x"]);
        proc_entry(
            &proc_root,
            14,
            &["volee", "pane-exec", &file("a.b"), "--", "x"],
        );
        proc_entry(&proc_root, 15, &["sh", "-c", &file("ab99")]);
        std::fs::create_dir_all(proc_root.join("self")).unwrap();
        let found = waiting_panes(&proc_root, &launch, uid);
        assert_eq!(
            found,
            vec![WaitingPane {
                pid: 10,
                agent: "ab12".into(),
                env_file: launch.join("ab12.env"),
            }]
        );
        // Another user's processes never count.
        assert!(waiting_panes(&proc_root, &launch, uid + 1).is_empty());
    }
}
