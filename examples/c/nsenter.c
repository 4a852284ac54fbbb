/* nsenter.c: a gateway inside a Linux-namespace sandbox, reached only through `nsenter`.
 *
 *   nsenter_example SANDBOX_PID GATEWAY_PATH_IN_SANDBOX [GATEWAY_BINARY_ON_HOST]
 *
 * SANDBOX_PID is a process inside the sandbox (e.g. the init of `unshare -n -p -m --fork`); the
 * sandbox has its own network, so the host cannot reach the gateway's port: every request runs
 * inside through the exec callback. With GATEWAY_BINARY_ON_HOST the binary is first installed
 * into the sandbox (uploaded in pieces, SHA-256 checked). The callback's state (the target pid)
 * is heap-allocated and released by the client's finalizer. */
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
    proc_job job;
    if (proc_start(&job, argv, timeout_ms) != 0 || proc_wait(&job) != 0) {
        mcpgw_exec_output_set_error(out, "cannot run nsenter");
        proc_free(&job);
        return 1;
    }
    mcpgw_exec_output_set(out, job.exit_code, job.out[0].data, job.out[0].len, job.out[1].data,
                          job.out[1].len);
    proc_free(&job);
    return 0;
}

static void release_sandbox(void *userdata) { free(userdata); }

static int check(const char *what, mcpgw_result rc, mcpgw_error **err) {
    if (rc == MCPGW_RESULT_OK) return 0;
    fprintf(stderr, "%s failed (%d): %s\n", what, (int)rc,
            *err ? mcpgw_error_message(*err) : mcpgw_result_message((uint32_t)rc));
    mcpgw_error_free(*err);
    *err = NULL;
    return 1;
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
    if (check("config", mcpgw_client_config_new(&cfg), &err) ||
        check("gateway path", mcpgw_client_config_set_gateway_path(cfg, argv[2]), &err)) {
        mcpgw_client_config_free(cfg);
        free(sb);
        return 1;
    }
    mcpgw_result rc = mcpgw_client_new(cfg, exec_nsenter, sb, release_sandbox, &client, &err);
    mcpgw_client_config_free(cfg);
    if (check("mcpgw_client_new", rc, &err)) {
        free(sb); /* not taken on failure */
        return 1;
    }

    int status = 1;
    char *json = NULL;
    if (argc == 4) {
        bool uploaded = false;
        if (check("ensure_gateway_binary",
                  mcpgw_client_ensure_gateway_binary(client, NULL, argv[3], &uploaded, &err), &err))
            goto out;
        printf("gateway binary %s\n", uploaded ? "uploaded" : "already there");
    }
    if (check("start_gateway", mcpgw_client_start_gateway(client, NULL, &json, &err), &err))
        goto out;
    printf("started inside the sandbox: %s\n", json);
    mcpgw_string_free(json);
    json = NULL;
    if (check("health", mcpgw_client_health(client, NULL, &json, &err), &err)) goto stop;
    printf("health: %s\n", json);
    mcpgw_string_free(json);
    json = NULL;
    if (check("list_mcps", mcpgw_client_list_mcps(client, NULL, &json, &err), &err)) goto stop;
    printf("mcps: %s\n", json);
    mcpgw_string_free(json);
    json = NULL;
    status = 0;
stop:
    if (check("stop_gateway", mcpgw_client_stop_gateway(client, NULL, &err), &err)) status = 1;
out:
    mcpgw_client_free(client); /* calls release_sandbox(sb) */
    return status;
}
