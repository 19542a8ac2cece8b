use volee_sandbox::{MountTarget, Sandbox, LABEL_SANDBOX, LABEL_SESSION};

use crate::support::{docker, nix_is_root, ok, owner_uid, run, TestSession};

#[tokio::test]
async fn the_container_is_locked_down() {
    let Some(d) = docker("the_container_is_locked_down").await else {
        return;
    };
    let s = TestSession::new("lockdown");
    let sb = Sandbox::start(&d, &s.config()).await.unwrap();
    let dir = s.dir();
    let dir_text = dir.to_string_lossy().into_owned();

    // No network: only the loopback interface, no routes.
    assert_eq!(ok(&sb, "ls /sys/class/net").await, "lo");
    let routes = ok(&sb, "cat /proc/net/route | tail -n +2").await;
    assert_eq!(routes, "", "routes: {routes}");

    // Not root: the project directory's owner (uid 1000 here), never 0.
    let uid = ok(&sb, "id -u").await;
    assert_ne!(uid, "0");
    if nix_is_root() {
        assert_eq!(uid, "1000");
        assert_eq!(sb.user(), "1000:1000");
    }

    // No capabilities at all, and no way to gain any.
    let status = ok(
        &sb,
        "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs)' /proc/self/status",
    )
    .await;
    for cap in ["CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert!(
            status.contains(&format!("{cap}:\t0000000000000000")),
            "{cap} not empty:\n{status}"
        );
    }
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");

    // Read-only root, writable /tmp.
    let out = run(&sb, "touch /volee-test").await;
    assert_ne!(out.exit_code, Some(0));
    assert!(
        out.stderr.contains("Read-only file system"),
        "{}",
        out.stderr
    );
    let out = run(&sb, "touch /etc/passwd").await;
    assert_ne!(out.exit_code, Some(0));
    assert_eq!(
        ok(&sb, "echo hi > /tmp/x && cat /tmp/x && rm /tmp/x").await,
        "hi"
    );

    // The project directory: the working directory, at its own path, writable; files land on
    // the host with the sandbox user as owner.
    assert_eq!(sb.workdir(), dir.as_path());
    assert_eq!(ok(&sb, "pwd").await, dir_text);
    ok(&sb, "echo made-inside > made.txt").await;
    let made = dir.join("made.txt");
    assert_eq!(std::fs::read_to_string(&made).unwrap(), "made-inside\n");
    assert_eq!(owner_uid(&made).to_string(), uid);
    std::fs::write(dir.join("from-host.txt"), "host").unwrap();
    assert_eq!(ok(&sb, "cat from-host.txt").await, "host");

    // Only the project directory: the host's other directories are not there, and the only bind
    // mount of a host directory is the project.
    for host_path in [
        "/work",
        "/home",
        "/opt",
        "/var/run/docker.sock",
        "/usr/lib",
        "/usr/local/bin",
    ] {
        if std::path::Path::new(host_path).exists() && !dir.starts_with(host_path) {
            let out = run(&sb, &format!("test -e {host_path}")).await;
            assert_ne!(
                out.exit_code,
                Some(0),
                "{host_path} is visible in the sandbox"
            );
        }
    }
    let parent = dir.parent().unwrap().to_string_lossy().into_owned();
    let siblings = ok(&sb, &format!("ls -A {parent}")).await;
    assert_eq!(
        siblings,
        dir.file_name().unwrap().to_string_lossy(),
        "siblings of the project: {siblings}"
    );
    let mounts = ok(&sb, "cat /proc/self/mountinfo").await;
    let project_mounts: Vec<&str> = mounts
        .lines()
        .filter(|l| l.split(' ').nth(4) == Some(dir_text.as_str()))
        .collect();
    assert_eq!(project_mounts.len(), 1, "{mounts}");
    assert!(project_mounts[0].contains(" rw"), "{}", project_mounts[0]);

    // Limits as Docker was told them.
    let info = d.inspect_container(sb.id(), None).await.unwrap();
    let hc = info.host_config.unwrap();
    assert_eq!(hc.network_mode.as_deref(), Some("none"));
    assert_eq!(hc.readonly_rootfs, Some(true));
    assert_eq!(hc.cap_drop, Some(vec!["ALL".to_string()]));
    assert_eq!(
        hc.security_opt,
        Some(vec!["no-new-privileges:true".to_string()])
    );
    assert_eq!(hc.pids_limit, Some(64));
    assert_eq!(hc.memory, Some(256 << 20));
    assert_eq!(hc.memory_swap, Some(256 << 20));
    assert_eq!(hc.nano_cpus, Some(1_000_000_000));
    assert_eq!(hc.privileged, Some(false));
    let labels = info.config.unwrap().labels.unwrap();
    assert_eq!(labels.get(LABEL_SANDBOX).map(String::as_str), Some("1"));
    assert_eq!(labels.get(LABEL_SESSION), Some(&s.id));

    // …and as the kernel enforces them (cgroup v1 or v2 files, whichever the host has).
    let pids_max = ok(
        &sb,
        "cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max",
    )
    .await;
    assert_eq!(pids_max, "64");
    let mem = ok(&sb, "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max").await;
    assert_eq!(mem, (256u64 << 20).to_string());

    sb.remove().await.unwrap();
}

#[tokio::test]
async fn the_pids_limit_stops_a_fork_flood() {
    let Some(d) = docker("the_pids_limit_stops_a_fork_flood").await else {
        return;
    };
    let s = TestSession::new("pids");
    let mut config = s.config();
    config.pids_limit = 20;
    let sb = Sandbox::start(&d, &config).await.unwrap();
    let out = run(
        &sb,
        "i=0; while [ $i -lt 40 ]; do sleep 30 & i=$((i+1)); done; echo started",
    )
    .await;
    assert!(
        out.stderr.to_lowercase().contains("fork")
            || out.stderr.contains("Resource temporarily unavailable"),
        "40 processes under a limit of 20 did not fail: {out:?}"
    );
    sb.remove().await.unwrap();
}

#[tokio::test]
async fn a_root_owned_project_runs_as_nobody_and_a_fixed_mount_works() {
    let Some(d) = docker("a_root_owned_project_runs_as_nobody_and_a_fixed_mount_works").await
    else {
        return;
    };
    let s = TestSession::new("nobody");
    if nix_is_root() {
        std::os::unix::fs::chown(s.project.path(), Some(0), Some(0)).unwrap();
    }
    std::fs::write(s.project.path().join("readme"), "hello").unwrap();
    let mut config = s.config();
    config.mount = MountTarget::At("/work".into());
    let sb = Sandbox::start(&d, &config).await.unwrap();
    assert_eq!(ok(&sb, "pwd").await, "/work");
    assert_eq!(ok(&sb, "cat /work/readme").await, "hello");
    if nix_is_root() {
        assert_eq!(ok(&sb, "id -u").await, "65534");
        // Root's 0755 directory is not writable for nobody.
        assert_ne!(run(&sb, "touch /work/x").await.exit_code, Some(0));
    }
    sb.remove().await.unwrap();
}
