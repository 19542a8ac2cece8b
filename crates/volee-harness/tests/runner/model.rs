//! The fixtures through the screen model: drawn into a `volee_tmux::screen::PaneScreen` the way a
//! program prints them (lines, carriage return and line feed), at the fixture's own size, then read
//! back as the daemon reads a modelled pane — the rules decide the same. The fixtures are
//! `capture-pane` text; no raw output bytes were recorded for them.

use volee_tmux::screen::PaneScreen;

use crate::support::{all_rules, load_fixtures};

#[test]
fn every_fixture_read_through_the_screen_model_classifies_the_same() {
    let rules = all_rules();
    let mut failures = Vec::new();
    let fixtures = load_fixtures();
    for f in &fixtures {
        let set = &rules[f.harness.as_str()];
        let lines: Vec<&str> = f.screen.lines().collect();
        let cols = lines
            .iter()
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(1)
            .clamp(20, 1000);
        let rows = lines.len().clamp(1, 500);
        let mut model = PaneScreen::new(rows as u16, cols as u16);
        model.feed(lines.join("\r\n").as_bytes());
        let direct = set.classify(&f.screen, &f.title);
        let through = set.classify(&model.text(), &f.title);
        let key =
            |m: &Option<volee_harness::RuleMatch>| m.as_ref().map(|m| (m.state, m.rule.clone()));
        if key(&direct) != key(&through) {
            failures.push(format!(
                "{}: {:?} directly, {:?} through the model",
                f.file,
                key(&direct),
                key(&through)
            ));
        }
    }
    println!(
        "screen model: {} fixtures classified the same through the model",
        fixtures.len() - failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
