//! A stand-in for an ntfy server on `127.0.0.1` (a free port): it speaks ntfy's publish API — a
//! `POST` (or `PUT`) to `/TOPIC` with the message as the body and the `Title`, `Priority` and
//! `Tags` headers — and records every request it gets, with the status it answered.
//!
//! Answers follow a script of statuses ([`NtfyServer::start_answering`]: `[500]` fails the first
//! publish, as a server restarting would), then `200` with ntfy's message JSON (`id`, `time`,
//! `event: "message"`, `topic`, `message`, `title`, `priority`); a failure carries ntfy's error
//! JSON (`{"code":…,"http":…,"error":…}`). Anything but a publish is answered `404`.
//!
//! HTTP/1.1 with keep-alive and `Content-Length` bodies (what reqwest sends); one thread accepts,
//! one thread per connection; dropping the server stops them all within ~100 ms.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::http1::Reader;

/// One request the server got.
#[derive(Debug, Clone)]
pub struct Published {
    pub method: String,
    /// `/TOPIC` (with a query string, if any).
    pub path: String,
    /// Names lower-cased, in arrival order.
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// The status it was answered with.
    pub status: u16,
    pub at: Instant,
}

impl Published {
    /// A header's value, by name in any case.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }
}

struct Shared {
    script: Mutex<VecDeque<u16>>,
    log: Mutex<Vec<Published>>,
    stop: AtomicBool,
}

/// The running server; dropping it stops it.
pub struct NtfyServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

/// Largest request head and body accepted.
const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 1024 * 1024;
/// How often blocked reads look at the stop flag.
const POLL: Duration = Duration::from_millis(100);

impl NtfyServer {
    /// Listen on 127.0.0.1 (a free port), answering every publish with 200.
    pub fn start() -> NtfyServer {
        NtfyServer::start_answering(&[])
    }

    /// The same, answering the first publishes with `statuses` in turn (then 200).
    pub fn start_answering(statuses: &[u16]) -> NtfyServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            script: Mutex::new(statuses.iter().copied().collect()),
            log: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
        });
        let accept = crate::http1::accept(
            listener,
            "ntfy-server",
            shared.clone(),
            |s| &s.stop,
            serve_connection,
        );
        NtfyServer {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    /// The URL of `topic` on this server: `http://127.0.0.1:PORT/TOPIC`.
    pub fn topic_url(&self, topic: &str) -> String {
        format!("http://{}/{topic}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Published> {
        self.shared
            .log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The publishes it accepted (answered 2xx).
    pub fn delivered(&self) -> Vec<Published> {
        self.requests()
            .into_iter()
            .filter(|p| (200..300).contains(&p.status))
            .collect()
    }

    /// Every request, one line each, for a failure report.
    pub fn summary(&self) -> String {
        self.requests()
            .iter()
            .map(|p| {
                format!(
                    "{} {} -> {} title={:?} priority={:?} body={:?}",
                    p.method,
                    p.path,
                    p.status,
                    p.header("title"),
                    p.header("priority"),
                    p.body
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for NtfyServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

fn serve_connection(stream: TcpStream, shared: &Shared) -> io::Result<()> {
    stream.set_read_timeout(Some(POLL))?;
    stream.set_nodelay(true)?;
    let mut reader = Reader::new(&stream, &shared.stop, MAX_HEAD, MAX_BODY);
    while let Some(req) = reader.request()? {
        let (method, path, headers) = (&req.method, &req.path, &req.headers);
        let header = |name: &str| req.header(name);
        let close = header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
        let body = String::from_utf8_lossy(&req.body).into_owned();
        let topic = path
            .trim_start_matches('/')
            .split('?')
            .next()
            .unwrap_or("")
            .to_string();
        let publish = matches!(method.as_str(), "POST" | "PUT") && !topic.is_empty();
        let status = if publish {
            shared
                .script
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pop_front()
                .unwrap_or(200)
        } else {
            404
        };
        let answer = if (200..300).contains(&status) {
            json!({
                "id": format!("standin{}", shared.log.lock().unwrap_or_else(|e| e.into_inner()).len()),
                "time": std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs()),
                "event": "message",
                "topic": topic,
                "message": body,
                "title": header("title"),
                "priority": header("priority").and_then(|p| p.parse::<u8>().ok()),
            })
        } else {
            json!({ "code": u32::from(status) * 100, "http": status, "error": reason(status).to_lowercase() })
        };
        let answer = format!("{answer}\n");
        let out = format!(
            "HTTP/1.1 {status} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: {}\r\n\r\n{answer}",
            reason(status),
            answer.len(),
            if close { "close" } else { "keep-alive" }
        );
        shared
            .log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Published {
                method: method.clone(),
                path: path.clone(),
                headers: headers.clone(),
                body,
                status,
                at: Instant::now(),
            });
        let mut w: &TcpStream = &stream;
        w.write_all(out.as_bytes())?;
        w.flush()?;
        if close {
            break;
        }
    }
    Ok(())
}
