//! Where Ollama listens: `OLLAMA_HOST` read the way Ollama itself reads it
//! (`envconfig.Host()`): `host:port`, `host`, `:port`, with or without `http://`/`https://`, an
//! optional path; default `http://127.0.0.1:11434`.

/// The default when `OLLAMA_HOST` is unset or empty.
pub const DEFAULT_BASE_URL: &str = "http://127.0.0.1:11434";

/// The base URL from the environment's `OLLAMA_HOST`.
pub fn base_url_from_env() -> String {
    match std::env::var("OLLAMA_HOST") {
        Ok(v) => parse_ollama_host(&v),
        Err(_) => DEFAULT_BASE_URL.into(),
    }
}

/// `OLLAMA_HOST` as a base URL without a trailing slash, e.g. `0.0.0.0` → `http://127.0.0.1:11434`,
/// `example.com` → `http://example.com:11434`, `https://example.com` → `https://example.com:443`,
/// `:8080` → `http://127.0.0.1:8080`, `[::1]:9` → `http://[::1]:9`.
///
/// As in Ollama: without a scheme the port defaults to 11434, with `http://` to 80 and with
/// `https://` to 443; a port that is not a number in range falls back to that default. One
/// departure: an unspecified address (`0.0.0.0`, `::`) — what a server is told to listen on —
/// becomes the loopback address, which is where a client on the same machine reaches it.
pub fn parse_ollama_host(value: &str) -> String {
    let s = value.trim();
    if s.is_empty() {
        return DEFAULT_BASE_URL.into();
    }
    let (scheme, rest, default_port) = match s.split_once("://") {
        None if s == "ollama.com" => ("https", "ollama.com:443", "443"),
        None => ("http", s, "11434"),
        Some(("http", rest)) => ("http", rest, "80"),
        Some(("https", rest)) => ("https", rest, "443"),
        Some((other, rest)) => (other, rest, "11434"),
    };
    let (hostport, path) = match rest.split_once('/') {
        Some((hp, p)) => (hp, p.trim_end_matches('/')),
        None => (rest, ""),
    };
    let (host, port) = match split_host_port(hostport) {
        Some((h, p)) => (h.to_string(), p.to_string()),
        None => {
            let bare = hostport.trim_start_matches('[').trim_end_matches(']');
            let host = if bare.is_empty() {
                "127.0.0.1".to_string()
            } else {
                bare.to_string()
            };
            (host, default_port.to_string())
        }
    };
    let host = if host.is_empty() {
        "127.0.0.1".to_string()
    } else {
        host
    };
    let port = match port.parse::<u32>() {
        Ok(n) if n <= 65535 => port,
        _ => default_port.to_string(),
    };
    let host = match host.as_str() {
        "0.0.0.0" => "127.0.0.1".to_string(),
        "::" => "::1".to_string(),
        _ => host,
    };
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host
    };
    if path.is_empty() {
        format!("{scheme}://{host}:{port}")
    } else {
        format!("{scheme}://{host}:{port}/{path}")
    }
}

/// Go's `net.SplitHostPort`: `host:port` or `[v6]:port`; None when there is no port part.
fn split_host_port(s: &str) -> Option<(&str, &str)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = after.strip_prefix(':')?;
        return Some((host, port));
    }
    let (host, port) = s.rsplit_once(':')?;
    // A bare IPv6 address has several colons and no port.
    if host.contains(':') {
        return None;
    }
    Some((host, port))
}

#[cfg(test)]
mod tests {
    use super::parse_ollama_host as p;

    #[test]
    fn reads_ollama_host_like_ollama() {
        assert_eq!(p(""), "http://127.0.0.1:11434");
        assert_eq!(p("  "), "http://127.0.0.1:11434");
        assert_eq!(p("127.0.0.1:11435"), "http://127.0.0.1:11435");
        assert_eq!(p("0.0.0.0"), "http://127.0.0.1:11434");
        assert_eq!(p("0.0.0.0:8080"), "http://127.0.0.1:8080");
        assert_eq!(p(":8080"), "http://127.0.0.1:8080");
        assert_eq!(p("example.com"), "http://example.com:11434");
        assert_eq!(p("http://example.com"), "http://example.com:80");
        assert_eq!(p("https://example.com"), "https://example.com:443");
        assert_eq!(p("http://gpu-box:11434/"), "http://gpu-box:11434");
        assert_eq!(
            p("https://example.com/ollama"),
            "https://example.com:443/ollama"
        );
        assert_eq!(p("[::1]:9999"), "http://[::1]:9999");
        assert_eq!(p("::1"), "http://[::1]:11434");
        assert_eq!(p("[::]"), "http://[::1]:11434");
        assert_eq!(p("example.com:99999"), "http://example.com:11434");
        assert_eq!(p("example.com:abc"), "http://example.com:11434");
        assert_eq!(p("ollama.com"), "https://ollama.com:443");
    }
}
