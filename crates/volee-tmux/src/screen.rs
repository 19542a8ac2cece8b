//! A pane's screen as a terminal shows it, kept from the pane's own output.
//!
//! The control connection already reads every byte an agent prints (`%output`); a
//! [`PaneScreen`] feeds them to a terminal emulator ([`vt100`]: a screen model with no I/O, kept
//! since 2014, the same `vte` tokenizer this crate's parser uses), sized to the pane, so the
//! screen rules read what the pane shows without asking tmux (`capture-pane`). tmux still gives
//! the model its start — [`PaneScreen::seeded`] builds one from `capture-pane -p -e -J` — and
//! checks it after a resize and on a sample: the connection compares and replaces it then.
//!
//! No scrollback is kept: the rules read the visible screen only. Memory is the two grids (main
//! and alternate) of 32-byte cells: at 200×50, 640 KiB; sizes are capped at [`MAX_ROWS`] ×
//! [`MAX_COLS`].

use std::num::NonZeroU16;

/// Largest model kept, in rows; a taller pane is modelled at this height (its bottom rows, as
/// the cursor keeps them).
pub const MAX_ROWS: u16 = 500;
/// Largest model kept, in columns.
pub const MAX_COLS: u16 = 1000;

/// One pane's screen.
pub struct PaneScreen {
    parser: vt100::Parser,
}

/// Where a pane's cursor is and whether it shows its alternate screen, as tmux reports it
/// (`#{pane_width} #{pane_height} #{cursor_x} #{cursor_y} #{alternate_on}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PaneGeometry {
    pub cols: u16,
    pub rows: u16,
    pub cursor_x: u16,
    pub cursor_y: u16,
    pub alternate: bool,
}

/// The `display-message` format whose reply [`PaneGeometry::parse`] reads.
pub const GEOMETRY_FORMAT: &str =
    "#{pane_width} #{pane_height} #{cursor_x} #{cursor_y} #{alternate_on}";

impl PaneGeometry {
    /// Read a reply to [`GEOMETRY_FORMAT`].
    pub fn parse(reply: &str) -> Option<PaneGeometry> {
        let mut words = reply.split_whitespace();
        let mut number = || words.next()?.parse::<u16>().ok();
        let (cols, rows, cursor_x, cursor_y) = (number()?, number()?, number()?, number()?);
        let alternate = number()? == 1;
        Some(PaneGeometry {
            cols,
            rows,
            cursor_x,
            cursor_y,
            alternate,
        })
    }
}

fn dimension(n: u16, max: u16) -> NonZeroU16 {
    NonZeroU16::new(n.clamp(1, max)).unwrap_or(NonZeroU16::MIN)
}

impl PaneScreen {
    /// A blank screen of `rows` × `cols` (each at least 1, at most the caps).
    pub fn new(rows: u16, cols: u16) -> PaneScreen {
        PaneScreen {
            parser: vt100::Parser::new(dimension(rows, MAX_ROWS), dimension(cols, MAX_COLS), 0),
        }
    }

    /// A model of what tmux showed: `main` is the normal screen when the pane shows its
    /// alternate one (`capture-pane -a`), `visible` what it shows, both as `capture-pane -p -e
    /// -J` prints them (one line per row, wrapped rows joined, attributes as escapes).
    pub fn seeded(geometry: PaneGeometry, main: Option<&[Vec<u8>]>, visible: &[Vec<u8>]) -> Self {
        let mut screen = PaneScreen::new(geometry.rows, geometry.cols);
        if geometry.alternate {
            if let Some(main) = main {
                screen.draw_lines(main);
            }
            // Save the cursor, switch to the alternate screen, clear it.
            screen.feed(b"\x1b[?1049h");
        }
        screen.draw_lines(visible);
        // Attributes off, then the cursor where tmux has it (1-based).
        let home = format!(
            "\x1b[0m\x1b[{};{}H",
            u32::from(geometry.cursor_y) + 1,
            u32::from(geometry.cursor_x) + 1
        );
        screen.feed(home.as_bytes());
        screen
    }

    /// Draw captured lines from the top left, one row (or several, for a joined wrapped row)
    /// each. Trailing blank lines are not drawn: they would scroll a full screen.
    fn draw_lines(&mut self, lines: &[Vec<u8>]) {
        let last = lines
            .iter()
            .rposition(|l| l.iter().any(|b| !b.is_ascii_whitespace()))
            .map_or(0, |i| i + 1);
        self.feed(b"\x1b[H\x1b[2J");
        for (i, line) in lines[..last].iter().enumerate() {
            if i > 0 {
                self.feed(b"\x1b[0m\r\n");
            }
            self.feed(line);
        }
    }

    /// Bytes the pane printed.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.parser.process(bytes);
    }

    /// (rows, cols).
    pub fn size(&self) -> (u16, u16) {
        let (rows, cols) = self.parser.screen().size();
        (rows.get(), cols.get())
    }

    /// The pane was resized.
    pub fn resize(&mut self, rows: u16, cols: u16) {
        self.parser
            .set_size(dimension(rows, MAX_ROWS), dimension(cols, MAX_COLS));
    }

    /// What the screen shows, as `capture-pane -p -J` prints it: one line per row, a wrapped row
    /// joined with the next, trailing blanks of each line and trailing empty lines left out.
    pub fn text(&self) -> String {
        let contents = self.parser.screen().contents();
        let mut out = String::with_capacity(contents.len());
        for line in contents.lines() {
            out.push_str(line.trim_end());
            out.push('\n');
        }
        while out.ends_with('\n') {
            out.pop();
        }
        out
    }

    /// The screen with its colours and attributes, as escape sequences (for a preview).
    pub fn formatted(&self) -> String {
        self.parser.screen().contents_formatted()
    }

    /// Does the alternate screen show?
    pub fn alternate(&self) -> bool {
        self.parser.screen().alternate_screen()
    }
}

/// Where two screen texts first differ: the line (1-based) and each side's line there, cut to
/// 200 characters (for a log line).
pub fn first_difference<'a>(a: &'a str, b: &'a str) -> (usize, String, String) {
    let cut = |l: Option<&str>| l.unwrap_or("").chars().take(200).collect::<String>();
    let (mut la, mut lb) = (a.lines(), b.lines());
    let mut n = 1;
    loop {
        let (x, y) = (la.next(), lb.next());
        if x != y || x.is_none() {
            return (n, cut(x), cut(y));
        }
        n += 1;
    }
}

/// One pane of a layout: (pane id without '%', cols, rows).
pub type LayoutPane = (u32, u16, u16);

/// The size of each pane in a tmux layout string (`%layout-change`'s, `#{window_layout}`):
/// `(pane id without '%', cols, rows)` for every leaf `WxH,X,Y,ID`; containers
/// (`WxH,X,Y{…}` or `[…]`) have no id. Anything malformed is skipped.
pub fn layout_panes(layout: &str) -> Vec<LayoutPane> {
    // A checksum of four hex digits and a comma lead the string.
    let body = layout.split_once(',').map_or(layout, |(_, rest)| rest);
    let bytes = body.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        // A cell starts at the beginning or after one of `,{[`.
        let starts = i == 0 || matches!(bytes[i - 1], b',' | b'{' | b'[');
        if starts && bytes[i].is_ascii_digit() {
            if let Some((leaf, next)) = leaf(bytes, i) {
                out.extend(leaf);
                i = next;
                continue;
            }
        }
        i += 1;
    }
    out
}

/// Parse `WxH,X,Y` at `i`, then `,ID` when a leaf: (the leaf, where to go on).
fn leaf(bytes: &[u8], i: usize) -> Option<(Option<LayoutPane>, usize)> {
    let number = |at: usize| -> Option<(u64, usize)> {
        let end = at
            + bytes[at..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
        let n = std::str::from_utf8(&bytes[at..end]).ok()?.parse().ok()?;
        (end > at).then_some((n, end))
    };
    let (w, at) = number(i)?;
    (bytes.get(at) == Some(&b'x')).then_some(())?;
    let (h, at) = number(at + 1)?;
    (bytes.get(at) == Some(&b',')).then_some(())?;
    let (_x, at) = number(at + 1)?;
    (bytes.get(at) == Some(&b',')).then_some(())?;
    let (_y, at) = number(at + 1)?;
    match bytes.get(at) {
        Some(b',') => {
            let (id, end) = number(at + 1)?;
            if !matches!(bytes.get(end), None | Some(b',' | b'}' | b']')) {
                return None;
            }
            let leaf = (
                u32::try_from(id).ok()?,
                u16::try_from(w).ok()?,
                u16::try_from(h).ok()?,
            );
            Some((Some(leaf), end))
        }
        // A container: its cells follow.
        Some(b'{' | b'[') => Some((None, at + 1)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_drawn_in_pieces_reads_whole() {
        let mut s = PaneScreen::new(5, 20);
        s.feed(b"hello\r\n");
        s.feed(b"Continue?");
        s.feed(b" (y/N) ");
        assert_eq!(s.text(), "hello\nContinue? (y/N)");
        // A TUI redraws a line in place.
        s.feed(b"\r\x1b[2KDone.");
        assert_eq!(s.text(), "hello\nDone.");
    }

    #[test]
    fn wrapped_rows_join_like_capture_pane_j() {
        let mut s = PaneScreen::new(3, 10);
        s.feed(b"0123456789abcdef\r\nnext");
        assert_eq!(s.text(), "0123456789abcdef\nnext");
    }

    #[test]
    fn a_seed_from_capture_pane_draws_the_same_screen() {
        let visible: Vec<Vec<u8>> = vec![
            b"\x1b[1mbold\x1b[0m line".to_vec(),
            b"".to_vec(),
            b"0123456789abcdef".to_vec(),
            b"$ ".to_vec(),
            b"".to_vec(),
        ];
        let g = PaneGeometry::parse("10 6 2 4 0").unwrap();
        let s = PaneScreen::seeded(g, None, &visible);
        assert_eq!(s.text(), "bold line\n\n0123456789abcdef\n$");
        assert_eq!(s.size(), (6, 10));
        // The cursor is where tmux said: typing continues the prompt.
        let mut s = s;
        s.feed(b"ls");
        assert_eq!(s.text(), "bold line\n\n0123456789abcdef\n$ ls");
    }

    #[test]
    fn a_seed_in_the_alternate_screen_keeps_the_main_one_for_later() {
        let g = PaneGeometry::parse("20 4 0 0 1").unwrap();
        let main = vec![b"$ vim".to_vec()];
        let mut s = PaneScreen::seeded(g, Some(&main), &[b"~ editor".to_vec()]);
        assert!(s.alternate());
        assert_eq!(s.text(), "~ editor");
        s.feed(b"\x1b[?1049l");
        assert_eq!(s.text(), "$ vim");
    }

    #[test]
    fn a_full_screen_seed_does_not_scroll() {
        let lines: Vec<Vec<u8>> = (0..4).map(|i| format!("row {i}").into_bytes()).collect();
        let g = PaneGeometry::parse("10 4 0 3 0").unwrap();
        let s = PaneScreen::seeded(g, None, &lines);
        assert_eq!(s.text(), "row 0\nrow 1\nrow 2\nrow 3");
    }

    #[test]
    fn two_megabytes_of_noise_and_escapes_never_panic() {
        // Random bytes, with escape sequences' pieces made common, and resizes between chunks.
        let mut n: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            n ^= n << 13;
            n ^= n >> 7;
            n ^= n << 17;
            n
        };
        let pieces: [&[u8]; 8] = [
            b"\x1b[",
            b"\x1b]",
            b"\x1bP",
            b"\x07",
            b";",
            b"?1049h",
            b"\x1b[?1049l",
            b"\r\n",
        ];
        let mut s = PaneScreen::new(50, 200);
        let mut fed = 0;
        while fed < 2 << 20 {
            let mut chunk = Vec::with_capacity(4096);
            while chunk.len() < 4096 {
                let r = next();
                if r % 4 == 0 {
                    chunk.extend_from_slice(pieces[(r >> 8) as usize % pieces.len()]);
                } else {
                    chunk.push((r >> 16) as u8);
                }
            }
            s.feed(&chunk);
            fed += chunk.len();
            if next() % 64 == 0 {
                s.resize((next() % 300) as u16, (next() % 600) as u16);
            }
            let (rows, _) = s.size();
            assert!(s.text().lines().count() <= usize::from(rows));
        }
    }

    #[test]
    fn resizes_and_absurd_sizes_are_clamped() {
        let mut s = PaneScreen::new(0, 0);
        assert_eq!(s.size(), (1, 1));
        s.resize(u16::MAX, u16::MAX);
        assert_eq!(s.size(), (MAX_ROWS, MAX_COLS));
        s.resize(50, 200);
        assert_eq!(s.size(), (50, 200));
    }

    #[test]
    fn geometry_replies_that_are_not_numbers_are_refused() {
        assert_eq!(PaneGeometry::parse("80 24 0"), None);
        assert_eq!(PaneGeometry::parse("80 x 0 0 0"), None);
        assert_eq!(
            PaneGeometry::parse("80 24 3 5 0"),
            Some(PaneGeometry {
                cols: 80,
                rows: 24,
                cursor_x: 3,
                cursor_y: 5,
                alternate: false
            })
        );
    }

    #[test]
    fn the_first_difference_names_its_line() {
        assert_eq!(
            first_difference("a\nb\nc", "a\nB\nc"),
            (2, "b".into(), "B".into())
        );
        assert_eq!(
            first_difference("a", "a\nmore"),
            (2, "".into(), "more".into())
        );
    }

    #[test]
    fn layouts_give_each_pane_its_size() {
        // One pane; two side by side; nested (shapes tmux 3.3a prints).
        assert_eq!(layout_panes("b25d,80x24,0,0,2"), vec![(2, 80, 24)]);
        assert_eq!(
            layout_panes("bb62,159x48,0,0{79x48,0,0,1,79x48,80,0,2}"),
            vec![(1, 79, 48), (2, 79, 48)]
        );
        assert_eq!(
            layout_panes("1f3e,200x50,0,0[200x25,0,0,3,200x24,0,26{100x24,0,26,4,99x24,101,26,5}]"),
            vec![(3, 200, 25), (4, 100, 24), (5, 99, 24)]
        );
        assert_eq!(layout_panes("garbage"), vec![]);
        assert_eq!(layout_panes("x,80x24,0,0"), vec![]);
        assert_eq!(layout_panes("x,99999999x24,0,0,1"), vec![]);
    }
}
