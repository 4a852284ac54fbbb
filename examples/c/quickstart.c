/* quickstart.c: the whole cycle against a local "sandbox" that is just `sh -c` on this machine.
 *
 *   quickstart GATEWAY_BINARY TESTSERVER_BINARY
 *
 * Launches the gateway, registers an MCP server (stdio), lists its tools, calls two of them,
 * shows an error, stops the gateway. Exits non-zero when anything unexpected happens. */
#define _POSIX_C_SOURCE 200809L

#include <mcpgw.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proc.h"

/* The blocking form of an operation: runs the op `*op` (just prepared, with result `prepared`)
 * through the client's exec callback, then frees it. On success `*json_out` and `*chunk_out`
 * (each may be NULL) receive its result; on failure its error is printed. */
static mcpgw_result run(const mcpgw_client *client, mcpgw_result prepared, mcpgw_op **op,
                        char **json_out, mcpgw_tool_chunk **chunk_out) {
    if (prepared != MCPGW_RESULT_OK) {
        fprintf(stderr, "cannot prepare the operation: %s\n", mcpgw_result_message(prepared));
        return prepared;
    }
    mcpgw_result rc = mcpgw_client_run(client, *op);
    if (rc == MCPGW_RESULT_OK && json_out) rc = mcpgw_op_result_json(*op, json_out);
    if (rc == MCPGW_RESULT_OK && chunk_out) rc = mcpgw_op_tool_chunk(*op, chunk_out, NULL);
    if (rc != MCPGW_RESULT_OK) {
        const mcpgw_error *err = mcpgw_op_error(*op);
        printf("%s: %s: %s (HTTP %u, detail: %s)\n", mcpgw_op_name(*op), mcpgw_result_name(rc),
               err ? mcpgw_error_message(err) : mcpgw_result_message(rc),
               (unsigned)mcpgw_error_http_status(err),
               mcpgw_error_detail(err) ? mcpgw_error_detail(err) : "none");
    }
    mcpgw_op_free(*op);
    *op = NULL;
    return rc;
}

static void print_chunk(const mcpgw_tool_chunk *chunk) {
    size_t n = mcpgw_tool_chunk_block_count(chunk);
    printf("chunk %s: state %d, last %d, %zu block(s), metadata %s\n", mcpgw_tool_chunk_id(chunk),
           (int)mcpgw_tool_chunk_state(chunk), (int)mcpgw_tool_chunk_is_last(chunk), n,
           mcpgw_tool_chunk_metadata_json(chunk));
    for (size_t i = 0; i < n; i++) {
        const mcpgw_block *b = NULL;
        if (mcpgw_tool_chunk_block(chunk, i, &b) != MCPGW_RESULT_OK) continue;
        const char *text;
        const uint8_t *data;
        size_t len;
        switch (mcpgw_block_get_type(b)) {
        case MCPGW_BLOCK_TYPE_TEXT:
            mcpgw_block_text(b, &text, &len);
            printf("  text (%zu bytes): %.*s\n", len, (int)(len > 200 ? 200 : len), text);
            break;
        case MCPGW_BLOCK_TYPE_DATA:
            mcpgw_block_data(b, &data, &len);
            printf("  data: %s, %zu bytes\n", mcpgw_block_media_type(b), len);
            break;
        case MCPGW_BLOCK_TYPE_URL:
            printf("  url: %s (%s) %s\n", mcpgw_block_url(b), mcpgw_block_media_type(b),
                   mcpgw_block_name(b) ? mcpgw_block_name(b) : "");
            break;
        }
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s GATEWAY_BINARY TESTSERVER_BINARY\n", argv[0]);
        return 2;
    }
    if (mcpgw_abi_version() != MCPGW_ABI_VERSION) {
        fprintf(stderr, "libmcpgw ABI %u, built against %u\n", mcpgw_abi_version(),
                (unsigned)MCPGW_ABI_VERSION);
        return 1;
    }
    printf("libmcpgw %s\n", mcpgw_version());

    mcpgw_error *err = NULL;
    mcpgw_result rc;
    mcpgw_client_config *cfg = NULL;
    mcpgw_client *client = NULL;
    if ((rc = mcpgw_client_config_new(&cfg)) != MCPGW_RESULT_OK ||
        (rc = mcpgw_client_config_set_gateway_path(cfg, argv[1])) != MCPGW_RESULT_OK ||
        (rc = mcpgw_client_config_set_timeout_ms(cfg, 30000)) != MCPGW_RESULT_OK ||
        /* proc_exec_local passes a command's stdin: large bodies then take one command. */
        (rc = mcpgw_client_config_set_exec_stdin(cfg, true)) != MCPGW_RESULT_OK) {
        mcpgw_client_config_free(cfg);
        fprintf(stderr, "config: %s\n", mcpgw_result_message(rc));
        return 1;
    }
    rc = mcpgw_client_new(cfg, proc_exec_local, NULL, NULL, &client, &err);
    mcpgw_client_config_free(cfg);
    if (rc != MCPGW_RESULT_OK) {
        fprintf(stderr, "mcpgw_client_new: %s\n", mcpgw_error_message(err));
        mcpgw_error_free(err);
        return 1;
    }

    int status = 1;
    char *json = NULL;
    mcpgw_tool_chunk *chunk = NULL;
    mcpgw_op *op = NULL;
    mcpgw_call_options *opts = NULL;
    if (run(client, mcpgw_client_prepare_start_gateway(client, NULL, &op), &op, &json, NULL) !=
        MCPGW_RESULT_OK)
        goto out;
    printf("gateway started: %s\n", json);
    mcpgw_string_free(json);
    json = NULL;

    /* An MCP server in its own scope; the JSON is AgentScope's MCPClient dump. */
    if (mcpgw_call_options_new(&opts) != MCPGW_RESULT_OK ||
        mcpgw_call_options_set_agent_id(opts, "quickstart") != MCPGW_RESULT_OK ||
        mcpgw_call_options_set_session_id(opts, "session-1") != MCPGW_RESULT_OK ||
        mcpgw_call_options_set_timeout_ms(opts, 20000) != MCPGW_RESULT_OK)
        goto stop;
    size_t spec_len = strlen(argv[2]) + 200;
    char *spec = malloc(spec_len);
    if (!spec) goto stop;
    snprintf(spec, spec_len,
             "{\"name\":\"test\",\"mcp_config\":{\"type\":\"stdio_mcp\",\"command\":\"%s\","
             "\"args\":[\"stdio\"]}}",
             argv[2]);
    rc = run(client, mcpgw_client_prepare_add_mcp(client, opts, spec, &op), &op, NULL, NULL);
    free(spec);
    if (rc != MCPGW_RESULT_OK) goto stop;
    if (run(client, mcpgw_client_prepare_list_tools(client, opts, "test", &op), &op, &json, NULL) !=
        MCPGW_RESULT_OK)
        goto stop;
    printf("tools: %.160s...\n", json);
    mcpgw_string_free(json);
    json = NULL;

    rc = run(client,
             mcpgw_client_prepare_call_tool(client, opts, "test", "echo",
                                            "{\"text\":\"hello from C: it's $(not) `run`\"}", &op),
             &op, NULL, &chunk);
    if (rc != MCPGW_RESULT_OK) goto stop;
    print_chunk(chunk);
    mcpgw_tool_chunk_free(chunk);
    chunk = NULL;

    rc = run(client, mcpgw_client_prepare_call_tool(client, opts, "test", "media", "{}", &op), &op,
             NULL, &chunk);
    if (rc != MCPGW_RESULT_OK) goto stop;
    print_chunk(chunk);
    mcpgw_tool_chunk_free(chunk);
    chunk = NULL;

    /* Failures have their own code, the gateway's HTTP status and detail, and a message. */
    printf("an unknown MCP, expecting NOT_FOUND:\n");
    rc = run(client, mcpgw_client_prepare_call_tool(client, opts, "nope", "echo", "{}", &op), &op,
             NULL, &chunk);
    if (rc != MCPGW_RESULT_NOT_FOUND || chunk != NULL) {
        fprintf(stderr, "expected NOT_FOUND, got %s\n", mcpgw_result_name(rc));
        goto stop;
    }

    if (run(client, mcpgw_client_prepare_remove_mcp(client, opts, "test", &op), &op, NULL, NULL) !=
        MCPGW_RESULT_OK)
        goto stop;
    status = 0;
stop:
    if (run(client, mcpgw_client_prepare_stop_gateway(client, NULL, &op), &op, NULL, NULL) !=
        MCPGW_RESULT_OK)
        status = 1;
    else
        printf("gateway stopped\n");
out:
    mcpgw_call_options_free(opts);
    mcpgw_client_free(client);
    return status;
}
