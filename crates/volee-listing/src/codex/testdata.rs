//! Recorded answers of Codex 0.171.0's app-server, shared by the unit tests.

#![allow(clippy::unwrap_used)]

use serde_json::Value;

use super::CodexThread;

/// `thread/list`'s answer as recorded from Codex 0.171.0 (`probe/codex-daemon-query.txt`,
/// `gitInfo` and `readStates` trimmed).
pub(crate) const PROBE_THREAD_LIST: &str = r#"{"id":3,"result":{"data":[{"id":"01a22ab8-34d5-7a73-9c8e-316065b6cd1a","environments":[{"environmentId":"local","cwd":"/home/dev/proj1/codex","runtimeWorkspaceRoots":["/home/dev/proj1/codex"]}],"extra":null,"sessionId":"01a22ab8-34d5-7a73-9c8e-316065b6cd1a","forkedFromId":null,"attachedToThreadId":null,"parentThreadId":null,"preview":"say hello daemon","ephemeral":false,"section":null,"sectionEnteredAt":null,"projectId":null,"historyMode":"paginated","modelProvider":"openai","model":"gpt-6.2-sol","reasoningEffort":null,"createdAt":1796013051,"updatedAt":1796013051,"recencyAt":1796013051,"status":{"type":"active","activeFlags":[]},"path":"/home/dev/home1/codex/.codex/sessions/2026/11/30/rollout-2026-11-30T04-30-51-01a22ab8-34d5-7a73-9c8e-316065b6cd1a.jsonl","cwd":"/home/dev/proj1/codex","cliVersion":"0.171.0","originator":"codex-tui","source":"vscode","canAcceptDirectInput":null,"threadSource":null,"agentNickname":null,"agentRole":null,"gitInfo":null,"name":"say hello daemon","daybreakEnabled":null,"turns":[]},{"id":"01a22ab6-cfb5-7593-8ad5-c60afb75f756","environments":null,"extra":null,"sessionId":"01a22ab6-cfb5-7593-8ad5-c60afb75f756","forkedFromId":null,"attachedToThreadId":null,"parentThreadId":null,"preview":"say hello","ephemeral":false,"section":null,"sectionEnteredAt":null,"projectId":null,"historyMode":"paginated","modelProvider":"openai","model":"gpt-6.2-sol","reasoningEffort":null,"createdAt":1796012959,"updatedAt":1796012960,"recencyAt":1796012960,"status":{"type":"notLoaded"},"path":"/home/dev/home1/codex/.codex/sessions/2026/11/30/rollout-2026-11-30T04-29-19-01a22ab6-cfb5-7593-8ad5-c60afb75f756.jsonl","cwd":"/home/dev/proj1/codex","cliVersion":"0.171.0","originator":"codex-tui","source":"cli","canAcceptDirectInput":null,"threadSource":null,"agentNickname":null,"agentRole":null,"gitInfo":null,"name":"say hello","daybreakEnabled":null,"turns":[]}],"nextCursor":null,"backwardsCursor":"2026-11-30T04:30:51.085Z"}}"#;

/// `thread/read` of the ephemeral title thread every 0.171.0 TUI keeps loaded beside its own
/// (recorded by the integration test).
pub(crate) const TITLE_THREAD_READ: &str = r#"{"id":4,"result":{"thread":{"id":"01a22e2f-c9f3-7fe1-93c0-ba13760a0882","environments":[{"environmentId":"local","cwd":"/tmp/w","runtimeWorkspaceRoots":[]}],"extra":null,"sessionId":"01a22e2f-c9f3-7fe1-93c0-ba13760a0882","forkedFromId":null,"attachedToThreadId":null,"parentThreadId":null,"preview":"","ephemeral":true,"section":null,"sectionEnteredAt":null,"projectId":null,"historyMode":"paginated","modelProvider":"volee","model":"volee-test-model","reasoningEffort":null,"createdAt":1796071215,"updatedAt":1796071215,"recencyAt":1796071215,"status":{"type":"idle"},"path":null,"cwd":"/tmp/w","cliVersion":"0.171.0","originator":"codex-tui","source":"vscode","canAcceptDirectInput":true,"threadSource":"thread_title","agentNickname":null,"agentRole":null,"gitInfo":null,"name":null,"daybreakEnabled":null,"turns":[]},"readState":null}}"#;

pub(crate) fn probe_threads() -> Vec<CodexThread> {
    let v: Value = serde_json::from_str(PROBE_THREAD_LIST).unwrap();
    v["result"]["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(CodexThread::from_json)
        .collect()
}
