use std::time::{Duration, Instant};

use volee_sandbox::{ExecRequest, Sandbox, TIMEOUT_MARKER, TRUNCATION_MARKER};

use crate::support::{docker, ok, run, TestSession};

#[tokio::test]
async fn stdout_stderr_and_exit_code_are_separate() {
    let Some(d) = docker("stdout_stderr_and_exit_code_are_separate").await else {
        return;
    };
    let s = TestSession::new("streams");
    let sb = Sandbox::start(&d, &s.config()).await.unwrap();
    let out = run(&sb, "echo to-out; echo to-err >&2; echo more-out; exit 3").await;
    assert_eq!(out.stdout, "to-out\nmore-out\n");
    assert_eq!(out.stderr, "to-err\n");
    assert_eq!(out.exit_code, Some(3));
    assert!(!out.timed_out && !out.success());
    let out = run(&sb, "true").await;
    assert_eq!(out.exit_code, Some(0));
    assert!(out.success());
    assert_eq!((out.stdout.as_str(), out.stderr.as_str()), ("", ""));
    // The command line goes to sh as one argument: quotes, pipes and variables work.
    assert_eq!(
        ok(&sb, "x='a b'; printf '%s|' \"$x\" | tr a-z A-Z").await,
        "A B|"
    );
    let mut req = ExecRequest::new("echo $VOLEE_X; pwd");
    req.env = vec![("VOLEE_X".into(), "42".into())];
    req.cwd = Some("/tmp".into());
    let out = sb.exec(&req).await.unwrap();
    assert_eq!(out.stdout, "42\n/tmp\n");
    sb.remove().await.unwrap();
}

#[tokio::test]
async fn a_timeout_kills_the_command_and_returns_promptly() {
    let Some(d) = docker("a_timeout_kills_the_command_and_returns_promptly").await else {
        return;
    };
    let s = TestSession::new("timeout");
    let sb = Sandbox::start(&d, &s.config()).await.unwrap();
    // The command itself, a child that outlives the shell, and a background child holding the
    // output open: all end within the limit plus the grace.
    for command in [
        "sleep 100",
        "sleep 100; echo never",
        "echo before; sleep 100 & sleep 100",
    ] {
        let started = Instant::now();
        let out = sb
            .exec(&ExecRequest::new(command).timeout(Duration::from_secs(1)))
            .await
            .unwrap();
        let took = started.elapsed();
        eprintln!("timeout 1 s, {command:?}: returned after {took:?}");
        assert!(took < Duration::from_secs(8), "{command:?} took {took:?}");
        assert!(out.timed_out, "{command:?}: {out:?}");
        assert_eq!(out.exit_code, Some(137), "{command:?}: {out:?}");
        assert!(!out.success());
        assert!(
            out.stderr.contains(TIMEOUT_MARKER),
            "{command:?}: {:?}",
            out.stderr
        );
        assert!(!out.stdout.contains("never"));
    }
    // Nothing of them is left running, and the sandbox still works.
    let ps = ok(&sb, "ps -o stat,args").await;
    assert!(!ps.contains("sleep 100"), "left running:\n{ps}");
    // Orphans are reaped by the container's main loop (within about a second).
    let mut zombies = String::new();
    for _ in 0..30 {
        let ps = ok(&sb, "ps -o stat,pid,args").await;
        zombies = ps
            .lines()
            .filter(|l| l.trim_start().starts_with('Z'))
            .collect::<Vec<_>>()
            .join("\n");
        if zombies.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(zombies.is_empty(), "zombies left:\n{zombies}");
    assert_eq!(ok(&sb, "echo alive").await, "alive");
    // A command that finishes in time is not a timeout.
    let out = sb
        .exec(&ExecRequest::new("sleep 0.2; echo done").timeout(Duration::from_secs(5)))
        .await
        .unwrap();
    assert!(!out.timed_out && out.success(), "{out:?}");
    sb.remove().await.unwrap();
}

#[tokio::test]
async fn output_beyond_the_limit_is_truncated_with_a_marker() {
    let Some(d) = docker("output_beyond_the_limit_is_truncated_with_a_marker").await else {
        return;
    };
    let s = TestSession::new("outlimit");
    let sb = Sandbox::start(&d, &s.config()).await.unwrap();
    let out = sb
        .exec(
            &ExecRequest::new(
                "echo FIRST; yes filler | head -c 1000000; echo; echo LAST; echo err-only >&2",
            )
            .max_output_bytes(1000),
        )
        .await
        .unwrap();
    assert_eq!(out.exit_code, Some(0));
    assert!(out.stdout_truncated && !out.stderr_truncated);
    assert_eq!(out.stdout_bytes, 6 + 1_000_000 + 1 + 5);
    assert!(out.stdout.starts_with("FIRST\n"));
    assert!(out.stdout.ends_with("LAST\n"));
    assert!(out.stdout.contains(TRUNCATION_MARKER), "{}", out.stdout);
    assert!(out.stdout.contains("bytes of stdout omitted"));
    assert!(out.stdout.len() < 1200, "{} bytes kept", out.stdout.len());
    assert_eq!(out.stderr, "err-only\n");
    sb.remove().await.unwrap();
}
