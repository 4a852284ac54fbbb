// The gateway's JSON, as on the wire (snake_case, AgentScope's shapes): the types every result
// has, and small helpers over them. Results are the JSON the library hands over (itself the
// gateway's, checked against the library's wire types), parsed once; nothing is copied into
// another shape.

import { RESULT_OK } from './ffi.js';
import { errorNamed } from './errors.js';
import { live, native, takeError, takeString } from './native.js';

/**
 * AgentScope's state of a tool execution; a successful MCP result is `running` with `is_last`.
 *
 * @typedef {'running' | 'success' | 'error' | 'interrupted' | 'denied'} ToolState
 */

/**
 * A text block of a ToolChunk.
 *
 * @typedef {object} TextBlock
 * @property {'text'} type
 * @property {string} text
 * @property {string} id
 * @property {string} created_at when it was made (ISO 8601)
 * @property {string | null} finished_at
 */

/**
 * Inline bytes of a data block, base64-encoded: {@link dataBytes} decodes them.
 *
 * @typedef {object} Base64Source
 * @property {'base64'} type
 * @property {string} data standard alphabet, padded
 * @property {string} media_type e.g. `image/png`
 */

/**
 * The bytes of a data block behind a URL (an MCP resource link).
 *
 * @typedef {object} UrlSource
 * @property {'url'} type
 * @property {string} url
 * @property {string} media_type
 */

/**
 * A data block of a ToolChunk: image, audio, an embedded blob, or a link.
 *
 * @typedef {object} DataBlock
 * @property {'data'} type
 * @property {string} id
 * @property {Base64Source | UrlSource} source
 * @property {string | null} name e.g. a linked resource's name
 * @property {string} created_at
 * @property {string | null} finished_at
 */

/** @typedef {TextBlock | DataBlock} Block One block of a ToolChunk. */

/**
 * The progress of a progress chunk (`metadata.mcp_progress`): the MCP progress notification.
 *
 * @typedef {object} Progress
 * @property {number} progress
 * @property {number | null} [total]
 * @property {string | null} [message]
 */

/**
 * A ToolChunk's metadata: `structured_content` (the MCP result's `structuredContent`),
 * `mcp_progress` on a progress chunk, `error` (`{status, detail}`) on the last chunk of a
 * streamed call that failed after progress.
 *
 * @typedef {{structured_content?: any, mcp_progress?: Progress, error?: {status: number, detail: string}, [key: string]: unknown}} ChunkMetadata
 */

/**
 * The result of a tool call, or one progress chunk of a streamed call: AgentScope's ToolChunk,
 * exactly as the gateway sends it.
 *
 * @typedef {object} ToolChunk
 * @property {Block[]} content
 * @property {ToolState} state `error` when the tool reported an error (MCP `isError`)
 * @property {boolean} is_last false for progress chunks
 * @property {ChunkMetadata} metadata
 * @property {string} id 32 hex digits
 */

/**
 * How the gateway starts a stdio MCP server (AgentScope's `stdio_mcp` config).
 *
 * @typedef {object} StdioMcpConfig
 * @property {'stdio_mcp'} type
 * @property {string} command the program, inside the sandbox
 * @property {string[] | null} [args]
 * @property {Record<string, string> | null} [env]
 * @property {string | null} [cwd]
 * @property {string} [encoding_error_handler]
 */

/**
 * How the gateway reaches an HTTP MCP server: streamable HTTP, or legacy SSE for a URL whose
 * path ends in `/sse` or `/messages/`.
 *
 * @typedef {object} HttpMcpConfig
 * @property {'http_mcp'} type
 * @property {string} url
 * @property {Record<string, string> | null} [headers]
 * @property {number | null} [timeout] seconds
 */

/**
 * An MCP server registration: AgentScope's MCPClient dump. Unknown fields are kept and echoed.
 *
 * @typedef {object} McpSpec
 * @property {string} name matches `[A-Za-z0-9_-]+`, at most 128 bytes
 * @property {boolean} [is_stateful]
 * @property {StdioMcpConfig | HttpMcpConfig} mcp_config
 * @property {string[] | null} [enable_tools]
 * @property {string[] | null} [disable_tools]
 * @property {number | null} [execution_timeout] seconds each call of this MCP may take
 * @property {boolean} [stream_progress]
 * @property {Record<string, string>} [runtime_headers] headers for an HTTP upstream, never echoed
 */

/**
 * The state of a registered upstream. Each state is documented once, in the gateway's wire
 * contract: `McpState` in `src/wire/rest.rs` of the mcpgw repository.
 *
 * @typedef {'connecting' | 'connected' | 'stateless' | 'exited' | 'restarting' | 'failed' | 'crashing' | 'closed'} McpState
 */

/**
 * How a registered upstream stands (`McpStatus` in `src/wire/rest.rs`).
 *
 * @typedef {object} McpStatus
 * @property {McpState} state
 * @property {number | null} pid the process id of a stdio upstream that runs
 * @property {number} restarts how many times it was started again after dying
 * @property {string | null} last_error why it last failed, if it did
 * @property {number} calls tool calls made
 * @property {number} errors tool calls that ended in an error status
 */

/**
 * An entry of `listMcps`: the spec as registered, plus the gateway's `status` (absent from a
 * gateway that does not report it, e.g. AgentScope's).
 *
 * @typedef {McpSpec & {status?: McpStatus}} McpEntry
 */

/**
 * An MCP `Tool` as its server described it (camelCase, unfiltered but for the spec's
 * `enable_tools`/`disable_tools`).
 *
 * @typedef {{name: string, title?: string, description?: string, inputSchema: Record<string, unknown>, outputSchema?: Record<string, unknown>, annotations?: Record<string, unknown>, [key: string]: unknown}} Tool
 */

/**
 * The answer of `health`.
 *
 * @typedef {object} Health
 * @property {string} status `ok`
 * @property {string} [instance_nonce] the gateway's nonce, when it was launched with one
 */

/**
 * The gateway `startGateway` (or a session that launched one) started.
 *
 * @typedef {object} GatewayInfo
 * @property {number} port its port inside the sandbox
 * @property {number} pid its process id inside the sandbox
 * @property {string} token_file its token file inside the sandbox (the token never leaves it)
 * @property {string} instance_nonce checked by `health`
 * @property {string} state_dir removed by `stopGateway`
 */

/**
 * What `ensureGatewayBinary` found or did.
 *
 * @typedef {object} BinaryStatus
 * @property {boolean} uploaded false when an identical binary was already there
 * @property {string} sha256 lowercase hex
 * @property {string} path its path inside the sandbox
 */

/**
 * The first frame of a session channel: who answers (`Hello` in `src/wire/frame.rs`).
 *
 * @typedef {object} Hello
 * @property {number} v the frame format version
 * @property {string} version the gateway binary's version
 * @property {number} port the port of the gateway `attach` relays to
 * @property {number} pid the gateway's process id
 * @property {string | null} [instance_nonce]
 * @property {string | null} [token_file]
 * @property {boolean} launched whether this `attach` launched the gateway
 * @property {number} max_frame_bytes the longest line `attach` accepts
 * @property {number} [heartbeat_ms] how often attach pings when idle (0: it does not)
 * @property {number} [retention_ms] how long the gateway keeps a call whose channel ended, for
 *   a new channel to resume it (0: it does not)
 */

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * The decoded bytes of a data block with inline (base64) data; `null` for a text block or a
 * data block behind a URL. Throws ProtocolError for invalid base64.
 *
 * @param {Block} block
 * @returns {Uint8Array | null}
 */
export function dataBytes(block) {
  if (block.type !== 'data' || block.source.type !== 'base64') return null;
  const text = block.source.data.replace(/\s+/g, '');
  if (text.length % 4 !== 0 || !BASE64.test(text)) {
    throw errorNamed('PROTOCOL_ERROR', `data block ${block.id} holds invalid base64`);
  }
  const b = Buffer.from(text, 'base64');
  return new Uint8Array(b.buffer, b.byteOffset, b.length);
}

/**
 * The progress of a progress chunk (`metadata.mcp_progress`), or `null` for any other chunk.
 *
 * @param {ToolChunk} chunk
 * @returns {Progress | null}
 */
export function progressOf(chunk) {
  return chunk.metadata?.mcp_progress ?? null;
}

/**
 * The text of a chunk's text blocks, joined with newlines (`''` when it has none).
 *
 * @param {ToolChunk} chunk
 * @returns {string}
 */
export function textOf(chunk) {
  return chunk.content
    .filter((b) => b.type === 'text')
    .map((b) => /** @type {TextBlock} */ (b).text)
    .join('\n');
}

/**
 * Parses a ToolChunk from JSON text as the gateway writes it, through the library's own wire
 * types (the path every chunk the binding returns takes): the result is the chunk as the library
 * reads it, in the wire's shape. Throws InvalidArgumentError for text that is not a ToolChunk,
 * ProtocolError for a data block with invalid base64.
 *
 * @param {string} json
 * @returns {ToolChunk}
 */
export function parseToolChunk(json) {
  if (typeof json !== 'string' || json.includes('\0')) {
    throw errorNamed('INVALID_ARGUMENT', 'parseToolChunk needs JSON text without NUL');
  }
  const n = native();
  const chunkOut = [null];
  const errOut = [null];
  if (n.mcpgw_tool_chunk_from_json(json, chunkOut, errOut) !== RESULT_OK) {
    throw takeError(n, errOut[0]);
  }
  live.chunks++;
  try {
    const out = [null];
    if (n.mcpgw_tool_chunk_to_json(chunkOut[0], out) !== RESULT_OK) {
      throw errorNamed('PANIC', 'reading a ToolChunk back failed');
    }
    return JSON.parse(takeString(n, out[0]));
  } finally {
    n.mcpgw_tool_chunk_free(chunkOut[0]);
    live.chunks--;
  }
}
