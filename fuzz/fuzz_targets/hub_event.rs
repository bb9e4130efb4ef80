//! The listen hub's event writer: whatever a publisher or a bus message puts
//! in a task status, the event is one SSE data line holding one JSON object
//! with unique keys at every level, the members the hub owns (`jsonrpc`,
//! `method`, `taskId`, the subscription id in `_meta`) the hub's.
//!
//! Input: the task id up to the first newline, then the params (JSON
//! text; inputs whose params are not an object are skipped). The stream's
//! subscription id alternates between a number and a string by the input's
//! length.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

#[path = "../../tests/oracles/event_oracle.rs"]
mod event_oracle;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (task_id, params) = text.split_once('\n').unwrap_or((text, "{}"));
    let Ok(params) = serde_json::from_str::<Map<String, Value>>(params) else {
        return;
    };
    let id = if data.len() % 2 == 0 { "7" } else { "\"sub-1\"" };
    let event = mcp_edge::hub::fuzz_task_event(task_id, params.clone(), id);
    event_oracle::check_task_event(&event, task_id, &params, id);
});
