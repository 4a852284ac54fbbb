/* refusals.c: what the C ABI refuses, and that a refusal costs nothing but an error.
 *
 *   refusals GATEWAY_BINARY TESTSERVER_BINARY
 *
 * Configurations and operations that are not exactly one JSON document of the vocabulary
 * (trailing bytes, a second object, an operation named by a number) are INVALID_ARGUMENT
 * naming the fault; a gateway binary that is not a regular file (a FIFO, /dev/zero) fails the
 * operation at once with HOST_IO instead of blocking or reading forever; a message larger than
 * the session's frames is INVALID_ARGUMENT on the host instead of a line attach refuses. After
 * each, the same host goes on: a tool call over its session still works. */
#define _POSIX_C_SOURCE 200809L

#include <mcpgw.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "example.h"
#include "host_loop.h"

static int failures = 0;

/* Whether `text` contains `needle`; a failure (printed) when not. */
static void expect(bool ok, const char *what, const char *detail) {
    printf("  %s: %s%s%s\n", ok ? "refused as it should be" : "NOT REFUSED", what,
           detail ? ": " : "", detail ? detail : "");
    if (!ok) failures++;
}

/* mcpgw_host_new(config) must fail with INVALID_ARGUMENT and a message containing `says`. */
static void refuse_config(const char *config, const char *says) {
    mcpgw_host *host = NULL;
    mcpgw_error *err = NULL;
    mcpgw_result rc = mcpgw_host_new(config, &host, &err);
    const char *message = err ? mcpgw_error_message(err) : "";
    expect(rc == MCPGW_RESULT_INVALID_ARGUMENT && host == NULL && strstr(message, says), config,
           message);
    mcpgw_error_free(err);
    mcpgw_host_free(host);
}

/* mcpgw_host_submit(op) must fail with INVALID_ARGUMENT and a message containing `says`, and
 * queue no action. */
static void refuse_op(mcpgw_host *host, const char *op, const char *says) {
    uint64_t id = 0;
    mcpgw_error *err = NULL;
    mcpgw_result rc = mcpgw_host_submit(host, op, &id, &err);
    const char *message = err ? mcpgw_error_message(err) : "";
    bool ok = rc == MCPGW_RESULT_INVALID_ARGUMENT && strstr(message, says) != NULL;
    mcpgw_action *a = mcpgw_host_next_action(host);
    ok = ok && a == NULL;
    mcpgw_action_free(a);
    expect(ok, op, message);
    mcpgw_error_free(err);
}

typedef struct {
    bool opened, closed;
} connection;

static void on_connection(void *userdata, const mcpgw_action *a) {
    connection *c = userdata;
    if (mcpgw_action_get_kind(a) == MCPGW_ACTION_KIND_CONNECTION_OPENED) c->opened = true;
    if (mcpgw_action_get_kind(a) == MCPGW_ACTION_KIND_CONNECTION_CLOSED) c->closed = true;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s GATEWAY_BINARY TESTSERVER_BINARY\n", argv[0]);
        return 2;
    }
    printf("configurations:\n");
    refuse_config("{\"backend\":{\"kind\":\"local\"}} trailing", "follows its JSON document");
    refuse_config("{\"backend\":{\"kind\":\"local\"}}{\"backend\":{\"kind\":\"local\"}}",
                  "follows its JSON document");

    char *spec = example_testserver_spec("test", argv[2]);
    host_loop *loop = spec ? example_local_loop(argv[1]) : NULL;
    if (!loop) return 1;
    mcpgw_host *host = host_loop_host(loop);
    printf("operations:\n");
    refuse_op(host, "{\"op\":\"health\"}{\"op\":\"stop_gateway\"}", "follows its JSON document");
    refuse_op(host, "{\"op\":\"health\"} x", "follows its JSON document");
    refuse_op(host, "{\"op\":0}", "op must be a string");
    refuse_op(host, "{\"op\":1}", "op must be a string");
    refuse_op(host, "{\"op\":\"brew\"}", "unknown operation");
    refuse_op(host, "{\"mcp\":\"x\"}", "no op");

    printf("gateway binaries that are not regular files:\n");
    char dir[] = "/tmp/mcpgw-refusals-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char fifo[64];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    if (mkfifo(fifo, 0600) != 0) return 1;
    const char *paths[] = {fifo, "/dev/zero"};
    for (size_t i = 0; i < 2; i++) {
        host_loop_result r = {0};
        double started = example_now();
        mcpgw_result rc = example_run(loop, MCPGW_RESULT_HOST_IO, &r,
                                      "{\"op\":\"ensure_gateway_binary\",\"binary_path\":\"%s\"}",
                                      paths[i]);
        expect(rc == MCPGW_RESULT_HOST_IO && r.message && strstr(r.message, "not a regular file") &&
                   example_now() - started < 5,
               paths[i], r.message);
        host_loop_result_free(&r);
    }
    unlink(fifo);
    rmdir(dir);

    printf("a message larger than the session's frames:\n");
    int status = 1;
    connection c = {false, false};
    uint64_t conn = 0;
    mcpgw_error *err = NULL;
    host_loop_result r = {0};
    if (!example_ok(loop, NULL, "{\"op\":\"open_session\"}") ||
        !example_ok(loop, NULL, "{\"op\":\"add_mcp\",\"spec\":%s}", spec))
        goto done;
    if (host_loop_connect(loop, "test", NULL, NULL, on_connection, &c, &conn, &err) !=
        MCPGW_RESULT_OK) {
        fprintf(stderr, "connect: %s\n", mcpgw_error_message(err));
        mcpgw_error_free(err);
        goto done;
    }
    while (!c.opened && !c.closed)
        if (host_loop_step(loop) != 0) goto done;
    /* 70 MiB: past the 64 MiB and 64 KiB frames attach announces. */
    size_t len = (size_t)70 << 20;
    char *big = malloc(len);
    if (!big) {
        host_loop_close_connection(loop, conn);
        goto done;
    }
    const char *head = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"pad\":\"";
    memset(big, 'a', len);
    memcpy(big, head, strlen(head));
    memcpy(big + len - 3, "\"}}", 3);
    mcpgw_result rc = host_loop_send(loop, conn, big, len, &err);
    free(big);
    expect(rc == MCPGW_RESULT_INVALID_ARGUMENT && err &&
               strstr(mcpgw_error_message(err), "frame limit"),
           "a 70 MiB message", err ? mcpgw_error_message(err) : NULL);
    mcpgw_error_free(err);
    host_loop_close_connection(loop, conn);
    while (!c.closed)
        if (host_loop_step(loop) != 0) goto done;

    printf("and the host goes on:\n");
    if (example_ok(loop, &r,
                   "{\"op\":\"call_tool\",\"mcp\":\"test\",\"tool\":\"echo\","
                   "\"arguments\":{\"text\":\"still here\"}}")) {
        status = failures ? 1 : 0;
    }
done:
    host_loop_result_free(&r);
    example_run(loop, MCPGW_RESULT_OK, NULL, "{\"op\":\"stop_gateway\"}");
    example_run(loop, MCPGW_RESULT_OK, NULL, "{\"op\":\"close_session\"}");
    host_loop_free(loop);
    free(spec);
    if (failures) fprintf(stderr, "refusals: %d refusal(s) missing\n", failures);
    return status;
}
