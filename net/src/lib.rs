//! What mcpgw's two servers share: the gateway's REST surface in the sandbox and the host
//! endpoint's `--http` both accept connections under a cap with header and idle deadlines
//! ([`conn`]), and both keep their bearer token in a file only their user may read or replace
//! ([`private`]). Each is hostile input's first stop, so each is written once.

#![forbid(unsafe_code)]

pub mod conn;
pub mod private;
