//! The HTTP side of one OpenCode server on `127.0.0.1:PORT`: JSON requests (`reqwest`, loopback
//! only, no proxy, bounded bodies, timeouts) and the event stream `GET /event`, decoded by
//! `sse-stream` with a bound on one event's size.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::{BoxStream, Stream, StreamExt};
use reqwest::header::{ACCEPT, CONTENT_LENGTH};
use reqwest::Method;
use serde_json::Value;
use sse_stream::SseByteStream;

/// The largest response body accepted (a listing of pending requests).
pub const MAX_BODY: usize = 1 << 20;
/// The largest single server-sent event accepted (tool output travels in `message.part.updated`);
/// a bigger one drops the stream, which is reopened with a fresh snapshot.
pub const MAX_EVENT: usize = 8 << 20;
/// One request's time limit (connecting, the answer's head and its body).
pub const REQUEST_TIMEOUT: Duration = Duration::from_millis(1500);
/// The event stream's server heartbeat comes every 10 s or so; silence this long means it is gone.
pub const STREAM_SILENCE: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("could not connect to OpenCode's server on 127.0.0.1:{port} (is the agent still starting, or did it end?)")]
    Connect {
        port: u16,
        #[source]
        source: reqwest::Error,
    },
    #[error("OpenCode's server gave no answer within {0:?}")]
    Timeout(Duration),
    #[error("the HTTP client could not be set up")]
    Client(#[source] reqwest::Error),
    #[error("HTTP request to OpenCode's server failed")]
    Request(#[source] reqwest::Error),
    #[error("OpenCode's server answered {path} with HTTP status {status}")]
    Status { path: String, status: u16 },
    #[error("the answer is larger than {0} bytes")]
    TooLarge(usize),
    #[error("OpenCode's server sent a malformed answer: {0}")]
    Protocol(String),
    #[error("OpenCode's event stream could not be decoded")]
    Sse(#[source] sse_stream::Error),
}

/// The server of one agent.
#[derive(Debug, Clone)]
pub struct Server {
    client: reqwest::Client,
    port: u16,
}

impl Server {
    pub fn new(port: u16) -> Result<Server, HttpError> {
        let client = reqwest::Client::builder()
            // A proxy from the environment never reaches the agent's own loopback server.
            .no_proxy()
            .connect_timeout(REQUEST_TIMEOUT)
            .user_agent("volee")
            .build()
            .map_err(HttpError::Client)?;
        Ok(Server { client, port })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn error(&self, e: reqwest::Error) -> HttpError {
        if e.is_connect() {
            HttpError::Connect {
                port: self.port,
                source: e,
            }
        } else {
            HttpError::Request(e)
        }
    }

    /// One request; the body of a 2xx answer, at most [`MAX_BODY`] bytes.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Vec<u8>, HttpError> {
        let exchange = async {
            let post = method == Method::POST;
            let mut req = self
                .client
                .request(method, self.url(path))
                .header(ACCEPT, "application/json");
            req = match body {
                Some(b) => req.json(b),
                // Said explicitly: hyper sends an empty body without the header, and some
                // servers want a POST's length.
                None if post => req.header(CONTENT_LENGTH, "0"),
                None => req,
            };
            let mut resp = req.send().await.map_err(|e| self.error(e))?;
            let status = resp.status();
            if !status.is_success() {
                return Err(HttpError::Status {
                    path: path.to_string(),
                    status: status.as_u16(),
                });
            }
            if resp.content_length().is_some_and(|n| n > MAX_BODY as u64) {
                return Err(HttpError::TooLarge(MAX_BODY));
            }
            let mut out = Vec::new();
            while let Some(chunk) = resp.chunk().await.map_err(HttpError::Request)? {
                if out.len() + chunk.len() > MAX_BODY {
                    return Err(HttpError::TooLarge(MAX_BODY));
                }
                out.extend_from_slice(&chunk);
            }
            Ok(out)
        };
        tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| HttpError::Timeout(REQUEST_TIMEOUT))?
    }

    /// `GET path` as JSON.
    pub async fn get_json(&self, path: &str) -> Result<Value, HttpError> {
        let body = self.request(Method::GET, path, None).await?;
        serde_json::from_slice(&body).map_err(|e| HttpError::Protocol(format!("{path}: {e}")))
    }

    /// Subscribes to `GET /event`: returns once the answer's head says 200, so whatever happens
    /// from then on is in the stream.
    pub async fn events(&self) -> Result<EventStream, HttpError> {
        let send = self
            .client
            .get(self.url("/event"))
            .header(ACCEPT, "text/event-stream")
            .send();
        let resp = tokio::time::timeout(REQUEST_TIMEOUT, send)
            .await
            .map_err(|_| HttpError::Timeout(REQUEST_TIMEOUT))?
            .map_err(|e| self.error(e))?;
        if resp.status() != reqwest::StatusCode::OK {
            return Err(HttpError::Status {
                path: "/event".into(),
                status: resp.status().as_u16(),
            });
        }
        let chunks = futures_util::stream::unfold(resp, |mut resp| async move {
            match resp.chunk().await {
                Ok(Some(chunk)) => Some((Ok(chunk), resp)),
                Ok(None) => None,
                Err(e) => Some((Err(HttpError::Request(e)), resp)),
            }
        });
        Ok(EventStream::new(chunks, MAX_EVENT, STREAM_SILENCE))
    }
}

/// The `data` of each server-sent event of a body.
pub struct EventStream {
    events: BoxStream<'static, Result<sse_stream::Sse, sse_stream::Error>>,
    /// Bytes received since the last event: what the decoder may be holding.
    pending: Arc<AtomicUsize>,
    silence: Duration,
}

impl EventStream {
    /// Decodes `chunks` (a body's bytes). More than `max_event` bytes without a complete event
    /// fail the stream with [`HttpError::TooLarge`] (the decoder has no bound of its own); no
    /// event for `silence` fails it with [`HttpError::Timeout`].
    pub fn new<S>(chunks: S, max_event: usize, silence: Duration) -> EventStream
    where
        S: Stream<Item = Result<Bytes, HttpError>> + Send + 'static,
    {
        let pending = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&pending);
        let capped = chunks.map(move |chunk| {
            let chunk = chunk?;
            let held = count.fetch_add(chunk.len(), Ordering::Relaxed) + chunk.len();
            if held > max_event {
                return Err(HttpError::TooLarge(max_event));
            }
            Ok(chunk)
        });
        EventStream {
            events: SseByteStream::new(capped).boxed(),
            pending,
            silence,
        }
    }

    /// The next event's data (events without data are skipped); None at the end of the body.
    pub async fn next_data(&mut self) -> Result<Option<String>, HttpError> {
        loop {
            let next = tokio::time::timeout(self.silence, self.events.next())
                .await
                .map_err(|_| HttpError::Timeout(self.silence))?;
            match next {
                None => return Ok(None),
                Some(Ok(event)) => {
                    self.pending.store(0, Ordering::Relaxed);
                    if let Some(data) = event.data {
                        return Ok(Some(data));
                    }
                }
                Some(Err(sse_stream::Error::Body(source))) => {
                    return Err(match source.downcast::<HttpError>() {
                        Ok(ours) => *ours,
                        Err(other) => HttpError::Protocol(other.to_string()),
                    })
                }
                Some(Err(e)) => return Err(HttpError::Sse(e)),
            }
        }
    }
}

/// Test helpers shared with the other modules' tests.
#[cfg(test)]
pub(crate) mod testing {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A captured event stream (copies of `../shared/reference/probe/opencode-sse-*.txt`, and
    /// volee's own `opencode-sse-volee-*.txt`, all 1.18.33).
    pub(crate) fn capture(name: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// Every event's data of a whole body.
    pub(crate) async fn data_of(body: &[u8]) -> Vec<String> {
        let chunks = futures_util::stream::iter([Ok(Bytes::copy_from_slice(body))]);
        let mut events = EventStream::new(chunks, MAX_EVENT, STREAM_SILENCE);
        let mut out = Vec::new();
        while let Some(data) = events.next_data().await.unwrap() {
            out.push(data);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn pieces(wire: &str, cut: usize) -> impl Stream<Item = Result<Bytes, HttpError>> {
        let (a, b) = wire.as_bytes().split_at(cut);
        futures_util::stream::iter([Ok(Bytes::copy_from_slice(a)), Ok(Bytes::copy_from_slice(b))])
    }

    #[tokio::test]
    async fn events_split_anywhere_decode_the_same() {
        let wire = "data: {\"a\":1}\n\n: comment\n\nevent: x\nid: 3\n\ndata: {\"b\":\r\ndata: 2}\r\n\r\nda";
        for cut in 0..wire.len() {
            let mut events = EventStream::new(pieces(wire, cut), MAX_EVENT, STREAM_SILENCE);
            let mut got = Vec::new();
            while let Some(d) = events.next_data().await.unwrap() {
                got.push(d);
            }
            assert_eq!(got, ["{\"a\":1}", "{\"b\":\n2}"], "cut {cut}");
        }
        let all = testing::data_of(testing::capture("opencode-sse-tui2.txt").as_bytes()).await;
        assert!(all.len() > 5, "{all:?}");
        assert!(all.iter().all(|d| serde_json::from_str::<Value>(d).is_ok()));
    }

    #[tokio::test]
    async fn an_endless_event_and_silence_end_the_stream() {
        // Events within the bound pass however many there are; one that never ends fails.
        let small = "data: 12345\n\n".repeat(100);
        let chunks = futures_util::stream::iter(
            small
                .as_bytes()
                .chunks(7)
                .map(|c| Ok(Bytes::copy_from_slice(c)))
                .collect::<Vec<_>>(),
        );
        let mut events = EventStream::new(chunks, 64, STREAM_SILENCE);
        for _ in 0..100 {
            assert_eq!(events.next_data().await.unwrap().as_deref(), Some("12345"));
        }
        assert_eq!(events.next_data().await.unwrap(), None);
        let endless =
            futures_util::stream::repeat_with(|| Ok(Bytes::from_static(b"data: xxxxxxxxxx\n")));
        let mut events = EventStream::new(endless, 1000, STREAM_SILENCE);
        assert!(matches!(
            events.next_data().await,
            Err(HttpError::TooLarge(1000))
        ));
        let silent = futures_util::stream::pending();
        let mut events = EventStream::new(silent, 1000, Duration::from_millis(50));
        assert!(matches!(
            events.next_data().await,
            Err(HttpError::Timeout(_))
        ));
    }

    /// A scripted loopback server: answers each connection with the next canned answer and
    /// returns what each request said (head and body).
    async fn serve(answers: Vec<&'static str>) -> (u16, tokio::task::JoinHandle<Vec<String>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let mut seen = Vec::new();
            for answer in answers {
                let (mut s, _) = listener.accept().await.unwrap();
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                // The head, then as many bytes as it announces.
                loop {
                    let n = s.read(&mut chunk).await.unwrap();
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_lowercase();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let len = text
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length: "))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if buf.len() >= end + 4 + len || n == 0 {
                            break;
                        }
                    }
                }
                seen.push(String::from_utf8_lossy(&buf).into_owned());
                s.write_all(answer.as_bytes()).await.unwrap();
                let _ = s.shutdown().await;
            }
            seen
        });
        (port, task)
    }

    #[tokio::test]
    async fn the_client_talks_to_a_loopback_server() {
        let (port, server) = serve(vec![
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\n[]\r\n0\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\ntrue",
            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 2000000\r\nConnection: close\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n20\r\ndata: {\"type\":\"server.connected\"\r\n3\r\n}\n\n\r\n0\r\n\r\n",
        ])
        .await;
        let s = Server::new(port).unwrap();
        let body = s
            .request(
                Method::POST,
                "/tui/append-prompt",
                Some(&json!({"text": "hi"})),
            )
            .await
            .unwrap();
        assert_eq!(body, b"[]");
        let body = s
            .request(Method::POST, "/tui/submit-prompt", None)
            .await
            .unwrap();
        assert_eq!(body, b"true");
        assert!(matches!(
            s.get_json("/session/x").await,
            Err(HttpError::Status { status: 404, .. })
        ));
        assert!(matches!(
            s.get_json("/permission").await,
            Err(HttpError::TooLarge(MAX_BODY))
        ));
        let mut events = s.events().await.unwrap();
        assert_eq!(
            events.next_data().await.unwrap().as_deref(),
            Some("{\"type\":\"server.connected\"}")
        );
        assert_eq!(events.next_data().await.unwrap(), None);

        let seen = server.await.unwrap();
        let lower: Vec<String> = seen.iter().map(|r| r.to_lowercase()).collect();
        assert!(seen[0].starts_with("POST /tui/append-prompt HTTP/1.1\r\n"));
        assert!(lower[0].contains("content-type: application/json"));
        assert!(
            seen[0].ends_with("\r\n\r\n{\"text\":\"hi\"}"),
            "{}",
            seen[0]
        );
        assert!(lower[1].contains("content-length: 0"), "{}", seen[1]);
        assert!(lower.iter().all(|r| r.contains("user-agent: volee")));
        assert!(seen[4].starts_with("GET /event HTTP/1.1\r\n"));
        assert!(lower[4].contains("accept: text/event-stream"));

        // Nobody listening: a clear error, quickly.
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let dead = closed.local_addr().unwrap().port();
        drop(closed);
        let err = Server::new(dead)
            .unwrap()
            .get_json("/permission")
            .await
            .unwrap_err();
        assert!(matches!(err, HttpError::Connect { .. }), "{err:?}");
        assert!(err.to_string().contains("still starting"), "{err}");
    }
}
