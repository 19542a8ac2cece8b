//! Random bytes from the kernel (`getrandom(2)` through the `getrandom` crate, which needs no
//! `/dev/urandom` in a chroot), and the shapes volee gives them.

use std::io;

/// Fill `buf` from the kernel's random source.
pub fn fill(buf: &mut [u8]) -> io::Result<()> {
    getrandom::fill(buf)
        .map_err(|e| io::Error::other(format!("no random bytes from the kernel: {e}")))
}

/// `n` random bytes as lowercase hex (`2n` characters): hook tokens, event ids.
pub fn hex(n: usize) -> io::Result<String> {
    let mut buf = vec![0u8; n];
    fill(&mut buf)?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// A random version-4 UUID, `xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx` (a harness's `--session-id`).
pub fn uuid_v4() -> io::Result<String> {
    let mut b = [0u8; 16];
    fill(&mut b)?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    ))
}

/// `n` bytes for ids that must be unique, not secret (agent ids, session ids): the kernel's,
/// else the clock's nanoseconds and the pid mixed by xorshift — an id is never worth failing a
/// command for, and whoever makes the id retries on a clash.
pub fn unique_bytes(n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    if fill(&mut buf).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let mut x = (nanos ^ (u64::from(std::process::id()) << 32)) | 1;
        for b in &mut buf {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
    }
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_and_uuids_have_their_shapes_and_differ() {
        let a = hex(32).unwrap();
        assert_eq!(a.len(), 64);
        assert!(a
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(a, hex(32).unwrap());
        let u = uuid_v4().unwrap();
        let parts: Vec<&str> = u.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('4'), "{u}");
        assert!("89ab".contains(&parts[3][..1]), "{u}");
        assert_ne!(u, uuid_v4().unwrap());
        assert_eq!(unique_bytes(64).len(), 64);
        assert_ne!(unique_bytes(16), unique_bytes(16));
    }
}
