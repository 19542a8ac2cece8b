//! The daemon's socket: accept only the user's own clients (peer uid checked), read one
//! request a line (bounded), hand it to the actor and write its answer, with keep-alives while
//! the client waits; `watch` streams.

use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};
use volee_protocol::{Request, Response};

use super::request_error::user_error;
use super::Msg;

pub(super) async fn accept_loop(listener: UnixListener, tx: mpsc::UnboundedSender<Msg>) {
    let me = nix::unistd::getuid().as_raw();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        match stream.peer_cred() {
            Ok(cred) if cred.uid() == me => {
                tokio::spawn(serve_client(stream, tx.clone()));
            }
            Ok(cred) => tracing::warn!("refused a client of uid {}", cred.uid()),
            Err(e) => tracing::warn!("refused a client without credentials: {e}"),
        }
    }
}

/// Largest request line accepted (a launch carries the caller's environment).
const MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;

async fn serve_client(stream: UnixStream, tx: mpsc::UnboundedSender<Msg>) {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader)
            .take(MAX_REQUEST_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.len() > MAX_REQUEST_BYTES {
            let _ = write_response(&mut write, &user_error("request too large", vec![])).await;
            return;
        }
        let request: Request = match serde_json::from_slice(&line) {
            Ok(r) => r,
            Err(e) => {
                let resp = user_error(&format!("unreadable request: {e}"), vec![]);
                if write_response(&mut write, &resp).await.is_err() {
                    return;
                }
                continue;
            }
        };
        // A waiting client hears from us every KEEPALIVE_SECS, so it can tell a slow answer from
        // a stopped daemon.
        let every = Duration::from_secs(volee_protocol::KEEPALIVE_SECS);
        let mut keepalive = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        if matches!(request, Request::Watch { .. } | Request::WatchAll) {
            let (wtx, mut wrx) = mpsc::unbounded_channel();
            let msg = match request {
                Request::Watch { id } => Msg::Watch(id, wtx),
                _ => Msg::WatchAll(wtx),
            };
            if tx.send(msg).is_err() {
                return;
            }
            loop {
                let resp = tokio::select! {
                    resp = wrx.recv() => match resp {
                        Some(resp) => resp,
                        None => return,
                    },
                    _ = keepalive.tick() => Response::KeepAlive,
                };
                if write_response(&mut write, &resp).await.is_err() {
                    return;
                }
            }
        }
        let shutdown = matches!(request, Request::Shutdown);
        let (rtx, mut rrx) = oneshot::channel();
        if tx.send(Msg::Request(Box::new(request), rtx)).is_err() {
            return;
        }
        let resp = loop {
            tokio::select! {
                resp = &mut rrx => match resp {
                    Ok(resp) => break resp,
                    Err(_) => return,
                },
                _ = keepalive.tick() => {
                    if write_response(&mut write, &Response::KeepAlive).await.is_err() {
                        return;
                    }
                }
            }
        };
        if write_response(&mut write, &resp).await.is_err() {
            return;
        }
        if shutdown {
            let _ = tx.send(Msg::Shutdown);
            return;
        }
    }
}

async fn write_response(
    write: &mut tokio::net::unix::OwnedWriteHalf,
    resp: &Response,
) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec(resp).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    write.write_all(&bytes).await
}
