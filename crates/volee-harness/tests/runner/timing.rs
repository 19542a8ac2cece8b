//! What one classification costs (printed, never asserted: CI machines vary).

use std::hint::black_box;
use std::time::Instant;

use crate::support::{all_rules, load_fixtures};

#[test]
fn cost_of_one_classification() {
    let rules = all_rules();
    let fixtures = load_fixtures();
    let sets: Vec<_> = fixtures
        .iter()
        .map(|f| (&rules[f.harness.as_str()], f))
        .collect();
    const ROUNDS: usize = 1000;
    // Warm up.
    for (set, f) in &sets {
        black_box(set.classify(&f.screen, &f.title));
    }
    let start = Instant::now();
    for _ in 0..ROUNDS {
        for (set, f) in &sets {
            black_box(set.classify(black_box(&f.screen), black_box(&f.title)));
        }
    }
    let elapsed = start.elapsed();
    let n = (ROUNDS * sets.len()) as f64;
    let bytes: usize = fixtures.iter().map(|f| f.screen.len()).sum();
    println!(
        "classify: {:.0} ns per screen over {} fixtures x {ROUNDS} (mean screen {} bytes, {} build)",
        elapsed.as_nanos() as f64 / n,
        sets.len(),
        bytes / fixtures.len().max(1),
        if cfg!(debug_assertions) { "debug" } else { "release" },
    );
}

#[test]
#[ignore = "diagnostic: per-rule cost"]
fn cost_per_rule() {
    use volee_harness::RuleSet;
    let rules = all_rules();
    let fixtures = load_fixtures();
    for (h, set) in &rules {
        for rule in set.rules() {
            let text = format!(
                "[[rule]]\nid='x'\nregion='{}'\n{}match='''{}'''\nstate='idle'\n",
                match rule.region {
                    volee_harness::Region::LastLine => "last_line",
                    volee_harness::Region::LastLines(_) => "last_lines",
                    volee_harness::Region::Screen => "screen",
                    volee_harness::Region::Title => "title",
                },
                match rule.region {
                    volee_harness::Region::LastLines(n) => format!("lines={n}\n"),
                    _ => String::new(),
                },
                rule.pattern()
            );
            let one = RuleSet::from_toml(&text, "x").unwrap();
            let start = Instant::now();
            for _ in 0..200 {
                for f in &fixtures {
                    black_box(one.classify(&f.screen, &f.title));
                }
            }
            println!(
                "{h} {} {:.0} ns",
                rule.id,
                start.elapsed().as_nanos() as f64 / (200.0 * fixtures.len() as f64)
            );
        }
    }
}
