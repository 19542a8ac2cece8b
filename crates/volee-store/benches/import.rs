//! `volee agent --import` figure (issue 21): importing a 50 MB export, parse + checks + write
//! (target ≤ 2 s). The export is generated: user turns, assistant tool calls and their results,
//! a compaction. `IMPORT_MB` changes the size, `BENCH_DIR` picks the disk, `RUNS` the count.
//! `cargo bench -p volee-store --bench import`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Instant;

use volee_store::{
    CompactionRecord, ExportDocument, ImportOptions, Message, SessionState, Store, ToolCall,
    ToolFunction, TranscriptItem, TranscriptLine, Usage, SCHEMA_VERSION,
};

fn export_of(bytes: usize, project: &Path) -> ExportDocument {
    let mut transcript = Vec::new();
    let mut size = 0usize;
    let mut turn = 0u64;
    let push = |transcript: &mut Vec<TranscriptLine>, item: TranscriptItem| {
        let seq = transcript.len() as u64 + 1;
        transcript.push(TranscriptLine {
            seq,
            at_ms: 1_796_069_822_000 + seq,
            item,
        });
    };
    let mut context = vec![Message::system("You are volee's agent.")];
    push(
        &mut transcript,
        TranscriptItem::Message {
            message: context[0].clone(),
        },
    );
    while size < bytes {
        turn += 1;
        let user = Message::user(format!(
            "turn {turn}: look at crates/volee-store/src/store.rs and tell me why the checkpoint \
             is flat in the transcript's length"
        ));
        let call = ToolCall {
            id: Some(format!("call_{turn:08x}")),
            function: ToolFunction {
                index: Some(0),
                name: "shell".into(),
                arguments: serde_json::json!({"command": format!("sed -n 1,80p src/file{turn}.rs")}),
            },
        };
        let mut assistant = Message::assistant("");
        assistant.tool_calls.push(call.clone());
        let output: String = (0..40)
            .map(|i| {
                format!("{turn:6} {i:3}  let checkpoint = self.transcript_len + unsaved; // line\n")
            })
            .collect();
        let result = Message::tool_result(&call, output);
        let answer = Message::assistant(format!(
            "Turn {turn}: the writer appends only the new lines and replaces session.json."
        ));
        for m in [user, assistant, result, answer] {
            push(
                &mut transcript,
                TranscriptItem::Message { message: m.clone() },
            );
            // As `--export` prints it (pretty), nested four levels deep.
            size += serde_json::to_string_pretty(transcript.last().unwrap())
                .unwrap()
                .replace('\n', "\n        ")
                .len();
            context.push(m);
        }
    }
    let summary =
        "The user asked about checkpoints; the agent read store.rs many times.".to_string();
    let record = CompactionRecord {
        summary: summary.clone(),
        replaced_messages: (context.len() - 5) as u64,
        tokens_before: 30_000,
        tokens_after: 4_000,
        model: "gemma4".into(),
        seq: transcript.len() as u64 + 1,
        at_ms: 1_796_069_823_000,
    };
    push(
        &mut transcript,
        TranscriptItem::Compaction {
            record: record.clone(),
        },
    );
    let tail = context.split_off(context.len() - 4);
    let mut messages = vec![
        context[0].clone(),
        Message::user(format!("Summary:\n{summary}")),
    ];
    messages.push(Message::assistant("Understood."));
    messages.extend(tail);
    let last_seq = transcript.len() as u64;
    ExportDocument {
        schema_version: SCHEMA_VERSION,
        exported_at_ms: 1_796_069_824_000,
        session: SessionState {
            schema_version: SCHEMA_VERSION,
            id: "benchimport2".into(),
            title: "import bench".into(),
            parent_id: None,
            forked_at_seq: None,
            created_at_ms: 1_796_069_822_000,
            updated_at_ms: 1_796_069_824_000,
            archived: false,
            project_root: project.to_path_buf(),
            model: "gemma4".into(),
            messages,
            scratchpad: String::new(),
            todos: Vec::new(),
            retry_counts: Default::default(),
            tool_counts: Default::default(),
            usage: Usage::default(),
            pending_tool_calls: Vec::new(),
            compaction_count: 1,
            last_seq,
            transcript_bytes: 0,
            synced_from: None,
            imported_from: None,
            tags: Vec::new(),
        },
        transcript,
        compactions: vec![record],
        transcript_torn_tail: false,
    }
}

fn main() {
    let mb: usize = std::env::var("IMPORT_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let runs: usize = std::env::var("RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let base = std::env::var_os("BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::tempdir_in(base).unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir(&project).unwrap();
    let file = dir.path().join("export.json");
    let doc = export_of(mb << 20, &project);
    std::fs::write(&file, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let len = std::fs::metadata(&file).unwrap().len();
    println!(
        "import of a {:.1} MB export ({} transcript lines), {runs} runs:",
        len as f64 / 1e6,
        doc.transcript.len()
    );
    drop(doc);
    let mut times = Vec::new();
    for run in 0..runs {
        let store = Store::new(dir.path().join(format!("store-{run}")));
        let t = Instant::now();
        let imported = store.import(&file, &ImportOptions::default()).unwrap();
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        assert!(!imported.recovered_tail);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "  min {:.0}  p50 {:.0}  max {:.0} ms (target ≤ 2000 ms)",
        times[0],
        times[times.len() / 2],
        times[times.len() - 1]
    );
}
