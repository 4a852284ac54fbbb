/* docker_resume.c: a call that outlives its session channel.
 *
 *   docker_resume docker|podman CONTAINER [CLI_OPTION...]
 *
 * Over a session into CONTAINER (the image's gateway), a 3-second call streams 6 progress
 * chunks; after the second, the channel's `docker exec -i` client is killed on the host (the
 * container and the gateway go on). The driver opens the channel again and resumes the call by
 * its id: the caller sees it finish, with every progress chunk exactly once. That needs a
 * gateway that keeps calls whose channel ended (its hello announces `retention_ms` > 0);
 * against one that keeps none this prints SKIPPED and the reason, and exits 0. */
#define _POSIX_C_SOURCE 200809L

#include <mcpgw.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "example.h"
#include "host_loop.h"

#define STEPS 6
#define KILL_AFTER 2

typedef struct {
    const char *container;
    int seen[STEPS + 1]; /* how many times each progress value came */
    int chunks;
    bool killed, done;
    host_loop_result result;
} resumed_call;

/* Kills this process's child that runs the channel: `docker exec -i CONTAINER ... attach`. */
static bool kill_channel(const char *container) {
    int pid = 0;
    if (example_processes(container, "attach", (int)getpid(), &pid) != 1) return false;
    return kill(pid, SIGKILL) == 0;
}

static void on_call(void *userdata, const mcpgw_action *a) {
    resumed_call *c = userdata;
    if (mcpgw_action_get_kind(a) == MCPGW_ACTION_KIND_DONE) {
        host_loop_result_set(&c->result, a);
        c->done = true;
        return;
    }
    size_t len = 0;
    const char *chunk = (const char *)mcpgw_action_bytes(a, &len);
    const char *at = chunk ? strstr(chunk, "\"mcp_progress\":{\"progress\":") : NULL;
    int step = at ? atoi(at + strlen("\"mcp_progress\":{\"progress\":")) : 0;
    if (step >= 1 && step <= STEPS) c->seen[step]++;
    printf("  progress %d%s\n", step, c->seen[step] > 1 ? " AGAIN" : "");
    if (++c->chunks == KILL_AFTER) {
        c->killed = kill_channel(c->container);
        printf("  the channel's client %s\n", c->killed ? "killed" : "NOT FOUND");
    }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s docker|podman CONTAINER [CLI_OPTION...]\n", argv[0]);
        return 2;
    }
    host_loop *loop = example_test_image(argv[1], argv[2], argv + 3, argc - 3);
    int status = 1;
    host_loop_result hello = {0};
    resumed_call call = {argv[2], {0}, 0, false, false, {0}};
    if (!loop || !example_ok(loop, &hello, "{\"op\":\"open_session\"}")) goto out;
    if (strstr(hello.json, "\"retention_ms\":0") || !strstr(hello.json, "\"retention_ms\":")) {
        printf("SKIPPED: a call resumed on a new channel: this gateway keeps no call whose "
               "channel ended (its hello: retention_ms 0)\n");
        status = 0;
        goto stop;
    }
    mcpgw_error *err = NULL;
    char op[256];
    snprintf(op, sizeof op,
             "{\"op\":\"call_tool\",\"mcp\":\"test\",\"tool\":\"slow\","
             "\"arguments\":{\"seconds\":3,\"steps\":%d},\"stream\":true}",
             STEPS);
    if (host_loop_submit(loop, op, on_call, &call, NULL, &err) != MCPGW_RESULT_OK) {
        fprintf(stderr, "submit: %s\n", mcpgw_error_message(err));
        mcpgw_error_free(err);
        goto stop;
    }
    while (!call.done)
        if (host_loop_step(loop) != 0) goto stop;
    bool once_each = true;
    for (int i = 1; i <= STEPS; i++) once_each = once_each && call.seen[i] == 1;
    bool right = call.killed && call.result.code == MCPGW_RESULT_OK && once_each;
    printf("%s: the call %s after its channel was killed, progress %s: %s\n", argv[1],
           call.result.code == MCPGW_RESULT_OK ? "finished" : mcpgw_result_name(call.result.code),
           once_each ? "once each" : "NOT once each", right ? "right" : "WRONG");
    if (!right && call.result.message) fprintf(stderr, "  %s\n", call.result.message);
    if (right) status = 0;
stop:
    if (!example_ok(loop, NULL, "{\"op\":\"close_session\"}") ||
        !example_ok(loop, NULL, "{\"op\":\"stop_gateway\"}"))
        status = 1;
out:
    host_loop_result_free(&hello);
    host_loop_result_free(&call.result);
    host_loop_free(loop);
    return status;
}
