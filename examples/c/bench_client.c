/* bench_client.c: a tool call through mcpgw_client against the same call through host_loop.
 *
 *   bench_client GATEWAY TESTSERVER [CALLS]
 *
 * The sandbox is this machine (the `local` backend). A client over exec_process()'s callbacks
 * and a host_loop each launch a gateway with the test MCP server and open a session (the
 * channel: `attach` with its stdio piped); then `echo` is called CALLS times (2000) through
 * each, in alternating rounds, one call in flight. Prints
 *   c client facade call p50 ms: X (host loop: Y; p90 X90 vs Y90)
 * where X is the median of the client's calls and Y of the loop's. */
#define _POSIX_C_SOURCE 200809L

#include <mcpgw.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example.h"
#include "exec_process.h"
#include "host_loop.h"

#define ROUNDS 10

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double percentile(double *ms, int n, int p) {
    qsort(ms, (size_t)n, sizeof *ms, by_value);
    return ms[(n - 1) * p / 100];
}

static bool client_ok(mcpgw_result rc, mcpgw_error *err, const char *what) {
    if (rc == MCPGW_RESULT_OK) return true;
    fprintf(stderr, "client %s: %s\n", what, err ? mcpgw_error_message(err) : "");
    mcpgw_error_free(err);
    return false;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s GATEWAY TESTSERVER [CALLS]\n", argv[0]);
        return 2;
    }
    int calls = argc > 3 ? atoi(argv[3]) : 2000;
    if (calls < ROUNDS) calls = ROUNDS;
    int per_round = calls / ROUNDS;
    calls = per_round * ROUNDS;
    char *gateway = host_loop_json_string(argv[1]);
    char *config = example_format("{\"backend\":{\"kind\":\"local\"},\"gateway_path\":%s}", gateway);
    char *spec = example_testserver_spec("test", argv[2]);
    double *facade = calloc((size_t)calls, sizeof *facade);
    double *loop_ms = calloc((size_t)calls, sizeof *loop_ms);
    mcpgw_client *client = NULL;
    mcpgw_error *err = NULL;
    host_loop *loop = NULL;
    int status = 1;
    const char *args = "{\"text\":\"bench\"}";
    char *op = example_format("{\"op\":\"call_tool\",\"mcp\":\"test\",\"tool\":\"echo\","
                              "\"arguments\":%s}",
                              args);
    if (!config || !spec || !facade || !loop_ms || !op) return 1;
    example_quiet = true;
    if (!client_ok(mcpgw_client_new(config, exec_process(), NULL, &client, &err), err, "new") ||
        !client_ok(mcpgw_client_start_gateway(client, &err), err, "start") ||
        !client_ok(mcpgw_client_add_mcp(client, spec, &err), err, "add") ||
        !client_ok(mcpgw_client_open_session(client, &err), err, "open_session"))
        goto out;
    loop = example_loop("%s", config);
    if (!loop || !example_ok(loop, NULL, "{\"op\":\"start_gateway\"}") ||
        !example_ok(loop, NULL, "{\"op\":\"add_mcp\",\"spec\":%s}", spec) ||
        !example_ok(loop, NULL, "{\"op\":\"open_session\"}"))
        goto out;
    /* Warm both up, then alternate rounds so that the machine's drift falls on both. */
    for (int round = -1, k = 0; round < ROUNDS; round++) {
        for (int i = 0; i < per_round; i++) {
            mcpgw_tool_chunk *chunk = NULL;
            double t0 = example_now();
            if (!client_ok(mcpgw_client_call_tool(client, "test", "echo", args, &chunk, &err),
                           err, "call"))
                goto out;
            double t1 = example_now();
            mcpgw_tool_chunk_free(chunk);
            host_loop_result r;
            double t2 = example_now();
            mcpgw_result rc = host_loop_run(loop, op, NULL, NULL, &r);
            double t3 = example_now();
            host_loop_result_free(&r);
            if (rc != MCPGW_RESULT_OK) goto out;
            if (round >= 0) {
                facade[k] = (t1 - t0) * 1e3;
                loop_ms[k++] = (t3 - t2) * 1e3;
            }
        }
    }
    double f90 = percentile(facade, calls, 90), l90 = percentile(loop_ms, calls, 90);
    printf("c client facade call p50 ms: %.3f (host loop: %.3f; p90 %.3f vs %.3f; %d calls "
           "each)\n",
           percentile(facade, calls, 50), percentile(loop_ms, calls, 50), f90, l90, calls);
    status = 0;
out:
    if (client && !client_ok(mcpgw_client_stop_gateway(client, &err), err, "stop")) status = 1;
    mcpgw_client_free(client);
    if (loop && !example_ok(loop, NULL, "{\"op\":\"stop_gateway\"}")) status = 1;
    host_loop_free(loop);
    free(gateway);
    free(config);
    free(spec);
    free(op);
    free(facade);
    free(loop_ms);
    return status;
}
