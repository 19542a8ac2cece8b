//! Format strings for queries, and quoting for tmux command lines.
//!
//! Queries use `#{var}` fields separated by [`FIELD_SEP`] (ASCII unit separator), which printable
//! text never contains and terminal output cannot put into a title (tmux drops C0 controls inside
//! OSC strings). Values set by commands (`select-pane -T`, which an agent can run itself, or a
//! directory name in `pane_current_path`) can still contain it or even a newline, so callers
//! should check that a reply line split into the expected number of fields.
//!
//! Quoting follows tmux 3.3a's command parser (`cmd-parse.y`), which applies to control-mode stdin
//! lines, `source-file` and key-binding command strings alike:
//! * inside single quotes nothing is special (no `\` escapes, no `$VAR` or `~` expansion, `;`,
//!   `#`, `{`, `}` are plain text), so text goes in single quotes;
//! * `'` and control characters go in double quotes, the latter as `\ooo` octal escapes (a raw
//!   newline would end the control-mode line, and `~` must never be in double quotes because tmux
//!   expands it right after any quote change);
//! * plain words (letters, digits, `-_./:@,+=`, and `%` past the first character) stay unquoted
//!   so logged command lines remain readable; a word starting with `%` would be a `%if`-style
//!   directive.
//!
//! Only NUL cannot be expressed: tmux arguments are C strings.

use std::fmt::Write as _;

/// Separator between fields of a [`fields_format`] reply.
pub const FIELD_SEP: char = '\x1f';

/// Why an argument cannot be put on a tmux command line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuoteError {
    /// tmux arguments are C strings; a NUL would cut the value short.
    #[error("argument contains a NUL byte, which tmux cannot receive")]
    Nul,
    /// An empty control-mode line detaches the control client instead of running a command.
    #[error("empty command line")]
    Empty,
}

/// `#{pane_id}\x1f#{pane_pid}…` from variable names.
pub fn fields_format(names: &[&str]) -> String {
    let mut out = String::new();
    for (i, name) in names.iter().enumerate() {
        if i > 0 {
            out.push(FIELD_SEP);
        }
        // Writing to a String cannot fail.
        let _ = write!(out, "#{{{name}}}");
    }
    out
}

/// Split one reply line into fields (lossy UTF-8 per field).
pub fn split_fields(line: &[u8]) -> Vec<String> {
    line.split(|&b| b == FIELD_SEP as u8)
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect()
}

/// Quote one argument for a tmux command line (what you write to control-mode stdin or to
/// `tmux source`): the value arrives at the command verbatim — no `~`/`$VAR` expansion, `;` not a
/// separator, `'` `"` `\` `#` `{` `}` kept, control characters (newline included) encoded as
/// escapes so the line stays one line. Only NUL is refused.
///
/// This is one level of quoting: a command string that tmux parses again later (a `bind-key` or
/// `if-shell` command, a menu item's command) must be built with [`command_line`] first and then
/// quoted as an argument itself.
pub fn quote_arg(arg: &str) -> Result<String, QuoteError> {
    if arg.contains('\0') {
        return Err(QuoteError::Nul);
    }
    if is_plain(arg) {
        return Ok(arg.to_owned());
    }
    let mut out = String::with_capacity(arg.len() + 2);
    let mut open = None;
    for c in arg.chars() {
        let encoded = c < ' ' || c == '\x7f';
        let quote = if encoded || c == '\'' { '"' } else { '\'' };
        if open != Some(quote) {
            out.extend(open);
            out.push(quote);
            open = Some(quote);
        }
        if encoded {
            // Writing to a String cannot fail.
            let _ = write!(out, "\\{:03o}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    match open {
        Some(quote) => out.push(quote),
        None => out.push_str("''"), // the empty string
    }
    Ok(out)
}

/// Join a command and its args with [`quote_arg`]. The command name itself must not look like
/// `NAME=value` (tmux reads that as an environment assignment even when quoted).
pub fn command_line(args: &[&str]) -> Result<String, QuoteError> {
    if args.is_empty() {
        return Err(QuoteError::Empty);
    }
    let quoted = args
        .iter()
        .map(|a| quote_arg(a))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(quoted.join(" "))
}

/// A word tmux reads back unchanged without quotes.
fn is_plain(arg: &str) -> bool {
    !arg.is_empty()
        && !arg.starts_with('%')
        && arg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:@,+=%".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip() {
        let f = fields_format(&["pane_id", "pane_pid", "pane_title"]);
        assert_eq!(f, "#{pane_id}\x1f#{pane_pid}\x1f#{pane_title}");
        assert_eq!(fields_format(&[]), "");
        assert_eq!(
            split_fields(b"%1\x1f123\x1fit's \xff"),
            vec!["%1", "123", "it's \u{fffd}"]
        );
        assert_eq!(split_fields(b""), vec![""]);
        assert_eq!(split_fields(b"\x1f"), vec!["", ""]);
    }

    #[test]
    fn quoting_shapes() {
        let cases = [
            ("list-panes", "list-panes"),
            ("-F", "-F"),
            ("@volee-status", "@volee-status"),
            ("=volee:@3", "=volee:@3"),
            ("a%b", "a%b"),
            ("%1", "'%1'"),
            ("", "''"),
            ("two words", "'two words'"),
            ("it's", "'it'\"'\"'s'"),
            ("'", "\"'\""),
            ("~", "'~'"),
            ("$HOME;x", "'$HOME;x'"),
            ("a\nb", "'a'\"\\012\"'b'"),
            ("\x1f\x1b'", "\"\\037\\033'\""),
            ("\x7f", "\"\\177\""),
            ("é✓", "'é✓'"),
        ];
        for (raw, quoted) in cases {
            assert_eq!(quote_arg(raw).as_deref(), Ok(quoted), "{raw:?}");
        }
        assert_eq!(quote_arg("a\0b"), Err(QuoteError::Nul));
    }

    #[test]
    fn command_lines() {
        assert_eq!(
            command_line(&["set-option", "-g", "@t", "x y"]).as_deref(),
            Ok("set-option -g @t 'x y'")
        );
        assert_eq!(command_line(&[]), Err(QuoteError::Empty));
        assert_eq!(command_line(&["display", "\0"]), Err(QuoteError::Nul));
        // Never a raw control character, so the line cannot be split or cut.
        let line = command_line(&["x", "\n\r\t\x01\x7f"]).unwrap();
        assert!(!line.chars().any(|c| c.is_control()), "{line:?}");
    }
}
