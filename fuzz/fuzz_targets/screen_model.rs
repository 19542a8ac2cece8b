//! Fuzz the screen model: `cargo +nightly fuzz run screen_model` (from `fuzz/`), with inputs up
//! to 2 MB (`-max_len=2097152`).
//!
//! Any bytes, escape sequences and resizes never panic, the text read stays within the model's
//! size, and a pane modelled through the control-mode parser shows what a model fed directly
//! does. The first two bytes give the starting size; every 0xFF byte resizes to the next two.
#![no_main]

use libfuzzer_sys::fuzz_target;
use volee_tmux::control::ControlParser;
use volee_tmux::screen::{PaneGeometry, PaneScreen};

fuzz_target!(|data: &[u8]| {
    let [rows, cols, data @ ..] = data else {
        return;
    };
    let (rows, cols) = (u16::from(*rows), u16::from(*cols));
    let mut direct = PaneScreen::new(rows, cols);
    let mut pieces = data.split(|&b| b == 0xFF);
    if let Some(first) = pieces.next() {
        direct.feed(first);
    }
    for piece in pieces {
        if let [r, c, rest @ ..] = piece {
            direct.resize(u16::from(*r), u16::from(*c));
            direct.feed(rest);
        }
    }
    let (r, c) = direct.size();
    let text = direct.text();
    assert!(text.lines().count() <= usize::from(r) * 2 + 1);
    assert!(text
        .lines()
        .all(|l| l.chars().count() <= usize::from(c) * usize::from(r)));

    // Through the parser, as `%output` lines (tmux escapes controls and '\' as octal).
    let mut parser = ControlParser::new();
    parser.model_pane("%1", true);
    let geometry = PaneGeometry {
        cols,
        rows,
        cursor_x: 0,
        cursor_y: 0,
        alternate: false,
    };
    parser.seed("%1", PaneScreen::seeded(geometry, None, &[]));
    let mut direct = PaneScreen::seeded(geometry, None, &[]);
    // Lines well under the parser's cut, a sequence split across them as tmux splits them.
    for chunk in data.chunks(1000) {
        let mut line = b"%output %1 ".to_vec();
        for &b in chunk {
            if b < 0x20 || b == b'\\' {
                line.extend_from_slice(format!("\\{b:03o}").as_bytes());
            } else {
                line.push(b);
            }
        }
        line.push(b'\n');
        parser.feed(&line);
    }
    direct.feed(data);
    assert_eq!(
        parser.screen("%1").map(PaneScreen::text),
        Some(direct.text())
    );
});
