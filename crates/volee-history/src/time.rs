//! Timestamps as the harnesses write them (RFC 3339, `Z` or `+00:00`, up to nanoseconds) to
//! milliseconds since the epoch.

use std::time::UNIX_EPOCH;

/// Milliseconds since the epoch of an RFC 3339 time; None when it is not one.
pub fn parse_ms(text: &str) -> Option<i64> {
    let text = text.trim();
    let text = text
        .strip_suffix("+00:00")
        .map(|t| format!("{t}Z"))
        .unwrap_or_else(|| text.to_owned());
    let time = humantime::parse_rfc3339_weak(text.trim_end_matches('Z')).ok()?;
    let ms = time.duration_since(UNIX_EPOCH).ok()?.as_millis();
    i64::try_from(ms).ok()
}

/// An epoch-milliseconds value as RFC 3339 (UTC, milliseconds).
pub fn format_ms(ms: i64) -> String {
    let t = UNIX_EPOCH + std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_millis(t).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_harnesses_forms_parse() {
        assert_eq!(
            parse_ms("2026-12-04T08:52:22.860Z"),
            Some(1_796_374_342_860)
        );
        assert_eq!(
            parse_ms("2026-12-04T08:53:19.942486929+00:00"),
            Some(1_796_374_399_942)
        );
        assert_eq!(parse_ms("yesterday"), None);
        assert_eq!(format_ms(1_796_374_342_860), "2026-12-04T08:52:22.860Z");
    }
}
