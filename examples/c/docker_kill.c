/* docker_kill.c: a container killed during a tool call is the sandbox gone, never the
 * command's failure.
 *
 *   docker_kill docker|podman CONTAINER oneshot|session [CLI_OPTION...]
 *
 * Launches the image's gateway in CONTAINER, registers the test server and starts a 60-second
 * call: one-shot (`docker exec -i ... sh -c ...`), or over a session channel. Once the call runs
 * in the gateway (one-shot: the gateway counts it; over a session: its first progress chunk
 * came), `docker kill CONTAINER` runs while the loop goes on stepping, so the driver hears of
 * the exec's end while the daemon is still killing the container. Expected, by the driver's
 * rules: the call in flight fails with EXEC_FAILED whose backend verdict is "gone" (one-shot)
 * or SESSION_LOST (over a session); a later call fails with EXEC_FAILED carrying the backend's
 * verdict. Prints one line saying what happened; exits 0 when it was so, 1 otherwise. The
 * container is left killed. */
#define _POSIX_C_SOURCE 200809L

#include <mcpgw.h>

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "example.h"
#include "host_loop.h"

extern char **environ;

typedef struct {
    bool done;
    int chunks;
    host_loop_result result;
} call_state;

static void on_call(void *userdata, const mcpgw_action *a) {
    call_state *c = userdata;
    if (mcpgw_action_get_kind(a) == MCPGW_ACTION_KIND_PROGRESS) {
        c->chunks++;
        return;
    }
    host_loop_result_set(&c->result, a);
    c->done = true;
}

/* Whether the gateway counts a call of MCP `test` (its status in list_mcps). */
static bool call_counted(host_loop *loop) {
    host_loop_result r;
    bool counted = host_loop_run(loop, "{\"op\":\"list_mcps\"}", NULL, NULL, &r) ==
                       MCPGW_RESULT_OK &&
                   strstr(r.json, "\"calls\":") && !strstr(r.json, "\"calls\":0");
    host_loop_result_free(&r);
    return counted;
}

/* The backend's verdict in a failure's JSON, for the report ("-" when there is none). */
static const char *verdict(const host_loop_result *r) {
    static const char *states[] = {"gone", "not_running", "unreachable", "cannot_run"};
    for (size_t i = 0; i < sizeof states / sizeof *states; i++)
        if (example_backend_state(r, states[i])) return states[i];
    return "-";
}

int main(int argc, char **argv) {
    if (argc < 4 || (strcmp(argv[3], "oneshot") != 0 && strcmp(argv[3], "session") != 0)) {
        fprintf(stderr, "usage: %s docker|podman CONTAINER oneshot|session [CLI_OPTION...]\n",
                argv[0]);
        return 2;
    }
    const char *kind = argv[1], *container = argv[2];
    bool session = strcmp(argv[3], "session") == 0;
    host_loop *loop = example_test_image(kind, container, argv + 4, argc - 4);
    int status = 1;
    call_state call = {false, 0, {0}};
    host_loop_result later = {0};
    if (!loop || (session && !example_ok(loop, NULL, "{\"op\":\"open_session\"}"))) goto out;
    mcpgw_error *err = NULL;
    if (host_loop_submit(loop,
                         "{\"op\":\"call_tool\",\"mcp\":\"test\",\"tool\":\"slow\","
                         "\"arguments\":{\"seconds\":60,\"steps\":60},\"stream\":true}",
                         on_call, &call, NULL, &err) != MCPGW_RESULT_OK) {
        fprintf(stderr, "submit: %s\n", mcpgw_error_message(err));
        mcpgw_error_free(err);
        goto out;
    }
    /* Until the call runs in the gateway. */
    while (!call.done && (session ? call.chunks == 0 : !call_counted(loop)))
        if (session && host_loop_step(loop) != 0) goto out;
    if (call.done) {
        fprintf(stderr, "the call ended before the kill: %s\n", call.result.message);
        goto out;
    }
    /* The kill runs beside the loop: the exec's end reaches the driver while it is under way. */
    const char *cli = strcmp(kind, "podman") == 0 ? "podman" : "docker";
    char **kill_argv = calloc((size_t)argc + 2, sizeof *kill_argv);
    if (!kill_argv) goto out;
    int k = 0;
    kill_argv[k++] = (char *)cli;
    for (int i = 4; i < argc; i++) kill_argv[k++] = argv[i];
    kill_argv[k++] = "kill";
    kill_argv[k++] = (char *)container;
    pid_t killer;
    posix_spawn_file_actions_t quiet; /* it prints the container's name */
    posix_spawn_file_actions_init(&quiet);
    posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
    int e = posix_spawnp(&killer, cli, &quiet, NULL, kill_argv, environ);
    posix_spawn_file_actions_destroy(&quiet);
    free(kill_argv);
    if (e != 0) {
        fprintf(stderr, "cannot run %s kill: %s\n", cli, strerror(e));
        goto out;
    }
    double killed_at = example_now();
    while (!call.done)
        if (host_loop_step(loop) != 0) goto out;
    double ended = example_now() - killed_at;
    int ws;
    while (waitpid(killer, &ws, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        fprintf(stderr, "%s kill failed\n", cli);
        goto out;
    }
    mcpgw_result rc = host_loop_run(loop, "{\"op\":\"list_mcps\"}", NULL, NULL, &later);
    bool right = (session ? call.result.code == MCPGW_RESULT_SESSION_LOST
                          : call.result.code == MCPGW_RESULT_EXEC_FAILED &&
                                example_backend_state(&call.result, "gone")) &&
                 rc == MCPGW_RESULT_EXEC_FAILED && strcmp(verdict(&later), "-") != 0;
    printf("%s %s: the call in flight %s (backend: %s) %.2f s after the kill began; a later "
           "call %s (backend: %s): %s\n",
           kind, argv[3], mcpgw_result_name(call.result.code), verdict(&call.result), ended,
           mcpgw_result_name(rc), verdict(&later), right ? "right" : "WRONG");
    if (!right)
        fprintf(stderr, "  the call: %s\n  the later call: %s\n", call.result.json,
                later.json ? later.json : "");
    if (right) status = 0;
out:
    host_loop_result_free(&call.result);
    host_loop_result_free(&later);
    host_loop_free(loop);
    return status;
}
