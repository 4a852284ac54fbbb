//! What finished operations give: typed results, and [`Output`], their type-erased form for
//! hosts that hold operations of any kind (the C ABI).

use serde::Serialize;

use crate::wire::{self, Health, McpEntry, Tool, ToolChunk};

/// The gateway a `start_gateway` (or a session that launched one) started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GatewayInfo {
    /// Its port.
    pub port: u16,
    /// Its process id inside the sandbox.
    pub pid: u32,
    /// Its token file inside the sandbox.
    pub token_file: String,
    /// Its instance nonce.
    pub instance_nonce: String,
    /// Its state directory (token file and log), removed by `stop_gateway`.
    pub state_dir: String,
}

/// What `ensure_gateway_binary` found or did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BinaryStatus {
    /// Whether the binary was uploaded (false: it was already there, identical).
    pub uploaded: bool,
    /// Its SHA-256, lowercase hex.
    pub sha256: String,
    /// Its path in the sandbox.
    pub path: String,
}

/// The result of a finished operation of any kind.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// `start_gateway`.
    Started(GatewayInfo),
    /// `ensure_gateway_binary`.
    Binary(BinaryStatus),
    /// `health`.
    Health(Health),
    /// `list_mcps`.
    Mcps(Vec<McpEntry>),
    /// `list_tools`.
    Tools(Vec<Tool>),
    /// `call_tool`.
    Chunk(ToolChunk),
    /// `open_session`: the channel's hello.
    Session(crate::wire::frame::Hello),
    /// `stop_gateway`, `add_mcp`, `remove_mcp`, `set_runtime_headers`, `close_session`: done,
    /// nothing to say.
    Done,
}

impl Output {
    /// The result as JSON: the gateway info, binary status, health, entry list, tool list or
    /// ToolChunk; `{"ok":true}` for [`Output::Done`].
    pub fn to_json(&self) -> String {
        let text = match self {
            Output::Started(i) => serde_json::to_string(i),
            Output::Binary(b) => serde_json::to_string(b),
            Output::Health(h) => serde_json::to_string(h),
            Output::Mcps(m) => serde_json::to_string(m),
            Output::Tools(t) => serde_json::to_string(t),
            Output::Chunk(c) => serde_json::to_string(c),
            Output::Session(h) => serde_json::to_string(h),
            Output::Done => serde_json::to_string(&wire::Ok::TRUE),
        };
        // These types hold only strings, numbers and JSON values: serializing cannot fail.
        text.expect("results serialize")
    }
}

macro_rules! into_output {
    ($($t:ty => $variant:ident),* $(,)?) => {
        $(impl From<$t> for Output {
            fn from(v: $t) -> Output {
                Output::$variant(v)
            }
        })*
    };
}

into_output! {
    GatewayInfo => Started,
    BinaryStatus => Binary,
    Health => Health,
    Vec<McpEntry> => Mcps,
    Vec<Tool> => Tools,
    ToolChunk => Chunk,
}

impl From<()> for Output {
    fn from((): ()) -> Output {
        Output::Done
    }
}
