//! Text volee types into an agent's input, made inert: what arrives is one prompt, exactly the
//! words that were sent, and never a keystroke of its own.
//!
//! A carriage return inside a message would submit it early and type the rest as a second input
//! (which then answers any `[y/N]` the first part triggered); an embedded `ESC[201~` would end a
//! bracketed paste early (tmux 3.3a passes it through); other controls are keys (`^C`, DEL, ESC
//! sequences) or reorder what a reader sees (bidi overrides).

/// `text` as volee types it: paste markers (`ESC[200~`, `ESC[201~` and their C1 forms) and the
/// rest of every CSI sequence removed, then every C0 and C1 control, DEL and bidi control dropped;
/// line breaks (`\r\n`, `\r`, `\n`) kept as `\n` when `keep_newlines` (the text goes in as one
/// bracketed paste), else turned into spaces; a tab becomes a space.
///
/// The result holds no ESC and no C1 character, so no paste marker can survive or be formed.
pub fn sanitize_input(text: &str, keep_newlines: bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            // ESC first: a CSI sequence (which the paste markers are) goes whole, so no `[201~`
            // residue is typed; any other escape loses only its ESC.
            '\u{1b}' if chars.peek() == Some(&'[') => {
                chars.next();
                skip_csi(&mut chars);
            }
            '\u{9b}' => skip_csi(&mut chars),
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                out.push(if keep_newlines { '\n' } else { ' ' });
            }
            '\n' => out.push(if keep_newlines { '\n' } else { ' ' }),
            '\t' => out.push(' '),
            c if is_inert(c) => out.push(c),
            _ => {}
        }
    }
    out
}

/// Skip the parameters, intermediates and final byte of a CSI sequence (after its introducer);
/// stops early, keeping the character, at anything a CSI sequence cannot hold.
fn skip_csi(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(&c) = chars.peek() {
        match c {
            '\u{30}'..='\u{3f}' | '\u{20}'..='\u{2f}' => {
                chars.next();
            }
            '\u{40}'..='\u{7e}' => {
                chars.next();
                return;
            }
            _ => return,
        }
    }
}

/// Not a control (C0, DEL, C1) and not an invisible direction control.
fn is_inert(c: char) -> bool {
    !c.is_control()
        && !matches!(
            c,
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_controls(s: &str) -> bool {
        s.chars().all(|c| c == '\n' || is_inert(c))
    }

    #[test]
    fn a_carriage_return_never_submits() {
        assert_eq!(sanitize_input("do it\ry", false), "do it y");
        assert_eq!(sanitize_input("do it\ry", true), "do it\ny");
        assert_eq!(sanitize_input("a\r\nb\nc", true), "a\nb\nc");
        assert_eq!(sanitize_input("a\r\nb\nc", false), "a b c");
    }

    #[test]
    fn paste_markers_go_whole() {
        assert_eq!(sanitize_input("first\x1b[201~\ry", true), "first\ny");
        assert_eq!(sanitize_input("\x1b[200~x\x1b[201~", true), "x");
        assert_eq!(sanitize_input("a\u{9b}201~b\u{9b}200~c", true), "abc");
        // An ESC in front of a marker cannot leave a marker behind.
        assert_eq!(sanitize_input("\x1b\x1b[201~z", true), "z");
        assert_eq!(sanitize_input("\x1b[\x1b[201~z", true), "z");
        // Nothing that could start one survives.
        let hostile = "\x1b\x1b[[201~\u{9b}\u{9b}2\x1b01~\x1b]0;t\x07\x1bP1\x1b\\";
        let clean = sanitize_input(hostile, true);
        assert!(
            !clean.contains('\u{1b}') && !clean.contains('\u{9b}'),
            "{clean:?}"
        );
    }

    #[test]
    fn keys_and_direction_controls_are_dropped() {
        assert_eq!(sanitize_input("stop\x03 now\x7f!", false), "stop now!");
        assert_eq!(
            sanitize_input("colour \x1b[31mred\x1b[0m", false),
            "colour red"
        );
        assert_eq!(
            sanitize_input("osc \x1b]2;title\x07 x", false),
            "osc ]2;title x"
        );
        assert_eq!(
            sanitize_input("abc\u{202e}fed\u{2066}x\u{2069}\u{200f}", false),
            "abcfedx"
        );
        assert_eq!(
            sanitize_input("tab\there\0nul\u{85}nel", false),
            "tab herenulnel"
        );
        assert_eq!(sanitize_input("plain: ünï ✓ #%~", true), "plain: ünï ✓ #%~");
    }

    #[test]
    fn the_result_never_holds_a_control() {
        let mut all = String::new();
        for c in (0u32..0x250).filter_map(char::from_u32) {
            all.push(c);
            all.push('x');
        }
        all.push_str("\u{202a}\u{202b}\u{202c}\u{202d}\u{202e}\u{2066}\u{2067}\u{2068}\u{2069}");
        for keep in [false, true] {
            let clean = sanitize_input(&all, keep);
            assert!(no_controls(&clean), "{clean:?}");
            assert_eq!(clean.contains('\n'), keep);
        }
    }
}
