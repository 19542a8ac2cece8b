//! Incremental parser for tmux control mode (`tmux -C`) output.
//!
//! The parser is a pure state machine over bytes: the caller reads `tmux -C` stdout in whatever
//! chunks the OS hands out and passes them to [`ControlParser::feed`]. Everything is handled as
//! bytes because tmux escapes only bytes below 0x20 and `\` in `%output`: a UTF-8 character split
//! across two `%output` lines makes each line invalid UTF-8, and reply blocks are not escaped at all.
//!
//! tmux 3.3a has no `%bell` or `%title` notification, so bells and titles are recovered from the
//! pane output itself with one [`vte::Parser`] per pane. The per-pane parser lives across
//! `%output` lines, so an escape sequence or a UTF-8 character split by tmux's chunking is still
//! seen whole, and a BEL that terminates an OSC title is not mistaken for a bell.
//!
//! Memory is bounded whatever tmux (or an agent writing to its pane) sends: lines are cut at
//! [`MAX_LINE`] bytes, reply blocks keep at most [`MAX_REPLY_LINES`] lines and
//! [`MAX_REPLY_BYTES`] bytes, and a pane's terminal parser is reset when it has swallowed
//! [`MAX_QUIET_BYTES`] without producing anything (an unterminated OSC string, which `vte` buffers
//! without limit).

use std::collections::HashMap;
use std::fmt;

use crate::screen::PaneScreen;

/// Longest line kept; the rest of a longer line is dropped up to its newline. tmux 3.3a writes
/// `%output` in chunks of a few KiB, so only a broken or hostile stream gets near this.
pub const MAX_LINE: usize = 1 << 20;
/// Lines kept from one reply block; later lines are dropped but the block still ends normally.
pub const MAX_REPLY_LINES: usize = 100_000;
/// Bytes kept from one reply block (data lines only), for the same reason.
pub const MAX_REPLY_BYTES: usize = 64 << 20;
/// Output bytes a pane may send without any terminal action completing before its parser is
/// reset. Only string states (OSC, DCS, SOS/PM/APC) are that quiet, and only OSC is buffered.
pub const MAX_QUIET_BYTES: usize = 256 << 10;

/// One thing tmux told the control client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlEvent {
    /// `%output %N data` (or `%extended-output`): `activity` is true unless the chunk contained
    /// nothing but bare BELs (a chunk that only rings the bell is not new output). `bytes` is the
    /// unescaped length.
    Output {
        pane: String,
        bytes: usize,
        activity: bool,
    },
    /// A bare BEL (vte `execute(0x07)`), not one terminating an OSC.
    Bell { pane: String },
    /// OSC 0 or OSC 2 title (lossy UTF-8, params after the first joined with ';').
    Title { pane: String, title: String },
    /// The reply to one command: `%begin T N F` … `%end T N F` (ok) or `%error T N F` (not ok).
    /// `lines` are raw (tmux does not escape reply data), capped at [`MAX_REPLY_LINES`] lines and
    /// [`MAX_REPLY_BYTES`] bytes. `number` is tmux's global command counter, not a line count.
    /// `from_client` is the flag F: true for commands read from this client's stdin, false for
    /// others such as the `attach` that started the client. A stdin line does not always give
    /// exactly one block (tmux 3.3a, observed): `a ; b` gives two, so do the commands that
    /// `source-file` or `if-shell` run for it; a comment or `NAME=value` gives none; a parse error
    /// gives one error block.
    Reply {
        number: u64,
        ok: bool,
        from_client: bool,
        lines: Vec<Vec<u8>>,
    },
    /// `%subscription-changed NAME $S @W IDX %P : VALUE`; `pane` is None when tmux sends `-`
    /// (session and window subscriptions; those also send `-` for window and index).
    SubscriptionChanged {
        name: String,
        session: String,
        window: String,
        window_index: String,
        pane: Option<String>,
        value: Vec<u8>,
    },
    /// `%window-add @W`.
    WindowAdd { window: String },
    /// `%window-close @W` or `%unlinked-window-close @W`.
    WindowClose { window: String },
    /// `%layout-change @W layout visible-layout flags`: `layout` is the visible layout (a
    /// zoomed pane at its full size), else the layout.
    LayoutChange { window: String, layout: String },
    /// `%sessions-changed`.
    SessionsChanged,
    /// `%session-changed $S name`: the control client is now attached to this session.
    SessionChanged { session: String, name: String },
    /// `%pause %N`: tmux stopped sending this pane's output (`pause-after`).
    Pause { pane: String },
    /// `%exit [reason]`: the control client is detaching; the stream ends after this.
    Exit { reason: Option<String> },
    /// Any other line outside a reply block (other notifications, or a known one that did not
    /// have the expected shape), kept raw.
    Other { line: Vec<u8> },
}

/// Incremental tmux control-mode parser; see the module documentation.
#[derive(Default)]
pub struct ControlParser {
    /// The unfinished last line, at most [`MAX_LINE`] bytes.
    partial: Vec<u8>,
    /// The reply block being collected, if a `%begin` was seen.
    block: Option<Block>,
    panes: HashMap<String, PaneState>,
}

impl fmt::Debug for ControlParser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // vte::Parser has no Debug; the buffered sizes are what matters when debugging.
        f.debug_struct("ControlParser")
            .field("partial_len", &self.partial.len())
            .field("reply_number", &self.block.as_ref().map(|b| b.number))
            .field("panes", &self.panes.len())
            .finish_non_exhaustive()
    }
}

struct Block {
    time: u64,
    number: u64,
    from_client: bool,
    lines: Vec<Vec<u8>>,
    bytes: usize,
    /// Once a line is dropped all later ones are too, so the kept lines are a prefix.
    full: bool,
}

impl Block {
    fn push(&mut self, line: &[u8]) {
        if self.full
            || self.lines.len() >= MAX_REPLY_LINES
            || self.bytes + line.len() > MAX_REPLY_BYTES
        {
            self.full = true;
            return;
        }
        self.bytes += line.len();
        self.lines.push(line.to_vec());
    }
}

#[derive(Default)]
struct PaneState {
    vte: vte::Parser,
    /// Bytes fed since the last chunk in which vte completed any action.
    quiet: usize,
    /// Its screen, when it is modelled ([`ControlParser::model_pane`]) and was seeded.
    screen: Option<PaneScreen>,
    /// Modelled: output goes to `screen` once a seed gave it one.
    modelled: bool,
}

impl ControlParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed raw bytes as read from `tmux -C` stdout (arbitrary chunking: lines may be split
    /// anywhere, including inside a UTF-8 char or an escape). Returns events completed by these
    /// bytes.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<ControlEvent> {
        let mut events = Vec::new();
        let mut rest = bytes;
        while !rest.is_empty() {
            let (some, used) = self.feed_to_reply(rest);
            events.extend(some);
            rest = &rest[used..];
        }
        events
    }

    /// Like [`ControlParser::feed`], but stops after the first line that completes a reply
    /// block: returns the events so far and how many bytes it used (the rest is to be fed
    /// next). A reply that seeds a pane's model must replace the model at exactly that point
    /// of the stream, before the output that follows it in the same read is fed to the model.
    pub fn feed_to_reply(&mut self, bytes: &[u8]) -> (Vec<ControlEvent>, usize) {
        let mut events = Vec::new();
        let mut used = 0;
        while let Some(nl) = bytes[used..].iter().position(|&b| b == b'\n') {
            let head = &bytes[used..used + nl];
            used += nl + 1;
            if self.partial.is_empty() {
                // Common case: the whole line is in this chunk, no copy needed. Cut it the same
                // way a buffered line is cut so chunking never changes the result.
                self.line(&head[..head.len().min(MAX_LINE)], &mut events);
            } else {
                self.push_partial(head);
                let line = std::mem::take(&mut self.partial);
                self.line(&line, &mut events);
            }
            if matches!(events.last(), Some(ControlEvent::Reply { .. })) {
                return (events, used);
            }
        }
        self.push_partial(&bytes[used..]);
        (events, bytes.len())
    }

    /// Drop a pane's terminal parser state (pane gone).
    pub fn forget_pane(&mut self, pane: &str) {
        self.panes.remove(pane);
    }

    /// Keep a screen model of `pane` from now on (or stop: `false`). It has none until
    /// [`ControlParser::seed`] gives it one: output before that is what the seed shows.
    pub fn model_pane(&mut self, pane: &str, on: bool) {
        if on {
            self.panes.entry(pane.to_owned()).or_default().modelled = true;
        } else if let Some(state) = self.panes.get_mut(pane) {
            state.modelled = false;
            state.screen = None;
        }
    }

    /// Is `pane` modelled?
    pub fn is_modelled(&self, pane: &str) -> bool {
        self.panes.get(pane).is_some_and(|s| s.modelled)
    }

    /// The modelled panes.
    pub fn modelled(&self) -> impl Iterator<Item = &str> {
        self.panes
            .iter()
            .filter(|(_, s)| s.modelled)
            .map(|(p, _)| p.as_str())
    }

    /// A modelled pane's screen as tmux shows it now (at this point of the stream): it replaces
    /// the model. Returns the model's text it replaced when that differed from the new one (a
    /// model that went wrong). Ignored for a pane no longer modelled.
    pub fn seed(&mut self, pane: &str, screen: PaneScreen) -> Option<String> {
        let state = self.panes.get_mut(pane).filter(|s| s.modelled)?;
        let old = state.screen.replace(screen)?;
        let (old, new) = (old.text(), state.screen.as_ref()?.text());
        (old != new).then_some(old)
    }

    /// A modelled, seeded pane's screen.
    pub fn screen(&self, pane: &str) -> Option<&PaneScreen> {
        self.panes.get(pane)?.screen.as_ref()
    }

    fn push_partial(&mut self, bytes: &[u8]) {
        let room = MAX_LINE - self.partial.len();
        self.partial
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    fn line(&mut self, line: &[u8], events: &mut Vec<ControlEvent>) {
        // Tolerate CRLF, as seen when tmux -C runs on a pty instead of pipes.
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if let Some(block) = &mut self.block {
            // Only the guard with this block's time and number ends it: data lines are raw and
            // may themselves look like `%end …` (an option value, a pane title in a list).
            if let Some((ok, Guard { time, number, .. })) = end_guard(line) {
                if time == block.time && number == block.number {
                    events.push(ControlEvent::Reply {
                        number,
                        ok,
                        from_client: block.from_client,
                        lines: std::mem::take(&mut block.lines),
                    });
                    self.block = None;
                    return;
                }
            }
            block.push(line);
            return;
        }
        if line.is_empty() {
            return;
        }
        let (name, args) = split_word(line);
        let event = match name {
            b"%begin" => match guard_args(args) {
                Some(Guard {
                    time,
                    number,
                    from_client,
                }) => {
                    self.block = Some(Block {
                        time,
                        number,
                        from_client,
                        lines: Vec::new(),
                        bytes: 0,
                        full: false,
                    });
                    return;
                }
                None => None,
            },
            b"%output" => {
                let (pane, data) = split_word(args);
                if !pane.is_empty() {
                    self.output(pane, data, events);
                    return;
                }
                None
            }
            b"%extended-output" => {
                // `%extended-output %N AGE ... : data`: tmux reserves room for more fields
                // before the colon, so skip words up to a lone ':'.
                let (pane, rest) = split_word(args);
                match extended_data(rest) {
                    Some(data) if !pane.is_empty() => {
                        self.output(pane, data, events);
                        return;
                    }
                    _ => None,
                }
            }
            b"%subscription-changed" => subscription(args),
            b"%window-add" => word(args).map(|window| ControlEvent::WindowAdd { window }),
            b"%window-close" | b"%unlinked-window-close" => {
                word(args).map(|window| ControlEvent::WindowClose { window })
            }
            b"%layout-change" => {
                let (window, rest) = split_word(args);
                let (layout, rest) = split_word(rest);
                let (visible, _) = split_word(rest);
                let layout = if visible.is_empty() { layout } else { visible };
                (!window.is_empty()).then(|| ControlEvent::LayoutChange {
                    window: lossy(window),
                    layout: lossy(layout),
                })
            }
            b"%sessions-changed" => Some(ControlEvent::SessionsChanged),
            b"%session-changed" => {
                let (session, name) = split_word(args);
                (!session.is_empty()).then(|| ControlEvent::SessionChanged {
                    session: lossy(session),
                    name: lossy(name),
                })
            }
            b"%pause" => word(args).map(|pane| ControlEvent::Pause { pane }),
            b"%exit" => Some(ControlEvent::Exit {
                reason: (!args.is_empty()).then(|| lossy(args)),
            }),
            _ => None,
        };
        events.push(event.unwrap_or_else(|| ControlEvent::Other {
            line: line.to_vec(),
        }));
    }

    fn output(&mut self, pane: &[u8], data: &[u8], events: &mut Vec<ControlEvent>) {
        let pane = lossy(pane);
        let data = unescape(data);
        let state = self.panes.entry(pane.clone()).or_default();
        let mut signals = Signals {
            pane: &pane,
            events: Vec::new(),
            bells: 0,
            progressed: false,
            drawn: false,
        };
        state.vte.advance(&mut signals, &data);
        if let Some(screen) = &mut state.screen {
            screen.feed(&data);
        }
        if signals.progressed {
            state.quiet = 0;
        } else {
            state.quiet += data.len();
            if state.quiet > MAX_QUIET_BYTES {
                // Most likely an OSC string that never ends; vte would buffer all of it.
                state.vte = vte::Parser::default();
                state.quiet = 0;
                // The model's own tokenizer holds the same string: end it there too.
                if let Some(screen) = &mut state.screen {
                    screen.feed(b"\x1b\\");
                }
            }
        }
        let Signals {
            events: signals,
            drawn,
            ..
        } = signals;
        events.push(ControlEvent::Output {
            pane,
            bytes: data.len(),
            // Only drawing counts: a chunk of bare BELs or of title updates alone is not output
            // (Codex blinks its title once a second while an approval waits).
            activity: drawn,
        });
        events.extend(signals);
    }
}

/// vte performer collecting one chunk's bells and titles.
struct Signals<'a> {
    pane: &'a str,
    events: Vec<ControlEvent>,
    bells: usize,
    /// Whether vte completed any action; see [`MAX_QUIET_BYTES`].
    progressed: bool,
    /// Whether the chunk drew anything: text, a control other than BEL, a CSI/ESC sequence.
    drawn: bool,
}

impl vte::Perform for Signals<'_> {
    fn print(&mut self, _c: char) {
        self.progressed = true;
        self.drawn = true;
    }

    fn execute(&mut self, byte: u8) {
        self.progressed = true;
        self.drawn |= byte != 0x07;
        if byte == 0x07 {
            self.bells += 1;
            self.events.push(ControlEvent::Bell {
                pane: self.pane.to_owned(),
            });
        }
    }

    fn hook(&mut self, _: &vte::Params, _: &[u8], _: bool, _: char) {
        self.progressed = true;
        self.drawn = true;
    }

    fn put(&mut self, _byte: u8) {
        self.progressed = true;
        self.drawn = true;
    }

    fn unhook(&mut self) {
        self.progressed = true;
    }

    fn osc_dispatch(&mut self, params: &[&[u8]], _bell_terminated: bool) {
        self.progressed = true;
        if let [kind, rest @ ..] = params {
            if *kind == b"0" || *kind == b"2" {
                let title = rest
                    .iter()
                    .map(|p| String::from_utf8_lossy(p))
                    .collect::<Vec<_>>()
                    .join(";");
                self.events.push(ControlEvent::Title {
                    pane: self.pane.to_owned(),
                    title,
                });
            }
        }
    }

    fn csi_dispatch(&mut self, _: &vte::Params, _: &[u8], _: bool, _: char) {
        self.progressed = true;
        self.drawn = true;
    }

    fn esc_dispatch(&mut self, _: &[u8], _: bool, byte: u8) {
        self.progressed = true;
        // `ESC \` is the string terminator of an OSC title: not drawing.
        self.drawn |= byte != b'\\';
    }
}

/// Undo tmux's `%output` escaping: bytes below 0x20 and `\` arrive as `\ooo`. Anything that is
/// not a valid escape is kept as is rather than rejected, so a damaged line still counts.
fn unescape(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    let mut rest = data;
    while let Some(i) = rest.iter().position(|&b| b == b'\\') {
        out.extend_from_slice(&rest[..i]);
        rest = &rest[i..];
        if let [_, a @ b'0'..=b'3', b @ b'0'..=b'7', c @ b'0'..=b'7', tail @ ..] = rest {
            out.push(((a - b'0') << 6) | ((b - b'0') << 3) | (c - b'0'));
            rest = tail;
        } else {
            out.push(b'\\');
            rest = &rest[1..];
        }
    }
    out.extend_from_slice(rest);
    out
}

/// Split at the first space: (word, rest after the space).
fn split_word(s: &[u8]) -> (&[u8], &[u8]) {
    match s.iter().position(|&b| b == b' ') {
        Some(i) => (&s[..i], &s[i + 1..]),
        None => (s, &[]),
    }
}

/// The first word of `args`, if there is one.
fn word(args: &[u8]) -> Option<String> {
    let (w, _) = split_word(args);
    (!w.is_empty()).then(|| lossy(w))
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The `T N F` of a `%begin`/`%end`/`%error` line.
struct Guard {
    time: u64,
    number: u64,
    from_client: bool,
}

fn guard_args(args: &[u8]) -> Option<Guard> {
    fn number<T: std::str::FromStr>(word: Option<&[u8]>) -> Option<T> {
        std::str::from_utf8(word?).ok()?.parse().ok()
    }
    let mut words = args.split(|&b| b == b' ');
    Some(Guard {
        time: number(words.next())?,
        number: number(words.next())?,
        from_client: number::<u32>(words.next())? != 0,
    })
}

/// `%end T N F` → (true, guard), `%error T N F` → (false, guard).
fn end_guard(line: &[u8]) -> Option<(bool, Guard)> {
    let (name, args) = split_word(line);
    let ok = match name {
        b"%end" => true,
        b"%error" => false,
        _ => return None,
    };
    Some((ok, guard_args(args)?))
}

/// The data of an `%extended-output` line after the pane: skip words up to a lone ':'.
fn extended_data(mut rest: &[u8]) -> Option<&[u8]> {
    while !rest.is_empty() {
        let (w, tail) = split_word(rest);
        if w == b":" {
            return Some(tail);
        }
        rest = tail;
    }
    None
}

/// `NAME $S @W IDX %P : VALUE` (VALUE is raw and may contain anything but a newline).
fn subscription(args: &[u8]) -> Option<ControlEvent> {
    let mut it = args.splitn(7, |&b| b == b' ');
    let name = it.next().filter(|n| !n.is_empty())?;
    let session = it.next()?;
    let window = it.next()?;
    let window_index = it.next()?;
    let pane = it.next()?;
    if it.next()? != b":" {
        return None;
    }
    Some(ControlEvent::SubscriptionChanged {
        name: lossy(name),
        session: lossy(session),
        window: lossy(window),
        window_index: lossy(window_index),
        pane: (pane != b"-").then(|| lossy(pane)),
        value: it.next().unwrap_or_default().to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::ControlEvent::*;
    use super::*;

    fn feed_all(input: &[u8]) -> Vec<ControlEvent> {
        ControlParser::new().feed(input)
    }

    fn out(pane: &str, bytes: usize) -> ControlEvent {
        Output {
            pane: pane.into(),
            bytes,
            activity: true,
        }
    }

    /// Output that drew nothing (bare BELs, title updates, an unfinished sequence).
    fn quiet(pane: &str, bytes: usize) -> ControlEvent {
        Output {
            pane: pane.into(),
            bytes,
            activity: false,
        }
    }

    fn bell(pane: &str) -> ControlEvent {
        Bell { pane: pane.into() }
    }

    fn title(pane: &str, t: &str) -> ControlEvent {
        Title {
            pane: pane.into(),
            title: t.into(),
        }
    }

    /// Shaped like real tmux 3.3a output (first lines captured from `tmux -C attach`).
    const TRANSCRIPT: &[u8] = b"%begin 1796020974 264 0\n\
%end 1796020974 264 0\n\
%session-changed $0 my session\n\
%output %0 \\033[?2004hroot@vm:~# \n\
%output %1 hi\\007\\033]2;my title\\033\\134\n\
%output %1 \\007\n\
%output %1 \\033]0;claude: thinking\\007\n\
%output %2 \\033]2;spl\n\
%output %2 it\\007\n\
%output %3 caf\xc3\n\
%output %3 \xa9\\033]2;caf\xc3\n\
%output %3 \xa9\\033\\134\n\
%begin 1796020975 269 1\n\
%0\x1f5303\x1fvm\n\
%output %9 not output\n\
%end 1796020975 268 1\n\
%end 1796020974 269 1\n\
%end 1796020975 269 1\n\
%begin 1796020975 270 1\n\
parse error: syntax error\n\
%error 1796020975 270 1\n\
%subscription-changed title $0 @1 1 %1 : title : with colons\n\
%subscription-changed bell $0 @2 2 - : 1\n\
%subscription-changed sess $0 - - - : \n\
%window-add @3\n\
%layout-change @3 b25d,80x24,0,0,2 b25d,80x24,0,0,2 *\n\
%window-close @3\n\
%unlinked-window-close @4\n\
%sessions-changed\n\
%pause %2\n\
%extended-output %2 1234 : x\\015\\012\n\
%window-renamed @0 bash\n\
%exit\n";

    fn transcript_events() -> Vec<ControlEvent> {
        vec![
            Reply {
                number: 264,
                ok: true,
                from_client: false,
                lines: vec![],
            },
            SessionChanged {
                session: "$0".into(),
                name: "my session".into(),
            },
            out("%0", 19),
            out("%1", 17),
            bell("%1"),
            title("%1", "my title"),
            Output {
                pane: "%1".into(),
                bytes: 1,
                activity: false,
            },
            bell("%1"),
            quiet("%1", 21),
            title("%1", "claude: thinking"),
            quiet("%2", 7),
            quiet("%2", 3),
            title("%2", "split"),
            out("%3", 4),
            out("%3", 9),
            quiet("%3", 3),
            title("%3", "café"),
            Reply {
                number: 269,
                ok: true,
                from_client: true,
                lines: vec![
                    b"%0\x1f5303\x1fvm".to_vec(),
                    b"%output %9 not output".to_vec(),
                    b"%end 1796020975 268 1".to_vec(),
                    b"%end 1796020974 269 1".to_vec(),
                ],
            },
            Reply {
                number: 270,
                ok: false,
                from_client: true,
                lines: vec![b"parse error: syntax error".to_vec()],
            },
            SubscriptionChanged {
                name: "title".into(),
                session: "$0".into(),
                window: "@1".into(),
                window_index: "1".into(),
                pane: Some("%1".into()),
                value: b"title : with colons".to_vec(),
            },
            SubscriptionChanged {
                name: "bell".into(),
                session: "$0".into(),
                window: "@2".into(),
                window_index: "2".into(),
                pane: None,
                value: b"1".to_vec(),
            },
            SubscriptionChanged {
                name: "sess".into(),
                session: "$0".into(),
                window: "-".into(),
                window_index: "-".into(),
                pane: None,
                value: vec![],
            },
            WindowAdd {
                window: "@3".into(),
            },
            LayoutChange {
                window: "@3".into(),
                layout: "b25d,80x24,0,0,2".into(),
            },
            WindowClose {
                window: "@3".into(),
            },
            WindowClose {
                window: "@4".into(),
            },
            SessionsChanged,
            Pause { pane: "%2".into() },
            out("%2", 3),
            Other {
                line: b"%window-renamed @0 bash".to_vec(),
            },
            Exit { reason: None },
        ]
    }

    #[test]
    fn transcript_in_one_go() {
        assert_eq!(feed_all(TRANSCRIPT), transcript_events());
    }

    #[test]
    fn chunking_never_changes_events() {
        let whole = feed_all(TRANSCRIPT);
        let mut p = ControlParser::new();
        let bytewise: Vec<_> = TRANSCRIPT.iter().flat_map(|b| p.feed(&[*b])).collect();
        assert_eq!(bytewise, whole);
        for size in [2, 3, 7, 64] {
            let mut p = ControlParser::new();
            let chunked: Vec<_> = TRANSCRIPT.chunks(size).flat_map(|c| p.feed(c)).collect();
            assert_eq!(chunked, whole, "chunk size {size}");
        }
    }

    #[test]
    fn bare_bel_is_a_bell_but_osc_terminator_is_not() {
        let ev = feed_all(b"%output %5 \\033]0;t\\007\n%output %5 \\007\n");
        assert_eq!(
            ev,
            vec![
                quiet("%5", 6),
                title("%5", "t"),
                Output {
                    pane: "%5".into(),
                    bytes: 1,
                    activity: false
                },
                bell("%5"),
            ]
        );
    }

    #[test]
    fn bel_inside_text_is_activity_and_bell() {
        let ev = feed_all(b"%output %5 \\007\\007x\n");
        assert_eq!(ev, vec![out("%5", 3), bell("%5"), bell("%5")]);
    }

    #[test]
    fn osc_split_across_lines_gives_one_title_and_no_bell() {
        let mut p = ControlParser::new();
        let first = p.feed(b"%output %1 \\033]2;half\n");
        assert_eq!(first, vec![quiet("%1", 8)]);
        let second = p.feed(b"%output %1  and half\\007\n");
        assert_eq!(second, vec![quiet("%1", 10), title("%1", "half and half")]);
    }

    #[test]
    fn utf8_split_across_lines_in_a_title() {
        // tmux passes bytes >= 0x80 through, so each line here is invalid UTF-8 on its own.
        let ev = feed_all(b"%output %1 \\033]2;\xe2\x9c\n%output %1 \x93 done\\007\n");
        assert_eq!(
            ev,
            vec![quiet("%1", 6), quiet("%1", 7), title("%1", "\u{2713} done")]
        );
    }

    #[test]
    fn title_params_are_joined_and_other_oscs_ignored() {
        let ev = feed_all(b"%output %1 \\033]1;icon\\007\\033]2;a;b;c\\033\\134\n");
        assert_eq!(ev, vec![quiet("%1", 20), title("%1", "a;b;c")]);
    }

    #[test]
    fn panes_have_separate_terminal_state() {
        let ev = feed_all(b"%output %1 \\033]2;one\n%output %2 \\007\n%output %1 \\007\n");
        assert_eq!(
            ev,
            vec![
                quiet("%1", 7),
                Output {
                    pane: "%2".into(),
                    bytes: 1,
                    activity: false
                },
                bell("%2"),
                // The BEL ends %1's title, so it is not a bare bell: this is output.
                quiet("%1", 1),
                title("%1", "one"),
            ]
        );
    }

    #[test]
    fn forget_pane_drops_a_half_read_sequence() {
        let mut p = ControlParser::new();
        p.feed(b"%output %1 \\033]2;gone\n");
        p.forget_pane("%1");
        let ev = p.feed(b"%output %1 \\007\n");
        assert_eq!(
            ev,
            vec![
                Output {
                    pane: "%1".into(),
                    bytes: 1,
                    activity: false
                },
                bell("%1")
            ]
        );
    }

    #[test]
    fn unescape_edge_cases() {
        assert_eq!(unescape(b"a\\134b"), b"a\\b");
        assert_eq!(unescape(b"\\000\\037\\177"), b"\x00\x1f\x7f");
        // Not escapes: kept literally, including at the very end of a line.
        assert_eq!(unescape(b"\\"), b"\\");
        assert_eq!(unescape(b"\\01"), b"\\01");
        assert_eq!(unescape(b"\\400x"), b"\\400x");
        assert_eq!(unescape(b"\\08a"), b"\\08a");
        assert_eq!(unescape(b"x\\\\134"), b"x\\\\");
    }

    #[test]
    fn crlf_and_empty_lines() {
        let ev = feed_all(b"\r\n\n%window-add @1\r\n%begin 1 2 1\r\nrow\r\n%end 1 2 1\r\n");
        assert_eq!(
            ev,
            vec![
                WindowAdd {
                    window: "@1".into()
                },
                Reply {
                    number: 2,
                    ok: true,
                    from_client: true,
                    lines: vec![b"row".to_vec()]
                },
            ]
        );
    }

    #[test]
    fn reply_keeps_empty_lines_and_stray_guards_are_other() {
        let ev = feed_all(b"%end 1 2 1\n%begin 1 2 1\n\nx\n\n%end 1 2 1\n%begin bad\n");
        assert_eq!(
            ev,
            vec![
                Other {
                    line: b"%end 1 2 1".to_vec()
                },
                Reply {
                    number: 2,
                    ok: true,
                    from_client: true,
                    lines: vec![vec![], b"x".to_vec(), vec![]]
                },
                Other {
                    line: b"%begin bad".to_vec()
                },
            ]
        );
    }

    #[test]
    fn exit_with_reason_and_malformed_notifications() {
        let ev = feed_all(
            b"%exit too far behind\n%window-add\n%output\n%subscription-changed x $1 @1\n\
%extended-output %1 5 no colon\n%pause \n",
        );
        assert_eq!(
            ev[0],
            Exit {
                reason: Some("too far behind".into())
            }
        );
        assert!(ev[1..].iter().all(|e| matches!(e, Other { .. })), "{ev:?}");
        assert_eq!(ev.len(), 6);
    }

    #[test]
    fn extended_output_skips_reserved_fields() {
        let ev = feed_all(b"%extended-output %4 17 future field : a : b\n");
        assert_eq!(ev, vec![out("%4", 5)]);
    }

    #[test]
    fn overlong_line_is_cut_and_parsing_resumes() {
        let mut input = b"%output %1 ".to_vec();
        input.resize(MAX_LINE * 3, b'x');
        input.extend_from_slice(b"\n%window-add @7\n");
        let whole = feed_all(&input);
        assert_eq!(
            whole,
            vec![
                out("%1", MAX_LINE - b"%output %1 ".len()),
                WindowAdd {
                    window: "@7".into()
                },
            ]
        );
        let mut p = ControlParser::new();
        let chunked: Vec<_> = input.chunks(4096).flat_map(|c| p.feed(c)).collect();
        assert_eq!(chunked, whole);
        assert!(p.partial.capacity() <= MAX_LINE);
    }

    /// A read that holds a seed's reply and then output: the output must reach the seeded
    /// model, not the one the seed replaces (seen in the e2e resize test: the 40 lines printed
    /// right after a resize were lost from the model).
    #[test]
    fn feed_to_reply_stops_after_a_reply_so_a_seed_lands_before_the_output_after_it() {
        let mut p = ControlParser::new();
        p.model_pane("%1", true);
        p.seed("%1", PaneScreen::new(5, 40));
        let read: &[u8] =
            b"%output %1 old\\015\\012\n%begin 5 7 1\nready\n%end 5 7 1\n%output %1 after the seed\n";
        let (events, used) = p.feed_to_reply(read);
        assert!(
            matches!(events.last(), Some(Reply { number: 7, .. })),
            "{events:?}"
        );
        assert!(used < read.len());
        // The reader seeds here, from the reply (the screen tmux showed at that point).
        let mut seeded = PaneScreen::new(5, 40);
        seeded.feed(b"ready\r\n");
        p.seed("%1", seeded);
        let (events, rest) = p.feed_to_reply(&read[used..]);
        assert_eq!(rest, read.len() - used);
        assert!(matches!(&events[..], [Output { .. }]), "{events:?}");
        assert_eq!(
            p.screen("%1")
                .unwrap()
                .text()
                .lines()
                .take(2)
                .collect::<Vec<_>>(),
            ["ready", "after the seed"]
        );
        // feed, over the same bytes, gives the same events as feed_to_reply in steps.
        let mut q = ControlParser::new();
        let all = q.feed(read);
        assert_eq!(all.len(), 3, "{all:?}");
    }

    #[test]
    fn huge_reply_is_capped_but_ends_correctly() {
        let mut p = ControlParser::new();
        p.feed(b"%begin 5 42 1\n");
        let chunk = b"line\n".repeat(10_000);
        for _ in 0..(MAX_REPLY_LINES / 10_000 + 2) {
            assert!(p.feed(&chunk).is_empty());
        }
        let ev = p.feed(b"%error 5 42 1\n%sessions-changed\n");
        let [Reply {
            number, ok, lines, ..
        }, SessionsChanged] = &ev[..]
        else {
            panic!("unexpected {ev:?}");
        };
        assert_eq!((*number, *ok, lines.len()), (42, false, MAX_REPLY_LINES));
    }

    #[test]
    fn reply_bytes_are_capped() {
        let mut p = ControlParser::new();
        p.feed(b"%begin 5 43 1\n");
        let mut big = vec![b'y'; MAX_LINE - 1];
        big.push(b'\n');
        for _ in 0..(MAX_REPLY_BYTES / MAX_LINE + 3) {
            p.feed(&big);
        }
        // A short line after the cap is dropped too, so the kept lines stay a prefix.
        let ev = p.feed(b"short\n%end 5 43 1\n");
        let [Reply { lines, .. }] = &ev[..] else {
            panic!("unexpected {ev:?}");
        };
        assert!(lines.iter().map(Vec::len).sum::<usize>() <= MAX_REPLY_BYTES);
        assert!(lines.iter().all(|l| l.len() == MAX_LINE - 1));
    }

    #[test]
    fn endless_osc_resets_the_pane_parser() {
        let mut p = ControlParser::new();
        p.feed(b"%output %1 \\033]2;");
        let junk = [b"%output %1 ".as_slice(), &[b'a'; 4000], b"\n"].concat();
        for _ in 0..(MAX_QUIET_BYTES / 4000 + 2) {
            p.feed(&junk);
        }
        // After the reset the pane is in ground state: a BEL is a bell again, not a terminator.
        let ev = p.feed(b"%output %1 \\007\n");
        assert_eq!(ev.last(), Some(&bell("%1")));
    }

    #[test]
    fn random_pieces_never_panic_and_chunking_is_invisible() {
        let alphabet: &[&[u8]] = &[
            b"%output %1 ",
            b"%begin 1 1 1",
            b"%end 1 1 1",
            b"%error 1 1 1",
            b"\\033]2;",
            b"\\007",
            b"\\",
            b"\n",
            b"\r",
            b" ",
            b":",
            b"-",
            b"\xff",
            b"\xe2\x9c",
            b"%subscription-changed ",
            b"%extended-output %1 ",
            b"%exit",
            b"\x1b]0;",
            b"\x07",
            b"%pause",
            b"x",
        ];
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut pieces = Vec::new();
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            pieces.push(alphabet[(seed % alphabet.len() as u64) as usize]);
        }
        let mut p = ControlParser::new();
        let chunked: Vec<_> = pieces.iter().flat_map(|piece| p.feed(piece)).collect();
        assert_eq!(chunked, feed_all(&pieces.concat()));
    }
}
