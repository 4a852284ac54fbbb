/* docker.c: a gateway in a Docker container, every command through `docker exec -i`
 * (docker_exec.c), and the failures a Docker backend has, told apart.
 *
 *   docker CONTAINER GATEWAY_BINARY_ON_HOST|-
 *
 * CONTAINER runs an image with `sh` (tests/docker/sandbox.sh makes a busybox-only one, with the
 * gateway and the test MCP server in /usr/local/bin). The program
 *   1. installs the static gateway into the container twice and prints how long each took:
 *      with the binary on the command's stdin (one exec), and without (staged pieces); with
 *      `-` it skips this and uses the image's /usr/local/bin/mcpgw-gateway;
 *   2. launches it, registers the test server, calls tools (a body too large for one command
 *      travels on stdin);
 *   3. shows "could not run" (MCPGW_RESULT_EXEC_FAILED: no such container, no daemon, the
 *      container killed during a call) apart from "ran and failed" (a missing gateway binary);
 * and KILLS THE CONTAINER on the way (step 3). Exits non-zero when anything unexpected happens. */
#define _POSIX_C_SOURCE 200809L

#include <mcpgw.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "docker_exec.h"
#include "proc.h"

/* The callback's state: the container, plus what this example observes of its commands. */
typedef struct {
    const char *container;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int execs;        /* commands run */
    int slow_started; /* a command calling the tool `slow` was handed over */
} target;

/* docker_exec, counting commands and telling the main thread when the slow call begins. */
static int32_t counted_exec(void *userdata, const char *command, uint32_t timeout_ms,
                            mcpgw_exec_output *out) {
    target *t = userdata;
    pthread_mutex_lock(&t->lock);
    t->execs++;
    if (strstr(command, "/tools/slow")) t->slow_started = 1;
    pthread_cond_broadcast(&t->changed);
    pthread_mutex_unlock(&t->lock);
    return docker_exec((void *)t->container, command, timeout_ms, out);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static mcpgw_client *new_client(target *t, const char *gateway_path, bool exec_stdin) {
    mcpgw_client_config *cfg = NULL;
    mcpgw_client *client = NULL;
    mcpgw_error *err = NULL;
    if (mcpgw_client_config_new(&cfg) != MCPGW_RESULT_OK ||
        mcpgw_client_config_set_gateway_path(cfg, gateway_path) != MCPGW_RESULT_OK ||
        mcpgw_client_config_set_timeout_ms(cfg, 60000) != MCPGW_RESULT_OK ||
        /* docker exec -i passes stdin, and docker_exec hands it the command's bytes. */
        mcpgw_client_config_set_exec_stdin(cfg, exec_stdin) != MCPGW_RESULT_OK ||
        mcpgw_client_new(cfg, counted_exec, t, NULL, &client, &err) != MCPGW_RESULT_OK) {
        fprintf(stderr, "cannot make a client: %s\n", err ? mcpgw_error_message(err) : "config");
        client = NULL;
    }
    mcpgw_error_free(err);
    mcpgw_client_config_free(cfg);
    return client;
}

/* The blocking form of an operation: runs `*op` (just prepared, with result `prepared`)
 * through the client's exec callback and frees it. On success `*json_out` (may be NULL)
 * receives its result JSON; on failure its error is printed, as expected when `expected` is
 * that failure's code. */
static mcpgw_result run(const mcpgw_client *client, mcpgw_result prepared, mcpgw_op **op,
                        char **json_out, mcpgw_result expected) {
    if (prepared != MCPGW_RESULT_OK) {
        fprintf(stderr, "cannot prepare the operation: %s\n", mcpgw_result_message(prepared));
        return prepared;
    }
    mcpgw_result rc = mcpgw_client_run(client, *op);
    if (rc == MCPGW_RESULT_OK && json_out) rc = mcpgw_op_result_json(*op, json_out);
    if (rc != MCPGW_RESULT_OK)
        fprintf(rc == expected ? stdout : stderr, "  %s %s: %s: %s\n", mcpgw_op_name(*op),
                rc == expected ? "failed as expected" : "failed", mcpgw_result_name(rc),
                mcpgw_error_message(mcpgw_op_error(*op)));
    mcpgw_op_free(*op);
    *op = NULL;
    return rc;
}

/* Installs the gateway at `path` in the container; prints and checks how it went. */
static int timed_upload(target *t, const char *path, bool exec_stdin, const char *host_binary,
                        double *seconds) {
    mcpgw_client *client = new_client(t, path, exec_stdin);
    if (!client) return 1;
    mcpgw_op *op = NULL;
    char *json = NULL;
    int execs = t->execs;
    double t0 = now_s();
    mcpgw_result rc =
        run(client, mcpgw_client_prepare_ensure_gateway_binary(client, NULL, host_binary, &op),
            &op, &json, MCPGW_RESULT_OK);
    *seconds = now_s() - t0;
    int ok = rc == MCPGW_RESULT_OK && strstr(json, "\"uploaded\":true") != NULL;
    printf("ensure_gateway_binary %s stdin: %.2f s, %d docker exec(s): %s\n",
           exec_stdin ? "with   " : "without", *seconds, t->execs - execs, json ? json : "");
    mcpgw_string_free(json);
    mcpgw_client_free(client);
    return ok ? 0 : 1;
}

typedef struct {
    mcpgw_client *client;
    mcpgw_result rc;
} slow_call;

static void *call_slow(void *arg) {
    slow_call *c = arg;
    mcpgw_op *op = NULL;
    c->rc = run(c->client,
                mcpgw_client_prepare_call_tool(c->client, NULL, "test", "slow",
                                               "{\"seconds\":30,\"steps\":0}", &op),
                &op, NULL, MCPGW_RESULT_EXEC_FAILED);
    return NULL;
}

/* Checks an echo of `len` bytes of text came back whole. */
static int echo_is(const char *json, const char *text) {
    return json && strstr(json, text) != NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s CONTAINER GATEWAY_BINARY_ON_HOST|-\n", argv[0]);
        return 2;
    }
    target t = {argv[1], PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
    int status = 1;
    mcpgw_client *client = NULL;
    mcpgw_op *op = NULL;
    char *json = NULL;
    char *args = NULL;

    /* 1. The binary through stdin in one command, then in staged pieces, to fresh paths. */
    int upload = strcmp(argv[2], "-") != 0;
    const char *gateway = upload ? "/opt/mcpgw-stdin/mcpgw-gateway" : "/usr/local/bin/mcpgw-gateway";
    double with_stdin, staged;
    if (upload) {
        if (timed_upload(&t, gateway, true, argv[2], &with_stdin) ||
            timed_upload(&t, "/opt/mcpgw-staged/mcpgw-gateway", false, argv[2], &staged))
            goto out;
        printf("upload: %.1fx faster with stdin\n", staged / with_stdin);
    }

    /* 2. The whole cycle on the gateway installed through stdin (found there the second time). */
    client = new_client(&t, gateway, true);
    if (!client) goto out;
    if (upload) {
        if (run(client, mcpgw_client_prepare_ensure_gateway_binary(client, NULL, argv[2], &op),
                &op, &json, MCPGW_RESULT_OK) != MCPGW_RESULT_OK ||
            !strstr(json, "\"uploaded\":false"))
            goto out;
        mcpgw_string_free(json);
        json = NULL;
    }
    if (run(client, mcpgw_client_prepare_start_gateway(client, NULL, &op), &op, &json,
            MCPGW_RESULT_OK) != MCPGW_RESULT_OK)
        goto out;
    printf("gateway started in %s: %s\n", t.container, json);
    mcpgw_string_free(json);
    json = NULL;
    const char *spec = "{\"name\":\"test\",\"mcp_config\":{\"type\":\"stdio_mcp\","
                       "\"command\":\"/usr/local/bin/mcpgw-testserver\",\"args\":[\"stdio\"]}}";
    if (run(client, mcpgw_client_prepare_add_mcp(client, NULL, spec, &op), &op, NULL,
            MCPGW_RESULT_OK) != MCPGW_RESULT_OK ||
        run(client,
            mcpgw_client_prepare_call_tool(client, NULL, "test", "echo",
                                           "{\"text\":\"hello from docker\"}", &op),
            &op, &json, MCPGW_RESULT_OK) != MCPGW_RESULT_OK ||
        !echo_is(json, "hello from docker"))
        goto stop;
    printf("echo: %.200s\n", json);
    mcpgw_string_free(json);
    json = NULL;

    /* A 300 KiB argument: over one command's limit, so the body travels on stdin. */
    size_t big = 300 * 1024;
    args = malloc(big + 32);
    if (!args) goto stop;
    memcpy(args, "{\"text\":\"", 9);
    for (size_t i = 0; i < big; i++) args[9 + i] = (char)('a' + i % 26);
    strcpy(args + 9 + big, "\"}");
    int execs = t.execs;
    if (run(client, mcpgw_client_prepare_call_tool(client, NULL, "test", "echo", args, &op), &op,
            &json, MCPGW_RESULT_OK) != MCPGW_RESULT_OK)
        goto stop;
    args[9 + big] = '\0';
    printf("echo of %zu KiB: %s, %d docker exec(s)\n", big / 1024,
           echo_is(json, args + 9) ? "came back whole" : "DIFFERS", t.execs - execs);
    if (!echo_is(json, args + 9)) goto stop;
    mcpgw_string_free(json);
    json = NULL;

    /* 3. Could not run, or ran and failed. */
    printf("a container that does not exist:\n");
    char missing[64];
    snprintf(missing, sizeof missing, "mcpgw-no-such-container-%ld", (long)time(NULL));
    target nowhere = {missing, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
    mcpgw_client *lost = new_client(&nowhere, gateway, true);
    if (!lost) goto stop;
    mcpgw_result rc = run(lost, mcpgw_client_prepare_start_gateway(lost, NULL, &op), &op, NULL,
                          MCPGW_RESULT_EXEC_FAILED);
    mcpgw_client_free(lost);
    if (rc != MCPGW_RESULT_EXEC_FAILED) goto stop;

    printf("a gateway binary that is not in the container (the command runs, and fails):\n");
    mcpgw_client *wrong = new_client(&t, "/nonexistent/mcpgw-gateway", true);
    if (!wrong) goto stop;
    rc = run(wrong, mcpgw_client_prepare_start_gateway(wrong, NULL, &op), &op, NULL,
             MCPGW_RESULT_START_FAILED);
    mcpgw_client_free(wrong);
    if (rc != MCPGW_RESULT_START_FAILED) goto stop;

    printf("the container killed during a 30-second call:\n");
    slow_call call = {client, MCPGW_RESULT_OK};
    pthread_t thread;
    if (pthread_create(&thread, NULL, call_slow, &call) != 0) goto stop;
    pthread_mutex_lock(&t.lock);
    while (!t.slow_started) pthread_cond_wait(&t.changed, &t.lock);
    pthread_mutex_unlock(&t.lock);
    char *kill_argv[] = {"docker", "kill", (char *)t.container, NULL};
    proc_job job;
    char why[256];
    double killed_at = now_s();
    int killed = proc_run(&job, kill_argv, 30000, NULL, 0, why, sizeof why) == 0 &&
                 job.exit_code == 0;
    proc_free(&job);
    pthread_join(thread, NULL);
    printf("  the call returned %.2f s after docker kill began\n", now_s() - killed_at);
    if (!killed || call.rc != MCPGW_RESULT_EXEC_FAILED) goto out;

    printf("no Docker daemon (DOCKER_HOST names a socket nobody listens on):\n");
    setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock", 1);
    rc = run(client, mcpgw_client_prepare_health(client, NULL, &op), &op, NULL,
             MCPGW_RESULT_EXEC_FAILED);
    unsetenv("DOCKER_HOST");
    if (rc != MCPGW_RESULT_EXEC_FAILED) goto out;
    status = 0;
    goto out; /* the container is gone, and its gateway with it */
stop:
    run(client, mcpgw_client_prepare_stop_gateway(client, NULL, &op), &op, NULL,
        MCPGW_RESULT_OK);
out:
    free(args);
    mcpgw_string_free(json);
    mcpgw_client_free(client);
    return status;
}
