//! No rule panics or stalls on any input.

use crate::support::{all_rules, load_fixtures};

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

const PIECES: &[&str] = &[
    "\n",
    "\r\n",
    " ",
    "  ",
    "─",
    "╰",
    "╯",
    "│",
    "❯ ",
    "› ",
    "> ",
    "●",
    "✕ ",
    "⠋",
    "✳\u{FE0E} ",
    "◐",
    "⚠ Action Required - ",
    "[ ! ] Action Required | ",
    " | codex",
    " - grok",
    "✋  ",
    "Do you want to proceed?",
    "1. Yes",
    "Esc to cancel",
    "esc to interrupt",
    "esc to cancel",
    "[stop]",
    "? for shortcuts",
    "Press enter to continue",
    "#[fg=red]",
    "#{pane_title}",
    "\u{0}",
    "\u{1b}[31m",
    "\u{7}",
    "\u{200b}",
    "\u{202e}",
    "é",
    "\u{301}",
    "𝓧",
    "[API Error: ",
    "(",
    "Waiting for user confirmation...",
    "y/n",
    "\t",
];

#[test]
fn random_and_hostile_screens_never_panic() {
    let rules = all_rules();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for round in 0..3000 {
        let len = (rng.next() % 200) as usize;
        let mut screen = String::new();
        for _ in 0..len {
            let r = rng.next();
            if r % 5 == 0 {
                // Any scalar value, including controls and unassigned code points.
                if let Some(c) = char::from_u32((r >> 8) as u32 % 0x11_0000) {
                    screen.push(c);
                }
            } else {
                screen.push_str(PIECES[(r >> 8) as usize % PIECES.len()]);
            }
        }
        let title: String = screen.chars().rev().take(round % 90).collect();
        for set in rules.values() {
            let first = set.classify(&screen, &title);
            let all = set.matches(&screen, &title);
            assert_eq!(first, all.first().cloned());
            if let Some(m) = first {
                assert!(m.text.chars().count() <= 200);
            }
        }
    }
}

#[test]
fn huge_and_degenerate_screens_are_fine() {
    let rules = all_rules();
    let long_line = "x".repeat(1 << 20);
    let many_lines = "line\n".repeat(100_000);
    let blanks = " \n".repeat(50_000);
    let fixtures = load_fixtures();
    let mixed = fixtures
        .iter()
        .map(|f| f.screen.as_str())
        .collect::<Vec<_>>()
        .join("");
    for screen in [
        "",
        "\n",
        "\n\n\n",
        " ",
        &long_line,
        &many_lines,
        &blanks,
        &mixed,
    ] {
        for set in rules.values() {
            let _ = set.classify(screen, screen);
        }
    }
}
