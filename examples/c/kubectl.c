/* kubectl.c: a gateway in a Kubernetes pod, every command through `kubectl exec -i` (the
 * driver's `kubectl` backend).
 *
 *   kubectl NAMESPACE POD GATEWAY_BINARY_ON_HOST
 *
 * Installs the gateway at /tmp/mcpgw/bin/mcpgw-gateway in the pod (one command, the binary on
 * its stdin), launches it, checks its health, stops it. Exits 0 when all went well, 3 when the
 * commands could not be run at all (EXEC_FAILED: no cluster, no such pod; the driver tells
 * kubectl's own failures from a command's), 1 on any other failure. */
#define _POSIX_C_SOURCE 200809L

#include <mcpgw.h>

#include <stdio.h>
#include <stdlib.h>

#include "example.h"
#include "host_loop.h"

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s NAMESPACE POD GATEWAY_BINARY_ON_HOST\n", argv[0]);
        return 2;
    }
    char *ns = host_loop_json_string(argv[1]);
    char *pod = host_loop_json_string(argv[2]);
    char *binary = host_loop_json_string(argv[3]);
    /* Names are checked by the driver: an empty one, one starting with '-' or holding shell
     * metacharacters is refused here, before anything runs. */
    host_loop *loop =
        ns && pod && binary
            ? example_loop("{\"backend\":{\"kind\":\"kubectl\",\"pod\":%s,\"namespace\":%s},"
                           "\"gateway_path\":\"/tmp/mcpgw/bin/mcpgw-gateway\"}",
                           pod, ns)
            : NULL;
    mcpgw_result rc = MCPGW_RESULT_INVALID_ARGUMENT;
    host_loop_result r = {0};
    if (!loop) goto out;
    rc = example_run(loop, MCPGW_RESULT_EXEC_FAILED, &r,
                     "{\"op\":\"ensure_gateway_binary\",\"binary_path\":%s}", binary);
    if (rc == MCPGW_RESULT_EXEC_FAILED) printf("  its error: %s\n", r.json);
    if (rc == MCPGW_RESULT_OK && (rc = example_run(loop, MCPGW_RESULT_EXEC_FAILED, NULL,
                                                   "{\"op\":\"start_gateway\"}")) ==
                                     MCPGW_RESULT_OK) {
        rc = example_run(loop, MCPGW_RESULT_OK, NULL, "{\"op\":\"health\"}");
        mcpgw_result stopped =
            example_run(loop, MCPGW_RESULT_OK, NULL, "{\"op\":\"stop_gateway\"}");
        if (rc == MCPGW_RESULT_OK) rc = stopped;
    }
out:
    host_loop_result_free(&r);
    host_loop_free(loop);
    free(ns);
    free(pod);
    free(binary);
    return rc == MCPGW_RESULT_OK ? 0 : rc == MCPGW_RESULT_EXEC_FAILED ? 3 : 1;
}
