/* client.c: every mcpgw_client function against a real gateway, one-shot and over the session
 * channel, with the ready callbacks of exec_process.c.
 *
 *   client GATEWAY_BINARY TESTSERVER_BINARY
 *
 * The "sandbox" is this machine (the `local` backend). In a scope of its own: the gateway
 * launched, the test MCP server registered, its tools listed, a call one-shot; the session
 * opened (the callbacks' channel: `attach` with its stdio piped), calls over it, a streamed call
 * with its progress, a streamed call cancelled from its progress callback, any operation as JSON
 * (`mcpgw_client_run`), the session closed (its channel's process gone when the call returns), a
 * call one-shot again, the gateway stopped. Exits non-zero when anything unexpected happens. */
#define _POSIX_C_SOURCE 200809L

#include <mcpgw.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "example.h"
#include "exec_process.h"

static int failures;

/* The audit records the client handed to its audit callback, by outcome. */
static int audited, audited_ok, audited_cancelled;

static void on_audit(void *userdata, const char *record) {
    (void)userdata;
    audited++;
    audited_ok += strstr(record, "\"outcome\":\"ok\"") != NULL;
    audited_cancelled += strstr(record, "\"outcome\":\"cancelled\"") != NULL;
}

/* Whether `rc` is `want`; prints the error otherwise, and frees it (`*errp`) either way. */
static bool expect(const char *what, mcpgw_result rc, mcpgw_result want, mcpgw_error **errp) {
    mcpgw_error *err = *errp;
    *errp = NULL;
    bool ok = rc == want;
    if (ok)
        printf("%s: %s\n", what, mcpgw_result_name(rc));
    else
        fprintf(stderr, "%s: expected %s, got %s: %s\n", what, mcpgw_result_name(want),
                mcpgw_result_name(rc), err ? mcpgw_error_message(err) : "");
    mcpgw_error_free(err);
    failures += !ok;
    return ok;
}

/* The first text block of a chunk, compared with `want`. */
static bool says(const mcpgw_tool_chunk *chunk, const char *want) {
    const mcpgw_block *block = NULL;
    const char *text = NULL;
    size_t len = 0;
    bool same = mcpgw_tool_chunk_block(chunk, 0, &block) == MCPGW_RESULT_OK &&
                mcpgw_block_text(block, &text, &len) == MCPGW_RESULT_OK &&
                len == strlen(want) && memcmp(text, want, len) == 0;
    if (!same) {
        fprintf(stderr, "expected the text \"%s\", got \"%.*s\"\n", want, (int)len,
                text ? text : "");
        failures++;
    }
    return same;
}

/* Echoes `text` through the client: whether it came back. */
static bool echo(mcpgw_client *client, const char *how, const char *text) {
    char *args = example_format("{\"text\":\"%s\"}", text);
    mcpgw_tool_chunk *chunk = NULL;
    mcpgw_error *err = NULL;
    bool ok = args && expect(how, mcpgw_client_call_tool(client, "test", "echo", args, &chunk, &err),
                             MCPGW_RESULT_OK, &err) &&
              says(chunk, text);
    mcpgw_tool_chunk_free(chunk);
    free(args);
    return ok;
}

typedef struct {
    int chunks;
    int stop_after; /* cancel the call at this chunk; 0: never */
} progress_log;

static bool on_progress(void *userdata, const mcpgw_tool_chunk *chunk) {
    progress_log *log = userdata;
    log->chunks++;
    printf("  progress %d: %s\n", log->chunks,
           mcpgw_tool_chunk_is_last(chunk) ? "last" : "under way");
    return log->stop_after == 0 || log->chunks < log->stop_after;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s GATEWAY_BINARY TESTSERVER_BINARY\n", argv[0]);
        return 2;
    }
    char *gateway = host_loop_json_string(argv[1]);
    char *config = example_format("{\"backend\":{\"kind\":\"local\"},\"gateway_path\":%s,"
                                  "\"timeout_ms\":30000}",
                                  gateway);
    char *spec = example_testserver_spec("test", argv[2]);
    mcpgw_client *client = NULL;
    mcpgw_error *err = NULL;
    char *json = NULL;
    /* The ready callbacks, with an audit callback added: one record per tool call. */
    mcpgw_client_callbacks callbacks = *exec_process();
    callbacks.audit = on_audit;
    if (!config || !spec ||
        !expect("new", mcpgw_client_new(config, &callbacks, NULL, &client, &err),
                MCPGW_RESULT_OK, &err))
        return 1;
    expect("set_scope", mcpgw_client_set_scope(client, "c-client", "session-1", &err),
           MCPGW_RESULT_OK, &err);
    if (!expect("start_gateway", mcpgw_client_start_gateway(client, &err), MCPGW_RESULT_OK, &err))
        goto out;
    if (!expect("add_mcp", mcpgw_client_add_mcp(client, spec, &err), MCPGW_RESULT_OK, &err))
        goto stop;
    if (expect("list_tools", mcpgw_client_list_tools(client, "test", &json, &err),
               MCPGW_RESULT_OK, &err) &&
        !strstr(json, "\"name\":\"echo\"")) {
        fprintf(stderr, "list_tools gave no echo: %s\n", json);
        failures++;
    }
    mcpgw_string_free(json);
    json = NULL;
    echo(client, "call_tool one-shot", "one-shot");

    /* The session channel: the callbacks' channel carries every operation from here. */
    if (!expect("open_session", mcpgw_client_open_session(client, &err), MCPGW_RESULT_OK, &err))
        goto stop;
    for (int i = 0; i < 3; i++) echo(client, "call_tool over the session", "over the session");
    int attach = example_processes("attach", "attach", (int)getpid(), NULL);
    printf("channel processes: %d\n", attach);
    failures += attach != 1;

    progress_log log = {0, 0};
    mcpgw_tool_chunk *chunk = NULL;
    expect("call_tool_stream (4 steps)",
           mcpgw_client_call_tool_stream(client, "test", "slow", "{\"seconds\":1,\"steps\":4}",
                                         on_progress, &log, &chunk, &err),
           MCPGW_RESULT_OK, &err);
    mcpgw_tool_chunk_free(chunk);
    chunk = NULL;
    if (log.chunks != 4) {
        fprintf(stderr, "expected 4 progress chunks, got %d\n", log.chunks);
        failures++;
    }
    /* Cancelled from its progress callback: ends CANCELLED, long before its 30 seconds. */
    progress_log cancel = {0, 1};
    double t0 = example_now();
    expect("call_tool_stream cancelled by its callback",
           mcpgw_client_call_tool_stream(client, "test", "slow", "{\"seconds\":30,\"steps\":30}",
                                         on_progress, &cancel, &chunk, &err),
           MCPGW_RESULT_CANCELLED, &err);
    double took = example_now() - t0;
    printf("cancelled after %.2f s\n", took);
    failures += took > 10;
    echo(client, "call_tool after the cancel", "still here");

    if (expect("run health", mcpgw_client_run(client, "{\"op\":\"health\"}", &json, &err),
               MCPGW_RESULT_OK, &err))
        printf("  %s\n", json);
    mcpgw_string_free(json);
    json = NULL;
    expect("run list_tools in the default scope",
           mcpgw_client_run(client, "{\"op\":\"list_tools\",\"mcp\":\"test\"}", &json, &err),
           MCPGW_RESULT_NOT_FOUND, &err);
    mcpgw_string_free(json);

    expect("close_session", mcpgw_client_close_session(client, &err), MCPGW_RESULT_OK, &err);
    attach = example_processes("attach", "attach", (int)getpid(), NULL);
    printf("channel processes after close_session: %d\n", attach);
    failures += attach != 0;
    echo(client, "call_tool one-shot again", "one-shot again");
    expect("remove_mcp", mcpgw_client_remove_mcp(client, "test", &err), MCPGW_RESULT_OK, &err);
    expect("call_tool of a removed MCP",
           mcpgw_client_call_tool(client, "test", "echo", NULL, &chunk, &err),
           MCPGW_RESULT_NOT_FOUND, &err);
stop:
    expect("stop_gateway", mcpgw_client_stop_gateway(client, &err), MCPGW_RESULT_OK, &err);
    /* Nine tool calls: seven answered, one cancelled, one of a removed MCP. */
    printf("audit records: %d (ok %d, cancelled %d)\n", audited, audited_ok, audited_cancelled);
    failures += audited != 9 || audited_ok != 7 || audited_cancelled != 1;
out:
    mcpgw_client_free(client);
    free(gateway);
    free(config);
    free(spec);
    printf("%s\n", failures ? "FAILED" : "all as expected");
    return failures ? 1 : 0;
}
