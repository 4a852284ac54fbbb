//! The 2026-07-28 tools: `confirm`, a multi round-trip request (SEP-2322) whose rounds ask
//! for an elicitation and a sampling and then for the roots; and `task`, a call that becomes a
//! task of the tasks extension (SEP-2663) when the request declared the extension.
//!
//! Both keep their state in the process (`requestState` is an opaque handle to it), so rounds
//! and polls may come over any session, as they do over the stateless HTTP lifecycle.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, SystemTime},
};

use rmcp::{
    ErrorData as McpError,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CreateTaskResult,
        DetailedTask, GetTaskResult, InputRequest, InputRequests, InputRequiredResult, Task,
        TaskPayload, TaskStatus,
    },
};
use serde_json::{Map, Value, json};

use crate::{log, server::lock, tools::Args};

/// Bound on `confirm` rounds and tasks remembered at once; past it the oldest are dropped.
const MAX_REMEMBERED: usize = 1024;

/// How long a finished task stays readable by `tasks/get`.
const TASK_TTL: Duration = Duration::from_secs(60);

/// What polls of a task should wait between them.
const POLL_INTERVAL_MS: u64 = 20;

/// Where a `confirm` call is between its rounds.
enum Confirm {
    /// Asked for the elicitation (`confirm`) and the sampling (`summary`).
    Asked { action: String },
    /// Confirmed; asked for the roots.
    Confirmed {
        action: String,
        answer: Value,
        summary: String,
    },
}

/// A task of `task`.
struct TaskEntry {
    task: Task,
    payload: TaskPayload,
    /// Ends the sleep of a task that is cancelled.
    stop: tokio::task::AbortHandle,
}

/// The state of both tools, shared by every session of the process.
#[derive(Default)]
pub struct Rounds {
    confirms: Mutex<HashMap<String, (u64, Confirm)>>,
    tasks: Mutex<HashMap<String, (u64, TaskEntry)>>,
    next: std::sync::atomic::AtomicU64,
}

fn next(rounds: &Rounds) -> u64 {
    rounds
        .next
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Inserts under `key`, dropping the oldest entry when the map is full.
fn remember<T>(map: &mut HashMap<String, (u64, T)>, key: String, serial: u64, value: T) {
    if map.len() >= MAX_REMEMBERED
        && let Some(oldest) = map
            .iter()
            .min_by_key(|(_, (n, _))| *n)
            .map(|(k, _)| k.clone())
    {
        map.remove(&oldest);
    }
    map.insert(key, (serial, value));
}

fn input_request(request: Value) -> InputRequest {
    serde_json::from_value(request).expect("the input requests below are well-formed")
}

fn invalid(message: impl Into<String>) -> McpError {
    McpError::invalid_params(message.into(), None)
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` of `time`.
fn iso8601(time: SystemTime) -> String {
    let (text, micros) = mcpgw::civil::utc(time);
    format!("{text}.{:03}Z", micros / 1000)
}

impl Rounds {
    /// `confirm {action}`: round 1 asks `confirm` (a form elicitation of `{ok: boolean}`) and
    /// `summary` (a sampling); round 2, when the elicitation was accepted, asks `roots`; round
    /// 3 answers `{action, confirmed: true, answer, summary, roots}` (`answer` the
    /// elicitation's content, `summary` the sampled text, `roots` their URIs). A decline or a
    /// cancel ends it at round 2 with `{action, confirmed: false}`.
    pub fn confirm(&self, request: &CallToolRequestParams) -> Result<CallToolResponse, McpError> {
        let Some(state) = request.request_state.as_deref() else {
            let empty = Map::new();
            let args = Args(request.arguments.as_ref().unwrap_or(&empty));
            let action = Args::required(args.str("action"), "action")
                .map_err(invalid)?
                .to_string();
            let handle = format!("confirm-{}", next(self));
            let requests = InputRequests::from([
                (
                    "confirm".to_string(),
                    input_request(json!({"method": "elicitation/create", "params": {
                        "mode": "form",
                        "message": format!("Run {action}?"),
                        "requestedSchema": {"type": "object",
                            "properties": {"ok": {"type": "boolean", "title": "Run it"}},
                            "required": ["ok"]}}})),
                ),
                (
                    "summary".to_string(),
                    input_request(json!({"method": "sampling/createMessage", "params": {
                        "messages": [{"role": "user", "content": {"type": "text",
                            "text": format!("Say in a few words what {action} does.")}}],
                        "maxTokens": 64}})),
                ),
            ]);
            remember(
                &mut lock(&self.confirms),
                handle.clone(),
                next(self),
                Confirm::Asked { action },
            );
            return Ok(InputRequiredResult::new(Some(requests), Some(handle)).into());
        };
        let Some((_, round)) = lock(&self.confirms).remove(state) else {
            return Err(invalid(format!(
                "confirm: requestState {state:?} is not one this server handed out, or it was used already"
            )));
        };
        let responses = request.input_responses.clone().unwrap_or_default();
        let response = |key: &str| {
            responses
                .get(key)
                .cloned()
                .ok_or_else(|| invalid(format!("confirm: inputResponses has no {key:?}")))
        };
        match round {
            Confirm::Asked { action } => {
                let confirm = response("confirm")?;
                let summary = response("summary")?;
                if confirm["action"] != "accept" {
                    log(&format!("confirm: {action} declined"));
                    return Ok(CallToolResult::structured(
                        json!({"action": action, "confirmed": false}),
                    )
                    .into());
                }
                let summary = summary["content"]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let handle = format!("confirm-{}", next(self));
                remember(
                    &mut lock(&self.confirms),
                    handle.clone(),
                    next(self),
                    Confirm::Confirmed {
                        action,
                        answer: confirm["content"].clone(),
                        summary,
                    },
                );
                let requests = InputRequests::from([(
                    "roots".to_string(),
                    input_request(json!({"method": "roots/list"})),
                )]);
                Ok(InputRequiredResult::new(Some(requests), Some(handle)).into())
            }
            Confirm::Confirmed {
                action,
                answer,
                summary,
            } => {
                let roots: Vec<Value> = response("roots")?["roots"]
                    .as_array()
                    .map(|r| r.iter().map(|root| root["uri"].clone()).collect())
                    .unwrap_or_default();
                log(&format!("confirm: {action} confirmed"));
                Ok(CallToolResult::structured(json!({
                    "action": action, "confirmed": true, "answer": answer, "summary": summary,
                    "roots": roots,
                }))
                .into())
            }
        }
    }

    /// `task {ms, text}`: echoes `text` after `ms`; as a task when the request declared the
    /// tasks extension, else inline.
    pub async fn task(
        self: &Arc<Self>,
        args: Args<'_>,
        as_task: bool,
    ) -> Result<CallToolResponse, String> {
        let ms = args.integer("ms", 0, 600_000)?.unwrap_or(0) as u64;
        let text = args.str("text")?.unwrap_or("done").to_string();
        let result = move || CallToolResult::success(vec![ContentBlock::text(text)]);
        if !as_task {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            return Ok(result().into());
        }
        let id = format!("task-{}", next(self));
        let now = iso8601(SystemTime::now());
        let task = Task::new(id.clone(), TaskStatus::Working, now.clone(), now)
            .with_ttl_ms(TASK_TTL.as_millis() as u64)
            .with_poll_interval_ms(POLL_INTERVAL_MS);
        let rounds = self.clone();
        let task_id = id.clone();
        let mut tasks = lock(&self.tasks);
        let stop = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            let result = serde_json::to_value(result()).expect("a CallToolResult is JSON");
            let Value::Object(result) = result else {
                unreachable!("a CallToolResult is an object")
            };
            rounds.finish(&task_id, TaskPayload::Completed { result });
            tokio::time::sleep(TASK_TTL).await;
            lock(&rounds.tasks).remove(&task_id);
        })
        .abort_handle();
        remember(
            &mut tasks,
            id,
            next(self),
            TaskEntry {
                task: task.clone(),
                payload: TaskPayload::Working,
                stop,
            },
        );
        Ok(CreateTaskResult::new(task).into())
    }

    fn finish(&self, id: &str, payload: TaskPayload) {
        if let Some((_, entry)) = lock(&self.tasks).get_mut(id)
            && !entry.payload.status().is_terminal()
        {
            entry.task.last_updated_at = iso8601(SystemTime::now());
            entry.payload = payload;
            log(&format!("task {id}: {:?}", entry.payload.status()));
        }
    }

    /// `tasks/get`.
    pub fn get(&self, id: &str) -> Result<GetTaskResult, McpError> {
        let tasks = lock(&self.tasks);
        let (_, entry) = tasks
            .get(id)
            .ok_or_else(|| invalid(format!("tasks/get: no task {id:?}")))?;
        Ok(GetTaskResult::new(DetailedTask::new(
            entry.task.clone(),
            entry.payload.clone(),
        )))
    }

    /// `tasks/cancel`: a task still working ends cancelled.
    pub fn cancel(&self, id: &str) -> Result<(), McpError> {
        let stop = match lock(&self.tasks).get(id) {
            Some((_, entry)) => entry.stop.clone(),
            None => return Err(invalid(format!("tasks/cancel: no task {id:?}"))),
        };
        self.finish(id, TaskPayload::Cancelled);
        if lock(&self.tasks)
            .get(id)
            .is_some_and(|(_, e)| e.payload.status() == TaskStatus::Cancelled)
        {
            stop.abort();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    #[test]
    fn timestamps_are_iso8601() {
        assert_eq!(iso8601(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_796_171_696_789);
        assert_eq!(iso8601(t), "2026-12-02T00:34:56.789Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(iso8601(leap), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn the_oldest_is_dropped_when_full() {
        let mut map = HashMap::new();
        for n in 0..(MAX_REMEMBERED as u64 + 1) {
            remember(&mut map, format!("k{n}"), n, ());
        }
        assert_eq!(map.len(), MAX_REMEMBERED);
        assert!(!map.contains_key("k0") && map.contains_key("k1"));
    }
}
