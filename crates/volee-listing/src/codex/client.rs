//! The listing over the app-server's control socket: a WebSocket (`tokio-tungstenite`, client
//! role, over a tokio `UnixStream`) carrying the JSON-RPC of [`super::rpc`].

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::WebSocketStream;

use super::rpc::{self, Incoming};
use super::{CodexServerError, CodexThread, CLIENT_NAME};

/// The largest message (after reassembling fragments) accepted from the daemon.
pub const MAX_MESSAGE: usize = 8 << 20;
/// `thread/list` and `thread/loaded/list` pages followed at most (a safety bound, not a limit
/// anyone should meet: a page of `thread/list` holds up to 100 threads).
const MAX_PAGES: usize = 20;
/// The upgrade request's URI: the socket serves one endpoint; the host only fills `Host:`.
const URI: &str = "ws://localhost/";

/// The loaded threads of the daemon at `socket`, with their details, within `timeout` overall.
pub async fn list_threads(
    socket: &Path,
    timeout: Duration,
) -> Result<Vec<CodexThread>, CodexServerError> {
    match tokio::time::timeout(timeout, list_threads_inner(socket)).await {
        Ok(r) => r,
        Err(_) => Err(CodexServerError::Timeout(timeout)),
    }
}

async fn list_threads_inner(socket: &Path) -> Result<Vec<CodexThread>, CodexServerError> {
    let stream = tokio::net::UnixStream::connect(socket)
        .await
        .map_err(|source| CodexServerError::Connect {
            path: socket.display().to_string(),
            source,
        })?;
    let mut rpc = Rpc::connect(stream, MAX_MESSAGE).await?;
    let result = list_loaded(&mut rpc).await;
    rpc.close().await;
    result
}

/// The listing over an open connection (generic so tests can drive it with a scripted server).
async fn list_loaded<S: AsyncRead + AsyncWrite + Unpin>(
    rpc: &mut Rpc<S>,
) -> Result<Vec<CodexThread>, CodexServerError> {
    rpc.call(
        "initialize",
        json!({"clientInfo": {"name": CLIENT_NAME, "title": "volee", "version": env!("CARGO_PKG_VERSION")}}),
    )
    .await?;
    rpc.notify("initialized").await?;

    let mut loaded: Vec<String> = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let page = rpc
            .call("thread/loaded/list", json!({ "cursor": cursor }))
            .await?;
        loaded.extend(rpc::string_array(&page["data"]));
        cursor = page["nextCursor"].as_str().map(String::from);
        if cursor.is_none() {
            break;
        }
    }
    let mut seen = HashSet::new();
    loaded.retain(|id| seen.insert(id.clone()));
    if loaded.is_empty() {
        return Ok(Vec::new());
    }

    let mut threads: Vec<CodexThread> = Vec::new();
    for chunk in loaded.chunks(100) {
        let page = rpc
            .call(
                "thread/list",
                json!({ "limit": chunk.len(), "includedThreadIds": chunk }),
            )
            .await?;
        threads.extend(
            page["data"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(CodexThread::from_json)
                .filter(|t| chunk.contains(&t.id)),
        );
    }
    // A loaded thread the list leaves out (not materialized on disk yet): ask for it alone.
    for id in &loaded {
        if threads.iter().any(|t| &t.id == id) {
            continue;
        }
        match rpc
            .call(
                "thread/read",
                json!({ "threadId": id, "includeTurns": false }),
            )
            .await
        {
            Ok(v) => threads.extend(CodexThread::from_json(&v["thread"])),
            Err(CodexServerError::Rpc { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    threads.sort_by(|a, b| (a.created_at, a.id.as_str()).cmp(&(b.created_at, b.id.as_str())));
    threads.dedup_by(|a, b| a.id == b.id);
    Ok(threads)
}

/// One JSON-RPC connection: requests out, answers matched by id.
struct Rpc<S> {
    ws: WebSocketStream<S>,
    next_id: u64,
    max_message: usize,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Rpc<S> {
    /// The WebSocket upgrade over `stream`, messages (and frames) capped at `max_message` bytes.
    async fn connect(stream: S, max_message: usize) -> Result<Rpc<S>, CodexServerError> {
        let config = WebSocketConfig::default()
            .max_message_size(Some(max_message))
            .max_frame_size(Some(max_message));
        let (ws, _) = tokio_tungstenite::client_async_with_config(URI, stream, Some(config))
            .await
            .map_err(|e| match e {
                tungstenite::Error::Io(e) => CodexServerError::Io(e),
                tungstenite::Error::Http(answer) => {
                    CodexServerError::Handshake(format!("HTTP status {}", answer.status()))
                }
                other => CodexServerError::Handshake(other.to_string()),
            })?;
        Ok(Rpc {
            ws,
            next_id: 1,
            max_message,
        })
    }

    async fn send(&mut self, msg: &Value) -> Result<(), CodexServerError> {
        self.ws
            .send(Message::text(msg.to_string()))
            .await
            .map_err(|e| self.error(e))
    }

    async fn notify(&mut self, method: &str) -> Result<(), CodexServerError> {
        self.send(&rpc::notification(method)).await
    }

    /// Sends a request and returns its `result`, skipping notifications; a request from the server
    /// (an approval to a client that asked for none) is refused.
    async fn call(&mut self, method: &str, params: Value) -> Result<Value, CodexServerError> {
        let id = self.next_id;
        self.next_id += 1;
        let request = rpc::request(id, method, params);
        tracing::debug!(target: "volee::listing::codex", "→ {request}");
        self.send(&request).await?;
        loop {
            let text = self.next_text().await?;
            let msg: Value = serde_json::from_str(&text)
                .map_err(|e| CodexServerError::Malformed(format!("{e}: {}", rpc::clip(&text))))?;
            tracing::debug!(target: "volee::listing::codex", "← {}", rpc::clip(&text));
            match rpc::classify(&msg, id) {
                Incoming::Answer(result) => return Ok(result),
                Incoming::Failed { code, message } => {
                    return Err(CodexServerError::Rpc {
                        method: method.to_string(),
                        code,
                        message,
                    })
                }
                Incoming::Request(their_id) => self.send(&rpc::refusal(&their_id)).await?,
                Incoming::Other => {}
            }
        }
    }

    /// The next text message. Pings are answered by tungstenite as it reads; pongs and binary
    /// messages are skipped; a close frame is answered and reported as
    /// [`CodexServerError::Closed`].
    async fn next_text(&mut self) -> Result<String, CodexServerError> {
        loop {
            match self.ws.next().await {
                Some(Ok(Message::Text(text))) => return Ok(text.as_str().to_string()),
                Some(Ok(Message::Close(frame))) => {
                    return Err(CodexServerError::Closed(match frame {
                        Some(f) => format!(" ({} {})", u16::from(f.code), f.reason),
                        None => String::new(),
                    }))
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(self.error(e)),
                None => return Err(CodexServerError::Closed(" without a close frame".into())),
            }
        }
    }

    fn error(&self, e: tungstenite::Error) -> CodexServerError {
        match e {
            tungstenite::Error::Capacity(_) => CodexServerError::TooLarge(self.max_message),
            tungstenite::Error::Io(e) => CodexServerError::Io(e),
            tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed => {
                CodexServerError::Closed(" without a close frame".into())
            }
            other => CodexServerError::WebSocket(other),
        }
    }

    /// A polite close (normal closure); errors are irrelevant at this point.
    async fn close(&mut self) {
        let frame = CloseFrame {
            code: CloseCode::Normal,
            reason: "".into(),
        };
        let _ = self.ws.close(Some(frame)).await;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::codex::testdata::{PROBE_THREAD_LIST, TITLE_THREAD_READ};
    use tokio::io::DuplexStream;
    use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
    use volee_protocol::AgentState;

    /// The server's side of an in-memory pipe, upgraded.
    async fn accept(io: DuplexStream) -> WebSocketStream<DuplexStream> {
        tokio_tungstenite::accept_async(io).await.unwrap()
    }

    /// A scripted app-server: answers by method, and on the way sends a ping, a notification and
    /// a server request. Returns every message it received, and the pongs.
    async fn fake_server(io: DuplexStream) -> (Vec<Value>, usize) {
        let mut ws = accept(io).await;
        ws.send(Message::Ping("are you there".into()))
            .await
            .unwrap();
        let mut received = Vec::new();
        let mut pongs = 0;
        while let Some(msg) = ws.next().await {
            let text = match msg.unwrap() {
                Message::Text(t) => t,
                Message::Pong(p) => {
                    assert_eq!(&p[..], b"are you there");
                    pongs += 1;
                    continue;
                }
                Message::Close(frame) => {
                    assert_eq!(frame.map(|f| f.code), Some(CloseCode::Normal));
                    break;
                }
                other => panic!("{other:?}"),
            };
            let msg: Value = serde_json::from_str(text.as_str()).unwrap();
            received.push(msg.clone());
            let id = msg["id"].clone();
            let answer = match msg["method"].as_str().unwrap_or("") {
                "initialize" => json!({"id": id, "result": {"userAgent": "codex_cli_rs/0.171.0"}}),
                "thread/loaded/list" => json!({"id": id, "result": {
                    "data": ["01a22ab8-34d5-7a73-9c8e-316065b6cd1a", "01a22e2f-c9f3-7fe1-93c0-ba13760a0882"],
                    "nextCursor": null}}),
                "thread/list" => {
                    let mut v: Value = serde_json::from_str(PROBE_THREAD_LIST).unwrap();
                    v["id"] = id;
                    v
                }
                "thread/read" => {
                    let mut v: Value = serde_json::from_str(TITLE_THREAD_READ).unwrap();
                    v["id"] = id;
                    v
                }
                _ => continue, // `initialized`, our answer to the server's request
            };
            let notification = json!({"method": "thread/status/changed", "params": {"threadId": "x", "status": {"type": "idle"}}});
            ws.send(Message::text(notification.to_string()))
                .await
                .unwrap();
            if msg["method"] == "thread/loaded/list" {
                let request = json!({"id": 77, "method": "item/commandExecution/requestApproval", "params": {}});
                ws.send(Message::text(request.to_string())).await.unwrap();
            }
            ws.send(Message::text(answer.to_string())).await.unwrap();
        }
        (received, pongs)
    }

    #[tokio::test]
    async fn the_listing_against_a_scripted_server() {
        let (client_io, server_io) = tokio::io::duplex(1 << 20);
        let server = tokio::spawn(fake_server(server_io));
        let mut rpc = Rpc::connect(client_io, MAX_MESSAGE).await.unwrap();
        let threads = list_loaded(&mut rpc).await.unwrap();
        rpc.close().await;
        let (received, pongs) = server.await.unwrap();
        assert_eq!(pongs, 1, "the ping was answered");

        let methods: Vec<&str> = received
            .iter()
            .map(|m| m["method"].as_str().unwrap_or("(answer)"))
            .collect();
        assert_eq!(
            methods,
            [
                "initialize",
                "initialized",
                "thread/loaded/list",
                "(answer)",
                "thread/list",
                "thread/read"
            ]
        );
        assert!(received.iter().all(|m| m.get("jsonrpc").is_none()));
        assert_eq!(received[0]["params"]["clientInfo"]["name"], CLIENT_NAME);
        assert_eq!(received[3]["id"], 77);
        assert_eq!(received[3]["error"]["code"], -32601);
        assert_eq!(
            received[4]["params"]["includedThreadIds"],
            json!([
                "01a22ab8-34d5-7a73-9c8e-316065b6cd1a",
                "01a22e2f-c9f3-7fe1-93c0-ba13760a0882"
            ])
        );
        // Only loaded threads: the probe's notLoaded thread is not among them.
        let ids: Vec<&str> = threads.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "01a22ab8-34d5-7a73-9c8e-316065b6cd1a",
                "01a22e2f-c9f3-7fe1-93c0-ba13760a0882"
            ]
        );
        assert_eq!(threads[0].state(), Some(AgentState::Working));
        assert!(threads[1].ephemeral);
    }

    #[tokio::test]
    async fn the_connection_and_the_timeout_fail_clearly() {
        let missing =
            std::env::temp_dir().join(format!("volee-no-codex-{}.sock", std::process::id()));
        let err = list_threads(&missing, Duration::from_secs(1))
            .await
            .unwrap_err();
        assert!(matches!(err, CodexServerError::Connect { .. }), "{err:?}");
        assert!(err.to_string().contains("codex app-server daemon start"));
        // A server that accepts and says nothing: the overall timeout.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let hold = tokio::spawn(async move { listener.accept().await.map(|(s, _)| s) });
        assert!(matches!(
            list_threads(&path, Duration::from_millis(200)).await,
            Err(CodexServerError::Timeout(_))
        ));
        drop(hold);
        // A real socket served by a real upgrade: the whole path, nothing loaded.
        let path = dir.path().join("t.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        tokio::spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            let mut ws = tokio_tungstenite::accept_async(s).await.unwrap();
            while let Some(Ok(Message::Text(t))) = ws.next().await {
                let msg: Value = serde_json::from_str(t.as_str()).unwrap();
                if msg.get("id").is_some() {
                    let result = json!({"data": [], "nextCursor": null});
                    let answer = json!({"id": msg["id"], "result": result});
                    ws.send(Message::text(answer.to_string())).await.unwrap();
                }
            }
        });
        assert_eq!(
            list_threads(&path, Duration::from_secs(5)).await.unwrap(),
            vec![]
        );
    }

    #[tokio::test]
    async fn a_refused_upgrade_a_close_and_a_huge_message_are_reported() {
        // A server that refuses the upgrade.
        let (client_io, server_io) = tokio::io::duplex(4096);
        tokio::spawn(async move {
            // The callback's shape is tungstenite's.
            #[allow(clippy::result_large_err)]
            let refuse = |_: &Request, _: Response| -> Result<Response, ErrorResponse> {
                let mut no = ErrorResponse::new(None);
                *no.status_mut() = tungstenite::http::StatusCode::NOT_FOUND;
                Err(no)
            };
            let _ = tokio_tungstenite::accept_hdr_async(server_io, refuse).await;
        });
        match Rpc::connect(client_io, MAX_MESSAGE).await {
            Err(CodexServerError::Handshake(why)) => assert!(why.contains("404"), "{why}"),
            Err(other) => panic!("{other:?}"),
            Ok(_) => panic!("the upgrade was refused"),
        }
        // A close frame in place of an answer.
        let (client_io, server_io) = tokio::io::duplex(4096);
        tokio::spawn(async move {
            let mut ws = accept(server_io).await;
            let _ = ws.next().await;
            let frame = CloseFrame {
                code: CloseCode::Error,
                reason: "going away".into(),
            };
            let _ = ws.close(Some(frame)).await;
            while ws.next().await.is_some() {}
        });
        let mut rpc = Rpc::connect(client_io, MAX_MESSAGE).await.unwrap();
        match rpc.call("initialize", json!({})).await {
            Err(CodexServerError::Closed(why)) => {
                assert_eq!(why, " (1011 going away)")
            }
            other => panic!("{other:?}"),
        }
        // A message over the cap: refused, not buffered.
        let (client_io, server_io) = tokio::io::duplex(1 << 16);
        tokio::spawn(async move {
            let mut ws = accept(server_io).await;
            let _ = ws.next().await;
            let huge = json!({"id": 1, "result": "x".repeat(5000)});
            let _ = ws.send(Message::text(huge.to_string())).await;
            while ws.next().await.is_some() {}
        });
        let mut rpc = Rpc::connect(client_io, 4096).await.unwrap();
        assert!(matches!(
            rpc.call("initialize", json!({})).await,
            Err(CodexServerError::TooLarge(4096))
        ));
        // A text message that is no JSON.
        let (client_io, server_io) = tokio::io::duplex(4096);
        tokio::spawn(async move {
            let mut ws = accept(server_io).await;
            let _ = ws.next().await;
            let _ = ws.send(Message::text("not json")).await;
            while ws.next().await.is_some() {}
        });
        let mut rpc = Rpc::connect(client_io, MAX_MESSAGE).await.unwrap();
        assert!(matches!(
            rpc.call("initialize", json!({})).await,
            Err(CodexServerError::Malformed(_))
        ));
    }
}
