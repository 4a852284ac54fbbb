/* docker.c: a gateway in a Docker (or podman) container, every command through `docker exec`,
 * and the failures such a backend has, told apart by the driver.
 *
 *   docker docker|podman CONTAINER GATEWAY_BINARY_ON_HOST|- [CLI_OPTION...]
 *
 * CONTAINER runs an image with `sh` (tests/docker/sandbox.sh makes a busybox-only one, with the
 * gateway and the test MCP server in /usr/local/bin); CLI_OPTIONs go before `exec` (podman:
 * `--storage-driver vfs`). The program
 *   1. installs the static gateway into the container (the binary on the command's stdin,
 *      timed) and finds it there the second time; with `-` it uses the image's own;
 *   2. launches it, registers the test server, calls tools (a body too large for one command
 *      travels on stdin), and does the same over a session channel (`docker exec -i`);
 *   3. shows "could not run" (EXEC_FAILED, with the driver's verdict on the backend: a container
 *      that does not exist, no daemon) apart from "ran and failed" (a missing gateway binary:
 *      START_FAILED), one-shot and when opening a session.
 * Exits non-zero when anything unexpected happens. The container is left running. */
#define _POSIX_C_SOURCE 200809L

#include <mcpgw.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "example.h"
#include "host_loop.h"

/* Runs `op` expecting `expected`; for EXEC_FAILED also the backend's verdict `state`. */
static bool fails_with(host_loop *loop, const char *op, mcpgw_result expected,
                       const char *state) {
    host_loop_result r;
    mcpgw_result rc = example_run(loop, expected, &r, "%s", op);
    bool ok = rc == expected && (!state || example_backend_state(&r, state));
    if (ok && state) printf("    the driver's verdict: %s\n", strstr(r.json, "\"backend\":{"));
    if (!ok) fprintf(stderr, "expected %s%s%s: %s\n", mcpgw_result_name(expected),
                     state ? " with the backend " : "", state ? state : "", r.json ? r.json : "");
    host_loop_result_free(&r);
    return ok;
}

/* Echoes `len` bytes of text (made here) and checks they came back whole. */
static bool big_echo(host_loop *loop, size_t len) {
    char *text = malloc(len + 1);
    if (!text) return false;
    for (size_t i = 0; i < len; i++) text[i] = (char)('a' + i % 26);
    text[len] = '\0';
    host_loop_result r;
    bool ok = example_ok(loop, &r,
                         "{\"op\":\"call_tool\",\"mcp\":\"test\",\"tool\":\"echo\","
                         "\"arguments\":{\"text\":\"%s\"}}",
                         text) &&
              strstr(r.json, text) != NULL;
    printf("  echo of %zu KiB: %s\n", len / 1024, ok ? "came back whole" : "DIFFERS");
    host_loop_result_free(&r);
    free(text);
    return ok;
}

static const char *ECHO = "{\"op\":\"call_tool\",\"mcp\":\"test\",\"tool\":\"echo\","
                          "\"arguments\":{\"text\":\"hello from a container\"}}";

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr,
                "usage: %s docker|podman CONTAINER GATEWAY_BINARY_ON_HOST|- [CLI_OPTION...]\n",
                argv[0]);
        return 2;
    }
    const char *kind = argv[1], *container = argv[2];
    char *const *options = argv + 4;
    int n = argc - 4;
    int upload = strcmp(argv[3], "-") != 0;
    const char *gateway = upload ? "/opt/mcpgw/mcpgw-gateway" : "/usr/local/bin/mcpgw-gateway";
    char *binary = host_loop_json_string(argv[3]);
    char *spec = example_testserver_spec("test", "/usr/local/bin/mcpgw-testserver");
    host_loop *loop = binary && spec ? example_container_loop(kind, container, options, n, gateway) : NULL;
    int status = 1;
    host_loop_result r = {0};
    if (!loop) goto out;

    /* 1. The binary through stdin in one command; the second time it is found there. */
    if (upload) {
        double t0 = example_now();
        if (!example_ok(loop, &r, "{\"op\":\"ensure_gateway_binary\",\"binary_path\":%s}",
                        binary) ||
            !strstr(r.json, "\"uploaded\":true"))
            goto out;
        printf("  installed in %.2f s\n", example_now() - t0);
        host_loop_result_free(&r);
        if (!example_ok(loop, &r, "{\"op\":\"ensure_gateway_binary\",\"binary_path\":%s}",
                        binary) ||
            !strstr(r.json, "\"uploaded\":false"))
            goto out;
        host_loop_result_free(&r);
    }

    /* 2. The whole cycle, one-shot, then over a session. */
    if (!example_ok(loop, NULL, "{\"op\":\"start_gateway\"}")) goto out;
    if (!example_ok(loop, NULL, "{\"op\":\"add_mcp\",\"spec\":%s}", spec) ||
        !example_ok(loop, NULL, "%s", ECHO) || !big_echo(loop, 300 * 1024))
        goto stop;
    printf("over a session channel:\n");
    if (!example_ok(loop, NULL, "{\"op\":\"open_session\"}") ||
        !example_ok(loop, NULL, "%s", ECHO) || !big_echo(loop, 300 * 1024) ||
        !example_ok(loop, NULL, "{\"op\":\"close_session\"}") || host_loop_settle(loop) != 0)
        goto stop;

    /* 3. Could not run, or ran and failed. */
    printf("a container that does not exist:\n");
    char missing[64];
    snprintf(missing, sizeof missing, "mcpgw-no-such-container-%ld", (long)time(NULL));
    host_loop *nowhere = example_container_loop(kind, missing, options, n, gateway);
    bool ok = nowhere &&
              fails_with(nowhere, "{\"op\":\"start_gateway\"}", MCPGW_RESULT_EXEC_FAILED,
                         "gone") &&
              fails_with(nowhere, "{\"op\":\"open_session\"}", MCPGW_RESULT_EXEC_FAILED, "gone");
    host_loop_free(nowhere);
    if (!ok) goto stop;

    printf("a gateway binary that is not in the container (the command runs, and fails):\n");
    host_loop *wrong = example_container_loop(kind, container, options, n, "/nonexistent/mcpgw-gateway");
    ok = wrong &&
         fails_with(wrong, "{\"op\":\"start_gateway\"}", MCPGW_RESULT_START_FAILED, NULL) &&
         fails_with(wrong, "{\"op\":\"open_session\"}", MCPGW_RESULT_START_FAILED, NULL);
    host_loop_free(wrong);
    if (!ok) goto stop;

    if (strcmp(kind, "docker") == 0) {
        printf("no Docker daemon (DOCKER_HOST names a socket nobody listens on):\n");
        setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock", 1);
        ok = fails_with(loop, "{\"op\":\"health\"}", MCPGW_RESULT_EXEC_FAILED, "unreachable");
        unsetenv("DOCKER_HOST");
        if (!ok) goto stop;
    }
    status = 0;
stop:
    if (!example_ok(loop, NULL, "{\"op\":\"stop_gateway\"}")) status = 1;
out:
    host_loop_result_free(&r);
    host_loop_free(loop);
    free(binary);
    free(spec);
    return status;
}
