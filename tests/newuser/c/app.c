/* A new user's first program against an installed libmcpgw: the "sandbox" is this machine
 * (`sh -c`, through proc.c from share/mcpgw/), the gateway the installed one.
 *
 *   app GATEWAY TESTSERVER
 *
 * Launches the gateway, registers the MCP server, calls its tool `echo`, checks the answer,
 * stops the gateway. Prints `answer: ...` and exits 0 when all went as expected. */
#define _POSIX_C_SOURCE 200809L

#include <mcpgw.h>
#include <proc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Runs the op `*op` (prepared with result `prepared`) through the exec callback, then frees
 * it; on success `*chunk_out` (may be NULL) receives a tool call's chunk. */
static int run(const mcpgw_client *client, mcpgw_result prepared, mcpgw_op **op,
               mcpgw_tool_chunk **chunk_out) {
    mcpgw_result rc = prepared == MCPGW_RESULT_OK ? mcpgw_client_run(client, *op) : prepared;
    if (rc == MCPGW_RESULT_OK && chunk_out) rc = mcpgw_op_tool_chunk(*op, chunk_out, NULL);
    if (rc != MCPGW_RESULT_OK)
        fprintf(stderr, "%s failed (%s): %s\n", *op ? mcpgw_op_name(*op) : "prepare",
                mcpgw_result_name(rc),
                *op ? mcpgw_error_message(mcpgw_op_error(*op)) : mcpgw_result_message(rc));
    mcpgw_op_free(*op);
    *op = NULL;
    return rc == MCPGW_RESULT_OK ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s GATEWAY TESTSERVER\n", argv[0]);
        return 2;
    }
    printf("libmcpgw %s (ABI %u)\n", mcpgw_version(), mcpgw_abi_version());
    mcpgw_client_config *cfg = NULL;
    mcpgw_client *client = NULL;
    mcpgw_error *err = NULL;
    if (mcpgw_client_config_new(&cfg) != MCPGW_RESULT_OK ||
        mcpgw_client_config_set_gateway_path(cfg, argv[1]) != MCPGW_RESULT_OK ||
        mcpgw_client_config_set_exec_stdin(cfg, true) != MCPGW_RESULT_OK ||
        mcpgw_client_new(cfg, proc_exec_local, NULL, NULL, &client, &err) != MCPGW_RESULT_OK) {
        fprintf(stderr, "client: %s\n", err ? mcpgw_error_message(err) : "config failed");
        mcpgw_error_free(err);
        mcpgw_client_config_free(cfg);
        return 1;
    }
    mcpgw_client_config_free(cfg);

    int status = 1;
    mcpgw_op *op = NULL;
    mcpgw_tool_chunk *chunk = NULL;
    char spec[4096];
    snprintf(spec, sizeof spec,
             "{\"name\":\"test\",\"mcp_config\":{\"type\":\"stdio_mcp\",\"command\":\"%s\","
             "\"args\":[\"stdio\"]}}",
             argv[2]);
    if (run(client, mcpgw_client_prepare_start_gateway(client, NULL, &op), &op, NULL)) goto out;
    if (run(client, mcpgw_client_prepare_add_mcp(client, NULL, spec, &op), &op, NULL) ||
        run(client,
            mcpgw_client_prepare_call_tool(client, NULL, "test", "echo",
                                           "{\"text\":\"hello from a new user\"}", &op),
            &op, &chunk))
        goto stop;
    const mcpgw_block *block = NULL;
    const char *text = NULL;
    size_t len = 0;
    if (mcpgw_tool_chunk_block(chunk, 0, &block) == MCPGW_RESULT_OK &&
        mcpgw_block_text(block, &text, &len) == MCPGW_RESULT_OK &&
        len == strlen("hello from a new user") && memcmp(text, "hello from a new user", len) == 0) {
        printf("answer: %.*s\n", (int)len, text);
        status = 0;
    } else {
        fprintf(stderr, "unexpected answer\n");
    }
    mcpgw_tool_chunk_free(chunk);
stop:
    if (run(client, mcpgw_client_prepare_stop_gateway(client, NULL, &op), &op, NULL)) status = 1;
out:
    mcpgw_client_free(client);
    return status;
}
