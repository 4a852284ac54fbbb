/* nsenter.c: a gateway inside a Linux-namespace sandbox, reached only through `nsenter`.
 *
 *   nsenter_example SANDBOX_PID GATEWAY_PATH_IN_SANDBOX [GATEWAY_BINARY_ON_HOST]
 *
 * SANDBOX_PID is a process inside the sandbox (e.g. the init of `unshare -n -p -m --fork`); the
 * sandbox has its own network, so the host cannot reach the gateway's port: every request runs
 * inside through the exec callback. With GATEWAY_BINARY_ON_HOST the binary is first installed
 * into the sandbox (SHA-256 checked; this callback passes no stdin, so it travels in staged
 * pieces of one command each). The callback's state (the target pid) is heap-allocated and
 * released by the client's finalizer. */
#define _POSIX_C_SOURCE 200809L

#include <mcpgw.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proc.h"

typedef struct {
    char pid[32];
} sandbox;

static int32_t exec_nsenter(void *userdata, const char *command, uint32_t timeout_ms,
                            mcpgw_exec_output *out) {
    sandbox *sb = userdata;
    /* -r/-w: the sandbox's own root and working directory (a minimal root has only /bin/sh). */
    char *argv[] = {"nsenter", "-t", sb->pid, "-n", "-p", "-m", "-r", "-w",
                    "--", "/bin/sh", "-c", (char *)command, NULL};
    return proc_exec_argv(argv, timeout_ms, out);
}

static void release_sandbox(void *userdata) { free(userdata); }

/* The blocking form of an operation: runs the op `*op` (just prepared, with result `prepared`)
 * through the client's exec callback, prints its result JSON or its error, and frees it. */
static mcpgw_result run(const mcpgw_client *client, mcpgw_result prepared, mcpgw_op **op) {
    if (prepared != MCPGW_RESULT_OK) {
        fprintf(stderr, "cannot prepare the operation: %s\n", mcpgw_result_message(prepared));
        return prepared;
    }
    mcpgw_result rc = mcpgw_client_run(client, *op);
    char *json = NULL;
    if (rc == MCPGW_RESULT_OK && mcpgw_op_result_json(*op, &json) == MCPGW_RESULT_OK)
        printf("%s: %s\n", mcpgw_op_name(*op), json);
    else if (rc != MCPGW_RESULT_OK)
        fprintf(stderr, "%s failed (%s): %s\n", mcpgw_op_name(*op), mcpgw_result_name(rc),
                mcpgw_error_message(mcpgw_op_error(*op)));
    mcpgw_string_free(json);
    mcpgw_op_free(*op);
    *op = NULL;
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: %s SANDBOX_PID GATEWAY_PATH_IN_SANDBOX [GATEWAY_BINARY_ON_HOST]\n",
                argv[0]);
        return 2;
    }
    sandbox *sb = calloc(1, sizeof *sb);
    if (!sb) return 1;
    snprintf(sb->pid, sizeof sb->pid, "%s", argv[1]);

    mcpgw_error *err = NULL;
    mcpgw_client_config *cfg = NULL;
    mcpgw_client *client = NULL;
    if (mcpgw_client_config_new(&cfg) != MCPGW_RESULT_OK ||
        mcpgw_client_config_set_gateway_path(cfg, argv[2]) != MCPGW_RESULT_OK) {
        fprintf(stderr, "config failed\n");
        mcpgw_client_config_free(cfg);
        free(sb);
        return 1;
    }
    /* The client owns sb from here: release_sandbox runs exactly once, also when this fails. */
    mcpgw_result rc = mcpgw_client_new(cfg, exec_nsenter, sb, release_sandbox, &client, &err);
    mcpgw_client_config_free(cfg);
    if (rc != MCPGW_RESULT_OK) {
        fprintf(stderr, "mcpgw_client_new: %s\n", mcpgw_error_message(err));
        mcpgw_error_free(err);
        return 1;
    }

    int status = 1;
    mcpgw_op *op = NULL;
    if (argc == 4 &&
        run(client, mcpgw_client_prepare_ensure_gateway_binary(client, NULL, argv[3], &op), &op) !=
            MCPGW_RESULT_OK)
        goto out;
    if (run(client, mcpgw_client_prepare_start_gateway(client, NULL, &op), &op) != MCPGW_RESULT_OK)
        goto out;
    if (run(client, mcpgw_client_prepare_health(client, NULL, &op), &op) != MCPGW_RESULT_OK ||
        run(client, mcpgw_client_prepare_list_mcps(client, NULL, &op), &op) != MCPGW_RESULT_OK)
        goto stop;
    status = 0;
stop:
    if (run(client, mcpgw_client_prepare_stop_gateway(client, NULL, &op), &op) != MCPGW_RESULT_OK)
        status = 1;
out:
    mcpgw_client_free(client); /* calls release_sandbox(sb) */
    return status;
}
