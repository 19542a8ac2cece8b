//! Making agent-controlled text safe to show, and small time and width helpers.
//!
//! Names, titles and evidence come from agents and may contain anything: terminal escape
//! sequences, newlines, or tmux format syntax such as `#[fg=red]` and `#(cmd)`.

use std::time::UNIX_EPOCH;

/// `raw` made safe inside any tmux format (status line, menu item, popup title): control
/// characters stripped as by [`plain_text`], at most `max_chars` characters, then `#` doubled.
///
/// Bounding happens before doubling, so a `##` pair is never split.
pub fn tmux_text(raw: &str, max_chars: usize) -> String {
    tmux_escape(&plain_text(raw, max_chars))
}

/// `raw` made safe as a `display-message` text: [`tmux_text`], then `%` doubled, since tmux also
/// runs the message through strftime (an agent named `%H%M%S` would show the time).
pub fn tmux_message_text(raw: &str, max_chars: usize) -> String {
    tmux_text(raw, max_chars).replace('%', "%%")
}

/// `text` with every `#` doubled, so tmux shows it literally instead of expanding it.
pub fn tmux_escape(text: &str) -> String {
    text.replace('#', "##")
}

/// `raw` made safe for a terminal: C0 and C1 controls (ESC and BEL included), DEL and bidi
/// overrides dropped, each run of tabs and line breaks turned into one space, trimmed, and cut to
/// `max_chars` characters with a trailing `…` when longer.
pub fn plain_text(raw: &str, max_chars: usize) -> String {
    let mut clean = String::with_capacity(raw.len());
    let mut in_break = false;
    for c in raw.chars() {
        if matches!(
            c,
            '\t' | '\n' | '\r' | '\u{0b}' | '\u{0c}' | '\u{2028}' | '\u{2029}'
        ) {
            if !in_break {
                clean.push(' ');
            }
            in_break = true;
        } else if !is_hidden(c) {
            clean.push(c);
            in_break = false;
        }
    }
    bound(clean.trim(), max_chars)
}

/// Controls and invisible direction overrides, which could rewrite or reorder what the user sees.
fn is_hidden(c: char) -> bool {
    c.is_control() // C0, DEL and C1
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// At most `max_chars` characters of `text`, the last one `…` when something was cut.
fn bound(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_owned();
    }
    if max_chars == 0 {
        return String::new();
    }
    let mut out: String = text.chars().take(max_chars - 1).collect();
    out.truncate(out.trim_end().len());
    out.push('…');
    out
}

/// A compact age: `5s`, `3m`, `2h`, `4d` (rounded down).
pub fn ago(seconds: u64) -> String {
    match seconds {
        0..60 => format!("{seconds}s"),
        60..3_600 => format!("{}m", seconds / 60),
        3_600..86_400 => format!("{}h", seconds / 3_600),
        _ => format!("{}d", seconds / 86_400),
    }
}

/// Seconds since the Unix epoch of an RFC 3339 UTC time (`2025-01-01T00:00:00Z`, fractions allowed).
pub fn epoch_secs(rfc3339: &str) -> Option<u64> {
    let time = humantime::parse_rfc3339_weak(rfc3339.trim()).ok()?;
    Some(time.duration_since(UNIX_EPOCH).ok()?.as_secs())
}

/// [`ago`] of an RFC 3339 time as seen at `now_epoch_secs`; `?` when the time is unreadable, `0s`
/// when it lies in the future (clock skew).
pub fn age_of(rfc3339: &str, now_epoch_secs: u64) -> String {
    epoch_secs(rfc3339).map_or_else(|| "?".to_owned(), |t| ago(now_epoch_secs.saturating_sub(t)))
}

/// Terminal columns `text` takes: 2 for East Asian wide characters and emoji, 0 for combining
/// marks and zero-width characters, 1 otherwise (a close approximation of `wcwidth`).
pub fn display_width(text: &str) -> usize {
    text.chars().map(char_width).sum()
}

fn char_width(c: char) -> usize {
    match u32::from(c) {
        0x0300..=0x036f
        | 0x1ab0..=0x1aff
        | 0x1dc0..=0x1dff
        | 0x200b..=0x200f
        | 0x20d0..=0x20ff
        | 0xfe00..=0xfe0f
        | 0xfe20..=0xfe2f
        | 0xfeff => 0,
        0x1100..=0x115f
        | 0x2e80..=0x303e
        | 0x3041..=0x33ff
        | 0x3400..=0x4dbf
        | 0x4e00..=0x9fff
        | 0xa000..=0xa4cf
        | 0xac00..=0xd7a3
        | 0xf900..=0xfaff
        | 0xfe30..=0xfe4f
        | 0xff00..=0xff60
        | 0xffe0..=0xffe6
        | 0x1f300..=0x1f64f
        | 0x1f900..=0x1f9ff
        | 0x20000..=0x3fffd => 2,
        _ => 1,
    }
}

/// `text` followed by spaces up to `width` display columns.
pub fn pad_to(text: &str, width: usize) -> String {
    let pad = width.saturating_sub(display_width(text));
    format!("{text}{:pad$}", "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_tmux_format_is_doubled() {
        let hostile = "#[fg=red]x#(touch /tmp/pwned)";
        assert_eq!(tmux_text(hostile, 100), "##[fg=red]x##(touch /tmp/pwned)");
        assert_eq!(plain_text(hostile, 100), hostile);
    }

    #[test]
    fn controls_are_stripped_and_breaks_become_one_space() {
        let raw = "\x1b[31mred\x07 bell\r\nnext\tcol\u{9b}2J\u{7f}\u{202e}evil\0";
        assert_eq!(plain_text(raw, 100), "[31mred bell next col2Jevil");
        assert!(!tmux_text(raw, 100).chars().any(char::is_control));
        assert_eq!(plain_text("\n\n  title \n", 100), "title");
    }

    #[test]
    fn bounding_counts_chars_before_doubling() {
        assert_eq!(tmux_text("####", 4), "########");
        assert_eq!(tmux_text("a#b#c#", 4), "a##b…");
        assert_eq!(tmux_text("###", 2), "##…");
        assert_eq!(plain_text("abc", 3), "abc");
        assert_eq!(plain_text("abcd", 3), "ab…");
        assert_eq!(plain_text("abcd", 1), "…");
        assert_eq!(plain_text("abcd", 0), "");
        assert_eq!(plain_text("ab   cd", 4), "ab…");
    }

    #[test]
    fn bounding_never_splits_multibyte_chars() {
        assert_eq!(plain_text("日本語のテキスト", 4), "日本語…");
        assert_eq!(tmux_text("é#🦀#ü", 4), "é##🦀…");
        for max in 0..12 {
            let cut = tmux_text("ça#va🦀#日本#", max);
            assert!(cut.chars().count() <= 2 * max);
            assert_eq!(cut.replace("##", "").matches('#').count(), 0, "{cut}");
        }
    }

    #[test]
    fn ages_are_compact() {
        assert_eq!(ago(0), "0s");
        assert_eq!(ago(59), "59s");
        assert_eq!(ago(60), "1m");
        assert_eq!(ago(3_599), "59m");
        assert_eq!(ago(7_200), "2h");
        assert_eq!(ago(4 * 86_400 + 5), "4d");
    }

    #[test]
    fn rfc3339_ages() {
        let now = 1_735_690_200; // 2025-01-01T00:10:00Z
        assert_eq!(epoch_secs("2025-01-01T00:00:00Z"), Some(1_735_689_600));
        assert_eq!(age_of("2025-01-01T00:07:00.250Z", now), "3m");
        assert_eq!(age_of("2025-01-01T01:00:00Z", now), "0s");
        assert_eq!(age_of("yesterday", now), "?");
    }

    #[test]
    fn widths_and_padding() {
        assert_eq!(display_width("abc"), 3);
        assert_eq!(display_width("日本"), 4);
        assert_eq!(display_width("e\u{301}"), 1);
        assert_eq!(pad_to("日本", 6), "日本  ");
        assert_eq!(pad_to("toolong", 3), "toolong");
    }
}
