/* client_refusals.c: what mcpgw_client does with bad arguments and with callbacks that misbehave:
 * each is a clear error naming the fault, the client stays usable, nothing crashes or leaks
 * (make check runs it under valgrind and ASan too).
 *
 *   client_refusals GATEWAY_BINARY TESTSERVER_BINARY
 *
 * The callbacks wrap exec_process()'s (the `local` backend: this machine) and break them one way
 * at a time: an exec that never replies, replies twice, replies a status out of range or stdout
 * after the fact, fails with a reason, calls the client back; a channel that cannot be opened and
 * says nothing, that writes bytes that are no frames, that fails its writes; a finalizer called
 * once. Exits non-zero when anything unexpected happens. */
#define _POSIX_C_SOURCE 200809L

#include <mcpgw.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example.h"
#include "exec_process.h"

typedef enum {
    FINE,
    EXEC_SILENT,       /* exec says nothing */
    EXEC_TWICE,        /* exec replies, then replies again */
    EXEC_BAD_STATUS,   /* exec replies status 300, and nothing else */
    EXEC_STDOUT,       /* exec replies stdout (a channel's word), then as it should */
    EXEC_FAILS,        /* exec fails with a reason */
    EXEC_REENTERS,     /* exec calls the client, then replies as it should */
    OPEN_SILENT,       /* channel_open returns NULL and says nothing */
    READ_GARBAGE,      /* the channel writes lines that are no frames, then exits */
    READ_AFTER_EOF,    /* channel_read says stdout after its eof */
    WRITE_FAILS,       /* the next channel_write fails (then they work again) */
} fault;

typedef struct {
    fault fault;
    mcpgw_client *self;
    int finalized;
    mcpgw_result second; /* what a second reply, a bad status or a reentrant call returned */
} sandbox;

static const mcpgw_client_callbacks *real;

static void exec(void *userdata, const mcpgw_exec_request *req, mcpgw_reply *reply) {
    sandbox *s = userdata;
    switch (s->fault) {
    case EXEC_SILENT:
        return;
    case EXEC_BAD_STATUS:
        s->second = mcpgw_reply_exited(reply, 300, NULL, 0, NULL, 0);
        return;
    case EXEC_STDOUT:
        s->second = mcpgw_reply_stdout(reply, (const uint8_t *)"x", 1);
        break;
    case EXEC_FAILS:
        mcpgw_reply_failed(reply, "the test sandbox is gone");
        return;
    case EXEC_REENTERS: {
        mcpgw_error *err = NULL;
        s->second = mcpgw_client_start_gateway(s->self, &err);
        mcpgw_error_free(err);
        break;
    }
    default:
        break;
    }
    real->exec(NULL, req, reply);
    if (s->fault == EXEC_TWICE) s->second = mcpgw_reply_exited(reply, 0, NULL, 0, NULL, 0);
}

static void *channel_open(void *userdata, const mcpgw_exec_request *req, mcpgw_reply *reply) {
    sandbox *s = userdata;
    if (s->fault == OPEN_SILENT) return NULL;
    if (s->fault == READ_GARBAGE) {
        /* A channel whose command prints no frames at all. */
        const char *argv[] = {"sh", "-c", "echo not a frame; echo '{\"neither\":1}'; cat >/dev/null"};
        mcpgw_exec_request garbage = *req;
        garbage.argv = argv;
        garbage.argc = 3;
        return real->channel_open(NULL, &garbage, reply);
    }
    return real->channel_open(NULL, req, reply);
}

static void channel_write(void *userdata, void *channel, const uint8_t *bytes, size_t len,
                          mcpgw_reply *reply) {
    sandbox *s = userdata;
    if (s->fault == WRITE_FAILS) {
        s->fault = FINE;
        mcpgw_reply_failed(reply, "the test channel refuses a write");
        return;
    }
    real->channel_write(NULL, channel, bytes, len, reply);
}

static void channel_read(void *userdata, void *channel, uint32_t timeout_ms, mcpgw_reply *reply) {
    sandbox *s = userdata;
    if (s->fault == READ_AFTER_EOF) {
        mcpgw_reply_eof(reply);
        s->second = mcpgw_reply_stdout(reply, (const uint8_t *)"late", 4);
        mcpgw_reply_failed(reply, "the test channel ended");
        return;
    }
    real->channel_read(NULL, channel, timeout_ms, reply);
}

static void channel_close_input(void *userdata, void *channel) {
    (void)userdata;
    real->channel_close_input(NULL, channel);
}

static int32_t channel_close(void *userdata, void *channel) {
    (void)userdata;
    return real->channel_close(NULL, channel);
}

static void finalize(void *userdata) { ((sandbox *)userdata)->finalized++; }

static void notice(void *userdata, const char *text) {
    (void)userdata;
    fprintf(stderr, "  notice: %s\n", text);
}

static int failures;

/* Whether `rc` is `want` with a message containing `words` (NULL: any); prints it. Frees the
 * error (`*errp`). */
static bool expect(const char *what, mcpgw_result rc, mcpgw_result want, mcpgw_error **errp,
                   const char *words) {
    mcpgw_error *err = *errp;
    *errp = NULL;
    const char *message = err ? mcpgw_error_message(err) : "";
    bool ok = rc == want && (!words || strstr(message, words));
    printf("%s %s: %s%s%s\n", ok ? "ok  " : "FAIL", what, mcpgw_result_name(rc),
           *message ? ": " : "", message);
    if (!ok)
        fprintf(stderr, "  expected %s%s%s\n", mcpgw_result_name(want), words ? " saying " : "",
                words ? words : "");
    mcpgw_error_free(err);
    failures += !ok;
    return ok;
}

static void check(const char *what, bool ok) {
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    failures += !ok;
}

/* Echoes through the client: whether the answer came. */
static bool echo(mcpgw_client *client) {
    mcpgw_tool_chunk *chunk = NULL;
    mcpgw_error *err = NULL;
    mcpgw_result rc =
        mcpgw_client_call_tool(client, "test", "echo", "{\"text\":\"hi\"}", &chunk, &err);
    mcpgw_tool_chunk_free(chunk);
    mcpgw_error_free(err);
    return rc == MCPGW_RESULT_OK;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s GATEWAY_BINARY TESTSERVER_BINARY\n", argv[0]);
        return 2;
    }
    real = exec_process();
    char *gateway = host_loop_json_string(argv[1]);
    char *config = example_format("{\"backend\":{\"kind\":\"local\"},\"gateway_path\":%s,"
                                  "\"timeout_ms\":20000,\"open_timeout_ms\":3000}",
                                  gateway);
    char *spec = example_testserver_spec("test", argv[2]);
    if (!config || !spec) return 1;
    mcpgw_client_callbacks table = {.size = sizeof table,
                                    .exec = exec,
                                    .channel_open = channel_open,
                                    .channel_write = channel_write,
                                    .channel_read = channel_read,
                                    .channel_close_input = channel_close_input,
                                    .channel_close = channel_close,
                                    .notice = notice,
                                    .finalize = finalize};
    sandbox s = {FINE, NULL, 0, MCPGW_RESULT_OK};
    mcpgw_client *client = NULL;
    mcpgw_error *err = NULL;

    /* ---- mcpgw_client_new refuses, and keeps nothing ---- */
    expect("new without a configuration", mcpgw_client_new(NULL, &table, &s, &client, &err),
           MCPGW_RESULT_NULL_PARAMETER, &err, "config_json");
    expect("new without callbacks", mcpgw_client_new(config, NULL, &s, &client, &err),
           MCPGW_RESULT_NULL_PARAMETER, &err, "callbacks");
    expect("new without client_out", mcpgw_client_new(config, &table, &s, NULL, &err),
           MCPGW_RESULT_NULL_PARAMETER, &err, "client_out");
    mcpgw_client_callbacks bad = table;
    bad.size = 0;
    expect("new with callbacks of size 0", mcpgw_client_new(config, &bad, &s, &client, &err),
           MCPGW_RESULT_INVALID_ARGUMENT, &err, "sizeof(mcpgw_client_callbacks)");
    bad = table;
    bad.exec = NULL;
    expect("new without exec", mcpgw_client_new(config, &bad, &s, &client, &err),
           MCPGW_RESULT_INVALID_ARGUMENT, &err, "exec");
    bad = table;
    bad.channel_read = NULL;
    expect("new with a channel without channel_read",
           mcpgw_client_new(config, &bad, &s, &client, &err), MCPGW_RESULT_INVALID_ARGUMENT, &err,
           "incomplete");
    expect("new with a configuration that is no JSON",
           mcpgw_client_new("{\"backend\":", &table, &s, &client, &err),
           MCPGW_RESULT_INVALID_ARGUMENT, &err, NULL);
    expect("new with a backend of no kind",
           mcpgw_client_new("{\"backend\":{\"kind\":\"moon\"}}", &table, &s, &client, &err),
           MCPGW_RESULT_INVALID_ARGUMENT, &err, "moon");
    check("no finalize for a client never made", s.finalized == 0 && client == NULL);
    /* A table of an older, shorter version: exec alone. */
    bad = table;
    bad.size = offsetof(mcpgw_client_callbacks, channel_open);
    if (expect("new with a table that ends after exec",
               mcpgw_client_new(config, &bad, &s, &client, &err), MCPGW_RESULT_OK, &err, NULL)) {
        expect("open_session without a channel", mcpgw_client_open_session(client, &err),
               MCPGW_RESULT_SESSION_LOST, &err, "no channel");
        mcpgw_client_free(client);
        check("its finalize, past its size, was not read", s.finalized == 0);
    }
    client = NULL;

    /* ---- callbacks that misbehave ---- */
    if (!expect("new", mcpgw_client_new(config, &table, &s, &client, &err), MCPGW_RESULT_OK, &err,
                NULL))
        return 1;
    s.self = client;
    s.fault = EXEC_SILENT;
    expect("an exec that says nothing", mcpgw_client_start_gateway(client, &err),
           MCPGW_RESULT_EXEC_FAILED, &err, "did not reply");
    s.fault = EXEC_BAD_STATUS;
    expect("an exec that replies status 300", mcpgw_client_start_gateway(client, &err),
           MCPGW_RESULT_EXEC_FAILED, &err, "did not reply");
    check("  its reply refused as INVALID_ARGUMENT", s.second == MCPGW_RESULT_INVALID_ARGUMENT);
    s.fault = EXEC_FAILS;
    expect("an exec that fails", mcpgw_client_start_gateway(client, &err),
           MCPGW_RESULT_EXEC_FAILED, &err, "the test sandbox is gone");
    s.fault = EXEC_REENTERS;
    expect("an exec that calls the client back", mcpgw_client_start_gateway(client, &err),
           MCPGW_RESULT_OK, &err, NULL);
    check("  the call back refused as INVALID_STATE", s.second == MCPGW_RESULT_INVALID_STATE);
    s.fault = EXEC_TWICE;
    expect("an exec that replies twice", mcpgw_client_add_mcp(client, spec, &err),
           MCPGW_RESULT_OK, &err, NULL);
    check("  its second reply refused as INVALID_STATE", s.second == MCPGW_RESULT_INVALID_STATE);
    s.fault = EXEC_STDOUT;
    check("an exec that replies stdout: its call goes on", echo(client));
    check("  its stdout refused as INVALID_STATE", s.second == MCPGW_RESULT_INVALID_STATE);
    s.fault = FINE;
    expect("add_mcp with a spec that is no JSON", mcpgw_client_add_mcp(client, "{", &err),
           MCPGW_RESULT_INVALID_ARGUMENT, &err, "spec_json");
    expect("call_tool with arguments that are no JSON",
           mcpgw_client_call_tool(client, "test", "echo", "[1,", &(mcpgw_tool_chunk *){NULL}, &err),
           MCPGW_RESULT_INVALID_ARGUMENT, &err, "arguments_json");
    expect("call_tool without chunk_out",
           mcpgw_client_call_tool(client, "test", "echo", NULL, NULL, &err),
           MCPGW_RESULT_NULL_PARAMETER, &err, "chunk_out");
    expect("run of an operation that is none",
           mcpgw_client_run(client, "{\"op\":\"fly\"}", &(char *){NULL}, &err),
           MCPGW_RESULT_INVALID_ARGUMENT, &err, "fly");
    expect("a NULL client", mcpgw_client_start_gateway(NULL, &err), MCPGW_RESULT_NULL_PARAMETER,
           &err, NULL);
    check("replies to no reply are refused",
          mcpgw_reply_exited(NULL, 0, NULL, 0, NULL, 0) == MCPGW_RESULT_NULL_PARAMETER &&
              mcpgw_reply_eof(NULL) == MCPGW_RESULT_NULL_PARAMETER);

    s.fault = OPEN_SILENT;
    expect("a channel that cannot be opened and says nothing",
           mcpgw_client_open_session(client, &err), MCPGW_RESULT_SESSION_LOST, &err,
           "no channel and no reason");
    s.fault = READ_GARBAGE;
    expect("a channel that writes no frames", mcpgw_client_open_session(client, &err),
           MCPGW_RESULT_DEADLINE, &err, "did not open");
    s.fault = READ_AFTER_EOF;
    expect("a channel that says stdout after its eof", mcpgw_client_open_session(client, &err),
           MCPGW_RESULT_SESSION_LOST, &err, "the test channel ended");
    check("  its late stdout refused as INVALID_STATE", s.second == MCPGW_RESULT_INVALID_STATE);
    s.fault = FINE;
    check("a call one-shot after all that", echo(client));
    if (expect("open_session", mcpgw_client_open_session(client, &err), MCPGW_RESULT_OK, &err,
               NULL)) {
        s.fault = WRITE_FAILS;
        mcpgw_tool_chunk *chunk = NULL;
        mcpgw_result rc =
            mcpgw_client_call_tool(client, "test", "echo", "{\"text\":\"hi\"}", &chunk, &err);
        mcpgw_tool_chunk_free(chunk);
        printf("a call over a channel whose write fails: %s%s%s\n", mcpgw_result_name(rc),
               err ? ": " : "", err ? mcpgw_error_message(err) : "");
        check("  answered (OK after a new channel, or SESSION_LOST)",
              rc == MCPGW_RESULT_OK || rc == MCPGW_RESULT_SESSION_LOST ||
                  rc == MCPGW_RESULT_EXEC_FAILED);
        mcpgw_error_free(err);
        err = NULL;
        s.fault = FINE;
        expect("close_session", mcpgw_client_close_session(client, &err), MCPGW_RESULT_OK, &err,
               NULL);
    }
    check("a call one-shot at the end", echo(client));
    expect("stop_gateway", mcpgw_client_stop_gateway(client, &err), MCPGW_RESULT_OK, &err, NULL);
    mcpgw_client_free(client);
    check("finalize called once", s.finalized == 1);
    mcpgw_client_free(NULL);
    free(gateway);
    free(config);
    free(spec);
    printf("%s\n", failures ? "FAILED" : "all refused or answered as expected");
    return failures ? 1 : 0;
}
