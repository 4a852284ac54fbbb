/* kubectl.c: a gateway in a Kubernetes pod, every command through `kubectl exec -i`
 * (kubectl_exec.c).
 *
 *   kubectl NAMESPACE POD GATEWAY_BINARY_ON_HOST
 *
 * Installs the gateway at /tmp/mcpgw/bin/mcpgw-gateway in the pod (one command, the binary on
 * its stdin), launches it, checks its health, stops it. Exits 0 when all went well, 3 when the
 * commands could not be run at all (MCPGW_RESULT_EXEC_FAILED: no cluster, no such pod), 1 on
 * any other failure. */
#define _POSIX_C_SOURCE 200809L

#include <mcpgw.h>

#include <stdio.h>

#include "kubectl_exec.h"

/* Runs `*op` (prepared with result `prepared`) through the exec callback, prints its result
 * or failure, frees it. */
static mcpgw_result run(const mcpgw_client *client, mcpgw_result prepared, mcpgw_op **op) {
    mcpgw_result rc = prepared == MCPGW_RESULT_OK ? mcpgw_client_run(client, *op) : prepared;
    char *json = NULL;
    if (rc == MCPGW_RESULT_OK && mcpgw_op_result_json(*op, &json) == MCPGW_RESULT_OK)
        printf("%s: %s\n", mcpgw_op_name(*op), json);
    else if (*op)
        printf("%s failed (%s): %s\n", mcpgw_op_name(*op), mcpgw_result_name(rc),
               mcpgw_error_message(mcpgw_op_error(*op)));
    mcpgw_string_free(json);
    mcpgw_op_free(*op);
    *op = NULL;
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s NAMESPACE POD GATEWAY_BINARY_ON_HOST\n", argv[0]);
        return 2;
    }
    kubectl_pod pod = {argv[1], argv[2]};
    mcpgw_client_config *cfg = NULL;
    mcpgw_client *client = NULL;
    mcpgw_error *err = NULL;
    if (mcpgw_client_config_new(&cfg) != MCPGW_RESULT_OK ||
        mcpgw_client_config_set_gateway_path(cfg, "/tmp/mcpgw/bin/mcpgw-gateway") !=
            MCPGW_RESULT_OK ||
        mcpgw_client_config_set_exec_stdin(cfg, true) != MCPGW_RESULT_OK ||
        mcpgw_client_new(cfg, kubectl_exec, &pod, NULL, &client, &err) != MCPGW_RESULT_OK) {
        fprintf(stderr, "client: %s\n", err ? mcpgw_error_message(err) : "config failed");
        mcpgw_error_free(err);
        mcpgw_client_config_free(cfg);
        return 1;
    }
    mcpgw_client_config_free(cfg);
    mcpgw_op *op = NULL;
    mcpgw_result rc =
        run(client, mcpgw_client_prepare_ensure_gateway_binary(client, NULL, argv[3], &op), &op);
    if (rc == MCPGW_RESULT_OK &&
        (rc = run(client, mcpgw_client_prepare_start_gateway(client, NULL, &op), &op)) ==
            MCPGW_RESULT_OK) {
        rc = run(client, mcpgw_client_prepare_health(client, NULL, &op), &op);
        mcpgw_result stopped = run(client, mcpgw_client_prepare_stop_gateway(client, NULL, &op), &op);
        if (rc == MCPGW_RESULT_OK) rc = stopped;
    }
    mcpgw_client_free(client);
    return rc == MCPGW_RESULT_OK ? 0 : rc == MCPGW_RESULT_EXEC_FAILED ? 3 : 1;
}
