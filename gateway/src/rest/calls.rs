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
use serde_json::value::RawValue;
use tokio::sync::Notify;

use crate::error::Error;
use crate::rest::chunk;
use crate::upstream::Upstream;

/// What each call costs beside its progress and outcome, in the memory budget.
const RECORD_BYTES: usize = 512;

/// How many forgotten calls' ids are remembered (to answer 410, and to refuse them again): at
/// most a few MiB, beside the budget.
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
    /// Its retention timers: they end with it (a timer holds the call weakly, so that a
    /// forgotten call is freed at once; this frees the timer too).
    timers: Mutex<Vec<tokio::task::AbortHandle>>,
}

impl Drop for Record {
    fn drop(&mut self) {
        for timer in self.timers.get_mut().unwrap().drain(..) {
            timer.abort();
        }
    }
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
    /// The next chunk each streamed answer will take: what none has taken yet is spared by
    /// the budget.
    cursors: HashMap<u64, u64>,
    cursor_token: u64,
}

impl State {
    /// The first chunk a streamed answer still needs, unless every answer is too far behind
    /// to be waited for.
    fn spared_from(&self) -> Option<u64> {
        let oldest = *self.cursors.values().min()?;
        (self.next_seq.saturating_sub(oldest) <= MAX_LAG).then_some(oldest)
    }
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
                cursors: HashMap::new(),
                cursor_token: 0,
            }),
            changed: Notify::new(),
            task: Mutex::new(None),
            timers: Mutex::new(Vec::new()),
        });
        {
            let mut inner = self.inner.lock().unwrap();
            if inner.live.contains_key(&id) || inner.gone.contains_key(&id) {
                return Err(Error::CallIdTaken { id: id.to_string() });
            }
            let room = self.settings.budget.saturating_sub(RECORD_BYTES);
            if inner.bytes > room {
                self.make_room(&mut inner, room);
                if inner.bytes > room {
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
                        calls.progress(&running, chunk::ndjson(&chunk::progress_of(&p)));
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

    /// Changes a call that has no outcome yet with `change` (which returns the bytes it
    /// added), counting them against the budget; false when the call had its outcome already.
    fn add(&self, record: &Record, change: impl FnOnce(&mut State) -> usize) -> bool {
        let mut inner = self.inner.lock().unwrap();
        let mut state = record.state.lock().unwrap();
        if state.outcome.is_some() {
            return false;
        }
        let len = change(&mut state);
        state.bytes += len;
        drop(state);
        inner.bytes += len;
        if inner.bytes > self.settings.budget {
            self.make_room(&mut inner, self.settings.budget);
        }
        drop(inner);
        record.changed.notify_waiters();
        true
    }

    fn progress(&self, record: &Record, line: Bytes) {
        self.add(record, |state| {
            state.next_seq += 1;
            let len = line.len();
            state.progress.push_back(line);
            len
        });
    }

    fn finish(self: &Arc<Self>, record: &Arc<Record>, result: Result<Box<RawValue>, Error>) {
        let outcome = match result {
            Ok(result) => Outcome::Done(to_json(&chunk::from_raw_result(&result))),
            Err(error) => Outcome::failed(error),
        };
        let finished = self.add(record, |state| {
            let len = outcome.bytes();
            state.outcome = Some(outcome);
            state.ended = Some(Instant::now());
            len
        });
        if !finished {
            return;
        }
        self.after_retention(record, |calls, record| {
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
        self.after_retention(record, move |calls, record| {
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

    /// Runs `then` on `record` once the retention time has passed, unless the record is gone
    /// by then: the timer does not keep a forgotten call's progress and outcome in memory.
    fn after_retention(
        self: &Arc<Self>,
        record: &Arc<Record>,
        then: impl FnOnce(&Calls, Arc<Record>) + Send + 'static,
    ) {
        let (calls, weak) = (self.clone(), Arc::downgrade(record));
        let timer = spawn(async move {
            tokio::time::sleep(calls.settings.retention).await;
            if let Some(record) = weak.upgrade() {
                then(&calls, record);
            }
        });
        let mut timers = record.timers.lock().unwrap();
        timers.retain(|t| !t.is_finished());
        timers.extend(timer);
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

    /// `DELETE /calls/{id}`: cancels a running call, forgets a finished one, and keeps an
    /// unknown id from starting later. With `ack`, a running call is left running (and this
    /// fails): only a finished call is acknowledged.
    pub fn delete(&self, id: &CallId, ack: bool) -> Result<(), Error> {
        let record = match self.find(id) {
            Ok(record) => record,
            Err(unknown @ Error::CallUnknown { .. }) => {
                // A cancel can overtake its own call on the way here: the id is taken, so that
                // the call, should it come after all, never runs.
                if !ack {
                    self.forget(&mut self.inner.lock().unwrap(), id, Gone::Cancelled);
                }
                return Err(unknown);
            }
            Err(gone) => return Err(gone),
        };
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

    /// Brings what the calls hold down to `budget`: forgets finished calls, oldest first, then
    /// drops the oldest progress of the calls that hold the most.
    fn make_room(&self, inner: &mut Inner, budget: usize) {
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
            let spared = state.spared_from().unwrap_or(u64::MAX);
            while inner.bytes > budget && state.first_seq < spared {
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
        let mut lines = Lines::new(watch, after + 1);
        loop {
            let changed = record.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let mut state = record.state.lock().unwrap();
                if let Some(Outcome::Failed { error, .. }) = &state.outcome
                    && state.next_seq == 1
                {
                    return Err(error.clone());
                }
                // Progress dropped before this answer began is skipped: `seq` says so.
                lines.next = lines.next.max(state.first_seq);
                lines.fill(&mut state).expect("no gap at the start");
                if !lines.pending.is_empty() || lines.done {
                    break;
                }
            }
            changed.await;
        }
        Ok(Answer::Lines {
            seq: lines.pending_from,
            lines: Box::pin(futures::stream::unfold(lines, |mut lines| async move {
                let item = lines.next_line().await?;
                Some((item, lines))
            })),
        })
    }
}

/// A streamed answer's place in its call. While it lasts, the progress it has not sent yet is
/// kept (up to [`MAX_LAG`] chunks), whatever the memory budget.
struct Lines {
    watch: Watch,
    /// Its entry among the record's cursors.
    token: u64,
    /// The number of the next chunk to take from the record.
    next: u64,
    /// Chunks taken and not sent yet; the front one is number `pending_from`.
    pending: VecDeque<Bytes>,
    pending_from: u64,
    done: bool,
}

/// How far behind the progress an answer may fall before the budget no longer spares what it
/// has not sent (then it ends early, and a resume shows what was dropped).
const MAX_LAG: u64 = 1024;

impl Lines {
    fn new(watch: Watch, next: u64) -> Lines {
        let token = {
            let mut state = watch.record.state.lock().unwrap();
            state.cursor_token += 1;
            let token = state.cursor_token;
            state.cursors.insert(token, next);
            token
        };
        Lines {
            watch,
            token,
            next,
            pending: VecDeque::new(),
            pending_from: next,
            done: false,
        }
    }

    /// Takes the chunks the record has from `next` on (and the last one, once the call
    /// ended); an error when some of them were dropped.
    fn fill(&mut self, state: &mut State) -> Result<(), String> {
        if self.next < state.first_seq && self.next < state.next_seq {
            return Err(format!(
                "this answer fell more than {MAX_LAG} chunks behind: chunks {} to {} of call {} were dropped to stay within --call-retention-bytes",
                self.next,
                state.first_seq - 1,
                self.watch.record.id
            ));
        }
        if self.pending.is_empty() {
            self.pending_from = self.next;
        }
        if self.next < state.next_seq {
            let from = (self.next - state.first_seq) as usize;
            self.pending.extend(state.progress.range(from..).cloned());
            self.next = state.next_seq;
        }
        if let Some(outcome) = &state.outcome {
            // The last chunk is number `next_seq`; an answer that is past it has no line.
            if self.next == state.next_seq {
                self.pending.push_back(line(outcome.chunk()));
                self.next += 1;
            }
            self.done = true;
        }
        state.cursors.insert(self.token, self.next);
        Ok(())
    }

    async fn next_line(&mut self) -> Option<Result<Bytes, String>> {
        let record = self.watch.record.clone();
        loop {
            if let Some(line) = self.pending.pop_front() {
                self.pending_from += 1;
                return Some(Ok(line));
            }
            if self.done {
                return None;
            }
            let changed = record.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Err(e) = self.fill(&mut record.state.lock().unwrap()) {
                self.done = true;
                return Some(Err(e));
            }
            if self.pending.is_empty() && !self.done {
                changed.await;
            }
        }
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        let mut state = self.watch.record.state.lock().unwrap();
        state.cursors.remove(&self.token);
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
fn spawn(task: impl Future<Output = ()> + Send + 'static) -> Option<tokio::task::AbortHandle> {
    let runtime = tokio::runtime::Handle::try_current().ok()?;
    Some(runtime.spawn(task).abort_handle())
}
