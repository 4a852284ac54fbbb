/* nsenter.c: a gateway inside a Linux-namespace sandbox, reached only through `nsenter`.
 *
 *   nsenter SANDBOX_PID GATEWAY_PATH_IN_SANDBOX [GATEWAY_BINARY_ON_HOST]
 *
 * SANDBOX_PID is a process inside the sandbox (e.g. the init of `unshare -n -p -m --fork`); the
 * sandbox has its own network, so the host cannot reach the gateway's port: every request runs
 * inside. The driver's `argv` backend takes any program that runs its remaining arguments in
 * the sandbox, here `nsenter -t PID -n -p -m -r -w --`. With GATEWAY_BINARY_ON_HOST the binary
 * is first installed into the sandbox (SHA-256 checked). The gateway is used one-shot, then
 * over a session channel entered the same way. */
#define _POSIX_C_SOURCE 200809L

#include <mcpgw.h>

#include <stdio.h>
#include <stdlib.h>

#include "example.h"
#include "host_loop.h"

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: %s SANDBOX_PID GATEWAY_PATH_IN_SANDBOX [GATEWAY_BINARY_ON_HOST]\n",
                argv[0]);
        return 2;
    }
    char *pid = host_loop_json_string(argv[1]);
    char *gateway = host_loop_json_string(argv[2]);
    char *binary = argc == 4 ? host_loop_json_string(argv[3]) : NULL;
    /* -r/-w: the sandbox's own root and working directory (a minimal root has only /bin/sh). */
    host_loop *loop = pid && gateway
                          ? example_loop("{\"backend\":{\"kind\":\"argv\",\"prefix\":[\"nsenter\","
                                         "\"-t\",%s,\"-n\",\"-p\",\"-m\",\"-r\",\"-w\",\"--\"]},"
                                         "\"gateway_path\":%s}",
                                         pid, gateway)
                          : NULL;
    int status = 1;
    if (!loop) goto out;
    if (binary && !example_ok(loop, NULL,
                              "{\"op\":\"ensure_gateway_binary\",\"binary_path\":%s}", binary))
        goto out;
    if (!example_ok(loop, NULL, "{\"op\":\"start_gateway\"}")) goto out;
    if (!example_ok(loop, NULL, "{\"op\":\"health\"}") ||
        !example_ok(loop, NULL, "{\"op\":\"list_mcps\"}"))
        goto stop;
    printf("over a session channel (nsenter ... sh -c 'mcpgw-gateway attach ...'):\n");
    if (!example_ok(loop, NULL, "{\"op\":\"open_session\"}") ||
        !example_ok(loop, NULL, "{\"op\":\"health\"}") ||
        !example_ok(loop, NULL, "{\"op\":\"list_mcps\"}") ||
        !example_ok(loop, NULL, "{\"op\":\"close_session\"}") || host_loop_settle(loop) != 0)
        goto stop;
    status = 0;
stop:
    if (!example_ok(loop, NULL, "{\"op\":\"stop_gateway\"}")) status = 1;
out:
    host_loop_free(loop);
    free(pid);
    free(gateway);
    free(binary);
    return status;
}
