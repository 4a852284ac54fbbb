//! What one client talks to: one server of the sandbox, or every server of an `mcpServers`
//! file behind one prefixed endpoint; and what it waits for.

use std::task::{Context, Poll, Waker};

use tokio::time::Instant;

use crate::aggregate::Aggregate;
use crate::cli::Level;
use crate::link::{Link, Wake};
use crate::sandbox::Sandbox;

/// What one client talks to: one server of the sandbox, or every server of an `mcpServers`
/// file behind one prefixed endpoint.
pub enum Relay {
    /// One server: every message crosses unchanged.
    One(Box<Link>),
    /// Many servers, prefixed by name.
    Many(Box<Aggregate>),
}

impl Relay {
    /// A relay for the servers of `sandbox`, connected.
    pub async fn open(sandbox: &Sandbox, prefixed: bool, level: Level) -> Relay {
        if prefixed {
            return Relay::Many(Box::new(
                Aggregate::open(&sandbox.host, &sandbox.servers, level).await,
            ));
        }
        let mut link = Link::new(sandbox.host.clone(), &sandbox.servers[0], level, true);
        link.open_now().await;
        Relay::One(Box::new(link))
    }

    /// A message from the client; `out` receives what goes to the client.
    pub async fn from_client(&mut self, text: &str, out: &mut Vec<String>) {
        match self {
            Relay::One(link) => link.from_client(text, out).await,
            Relay::Many(agg) => agg.from_client(text, out).await,
        }
    }

    /// Messages from the client that arrived together, in order; `out` receives what goes
    /// to the client.
    pub async fn from_client_all(&mut self, texts: &[String], out: &mut Vec<String>) {
        match self {
            Relay::One(link) => link.from_client_all(texts, out).await,
            Relay::Many(agg) => {
                for text in texts {
                    agg.from_client(text, out).await;
                }
            }
        }
    }

    fn links(&mut self) -> &mut [Link] {
        match self {
            Relay::One(link) => std::slice::from_mut(&mut **link),
            Relay::Many(agg) => agg.links_mut(),
        }
    }

    /// Waits for what the relay must handle next (cancel-safe: nothing is taken before it
    /// returns).
    pub async fn wait(&mut self) -> Wake {
        let retry_at = self.links().iter().filter_map(Link::retry_at).min();
        let links = self.links();
        let event = std::future::poll_fn(|cx| {
            for (i, l) in links.iter_mut().enumerate() {
                if let Poll::Ready(ev) = l.poll_event(cx) {
                    return Poll::Ready((i, ev));
                }
            }
            Poll::Pending
        });
        tokio::select! {
            (i, ev) = event => Wake::Event(i, ev),
            () = sleep_until_maybe(retry_at) => Wake::Retry,
        }
    }

    /// An event that is already there, without waiting: what [`Relay::wait`] would return at
    /// once, or `None` (a retry that is due is left to `wait`).
    pub fn ready(&mut self) -> Option<Wake> {
        let mut cx = Context::from_waker(Waker::noop());
        self.links()
            .iter_mut()
            .enumerate()
            .find_map(|(i, l)| match l.poll_event(&mut cx) {
                Poll::Ready(ev) => Some(Wake::Event(i, ev)),
                Poll::Pending => None,
            })
    }

    /// Handles what [`Relay::wait`] returned; `out` receives what goes to the client.
    pub async fn handle(&mut self, wake: Wake, out: &mut Vec<String>) {
        match self {
            Relay::One(link) => match wake {
                Wake::Event(_, ev) => link.on_event(ev, out).await,
                Wake::Retry => {
                    link.open(out).await;
                }
            },
            Relay::Many(agg) => agg.handle(wake, out).await,
        }
    }

    /// Closes every connection.
    pub fn close(&mut self) {
        for l in self.links() {
            l.close();
        }
    }
}

async fn sleep_until_maybe(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
