//! What volee's benchmarks share: a number from the environment, percentiles of sorted samples,
//! a process's CPU time and memory (read by `procfs-core`'s parsers).

use procfs_core::FromRead;

/// `name` from the environment as a number, else `default`.
pub fn env_num<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The `p` percentile (0.0–1.0, nearest rank) of samples sorted ascending; NaN when empty.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// The samples sorted ascending.
pub fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

/// `min … p50 … p99 … max … ms (N runs)` of samples in milliseconds, with `decimals` places.
pub fn summary(samples: Vec<f64>, decimals: usize) -> String {
    let v = sorted(samples);
    if v.is_empty() {
        return "no runs".into();
    }
    format!(
        "min {:.d$}  p50 {:.d$}  p99 {:.d$}  max {:.d$} ms ({} runs)",
        v[0],
        percentile(&v, 0.5),
        percentile(&v, 0.99),
        v[v.len() - 1],
        v.len(),
        d = decimals
    )
}

/// Forks since boot, system-wide (`processes` in /proc/stat).
pub fn forks_since_boot() -> u64 {
    std::fs::read_to_string("/proc/stat")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("processes "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// utime + stime of a process, in clock ticks.
pub fn cpu_ticks(pid: i32) -> u64 {
    let stat = procfs_core::process::Stat::from_file(format!("/proc/{pid}/stat")).unwrap();
    stat.utime + stat.stime
}

/// A process's resident memory (`VmRSS`), in KiB.
pub fn rss_kib(pid: i32) -> u64 {
    procfs_core::process::Status::from_file(format!("/proc/{pid}/status"))
        .unwrap()
        .vmrss
        .unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_ranks() {
        let v = sorted(vec![5.0, 1.0, 3.0, 2.0, 4.0]);
        assert_eq!(v, vec![1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(percentile(&v, 0.5), 3.0);
        assert_eq!(percentile(&v, 0.99), 5.0);
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert!(percentile(&[], 0.5).is_nan());
        assert_eq!(
            summary(vec![2.0, 1.0, 3.0], 2),
            "min 1.00  p50 2.00  p99 3.00  max 3.00 ms (3 runs)"
        );
        assert_eq!(env_num("VOLEE_BENCH_SURELY_UNSET", 7u64), 7);
        let me = std::process::id() as i32;
        assert!(rss_kib(me) > 0);
        let before = cpu_ticks(me);
        let spin = std::time::Instant::now();
        while spin.elapsed() < std::time::Duration::from_millis(50) {
            std::hint::black_box(0u64);
        }
        assert!(cpu_ticks(me) >= before);
    }
}
