//! The one HTTP/1.1 request reader of the tests' loopback servers (the model server, the Ollama
//! and ntfy stand-ins): a request head parsed by `httparse`, then a body by `Content-Length` or
//! chunked; `Expect: 100-continue` answered. Reads poll a stop flag, so a server stops promptly.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// The most headers a request may have.
const MAX_HEADERS: usize = 64;

/// Accept connections on `listener` on a thread named `name`, each served by `serve` on a thread
/// of its own, until `stop(&shared)` is set (the server's drop sets it and connects once to
/// wake the accept).
pub fn accept<S: Send + Sync + 'static>(
    listener: TcpListener,
    name: &str,
    shared: Arc<S>,
    stop: fn(&S) -> &AtomicBool,
    serve: fn(TcpStream, &S) -> io::Result<()>,
) -> JoinHandle<()> {
    let conn_name = format!("{name}-conn");
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            for stream in listener.incoming() {
                if stop(&shared).load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let shared = shared.clone();
                let _ = std::thread::Builder::new()
                    .name(conn_name.clone())
                    .spawn(move || {
                        let _ = serve(stream, &shared);
                    });
            }
        })
        .unwrap()
}

/// One request as a server sees it; header names lowercase.
pub struct Request {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// A header's value by its lowercase name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A connection's bytes, read with the stream's timeout so a stop is noticed.
pub struct Reader<'a> {
    stream: &'a TcpStream,
    buf: Vec<u8>,
    stop: &'a AtomicBool,
    max_head: usize,
    max_body: usize,
}

impl<'a> Reader<'a> {
    /// A reader of `stream` (which should have a short read timeout) that gives up once `stop`
    /// is set, refusing heads over `max_head` and bodies over `max_body` bytes.
    pub fn new(
        stream: &'a TcpStream,
        stop: &'a AtomicBool,
        max_head: usize,
        max_body: usize,
    ) -> Reader<'a> {
        Reader {
            stream,
            buf: Vec::new(),
            stop,
            max_head,
            max_body,
        }
    }

    /// Read more; Ok(false) at end of stream.
    fn fill(&mut self) -> io::Result<bool> {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            if self.stop.load(Ordering::SeqCst) {
                return Err(io::Error::other("server stopped"));
            }
            let mut stream: &TcpStream = self.stream;
            match stream.read(&mut chunk) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return Ok(true);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Bytes up to and including `pat`; None at a clean end of stream before any byte.
    fn until(&mut self, pat: &[u8]) -> io::Result<Option<Vec<u8>>> {
        loop {
            if let Some(at) = self.buf.windows(pat.len()).position(|w| w == pat) {
                let rest = self.buf.split_off(at + pat.len());
                return Ok(Some(std::mem::replace(&mut self.buf, rest)));
            }
            if self.buf.len() > self.max_head {
                return Err(io::Error::other("request head too large"));
            }
            if !self.fill()? {
                return if self.buf.is_empty() {
                    Ok(None)
                } else {
                    Err(io::Error::other("connection closed mid-request"))
                };
            }
        }
    }

    fn exact(&mut self, n: usize) -> io::Result<Vec<u8>> {
        while self.buf.len() < n {
            if !self.fill()? {
                return Err(io::Error::other("connection closed mid-body"));
            }
        }
        let rest = self.buf.split_off(n);
        Ok(std::mem::replace(&mut self.buf, rest))
    }

    fn chunked(&mut self) -> io::Result<Vec<u8>> {
        let mut body = Vec::new();
        loop {
            let line = self
                .until(b"\r\n")?
                .ok_or_else(|| io::Error::other("connection closed in a chunk"))?;
            let text = String::from_utf8_lossy(&line);
            let size_text = text.trim().split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size_text, 16)
                .map_err(|_| io::Error::other(format!("bad chunk size {size_text:?}")))?;
            if size == 0 {
                // Trailers, then the empty line.
                loop {
                    let l = self
                        .until(b"\r\n")?
                        .ok_or_else(|| io::Error::other("connection closed in trailers"))?;
                    if l == b"\r\n" {
                        return Ok(body);
                    }
                }
            }
            if body.len() + size > self.max_body {
                return Err(io::Error::other("request body too large"));
            }
            body.extend(self.exact(size)?);
            self.exact(2)?;
        }
    }

    /// The next request; None at a clean end of stream.
    pub fn request(&mut self) -> io::Result<Option<Request>> {
        let Some(head) = self.until(b"\r\n\r\n")? else {
            return Ok(None);
        };
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut parsed = httparse::Request::new(&mut headers);
        match parsed.parse(&head) {
            Ok(httparse::Status::Complete(_)) => {}
            Ok(httparse::Status::Partial) => {
                return Err(io::Error::other("an incomplete request head"))
            }
            Err(e) => return Err(io::Error::other(format!("a bad request head: {e}"))),
        }
        let mut req = Request {
            method: parsed.method.unwrap_or("").to_string(),
            path: parsed.path.unwrap_or("/").to_string(),
            headers: parsed
                .headers
                .iter()
                .map(|h| {
                    (
                        h.name.to_ascii_lowercase(),
                        String::from_utf8_lossy(h.value).trim().to_string(),
                    )
                })
                .collect(),
            body: Vec::new(),
        };
        if req
            .header("expect")
            .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
        {
            let mut s: &TcpStream = self.stream;
            s.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        }
        if req
            .header("transfer-encoding")
            .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"))
        {
            req.body = self.chunked()?;
        } else if let Some(len) = req.header("content-length") {
            let len: usize = len
                .parse()
                .map_err(|_| io::Error::other("bad content-length"))?;
            if len > self.max_body {
                return Err(io::Error::other("request body too large"));
            }
            req.body = self.exact(len)?;
        }
        Ok(Some(req))
    }
}
