//! tmux integration for volee: pure byte-level cores plus the thin I/O around them.
//!
//! volee watches agents through one tmux control-mode connection per server
//! (`tmux -C attach -t SESSION -f ignore-size`). This crate holds the byte-level cores of that
//! integration, with no I/O so they can be tested and fuzzed directly:
//!
//! * [`control`]: an incremental parser for what `tmux -C` writes to stdout, turning `%output`
//!   into per-pane activity, bell and title events (one `vte` parser per pane) and collecting
//!   `%begin`/`%end` reply blocks.
//! * [`format`]: building `-F` formats whose replies split safely, and quoting arguments so a
//!   command line written to control-mode stdin (or a file for `source-file`) reaches tmux verbatim.
//! * [`screen`]: a pane's screen modelled from its output (a terminal emulator, `vt100`), seeded
//!   and checked from `capture-pane`; pane sizes from tmux layout strings.
//! * [`connection`]: one control-mode client owned by the daemon: commands in, replies and
//!   notifications out, the screen models of the panes it is asked to model kept in stream
//!   order.
//! * [`server`]: one-shot `tmux -S SOCKET …` commands for rare structural work.
//!
//! Making agent text inert inside tmux formats is `volee_view::tmux_text` (pure, shared with the
//! zellij plugin); this crate's real-tmux tests check it renders literally.
//!
//! Everything here was checked against tmux 3.3a; the tests that need a real tmux start a private
//! server on a socket in a temporary directory, skip when tmux is missing, and fail instead when
//! `CI` is set.

pub mod connection;
pub mod control;
pub mod format;
pub mod screen;
pub mod server;
