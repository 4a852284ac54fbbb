//! The REST operations: one `prepare_*` per endpoint, each with the checks of its arguments and
//! the decoding of its answer.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use super::operation::{Operation, State};
use super::request::{Decoder, RestJob};
use super::response::{self, HttpResponse};
use super::{CallOptions, Client, Shared};
use crate::command::Method;
use crate::error::{Error, ErrorKind};
use crate::wire::output::seconds;
use crate::wire::rest::{Query, path, route};
use crate::wire::{
    self, CallToolAnswer, Health, McpEntry, McpSpec, RuntimeHeaders, Tool, ToolChunk,
};

/// Time curl gets beyond a tool call's deadline, so the gateway's `504` arrives first.
const CALL_GRACE: Duration = Duration::from_secs(5);

fn check_mcp_name(name: &str) -> Result<(), Error> {
    wire::spec::check_name(name).map_err(Error::invalid_argument)
}

fn json<T: serde::de::DeserializeOwned + 'static>() -> Decoder<T> {
    Box::new(|_, what, resp: HttpResponse| response::json_body(what, &resp.body))
}

fn unit() -> Decoder<()> {
    Box::new(|_, _, _| Ok(()))
}

impl Client {
    /// A REST operation: the request as built by `build`, or the failed operation when the
    /// arguments are unusable or no gateway is known.
    fn rest<T>(
        &self,
        name: &'static str,
        build: impl FnOnce() -> Result<(Method, String, Option<String>, Duration, Decoder<T>), Error>,
    ) -> Operation<T> {
        let start = build().and_then(|(method, path_and_query, body, max_time, decode)| {
            let route = self.shared.route()?;
            if route.token_file.is_empty() && path_and_query != route::HEALTH {
                return Err(Error::invalid_argument(
                    "the gateway's token file is unknown: configure it along with the port",
                ));
            }
            let mut job = RestJob::new(method, path_and_query, body, max_time, route, decode);
            let command = job.begin()?;
            Ok((State::Rest(Box::new(job)), command))
        });
        Operation::new(self.shared.clone(), name, start)
    }

    fn scoped(path: &str, opts: &CallOptions) -> String {
        format!(
            "{path}?{}",
            Query::scope(&opts.agent_id, &opts.session_id).to_query_string()
        )
    }

    /// Prepares `GET /health`; checks the instance nonce when the client knows it.
    pub fn prepare_health(&self, opts: &CallOptions) -> Operation<Health> {
        let t = self.timeout(opts);
        self.rest("health", || {
            let decode: Decoder<Health> = Box::new(|shared: &Shared, what, resp| {
                let health = Health::parse(&resp.body).ok_or_else(|| {
                    Error::protocol(format!(
                        "{what}: the answer is neither `ok` nor {{\"status\",\"instance_nonce\"}}: {:?}",
                        String::from_utf8_lossy(&resp.body)
                    ))
                })?;
                check_nonce(shared.known_nonce().as_deref(), &health)?;
                Ok(health)
            });
            Ok((Method::Get, route::HEALTH.to_owned(), None, t, decode))
        })
    }

    /// Prepares `GET /mcps`: the specs registered in the scope, each with its status.
    pub fn prepare_list_mcps(&self, opts: &CallOptions) -> Operation<Vec<McpEntry>> {
        let t = self.timeout(opts);
        self.rest("list_mcps", || {
            Ok((
                Method::Get,
                Self::scoped(route::MCPS, opts),
                None,
                t,
                json(),
            ))
        })
    }

    /// Prepares `POST /mcps` with `spec_json` (an MCP spec, checked here first with the
    /// gateway's own validator).
    pub fn prepare_add_mcp(&self, opts: &CallOptions, spec_json: &str) -> Operation<()> {
        let t = self.timeout(opts);
        self.rest("add_mcp", || {
            let invalid = |e: &dyn std::fmt::Display| {
                Error::invalid_argument(format!("the MCP spec is invalid: {e}"))
            };
            let spec: McpSpec = serde_json::from_str(spec_json).map_err(|e| invalid(&e))?;
            spec.validate().map_err(|e| invalid(&e))?;
            let body = serde_json::to_string(&spec).map_err(|e| invalid(&e))?;
            Ok((
                Method::Post,
                Self::scoped(route::MCPS, opts),
                Some(body),
                t,
                unit(),
            ))
        })
    }

    /// Prepares `DELETE /mcps/{name}`.
    pub fn prepare_remove_mcp(&self, opts: &CallOptions, name: &str) -> Operation<()> {
        let t = self.timeout(opts);
        self.rest("remove_mcp", || {
            check_mcp_name(name)?;
            Ok((
                Method::Delete,
                Self::scoped(&path::mcp(name), opts),
                None,
                t,
                unit(),
            ))
        })
    }

    /// Prepares `GET /mcps/{name}/tools`.
    pub fn prepare_list_tools(&self, opts: &CallOptions, mcp: &str) -> Operation<Vec<Tool>> {
        let t = self.timeout(opts);
        self.rest("list_tools", || {
            check_mcp_name(mcp)?;
            Ok((
                Method::Get,
                Self::scoped(&path::tools(mcp), opts),
                None,
                t,
                json(),
            ))
        })
    }

    /// Prepares `POST /mcps/{mcp}/tools/{tool}` with `arguments_json` (a JSON object; empty text
    /// or `null` means no arguments). The timeout is also the gateway's deadline for the call.
    pub fn prepare_call_tool(
        &self,
        opts: &CallOptions,
        mcp: &str,
        tool: &str,
        arguments_json: &str,
    ) -> Operation<ToolChunk> {
        let t = self.timeout(opts);
        self.rest("call_tool", || {
            check_mcp_name(mcp)?;
            if tool.is_empty() {
                return Err(Error::invalid_argument("the tool name must not be empty"));
            }
            if tool.contains('\0') {
                return Err(Error::invalid_argument(
                    "the tool name holds a NUL byte, which no tool name has",
                ));
            }
            let args = arguments_json.trim();
            let body = if args.is_empty() || args == "null" {
                r#"{"arguments":{}}"#.to_owned()
            } else {
                // Checked as an object, then sent as given: no re-encoding of large arguments.
                match serde_json::from_str::<Value>(args) {
                    Ok(Value::Object(_)) => format!(r#"{{"arguments":{args}}}"#),
                    Ok(_) => {
                        return Err(Error::invalid_argument(
                            "the tool arguments must be a JSON object",
                        ));
                    }
                    Err(e) => {
                        return Err(Error::invalid_argument(format!(
                            "the tool arguments are not valid JSON: {e}"
                        )));
                    }
                }
            };
            let mut query = Query::scope(&opts.agent_id, &opts.session_id);
            query.timeout = Some(seconds(t));
            let decode: Decoder<ToolChunk> = Box::new(|_, what, resp| {
                response::json_body::<CallToolAnswer>(what, &resp.body).map(|a| a.chunk)
            });
            Ok((
                Method::Post,
                format!("{}?{}", path::tool(mcp, tool), query.to_query_string()),
                Some(body),
                t + CALL_GRACE,
                decode,
            ))
        })
    }

    /// Prepares `PUT /mcps/{mcp}/runtime-headers` with `headers_json`, a JSON object of header
    /// names to values (it replaces the previous set; `{}` clears it).
    pub fn prepare_set_runtime_headers(
        &self,
        opts: &CallOptions,
        mcp: &str,
        headers_json: &str,
    ) -> Operation<()> {
        let t = self.timeout(opts);
        self.rest("set_runtime_headers", || {
            check_mcp_name(mcp)?;
            let headers: BTreeMap<String, String> =
                serde_json::from_str(headers_json).map_err(|e| {
                    Error::invalid_argument(format!(
                        "the runtime headers must be a JSON object of strings: {e}"
                    ))
                })?;
            wire::validate_headers(&headers).map_err(Error::invalid_argument)?;
            let body = serde_json::to_string(&RuntimeHeaders { headers })
                .map_err(|e| Error::invalid_argument(e.to_string()))?;
            Ok((
                Method::Put,
                Self::scoped(&path::runtime_headers(mcp), opts),
                Some(body),
                t,
                unit(),
            ))
        })
    }
}

fn check_nonce(expected: Option<&str>, health: &Health) -> Result<(), Error> {
    match expected {
        Some(n) if health.instance_nonce.as_deref() != Some(n) => Err(Error::new(
            ErrorKind::GatewayNotRunning,
            format!(
                "a different gateway answers on the port (instance nonce {:?}, expected {n:?}); \
                 the one this client knows has exited",
                health.instance_nonce.as_deref().unwrap_or("none")
            ),
        )),
        _ => Ok(()),
    }
}
