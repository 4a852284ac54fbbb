/* sansio.c: several operations in flight at once on one thread, and one cancelled.
 *
 *   sansio GATEWAY_BINARY TESTSERVER_BINARY
 *
 * libmcpgw runs nothing itself: its host driver (mcpgw_host) says what to run and host_loop
 * runs it, here without blocking on any one operation. Five operations are submitted at once
 * (three 1-second tool calls, a tool listing and a 30-second call), each with a callback; one
 * loop on this thread steps until the first four are done, with their commands running side by
 * side; then the 30-second call is cancelled: its command is killed (with everything it started)
 * and it ends CANCELLED. */
#define _POSIX_C_SOURCE 200809L

#include <mcpgw.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example.h"
#include "host_loop.h"

#define QUICK 4 /* the operations expected to finish by themselves */

typedef struct {
    const char *what;
    bool done;
    mcpgw_result rc;
    double at; /* when it finished */
} outcome;

static void on_done(void *userdata, const mcpgw_action *a) {
    outcome *o = userdata;
    if (mcpgw_action_get_kind(a) != MCPGW_ACTION_KIND_DONE) return;
    o->done = true;
    o->rc = mcpgw_action_result(a);
    o->at = example_now();
    size_t len = 0;
    const uint8_t *json = mcpgw_action_bytes(a, &len);
    printf("  %s: %s: %.*s\n", o->what, mcpgw_result_name(o->rc), (int)(len > 100 ? 100 : len),
           (const char *)json);
}

static bool all_done(const outcome *o, int n) {
    for (int i = 0; i < n; i++)
        if (!o[i].done) return false;
    return true;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s GATEWAY_BINARY TESTSERVER_BINARY\n", argv[0]);
        return 2;
    }
    char *spec = example_testserver_spec("test", argv[2]);
    host_loop *loop = spec ? example_local_loop(argv[1]) : NULL;
    int status = 1;
    if (!loop || !example_ok(loop, NULL, "{\"op\":\"start_gateway\"}")) goto out;
    if (!example_ok(loop, NULL, "{\"op\":\"add_mcp\",\"spec\":%s}", spec)) goto stop;

    outcome o[QUICK + 1] = {{"slow call 1", 0, 0, 0}, {"slow call 2", 0, 0, 0},
                            {"slow call 3", 0, 0, 0}, {"list_tools", 0, 0, 0},
                            {"30-second call", 0, 0, 0}};
    const char *ops[QUICK + 1] = {
        "{\"op\":\"call_tool\",\"mcp\":\"test\",\"tool\":\"slow\","
        "\"arguments\":{\"seconds\":1,\"steps\":2}}",
        NULL,
        NULL,
        "{\"op\":\"list_tools\",\"mcp\":\"test\"}",
        "{\"op\":\"call_tool\",\"mcp\":\"test\",\"tool\":\"slow\",\"arguments\":{\"seconds\":30}}",
    };
    ops[1] = ops[2] = ops[0];
    uint64_t ids[QUICK + 1];
    double t0 = example_now();
    for (int i = 0; i <= QUICK; i++) {
        mcpgw_error *err = NULL;
        if (host_loop_submit(loop, ops[i], on_done, &o[i], &ids[i], &err) != MCPGW_RESULT_OK) {
            fprintf(stderr, "submit: %s\n", mcpgw_error_message(err));
            mcpgw_error_free(err);
            goto stop;
        }
    }
    /* One command per operation, all running at once. */
    size_t most = host_loop_processes(loop);
    while (!all_done(o, QUICK)) {
        if (host_loop_step(loop) != 0) {
            perror("host_loop_step");
            goto stop;
        }
        if (host_loop_processes(loop) > most) most = host_loop_processes(loop);
    }
    double took = example_now() - t0;
    printf("%d operations in flight at once on one thread (%zu commands at most side by side) "
           "took %.2f s\n",
           QUICK, most, took);
    int ok = most >= QUICK + 1;
    for (int i = 0; i < QUICK; i++)
        if (o[i].rc != MCPGW_RESULT_OK) ok = 0;
    if (o[QUICK].done) {
        fprintf(stderr, "the 30-second call ended early\n");
        ok = 0;
    }

    /* Cancelling: its command is killed, and it ends at once. */
    double cancelled_at = example_now();
    if (!host_loop_cancel(loop, ids[QUICK])) ok = 0;
    while (!o[QUICK].done)
        if (host_loop_step(loop) != 0) goto stop;
    printf("the 30-second call ended %s %.3f s after its cancel\n",
           mcpgw_result_name(o[QUICK].rc), o[QUICK].at - cancelled_at);
    if (o[QUICK].rc != MCPGW_RESULT_CANCELLED) ok = 0;
    /* Its killed command's exit is reaped too: nothing of it is left running. */
    if (host_loop_settle(loop) != 0) ok = 0;
    if (ok) status = 0;
stop:
    if (!example_ok(loop, NULL, "{\"op\":\"stop_gateway\"}")) status = 1;
out:
    host_loop_free(loop);
    free(spec);
    return status;
}
