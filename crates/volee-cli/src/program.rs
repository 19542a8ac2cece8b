//! A harness's program as the caller would run it: found on the caller's PATH, and the version
//! it reports (which decides whether its measured screen rules apply).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use volee_harness::{Instrumentation, Profile};

use crate::error::{self, CliResult};

/// How long `PROGRAM --version` may take (Copilot unpacks itself on its first run).
const VERSION_WAIT: Duration = Duration::from_secs(10);

/// The profile's program: on the caller's PATH, or this very binary for volee's own agent
/// (which may not be on PATH).
pub fn locate(profile: &Profile) -> CliResult<PathBuf> {
    let own = (profile.instrumentation == Instrumentation::BuiltIn)
        .then(std::env::current_exe)
        .and_then(Result::ok);
    own.or_else(|| volee_os::program::find(profile.program))
        .ok_or_else(|| error::harness_not_installed(profile))
}

/// `PROGRAM --version`'s version line, bounded to 10 s; `home` as its HOME when given (a
/// throwaway one for `volee probe`). Its standard output's, else its standard error's (Pi 0.73.1
/// prints its version there). None when it prints no version number in time.
pub fn read_version(program: &Path, home: Option<&Path>) -> Option<String> {
    let mut cmd = Command::new(program);
    cmd.arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(home) = home {
        cmd.env("HOME", home);
    }
    let mut child = cmd.spawn().ok()?;
    let stdout = child.stdout.take()?;
    let stderr = child.stderr.take()?;
    // Read while it runs: a version banner longer than the pipe must not stall it.
    let read = |mut from: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = from.read_to_string(&mut text);
            text
        })
    };
    let out_reader = read(Box::new(stdout));
    let err_reader = read(Box::new(stderr));
    let deadline = Instant::now() + VERSION_WAIT;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let out = out_reader.join().ok()?;
    volee_harness::profile::version_line(&out)
        .or_else(|| volee_harness::profile::version_line(&err_reader.join().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn the_version_line_of_a_real_program() {
        let tmp = tempfile::tempdir().unwrap();
        let ok = script(tmp.path(), "ok", "echo; echo '2.1.332 (Claude Code)'");
        assert_eq!(
            read_version(&ok, None).as_deref(),
            Some("2.1.332 (Claude Code)")
        );
        let home = script(tmp.path(), "home", r#"echo "1.0.$(cat "$HOME/n")""#);
        std::fs::write(tmp.path().join("n"), "7").unwrap();
        assert_eq!(
            read_version(&home, Some(tmp.path())).as_deref(),
            Some("1.0.7")
        );
        // On standard error when standard output has none.
        let err = script(tmp.path(), "err", "echo 0.73.1 >&2");
        assert_eq!(read_version(&err, None).as_deref(), Some("0.73.1"));
        let banner = script(tmp.path(), "banner", "echo Welcome");
        assert_eq!(read_version(&banner, None), None);
        assert_eq!(read_version(&tmp.path().join("missing"), None), None);
    }

    #[test]
    fn a_missing_program_names_its_package() {
        let claude = volee_harness::profile("claude").unwrap();
        let found = locate(&claude);
        if volee_os::program::find("claude").is_none() {
            let e = found.unwrap_err();
            assert!(e.hints[0].contains("@anthropic-ai/claude-code"), "{e:?}");
        }
        let own = volee_harness::profile("volee").unwrap();
        assert_eq!(locate(&own).unwrap(), std::env::current_exe().unwrap());
    }
}
