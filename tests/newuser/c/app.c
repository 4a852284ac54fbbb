/* A new user's first program against an installed libmcpgw: the "sandbox" is this machine
 * (the host driver's `local` backend), run by host_loop.c from share/mcpgw/; the gateway is the
 * installed one.
 *
 *   app GATEWAY TESTSERVER
 *
 * Launches the gateway, registers the MCP server, calls its tool `echo`, checks the answer,
 * stops the gateway. Prints `answer: ...` and exits 0 when all went as expected. */
#define _POSIX_C_SOURCE 200809L

#include <host_loop.h>
#include <mcpgw.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Runs one operation (JSON) to its end; prints its failure. On success `chunk_out` (may be
 * NULL) receives a tool call's result. */
static int run(host_loop *loop, const char *op, mcpgw_tool_chunk **chunk_out) {
    host_loop_result r;
    mcpgw_result rc = host_loop_run(loop, op, NULL, NULL, &r);
    if (rc == MCPGW_RESULT_OK && chunk_out)
        rc = mcpgw_tool_chunk_from_json(r.json, chunk_out, NULL);
    if (rc != MCPGW_RESULT_OK)
        fprintf(stderr, "%s failed (%s): %s\n", op, mcpgw_result_name(rc),
                r.message ? r.message : mcpgw_result_message(rc));
    host_loop_result_free(&r);
    return rc == MCPGW_RESULT_OK ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s GATEWAY TESTSERVER\n", argv[0]);
        return 2;
    }
    printf("libmcpgw %s (ABI %u)\n", mcpgw_version(), mcpgw_abi_version());
    /* Paths go into JSON as JSON strings. */
    char *gateway = host_loop_json_string(argv[1]), *server = host_loop_json_string(argv[2]);
    char config[4096], add[4096];
    snprintf(config, sizeof config, "{\"backend\":{\"kind\":\"local\"},\"gateway_path\":%s}",
             gateway);
    snprintf(add, sizeof add,
             "{\"op\":\"add_mcp\",\"spec\":{\"name\":\"test\",\"mcp_config\":"
             "{\"type\":\"stdio_mcp\",\"command\":%s,\"args\":[\"stdio\"]}}}",
             server);
    free(gateway);
    free(server);
    host_loop *loop = NULL;
    mcpgw_error *err = NULL;
    if (host_loop_new(config, &loop, &err) != MCPGW_RESULT_OK) {
        fprintf(stderr, "host_loop_new: %s\n", mcpgw_error_message(err));
        mcpgw_error_free(err);
        return 1;
    }

    int status = 1;
    mcpgw_tool_chunk *chunk = NULL;
    if (run(loop, "{\"op\":\"start_gateway\"}", NULL)) goto out;
    if (run(loop, add, NULL) ||
        run(loop,
            "{\"op\":\"call_tool\",\"mcp\":\"test\",\"tool\":\"echo\","
            "\"arguments\":{\"text\":\"hello from a new user\"}}",
            &chunk))
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
    if (run(loop, "{\"op\":\"stop_gateway\"}", NULL)) status = 1;
out:
    host_loop_free(loop);
    return status;
}
