/* quickstart.c: the whole cycle through mcpgw_client, on one screen. The sandbox is this machine
 * (the `local` backend: each command runs as `sh -c` here); exec_process() runs the commands.
 *
 *   quickstart GATEWAY_BINARY TESTSERVER_BINARY
 *
 * Launches the gateway, registers the test MCP server, calls its tool `echo`, shows an error,
 * stops the gateway. Exits non-zero when anything unexpected happens. */
#define _POSIX_C_SOURCE 200809L

#include <mcpgw.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example.h"
#include "exec_process.h"

/* Prints a failure and frees it; false. */
static bool failed(const char *what, mcpgw_error *err) {
    fprintf(stderr, "%s: %s: %s\n", what, mcpgw_result_name(mcpgw_error_code(err)),
            mcpgw_error_message(err));
    mcpgw_error_free(err);
    return false;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s GATEWAY_BINARY TESTSERVER_BINARY\n", argv[0]);
        return 2;
    }
    char *gateway = host_loop_json_string(argv[1]);
    char *config = example_format("{\"backend\":{\"kind\":\"local\"},\"gateway_path\":%s}", gateway);
    char *spec = example_testserver_spec("test", argv[2]);
    mcpgw_client *client = NULL;
    mcpgw_tool_chunk *chunk = NULL;
    mcpgw_error *err = NULL;
    bool ok = config && spec &&
              (mcpgw_client_new(config, exec_process(), NULL, &client, &err) == MCPGW_RESULT_OK ||
               failed("new", err)) &&
              (mcpgw_client_start_gateway(client, &err) == MCPGW_RESULT_OK || failed("start", err));
    if (ok) {
        ok = (mcpgw_client_add_mcp(client, spec, &err) == MCPGW_RESULT_OK || failed("add", err)) &&
             (mcpgw_client_call_tool(client, "test", "echo", "{\"text\":\"hello from C\"}", &chunk,
                                     &err) == MCPGW_RESULT_OK ||
              failed("call", err));
        if (ok) {
            const mcpgw_block *block = NULL;
            const char *text = "";
            size_t len = 0;
            ok = mcpgw_tool_chunk_block(chunk, 0, &block) == MCPGW_RESULT_OK &&
                 mcpgw_block_text(block, &text, &len) == MCPGW_RESULT_OK;
            printf("echo answered: %.*s\n", (int)len, text);
            ok = ok && len == 12 && memcmp(text, "hello from C", 12) == 0;
        }
        /* A failure has its code, a message, and the gateway's HTTP status. */
        mcpgw_tool_chunk *none = NULL;
        if (mcpgw_client_call_tool(client, "nope", "echo", NULL, &none, &err) ==
            MCPGW_RESULT_NOT_FOUND) {
            printf("an unknown MCP: %s (HTTP %u): %s\n", mcpgw_result_name(mcpgw_error_code(err)),
                   mcpgw_error_http_status(err), mcpgw_error_message(err));
            ok = ok && mcpgw_error_http_status(err) == 404;
            mcpgw_error_free(err);
        } else {
            mcpgw_tool_chunk_free(none);
            ok = false;
        }
        if (mcpgw_client_stop_gateway(client, &err) != MCPGW_RESULT_OK) ok = failed("stop", err);
    }
    mcpgw_tool_chunk_free(chunk);
    mcpgw_client_free(client);
    free(gateway);
    free(config);
    free(spec);
    return ok ? 0 : 1;
}
