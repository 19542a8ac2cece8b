//! Pure parsers over the bytes of `/proc/PID/{stat,status,cmdline,environ}` (hostile input:
//! process names and arguments are chosen by whoever started the process).
//!
//! `stat` is parsed by `procfs-core` (the parsing half of `procfs`, which parses from any
//! reader, so the scanner keeps its own reads, buffer and root). The others stay ours where
//! `procfs` does not serve; each says why, measured against `procfs`/`procfs-core` 0.18.

use procfs_core::FromRead as _;

/// The fields of `/proc/PID/stat` volee uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    pub pid: u32,
    /// `comm`, at most 15 bytes, may contain spaces and parentheses.
    pub comm: String,
    pub state: char,
    pub ppid: u32,
    pub pgrp: i32,
    pub session: i32,
    /// Controlling terminal as a device number (0 = none).
    pub tty_nr: u32,
    /// Foreground process group of that terminal (-1 = none).
    pub tpgid: i32,
    /// Start time in clock ticks after boot (with the pid, identifies a process across pid reuse).
    pub start_time: u64,
    /// A zombie's wait status (`exit_code`, the last field since Linux 3.5).
    pub exit_code: Option<i32>,
}

impl Stat {
    /// A zombie's wait status as `(exit status, signal)`; None while it runs (or once reaped).
    pub fn zombie_exit(&self) -> Option<(Option<i32>, Option<i32>)> {
        if self.state != 'Z' {
            return None;
        }
        let code = self.exit_code?;
        Some(if code & 0x7f == 0 {
            (Some((code >> 8) & 0xff), None)
        } else {
            (None, Some(code & 0x7f))
        })
    }

    /// Alive (not a zombie) and the leader of its own process group, so signalling the group
    /// cannot hit an unrelated process that reused the pid.
    pub fn leads_live_group(&self) -> bool {
        self.state != 'Z' && i64::from(self.pgrp) == i64::from(self.pid)
    }
}

/// Parse `stat` with `procfs-core`'s parser, which takes the name between the first `(` and the
/// **last** `)` (a process can call itself `a) b (c`, so splitting on spaces or on the first `)`
/// goes wrong) and needs every field up to `cnswap` (the 37 a kernel since 2.1.22 writes).
///
/// Its parser (0.18) slices at `(`−1 and `)`+2 unchecked: `(x) S 1`, `x) (y`, `12 (x)`,
/// `1 (x)é S` and `é(x) S 1` panic in it. So the kernel's shape — `PID (` and `) ` — is checked
/// first, on the same trimmed text it parses; a real `stat` always has it. It costs 1.3 µs a
/// line against the 0.3 µs of the hand-written parser it replaced, next to 8.8 µs for the `open`
/// and `read` of the file (`docs/benchmarks.md`, discovery).
pub fn parse_stat(bytes: &[u8]) -> Option<Stat> {
    let text = String::from_utf8_lossy(bytes);
    let line = text.trim();
    let open = line.find('(')?;
    let close = line.rfind(')')?;
    let b = line.as_bytes();
    let kernel_shaped = open > 0
        && close > open
        && b.get(open - 1) == Some(&b' ')
        && b.get(close + 1) == Some(&b' ');
    if !kernel_shaped {
        return None;
    }
    let s = procfs_core::process::Stat::from_read(b).ok()?;
    Some(Stat {
        pid: u32::try_from(s.pid).ok()?,
        comm: s.comm,
        state: s.state,
        ppid: u32::try_from(s.ppid).ok()?,
        pgrp: s.pgrp,
        session: s.session,
        // A device number: the bits as they are.
        tty_nr: s.tty_nr as u32,
        tpgid: s.tpgid,
        start_time: s.starttime,
        exit_code: s.exit_code,
    })
}

/// Who a process runs as, from the `Uid:` line of `/proc/PID/status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    /// The real uid: the user who started the process.
    pub real: u32,
    /// The effective uid: the user whose rights it has (differs from `real` under setuid).
    pub effective: u32,
}

/// The `Uid:` line of `status` (`Uid:\treal\teffective\tsaved\tfs`). Only the line's start
/// counts: `Name:` comes first and holds the process's (chosen) name, which may contain anything
/// but a newline, so a name like `x\tUid: 0` cannot fake the line.
///
/// Ours, not `procfs_core::process::Status` (0.18), measured on a real 1.4 kB `status`
/// (`cargo bench -p volee-procscan --bench parse`): that parses all ~55 lines into a map of
/// owned strings, 18.6 µs against 0.1 µs here (an `open` and `read` of `stat` costs 8.8 µs), and
/// it fails as a whole on a `Name` holding a byte ≥ 0x80 (the kernel writes the chosen name's
/// bytes as they are; its line reader wants UTF-8) and on a file without `Tgid`, `Groups`,
/// `SigQ` and some twenty more lines it requires.
pub fn parse_status_owner(bytes: &[u8]) -> Option<Owner> {
    let line = bytes
        .split(|&b| b == b'\n')
        .find_map(|l| l.strip_prefix(b"Uid:"))?;
    let text = std::str::from_utf8(line).ok()?;
    let mut ids = text.split_ascii_whitespace().map(|w| w.parse::<u32>());
    let real = ids.next()?.ok()?;
    let effective = ids.next()?.ok()?;
    Some(Owner { real, effective })
}

/// NUL-separated arguments (a process may rewrite its argv: trailing NULs and padding are
/// dropped, and a single argument holding spaces is kept as it is).
///
/// Ours: `procfs-core` has no `cmdline` parser, and `procfs`'s `Process::cmdline` (0.18) reads
/// the file as UTF-8 (one non-UTF-8 argument loses them all) and drops empty arguments, which
/// shifts the positions the matcher and the profiles' value flags read.
pub fn parse_cmdline(bytes: &[u8]) -> Vec<String> {
    let trimmed = match bytes.iter().rposition(|&b| b != 0) {
        Some(last) => &bytes[..=last],
        None => return Vec::new(),
    };
    trimmed
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// `KEY=VALUE` pairs of `environ`; entries without `=` are skipped.
///
/// Ours: `procfs-core` has no `environ` parser, and `procfs`'s `Process::environ` (0.18) returns
/// a map that keeps the *last* of two entries with one key, where `getenv` in the process reads
/// the first; the list keeps the order.
pub fn parse_environ(bytes: &[u8]) -> Vec<(String, String)> {
    bytes
        .split(|&b| b == 0)
        .filter_map(|entry| {
            let eq = entry.iter().position(|&b| b == b'=')?;
            if eq == 0 {
                return None;
            }
            Some((
                String::from_utf8_lossy(&entry[..eq]).into_owned(),
                String::from_utf8_lossy(&entry[eq + 1..]).into_owned(),
            ))
        })
        .collect()
}

/// The pseudo-terminal path of a `tty_nr` (`/dev/pts/N` for Unix98 ptys, major 136–143). The
/// major/minor split is the one `procfs_core::process::Stat::tty_nr` does; ours works on the
/// number volee keeps, not on procfs's whole `Stat`.
pub fn pts_path(tty_nr: u32) -> Option<String> {
    let major = (tty_nr >> 8) & 0xfff;
    let minor = (tty_nr & 0xff) | ((tty_nr >> 12) & 0xfff00);
    (136..=143)
        .contains(&major)
        .then(|| format!("/dev/pts/{}", (major - 136) * 256 + minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &[u8] = b"4242 (claude) S 4200 4242 4200 34818 4242 4194560 1 0 0 0 5 2 0 0 20 0 12 0 987654 100000 200 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0";

    #[test]
    fn a_zombie_keeps_its_wait_status_and_leads_no_live_group() {
        let exited = b"15890 (s h) x) Z 1 15890 15890 0 -1 4227084 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 768";
        let stat = parse_stat(exited).unwrap();
        assert_eq!(stat.zombie_exit(), Some((Some(3), None)));
        assert!(!stat.leads_live_group());
        let text = String::from_utf8_lossy(exited);
        let killed = parse_stat(text.replace(" 768", " 9").as_bytes()).unwrap();
        assert_eq!(killed.zombie_exit(), Some((None, Some(9))));
        let running = parse_stat(text.replace(") Z ", ") S ").as_bytes()).unwrap();
        assert_eq!(running.zombie_exit(), None);
        assert!(running.leads_live_group(), "pgrp 15890 is its own pid");
        let child = parse_stat(STAT).unwrap();
        assert!(child.leads_live_group(), "pgrp 4242 of pid 4242");
        assert_eq!(child.zombie_exit(), None);
    }

    #[test]
    fn stat_fields() {
        let s = parse_stat(STAT).unwrap();
        assert_eq!(
            (s.pid, s.comm.as_str(), s.state, s.ppid),
            (4242, "claude", 'S', 4200)
        );
        assert_eq!((s.pgrp, s.session, s.tpgid), (4242, 4200, 4242));
        assert_eq!(s.start_time, 987654);
        assert_eq!(pts_path(s.tty_nr).as_deref(), Some("/dev/pts/2"));
    }

    #[test]
    fn names_with_spaces_and_parentheses() {
        let line = String::from_utf8_lossy(STAT).replace("(claude)", "(a) b (c)");
        let s = parse_stat(line.as_bytes()).unwrap();
        assert_eq!(s.comm, "a) b (c");
        assert_eq!(s.ppid, 4200);
    }

    #[test]
    fn broken_stat_is_none_not_a_panic() {
        for bad in [
            &b""[..],
            b"12",
            b"12 (x",
            b"x) (y",
            b"12 (x) S",
            b"\xff\xfe (z) S 1 2",
            // Each of these panics in procfs-core's parser without the shape check.
            b"(x) S 1",
            b"12 (x)",
            "1 (x)\u{e9} S".as_bytes(),
            "\u{e9}(x) S 1".as_bytes(),
            // Cut before `cnswap` (field 37): not what a kernel writes.
            b"12 (x) S 1 12 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 777 1 1",
        ] {
            assert_eq!(parse_stat(bad), None);
        }
    }

    #[test]
    fn status_owner() {
        let status = b"Name:\tclaude\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t1001\t1001\t1001\t1001\nGid:\t1001\t1001\t1001\t1001\n";
        assert_eq!(
            parse_status_owner(status),
            Some(Owner {
                real: 1001,
                effective: 1001
            })
        );
        let setuid = b"Name:\tsu\nUid:\t1000\t0\t0\t0\n";
        assert_eq!(
            parse_status_owner(setuid),
            Some(Owner {
                real: 1000,
                effective: 0
            })
        );
        // The kernel escapes a newline in the name, but a name never makes a line of its own.
        let hostile = b"Name:\tUid: 0 0 0 0\nUid:\t1001\t1001\t1001\t1001\n";
        assert_eq!(parse_status_owner(hostile).map(|o| o.real), Some(1001));
        for bad in [
            &b""[..],
            b"Name:\tx\n",
            b"Uid:\t\n",
            b"Uid:\tx\t1\n",
            b"Uid:\t5\n",
        ] {
            assert_eq!(parse_status_owner(bad), None);
        }
    }

    #[test]
    fn cmdline_and_environ() {
        assert_eq!(
            parse_cmdline(b"node\0/usr/lib/node_modules/@google/gemini-cli/dist/index.js\0\0\0"),
            [
                "node",
                "/usr/lib/node_modules/@google/gemini-cli/dist/index.js"
            ]
        );
        assert_eq!(parse_cmdline(b"claude --resume x"), ["claude --resume x"]);
        assert!(parse_cmdline(b"\0\0").is_empty());
        let env = parse_environ(b"A=1\0BAD\0=x\0ZELLIJ_PANE_ID=3\0");
        assert_eq!(
            env,
            [
                ("A".into(), "1".into()),
                ("ZELLIJ_PANE_ID".into(), "3".into())
            ]
        );
    }
}
