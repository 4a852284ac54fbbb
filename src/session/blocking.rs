//! A session driven over a pair of pipes by threads: one reader thread feeds the session what the
//! channel prints and routes its events; any number of threads run operations over it at once.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::{Event, Session};
use crate::client::response::HttpResponse;
use crate::client::{Client, Operation};
use crate::command::Command;
use crate::error::{Error, ErrorKind};
use crate::wire::ToolChunk;
use crate::wire::frame::Hello;

/// Time an operation's answer may take beyond its own limit before the session gives up on it.
const ANSWER_GRACE: Duration = Duration::from_secs(5);

enum Routed {
    Progress(ToolChunk),
    Finished(Result<HttpResponse, Error>),
    Unsent,
    Cancelled,
}

/// An operation sent over a [`BlockingSession`], to wait for or cancel.
#[derive(Debug)]
pub struct Ticket {
    /// The operation's id on the session.
    pub id: u64,
    limit: Duration,
    rx: mpsc::Receiver<Routed>,
}

struct Shared {
    session: Mutex<Session>,
    writer: Mutex<Box<dyn Write + Send>>,
    waiters: Mutex<HashMap<u64, Sender<Routed>>>,
    /// Set once the hello came (`Ok`) or the channel was lost before it (`Err`).
    opened: Mutex<Option<Result<Hello, Error>>>,
    opened_cv: Condvar,
    notices: Mutex<Vec<String>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A session over a channel the host spawned (e.g. `docker exec -i C sh -c CMD` with piped
/// stdin and stdout). `Send + Sync`: operations may run over it from many threads at once.
/// Dropping it closes the channel's stdin, which ends `attach` and cancels what is in flight.
pub struct BlockingSession {
    shared: Arc<Shared>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for BlockingSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockingSession").finish_non_exhaustive()
    }
}

impl BlockingSession {
    /// The command that opens `client`'s channel, and the session waiting for it. Spawn the
    /// command, then [`BlockingSession::start`] with its pipes.
    pub fn open(client: &Client) -> Result<(Session, Command), Error> {
        Session::open(client)
    }

    /// Starts driving `session` over the channel's stdout (`reader`) and stdin (`writer`), and
    /// waits up to `open_timeout` for the hello. The error says why the channel did not open
    /// (what it printed, the reason given by `reader`'s end).
    pub fn start(
        session: Session,
        reader: impl Read + Send + 'static,
        writer: impl Write + Send + 'static,
        open_timeout: Duration,
    ) -> Result<BlockingSession, Error> {
        let shared = Arc::new(Shared {
            session: Mutex::new(session),
            writer: Mutex::new(Box::new(writer)),
            waiters: Mutex::new(HashMap::new()),
            opened: Mutex::new(None),
            opened_cv: Condvar::new(),
            notices: Mutex::new(Vec::new()),
        });
        let for_reader = shared.clone();
        let reader = std::thread::Builder::new()
            .name("mcpgw-session".into())
            .spawn(move || read_loop(&for_reader, reader))
            .map_err(|e| Error::new(ErrorKind::HostIo, format!("cannot start a thread: {e}")))?;
        let session = BlockingSession {
            shared,
            reader: Some(reader),
        };
        session.flush()?;
        let deadline = Instant::now() + open_timeout;
        let mut opened = lock(&session.shared.opened);
        loop {
            match &*opened {
                Some(Ok(_)) => break,
                Some(Err(e)) => return Err(e.clone()),
                None => {}
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                drop(opened);
                lock(&session.shared.session).close();
                return Err(Error::new(
                    ErrorKind::Deadline,
                    format!(
                        "the session channel did not answer within {open_timeout:?}; is \
                         `mcpgw-gateway attach` running at the other end?"
                    ),
                ));
            }
            opened = session
                .shared
                .opened_cv
                .wait_timeout(opened, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        drop(opened);
        Ok(session)
    }

    /// The hello of the session.
    pub fn hello(&self) -> Option<Hello> {
        lock(&self.shared.session).hello().cloned()
    }

    /// Whether the channel is gone.
    pub fn is_lost(&self) -> bool {
        lock(&self.shared.session).is_lost()
    }

    /// What the channel said that concerned no operation, since the last call.
    pub fn take_notices(&self) -> Vec<String> {
        std::mem::take(&mut lock(&self.shared.notices))
    }

    fn flush(&self) -> Result<(), Error> {
        let bytes = lock(&self.shared.session).take_output();
        if bytes.is_empty() {
            return Ok(());
        }
        let mut w = lock(&self.shared.writer);
        w.write_all(&bytes).and_then(|()| w.flush()).map_err(|e| {
            Error::new(
                ErrorKind::SessionLost,
                format!("writing to the session channel failed: {e}"),
            )
        })
    }

    /// Sends `op` over the session (streaming its progress when `stream`); wait for it with
    /// [`BlockingSession::wait`], or abandon it from any thread with [`BlockingSession::cancel`].
    /// An operation the session cannot carry fails at once.
    pub fn submit<T>(&self, op: &mut Operation<T>, stream: bool) -> Result<Ticket, Error> {
        let (tx, rx) = mpsc::channel();
        let id = {
            let mut session = lock(&self.shared.session);
            let id = session.submit(op, stream, None)?;
            lock(&self.shared.waiters).insert(id, tx);
            id
        };
        if let Err(e) = self.flush() {
            lock(&self.shared.session).close();
            route_events(&self.shared);
            self.fail_everything(&e);
        }
        Ok(Ticket {
            id,
            limit: op.session_limit() + ANSWER_GRACE,
            rx,
        })
    }

    /// Waits for the answer of `ticket`'s operation and leaves `op` finished; `progress`
    /// receives each progress chunk as it happens. Past the operation's time limit it is
    /// cancelled and fails with [`ErrorKind::Deadline`]; on a lost channel with
    /// [`ErrorKind::SessionLost`] (also when it was never written).
    pub fn wait<T>(
        &self,
        ticket: Ticket,
        op: &mut Operation<T>,
        mut progress: Option<&mut dyn FnMut(ToolChunk)>,
    ) {
        let deadline = Instant::now() + ticket.limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match ticket.rx.recv_timeout(left) {
                Ok(Routed::Progress(chunk)) => {
                    if let Some(p) = progress.as_mut() {
                        p(chunk);
                    }
                }
                Ok(Routed::Finished(answer)) => return op.deliver(answer),
                Ok(Routed::Unsent) => {
                    return op.abandon(Error::new(
                        ErrorKind::SessionLost,
                        "the session channel was lost before the request was written",
                    ));
                }
                Ok(Routed::Cancelled) => {
                    return op.abandon(Error::new(
                        ErrorKind::Cancelled,
                        "the operation was cancelled; the gateway was told to cancel it upstream",
                    ));
                }
                Err(RecvTimeoutError::Timeout) => {
                    self.cancel(ticket.id);
                    return op.abandon(Error::new(
                        ErrorKind::Deadline,
                        format!(
                            "no answer came over the session within {:?}; the operation was \
                             cancelled",
                            ticket.limit
                        ),
                    ));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return op.abandon(Error::new(
                        ErrorKind::SessionLost,
                        "the session channel was lost",
                    ));
                }
            }
        }
    }

    /// Runs `op` over the session and leaves it finished: [`BlockingSession::submit`] then
    /// [`BlockingSession::wait`]. `progress` receives each progress chunk of a tool call as it
    /// happens (the call streams when it is given).
    pub fn run<T>(&self, op: &mut Operation<T>, progress: Option<&mut dyn FnMut(ToolChunk)>) {
        match self.submit(op, progress.is_some()) {
            Ok(ticket) => self.wait(ticket, op, progress),
            Err(e) => op.abandon(e),
        }
    }

    /// Runs `op` over the session and returns its result; see [`BlockingSession::run`].
    pub fn call<T>(
        &self,
        mut op: Operation<T>,
        progress: Option<&mut dyn FnMut(ToolChunk)>,
    ) -> Result<T, Error> {
        self.run(&mut op, progress);
        op.finish()
    }

    /// Abandons operation `id` (from [`Ticket::id`]): the gateway cancels it upstream
    /// (`notifications/cancelled`), and its waiter finishes it with [`ErrorKind::Cancelled`].
    pub fn cancel(&self, id: u64) {
        if let Some(tx) = lock(&self.shared.waiters).remove(&id) {
            let _ = tx.send(Routed::Cancelled);
        }
        lock(&self.shared.session).cancel(id);
        let _ = self.flush();
    }

    fn fail_everything(&self, e: &Error) {
        for (_, tx) in lock(&self.shared.waiters).drain() {
            let _ = tx.send(Routed::Finished(Err(e.clone())));
        }
    }

    /// Closes the channel's stdin (`attach` then cancels what is in flight and exits) and fails
    /// what is in flight here.
    pub fn close(&mut self) {
        lock(&self.shared.session).close();
        route_events(&self.shared);
        // Replacing the writer drops the channel's stdin.
        *lock(&self.shared.writer) = Box::new(std::io::sink());
    }
}

impl Drop for BlockingSession {
    fn drop(&mut self) {
        self.close();
        // The reader ends when the channel's stdout does, which closing its stdin brings about;
        // it is not waited for, so a channel that lingers cannot hold up the host.
        drop(self.reader.take());
    }
}

fn read_loop(shared: &Shared, mut reader: impl Read) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => {
                lock(&shared.session).feed_eof("");
                break;
            }
            Ok(n) => lock(&shared.session).feed(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                lock(&shared.session).feed_eof(&format!("reading it failed: {e}"));
                break;
            }
        }
        if route_events(shared) {
            break;
        }
    }
    route_events(shared);
}

/// Hands the session's events to their waiters; true once the session is lost.
fn route_events(shared: &Shared) -> bool {
    let mut lost = false;
    loop {
        let Some(event) = lock(&shared.session).poll_event() else {
            break;
        };
        match event {
            Event::Opened(hello) => {
                *lock(&shared.opened) = Some(Ok(hello));
                shared.opened_cv.notify_all();
            }
            Event::Progress { id, chunk } => {
                if let Some(tx) = lock(&shared.waiters).get(&id)
                    && let Ok(chunk) = serde_json::from_str::<ToolChunk>(chunk.get())
                {
                    let _ = tx.send(Routed::Progress(chunk));
                }
            }
            Event::Finished { id, answer } => {
                if let Some(tx) = lock(&shared.waiters).remove(&id) {
                    let _ = tx.send(Routed::Finished(answer));
                }
            }
            Event::Unsent { id } => {
                if let Some(tx) = lock(&shared.waiters).remove(&id) {
                    let _ = tx.send(Routed::Unsent);
                }
            }
            Event::Detached { id, .. } => {
                if let Some(tx) = lock(&shared.waiters).remove(&id) {
                    let _ = tx.send(Routed::Finished(Err(Error::new(
                        ErrorKind::SessionLost,
                        "the session channel was lost",
                    ))));
                }
            }
            Event::ConnectionOpened { .. }
            | Event::ConnectionMessage { .. }
            | Event::ConnectionClosed { .. } => {}
            Event::Notice(n) => {
                let mut notices = lock(&shared.notices);
                if notices.len() < 100 {
                    notices.push(n);
                }
            }
            Event::Lost(e) => {
                lost = true;
                let mut opened = lock(&shared.opened);
                if opened.is_none() {
                    *opened = Some(Err(e));
                }
                shared.opened_cv.notify_all();
            }
        }
    }
    lost
}
