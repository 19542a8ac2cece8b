//! Fuzz the `/proc` parsers: `cargo +nightly fuzz run proc_parsers` (from `fuzz/`).
//! Process names and arguments are chosen by whoever started a process: never panic (`stat` goes
//! through procfs-core's parser, which panics on some shapes a kernel never writes — volee checks
//! the shape first), and a parsed `stat` keeps the name between the first `(` and the last `)`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use volee_procscan::{parse_cmdline, parse_environ, parse_stat, parse_status_owner, pts_path};

fuzz_target!(|data: &[u8]| {
    if let Some(stat) = parse_stat(data) {
        let text = String::from_utf8_lossy(data);
        let line = text.trim();
        let name = line
            .find('(')
            .zip(line.rfind(')'))
            .and_then(|(open, close)| line.get(open + 1..close));
        assert_eq!(name, Some(stat.comm.as_str()));
        let _ = pts_path(stat.tty_nr);
        // A zombie's wait status is a byte of status or a signal, never both.
        if let Some((status, signal)) = stat.zombie_exit() {
            assert!(status.is_some() != signal.is_some());
            assert!(status.is_none_or(|s| (0..256).contains(&s)));
        }
        let _ = stat.leads_live_group();
    }
    let _ = parse_status_owner(data);
    let _ = parse_cmdline(data);
    let _ = parse_environ(data);
});
