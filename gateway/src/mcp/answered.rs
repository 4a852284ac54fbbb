//! The requests the gateway answers for the upstream on a connection: `initialize` and
//! `server/discover` from the upstream's handshake, in the revision the host asks for;
//! `logging/setLevel` (the connection's level); a legacy host's resource subscriptions.

use std::sync::Arc;

use mcpgw::wire::jsonrpc::{self, LEGACY, MODERN, code, method};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::{Connection, Host};
use crate::upstream::session::LEVELS;

impl Connection {
    /// `initialize`: answered from the upstream's handshake, in the revision the host asks for
    /// when the gateway speaks it (else the newest legacy one).
    pub(super) fn initialize(&self, id: &str, params: Option<&RawValue>) {
        #[derive(Deserialize, Default)]
        struct Init {
            #[serde(default, rename = "protocolVersion")]
            protocol_version: String,
            #[serde(default)]
            capabilities: Value,
            #[serde(default, rename = "clientInfo")]
            client_info: Value,
        }
        let init: Init = params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or_default();
        let handshake = &self.session().handshake;
        // A session of the host's own answered its `initialize`: in the revision it chose.
        let version = if self.own_upstream && !handshake.is_modern() {
            handshake.version.clone()
        } else if LEGACY.contains(&init.protocol_version.as_str()) {
            init.protocol_version.clone()
        } else {
            LEGACY[0].to_string()
        };
        let mut result = if handshake.is_modern() {
            let mut r = json!({"capabilities": handshake.capabilities, "serverInfo": handshake.server_info});
            if let Some(i) = &handshake.instructions {
                r["instructions"] = json!(i);
            }
            r
        } else {
            serde_json::from_str(handshake.result.get()).unwrap_or_else(|_| json!({}))
        };
        result["protocolVersion"] = json!(version);
        self.state.lock().unwrap().host = Some(Host {
            version,
            capabilities: init.capabilities.clone(),
            info: init.client_info,
        });
        self.reply(Some(id), Ok(&result.to_string()));
    }

    /// `server/discover`: the upstream's own answer when it speaks 2026-07-28, else one made
    /// from its `initialize` result.
    pub(super) fn discover(&self, id: &str, params: Option<&RawValue>) {
        let meta = params
            .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
            .map(|p| p["_meta"].clone())
            .unwrap_or_default();
        let host = Host {
            version: meta[jsonrpc::META_PROTOCOL_VERSION]
                .as_str()
                .unwrap_or(MODERN)
                .to_string(),
            capabilities: meta[jsonrpc::META_CLIENT_CAPABILITIES].clone(),
            info: meta[jsonrpc::META_CLIENT_INFO].clone(),
        };
        self.state.lock().unwrap().host = Some(host);
        let handshake = &self.session().handshake;
        if handshake.is_modern() {
            return self.reply(Some(id), Ok(handshake.result.get()));
        }
        let mut result = json!({
            "resultType": "complete",
            "supportedVersions": jsonrpc::supported_revisions(),
            "capabilities": handshake.capabilities,
            "_meta": {jsonrpc::META_SERVER_INFO: handshake.server_info},
        });
        if let Some(i) = &handshake.instructions {
            result["instructions"] = json!(i);
        }
        self.reply(Some(id), Ok(&result.to_string()));
    }

    /// `logging/setLevel`: the level is the connection's. A legacy upstream is set to the most
    /// verbose level any connection asked for; each connection gets the messages at or above
    /// its own.
    pub(super) fn set_level(self: Arc<Self>, id: &str, params: Option<&RawValue>) {
        #[derive(Deserialize)]
        struct Level {
            level: String,
        }
        let Some(level) = params
            .and_then(|p| serde_json::from_str::<Level>(p.get()).ok())
            .map(|l| l.level)
            .filter(|l| LEVELS.contains(&l.as_str()))
        else {
            return self.reply_error(
                Some(id),
                code::INVALID_PARAMS,
                &format!(
                    "logging/setLevel needs a level: one of {}",
                    LEVELS.join(", ")
                ),
            );
        };
        self.state.lock().unwrap().log_level = Some(level.clone());
        if self.session().handshake.is_modern() {
            return self.reply(Some(id), Ok("{}"));
        }
        let id = id.to_string();
        tokio::spawn(async move {
            let outcome = self.session().set_level(self.number, &level).await;
            match outcome {
                Ok(()) => self.reply(Some(&id), Ok("{}")),
                Err(e) => self.reply(Some(&id), Err(e.get())),
            }
        });
    }

    /// `resources/subscribe` and `unsubscribe` of a legacy upstream: one upstream subscription
    /// per resource, however many connections hold it.
    pub(super) fn subscription(self: Arc<Self>, id: &str, method: &str, params: Option<&RawValue>) {
        #[derive(Deserialize)]
        struct Uri {
            uri: String,
        }
        let Some(uri) = params
            .and_then(|p| serde_json::from_str::<Uri>(p.get()).ok())
            .map(|u| u.uri)
        else {
            return self.reply_error(
                Some(id),
                code::INVALID_PARAMS,
                &format!("{method} needs a uri"),
            );
        };
        let subscribe = method == method::RESOURCES_SUBSCRIBE;
        let changed = {
            let mut state = self.state.lock().unwrap();
            if subscribe {
                state.subscriptions.insert(uri.clone())
            } else {
                state.subscriptions.remove(&uri)
            }
        };
        let id = id.to_string();
        tokio::spawn(async move {
            let outcome = match (changed, subscribe) {
                (false, _) => Ok(()),
                (true, true) => self.session().subscribe(&uri).await,
                (true, false) => {
                    self.session().unsubscribe(&uri).await;
                    Ok(())
                }
            };
            match outcome {
                Ok(()) => self.reply(Some(&id), Ok("{}")),
                Err(e) => {
                    self.state.lock().unwrap().subscriptions.remove(&uri);
                    self.reply(Some(&id), Err(e.get()))
                }
            }
        });
    }
}
