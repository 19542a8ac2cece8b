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

/// `word` as one word of a POSIX shell command line, always single-quoted (a `'` inside becomes
/// `'\''`): the binary path in a hook command or a `run-shell` binding, which the shell splits.
pub fn sh_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
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

/// Lines of text from elsewhere (what a machine's volee printed) made safe for a terminal, their
/// layout kept: each line as [`plain_text`] would make it but with its leading spaces (a tab is
/// one space), at most `max_chars` characters; at most `max_lines` lines, then a line saying how
/// many more there were. Every line ends with `\n`; no text gives no line.
pub fn plain_lines(raw: &str, max_lines: usize, max_chars: usize) -> String {
    let lines: Vec<&str> = raw.lines().collect();
    let mut out = String::new();
    for line in lines.iter().take(max_lines) {
        let clean: String = line
            .chars()
            .filter_map(|c| match c {
                '\t' | '\u{0b}' | '\u{0c}' => Some(' '),
                c if is_hidden(c) => None,
                c => Some(c),
            })
            .collect();
        out.push_str(&bound(clean.trim_end(), max_chars));
        out.push('\n');
    }
    if lines.len() > max_lines {
        out.push_str(&format!("… {} more lines\n", lines.len() - max_lines));
    }
    out
}

/// Controls and invisible characters, which could rewrite or reorder what the user sees.
fn is_hidden(c: char) -> bool {
    c.is_control() || is_invisible(c) // C0, DEL and C1
}

/// Characters a terminal shows as nothing that still change the text: bidi marks, embeddings,
/// overrides and isolates (U+061C, U+200E–200F, U+202A–202E, U+2066–2069), which reorder what
/// follows them; zero-width spaces and joiners (U+200B–200D), the word joiner and invisible
/// operators (U+2060–2064), the byte-order mark (U+FEFF), the soft hyphen (U+00AD) and the
/// Mongolian vowel separator (U+180E), which make two different strings look the same.
pub fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00ad}'
            | '\u{061c}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}'
            | '\u{feff}'
    )
}

/// Runs of more spaces than this are shown counted (`␠×N`) by [`literal_text`].
pub const SPACE_RUN_SHOWN: usize = 3;

/// `raw` shown so that nothing in it hides, for text the user must judge before it runs (a
/// command, a file's new content): every character is either shown as itself or marked.
/// Line breaks stay; a tab is `␉`, a carriage return `␍`, other C0 controls their control
/// picture (`␛` for ESC), DEL `␡`, C1 controls, [`is_invisible`] characters and whitespace other
/// than the ASCII space `⟨U+XXXX⟩`; a run of more than [`SPACE_RUN_SHOWN`] spaces, and any run
/// of spaces that ends a line, is `␠×N`. Nothing is dropped, so the same command always
/// looks the same and a different one looks different (up to a text that spells a marker out).
pub fn literal_text(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' => {
                let mut run = 1;
                while chars.peek() == Some(&' ') {
                    chars.next();
                    run += 1;
                }
                let ends_line = matches!(chars.peek(), None | Some('\n'));
                if run > SPACE_RUN_SHOWN || ends_line {
                    out.push_str(&format!("␠×{run}"));
                } else {
                    out.extend(std::iter::repeat_n(' ', run));
                }
            }
            '\n' => out.push('\n'),
            '\t' => out.push('␉'),
            '\r' => out.push('␍'),
            '\u{7f}' => out.push('␡'),
            c if u32::from(c) < 0x20 => {
                out.push(char::from_u32(0x2400 + u32::from(c)).unwrap_or('\u{fffd}'))
            }
            c if c.is_control() || is_invisible(c) || c.is_whitespace() => {
                out.push_str(&format!("⟨U+{:04X}⟩", u32::from(c)))
            }
            c => out.push(c),
        }
    }
    out
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
    fn a_shell_quoted_word_reaches_the_program_as_it_was() {
        assert_eq!(sh_quote("/opt/it's/volee"), r"'/opt/it'\''s/volee'");
        // The shell itself splits the line: each word arrives whole, nothing is expanded.
        for word in [
            "/opt/it's/volee",
            "a b",
            "$(touch /x)",
            "`x`",
            "\"q\"",
            "",
            "'",
        ] {
            let out = std::process::Command::new("/bin/sh")
                .arg("-c")
                .arg(format!("printf %s {}", sh_quote(word)))
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), word);
        }
    }

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
    fn bidi_and_zero_width_characters_are_stripped() {
        // U+202E would show "exe.txt" reversed; U+200B and U+FEFF make two names look alike.
        let raw = "rm\u{200b} -rf\u{feff} /\u{202e}txt.exe\u{2066}\u{2069}\u{200d}\u{2060}\u{ad}";
        assert_eq!(plain_text(raw, 100), "rm -rf /txt.exe");
        assert_eq!(tmux_text(raw, 100), "rm -rf /txt.exe");
        for c in [
            '\u{200b}', '\u{200c}', '\u{200d}', '\u{200e}', '\u{200f}', '\u{202a}',
        ] {
            assert!(is_invisible(c), "{c:?}");
        }
        assert!(!is_invisible('a') && !is_invisible(' ') && !is_invisible('é'));
    }

    #[test]
    fn literal_text_hides_nothing() {
        // The attack: a long run of spaces pushes the rest of a command out of sight.
        let attack = format!("echo harmless{}; touch x", " ".repeat(250));
        assert_eq!(literal_text(&attack), "echo harmless␠×250; touch x");
        // Short runs stay, trailing spaces are counted, line breaks stay.
        assert_eq!(literal_text("a b   c \nd  "), "a b   c␠×1\nd␠×2");
        // Controls are pictured, invisible characters and odd spaces named.
        assert_eq!(
            literal_text("a\tb\r\x1b[2J\u{7f}\u{85}\0"),
            "a␉b␍␛[2J␡⟨U+0085⟩␀"
        );
        assert_eq!(
            literal_text("ls\u{202e}txt.exe\u{200b}\u{a0}x"),
            "ls⟨U+202E⟩txt.exe⟨U+200B⟩⟨U+00A0⟩x"
        );
        assert!(!literal_text("\u{9b}\x07").chars().any(char::is_control));
        assert_eq!(literal_text("日本 🦀"), "日本 🦀");
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

    #[test]
    fn plain_lines_keep_the_layout_and_drop_controls() {
        let raw = "NAME  X\n    hit: \x1b[2Jok\u{202e}\tthen\r\n\x07\na line longer than twenty\n";
        assert_eq!(
            plain_lines(raw, 10, 20),
            "NAME  X\n    hit: [2Jok then\n\na line longer than…\n"
        );
        assert_eq!(plain_lines("a\nb\nc\n", 2, 10), "a\nb\n… 1 more lines\n");
        assert_eq!(plain_lines("", 2, 10), "");
    }
}
