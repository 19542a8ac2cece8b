//! Pure parsers over the bytes of `/proc/PID/{stat,status,cmdline,environ}` (hostile input:
//! process names and arguments are chosen by whoever started the process).

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
}

/// Parse `stat`. The name is between the first `(` and the **last** `)`: a process can call itself
/// `a) b (c`, so splitting on spaces or on the first `)` goes wrong.
pub fn parse_stat(bytes: &[u8]) -> Option<Stat> {
    let open = bytes.iter().position(|&b| b == b'(')?;
    let close = bytes.iter().rposition(|&b| b == b')')?;
    if close < open {
        return None;
    }
    let pid = std::str::from_utf8(&bytes[..open])
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let comm = String::from_utf8_lossy(&bytes[open + 1..close]).into_owned();
    let rest = std::str::from_utf8(bytes.get(close + 1..)?).ok()?;
    // After the name: state(0) ppid(1) pgrp(2) session(3) tty_nr(4) tpgid(5) … starttime(19).
    // Walk the fields once without collecting them (this runs for every process on the machine).
    let mut f = rest.split_ascii_whitespace();
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    let pgrp = f.next()?.parse().ok()?;
    let session = f.next()?.parse().ok()?;
    let tty_nr = f.next()?.parse::<i64>().ok()? as u32;
    let tpgid = f.next()?.parse().ok()?;
    let start_time = f.nth(13)?.parse().ok()?;
    Some(Stat {
        pid,
        comm,
        state,
        ppid,
        pgrp,
        session,
        tty_nr,
        tpgid,
        start_time,
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

/// The pseudo-terminal path of a `tty_nr` (`/dev/pts/N` for Unix98 ptys, major 136–143).
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
