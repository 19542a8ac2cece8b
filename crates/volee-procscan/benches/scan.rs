//! One `/proc` scan plus matching with N extra processes on the machine.
//! `SCAN_PROCS=5000 cargo bench -p volee-procscan --bench scan`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::time::Instant;

use volee_procscan::{find_agents, ProcRoot, ProcessRule};

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .unwrap()
        .trim()
        .trim_end_matches(" kB")
        .trim()
        .parse()
        .unwrap()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let n: usize = std::env::var("SCAN_PROCS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000);
    let mut children: Vec<std::process::Child> = (0..n)
        .map(|_| {
            Command::new("sleep")
                .arg("300")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let rules = vec![ProcessRule {
        harness: "claude".into(),
        names: vec!["claude".into()],
        script_markers: vec!["@anthropic-ai/claude-code/".into()],
        helper_markers: vec![],
    }];
    let root = ProcRoot::default();
    // Warm up, then time.
    let total = root.scan().len();
    let mut ms = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let procs = root.scan_filtered(|s| volee_procscan::could_match(&rules, &s.comm));
        let _ = find_agents(&procs, &rules);
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let rss_before = rss_kib();
    for _ in 0..100 {
        let procs = root.scan_filtered(|s| volee_procscan::could_match(&rules, &s.comm));
        let _ = find_agents(&procs, &rules);
    }
    let rss_after = rss_kib();
    ms.sort_by(f64::total_cmp);
    for c in &mut children {
        let _ = c.kill();
    }
    for c in &mut children {
        let _ = c.wait();
    }
    println!(
        "scan + match of {total} processes: min {:.1} ms, p50 {:.1} ms, max {:.1} ms (20 runs); RSS {rss_before} KiB before and {rss_after} KiB after 100 more scans",
        ms[0],
        ms[ms.len() / 2],
        ms[ms.len() - 1]
    );
}
