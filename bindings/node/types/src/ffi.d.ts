/** The ABI version of the header (`MCPGW_ABI_VERSION`); the library must have the same. */
export declare const ABI_VERSION = 3;
/** The version of the header (`MCPGW_VERSION_*`). */
export declare const HEADER_VERSION = "0.3.0";
/** `MCPGW_RESULT_OK`: success. */
export declare const RESULT_OK = 7000;
/** `mcpgw_action_kind` values. */
export declare const ACTION_KIND: Readonly<{
    RUN: 1;
    OPEN: 2;
    WRITE: 3;
    CLOSE_INPUT: 4;
    KILL: 5;
    PROGRESS: 6;
    DONE: 7;
    CONNECTION_OPENED: 8;
    CONNECTION_MESSAGE: 9;
    CONNECTION_CLOSED: 10;
    NOTICE: 11;
    AUDIT: 12;
}>;
/** `mcpgw_stdin_kind` values. */
export declare const STDIN_KIND: Readonly<{
    NULL: 0;
    BYTES: 1;
    HOLD: 2;
}>;
/** Opaque struct types the prototypes use. */
export declare const OPAQUE_TYPES: string[];
/** Enum types the prototypes use (each a `uint32_t` in the ABI). */
export declare const ENUM_TYPES: string[];
/** The koffi prototype of each function, by name. */
export declare const PROTOTYPES: Readonly<{
    mcpgw_abi_version: "uint32_t mcpgw_abi_version(void)";
    mcpgw_action_argc: "size_t mcpgw_action_argc(const mcpgw_action *action)";
    mcpgw_action_argv: "const char *mcpgw_action_argv(const mcpgw_action *action, size_t i)";
    mcpgw_action_bytes: "const uint8_t *mcpgw_action_bytes(const mcpgw_action *action, _Out_ size_t *len_out)";
    mcpgw_action_cwd: "const char *mcpgw_action_cwd(const mcpgw_action *action)";
    mcpgw_action_free: "void mcpgw_action_free(mcpgw_action *action)";
    mcpgw_action_get_kind: "mcpgw_action_kind mcpgw_action_get_kind(const mcpgw_action *action)";
    mcpgw_action_id: "uint64_t mcpgw_action_id(const mcpgw_action *action)";
    mcpgw_action_proc: "uint64_t mcpgw_action_proc(const mcpgw_action *action)";
    mcpgw_action_result: "mcpgw_result mcpgw_action_result(const mcpgw_action *action)";
    mcpgw_action_shell: "const char *mcpgw_action_shell(const mcpgw_action *action)";
    mcpgw_action_status: "uint16_t mcpgw_action_status(const mcpgw_action *action)";
    mcpgw_action_stdin_kind: "mcpgw_stdin_kind mcpgw_action_stdin_kind(const mcpgw_action *action)";
    mcpgw_action_text: "const char *mcpgw_action_text(const mcpgw_action *action)";
    mcpgw_action_timeout_ms: "uint32_t mcpgw_action_timeout_ms(const mcpgw_action *action)";
    mcpgw_error_code: "mcpgw_result mcpgw_error_code(const mcpgw_error *error)";
    mcpgw_error_detail: "const char *mcpgw_error_detail(const mcpgw_error *error)";
    mcpgw_error_free: "void mcpgw_error_free(mcpgw_error *error)";
    mcpgw_error_http_status: "uint16_t mcpgw_error_http_status(const mcpgw_error *error)";
    mcpgw_error_message: "const char *mcpgw_error_message(const mcpgw_error *error)";
    mcpgw_host_cancel: "bool mcpgw_host_cancel(mcpgw_host *host, uint64_t id)";
    mcpgw_host_close_connection: "bool mcpgw_host_close_connection(mcpgw_host *host, uint64_t conn)";
    mcpgw_host_free: "void mcpgw_host_free(mcpgw_host *host)";
    mcpgw_host_new: "mcpgw_result mcpgw_host_new(const char *config_json, _Out_ mcpgw_host **host_out, _Out_ mcpgw_error **error_out)";
    mcpgw_host_next_action: "mcpgw_action *mcpgw_host_next_action(mcpgw_host *host)";
    mcpgw_host_on_data: "void mcpgw_host_on_data(mcpgw_host *host, uint64_t proc, const uint8_t *data, size_t len)";
    mcpgw_host_on_eof: "void mcpgw_host_on_eof(mcpgw_host *host, uint64_t proc)";
    mcpgw_host_on_exec_failed: "void mcpgw_host_on_exec_failed(mcpgw_host *host, uint64_t proc, const char *reason)";
    mcpgw_host_on_exit: "void mcpgw_host_on_exit(mcpgw_host *host, uint64_t proc, int32_t exit_code, const uint8_t *out, size_t out_len, const uint8_t *err, size_t err_len)";
    mcpgw_host_on_stderr: "void mcpgw_host_on_stderr(mcpgw_host *host, uint64_t proc, const uint8_t *data, size_t len)";
    mcpgw_host_on_timeout: "void mcpgw_host_on_timeout(mcpgw_host *host)";
    mcpgw_host_open_connection: "mcpgw_result mcpgw_host_open_connection(mcpgw_host *host, const char *mcp, const char *agent_id, const char *session_id, _Out_ uint64_t *id_out, _Out_ mcpgw_error **error_out)";
    mcpgw_host_send: "mcpgw_result mcpgw_host_send(mcpgw_host *host, uint64_t conn, const uint8_t *msg, size_t len, _Out_ mcpgw_error **error_out)";
    mcpgw_host_state_json: "void *mcpgw_host_state_json(const mcpgw_host *host)";
    mcpgw_host_submit: "mcpgw_result mcpgw_host_submit(mcpgw_host *host, const char *op_json, _Out_ uint64_t *id_out, _Out_ mcpgw_error **error_out)";
    mcpgw_host_timeout_ms: "int64_t mcpgw_host_timeout_ms(const mcpgw_host *host)";
    mcpgw_result_codes: "void mcpgw_result_codes(_Out_ const uint32_t **codes_out, _Out_ size_t *len_out)";
    mcpgw_result_message: "const char *mcpgw_result_message(uint32_t result)";
    mcpgw_result_name: "const char *mcpgw_result_name(uint32_t result)";
    mcpgw_string_free: "void mcpgw_string_free(void *s)";
    mcpgw_tool_chunk_free: "void mcpgw_tool_chunk_free(mcpgw_tool_chunk *chunk)";
    mcpgw_tool_chunk_from_json: "mcpgw_result mcpgw_tool_chunk_from_json(const char *json, _Out_ mcpgw_tool_chunk **chunk_out, _Out_ mcpgw_error **error_out)";
    mcpgw_tool_chunk_to_json: "mcpgw_result mcpgw_tool_chunk_to_json(const mcpgw_tool_chunk *chunk, _Out_ void **json_out)";
    mcpgw_version: "const char *mcpgw_version(void)";
}>;
