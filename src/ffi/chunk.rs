//! `mcpgw_tool_chunk` and `mcpgw_block`: a tool call's result, read from C.

use std::ffi::{CString, c_char};
use std::ptr;

use super::error::{mcpgw_error, report_code, report_error};
use super::{c_str, cstring_lossy, ffi_boundary, give_string, mcpgw_result, try_ref};
use mcpgw::error::Error;
use mcpgw::wire::{Block, Source, ToolChunk, ToolState};

/// AgentScope's state of a tool execution.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum mcpgw_tool_state {
    /// Under way, or a successful result (AgentScope marks MCP results `running`).
    Running = 0,
    /// Finished successfully.
    Success = 1,
    /// The tool reported an error (the MCP result had `isError`).
    Error = 2,
    /// Stopped before it finished.
    Interrupted = 3,
    /// Refused by a permission check.
    Denied = 4,
}

/// What a block holds. On the wire a block is `text` or `data`; a data block holds either
/// inline bytes or a URL, told apart here.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum mcpgw_block_type {
    /// A text block: `mcpgw_block_text`.
    Text = 0,
    /// A data block with inline bytes: `mcpgw_block_data`, `mcpgw_block_media_type`.
    Data = 1,
    /// A data block that links to its bytes: `mcpgw_block_url`, `mcpgw_block_media_type`.
    Url = 2,
}

/// One block of a `mcpgw_tool_chunk`. Borrowed from its chunk: valid until the chunk is
/// freed; never freed on its own. Immutable like its chunk: may be read from several threads at
/// once.
pub struct mcpgw_block {
    kind: mcpgw_block_type,
    id: CString,
    /// The text, then a NUL (text may itself contain NUL, hence the separate length).
    text: Vec<u8>,
    data: Vec<u8>,
    media_type: Option<CString>,
    url: Option<CString>,
    name: Option<CString>,
}

/// The result of a tool call (AgentScope's `ToolChunk`), with its data blocks decoded.
///
/// Immutable: may be moved between threads and read from several at once. Released with
/// `mcpgw_tool_chunk_free`.
pub struct mcpgw_tool_chunk {
    chunk: ToolChunk,
    id: CString,
    metadata: CString,
    blocks: Vec<mcpgw_block>,
}

impl mcpgw_tool_chunk {
    /// Prepares a chunk for C: decodes inline data, makes C strings.
    pub(crate) fn new(chunk: ToolChunk) -> Result<mcpgw_tool_chunk, Error> {
        let mut blocks = Vec::with_capacity(chunk.content.len());
        for block in &chunk.content {
            blocks.push(match block {
                Block::Text(t) => {
                    let mut text = Vec::with_capacity(t.text.len() + 1);
                    text.extend_from_slice(t.text.as_bytes());
                    text.push(0);
                    mcpgw_block {
                        kind: mcpgw_block_type::Text,
                        id: cstring_lossy(&t.id),
                        text,
                        data: Vec::new(),
                        media_type: None,
                        url: None,
                        name: None,
                    }
                }
                Block::Data(d) => {
                    let (kind, data, url) = match &d.source {
                        Source::Base64 { .. } => {
                            let bytes = d.source.decode().unwrap_or(Ok(Vec::new()));
                            (
                                mcpgw_block_type::Data,
                                bytes.map_err(Error::protocol)?,
                                None,
                            )
                        }
                        Source::Url { url, .. } => {
                            (mcpgw_block_type::Url, Vec::new(), Some(cstring_lossy(url)))
                        }
                    };
                    mcpgw_block {
                        kind,
                        id: cstring_lossy(&d.id),
                        text: vec![0],
                        data,
                        media_type: Some(cstring_lossy(d.source.media_type())),
                        url,
                        name: d.name.as_deref().map(cstring_lossy),
                    }
                }
            });
        }
        Ok(mcpgw_tool_chunk {
            id: cstring_lossy(&chunk.id),
            metadata: cstring_lossy(&serde_json::Value::Object(chunk.metadata.clone()).to_string()),
            blocks,
            chunk,
        })
    }
}

/// Parses a ToolChunk from its NUL-terminated JSON text (the bytes of a call_tool's DONE action
/// or of a PROGRESS action, or what `mcpgw_tool_chunk_to_json` wrote). On success `*chunk_out` receives a new chunk, to free with `mcpgw_tool_chunk_free`.
/// `error_out` may be NULL; on failure it receives an error to free with `mcpgw_error_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_tool_chunk_from_json(
    json: *const c_char,
    chunk_out: *mut *mut mcpgw_tool_chunk,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    ffi_boundary!(report_code(error_out, mcpgw_result::Panic), {
        // SAFETY: NULL or NUL-terminated, per the contract.
        let (Some(json), false) = (unsafe { c_str(json) }, chunk_out.is_null()) else {
            return report_code(error_out, mcpgw_result::NullParameter);
        };
        let parsed = serde_json::from_slice::<ToolChunk>(json.to_bytes())
            .map_err(|e| Error::invalid_argument(format!("not a ToolChunk: {e}")))
            .and_then(mcpgw_tool_chunk::new);
        match parsed {
            Ok(c) => {
                // SAFETY: checked non-NULL above.
                unsafe { *chunk_out = Box::into_raw(Box::new(c)) };
                mcpgw_result::Ok
            }
            Err(e) => report_error(error_out, &e),
        }
    })
}

/// The chunk as JSON text, in AgentScope's field order. On success `*json_out` receives a
/// string to free with `mcpgw_string_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_tool_chunk_to_json(
    chunk: *const mcpgw_tool_chunk,
    json_out: *mut *mut c_char,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        let chunk = try_ref!(chunk);
        if json_out.is_null() {
            return mcpgw_result::NullParameter;
        }
        let Ok(text) = serde_json::to_string(&chunk.chunk) else {
            return mcpgw_result::ProtocolError;
        };
        // SAFETY: checked non-NULL above.
        unsafe { *json_out = give_string(&text) };
        mcpgw_result::Ok
    })
}

/// The chunk's state; `MCPGW_TOOL_STATE_ERROR` for a NULL chunk.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_tool_chunk_state(
    chunk: *const mcpgw_tool_chunk,
) -> mcpgw_tool_state {
    ffi_boundary!(mcpgw_tool_state::Error, {
        // SAFETY: NULL or a live chunk, per the contract.
        match unsafe { chunk.as_ref() }.map(|c| c.chunk.state) {
            Some(ToolState::Running) => mcpgw_tool_state::Running,
            Some(ToolState::Success) => mcpgw_tool_state::Success,
            Some(ToolState::Interrupted) => mcpgw_tool_state::Interrupted,
            Some(ToolState::Denied) => mcpgw_tool_state::Denied,
            Some(ToolState::Error) | None => mcpgw_tool_state::Error,
        }
    })
}

/// Whether this is the last chunk of the call; false for a NULL chunk.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_tool_chunk_is_last(chunk: *const mcpgw_tool_chunk) -> bool {
    ffi_boundary!(false, {
        // SAFETY: NULL or a live chunk, per the contract.
        unsafe { chunk.as_ref() }.is_some_and(|c| c.chunk.is_last)
    })
}

/// The chunk's id (32 hex digits). Borrowed: valid until the chunk is freed; NULL for a NULL
/// chunk.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_tool_chunk_id(chunk: *const mcpgw_tool_chunk) -> *const c_char {
    ffi_boundary!(ptr::null(), {
        // SAFETY: NULL or a live chunk, per the contract.
        unsafe { chunk.as_ref() }.map_or(ptr::null(), |c| c.id.as_ptr())
    })
}

/// The chunk's metadata as a JSON object (`structured_content`, `mcp_progress`, `error`, ...).
/// Borrowed: valid until the chunk is freed; NULL for a NULL chunk.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_tool_chunk_metadata_json(
    chunk: *const mcpgw_tool_chunk,
) -> *const c_char {
    ffi_boundary!(ptr::null(), {
        // SAFETY: NULL or a live chunk, per the contract.
        unsafe { chunk.as_ref() }.map_or(ptr::null(), |c| c.metadata.as_ptr())
    })
}

/// How many blocks the chunk has; 0 for a NULL chunk.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_tool_chunk_block_count(chunk: *const mcpgw_tool_chunk) -> usize {
    ffi_boundary!(0, {
        // SAFETY: NULL or a live chunk, per the contract.
        unsafe { chunk.as_ref() }.map_or(0, |c| c.blocks.len())
    })
}

/// Block number `index` (from 0). On success `*block_out` receives a block borrowed from the
/// chunk (valid until the chunk is freed; never freed on its own). `MCPGW_RESULT_INVALID_ARGUMENT`
/// when `index` is out of range.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_tool_chunk_block(
    chunk: *const mcpgw_tool_chunk,
    index: usize,
    block_out: *mut *const mcpgw_block,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        let chunk = try_ref!(chunk);
        if block_out.is_null() {
            return mcpgw_result::NullParameter;
        }
        match chunk.blocks.get(index) {
            Some(b) => {
                // SAFETY: checked non-NULL above.
                unsafe { *block_out = b };
                mcpgw_result::Ok
            }
            None => mcpgw_result::InvalidArgument,
        }
    })
}

/// The block's type; `MCPGW_BLOCK_TYPE_TEXT` for a NULL block.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_block_get_type(block: *const mcpgw_block) -> mcpgw_block_type {
    ffi_boundary!(mcpgw_block_type::Text, {
        // SAFETY: NULL or a live block, per the contract.
        unsafe { block.as_ref() }.map_or(mcpgw_block_type::Text, |b| b.kind)
    })
}

/// The block's id. Borrowed like the block; NULL for a NULL block.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_block_id(block: *const mcpgw_block) -> *const c_char {
    ffi_boundary!(ptr::null(), {
        // SAFETY: NULL or a live block, per the contract.
        unsafe { block.as_ref() }.map_or(ptr::null(), |b| b.id.as_ptr())
    })
}

/// A text block's UTF-8 text: `*text_out` receives it (NUL-terminated, borrowed like the
/// block) and `*len_out` its length in bytes without the NUL (the text may contain NUL itself).
/// `MCPGW_RESULT_INVALID_ARGUMENT` for a block that is not text.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_block_text(
    block: *const mcpgw_block,
    text_out: *mut *const c_char,
    len_out: *mut usize,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        let block = try_ref!(block);
        if text_out.is_null() || len_out.is_null() {
            return mcpgw_result::NullParameter;
        }
        if block.kind != mcpgw_block_type::Text {
            return mcpgw_result::InvalidArgument;
        }
        // SAFETY: checked non-NULL above.
        unsafe {
            *text_out = block.text.as_ptr().cast();
            *len_out = block.text.len() - 1;
        }
        mcpgw_result::Ok
    })
}

/// An inline data block's decoded bytes: `*data_out` receives them (borrowed like the block;
/// not NUL-terminated) and `*len_out` their number. `MCPGW_RESULT_INVALID_ARGUMENT` for a block
/// of another type.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_block_data(
    block: *const mcpgw_block,
    data_out: *mut *const u8,
    len_out: *mut usize,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        let block = try_ref!(block);
        if data_out.is_null() || len_out.is_null() {
            return mcpgw_result::NullParameter;
        }
        if block.kind != mcpgw_block_type::Data {
            return mcpgw_result::InvalidArgument;
        }
        // SAFETY: checked non-NULL above.
        unsafe {
            *data_out = block.data.as_ptr();
            *len_out = block.data.len();
        }
        mcpgw_result::Ok
    })
}

/// A data block's media type (e.g. "image/png"); NULL for a text block. Borrowed like the block.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_block_media_type(block: *const mcpgw_block) -> *const c_char {
    ffi_boundary!(ptr::null(), {
        // SAFETY: NULL or a live block, per the contract.
        unsafe { block.as_ref() }
            .and_then(|b| b.media_type.as_ref())
            .map_or(ptr::null(), |s| s.as_ptr())
    })
}

/// A URL block's URL; NULL for other blocks. Borrowed like the block.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_block_url(block: *const mcpgw_block) -> *const c_char {
    ffi_boundary!(ptr::null(), {
        // SAFETY: NULL or a live block, per the contract.
        unsafe { block.as_ref() }
            .and_then(|b| b.url.as_ref())
            .map_or(ptr::null(), |s| s.as_ptr())
    })
}

/// A data block's name (e.g. of a linked resource); NULL when it has none. Borrowed like the
/// block.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_block_name(block: *const mcpgw_block) -> *const c_char {
    ffi_boundary!(ptr::null(), {
        // SAFETY: NULL or a live block, per the contract.
        unsafe { block.as_ref() }
            .and_then(|b| b.name.as_ref())
            .map_or(ptr::null(), |s| s.as_ptr())
    })
}

/// Frees a chunk and its blocks. NULL is ignored. Takes ownership: do not use `chunk` or its
/// blocks afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_tool_chunk_free(chunk: *mut mcpgw_tool_chunk) {
    ffi_boundary!((), {
        if !chunk.is_null() {
            // SAFETY: came from Box::into_raw in this library, per the contract.
            drop(unsafe { Box::from_raw(chunk) });
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn accessors_read_every_block_kind() {
        let json = concat!(
            r#"{"content":[{"type":"text","text":"a\u0000b","id":"t1","created_at":"x","finished_at":null},"#,
            r#"{"type":"data","id":"d1","source":{"type":"base64","data":"AAEC/w==","media_type":"image/png"},"name":null,"created_at":"x","finished_at":null},"#,
            r#"{"type":"data","id":"u1","source":{"type":"url","url":"file:///r","media_type":"text/plain"},"name":"r","created_at":"x","finished_at":null}],"#,
            r#""state":"error","is_last":true,"metadata":{"structured_content":{"n":1}},"id":"c1"}"#,
            "\0"
        );
        let mut chunk = ptr::null_mut();
        let mut err = ptr::null_mut();
        unsafe {
            assert_eq!(
                mcpgw_tool_chunk_from_json(json.as_ptr().cast(), &mut chunk, &mut err),
                mcpgw_result::Ok
            );
            assert_eq!(mcpgw_tool_chunk_state(chunk), mcpgw_tool_state::Error);
            assert!(mcpgw_tool_chunk_is_last(chunk));
            assert_eq!(
                CStr::from_ptr(mcpgw_tool_chunk_id(chunk)).to_str(),
                Ok("c1")
            );
            assert_eq!(
                CStr::from_ptr(mcpgw_tool_chunk_metadata_json(chunk)).to_str(),
                Ok(r#"{"structured_content":{"n":1}}"#)
            );
            assert_eq!(mcpgw_tool_chunk_block_count(chunk), 3);
            let mut b = ptr::null();
            assert_eq!(mcpgw_tool_chunk_block(chunk, 0, &mut b), mcpgw_result::Ok);
            let (mut t, mut n) = (ptr::null(), 0);
            assert_eq!(mcpgw_block_text(b, &mut t, &mut n), mcpgw_result::Ok);
            assert_eq!(std::slice::from_raw_parts(t.cast::<u8>(), n), b"a\0b");
            let (mut d, mut dn) = (ptr::null(), 0);
            assert_eq!(
                mcpgw_block_data(b, &mut d, &mut dn),
                mcpgw_result::InvalidArgument
            );
            assert_eq!(mcpgw_tool_chunk_block(chunk, 1, &mut b), mcpgw_result::Ok);
            assert_eq!(mcpgw_block_get_type(b), mcpgw_block_type::Data);
            assert_eq!(mcpgw_block_data(b, &mut d, &mut dn), mcpgw_result::Ok);
            assert_eq!(std::slice::from_raw_parts(d, dn), &[0, 1, 2, 255]);
            assert_eq!(
                CStr::from_ptr(mcpgw_block_media_type(b)).to_str(),
                Ok("image/png")
            );
            assert!(mcpgw_block_name(b).is_null());
            assert_eq!(mcpgw_tool_chunk_block(chunk, 2, &mut b), mcpgw_result::Ok);
            assert_eq!(mcpgw_block_get_type(b), mcpgw_block_type::Url);
            assert_eq!(CStr::from_ptr(mcpgw_block_url(b)).to_str(), Ok("file:///r"));
            assert_eq!(CStr::from_ptr(mcpgw_block_name(b)).to_str(), Ok("r"));
            let before = b;
            assert_eq!(
                mcpgw_tool_chunk_block(chunk, 3, &mut b),
                mcpgw_result::InvalidArgument
            );
            assert_eq!(b, before, "out-parameters are written only on success");
            let mut text = ptr::null_mut();
            assert_eq!(mcpgw_tool_chunk_to_json(chunk, &mut text), mcpgw_result::Ok);
            let back = CStr::from_ptr(text).to_str().unwrap().to_owned();
            assert_eq!(format!("{back}\0"), json);
            crate::mcpgw_string_free(text);
            mcpgw_tool_chunk_free(chunk);
        }
    }

    #[test]
    fn bad_json_and_bad_base64_are_reported() {
        let mut chunk = ptr::null_mut();
        let mut err = ptr::null_mut();
        unsafe {
            assert_eq!(
                mcpgw_tool_chunk_from_json(c"{}".as_ptr(), &mut chunk, &mut err),
                mcpgw_result::InvalidArgument
            );
            assert!(chunk.is_null());
            assert!(!err.is_null());
            super::super::error::mcpgw_error_free(err);
            let bad = cr#"{"content":[{"type":"data","id":"d","source":{"type":"base64","data":"!!","media_type":"x"},"created_at":"x"}],"state":"running","is_last":true,"id":"c"}"#;
            assert_eq!(
                mcpgw_tool_chunk_from_json(bad.as_ptr(), &mut chunk, ptr::null_mut()),
                mcpgw_result::ProtocolError
            );
            assert_eq!(
                mcpgw_tool_chunk_from_json(ptr::null(), &mut chunk, ptr::null_mut()),
                mcpgw_result::NullParameter
            );
            mcpgw_tool_chunk_free(ptr::null_mut());
        }
    }
}
