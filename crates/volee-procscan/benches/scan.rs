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
    let spawned = Instant::now();
    let rules = vec![ProcessRule {
        harness: "claude".into(),
        names: vec!["claude".into()],
        script_markers: vec!["@anthropic-ai/claude-code/".into()],
        helper_markers: vec![],
    }];
    let root = ProcRoot::default();
    // Agents are the user's own processes: this process's owner.
    let uid = root.owner(std::process::id()).map(|o| o.real).unwrap_or(0);
    // Warm up, then time.
    let total = root.scan().len();
    let mut ms = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let procs = root.scan_filtered(|s| volee_procscan::could_match(&rules, &s.comm));
        let _ = find_agents(&procs, &rules, uid);
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    // The daemon's repeated scans: a Scanner re-reads new, young and candidate processes and
    // old ones in turn.
    let mut scanner = volee_procscan::Scanner::new(ProcRoot::default());
    let _ = scanner.scan(|s| volee_procscan::could_match(&rules, &s.comm));
    // The spawned processes must be old for the steady state (YOUNG_SECS).
    let young = std::time::Duration::from_secs(volee_procscan::YOUNG_SECS + 1);
    std::thread::sleep(young.saturating_sub(spawned.elapsed()));
    let mut steady = Vec::new();
    let mut reads = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let procs = scanner.scan(|s| volee_procscan::could_match(&rules, &s.comm));
        let _ = find_agents(&procs, &rules, uid);
        steady.push(t.elapsed().as_secs_f64() * 1000.0);
        reads.push(scanner.last_stats().read);
    }
    let rss_before = rss_kib();
    for _ in 0..100 {
        let procs = root.scan_filtered(|s| volee_procscan::could_match(&rules, &s.comm));
        let _ = find_agents(&procs, &rules, uid);
        let procs = scanner.scan(|s| volee_procscan::could_match(&rules, &s.comm));
        let _ = find_agents(&procs, &rules, uid);
    }
    let rss_after = rss_kib();
    ms.sort_by(f64::total_cmp);
    steady.sort_by(f64::total_cmp);
    reads.sort_unstable();
    for c in &mut children {
        let _ = c.kill();
    }
    for c in &mut children {
        let _ = c.wait();
    }
    println!(
        "full scan + match of {total} processes: min {:.1} ms, p50 {:.1} ms, max {:.1} ms (20 runs)",
        ms[0],
        ms[ms.len() / 2],
        ms[ms.len() - 1]
    );
    println!(
        "daemon's repeated scan + match (Scanner): min {:.1} ms, p50 {:.1} ms, max {:.1} ms (20 runs), stat files read per scan p50 {}",
        steady[0],
        steady[steady.len() / 2],
        steady[steady.len() - 1],
        reads[reads.len() / 2]
    );
    println!("RSS {rss_before} KiB before and {rss_after} KiB after 100 more scans of each kind");
}
