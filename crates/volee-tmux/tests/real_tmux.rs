//! Checks against a real tmux: quoting, escaping and the control-mode parser on live output.
//!
//! Each test starts a private server on a socket in its own temporary directory (`-S`, `-f
//! /dev/null`) and kills it on drop, even when an assertion fails. Without tmux the tests print a
//! skip reason and pass, unless `CI` is set: CI must not silently skip them.

// clippy.toml allows unwrap only inside #[test] functions; the helpers here are test code too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use volee_tmux::control::{ControlEvent, ControlParser};
use volee_tmux::format::{command_line, fields_format, quote_arg, split_fields};
use volee_view::tmux_text;

/// A private tmux server, killed on drop.
struct Server {
    dir: tempfile::TempDir,
    sock: PathBuf,
}

impl Server {
    /// Start a server with one session `main` running `command` (the default shell if None).
    /// None when tmux is not installed and CI is not set.
    fn start(command: Option<&str>) -> Option<Server> {
        let installed = Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
        if !installed {
            assert!(
                std::env::var_os("CI").is_none(),
                "tmux is not installed, and CI is set: these tests must run in CI"
            );
            eprintln!("skipping: tmux is not installed (set CI to make this a failure)");
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("volee-tmux-")
            .tempdir()
            .unwrap();
        let sock = dir.path().join("sock");
        let server = Server { dir, sock };
        let mut args = vec!["new-session", "-d", "-s", "main", "-x", "100", "-y", "20"];
        args.extend(command);
        server.ok(&args);
        Some(server)
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new("tmux");
        // -u: never let tmux replace non-ASCII output with '_' because of the test's locale.
        // TMUX is removed so that running the tests inside tmux does not confuse the client;
        // SHELL is fixed because pane commands below use sh syntax (the server inherits it).
        cmd.arg("-u")
            .arg("-S")
            .arg(&self.sock)
            .args(["-f", "/dev/null"])
            .env_remove("TMUX")
            .env_remove("TMUX_PANE")
            .env("SHELL", "/bin/sh");
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command().args(args).output().unwrap()
    }

    /// Run a command that must succeed; returns its stdout.
    fn ok(&self, args: &[&str]) -> Vec<u8> {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "tmux {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// A child process (a blocking tmux command) that must not outlive the test.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A control-mode client: commands go to its stdin, a thread parses its stdout.
struct Control {
    child: Child,
    stdin: Option<ChildStdin>,
    events: Receiver<ControlEvent>,
}

impl Control {
    fn attach(server: &Server, session: &str) -> Control {
        let mut child = server
            .command()
            .args(["-C", "attach", "-t", session, "-f", "ignore-size"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let (tx, events) = mpsc::channel();
        std::thread::spawn(move || {
            let mut parser = ControlParser::new();
            // Small reads on purpose: exercises chunking across lines and escapes.
            let mut buf = [0u8; 97];
            while let Ok(n @ 1..) = stdout.read(&mut buf) {
                for event in parser.feed(&buf[..n]) {
                    if tx.send(event).is_err() {
                        return;
                    }
                }
            }
        });
        let stdin = child.stdin.take();
        Control {
            child,
            stdin,
            events,
        }
    }

    fn send(&mut self, args: &[&str]) {
        let line = command_line(args).unwrap();
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// Events until `want` matches one (returned last), or panic after `timeout`.
    fn until(
        &self,
        timeout: Duration,
        mut want: impl FnMut(&ControlEvent) -> bool,
    ) -> Vec<ControlEvent> {
        let deadline = Instant::now() + timeout;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok(event) => {
                    let done = want(&event);
                    seen.push(event);
                    if done {
                        return seen;
                    }
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                    panic!("no matching event within {timeout:?}; saw {seen:#?}")
                }
            }
        }
    }

    /// The next reply to a command sent on stdin, skipping notifications and other replies.
    fn reply(&self) -> (bool, Vec<Vec<u8>>) {
        let is_ours = |e: &ControlEvent| {
            matches!(
                e,
                ControlEvent::Reply {
                    from_client: true,
                    ..
                }
            )
        };
        match self.until(Duration::from_secs(3), is_ours).pop() {
            Some(ControlEvent::Reply { ok, lines, .. }) => (ok, lines),
            other => unreachable!("{other:?}"),
        }
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Strings that a naive quoting would mangle, expand or execute.
fn hostile(dir: &Path) -> Vec<String> {
    let pwned = dir.join("pwned").display().to_string();
    let mut v: Vec<String> = [
        "",
        " ",
        "plain",
        "two  words",
        "'",
        "\"",
        "it's \"quoted\"",
        "''",
        "\\",
        "trailing\\",
        "\\\\",
        "\\n",
        "\\012",
        "\\u00e9",
        "$HOME",
        "${HOME}",
        "$",
        "a$HOME",
        "~",
        "~root",
        "a~b",
        "x;y",
        ";",
        "a ; b",
        "\\;",
        "end;",
        "#{pane_id}",
        "#",
        "# comment",
        "#{",
        "{",
        "}",
        "{ a }",
        "}{",
        "%if",
        "%1",
        "%",
        "%%",
        "%endif",
        "FOO=bar",
        "-g",
        "--",
        "é ✓ 日本語 🚀",
        "\u{85}\u{9b}",
        "\x7f",
        "tab\there",
        "new\nline",
        "\x1b[31mred",
        "\x1f",
        "cr\rmid",
        "\x01\x02\x03",
        "'\"'\"",
        "\"\\$x\"",
        "a\n%endif",
        "end\n",
        "~/x\"~\"'~'",
        // Reply data lines that look like control-mode lines must stay data.
        "%end 1 2 1\n%output %1 \\007\n%error 1 2 1\n%begin 1 3 1",
    ]
    .map(String::from)
    .to_vec();
    v.push(format!("#[fg=red]x#(touch {pwned})"));
    v.push(format!("$(touch {pwned})`touch {pwned}`"));
    v
}

#[test]
fn quote_arg_round_trips_through_source_file() {
    let Some(tmux) = Server::start(None) else {
        return;
    };
    let values = hostile(tmux.dir.path());
    let mut script = String::new();
    for (i, v) in values.iter().enumerate() {
        let key = format!("@t{i}");
        script += &command_line(&["set-option", "-g", &key, v]).unwrap();
        script.push('\n');
    }
    let file = tmux.path("quoted.conf");
    std::fs::write(&file, &script).unwrap();
    tmux.ok(&["source-file", file.to_str().unwrap()]);
    for (i, v) in values.iter().enumerate() {
        let got = tmux.ok(&["show-option", "-gv", &format!("@t{i}")]);
        assert_eq!(
            String::from_utf8_lossy(&got),
            format!("{v}\n"),
            "value {v:?} quoted as {}",
            quote_arg(v).unwrap()
        );
    }
    assert!(!tmux.path("pwned").exists());
}

#[test]
fn quote_arg_round_trips_through_control_mode() {
    let Some(tmux) = Server::start(None) else {
        return;
    };
    let mut ctl = Control::attach(&tmux, "main");
    let values = hostile(tmux.dir.path());
    for (i, v) in values.iter().enumerate() {
        let key = format!("@c{i}");
        ctl.send(&["set-option", "-g", &key, v]);
        ctl.send(&["show-option", "-gv", &key]);
    }
    for v in &values {
        let (set_ok, set_lines) = ctl.reply();
        assert!(set_ok, "set {v:?}: {set_lines:?}");
        let (show_ok, lines) = ctl.reply();
        assert!(show_ok);
        // Reply data is raw, so a value with a newline comes back as several lines; the parser
        // also drops one trailing '\r' per line, which none of these values has before a '\n'.
        assert_eq!(lines.join(&b'\n'), v.as_bytes(), "value {v:?}");
    }
    assert!(!tmux.path("pwned").exists());
}

#[test]
fn escaped_text_is_literal_in_formats() {
    let Some(tmux) = Server::start(None) else {
        return;
    };
    let pwned = tmux.path("pwned-format");
    let raw = format!("#[fg=red]x#(touch {})#{{pane_id}} ✓", pwned.display());
    tmux.ok(&["set-option", "-g", "@volee-t", &tmux_text(&raw, 200)]);
    let got = tmux.ok(&["display-message", "-p", "#{E:@volee-t}"]);
    // E: expands the value as a format: jobs and variables stay literal. tmux keeps `##[`
    // (instead of `#[`) for its style renderer, which then draws a literal `#[`; the rendering
    // test below checks what a user actually sees.
    assert_eq!(
        String::from_utf8_lossy(&got),
        format!("{}\n", raw.replace("#[", "##["))
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(!pwned.exists(), "#() ran from an escaped value");
}

/// What a user sees: the status line and a menu drawn by a real client (inside a pane of a second
/// server, which gives it a terminal), compared as captured text.
#[test]
fn escaped_text_renders_literally_for_a_real_client() {
    let Some(inner) = Server::start(None) else {
        return;
    };
    let pwned = inner.path("pwned-status");
    let canary = inner.path("canary");
    let raw = format!("#[fg=red]x#(touch {})", pwned.display());
    let escaped = tmux_text(&raw, 200);
    inner.ok(&["set-option", "-g", "@volee-status", &escaped]);
    inner.ok(&["set-option", "-g", "status-right", "[#{@volee-status}]"]);
    inner.ok(&["set-option", "-g", "status-right-length", "200"]);
    let attach = format!(
        "env -u TMUX tmux -u -S {} attach -t main",
        inner.sock.display()
    );
    let Some(outer) = Server::start(Some(&attach)) else {
        return;
    };
    let screen =
        || String::from_utf8_lossy(&outer.ok(&["capture-pane", "-p", "-t", "main"])).into_owned();
    let wait_for = |needle: &str| {
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            let text = screen();
            if text.contains(needle) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "{needle:?} not shown; screen:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(30));
        }
    };
    wait_for(&format!("[{raw}]"));

    // Menu item names are expanded as formats *and* drawn with styles; unescaped, tmux 3.3a
    // applies the style and runs the #() job. The second item shows that this is real.
    let client = String::from_utf8(inner.ok(&["list-clients", "-F", "#{client_name}"])).unwrap();
    let unescaped = format!("#[fg=red]raw#(touch {})", canary.display());
    let _menu = KillOnDrop(
        inner
            .command()
            .args([
                "display-menu",
                "-c",
                client.trim(),
                "-x",
                "0",
                "-y",
                "0",
                "-T",
            ])
            .args([&escaped, &escaped, "a", "", &unescaped, "b", ""])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let shown = wait_for(&format!("{raw} (a)"));
    assert!(shown.contains(&format!("─{raw}─")), "menu title:\n{shown}");
    assert!(
        shown.contains("│ raw "),
        "unescaped item should lose its style text:\n{shown}"
    );
    let deadline = Instant::now() + Duration::from_secs(3);
    while !canary.exists() {
        assert!(
            Instant::now() < deadline,
            "unescaped #() never ran: did tmux change?"
        );
        std::thread::sleep(Duration::from_millis(30));
    }
    assert!(!pwned.exists(), "#() ran from escaped text");
}

#[test]
fn control_mode_capture_of_bell_title_and_reply() {
    // The pane waits until the control client is attached, so no output is missed.
    let script = r"tmux wait-for go; printf 'hi\a\033]2;my title\033\\'; exec sleep 30";
    let Some(tmux) = Server::start(Some(script)) else {
        return;
    };
    let pane = String::from_utf8(tmux.ok(&["list-panes", "-F", "#{pane_id}"])).unwrap();
    let pane = pane.trim().to_owned();
    let started = Instant::now();
    let mut ctl = Control::attach(&tmux, "main");
    // Under load tmux may run a command read from stdin before the attach has finished; output
    // printed then never reaches this client. Start the pane only once the client is attached.
    ctl.until(Duration::from_secs(3), |e| {
        matches!(e, ControlEvent::SessionChanged { .. })
    });
    ctl.send(&["wait-for", "-S", "go"]);
    // Replied to while the command runs, so before the pane can print anything.
    assert_eq!(ctl.reply(), (true, vec![]));
    let (mut bell, mut title, mut output) = (false, false, 0);
    ctl.until(Duration::from_secs(3), |e| {
        match e {
            ControlEvent::Output {
                pane: p,
                bytes,
                activity: true,
            } if *p == pane => output += bytes,
            ControlEvent::Bell { pane: p } if *p == pane => bell = true,
            ControlEvent::Title { pane: p, title: t } if *p == pane => {
                assert_eq!(t, "my title");
                title = true;
            }
            _ => {}
        }
        bell && title
    });
    // "hi" BEL ESC ]2; "my title" ESC \ at least (tmux may add its own output).
    assert!(output >= 17, "{output} bytes of output");

    let names = ["pane_id", "pane_title", "pane_pid"];
    ctl.send(&["list-panes", "-t", "main", "-F", &fields_format(&names)]);
    let (ok, lines) = ctl.reply();
    assert!(ok);
    let fields = split_fields(&lines[0]);
    assert_eq!(fields.len(), names.len(), "{fields:?}");
    assert_eq!(
        (fields[0].as_str(), fields[1].as_str()),
        (pane.as_str(), "my title")
    );
    assert!(fields[2].parse::<u32>().is_ok(), "{fields:?}");

    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn message_text_is_literal_in_display_message() {
    let Some(tmux) = Server::start(None) else {
        return;
    };
    let raw = "at %H:%M:%S %% #{pane_id} ✓";
    let got = tmux.ok(&[
        "display-message",
        "-p",
        &volee_view::tmux_message_text(raw, 200),
    ]);
    assert_eq!(String::from_utf8_lossy(&got), format!("{raw}\n"));
}
