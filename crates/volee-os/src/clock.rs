//! The wall clock, in the unit volee records times in.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch; 0 for a clock set before it (nothing volee records can
/// then be ordered anyway, and a panic would take the daemon down).
pub fn now_ms() -> u64 {
    ms_since_epoch(SystemTime::now())
}

/// Milliseconds since the Unix epoch of `time` (a file's mtime, say); 0 before the epoch.
pub fn ms_since_epoch(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_clock_reads_milliseconds_since_the_epoch() {
        let before = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let now = now_ms();
        assert!(now >= before && now - before < 5_000, "{before} {now}");
        assert_eq!(
            ms_since_epoch(UNIX_EPOCH + Duration::from_millis(1234)),
            1234
        );
        assert_eq!(ms_since_epoch(UNIX_EPOCH - Duration::from_secs(1)), 0);
    }
}
