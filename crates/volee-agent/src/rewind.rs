//! What the pane and `volee agent --rewind` say about a rewind (issue 21): the context went back,
//! files and shell effects did not, and which calls since the checkpoint may have changed files.

use volee_store::{ChangedCall, RewindRecord};

/// At most this many calls are listed one per line; the rest are counted.
const LISTED_MAX: usize = 30;

/// The lines telling what a rewind of `session` did, plainly: what went back, what did not.
pub fn report_lines(session: &str, r: &RewindRecord) -> Vec<String> {
    let mut lines = vec![format!(
        "rewound {session} to checkpoint {} (transcript line {}): the context went from {} to {} messages; the scratchpad and todos are as they were then",
        r.checkpoint, r.checkpoint_seq, r.messages_before, r.messages_after
    )];
    lines.push(
        "the transcript keeps everything (a rewound event was added); token usage stays cumulative"
            .into(),
    );
    if r.changed_calls.is_empty() {
        lines.push(
            "files and shell effects are not undone; no write_file, edit_file or shell call ran since the checkpoint".into(),
        );
        return lines;
    }
    lines.push(format!(
        "files and shell effects are NOT undone: {} tool call{} since the checkpoint may have changed files:",
        r.changed_calls_total,
        if r.changed_calls_total == 1 { "" } else { "s" }
    ));
    for c in r.changed_calls.iter().take(LISTED_MAX) {
        lines.push(format!("  {}", call_line(c)));
    }
    let more = r.changed_calls_total.saturating_sub(LISTED_MAX as u64);
    if more > 0 {
        lines.push(format!(
            "  … and {more} more (volee agent --export {session} has them all)"
        ));
    }
    lines.push(
        "check them (e.g. git status, git diff) and undo by hand what should not stay".into(),
    );
    lines
}

/// One call: where it is, what it touched, and how sure that is.
fn call_line(c: &ChangedCall) -> String {
    let target = volee_view::text::plain_text(&c.target, 120);
    let how = match c.effect.as_str() {
        "possibly" => " (a shell command: it may have changed files)",
        "unknown" => " (its outcome is unknown: it was interrupted)",
        _ => "",
    };
    format!("#{} {} {target}{how}", c.seq, c.tool)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn the_stores_file_changing_tools_are_the_tools_that_need_an_approval() {
        let mut ours: Vec<&str> = crate::tools::NEEDS_APPROVAL.to_vec();
        ours.sort();
        assert_eq!(ours, volee_store::FILE_CHANGING_TOOLS);
    }

    #[test]
    fn the_report_says_files_are_not_undone_and_lists_the_calls() {
        let call = |seq, tool: &str, target: &str, effect: &str| ChangedCall {
            seq,
            tool: tool.into(),
            target: target.into(),
            effect: effect.into(),
        };
        let r = RewindRecord {
            checkpoint: "a".into(),
            checkpoint_seq: 4,
            checkpoint_bytes: 100,
            checkpoint_at_ms: 0,
            rewound_from_seq: 12,
            messages_before: 9,
            messages_after: 3,
            changed_calls: vec![
                call(6, "write_file", "f.txt", "changed"),
                call(9, "shell", "rm x", "possibly"),
            ],
            changed_calls_total: 2,
            forked_from: None,
        };
        let text = report_lines("s1", &r).join("\n");
        assert!(text.contains("NOT undone: 2 tool calls"), "{text}");
        assert!(text.contains("#6 write_file f.txt"), "{text}");
        assert!(text.contains("#9 shell rm x (a shell command"), "{text}");
        assert!(text.contains("from 9 to 3 messages"), "{text}");
    }
}
