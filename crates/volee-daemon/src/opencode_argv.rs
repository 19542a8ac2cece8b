//! OpenCode's command line, as the daemon reads it (measured on 1.18.33, `opencode --help`): the
//! loopback port of its own HTTP server (the `listing` source, `volee_listing::opencode`), the
//! first prompt of a resumed session, and which `opencode` processes are no agents.

/// Non-TUI subcommands of `opencode` (`opencode --help`, 1.18.33): never an agent in a pane.
const NOT_AGENT_SUBCOMMANDS: &[&str] = &[
    "completion",
    "acp",
    "mcp",
    "debug",
    "providers",
    "auth",
    "agent",
    "upgrade",
    "uninstall",
    "serve",
    "web",
    "models",
    "stats",
    "export",
    "import",
    "github",
    "session",
    "plugin",
    "plug",
    "db",
];

/// OpenCode's flags that take a value (`opencode --help`, 1.18.33): their values are skipped
/// when looking for another flag (a prompt may read `--port 1`).
const VALUE_FLAGS: &[&str] = &[
    "--prompt",
    "--port",
    "--hostname",
    "-m",
    "--model",
    "-s",
    "--session",
    "--agent",
    "--log-level",
    "--mdns-domain",
    "--cors",
    "--replay-limit",
];

/// The value of `--name V` / `--name=V` in `args`.
fn flag_value<'a>(args: &'a [String], names: &[&str]) -> Option<&'a str> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            break;
        }
        for n in names {
            if a == n {
                return it.next().map(String::as_str);
            }
            if let Some(v) = a.strip_prefix(n).and_then(|r| r.strip_prefix('=')) {
                return Some(v);
            }
        }
        if VALUE_FLAGS.contains(&a.as_str()) {
            it.next();
        }
    }
    None
}

/// Is the boolean flag `name` among `args` (values of other flags skipped)?
fn has_flag(args: &[String], names: &[&str]) -> bool {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            break;
        }
        if names.contains(&a.as_str()) {
            return true;
        }
        if VALUE_FLAGS.contains(&a.as_str()) {
            it.next();
        }
    }
    false
}

/// The loopback port of an OpenCode agent's server, read from its command line (`--port P`,
/// with no `--hostname` or a loopback/any-address one). None for another harness, no port, port
/// 0 (a random one nobody can know), or a server bound elsewhere (volee talks to loopback only).
pub fn server_port(harness: &str, command: &[String]) -> Option<u16> {
    if harness != "opencode" {
        return None;
    }
    let args = command.get(1..)?;
    let port: u16 = flag_value(args, &["--port"])?.parse().ok()?;
    let loopback = match flag_value(args, &["--hostname"]) {
        None => true,
        Some(h) => matches!(
            h,
            "127.0.0.1" | "localhost" | "0.0.0.0" | "::" | "::1" | "[::1]"
        ),
    };
    (port != 0 && loopback).then_some(port)
}

/// The first prompt of a resumed session (`--prompt` with `-s`/`--session`/`-c`/`--continue`),
/// which OpenCode 1.18.33 ignores: volee hands it to the TUI through the server.
pub fn resume_prompt(command: &[String]) -> Option<String> {
    let args = command.get(1..)?;
    let resumed =
        flag_value(args, &["-s", "--session"]).is_some() || has_flag(args, &["-c", "--continue"]);
    let prompt = flag_value(args, &["--prompt"])?;
    (resumed && !prompt.is_empty()).then(|| prompt.to_string())
}

/// A found `opencode` process that is no agent: a child of one (every process an OpenCode spawns
/// carries `OPENCODE_PID`, measured) or a non-TUI subcommand (`opencode serve`, `opencode mcp …`).
pub fn not_an_agent(harness: &str, argv: &[String], env: &[(String, String)]) -> bool {
    harness == "opencode"
        && (env.iter().any(|(k, _)| k == "OPENCODE_PID")
            || argv
                .get(1)
                .is_some_and(|a| NOT_AGENT_SUBCOMMANDS.contains(&a.as_str())))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn ports_come_from_the_command_line_and_only_for_loopback() {
        let c = args(&[
            "/x/opencode",
            "--port",
            "4100",
            "--hostname",
            "127.0.0.1",
            "--prompt",
            "hi",
        ]);
        assert_eq!(server_port("opencode", &c), Some(4100));
        assert_eq!(
            server_port("opencode", &args(&["opencode", "--port=4101"])),
            Some(4101)
        );
        assert_eq!(server_port("codex", &c), None);
        assert_eq!(server_port("opencode", &args(&["opencode"])), None);
        assert_eq!(
            server_port("opencode", &args(&["opencode", "--port", "0"])),
            None
        );
        assert_eq!(
            server_port("opencode", &args(&["opencode", "--port", "x"])),
            None
        );
        assert_eq!(
            server_port(
                "opencode",
                &args(&["opencode", "--port", "9", "--hostname", "10.0.0.2"])
            ),
            None
        );
        assert_eq!(
            server_port(
                "opencode",
                &args(&["opencode", "--hostname=0.0.0.0", "--port", "9"])
            ),
            Some(9)
        );
        // A prompt that reads like a flag is a value, not a flag.
        assert_eq!(
            server_port(
                "opencode",
                &args(&["opencode", "--prompt", "--port", "--port", "7"])
            ),
            Some(7)
        );
    }

    #[test]
    fn a_resumed_sessions_prompt_is_handed_over() {
        let c = args(&[
            "opencode", "-s", "ses_1", "--port", "1", "--prompt", "go on",
        ]);
        assert_eq!(resume_prompt(&c).as_deref(), Some("go on"));
        assert_eq!(resume_prompt(&args(&["opencode", "--prompt", "new"])), None);
        assert_eq!(resume_prompt(&args(&["opencode", "--prompt", "-c"])), None);
        assert_eq!(
            resume_prompt(&args(&["opencode", "-c", "--prompt", ""])),
            None
        );
        assert_eq!(
            resume_prompt(&args(&["opencode", "--session=ses_1", "--prompt=x"])).as_deref(),
            Some("x")
        );
    }

    #[test]
    fn children_and_subcommands_are_no_agents() {
        let env = vec![("OPENCODE_PID".to_string(), "42".to_string())];
        assert!(not_an_agent("opencode", &args(&["opencode"]), &env));
        assert!(not_an_agent("opencode", &args(&["opencode", "serve"]), &[]));
        assert!(!not_an_agent(
            "opencode",
            &args(&["opencode", "--prompt", "serve"]),
            &[]
        ));
        assert!(!not_an_agent(
            "opencode",
            &args(&["opencode", "/w/serve"]),
            &[]
        ));
        assert!(!not_an_agent("claude", &args(&["claude"]), &env));
    }
}
