//! Pushing a notification to the user's phone through ntfy's publish API: a POST to the topic's
//! URL with the message as the body and the `Title`, `Priority` and `Tags` headers; a token goes
//! as `Authorization: Bearer …`, a `user:password@` in the URL as basic auth.
//!
//! Never on the daemon actor: [`Pusher::send`] queues (at most [`QUEUE`] wait, the oldest is
//! dropped) for one task that sends them in order; a push that fails for a reason that may pass
//! (no connection, a timeout, 5xx, 429) is tried again after each wait of [`RETRY_AFTER`], one
//! the server refuses (another 4xx, a redirect) is not. The topic's path, the URL's userinfo and
//! the token are secrets: logs name the host only.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use reqwest::{StatusCode, Url};
use tokio::sync::mpsc;

use crate::notify::Push;

/// At most this many pushes wait to be sent; one more drops the oldest.
pub const QUEUE: usize = 8;

/// A push that failed for a reason that may pass is tried again after each of these waits.
pub const RETRY_AFTER: [Duration; 3] = [
    Duration::from_secs(1),
    Duration::from_secs(4),
    Duration::from_secs(15),
];

/// One try, from connecting to the answer's status.
const TRY_TIMEOUT: Duration = Duration::from_secs(10);

/// Where pushes go (`notify.push`, `notify.push_token`). Its `Debug` shows the host only.
#[derive(Clone, PartialEq, Eq)]
pub struct PushTarget {
    url: Url,
    token: Option<String>,
}

/// `notify.push` or `notify.push_token` that volee cannot use. The messages never repeat the
/// value: it holds secrets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PushTargetError {
    #[error(
        "notify.push is not a URL ({reason}); an ntfy topic looks like \"https://ntfy.sh/TOPIC\""
    )]
    NotUrl { reason: String },
    #[error("notify.push is a URL of {scheme}:, not http: or https:")]
    Scheme { scheme: String },
    #[error("notify.push has no topic after the host (\"https://ntfy.sh/TOPIC\")")]
    NoTopic,
    #[error("notify.push_token is set but notify.push is not")]
    TokenWithoutUrl,
    #[error("notify.push has a user:password@ and notify.push_token is set too; give one of them")]
    TwoCredentials,
    #[error("notify.push_token may only hold printable ASCII characters (an ntfy token is tk_…)")]
    BadToken,
}

impl PushTarget {
    /// The target of `[notify]`'s `push` and `push_token`; none when `push` is unset or empty.
    pub fn from_config(
        url: Option<&str>,
        token: Option<&str>,
    ) -> Result<Option<PushTarget>, PushTargetError> {
        let url = url.map(str::trim).filter(|u| !u.is_empty());
        let token = token.map(str::trim).filter(|t| !t.is_empty());
        let Some(url) = url else {
            return match token {
                Some(_) => Err(PushTargetError::TokenWithoutUrl),
                None => Ok(None),
            };
        };
        let url = Url::parse(url).map_err(|e| PushTargetError::NotUrl {
            reason: e.to_string(),
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(PushTargetError::Scheme {
                scheme: url.scheme().to_string(),
            });
        }
        // http(s) URLs always have a host once parsed; the topic is the path.
        if url.path().trim_matches('/').is_empty() {
            return Err(PushTargetError::NoTopic);
        }
        if let Some(token) = token {
            if !url.username().is_empty() || url.password().is_some() {
                return Err(PushTargetError::TwoCredentials);
            }
            if !token.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(PushTargetError::BadToken);
            }
        }
        Ok(Some(PushTarget {
            url,
            token: token.map(String::from),
        }))
    }

    /// The host (and port, when given), the only part of the target a log may say.
    pub fn host(&self) -> String {
        let host = self.url.host_str().unwrap_or("?");
        match self.url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_string(),
        }
    }
}

impl fmt::Debug for PushTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PushTarget")
            .field("host", &self.host())
            .field("token", &self.token.as_ref().map(|_| "(set)"))
            .finish_non_exhaustive()
    }
}

/// One push waiting to be sent.
#[derive(Debug)]
struct Job {
    target: PushTarget,
    push: Push,
}

/// The queue of pushes and the task that sends them; the task ends when this is dropped.
#[derive(Debug)]
pub struct Pusher {
    queue: Arc<Mutex<VecDeque<Job>>>,
    wake: mpsc::Sender<()>,
}

impl Pusher {
    /// Start the sending task on the current tokio runtime.
    pub fn start() -> Result<Pusher, reqwest::Error> {
        let client = reqwest::Client::builder()
            .timeout(TRY_TIMEOUT)
            // A redirect would carry the message (and a token) elsewhere: the topic's own URL only.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("volee/", env!("CARGO_PKG_VERSION")))
            .build()?;
        let queue: Arc<Mutex<VecDeque<Job>>> = Arc::default();
        let (wake, woken) = mpsc::channel(1);
        tokio::spawn(run(client, Arc::clone(&queue), woken));
        Ok(Pusher { queue, wake })
    }

    /// Queue `push` for `target`, never waiting.
    pub fn send(&self, target: &PushTarget, push: Push) {
        let job = Job {
            target: target.clone(),
            push,
        };
        let dropped = enqueue(
            &mut self.queue.lock().unwrap_or_else(PoisonError::into_inner),
            job,
        );
        if let Some(old) = dropped {
            tracing::warn!(
                "push to {}: {QUEUE} pushes wait already, the oldest is dropped ({})",
                old.target.host(),
                old.push.title
            );
        }
        // Full: a wake-up is pending already.
        let _ = self.wake.try_send(());
    }
}

/// Add `job` to the queue; the oldest one when [`QUEUE`] wait already.
fn enqueue(queue: &mut VecDeque<Job>, job: Job) -> Option<Job> {
    let dropped = (queue.len() >= QUEUE).then(|| queue.pop_front()).flatten();
    queue.push_back(job);
    dropped
}

/// Send the queued pushes one after the other until the [`Pusher`] is dropped.
async fn run(
    client: reqwest::Client,
    queue: Arc<Mutex<VecDeque<Job>>>,
    mut woken: mpsc::Receiver<()>,
) {
    loop {
        let next = queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front();
        match next {
            Some(job) => send_with_retries(&client, &job).await,
            None => {
                if woken.recv().await.is_none() {
                    return;
                }
            }
        }
    }
}

/// What one try came to.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Sent,
    /// It may work later (the server or the network).
    Again(String),
    /// The server refused it: trying again would not help.
    Refused(String),
}

/// The outcome of an answer with this status (and body, for the reason).
fn judge(status: StatusCode, body: &str) -> Outcome {
    if status.is_success() {
        return Outcome::Sent;
    }
    let body = crate::notify::one_line(body, 200);
    let why = if body.is_empty() {
        format!("HTTP {status}")
    } else {
        format!("HTTP {status}: {body}")
    };
    if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS {
        Outcome::Again(why)
    } else if status.is_redirection() {
        Outcome::Refused(format!(
            "{why} (a redirect; notify.push must be the topic's own URL)"
        ))
    } else {
        Outcome::Refused(why)
    }
}

async fn send_with_retries(client: &reqwest::Client, job: &Job) {
    let host = job.target.host();
    let mut waits = RETRY_AFTER.iter();
    let mut tries = 0;
    loop {
        tries += 1;
        let why = match try_once(client, job).await {
            Outcome::Sent => {
                tracing::info!("pushed to {host}: {}", job.push.title);
                return;
            }
            Outcome::Refused(why) => {
                tracing::warn!("push to {host} refused, not tried again: {why}");
                return;
            }
            Outcome::Again(why) => why,
        };
        let Some(wait) = waits.next() else {
            tracing::warn!("push to {host} failed: {why}; given up after {tries} tries");
            return;
        };
        tracing::warn!(
            "push to {host} failed: {why}; trying again in {}",
            humantime::format_duration(*wait)
        );
        tokio::time::sleep(*wait).await;
    }
}

async fn try_once(client: &reqwest::Client, job: &Job) -> Outcome {
    let push = &job.push;
    let mut request = client
        .post(job.target.url.clone())
        .header("Title", push.title.as_str())
        .header("Priority", push.priority.to_string())
        .header("Tags", push.tags)
        .header(reqwest::header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(push.body.clone());
    if let Some(token) = &job.target.token {
        request = request.bearer_auth(token);
    }
    match request.send().await {
        Ok(answer) => {
            let status = answer.status();
            let body = if status.is_success() {
                String::new()
            } else {
                answer.text().await.unwrap_or_default()
            };
            judge(status, &body)
        }
        Err(e) => {
            let builder = e.is_builder();
            // Its message would name the URL, topic and all.
            let why = error_chain(&e.without_url());
            if builder {
                Outcome::Refused(why)
            } else {
                Outcome::Again(why)
            }
        }
    }
}

/// An error and its causes on one line.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let said = cause.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = cause.source();
    }
    text
}

/// This machine's name, as a push names the machine of a local agent.
pub fn local_machine() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "this machine".into())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notify::{push_for_agent, Kind};
    use std::time::Instant;
    use volee_protocol::AgentState;
    use volee_test_support::ntfy_server::NtfyServer;

    fn a_push(title: &str) -> Push {
        Push {
            title: title.into(),
            body: "b".into(),
            priority: 3,
            tags: "bell",
        }
    }

    /// Poll until `done` holds, for at most `limit`.
    async fn within(limit: Duration, done: impl Fn() -> bool) -> bool {
        let start = Instant::now();
        while start.elapsed() < limit {
            if done() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        done()
    }

    #[test]
    fn the_queue_keeps_the_newest() {
        let target = target("http://127.0.0.1:1/t", None).unwrap().unwrap();
        let mut queue = VecDeque::new();
        for i in 0..QUEUE {
            let job = Job {
                target: target.clone(),
                push: a_push(&i.to_string()),
            };
            assert!(enqueue(&mut queue, job).is_none());
        }
        let job = Job {
            target,
            push: a_push("new"),
        };
        assert_eq!(enqueue(&mut queue, job).unwrap().push.title, "0");
        assert_eq!(queue.len(), QUEUE);
        assert_eq!(queue.back().unwrap().push.title, "new");
    }

    /// Against a stand-in for an ntfy server (it speaks ntfy's publish API — a POST to the topic
    /// with Title/Priority headers): one POST with the headers, the token and the body; a 503
    /// is tried again a second later and the push arrives once.
    #[tokio::test]
    async fn a_push_is_published_with_its_headers_and_tried_again_after_a_503() {
        let server = NtfyServer::start_answering(&[503]);
        let url = server.topic_url("volee-topic");
        let target = PushTarget::from_config(Some(&url), Some("tk_standin"))
            .unwrap()
            .unwrap();
        let pusher = Pusher::start().unwrap();
        let push = push_for_agent(
            "fix",
            "k3f9",
            "devbox",
            AgentState::NeedsYou,
            Kind::NeedsYou,
            "bell",
        );
        pusher.send(&target, push);
        assert!(
            within(Duration::from_secs(5), || server.delivered().len() == 1).await,
            "{}",
            server.summary()
        );
        let got = server.requests();
        assert_eq!(got.len(), 2, "{}", server.summary());
        assert_eq!(got[0].status, 503);
        assert!(got[1].at - got[0].at >= RETRY_AFTER[0]);
        let p = &got[1];
        assert_eq!(
            (p.method.as_str(), p.path.as_str()),
            ("POST", "/volee-topic")
        );
        assert_eq!(p.header("title"), Some("volee: fix needs you"));
        assert_eq!(p.header("priority"), Some("4"));
        assert_eq!(p.header("tags"), Some("bell"));
        assert_eq!(p.header("authorization"), Some("Bearer tk_standin"));
        assert_eq!(p.body, "fix (k3f9) on devbox: needs_you\nbell");
    }

    /// A 403 is not tried again; the next push goes on; a user:password in the URL is basic auth
    /// (and no longer in the URL).
    #[tokio::test]
    async fn a_refused_push_is_not_tried_again() {
        let server = NtfyServer::start_answering(&[403]);
        let url = format!("http://phil:pw@{}/t", server.addr());
        let target = PushTarget::from_config(Some(&url), None).unwrap().unwrap();
        let pusher = Pusher::start().unwrap();
        pusher.send(&target, a_push("first"));
        pusher.send(&target, a_push("second"));
        assert!(
            within(Duration::from_secs(5), || server.delivered().len() == 1).await,
            "{}",
            server.summary()
        );
        tokio::time::sleep(RETRY_AFTER[0] + Duration::from_millis(300)).await;
        let got = server.requests();
        let seen: Vec<_> = got
            .iter()
            .map(|p| (p.header("title").unwrap_or(""), p.status))
            .collect();
        assert_eq!(seen, [("first", 403), ("second", 200)]);
        // "phil:pw" in base64.
        assert_eq!(got[0].header("authorization"), Some("Basic cGhpbDpwdw=="));
        assert_eq!(got[0].path, "/t");
    }

    fn target(url: &str, token: Option<&str>) -> Result<Option<PushTarget>, PushTargetError> {
        PushTarget::from_config(Some(url), token)
    }

    #[test]
    fn a_push_url_is_an_http_topic() {
        let t = target("https://ntfy.sh/volee-k3f9", Some("tk_abc"))
            .unwrap()
            .unwrap();
        assert_eq!(t.host(), "ntfy.sh");
        let t = target("http://127.0.0.1:8080/topic", None)
            .unwrap()
            .unwrap();
        assert_eq!(t.host(), "127.0.0.1:8080");
        assert_eq!(PushTarget::from_config(None, None), Ok(None));
        assert_eq!(PushTarget::from_config(Some(" "), None), Ok(None));
        assert!(matches!(
            target("ntfy.sh/topic", None),
            Err(PushTargetError::NotUrl { .. })
        ));
        assert!(matches!(
            target("https://", None),
            Err(PushTargetError::NotUrl { .. })
        ));
        assert_eq!(
            target("ftp://ntfy.sh/topic", None),
            Err(PushTargetError::Scheme {
                scheme: "ftp".into()
            })
        );
        assert_eq!(
            target("https://ntfy.sh/", None),
            Err(PushTargetError::NoTopic)
        );
        assert_eq!(
            PushTarget::from_config(None, Some("tk_abc")),
            Err(PushTargetError::TokenWithoutUrl)
        );
        assert_eq!(
            target("https://u:p@ntfy.sh/t", Some("tk_abc")),
            Err(PushTargetError::TwoCredentials)
        );
        assert_eq!(
            target("https://ntfy.sh/t", Some("tk abc")),
            Err(PushTargetError::BadToken)
        );
    }

    #[test]
    fn secrets_stay_out_of_debug_and_errors() {
        let t = target(
            "https://phil:hunter2@ntfy.example.com:8443/secret-topic",
            None,
        )
        .unwrap()
        .unwrap();
        let shown = format!("{t:?}");
        assert!(shown.contains("ntfy.example.com:8443"), "{shown}");
        for secret in ["phil", "hunter2", "secret-topic"] {
            assert!(!shown.contains(secret), "{shown}");
        }
        let t = target("https://ntfy.sh/t", Some("tk_secret"))
            .unwrap()
            .unwrap();
        assert!(!format!("{t:?}").contains("tk_secret"));
        let e = target("https://phil:hunter2@/x", None).unwrap_err();
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }

    #[test]
    fn which_failures_are_tried_again() {
        assert_eq!(judge(StatusCode::OK, ""), Outcome::Sent);
        assert_eq!(
            judge(StatusCode::INTERNAL_SERVER_ERROR, ""),
            Outcome::Again("HTTP 500 Internal Server Error".into())
        );
        assert!(matches!(
            judge(StatusCode::TOO_MANY_REQUESTS, ""),
            Outcome::Again(_)
        ));
        assert!(matches!(
            judge(StatusCode::BAD_GATEWAY, ""),
            Outcome::Again(_)
        ));
        assert_eq!(
            judge(
                StatusCode::FORBIDDEN,
                "{\"code\":40301,\"http\":403,\"error\":\"forbidden\"}\n"
            ),
            Outcome::Refused(
                "HTTP 403 Forbidden: {\"code\":40301,\"http\":403,\"error\":\"forbidden\"}".into()
            )
        );
        assert!(matches!(
            judge(StatusCode::MOVED_PERMANENTLY, ""),
            Outcome::Refused(_)
        ));
    }

    /// https works: the push opens with a TLS ClientHello (this listener speaks no TLS, so the
    /// push fails after it, and the failure is tried again).
    #[tokio::test]
    async fn an_https_topic_is_reached_over_tls() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("https://{}/topic", listener.local_addr().unwrap());
        let hello = std::thread::spawn(move || {
            use std::io::Read;
            let (mut stream, _) = listener.accept().unwrap();
            let mut first = [0u8; 3];
            stream.read_exact(&mut first).unwrap();
            first
        });
        let target = PushTarget::from_config(Some(&url), None).unwrap().unwrap();
        let pusher = Pusher::start().unwrap();
        pusher.send(&target, a_push("over tls"));
        let first = tokio::task::spawn_blocking(move || hello.join().unwrap())
            .await
            .unwrap();
        // A TLS record: handshake (22), version 3.x.
        assert_eq!(first[..2], [22, 3]);
    }
}
