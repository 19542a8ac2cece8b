//! What parsing one process's files costs, against what `procfs-core` would cost where volee
//! keeps its own parser (the reasons in `parse.rs`):
//! `cargo bench -p volee-procscan --bench parse`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::io::Read;
use std::time::Instant;

use procfs_core::FromRead;

/// Best of five rounds of `n` calls, in ns a call.
fn time(name: &str, n: u32, mut f: impl FnMut()) {
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..n {
            f();
        }
        best = best.min(t.elapsed().as_secs_f64() * 1e9 / f64::from(n));
    }
    println!("{name}: {best:.0} ns a call");
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let stat = std::fs::read("/proc/self/stat").unwrap();
    let status = std::fs::read("/proc/self/status").unwrap();
    println!(
        "/proc/self/stat {} bytes, /proc/self/status {} bytes",
        stat.len(),
        status.len()
    );
    time("parse_stat (procfs-core, shape checked)", 200_000, || {
        black_box(volee_procscan::parse_stat(black_box(&stat)));
    });
    time("parse_status_owner (ours)", 200_000, || {
        black_box(volee_procscan::parse_status_owner(black_box(&status)));
    });
    time("procfs-core Status::from_read", 50_000, || {
        black_box(procfs_core::process::Status::from_read(black_box(&status[..])).ok());
    });
    let mut buf = vec![0u8; 4096];
    time("open + one read of /proc/self/stat", 50_000, || {
        let mut f = std::fs::File::open("/proc/self/stat").unwrap();
        black_box(f.read(&mut buf).unwrap());
    });
    // Where procfs-core's Status refuses what ours reads.
    let mut raw_name = status.clone();
    let at = raw_name.iter().position(|&b| b == b'\t').unwrap() + 1;
    raw_name[at] = 0xff;
    let partial = b"Name:\tclaude\nUid:\t1000\t1000\t1000\t1000\n";
    for (what, bytes) in [
        ("a Name with byte 0xff", &raw_name[..]),
        ("Name and Uid only", &partial[..]),
    ] {
        println!(
            "status with {what}: ours {:?}, procfs-core {}",
            volee_procscan::parse_status_owner(bytes).map(|o| (o.real, o.effective)),
            match procfs_core::process::Status::from_read(bytes) {
                Ok(s) => format!("Ok({}, {})", s.ruid, s.euid),
                Err(e) => format!("Err({})", e.to_string().lines().last().unwrap_or("")),
            }
        );
    }
}
