//! `mcpgw_session`: the session channel in sans-IO form, its events, and
//! `mcpgw_blocking_session`, the same driven over two file descriptors by the library's threads.
//!
//! ```c
//! mcpgw_session *s;
//! mcpgw_session_open(client, &s, NULL);
//! // spawn `docker exec -i C sh -c <mcpgw_session_command(s)>` with stdin and stdout piped, then:
//! mcpgw_session_submit(s, op, true, &id);                 // any prepared REST op
//! // write mcpgw_session_output() to the channel's stdin, mcpgw_session_consume() what was
//! // written; mcpgw_session_feed() what its stdout gives; then handle the events:
//! while (mcpgw_session_next_event(s, &ev) == MCPGW_RESULT_OK) { ...; mcpgw_session_event_free(ev); }
//! ```

use std::collections::HashMap;
use std::ffi::{CString, c_char, c_void};
use std::fs::File;
use std::os::fd::{FromRawFd, RawFd};
use std::ptr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::chunk::mcpgw_tool_chunk;
use super::client::mcpgw_client;
use super::error::{mcpgw_error, report_code, report_error};
use super::op::{OpCell, bytes, mcpgw_op};
use super::{c_str, cstring_lossy, ffi_boundary, mcpgw_result, try_ref};
use mcpgw::error::{Error, ErrorKind};
use mcpgw::session::blocking::BlockingSession;
use mcpgw::session::{Event, Session};

/// What a session event is.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum mcpgw_session_event_kind {
    /// The channel answered (`attach` runs); `mcpgw_session_event_text` is its hello frame's
    /// JSON (gateway version, port, pid, instance nonce, whether it launched the gateway).
    Opened = 1,
    /// A progress chunk of op `mcpgw_session_event_id`: `mcpgw_session_event_chunk`.
    Progress = 2,
    /// Op `mcpgw_session_event_id` finished: its result is in the op (`mcpgw_op_result`, ...).
    Finished = 3,
    /// Op `mcpgw_session_event_id` was never written before the channel was lost: it is back
    /// in one-shot form (`mcpgw_op_command` gives its first command), to run that way or free.
    Unsent = 4,
    /// Something the channel said that concerns no op: `mcpgw_session_event_text`, for a log.
    Notice = 5,
    /// The channel is gone (every op it carried got its `FINISHED` or `UNSENT` first):
    /// `mcpgw_session_event_text` says why. Open a new session to go on.
    Lost = 6,
}

/// One event of a session. Owned by the caller: free it with `mcpgw_session_event_free`.
/// Immutable: may be moved between threads and read from several at once.
pub struct mcpgw_session_event {
    kind: mcpgw_session_event_kind,
    id: u64,
    chunk: Option<mcpgw_tool_chunk>,
    text: Option<CString>,
}

struct State {
    session: Session,
    /// The ops in flight, by id: finished here when their answer comes.
    ops: HashMap<u64, Arc<Mutex<OpCell>>>,
}

/// A session channel in sans-IO form: the host spawns its command, moves bytes between the
/// channel and the session, and reads its events. Created with `mcpgw_session_open`, released
/// with `mcpgw_session_free` (or handed to `mcpgw_blocking_session_start`).
///
/// May be moved between threads; used by one thread at a time.
pub struct mcpgw_session {
    state: Mutex<State>,
    command: CString,
    /// What `mcpgw_session_output` last handed out.
    output: Mutex<Vec<u8>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Creates a session of `client`. On success `*session_out` receives it: spawn
/// `mcpgw_session_command` with its stdin and stdout piped. `error_out` may be NULL; on failure
/// it receives an error to free with `mcpgw_error_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_session_open(
    client: *const mcpgw_client,
    session_out: *mut *mut mcpgw_session,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    ffi_boundary!(report_code(error_out, mcpgw_result::Panic), {
        // SAFETY: NULL or a live client, per the contract.
        let (Some(client), false) = (unsafe { client.as_ref() }, session_out.is_null()) else {
            return report_code(error_out, mcpgw_result::NullParameter);
        };
        match Session::open(&client.client) {
            Ok((session, command)) => {
                let s = mcpgw_session {
                    state: Mutex::new(State {
                        session,
                        ops: HashMap::new(),
                    }),
                    command: cstring_lossy(&command.text),
                    output: Mutex::new(Vec::new()),
                };
                // SAFETY: checked non-NULL above.
                unsafe { *session_out = Box::into_raw(Box::new(s)) };
                mcpgw_result::Ok
            }
            Err(e) => report_error(error_out, &e),
        }
    })
}

/// The `sh -c` text that opens the channel inside the sandbox: run it with stdin and stdout
/// piped (`docker exec -i C sh -c TEXT`, `kubectl exec -i ...`, an E2B background command with
/// stdin) and keep it running. Its stderr is for logs. Borrowed: valid until the session is
/// freed; NULL for NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_session_command(session: *const mcpgw_session) -> *const c_char {
    ffi_boundary!(ptr::null(), {
        // SAFETY: NULL or a live session, per the contract.
        unsafe { session.as_ref() }.map_or(ptr::null(), |s| s.command.as_ptr())
    })
}

/// Sends `op` (a REST op that has run no command: health, list_mcps, add_mcp, remove_mcp,
/// list_tools, call_tool, set_runtime_headers) over the session; on success `*id_out` receives
/// the id its events carry. The op stays the caller's: it wants no command until the session
/// finishes it (event `FINISHED`). With `stream`, a call_tool reports each progress chunk as it
/// happens (events `PROGRESS`). `MCPGW_RESULT_INVALID_ARGUMENT` for an op a session cannot
/// carry (left unchanged, or, for a body over the session's frame limit, failed);
/// `MCPGW_RESULT_SESSION_LOST` on a lost session.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_session_submit(
    session: *mut mcpgw_session,
    op: *mut mcpgw_op,
    stream: bool,
    id_out: *mut u64,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        let session = try_ref!(session);
        let op = try_ref!(op);
        if id_out.is_null() {
            return mcpgw_result::NullParameter;
        }
        let mut state = lock(&session.state);
        let mut cell = op.lock();
        let submitted = state.session.submit(&mut cell.op, stream, None);
        cell.sync();
        drop(cell);
        match submitted {
            Ok(id) => {
                state.ops.insert(id, op.cell.clone());
                // SAFETY: checked non-NULL above.
                unsafe { *id_out = id };
                mcpgw_result::Ok
            }
            Err(e) => e.kind().into(),
        }
    })
}

/// Abandons op `id`: the gateway cancels it upstream (`notifications/cancelled`), and the op
/// fails with `MCPGW_RESULT_CANCELLED`. Returns whether `id` was in flight.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_session_cancel(session: *mut mcpgw_session, id: u64) -> bool {
    ffi_boundary!(false, {
        // SAFETY: NULL or a live session, per the contract.
        let Some(session) = (unsafe { session.as_ref() }) else {
            return false;
        };
        let mut state = lock(&session.state);
        let was = state.session.cancel(id);
        if let Some(cell) = state.ops.remove(&id) {
            let mut cell = lock(&cell);
            cell.op.abandon(Error::new(
                ErrorKind::Cancelled,
                "the caller cancelled it; the gateway was told to cancel it upstream",
            ));
            cell.sync();
        }
        was
    })
}

/// The bytes to write to the channel's stdin: on success `*buf_out` and `*len_out` receive
/// them (borrowed: valid until the next call on this session); length 0 when there is nothing
/// to write. Mark what was written with `mcpgw_session_consume`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_session_output(
    session: *const mcpgw_session,
    buf_out: *mut *const u8,
    len_out: *mut usize,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        let session = try_ref!(session);
        if buf_out.is_null() || len_out.is_null() {
            return mcpgw_result::NullParameter;
        }
        let mut view = lock(&session.output);
        let state = lock(&session.state);
        view.clear();
        view.extend_from_slice(state.session.pending_output());
        // SAFETY: checked non-NULL above; the bytes stay in the session until the next call.
        unsafe {
            *buf_out = if view.is_empty() {
                ptr::null()
            } else {
                view.as_ptr()
            };
            *len_out = view.len();
        }
        mcpgw_result::Ok
    })
}

/// Marks the first `n` bytes of `mcpgw_session_output` as written to the channel.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_session_consume(session: *mut mcpgw_session, n: usize) {
    ffi_boundary!((), {
        // SAFETY: NULL or a live session, per the contract.
        if let Some(s) = unsafe { session.as_ref() } {
            lock(&s.state).session.consume_output(n);
        }
    })
}

/// Takes `len` bytes read from the channel's stdout (copied). Then read the events.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_session_feed(
    session: *mut mcpgw_session,
    buf: *const u8,
    len: usize,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        let session = try_ref!(session);
        // SAFETY: the caller's contract: `len` readable bytes, or NULL with 0.
        let Some(bytes) = (unsafe { bytes(buf, len) }) else {
            return mcpgw_result::NullParameter;
        };
        lock(&session.state).session.feed(bytes);
        mcpgw_result::Ok
    })
}

/// Says that the channel's stdout ended (its process exited, the backend dropped it);
/// `reason` (may be NULL), e.g. its exit status and stderr tail, goes into the messages. Every
/// op in flight fails with `MCPGW_RESULT_SESSION_LOST` (events follow).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_session_feed_eof(
    session: *mut mcpgw_session,
    reason: *const c_char,
) {
    ffi_boundary!((), {
        // SAFETY: NULL or a live session, per the contract.
        let Some(session) = (unsafe { session.as_ref() }) else {
            return;
        };
        // SAFETY: NULL or NUL-terminated, per the contract.
        let reason = unsafe { c_str(reason) }.map(|r| r.to_string_lossy().into_owned());
        lock(&session.state)
            .session
            .feed_eof(reason.as_deref().unwrap_or(""));
    })
}

/// Ends the session from the host's side: every op in flight fails with
/// `MCPGW_RESULT_SESSION_LOST` (events follow). Then close the channel's stdin: `attach`
/// cancels what was in flight in the gateway and exits.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_session_close(session: *mut mcpgw_session) {
    ffi_boundary!((), {
        // SAFETY: NULL or a live session, per the contract.
        if let Some(s) = unsafe { session.as_ref() } {
            lock(&s.state).session.close();
        }
    })
}

/// Whether the channel is gone.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_session_is_lost(session: *const mcpgw_session) -> bool {
    ffi_boundary!(true, {
        // SAFETY: NULL or a live session, per the contract.
        unsafe { session.as_ref() }.is_none_or(|s| lock(&s.state).session.is_lost())
    })
}

/// The next event: on success `*event_out` receives it (free it with
/// `mcpgw_session_event_free`); `MCPGW_RESULT_INVALID_STATE` when there is none now. A
/// `FINISHED` op has its result already; an `UNSENT` one is back in one-shot form.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_session_next_event(
    session: *mut mcpgw_session,
    event_out: *mut *mut mcpgw_session_event,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        let session = try_ref!(session);
        if event_out.is_null() {
            return mcpgw_result::NullParameter;
        }
        let mut state = lock(&session.state);
        let Some(event) = state.session.poll_event() else {
            return mcpgw_result::InvalidState;
        };
        let event = to_c(&mut state, event);
        // SAFETY: checked non-NULL above.
        unsafe { *event_out = Box::into_raw(Box::new(event)) };
        mcpgw_result::Ok
    })
}

/// The C form of `event`; a `Finished` or `Unsent` one is carried out on its op first.
fn to_c(state: &mut State, event: Event) -> mcpgw_session_event {
    let plain = |kind, id, text: Option<&str>| mcpgw_session_event {
        kind,
        id,
        chunk: None,
        text: text.map(cstring_lossy),
    };
    match event {
        Event::Opened(hello) => plain(
            mcpgw_session_event_kind::Opened,
            0,
            Some(&serde_json::to_string(&hello).unwrap_or_default()),
        ),
        Event::Progress { id, chunk } => mcpgw_session_event {
            kind: mcpgw_session_event_kind::Progress,
            id,
            // A progress chunk holds no data blocks, so it cannot fail to decode.
            chunk: serde_json::from_str(chunk.get())
                .ok()
                .and_then(|c| mcpgw_tool_chunk::new(c).ok()),
            text: None,
        },
        Event::Finished { id, answer } => {
            if let Some(cell) = state.ops.remove(&id) {
                let mut cell = lock(&cell);
                cell.op.deliver(answer);
                cell.sync();
            }
            plain(mcpgw_session_event_kind::Finished, id, None)
        }
        Event::Unsent { id } => {
            if let Some(cell) = state.ops.remove(&id) {
                let mut cell = lock(&cell);
                cell.op.resume();
                cell.sync();
            }
            plain(mcpgw_session_event_kind::Unsent, id, None)
        }
        Event::Detached { id, .. } => {
            if let Some(cell) = state.ops.remove(&id) {
                let mut cell = lock(&cell);
                cell.op.deliver(Err(mcpgw::Error::new(
                    mcpgw::ErrorKind::SessionLost,
                    "the session channel was lost",
                )));
                cell.sync();
            }
            plain(mcpgw_session_event_kind::Finished, id, None)
        }
        Event::ConnectionOpened { .. }
        | Event::ConnectionMessage { .. }
        | Event::ConnectionClosed { .. } => plain(mcpgw_session_event_kind::Notice, 0, None),
        Event::Notice(text) => plain(mcpgw_session_event_kind::Notice, 0, Some(&text)),
        Event::Lost(e) => plain(mcpgw_session_event_kind::Lost, 0, Some(e.message())),
    }
}

/// Frees a session: a channel still open should be closed (its stdin) by the host too. Ops it
/// carried and that have not finished stay unfinished. NULL is ignored. Takes ownership.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_session_free(session: *mut mcpgw_session) {
    ffi_boundary!((), {
        if !session.is_null() {
            // SAFETY: came from Box::into_raw in mcpgw_session_open, per the contract.
            drop(unsafe { Box::from_raw(session) });
        }
    })
}

/// The event's kind; `MCPGW_SESSION_EVENT_KIND_LOST` for NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_session_event_get_kind(
    event: *const mcpgw_session_event,
) -> mcpgw_session_event_kind {
    ffi_boundary!(mcpgw_session_event_kind::Lost, {
        // SAFETY: NULL or a live event, per the contract.
        unsafe { event.as_ref() }.map_or(mcpgw_session_event_kind::Lost, |e| e.kind)
    })
}

/// The id of the op a `PROGRESS`, `FINISHED` or `UNSENT` event is about; 0 otherwise.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_session_event_id(event: *const mcpgw_session_event) -> u64 {
    ffi_boundary!(0, {
        // SAFETY: NULL or a live event, per the contract.
        unsafe { event.as_ref() }.map_or(0, |e| e.id)
    })
}

/// The chunk of a `PROGRESS` event (`metadata.mcp_progress` holds the progress); NULL
/// otherwise. Borrowed: valid until the event is freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_session_event_chunk(
    event: *const mcpgw_session_event,
) -> *const mcpgw_tool_chunk {
    ffi_boundary!(ptr::null(), {
        // SAFETY: NULL or a live event, per the contract.
        unsafe { event.as_ref() }
            .and_then(|e| e.chunk.as_ref())
            .map_or(ptr::null(), |c| c as *const mcpgw_tool_chunk)
    })
}

/// The text of an `OPENED` (the hello's JSON), `NOTICE` or `LOST` event; NULL otherwise.
/// Borrowed: valid until the event is freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_session_event_text(
    event: *const mcpgw_session_event,
) -> *const c_char {
    ffi_boundary!(ptr::null(), {
        // SAFETY: NULL or a live event, per the contract.
        unsafe { event.as_ref() }
            .and_then(|e| e.text.as_ref())
            .map_or(ptr::null(), |t| t.as_ptr())
    })
}

/// Frees an event. NULL is ignored. Takes ownership.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_session_event_free(event: *mut mcpgw_session_event) {
    ffi_boundary!((), {
        if !event.is_null() {
            // SAFETY: came from Box::into_raw in mcpgw_session_next_event, per the contract.
            drop(unsafe { Box::from_raw(event) });
        }
    })
}

/// The channel's stdin, written so that a channel that died gives an error, not SIGPIPE: a C
/// host may not ignore SIGPIPE, and its default action would end the whole process. SIGPIPE is
/// blocked on the writing thread for the write, and one the write raised is taken before it is
/// unblocked (what libcurl does for sockets).
struct QuietPipe(File);

impl std::io::Write for QuietPipe {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // SAFETY: signal-mask calls on this thread's own mask with stack-allocated sets.
        unsafe {
            let mut pipe: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut pipe);
            libc::sigaddset(&mut pipe, libc::SIGPIPE);
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, &pipe, &mut old);
            let mut pending: libc::sigset_t = std::mem::zeroed();
            libc::sigpending(&mut pending);
            let was_pending = libc::sigismember(&pending, libc::SIGPIPE) == 1;
            let result = self.0.write(buf);
            if !was_pending && matches!(&result, Err(e) if e.raw_os_error() == Some(libc::EPIPE)) {
                let now = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                libc::sigtimedwait(&pipe, ptr::null_mut(), &now);
            }
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, ptr::null_mut());
            result
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// Receives each progress chunk of a call run with `mcpgw_blocking_session_run`, as it happens,
/// on the thread that called it. `chunk` is borrowed for the duration of the callback. It must
/// not call back into the same session.
pub type mcpgw_progress_fn =
    Option<unsafe extern "C" fn(userdata: *mut c_void, chunk: *const mcpgw_tool_chunk)>;

/// A session driven by the library over the channel's two file descriptors: a thread of its own
/// reads the channel; any number of threads run ops over it at once (`mcpgw_blocking_session_run`).
///
/// Thread-safe. Created with `mcpgw_blocking_session_start`, released with
/// `mcpgw_blocking_session_free`.
pub struct mcpgw_blocking_session {
    inner: Mutex<Option<BlockingSession>>,
}

/// Starts driving `session` (freshly opened, nothing submitted yet) over the channel the host
/// spawned: `read_fd` is its stdout, `write_fd` its stdin. Takes ownership of `session` (do not
/// use or free it afterwards, whatever the result) and of both descriptors (the library closes
/// them). Waits up to `open_timeout_ms` for the channel's hello. Writing to a channel that died
/// gives `MCPGW_RESULT_SESSION_LOST`, never SIGPIPE. On success
/// `*blocking_out` receives the blocking session; on failure `error_out` (may be NULL) receives
/// why the channel did not open (what it printed, e.g. a missing gateway binary).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_blocking_session_start(
    session: *mut mcpgw_session,
    read_fd: i32,
    write_fd: i32,
    open_timeout_ms: u32,
    blocking_out: *mut *mut mcpgw_blocking_session,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    ffi_boundary!(report_code(error_out, mcpgw_result::Panic), {
        if session.is_null() || blocking_out.is_null() || read_fd < 0 || write_fd < 0 {
            return report_code(error_out, mcpgw_result::NullParameter);
        }
        // SAFETY: came from Box::into_raw in mcpgw_session_open; ownership passes here.
        let session = unsafe { Box::from_raw(session) };
        let sans_io = session
            .state
            .into_inner()
            .unwrap_or_else(|p| p.into_inner())
            .session;
        // SAFETY: the host hands over these open descriptors, per the contract; one descriptor
        // for both directions (a socket) is duplicated so each side owns its own.
        let (reader, writer) = unsafe {
            let write_fd: RawFd = if write_fd == read_fd {
                libc::dup(write_fd)
            } else {
                write_fd
            };
            (File::from_raw_fd(read_fd), File::from_raw_fd(write_fd))
        };
        let timeout = Duration::from_millis(u64::from(open_timeout_ms.max(1)));
        match BlockingSession::start(sans_io, reader, QuietPipe(writer), timeout) {
            Ok(b) => {
                // SAFETY: checked non-NULL above.
                unsafe {
                    *blocking_out = Box::into_raw(Box::new(mcpgw_blocking_session {
                        inner: Mutex::new(Some(b)),
                    }))
                };
                mcpgw_result::Ok
            }
            Err(e) => report_error(error_out, &e),
        }
    })
}

/// Runs `op` over the session and returns its result (as `mcpgw_op_result` then does); read its
/// output and failure from the op. `progress` (may be NULL) receives each progress chunk of a
/// call_tool as it happens, on this thread; with it the call streams. Blocks until the answer
/// comes, the op's time limit passes (then the gateway cancels it upstream:
/// `MCPGW_RESULT_DEADLINE`), or the channel is lost (`MCPGW_RESULT_SESSION_LOST`). May be
/// called from many threads at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_blocking_session_run(
    session: *const mcpgw_blocking_session,
    op: *mut mcpgw_op,
    progress: mcpgw_progress_fn,
    userdata: *mut c_void,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        let session = try_ref!(session);
        let op = try_ref!(op);
        // The blocking session itself is shared; only its Option is behind this lock.
        let guard = lock(&session.inner);
        let Some(blocking) = guard.as_ref().map(|b| b as *const BlockingSession) else {
            return mcpgw_result::InvalidState;
        };
        drop(guard);
        // SAFETY: the session lives until mcpgw_blocking_session_free, which the contract
        // forbids concurrently with this call.
        let blocking = unsafe { &*blocking };
        let mut cell = op.lock();
        match progress {
            Some(f) => {
                let mut relay = |chunk| {
                    if let Ok(c) = mcpgw_tool_chunk::new(chunk) {
                        // SAFETY: the host's callback, with its userdata; `c` lives across it.
                        unsafe { f(userdata, &c) };
                    }
                };
                blocking.run(&mut cell.op, Some(&mut relay));
            }
            None => blocking.run(&mut cell.op, None),
        }
        cell.sync();
        cell.result()
    })
}

/// Closes the channel (its stdin: `attach` cancels what is in flight in the gateway and exits)
/// and frees the session. Ops running over it fail with `MCPGW_RESULT_SESSION_LOST`; call it
/// only once no `mcpgw_blocking_session_run` is under way or about to start. NULL is ignored.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_blocking_session_free(session: *mut mcpgw_blocking_session) {
    ffi_boundary!((), {
        if !session.is_null() {
            // SAFETY: came from Box::into_raw in mcpgw_blocking_session_start, per the contract.
            drop(unsafe { Box::from_raw(session) });
        }
    })
}
