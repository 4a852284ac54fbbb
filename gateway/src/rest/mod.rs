//! The REST surface, AgentScope's contract: the routes and their handlers (`api`), the OpenAPI
//! document that describes them, resumable calls and their kept answers (`calls`), a call's
//! answer as ToolChunks (`chunk`), and `GET /metrics`.

pub mod api;
pub mod calls;
pub mod chunk;
pub mod metrics;
pub mod openapi;
