//! Every libc call of mcpgw's programs (`mcpgw-gateway`, `mcpgw`, the runner, the library's
//! local shell), each behind a safe function whose contract is stated once, here. The rest of
//! the workspace holds no `unsafe` block outside the C ABI (`src/ffi`) and the allocator's
//! settings.
//!
//! - [`process`]: signals to a process or a process group, reaping, the subreaper, the
//!   gateway's detaching fork.
//! - [`stdio`] (feature `tokio`): standard input and output on tokio's reactor.
//! - [`tty`]: raw mode for a terminal session.
//! - [`fdpass`]: open descriptors passed over a unix socket.
//! - [`fs`]: the process's user, its file-mode mask and open-file limit, file locks.

pub mod fdpass;
pub mod fs;
pub mod process;
#[cfg(feature = "tokio")]
pub mod stdio;
pub mod tty;

/// Signal numbers, for [`process::signal`] and [`process::signal_group`].
pub use libc::{SIGKILL, SIGTERM, c_int};
