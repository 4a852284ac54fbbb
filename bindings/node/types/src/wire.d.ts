export type ToolState = 'running' | 'success' | 'error' | 'interrupted' | 'denied';
export type TextBlock = {
    type: 'text';
    text: string;
    id: string;
    /**
     * when it was made (ISO 8601)
     */
    created_at: string;
    finished_at: string | null;
};
export type Base64Source = {
    type: 'base64';
    /**
     * standard alphabet, padded
     */
    data: string;
    /**
     * e.g. `image/png`
     */
    media_type: string;
};
export type UrlSource = {
    type: 'url';
    url: string;
    media_type: string;
};
export type DataBlock = {
    type: 'data';
    id: string;
    source: Base64Source | UrlSource;
    /**
     * e.g. a linked resource's name
     */
    name: string | null;
    created_at: string;
    finished_at: string | null;
};
export type Block = TextBlock | DataBlock;
export type Progress = {
    progress: number;
    total?: number | null;
    message?: string | null;
};
export type ChunkMetadata = {
    structured_content?: any;
    mcp_progress?: Progress;
    error?: {
        status: number;
        detail: string;
    };
    [key: string]: unknown;
};
export type ToolChunk = {
    content: Block[];
    /**
     * `error` when the tool reported an error (MCP `isError`)
     */
    state: ToolState;
    /**
     * false for progress chunks
     */
    is_last: boolean;
    metadata: ChunkMetadata;
    /**
     * 32 hex digits
     */
    id: string;
};
export type StdioMcpConfig = {
    type: 'stdio_mcp';
    /**
     * the program, inside the sandbox
     */
    command: string;
    args?: string[] | null;
    env?: Record<string, string> | null;
    cwd?: string | null;
    encoding_error_handler?: string;
};
export type HttpMcpConfig = {
    type: 'http_mcp';
    url: string;
    headers?: Record<string, string> | null;
    /**
     * seconds
     */
    timeout?: number | null;
};
export type McpSpec = {
    /**
     * matches `[A-Za-z0-9_-]+`, at most 128 bytes
     */
    name: string;
    is_stateful?: boolean;
    mcp_config: StdioMcpConfig | HttpMcpConfig;
    enable_tools?: string[] | null;
    disable_tools?: string[] | null;
    /**
     * seconds each call of this MCP may take
     */
    execution_timeout?: number | null;
    stream_progress?: boolean;
    /**
     * headers for an HTTP upstream, never echoed
     */
    runtime_headers?: Record<string, string>;
};
export type McpState = 'connecting' | 'connected' | 'stateless' | 'exited' | 'restarting' | 'failed' | 'crashing' | 'closed';
export type McpStatus = {
    state: McpState;
    /**
     * the process id of a stdio upstream that runs
     */
    pid: number | null;
    /**
     * how many times it was started again after dying
     */
    restarts: number;
    /**
     * why it last failed, if it did
     */
    last_error: string | null;
    /**
     * tool calls made
     */
    calls: number;
    /**
     * tool calls that ended in an error status
     */
    errors: number;
};
export type McpEntry = McpSpec & {
    status?: McpStatus;
};
export type Tool = {
    name: string;
    title?: string;
    description?: string;
    inputSchema: Record<string, unknown>;
    outputSchema?: Record<string, unknown>;
    annotations?: Record<string, unknown>;
    [key: string]: unknown;
};
export type Health = {
    /**
     * `ok`
     */
    status: string;
    /**
     * the gateway's nonce, when it was launched with one
     */
    instance_nonce?: string;
};
export type GatewayInfo = {
    /**
     * its port inside the sandbox
     */
    port: number;
    /**
     * its process id inside the sandbox
     */
    pid: number;
    /**
     * its token file inside the sandbox (the token never leaves it)
     */
    token_file: string;
    /**
     * checked by `health`
     */
    instance_nonce: string;
    /**
     * removed by `stopGateway`
     */
    state_dir: string;
};
export type BinaryStatus = {
    /**
     * false when an identical binary was already there
     */
    uploaded: boolean;
    /**
     * lowercase hex
     */
    sha256: string;
    /**
     * its path inside the sandbox
     */
    path: string;
};
export type Hello = {
    /**
     * the frame format version
     */
    v: number;
    /**
     * the gateway binary's version
     */
    version: string;
    /**
     * the port of the gateway `attach` relays to
     */
    port: number;
    /**
     * the gateway's process id
     */
    pid: number;
    instance_nonce?: string | null;
    token_file?: string | null;
    /**
     * whether this `attach` launched the gateway
     */
    launched: boolean;
    /**
     * the longest line `attach` accepts
     */
    max_frame_bytes: number;
    /**
     * how often attach pings when idle (0: it does not)
     */
    heartbeat_ms?: number;
    /**
     * how long the gateway keeps a call whose channel ended, for
     * a new channel to resume it (0: it does not)
     */
    retention_ms?: number;
};
/**
 * The decoded bytes of a data block with inline (base64) data; `null` for a text block or a
 * data block behind a URL. Throws ProtocolError for invalid base64.
 *
 * @param {Block} block
 * @returns {Uint8Array | null}
 */
export declare function dataBytes(block: Block): Uint8Array | null;
/**
 * The progress of a progress chunk (`metadata.mcp_progress`), or `null` for any other chunk.
 *
 * @param {ToolChunk} chunk
 * @returns {Progress | null}
 */
export declare function progressOf(chunk: ToolChunk): Progress | null;
/**
 * The text of a chunk's text blocks, joined with newlines (`''` when it has none).
 *
 * @param {ToolChunk} chunk
 * @returns {string}
 */
export declare function textOf(chunk: ToolChunk): string;
/**
 * Parses a ToolChunk from JSON text as the gateway writes it, through the library's own wire
 * types (the path every chunk the binding returns takes): the result is the chunk as the library
 * reads it, in the wire's shape. Throws InvalidArgumentError for text that is not a ToolChunk,
 * ProtocolError for a data block with invalid base64.
 *
 * @param {string} json
 * @returns {ToolChunk}
 */
export declare function parseToolChunk(json: string): ToolChunk;
