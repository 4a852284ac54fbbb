//! Who may talk to the endpoint: a request without the bearer token is 401; one whose `Origin`
//! is not a loopback origin (or one given with `--allow-origin`) or whose `Host` is not a
//! loopback name is 403, so that a web page cannot reach the endpoint through DNS rebinding.

use hyper::body::Incoming;
use hyper::header::HeaderValue;
use hyper::{Request, Response, StatusCode};
use mcpgw::wire::jsonrpc;

use super::{Out, Server, header, rpc_error};

/// Whether `host` (a `Host` header) names this machine's loopback.
fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    matches!(name, "localhost" | "127.0.0.1" | "::1")
}

/// Whether `origin` (an `Origin` header) is a page of this machine's loopback
/// (`http://localhost:3000`, `https://127.0.0.1`, `http://[::1]:8080`): what a local client
/// sends, and no page a DNS rebinding can serve (its origin keeps the attacker's name).
fn loopback_origin(origin: &str) -> bool {
    origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .is_some_and(|authority| !authority.contains(['/', '@']) && loopback_host(authority))
}

/// The checks every request passes before anything else: Origin, Host, token.
pub(super) fn refused(server: &Server, req: &Request<Incoming>) -> Option<Response<Out>> {
    if let Some(origin) = req.headers().get(hyper::header::ORIGIN) {
        let ok = origin
            .to_str()
            .is_ok_and(|o| loopback_origin(o) || server.origins.iter().any(|a| a == o));
        if !ok {
            return Some(rpc_error(
                StatusCode::FORBIDDEN,
                None,
                jsonrpc::code::INVALID_REQUEST,
                "forbidden: this Origin is not allowed (start the endpoint with --allow-origin \
                 ORIGIN to allow it)",
            ));
        }
    }
    if server.tcp && !header(req, "host").is_some_and(loopback_host) {
        return Some(rpc_error(
            StatusCode::FORBIDDEN,
            None,
            jsonrpc::code::INVALID_REQUEST,
            "forbidden: the Host header must name this machine's loopback",
        ));
    }
    let given = header(req, "authorization")
        .and_then(|a| a.strip_prefix("Bearer "))
        .unwrap_or_default();
    if !mcpgw::random::constant_time_eq(given.as_bytes(), server.token.as_bytes()) {
        let mut r = rpc_error(
            StatusCode::UNAUTHORIZED,
            None,
            jsonrpc::code::INVALID_REQUEST,
            "unauthorized: send Authorization: Bearer with the token of the endpoint's token file",
        );
        r.headers_mut().insert(
            hyper::header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer"),
        );
        return Some(r);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::loopback_origin;

    #[test]
    fn loopback_origins_are_told_from_others() {
        for o in [
            "http://localhost:6274",
            "http://localhost",
            "https://127.0.0.1:8443",
            "http://[::1]:3000",
        ] {
            assert!(loopback_origin(o), "{o}");
        }
        for o in [
            "null",
            "http://evil.example",
            "http://localhost.evil.example",
            "http://127.0.0.1.evil.example:80",
            "http://localhost@evil.example",
            "http://evil.example/localhost:80",
            "file://localhost",
            "localhost:80",
        ] {
            assert!(!loopback_origin(o), "{o}");
        }
    }
}
