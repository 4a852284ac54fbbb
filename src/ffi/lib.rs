//! libmcpgw, the C ABI of the `mcpgw` host library: a thin unsafe boundary over the safe core
//! (`src/`, which forbids unsafe code). One module per C type; cbindgen writes `include/mcpgw.h`
//! from these files (see build.rs).
//!
//! Growing the ABI: functions are only ever added (a program built against an older header keeps
//! working); no struct is transparent but two of `mcpgw_client`'s (its callback table, which
//! begins with its size so that an older program's shorter table is read as far as it goes, and
//! the exec request the library writes, whose fields are only added at its end); the host
//! driver's configuration and operations are JSON, so a new setting is a new key; result codes and enum values are only added; anything
//! else bumps `MCPGW_ABI_VERSION`, which every binding checks at load.
//!
//! Conventions, the same for every function:
//! - Every fallible function returns `mcpgw_result`. Out-parameters are written only when it
//!   returns `MCPGW_RESULT_OK`; the one exception is `error_out`, which is written only on
//!   failure (when it is not NULL) with an error object the caller frees.
//! - Handles are created through an out-parameter and released by their `_free`, which accepts
//!   NULL. Strings the library returns as `char *` are freed with `mcpgw_string_free`;
//!   `const char *` results are borrowed, for as long as the documentation of each says.
//! - Strings passed in are NUL-terminated UTF-8; other bytes give `MCPGW_RESULT_INVALID_ARGUMENT`.
//! - No panic crosses the boundary: it becomes `MCPGW_RESULT_PANIC`.
#![allow(non_camel_case_types)]
#![allow(clippy::missing_safety_doc)] // Each function's doc states its contract in C terms.

pub mod chunk;
pub mod client;
pub mod error;
pub mod host;

use std::ffi::{CStr, CString, c_char};

use mcpgw::error::{CODES, Code, ErrorKind};

/// The ABI version of this header and library: programs built against one ABI version run with
/// any library of the same. For 0.x releases it is the minor version, from 1.0 the major one.
pub const MCPGW_ABI_VERSION: u32 = 3;
/// The major version of the library this header belongs to.
pub const MCPGW_VERSION_MAJOR: u32 = 0;
/// The minor version of the library this header belongs to.
pub const MCPGW_VERSION_MINOR: u32 = 3;
/// The patch version of the library this header belongs to.
pub const MCPGW_VERSION_PATCH: u32 = 0;

/// The outcome of every fallible function: a `uint32_t`. The values are distinctive (7000 and
/// up) so that a code is not mistaken for an errno or an exit status; new codes may be added.
/// This enum is the one list of codes: the header, the Go binding (generated from the header)
/// and the Node and Python bindings (from `mcpgw_result_codes` at load) derive theirs from it.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum mcpgw_result {
    /// Success.
    Ok = 7000,
    /// A required pointer argument was NULL.
    NullParameter = 7001,
    /// The library panicked; the call had no effect that can be relied on. A bug: please report.
    Panic = 7002,
    /// A value given to the library is unusable, or the gateway refused the request as invalid
    /// (HTTP 400, 413, 422).
    InvalidArgument = 7003,
    /// A call came in a state that cannot take it: a connection opened without a session, a
    /// message sent on a connection that is not open.
    InvalidState = 7004,
    /// A file on the host could not be read.
    HostIo = 7005,
    /// The sandbox backend could not run a command at all: the sandbox is gone, not running or
    /// unreachable, or the program (or the host's exec function) could not be run.
    ExecFailed = 7100,
    /// A command ran in the sandbox but failed outside the HTTP exchange (missing program, full
    /// disk, failed upload check).
    CommandFailed = 7101,
    /// No gateway answers on the port, or a different one than this host launched.
    GatewayNotRunning = 7102,
    /// The gateway could not be launched; the message carries its reason and log tail.
    StartFailed = 7103,
    /// The gateway refused the token (HTTP 401), or the token file could not be read.
    Unauthorized = 7104,
    /// Unknown MCP or tool in this scope (HTTP 404).
    NotFound = 7105,
    /// An MCP of that name already exists in this scope (HTTP 409).
    Conflict = 7106,
    /// The upstream MCP server failed to connect or to answer (HTTP 500, 502, 503).
    UpstreamError = 7107,
    /// A deadline passed: the tool call's (HTTP 504) or the request's own.
    Deadline = 7108,
    /// What came back is not what the gateway protocol promises.
    ProtocolError = 7109,
    /// The session channel carrying the operation died before its answer came; the operation
    /// was not replayed.
    SessionLost = 7110,
    /// The caller gave up on the operation; the gateway was told to cancel it upstream.
    Cancelled = 7111,
    /// A rule refused it before it reached the sandbox: the MCP's `enable_tools` /
    /// `disable_tools` (HTTP 403), or the host's policy.
    PolicyDenied = 7112,
}

impl From<ErrorKind> for mcpgw_result {
    fn from(kind: ErrorKind) -> mcpgw_result {
        match kind {
            ErrorKind::InvalidArgument => mcpgw_result::InvalidArgument,
            ErrorKind::ExecFailed => mcpgw_result::ExecFailed,
            ErrorKind::CommandFailed => mcpgw_result::CommandFailed,
            ErrorKind::GatewayNotRunning => mcpgw_result::GatewayNotRunning,
            ErrorKind::StartFailed => mcpgw_result::StartFailed,
            ErrorKind::Unauthorized => mcpgw_result::Unauthorized,
            ErrorKind::NotFound => mcpgw_result::NotFound,
            ErrorKind::Conflict => mcpgw_result::Conflict,
            ErrorKind::UpstreamError => mcpgw_result::UpstreamError,
            ErrorKind::Deadline => mcpgw_result::Deadline,
            ErrorKind::ProtocolError => mcpgw_result::ProtocolError,
            ErrorKind::HostIo => mcpgw_result::HostIo,
            ErrorKind::InvalidState => mcpgw_result::InvalidState,
            ErrorKind::SessionLost => mcpgw_result::SessionLost,
            ErrorKind::Cancelled => mcpgw_result::Cancelled,
            ErrorKind::PolicyDenied => mcpgw_result::PolicyDenied,
            // The core may add kinds before this ABI names them.
            _ => mcpgw_result::ProtocolError,
        }
    }
}

impl mcpgw_result {
    /// Every code, in order.
    const ALL: [mcpgw_result; 19] = [
        mcpgw_result::Ok,
        mcpgw_result::NullParameter,
        mcpgw_result::Panic,
        mcpgw_result::InvalidArgument,
        mcpgw_result::InvalidState,
        mcpgw_result::HostIo,
        mcpgw_result::ExecFailed,
        mcpgw_result::CommandFailed,
        mcpgw_result::GatewayNotRunning,
        mcpgw_result::StartFailed,
        mcpgw_result::Unauthorized,
        mcpgw_result::NotFound,
        mcpgw_result::Conflict,
        mcpgw_result::UpstreamError,
        mcpgw_result::Deadline,
        mcpgw_result::ProtocolError,
        mcpgw_result::SessionLost,
        mcpgw_result::Cancelled,
        mcpgw_result::PolicyDenied,
    ];

    /// The code's entry in the core's one table of codes.
    fn code(self) -> &'static Code {
        CODES
            .iter()
            .find(|c| c.value == self as u32)
            .expect("every code of the enum is in the table (checked by a test)")
    }

    /// The code's name and message as C strings, made once.
    fn texts(self) -> &'static (CString, CString) {
        static TEXTS: std::sync::LazyLock<Vec<(u32, (CString, CString))>> =
            std::sync::LazyLock::new(|| {
                CODES
                    .iter()
                    .map(|c| (c.value, (cstring_lossy(c.name), cstring_lossy(c.message))))
                    .collect()
            });
        let value = self as u32;
        &TEXTS
            .iter()
            .find(|(v, _)| *v == value)
            .expect("every code of the enum is in the table (checked by a test)")
            .1
    }

    /// The static message of a code.
    pub(crate) fn message(self) -> &'static str {
        self.code().message
    }

    fn from_u32(code: u32) -> Option<mcpgw_result> {
        mcpgw_result::ALL
            .iter()
            .copied()
            .find(|r| *r as u32 == code)
    }
}

/// Runs `$body` and turns a panic into `$on_panic`: no unwinding crosses into C.
macro_rules! ffi_boundary {
    ($on_panic:expr, $body:block) => {
        match ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(|| $body)) {
            Ok(value) => value,
            Err(_) => $on_panic,
        }
    };
}
pub(crate) use ffi_boundary;

/// Borrows `*ptr`, or returns `MCPGW_RESULT_NULL_PARAMETER` from the enclosing function: the one
/// NULL check of the ABI.
macro_rules! try_ref {
    ($ptr:expr) => {
        match unsafe { $crate::non_null($ptr) } {
            Some(r) => r,
            None => return $crate::mcpgw_result::NullParameter,
        }
    };
}
pub(crate) use try_ref;

/// Borrows a NUL-terminated string; `None` for NULL.
///
/// # Safety
/// `ptr` is NULL or points to a NUL-terminated string that outlives the borrow.
pub(crate) unsafe fn c_str<'a>(ptr: *const c_char) -> Option<&'a CStr> {
    if ptr.is_null() {
        None
    } else {
        // SAFETY: non-NULL and NUL-terminated by the caller's contract.
        Some(unsafe { CStr::from_ptr(ptr) })
    }
}

/// A required UTF-8 string argument.
pub(crate) unsafe fn required_text<'a>(s: *const c_char) -> Result<&'a str, mcpgw_result> {
    // SAFETY: NULL or NUL-terminated, per the contract of every caller.
    let s = unsafe { c_str(s) }.ok_or(mcpgw_result::NullParameter)?;
    s.to_str().map_err(|_| mcpgw_result::InvalidArgument)
}

/// Borrows `*ptr`; `None` for NULL.
///
/// # Safety
/// `ptr` is NULL or points to a live `T` that outlives the borrow.
pub(crate) unsafe fn non_null<'a, T>(ptr: *const T) -> Option<&'a T> {
    // SAFETY: the caller's contract.
    unsafe { ptr.as_ref() }
}

/// A Rust string as a C string; a NUL byte (possible in text quoted from a sandbox's output)
/// becomes U+FFFD so that nothing is cut off.
pub(crate) fn cstring_lossy(s: &str) -> CString {
    CString::new(s).unwrap_or_else(|_| {
        CString::new(s.replace('\0', "\u{fffd}")).expect("NUL bytes were replaced")
    })
}

/// A command's program as C strings: its argv (empty for shell text), or its `sh -c` text.
pub(crate) fn program_cstrings(program: mcpgw::driver::Program) -> (Vec<CString>, Option<CString>) {
    match program {
        mcpgw::driver::Program::Argv(argv) => {
            (argv.iter().map(|a| cstring_lossy(a)).collect(), None)
        }
        mcpgw::driver::Program::Shell(text) => (Vec::new(), Some(cstring_lossy(&text))),
    }
}

/// A time limit in whole milliseconds, as the C ABI gives it (saturating).
pub(crate) fn millis_u32(d: std::time::Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}

/// Hands a string to C; freed with `mcpgw_string_free`.
pub(crate) fn give_string(s: &str) -> *mut c_char {
    cstring_lossy(s).into_raw()
}

/// The static text of a result code, e.g. "the gateway is not running"; "unknown result code"
/// for a value that is not one. Never NULL; valid for the life of the program.
#[unsafe(no_mangle)]
pub extern "C" fn mcpgw_result_message(result: u32) -> *const c_char {
    match mcpgw_result::from_u32(result) {
        Some(r) => r.texts().1.as_ptr(),
        None => c"unknown result code".as_ptr(),
    }
}

/// The name of a result code after `MCPGW_RESULT_`, e.g. "NOT_FOUND"; NULL for a value that is
/// not a code. Valid for the life of the program.
#[unsafe(no_mangle)]
pub extern "C" fn mcpgw_result_name(result: u32) -> *const c_char {
    mcpgw_result::from_u32(result).map_or(std::ptr::null(), |r| r.texts().0.as_ptr())
}

/// Every result code this library has: on return `*codes_out` points to `*len_out` values in
/// ascending order, valid for the life of the program. Bindings build their error tables from
/// it (with `mcpgw_result_name` and `mcpgw_result_message`). NULL arguments are ignored.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_result_codes(codes_out: *mut *const u32, len_out: *mut usize) {
    static CODES: [u32; mcpgw_result::ALL.len()] = {
        let mut codes = [0u32; mcpgw_result::ALL.len()];
        let mut i = 0;
        while i < codes.len() {
            codes[i] = mcpgw_result::ALL[i] as u32;
            i += 1;
        }
        codes
    };
    // SAFETY: each pointer is NULL or writable, per the contract.
    unsafe {
        if let Some(out) = codes_out.as_mut() {
            *out = CODES.as_ptr();
        }
        if let Some(out) = len_out.as_mut() {
            *out = CODES.len();
        }
    }
}

/// The library's version, e.g. "0.1.0". Never NULL; valid for the life of the program.
#[unsafe(no_mangle)]
pub extern "C" fn mcpgw_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// The library's ABI version; a program compares it with the `MCPGW_ABI_VERSION` it was built
/// against.
#[unsafe(no_mangle)]
pub extern "C" fn mcpgw_abi_version() -> u32 {
    MCPGW_ABI_VERSION
}

/// Frees a string the library returned as `char *`. NULL is ignored.
///
/// Takes ownership of `s`: it must come from this library and not be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_string_free(s: *mut c_char) {
    ffi_boundary!((), {
        if !s.is_null() {
            // SAFETY: `s` came from CString::into_raw in this library, per the contract.
            drop(unsafe { CString::from_raw(s) });
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_follow_cargo_toml() {
        let part = |s: &str| s.parse::<u32>().unwrap();
        assert_eq!(MCPGW_VERSION_MAJOR, part(env!("CARGO_PKG_VERSION_MAJOR")));
        assert_eq!(MCPGW_VERSION_MINOR, part(env!("CARGO_PKG_VERSION_MINOR")));
        assert_eq!(MCPGW_VERSION_PATCH, part(env!("CARGO_PKG_VERSION_PATCH")));
        let abi = if MCPGW_VERSION_MAJOR == 0 {
            MCPGW_VERSION_MINOR
        } else {
            MCPGW_VERSION_MAJOR
        };
        assert_eq!(MCPGW_ABI_VERSION, abi);
        let v = unsafe { CStr::from_ptr(mcpgw_version()) };
        assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
    }

    #[test]
    fn checked_in_header_is_current() {
        let generated = std::fs::read_to_string(concat!(env!("OUT_DIR"), "/mcpgw.h")).unwrap();
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../include/mcpgw.h");
        let checked_in = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            generated == checked_in,
            "{path} is stale: regenerate it with `make header`"
        );
        for (name, value) in [
            ("MCPGW_ABI_VERSION", MCPGW_ABI_VERSION),
            ("MCPGW_VERSION_MAJOR", MCPGW_VERSION_MAJOR),
            ("MCPGW_VERSION_MINOR", MCPGW_VERSION_MINOR),
            ("MCPGW_VERSION_PATCH", MCPGW_VERSION_PATCH),
        ] {
            assert!(
                checked_in.contains(&format!("#define {name} {value}\n")),
                "{name}"
            );
        }
    }

    #[test]
    fn every_code_has_its_own_message() {
        let mut seen = std::collections::HashSet::new();
        for r in mcpgw_result::ALL {
            let m = unsafe { CStr::from_ptr(mcpgw_result_message(r as u32)) };
            assert!(seen.insert(m.to_owned()), "{r:?}");
        }
        let unknown = unsafe { CStr::from_ptr(mcpgw_result_message(1)) };
        assert_eq!(unknown.to_str().unwrap(), "unknown result code");
        assert!(mcpgw_result_name(1).is_null());
    }

    /// The header compiles as strict C11 and as C++ (a name given to both a type and a function
    /// compiles as C++ only, for one).
    #[test]
    fn checked_in_header_compiles_as_c_and_cpp() {
        let dir = std::env::temp_dir().join(format!("mcpgw-header-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let source = dir.join("use.c");
        std::fs::write(&source, "#include <mcpgw.h>\nint main(void) { return mcpgw_abi_version() == MCPGW_ABI_VERSION ? 0 : 1; }\n").unwrap();
        let include = concat!(env!("CARGO_MANIFEST_DIR"), "/../../include");
        for (compiler, args) in [
            (
                "cc",
                &[
                    "-std=c11",
                    "-Wall",
                    "-Wextra",
                    "-Werror",
                    "-pedantic",
                    "-fsyntax-only",
                ][..],
            ),
            (
                "c++",
                &[
                    "-x",
                    "c++",
                    "-std=c++17",
                    "-Wall",
                    "-Werror",
                    "-fsyntax-only",
                ][..],
            ),
        ] {
            let out = std::process::Command::new(compiler)
                .args(args)
                .arg("-I")
                .arg(include)
                .arg(&source)
                .output();
            let Ok(out) = out else {
                eprintln!("SKIPPED: no {compiler} here");
                continue;
            };
            assert!(
                out.status.success(),
                "{compiler}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The header is generated from the enum, so this checks `ALL` and the names against it:
    /// every code the header defines is listed, in order, under its own name.
    #[test]
    fn the_code_list_and_names_match_the_header() {
        let header = include_str!("../../include/mcpgw.h");
        let mut in_header = Vec::new();
        for line in header.lines() {
            let line = line.trim();
            if let Some(rest) = line.strip_prefix("MCPGW_RESULT_")
                && let Some((name, value)) = rest.split_once(" = ")
            {
                let value: u32 = value.trim_end_matches(',').parse().unwrap();
                in_header.push((name.to_owned(), value));
            }
        }
        let (mut codes, mut len) = (std::ptr::null(), 0);
        unsafe { mcpgw_result_codes(&mut codes, &mut len) };
        let codes = unsafe { std::slice::from_raw_parts(codes, len) };
        let listed: Vec<(String, u32)> = codes
            .iter()
            .map(|&c| {
                let name = unsafe { CStr::from_ptr(mcpgw_result_name(c)) };
                (name.to_str().unwrap().to_owned(), c)
            })
            .collect();
        assert_eq!(listed, in_header);
        assert_eq!(std::mem::size_of::<mcpgw_result>(), 4);
    }

    /// The C enum (which cbindgen needs spelled out) is the core's table, code by code.
    #[test]
    fn the_enum_is_the_cores_table_of_codes() {
        let enum_codes: Vec<u32> = mcpgw_result::ALL.iter().map(|r| *r as u32).collect();
        let table: Vec<u32> = CODES.iter().map(|c| c.value).collect();
        assert_eq!(enum_codes, table);
        for code in CODES {
            if let Some(kind) = code.kind {
                assert_eq!(mcpgw_result::from(kind) as u32, code.value, "{kind:?}");
            }
            let name = unsafe { CStr::from_ptr(mcpgw_result_name(code.value)) };
            assert_eq!(name.to_str().unwrap(), code.name);
            let msg = unsafe { CStr::from_ptr(mcpgw_result_message(code.value)) };
            assert_eq!(msg.to_str().unwrap(), code.message);
        }
    }

    #[test]
    fn every_error_kind_has_its_own_code() {
        let kinds = ErrorKind::ALL;
        let codes: std::collections::HashSet<_> =
            kinds.iter().map(|k| mcpgw_result::from(*k)).collect();
        assert_eq!(codes.len(), kinds.len());
        assert!(!codes.contains(&mcpgw_result::Ok));
    }
}
