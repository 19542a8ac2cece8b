//! The HTTP side: `POST /api/chat` streamed, `POST /api/show`, `GET /api/tags`, with retries of
//! transient failures (counted) and time limits on silence.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{json, Value};

use crate::error::{classify, OllamaError};
use crate::host::{base_url_from_env, DEFAULT_BASE_URL};
use crate::stream::{looks_like_raw_tool_call, ChatStream, StreamEvent};
use crate::usage::{estimate_answer, estimate_prompt, Usage};
use crate::wire::{ChatOptions, ChatRequest, Message, ModelInfo, Tool, ToolCall};

/// The model volee's agent uses unless told otherwise.
pub const DEFAULT_MODEL: &str = "gemma4";
/// The context window asked for unless told otherwise (capped by the caller at the model's
/// trained maximum, see [`ModelInfo::fit_num_ctx`]).
pub const DEFAULT_NUM_CTX: u32 = 32_768;

/// How transient failures are retried: `max_retries` more attempts, waiting `initial_backoff`,
/// doubling up to `max_backoff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub max_retries: u32,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
        }
    }
}

impl RetryPolicy {
    /// No retries.
    pub fn none() -> RetryPolicy {
        RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        }
    }
    /// The wait before retry number `retry` (0-based).
    pub fn backoff(&self, retry: u32) -> Duration {
        let factor = 2u32.saturating_pow(retry.min(16));
        self.initial_backoff
            .saturating_mul(factor)
            .min(self.max_backoff)
    }
}

/// Where and how to talk to Ollama.
#[derive(Debug, Clone, PartialEq)]
pub struct OllamaConfig {
    /// e.g. `http://127.0.0.1:11434` (see [`crate::parse_ollama_host`]).
    pub base_url: String,
    pub model: String,
    /// Sent as `options.num_ctx` on every chat request.
    pub num_ctx: u32,
    pub temperature: Option<f32>,
    pub seed: Option<i64>,
    /// `think`; None leaves it to Ollama (on for thinking models).
    pub think: Option<bool>,
    /// How long Ollama keeps the model loaded after a request, e.g. `10m`.
    pub keep_alive: Option<String>,
    pub retry: RetryPolicy,
    pub connect_timeout: Duration,
    /// Until the answer starts (loading a model can take minutes).
    pub first_byte_timeout: Duration,
    /// Longest silence between two pieces of a streamed answer.
    pub idle_timeout: Duration,
}

impl Default for OllamaConfig {
    /// [`DEFAULT_BASE_URL`], [`DEFAULT_MODEL`], [`DEFAULT_NUM_CTX`] (no environment read).
    fn default() -> Self {
        OllamaConfig {
            base_url: DEFAULT_BASE_URL.into(),
            model: DEFAULT_MODEL.into(),
            num_ctx: DEFAULT_NUM_CTX,
            temperature: None,
            seed: None,
            think: None,
            keep_alive: Some("10m".into()),
            retry: RetryPolicy::default(),
            connect_timeout: Duration::from_secs(5),
            first_byte_timeout: Duration::from_secs(300),
            idle_timeout: Duration::from_secs(120),
        }
    }
}

impl OllamaConfig {
    /// The defaults, with the base URL from `OLLAMA_HOST`.
    pub fn from_env() -> OllamaConfig {
        OllamaConfig {
            base_url: base_url_from_env(),
            ..OllamaConfig::default()
        }
    }
}

/// The environment variable holding a bearer token for an Ollama behind an authenticating proxy
/// (or ollama.com through a tunnel).
pub const API_KEY_ENV: &str = "OLLAMA_API_KEY";

/// `Authorization: Bearer $OLLAMA_API_KEY` when it is set: read afresh for every request and
/// never kept, so it cannot end up in a session file or an export.
fn with_auth(req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    match std::env::var(API_KEY_ENV) {
        Ok(key) if !key.trim().is_empty() => req.bearer_auth(key.trim()),
        _ => req,
    }
}

/// One finished answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    /// The assistant message (content, thinking, tool calls with ids), ready to append to the
    /// conversation.
    pub message: Message,
    /// `stop`, `length`, …
    pub done_reason: Option<String>,
    pub usage: Usage,
    /// Retries this answer needed.
    pub retries: u32,
    /// The text looks like a tool call the server failed to parse (Gemma's raw syntax).
    pub raw_tool_call_text: bool,
    pub total_duration: Option<Duration>,
    pub load_duration: Option<Duration>,
}

impl ChatResponse {
    pub fn tool_calls(&self) -> &[ToolCall] {
        &self.message.tool_calls
    }
}

/// A client for one Ollama server and model.
#[derive(Debug)]
pub struct OllamaClient {
    http: reqwest::Client,
    config: OllamaConfig,
    base: String,
    retries: AtomicU64,
}

impl OllamaClient {
    pub fn new(config: OllamaConfig) -> Result<OllamaClient, OllamaError> {
        let base = config.base_url.trim_end_matches('/').to_string();
        let url = reqwest::Url::parse(&base).map_err(|e| OllamaError::BadUrl {
            url: base.clone(),
            why: e.to_string(),
        })?;
        if url.scheme() != "http" {
            // Built without TLS: Ollama serves plain HTTP; reach a remote one through a tunnel.
            return Err(OllamaError::BadUrl {
                url: base,
                why: format!(
                    "scheme {:?} is not supported (only http://; use an SSH tunnel for a remote Ollama)",
                    url.scheme()
                ),
            });
        }
        let host = url.host_str().unwrap_or("").trim_matches(['[', ']']);
        let loopback = host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|a| a.is_loopback());
        let mut builder = reqwest::Client::builder().connect_timeout(config.connect_timeout);
        if loopback {
            // A proxy from the environment never reaches a local Ollama.
            builder = builder.no_proxy();
        }
        let http = builder
            .build()
            .map_err(|source| OllamaError::Client { source })?;
        Ok(OllamaClient {
            http,
            config,
            base,
            retries: AtomicU64::new(0),
        })
    }

    pub fn config(&self) -> &OllamaConfig {
        &self.config
    }

    /// Retries made by this client so far (all requests).
    pub fn retries_total(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn transport_error(&self, e: reqwest::Error) -> OllamaError {
        if e.is_connect() {
            OllamaError::NotRunning {
                url: self.base.clone(),
                source: e,
            }
        } else {
            OllamaError::Transport {
                url: self.base.clone(),
                source: e,
            }
        }
    }

    fn error_from_body(&self, status: u16, body: &[u8]) -> OllamaError {
        let message = serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|v| v.get("error").and_then(Value::as_str).map(String::from))
            .unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_string());
        classify(
            Some(status),
            &message,
            &self.config.model,
            &self.base,
            self.config.num_ctx,
        )
    }

    async fn retry_wait(&self, retry: u32, e: &OllamaError, what: &str) {
        let wait = self.config.retry.backoff(retry);
        tracing::warn!(
            "ollama {what}: {e}; retry {} of {} in {wait:?}",
            retry + 1,
            self.config.retry.max_retries
        );
        self.retries.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(wait).await;
    }

    /// Settle the outcome of attempt number `retry` (0-based): Ok(None) means try again.
    async fn settle<T>(
        &self,
        result: Result<T, OllamaError>,
        retry: u32,
        retryable: bool,
        what: &str,
    ) -> Result<Option<T>, OllamaError> {
        match result {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_transient() && retryable && retry < self.config.retry.max_retries => {
                self.retry_wait(retry, &e, what).await;
                Ok(None)
            }
            Err(e) if e.is_transient() && retry > 0 => Err(OllamaError::GaveUp {
                attempts: retry + 1,
                last: Box::new(e),
            }),
            Err(e) => Err(e),
        }
    }

    /// A small JSON request (retried): the parsed body of a 2xx answer.
    async fn json_request(&self, post: Option<&Value>, path: &str) -> Result<Value, OllamaError> {
        let mut retry = 0;
        loop {
            let result = self.json_once(post, path).await;
            if let Some(v) = self.settle(result, retry, true, path).await? {
                return Ok(v);
            }
            retry += 1;
        }
    }

    async fn json_once(&self, post: Option<&Value>, path: &str) -> Result<Value, OllamaError> {
        let req = with_auth(match post {
            Some(body) => self.http.post(self.url(path)).json(body),
            None => self.http.get(self.url(path)),
        });
        let limit = self.config.first_byte_timeout;
        let resp = tokio::time::timeout(limit, req.send())
            .await
            .map_err(|_| OllamaError::Stalled { after: limit })?
            .map_err(|e| self.transport_error(e))?;
        let status = resp.status().as_u16();
        let body = tokio::time::timeout(limit, resp.bytes())
            .await
            .map_err(|_| OllamaError::Stalled { after: limit })?
            .map_err(|e| self.transport_error(e))?;
        if !(200..300).contains(&status) {
            return Err(self.error_from_body(status, &body));
        }
        serde_json::from_slice(&body).map_err(|e| OllamaError::Protocol {
            what: format!("{path} answered something that is not JSON ({e})"),
        })
    }

    /// `POST /api/show` for the configured model: capabilities and trained context length.
    pub async fn show(&self) -> Result<ModelInfo, OllamaError> {
        let v = self
            .json_request(Some(&json!({ "model": self.config.model })), "/api/show")
            .await?;
        Ok(ModelInfo::from_show(&self.config.model, &v))
    }

    /// `GET /api/version`: the server's version (`0.12.6`); a server that answers without one
    /// is not Ollama.
    pub async fn version(&self) -> Result<String, OllamaError> {
        let v = self.json_request(None, "/api/version").await?;
        v.get("version")
            .and_then(Value::as_str)
            .map(String::from)
            .ok_or_else(|| OllamaError::Protocol {
                what: "/api/version answered without a version: not an Ollama server".into(),
            })
    }

    /// `GET /api/tags`: the installed models' names (`gemma4:latest`, …).
    pub async fn list_models(&self) -> Result<Vec<String>, OllamaError> {
        let v = self.json_request(None, "/api/tags").await?;
        Ok(v.get("models")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|m| m.get("name").and_then(Value::as_str))
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Check before a session: Ollama answers, the model is installed, and (when `need_tools`) it
    /// can call tools. Returns what `/api/show` said.
    pub async fn ensure_ready(&self, need_tools: bool) -> Result<ModelInfo, OllamaError> {
        let info = self.show().await?;
        if need_tools && !info.supports_tools() {
            return Err(OllamaError::NoToolSupport {
                model: self.config.model.clone(),
            });
        }
        Ok(info)
    }

    /// The request body of a chat (what [`OllamaClient::chat`] sends).
    pub fn chat_body(&self, messages: &[Message], tools: &[Tool]) -> Value {
        self.chat_body_capped(messages, tools, None)
    }

    /// The request body with the answer capped at `num_predict` tokens.
    pub fn chat_body_capped(
        &self,
        messages: &[Message],
        tools: &[Tool],
        num_predict: Option<u32>,
    ) -> Value {
        let req = ChatRequest {
            model: &self.config.model,
            messages,
            tools,
            stream: true,
            think: self.config.think,
            options: ChatOptions {
                num_ctx: self.config.num_ctx,
                temperature: self.config.temperature,
                seed: self.config.seed,
                num_predict,
            },
            keep_alive: self.config.keep_alive.as_deref(),
            truncate: false,
            shift: false,
        };
        serde_json::to_value(&req).unwrap_or(Value::Null)
    }

    /// One model turn, streamed: `on_event` sees content, thinking and tool calls as they come.
    /// Transient failures before anything was delivered are retried; after that (the caller has
    /// shown part of an answer) an error ends the turn.
    pub async fn chat(
        &self,
        messages: &[Message],
        tools: &[Tool],
        on_event: impl FnMut(&StreamEvent),
    ) -> Result<ChatResponse, OllamaError> {
        self.chat_capped(messages, tools, None, on_event).await
    }

    /// [`OllamaClient::chat`] with the answer capped at `num_predict` tokens (`done_reason`
    /// `length` when the cap cut it).
    pub async fn chat_capped(
        &self,
        messages: &[Message],
        tools: &[Tool],
        num_predict: Option<u32>,
        mut on_event: impl FnMut(&StreamEvent),
    ) -> Result<ChatResponse, OllamaError> {
        let body = self.chat_body_capped(messages, tools, num_predict);
        let estimated_prompt = estimate_prompt(messages, tools);
        let mut retry = 0;
        loop {
            let mut delivered = false;
            let result = self.chat_once(&body, &mut on_event, &mut delivered).await;
            if let Some((message, done)) =
                self.settle(result, retry, !delivered, "/api/chat").await?
            {
                let usage = Usage::new(
                    done.prompt_eval_count,
                    done.eval_count,
                    estimated_prompt,
                    estimate_answer(&message),
                );
                return Ok(ChatResponse {
                    raw_tool_call_text: message.tool_calls.is_empty()
                        && looks_like_raw_tool_call(&message.content),
                    message,
                    done_reason: done.done_reason,
                    usage,
                    retries: retry,
                    total_duration: done.total_duration_ns.map(Duration::from_nanos),
                    load_duration: done.load_duration_ns.map(Duration::from_nanos),
                });
            }
            retry += 1;
        }
    }

    async fn chat_once(
        &self,
        body: &Value,
        on_event: &mut impl FnMut(&StreamEvent),
        delivered: &mut bool,
    ) -> Result<(Message, crate::stream::DoneInfo), OllamaError> {
        let first = self.config.first_byte_timeout;
        let resp = tokio::time::timeout(
            first,
            with_auth(self.http.post(self.url("/api/chat")).json(body)).send(),
        )
        .await
        .map_err(|_| OllamaError::Stalled { after: first })?
        .map_err(|e| self.transport_error(e))?;
        let status = resp.status().as_u16();
        if !(200..300).contains(&status) {
            let body = tokio::time::timeout(first, resp.bytes())
                .await
                .map_err(|_| OllamaError::Stalled { after: first })?
                .map_err(|e| self.transport_error(e))?;
            return Err(self.error_from_body(status, &body));
        }
        let mut stream = ChatStream::new(&self.config.model, &self.base, self.config.num_ctx);
        let mut resp = resp;
        let idle = self.config.idle_timeout;
        loop {
            let chunk = tokio::time::timeout(idle, resp.chunk())
                .await
                .map_err(|_| OllamaError::Stalled { after: idle })?
                .map_err(|e| self.transport_error(e))?;
            let Some(bytes) = chunk else { break };
            for event in stream.push(&bytes)? {
                *delivered = true;
                on_event(&event);
            }
        }
        stream.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let p = RetryPolicy {
            max_retries: 5,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(350),
        };
        let waits: Vec<u128> = (0..4).map(|r| p.backoff(r).as_millis()).collect();
        assert_eq!(waits, vec![100, 200, 350, 350]);
    }

    #[test]
    fn rejects_urls_it_cannot_use() {
        let bad = |u: &str| {
            OllamaClient::new(OllamaConfig {
                base_url: u.into(),
                ..OllamaConfig::default()
            })
            .unwrap_err()
        };
        assert!(matches!(bad("not a url"), OllamaError::BadUrl { .. }));
        assert!(matches!(
            bad("https://example.com:443"),
            OllamaError::BadUrl { .. }
        ));
        assert!(OllamaClient::new(OllamaConfig::default()).is_ok());
    }
}
