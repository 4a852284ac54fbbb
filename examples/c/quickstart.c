/* quickstart.c: the whole cycle against a local "sandbox" that is just this machine (the
 * driver's `local` backend: each command runs as `sh -c` here).
 *
 *   quickstart GATEWAY_BINARY TESTSERVER_BINARY
 *
 * Launches the gateway, registers an MCP server (stdio) in a scope of its own, lists its tools,
 * calls two of them, shows an error, stops the gateway. Exits non-zero when anything unexpected
 * happens. */
#define _POSIX_C_SOURCE 200809L

#include <mcpgw.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example.h"
#include "host_loop.h"

/* The scope and time limit of this program's operations. */
#define SCOPE "\"agent_id\":\"quickstart\",\"session_id\":\"session-1\",\"timeout_ms\":20000"

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
    char *gateway = host_loop_json_string(argv[1]);
    char *spec = example_testserver_spec("test", argv[2]);
    host_loop *loop = gateway && spec ? example_loop("{\"backend\":{\"kind\":\"local\"},"
                                                     "\"gateway_path\":%s,\"timeout_ms\":30000}",
                                                     gateway)
                                      : NULL;
    int status = 1;
    host_loop_result r = {0};
    if (!loop || !example_ok(loop, NULL, "{\"op\":\"start_gateway\"}"))
        goto out;
    if (!example_ok(loop, NULL, "{\"op\":\"add_mcp\",\"spec\":%s," SCOPE "}",
                    spec) ||
        !example_ok(loop, NULL,
                    "{\"op\":\"list_tools\",\"mcp\":\"test\"," SCOPE "}"))
        goto stop;

    /* A tool call's result is a ToolChunk; libmcpgw reads it into blocks. */
    const char *text = "hello from C: it's $(not) `run` \\\"quoted\\\"";
    if (!example_ok(loop, &r,
                    "{\"op\":\"call_tool\",\"mcp\":\"test\",\"tool\":\"echo\","
                    "\"arguments\":{\"text\":\"%s\"}," SCOPE "}",
                    text))
        goto stop;
    char *echoed = example_print_chunk(r.json);
    int same = echoed && strcmp(echoed, "hello from C: it's $(not) `run` \"quoted\"") == 0;
    free(echoed);
    host_loop_result_free(&r);
    if (!same) {
        fprintf(stderr, "the echo differs\n");
        goto stop;
    }
    if (!example_ok(loop, &r,
                    "{\"op\":\"call_tool\",\"mcp\":\"test\",\"tool\":\"media\"," SCOPE "}"))
        goto stop;
    free(example_print_chunk(r.json));
    host_loop_result_free(&r);

    /* A failure has its code, a message, and the gateway's HTTP status and detail (JSON). */
    printf("an unknown MCP, expecting NOT_FOUND:\n");
    if (example_run(loop, MCPGW_RESULT_NOT_FOUND, &r,
                    "{\"op\":\"call_tool\",\"mcp\":\"nope\",\"tool\":\"echo\"," SCOPE "}") !=
            MCPGW_RESULT_NOT_FOUND ||
        !strstr(r.json, "\"http_status\":404")) {
        fprintf(stderr, "expected NOT_FOUND with HTTP 404: %s\n", r.json ? r.json : "");
        goto stop;
    }
    printf("  its error: %s\n", r.json);
    host_loop_result_free(&r);
    if (!example_ok(loop, NULL,
                    "{\"op\":\"remove_mcp\",\"name\":\"test\"," SCOPE "}"))
        goto stop;
    status = 0;
stop:
    if (!example_ok(loop, NULL, "{\"op\":\"stop_gateway\"}")) status = 1;
out:
    host_loop_result_free(&r);
    host_loop_free(loop);
    free(gateway);
    free(spec);
    return status;
}
