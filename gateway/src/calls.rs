//! Resumable calls: a tool call made with a call id (header `mcpgw-call-id`) runs on a task of
//! its own, not its caller's. When the caller goes away (the session channel that carried it
//! ended) it keeps running, and the gateway keeps its progress and its outcome for
//! `GET /calls/{id}` to answer again, exactly as the call's own request would have. Bounded:
//!
//! - in time (`--call-retention`): a running call that nobody follows is cancelled once nobody
//!   has followed it for the retention time; a finished call is forgotten the retention time
//!   after it ended. Its deadline, and `DELETE /calls/{id}`, still end it too;
//! - in memory (`--call-retention-bytes`, counting progress, outcomes and each call's own
//!   bookkeeping): past it, finished calls are forgotten oldest first, then the oldest progress
//!   of the call that holds the most is dropped (later chunks keep their numbers, so a resume
//!   sees the gap); while running calls alone fill it, new resumable calls are refused (503).
//!
//! A call id is never reused: one that ran here is refused (409), so no call runs twice, and a
//! forgotten call answers 410 saying why, for as long as the gateway remembers its id.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::stream::BoxStream;
use mcpgw::wire::JsonObject;
use mcpgw::wire::frame::CallId;
use mcpgw::wire::output::seconds;
use serde_json::Value;
use tokio::sync::Notify;

use crate::chunk;
use crate::error::Error;
use crate::upstream::Upstream;

/// What each call costs beside its progress and outcome, in the memory budget.
const RECORD_BYTES: usize = 512;

/// How many forgotten calls' ids are remembered (to answer 410, and to refuse them again).
const GONE_KEPT: usize = 16 * 1024;

/// The limits of resumable calls.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// How long a call nobody follows, or a finished call, is kept; zero: calls are not
    /// resumable.
    pub retention: Duration,
    /// The memory all resumable calls may hold together.
    pub budget: usize,
}

/// Every resumable call of the gateway.
pub struct Calls {
    settings: Settings,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    live: HashMap<CallId, Arc<Record>>,
    gone: HashMap<CallId, Gone>,
    gone_order: VecDeque<CallId>,
    /// What the live calls hold.
    bytes: usize,
}

/// Why a call is no longer kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gone {
    /// Its finished answer was acknowledged (or deleted).
    Forgotten,
    /// `DELETE` cancelled it.
    Cancelled,
    /// Nobody followed it for the retention time, so it was cancelled.
    Abandoned,
    /// It ended more than the retention time ago.
    Expired,
    /// Its outcome made room for newer calls.
    Evicted,
}

/// One resumable call.
pub struct Record {
    id: CallId,
    state: Mutex<State>,
    /// Progress arrived, or the outcome.
    changed: Notify,
    task: Mutex<Option<tokio::task::AbortHandle>>,
}

struct State {
    /// Progress chunks as NDJSON lines; the front one is number `first_seq`.
    progress: VecDeque<Bytes>,
    first_seq: u64,
    /// The number the next chunk gets (1-based; the last chunk's is the number of progress
    /// chunks plus one).
    next_seq: u64,
    /// Progress and outcome bytes held.
    bytes: usize,
    outcome: Option<Outcome>,
    ended: Option<Instant>,
    /// Answers being written from it now.
    watchers: usize,
    /// Counts the times it was left without watchers, so that a timer set then knows whether
    /// it still applies.
    left: u64,
}

#[derive(Clone)]
enum Outcome {
    /// The result's ToolChunk, as JSON.
    Done(Bytes),
    /// The error, and the last chunk that stands for it in a stream that had progress.
    Failed { error: Error, chunk: Bytes },
}

impl Outcome {
    fn failed(error: Error) -> Outcome {
        let (status, detail) = error.status_and_detail();
        let chunk = to_json(&chunk::failure(status.as_u16(), &detail));
        Outcome::Failed { error, chunk }
    }

    fn chunk(&self) -> &Bytes {
        match self {
            Outcome::Done(chunk) | Outcome::Failed { chunk, .. } => chunk,
        }
    }

    fn bytes(&self) -> usize {
        self.chunk().len()
    }
}

fn to_json(value: &impl serde::Serialize) -> Bytes {
    Bytes::from(serde_json::to_vec(value).expect("wire types serialize"))
}

fn line(json: &[u8]) -> Bytes {
    let mut line = Vec::with_capacity(json.len() + 1);
    line.extend_from_slice(json);
    line.push(b'\n');
    Bytes::from(line)
}

/// How a call answers.
pub enum Answer {
    /// `{"chunk": ToolChunk}`, for a request that did not ask for a stream.
    Json(Bytes),
    /// NDJSON lines, the first one number `seq` of the call.
    Lines {
        /// The number of the first line.
        seq: u64,
        /// The lines as they come; an error ends the answer early (it fell behind progress
        /// that was dropped to stay within the memory budget).
        lines: BoxStream<'static, Result<Bytes, String>>,
    },
}

/// An answer being written from a record: while one is, nobody is missing.
struct Watch {
    calls: Arc<Calls>,
    record: Arc<Record>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut state = self.record.state.lock().unwrap();
        state.watchers -= 1;
        if state.watchers == 0 && state.outcome.is_none() {
            state.left += 1;
            let left = state.left;
            drop(state);
            self.calls.abandon_later(&self.record, left);
        }
    }
}

impl Calls {
    /// No calls yet.
    pub fn new(settings: Settings) -> Arc<Calls> {
        Arc::new(Calls {
            settings,
            inner: Mutex::default(),
        })
    }

    /// How long a call is kept; zero when calls are not resumable.
    pub fn retention(&self) -> Duration {
        self.settings.retention
    }

    fn gone_error(&self, id: &CallId, why: Gone) -> Error {
        let retention = seconds(self.settings.retention);
        let why = match why {
            Gone::Forgotten => format!("its answer was acknowledged (DELETE /calls/{id})"),
            Gone::Cancelled => format!("it was cancelled (DELETE /calls/{id})"),
            Gone::Abandoned => format!(
                "nobody followed it for {retention}s (--call-retention), so it was cancelled"
            ),
            Gone::Expired => format!("it ended more than {retention}s ago (--call-retention)"),
            Gone::Evicted => {
                "its outcome was dropped to make room for newer calls (--call-retention-bytes)"
                    .into()
            }
        };
        Error::CallGone {
            id: id.to_string(),
            why,
        }
    }

    /// The call `id`, or why there is none.
    pub fn find(&self, id: &CallId) -> Result<Arc<Record>, Error> {
        let inner = self.inner.lock().unwrap();
        if let Some(record) = inner.live.get(id) {
            return Ok(record.clone());
        }
        Err(match inner.gone.get(id) {
            Some(why) => self.gone_error(id, *why),
            None => Error::CallUnknown { id: id.to_string() },
        })
    }

    /// Starts calling `tool` as call `id`, on a task of its own.
    pub fn start(
        self: &Arc<Self>,
        id: CallId,
        upstream: Arc<Upstream>,
        tool: String,
        arguments: Option<JsonObject>,
        deadline: Option<Duration>,
    ) -> Result<Arc<Record>, Error> {
        let record = Arc::new(Record {
            id: id.clone(),
            state: Mutex::new(State {
                progress: VecDeque::new(),
                first_seq: 1,
                next_seq: 1,
                bytes: 0,
                outcome: None,
                ended: None,
                watchers: 0,
                left: 0,
            }),
            changed: Notify::new(),
            task: Mutex::new(None),
        });
        {
            let mut inner = self.inner.lock().unwrap();
            if inner.live.contains_key(&id) || inner.gone.contains_key(&id) {
                return Err(Error::CallIdTaken { id: id.to_string() });
            }
            if inner.bytes + RECORD_BYTES > self.settings.budget {
                self.make_room(&mut inner);
                if inner.bytes + RECORD_BYTES > self.settings.budget {
                    return Err(Error::CallsFull {
                        budget: self.settings.budget,
                    });
                }
            }
            inner.bytes += RECORD_BYTES;
            inner.live.insert(id, record.clone());
        }
        let (calls, running) = (self.clone(), record.clone());
        let task = tokio::spawn(async move {
            let result = upstream
                .call_with_progress(
                    &tool,
                    arguments,
                    deadline,
                    |p| {
                        let chunk = chunk::progress(p.progress, p.total, p.message.as_deref());
                        calls.progress(&running, line(&to_json(&chunk)));
                        std::future::ready(true)
                    },
                    std::future::pending(),
                )
                .await;
            if let Some(result) = result {
                calls.finish(&running, result);
            }
        });
        *record.task.lock().unwrap() = Some(task.abort_handle());
        // A DELETE that came before the task was recorded has set the outcome already.
        if record.state.lock().unwrap().outcome.is_some() {
            task.abort();
        }
        // Until its caller watches it, nobody does.
        self.abandon_later(&record, 0);
        Ok(record)
    }

    fn progress(&self, record: &Record, line: Bytes) {
        let mut inner = self.inner.lock().unwrap();
        let mut state = record.state.lock().unwrap();
        if state.outcome.is_some() {
            return;
        }
        let len = line.len();
        state.progress.push_back(line);
        state.next_seq += 1;
        state.bytes += len;
        drop(state);
        inner.bytes += len;
        if inner.bytes > self.settings.budget {
            self.make_room(&mut inner);
        }
        drop(inner);
        record.changed.notify_waiters();
    }

    fn finish(self: &Arc<Self>, record: &Arc<Record>, result: Result<Value, Error>) {
        let outcome = match result {
            Ok(result) => Outcome::Done(to_json(&chunk::from_call_result(result))),
            Err(error) => Outcome::failed(error),
        };
        let mut inner = self.inner.lock().unwrap();
        let mut state = record.state.lock().unwrap();
        if state.outcome.is_some() {
            return;
        }
        let len = outcome.bytes();
        state.outcome = Some(outcome);
        state.ended = Some(Instant::now());
        state.bytes += len;
        drop(state);
        inner.bytes += len;
        if inner.bytes > self.settings.budget {
            self.make_room(&mut inner);
        }
        drop(inner);
        record.changed.notify_waiters();
        let (calls, record) = (self.clone(), record.clone());
        spawn(async move {
            tokio::time::sleep(calls.settings.retention).await;
            let mut inner = calls.inner.lock().unwrap();
            if inner
                .live
                .get(&record.id)
                .is_some_and(|r| Arc::ptr_eq(r, &record))
            {
                calls.forget(&mut inner, &record.id, Gone::Expired);
            }
        });
    }

    /// Cancels `record` once nobody has followed it for the retention time since it was left
    /// for the `left`th time.
    fn abandon_later(self: &Arc<Self>, record: &Arc<Record>, left: u64) {
        let (calls, record) = (self.clone(), record.clone());
        spawn(async move {
            tokio::time::sleep(calls.settings.retention).await;
            let abandoned = {
                let state = record.state.lock().unwrap();
                state.watchers == 0 && state.left == left && state.outcome.is_none()
            };
            if abandoned {
                tracing::info!(call = %record.id, "nobody followed the call for the retention time: cancelling it");
                calls.cancel(&record, Gone::Abandoned);
            }
        });
    }

    /// Removes a live call, remembering why.
    fn forget(&self, inner: &mut Inner, id: &CallId, why: Gone) {
        if let Some(record) = inner.live.remove(id) {
            inner.bytes -= RECORD_BYTES + record.state.lock().unwrap().bytes;
        }
        if inner.gone_order.len() == GONE_KEPT
            && let Some(oldest) = inner.gone_order.pop_front()
        {
            inner.gone.remove(&oldest);
        }
        inner.gone.insert(id.clone(), why);
        inner.gone_order.push_back(id.clone());
    }

    /// Ends a running call: its answers end with why, and it is forgotten.
    fn cancel(&self, record: &Record, why: Gone) {
        {
            let mut inner = self.inner.lock().unwrap();
            let mut state = record.state.lock().unwrap();
            if state.outcome.is_some() {
                return;
            }
            state.outcome = Some(Outcome::failed(self.gone_error(&record.id, why)));
            state.ended = Some(Instant::now());
            drop(state);
            self.forget(&mut inner, &record.id, why);
        }
        if let Some(task) = record.task.lock().unwrap().take() {
            // Dropping the call tells the upstream `notifications/cancelled`.
            task.abort();
        }
        record.changed.notify_waiters();
    }

    /// `DELETE /calls/{id}`: cancels a running call, forgets a finished one. With `ack`, a
    /// running call is left running (and this fails): only a finished call is acknowledged.
    pub fn delete(&self, id: &CallId, ack: bool) -> Result<(), Error> {
        let record = self.find(id)?;
        let finished = record.state.lock().unwrap().outcome.is_some();
        if finished {
            let mut inner = self.inner.lock().unwrap();
            if inner.live.get(id).is_some_and(|r| Arc::ptr_eq(r, &record)) {
                self.forget(&mut inner, id, Gone::Forgotten);
            }
            return Ok(());
        }
        if ack {
            return Err(Error::CallRunning { id: id.to_string() });
        }
        self.cancel(&record, Gone::Cancelled);
        Ok(())
    }

    /// Over the budget: forgets finished calls, oldest first, then drops the oldest progress
    /// of the calls that hold the most.
    fn make_room(&self, inner: &mut Inner) {
        let budget = self.settings.budget;
        let mut finished: Vec<(Instant, CallId)> = inner
            .live
            .values()
            .filter_map(|r| Some((r.state.lock().unwrap().ended?, r.id.clone())))
            .collect();
        finished.sort();
        for (_, id) in finished {
            if inner.bytes <= budget {
                return;
            }
            tracing::debug!(call = %id, "forgetting a finished call to stay within --call-retention-bytes");
            self.forget(inner, &id, Gone::Evicted);
        }
        let mut holders: Vec<(usize, Arc<Record>)> = inner
            .live
            .values()
            .map(|r| (r.state.lock().unwrap().bytes, r.clone()))
            .collect();
        holders.sort_by_key(|(bytes, _)| std::cmp::Reverse(*bytes));
        for (_, record) in holders {
            let mut state = record.state.lock().unwrap();
            while inner.bytes > budget {
                let Some(dropped) = state.progress.pop_front() else {
                    break;
                };
                state.first_seq += 1;
                state.bytes -= dropped.len();
                inner.bytes -= dropped.len();
            }
            if inner.bytes <= budget {
                return;
            }
        }
    }

    fn watch(self: &Arc<Self>, record: &Arc<Record>) -> Watch {
        record.state.lock().unwrap().watchers += 1;
        Watch {
            calls: self.clone(),
            record: record.clone(),
        }
    }

    /// Answers call `record` as its own request would have: its JSON answer, or (`streaming`)
    /// the NDJSON lines after the first `after`. Either waits for the call as long as it runs,
    /// and while it does, the call is followed.
    pub async fn answer(
        self: &Arc<Self>,
        record: Arc<Record>,
        after: u64,
        streaming: bool,
    ) -> Result<Answer, Error> {
        let watch = self.watch(&record);
        if !streaming {
            return match record.outcome().await {
                Outcome::Done(chunk) => {
                    let mut body = Vec::with_capacity(chunk.len() + 10);
                    body.extend_from_slice(b"{\"chunk\":");
                    body.extend_from_slice(&chunk);
                    body.push(b'}');
                    Ok(Answer::Json(Bytes::from(body)))
                }
                Outcome::Failed { error, .. } => Err(error),
            };
        }
        // As a call's own stream does, the status waits for the first line, so a call that
        // failed before any progress answers with its own status.
        let first = loop {
            let changed = record.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let state = record.state.lock().unwrap();
                if state.next_seq > after + 1 && !state.progress.is_empty() {
                    break (after + 1).max(state.first_seq);
                }
                match &state.outcome {
                    Some(Outcome::Failed { error, .. }) if state.next_seq == 1 => {
                        return Err(error.clone());
                    }
                    Some(_) => break (after + 1).max(state.first_seq),
                    None => {}
                }
            }
            changed.await;
        };
        let lines = futures::stream::unfold(
            Lines {
                watch,
                next: first,
                pending: VecDeque::new(),
                done: false,
            },
            |mut at| async move {
                let item = at.next().await?;
                Some((item, at))
            },
        );
        Ok(Answer::Lines {
            seq: first,
            lines: Box::pin(lines),
        })
    }
}

/// Where a streamed answer is in its call.
struct Lines {
    watch: Watch,
    /// The number of the next line to send.
    next: u64,
    pending: VecDeque<Bytes>,
    done: bool,
}

impl Lines {
    async fn next(&mut self) -> Option<Result<Bytes, String>> {
        let record = self.watch.record.clone();
        loop {
            if let Some(line) = self.pending.pop_front() {
                return Some(Ok(line));
            }
            if self.done {
                return None;
            }
            let changed = record.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let state = record.state.lock().unwrap();
                if self.next < state.first_seq && self.next < state.next_seq {
                    self.done = true;
                    return Some(Err(format!(
                        "the answer fell behind: chunks {} to {} of call {} were dropped to stay within --call-retention-bytes",
                        self.next,
                        state.first_seq - 1,
                        record.id
                    )));
                }
                if self.next < state.next_seq {
                    let from = (self.next - state.first_seq) as usize;
                    self.pending.extend(state.progress.range(from..).cloned());
                    self.next = state.next_seq;
                }
                if let Some(outcome) = &state.outcome {
                    // The last chunk is number `next_seq`; a host that has it gets no line.
                    if self.next == state.next_seq {
                        self.pending.push_back(line(outcome.chunk()));
                    }
                    self.done = true;
                }
            }
            if self.pending.is_empty() && !self.done {
                changed.await;
            }
        }
    }
}

impl Record {
    /// Waits for the outcome.
    async fn outcome(&self) -> Outcome {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(outcome) = &self.state.lock().unwrap().outcome {
                return outcome.clone();
            }
            changed.await;
        }
    }
}

/// Spawns `task` on the runtime, when there is one (a watch may end as the runtime shuts down).
fn spawn(task: impl Future<Output = ()> + Send + 'static) {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(task);
    }
}
