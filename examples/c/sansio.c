/* sansio.c: the sans-IO pair driven by the host's own event loop.
 *
 *   sansio GATEWAY_BINARY TESTSERVER_BINARY
 *
 * The library runs nothing here: each operation says which command it wants next
 * (mcpgw_op_command), this program starts it without blocking, and one poll() loop watches every
 * running command; when one ends, its output goes back (mcpgw_op_complete) and the operation
 * either wants another command or has its result. Several operations are in flight at once on
 * one thread: three 1-second tool calls finish in about 1 second, not 3. */
#define _POSIX_C_SOURCE 200809L

#include <mcpgw.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proc.h"

#define MAX_OPS 8

typedef struct {
    mcpgw_op *op;
    proc_job job;
    int running; /* a command of this op is running */
} slot;

/* Starts the next command of every op that wants one. Returns -1 when one cannot start. */
static int start_commands(slot *slots, int n) {
    for (int i = 0; i < n; i++) {
        const char *cmd;
        uint32_t timeout_ms;
        if (slots[i].running || mcpgw_op_command(slots[i].op, &cmd, &timeout_ms) != MCPGW_RESULT_OK)
            continue;
        char *argv[] = {"sh", "-c", (char *)cmd, NULL};
        if (proc_start(&slots[i].job, argv, timeout_ms) != 0) {
            /* The host could not run it: the operation fails with EXEC_FAILED. */
            mcpgw_op_fail_exec(slots[i].op, strerror(errno));
            continue;
        }
        slots[i].running = 1;
    }
    return 0;
}

/* Drives all ops until every one has finished. */
static int drive(slot *slots, int n) {
    for (;;) {
        start_commands(slots, n);
        struct pollfd fds[PROC_MAX_POLLFDS * MAX_OPS];
        int nfds = 0, timeout = -1, running = 0;
        for (int i = 0; i < n; i++) {
            if (!slots[i].running) continue;
            running++;
            nfds += proc_pollfds(&slots[i].job, fds + nfds);
            int left = proc_ms_left(&slots[i].job);
            if (timeout < 0 || left < timeout) timeout = left;
        }
        if (!running) return 0;
        if (poll(fds, (nfds_t)nfds, timeout) < 0 && errno != EINTR) return -1;
        for (int i = 0; i < n; i++) {
            if (!slots[i].running) continue;
            int r = proc_step(&slots[i].job);
            if (r == 0) continue;
            proc_job *j = &slots[i].job;
            if (r < 0)
                mcpgw_op_fail_exec(slots[i].op, strerror(errno));
            else
                mcpgw_op_complete(slots[i].op, j->exit_code, j->out[0].data, j->out[0].len,
                                  j->out[1].data, j->out[1].len);
            proc_free(j);
            slots[i].running = 0;
        }
    }
}

/* Prints an op's outcome; returns its result code. */
static mcpgw_result report(mcpgw_op *op) {
    mcpgw_result rc = mcpgw_op_result(op);
    if (rc == MCPGW_RESULT_OK) {
        char *json = NULL;
        if (mcpgw_op_result_json(op, &json) == MCPGW_RESULT_OK)
            printf("%s: ok: %.120s\n", mcpgw_op_name(op), json);
        mcpgw_string_free(json);
    } else {
        printf("%s: failed (%d): %s\n", mcpgw_op_name(op), (int)rc,
               mcpgw_error_message(mcpgw_op_error(op)));
    }
    return rc;
}

/* Runs one op (just prepared, with result `prepared`) alone to its end, then frees it. */
static mcpgw_result run_one(mcpgw_result prepared, mcpgw_op *op) {
    if (prepared != MCPGW_RESULT_OK) {
        fprintf(stderr, "cannot prepare the operation: %s\n", mcpgw_result_message(prepared));
        return prepared;
    }
    slot s = {op, {0}, 0};
    if (drive(&s, 1) != 0) return MCPGW_RESULT_EXEC_FAILED;
    mcpgw_result rc = report(op);
    mcpgw_op_free(op);
    return rc;
}

static double seconds_since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s GATEWAY_BINARY TESTSERVER_BINARY\n", argv[0]);
        return 2;
    }
    mcpgw_client_config *cfg = NULL;
    mcpgw_client *client = NULL;
    mcpgw_error *err = NULL;
    if (mcpgw_client_config_new(&cfg) != MCPGW_RESULT_OK ||
        mcpgw_client_config_set_gateway_path(cfg, argv[1]) != MCPGW_RESULT_OK) {
        mcpgw_client_config_free(cfg);
        return 1;
    }
    /* No exec callback: this client is driven only through operations. */
    mcpgw_result rc = mcpgw_client_new(cfg, NULL, NULL, NULL, &client, &err);
    mcpgw_client_config_free(cfg);
    if (rc != MCPGW_RESULT_OK) {
        fprintf(stderr, "mcpgw_client_new: %s\n", mcpgw_error_message(err));
        mcpgw_error_free(err);
        return 1;
    }

    int status = 1;
    mcpgw_op *op = NULL;
    mcpgw_result prepared = mcpgw_client_prepare_start_gateway(client, NULL, &op);
    if (run_one(prepared, op) != MCPGW_RESULT_OK) goto out;

    size_t spec_len = strlen(argv[2]) + 200;
    char *spec = malloc(spec_len);
    if (!spec) goto stop;
    snprintf(spec, spec_len,
             "{\"name\":\"test\",\"mcp_config\":{\"type\":\"stdio_mcp\",\"command\":\"%s\","
             "\"args\":[\"stdio\"]}}",
             argv[2]);
    prepared = mcpgw_client_prepare_add_mcp(client, NULL, spec, &op);
    free(spec);
    if (run_one(prepared, op) != MCPGW_RESULT_OK) goto stop;

    /* Four operations in flight at once: three slow calls and a tool listing. */
    slot slots[4];
    memset(slots, 0, sizeof slots);
    int prepared_all = 1;
    for (int i = 0; i < 3; i++)
        if (mcpgw_client_prepare_call_tool(client, NULL, "test", "slow",
                                           "{\"seconds\":1,\"steps\":2}",
                                           &slots[i].op) != MCPGW_RESULT_OK)
            prepared_all = 0;
    if (mcpgw_client_prepare_list_tools(client, NULL, "test", &slots[3].op) != MCPGW_RESULT_OK)
        prepared_all = 0;
    if (!prepared_all) {
        for (int i = 0; i < 4; i++) mcpgw_op_free(slots[i].op);
        goto stop;
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int ok = drive(slots, 4) == 0;
    double took = seconds_since(&t0);
    for (int i = 0; i < 4; i++) {
        if (report(slots[i].op) != MCPGW_RESULT_OK) ok = 0;
        if (i == 0 && ok) {
            mcpgw_tool_chunk *chunk = NULL;
            if (mcpgw_op_tool_chunk(slots[i].op, &chunk, NULL) == MCPGW_RESULT_OK)
                printf("first call: %zu block(s), state %d\n",
                       mcpgw_tool_chunk_block_count(chunk), (int)mcpgw_tool_chunk_state(chunk));
            else
                ok = 0;
            mcpgw_tool_chunk_free(chunk);
        }
        mcpgw_op_free(slots[i].op);
    }
    printf("4 concurrent operations took %.2f s\n", took);
    if (ok && took < 2.5) status = 0;
stop:
    prepared = mcpgw_client_prepare_stop_gateway(client, NULL, &op);
    if (run_one(prepared, op) != MCPGW_RESULT_OK) status = 1;
out:
    mcpgw_client_free(client);
    return status;
}
