//! Progress of in-flight calls, routed in the order the upstream sent it, and the upstream's
//! log messages, logged at its rate.
//!
//! rmcp hands notifications to the client handler on tasks of their own, so a call's last
//! progress notification can reach a handler after the call's result. The gateway instead taps
//! progress out of the transport as messages arrive, before the result that follows them is even
//! read: a streamed call loses none of it. Progress and log notifications stop at the tap: a
//! flood of them costs no task each, and the upstream waits for the gateway to read on.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use rmcp::model::{JsonRpcMessage, ProgressNotificationParam, ProgressToken, ServerNotification};

use super::logs::UpstreamLog;
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::mpsc;

/// A progress update of a running call.
pub type ProgressSender = mpsc::Sender<ProgressNotificationParam>;

/// Progress for tokens nobody listens to yet is kept this long (in notifications), so that a
/// call that registers right after sending its request still gets what came first.
const UNROUTED_KEPT: usize = 64;

/// Where progress notifications go, by the progress token rmcp gave each call.
#[derive(Default)]
pub struct ProgressRoutes(Mutex<Routes>);

#[derive(Default)]
struct Routes {
    by_token: HashMap<ProgressToken, ProgressSender>,
    unrouted: VecDeque<ProgressNotificationParam>,
}

impl ProgressRoutes {
    /// Sends one notification to its call's listener, or keeps it for a listener to come.
    pub fn deliver(&self, params: ProgressNotificationParam) {
        let mut routes = self.0.lock().unwrap();
        match routes.by_token.get(&params.progress_token) {
            // A slow reader loses intermediate progress, never the result.
            Some(sender) => drop(sender.try_send(params)),
            None => {
                if routes.unrouted.len() == UNROUTED_KEPT {
                    routes.unrouted.pop_front();
                }
                routes.unrouted.push_back(params);
            }
        }
    }

    /// Starts sending `token`'s progress to `sender`, beginning with what already arrived.
    pub fn listen(&self, token: ProgressToken, sender: ProgressSender) {
        let mut routes = self.0.lock().unwrap();
        let (early, rest): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut routes.unrouted)
            .into_iter()
            .partition(|p| p.progress_token == token);
        routes.unrouted = rest;
        for params in early {
            let _ = sender.try_send(params);
        }
        routes.by_token.insert(token, sender);
    }

    /// Stops routing `token`.
    pub fn forget(&self, token: &ProgressToken) {
        self.0.lock().unwrap().by_token.remove(token);
    }
}

/// A transport that routes progress notifications as they arrive, logs log messages, and passes
/// every other message on.
pub struct ProgressTap<T> {
    inner: T,
    routes: Arc<ProgressRoutes>,
    log: Arc<UpstreamLog>,
}

impl<T> ProgressTap<T> {
    /// Taps `inner`'s progress into `routes` and its log messages into `log`.
    pub fn new(inner: T, routes: Arc<ProgressRoutes>, log: Arc<UpstreamLog>) -> Self {
        ProgressTap { inner, routes, log }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for ProgressTap<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let message = self.inner.receive().await?;
            if let JsonRpcMessage::Notification(n) = message {
                match n.notification {
                    ServerNotification::ProgressNotification(p) => self.routes.deliver(p.params),
                    #[allow(deprecated)]
                    // MCP logging is deprecated upstream; servers still send it.
                    ServerNotification::LoggingMessageNotification(m) => {
                        self.log.message(&m.params.level, &m.params.data)
                    }
                    notification => {
                        return Some(JsonRpcMessage::Notification(
                            rmcp::model::JsonRpcNotification {
                                jsonrpc: n.jsonrpc,
                                notification,
                            },
                        ));
                    }
                }
                continue;
            }
            return Some(message);
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::NumberOrString;

    fn progress(token: i64, value: f64) -> ProgressNotificationParam {
        ProgressNotificationParam::new(ProgressToken(NumberOrString::Number(token)), value)
    }

    #[test]
    fn progress_before_the_listener_is_kept_and_delivered_in_order() {
        let routes = ProgressRoutes::default();
        routes.deliver(progress(1, 1.0));
        routes.deliver(progress(2, 9.0));
        routes.deliver(progress(1, 2.0));
        let (tx, mut rx) = mpsc::channel(8);
        routes.listen(ProgressToken(NumberOrString::Number(1)), tx);
        routes.deliver(progress(1, 3.0));
        let got: Vec<f64> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|p| p.progress)
            .collect();
        assert_eq!(got, [1.0, 2.0, 3.0]);
        routes.forget(&ProgressToken(NumberOrString::Number(1)));
        routes.deliver(progress(1, 4.0));
        assert!(rx.try_recv().is_err());
        for i in 0..100 {
            routes.deliver(progress(7, i as f64));
        }
        assert_eq!(routes.0.lock().unwrap().unrouted.len(), UNROUTED_KEPT);
    }
}
