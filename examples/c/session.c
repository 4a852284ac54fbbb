/* session.c: every operation over one long-lived channel into the sandbox, from many threads.
 *
 *   session GATEWAY_BINARY TESTSERVER_BINARY
 *
 * The "sandbox" is this machine. open_session makes the driver ask for its channel, `sh -c
 * "mcpgw-gateway attach --launch ..."` with stdin and stdout piped: one spawn launches the
 * gateway and opens the channel. One thread steps the loop; the others hand it operations
 * (host_loop_call) and wait for their answers: the test MCP server is registered, 8 threads run
 * 16 tool calls at once, a slow call streams its progress. A virtual MCP connection is opened
 * over the channel. Then the session is closed, which must end the channel's process, and the
 * gateway is stopped with an ordinary one-shot command. Exits non-zero when anything unexpected
 * happens. */
#define _POSIX_C_SOURCE 200809L

#include <mcpgw.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "example.h"
#include "host_loop.h"

#define THREADS 8
#define CALLS_PER_THREAD 2

/* ---- calling from other threads: hand the operation to the loop's thread, wait ---- */

typedef struct {
    const char *op;
    host_loop_fn progress; /* called on the loop's thread */
    void *progress_userdata;
    host_loop_result result;
    bool done;
    pthread_mutex_t lock;
    pthread_cond_t finished;
} remote_call;

static void remote_finish(remote_call *c) {
    pthread_mutex_lock(&c->lock);
    c->done = true;
    pthread_cond_signal(&c->finished);
    pthread_mutex_unlock(&c->lock);
}

static void remote_event(void *userdata, const mcpgw_action *a) {
    remote_call *c = userdata;
    if (mcpgw_action_get_kind(a) == MCPGW_ACTION_KIND_PROGRESS) {
        if (c->progress) c->progress(c->progress_userdata, a);
        return;
    }
    host_loop_result_set(&c->result, a);
    remote_finish(c);
}

/* Runs on the loop's thread. */
static void remote_submit(host_loop *loop, void *userdata) {
    remote_call *c = userdata;
    mcpgw_error *err = NULL;
    mcpgw_result rc = host_loop_submit(loop, c->op, remote_event, c, NULL, &err);
    if (rc == MCPGW_RESULT_OK) return;
    c->result.code = rc;
    c->result.message = strdup(err ? mcpgw_error_message(err) : mcpgw_result_message(rc));
    mcpgw_error_free(err);
    remote_finish(c);
}

/* From any thread but the loop's: runs `op` on the loop and waits for its end. */
static mcpgw_result call(host_loop *loop, const char *op, host_loop_fn progress, void *userdata,
                         host_loop_result *out) {
    remote_call c = {op, progress, userdata, {0}, false, PTHREAD_MUTEX_INITIALIZER,
                     PTHREAD_COND_INITIALIZER};
    if (host_loop_call(loop, remote_submit, &c) != 0) return MCPGW_RESULT_HOST_IO;
    pthread_mutex_lock(&c.lock);
    while (!c.done) pthread_cond_wait(&c.finished, &c.lock);
    pthread_mutex_unlock(&c.lock);
    if (c.result.code != MCPGW_RESULT_OK)
        fprintf(stderr, "%.40s... failed (%s): %s\n", op, mcpgw_result_name(c.result.code),
                c.result.message);
    *out = c.result;
    return c.result.code;
}

/* ---- the loop's thread ---- */

typedef struct {
    host_loop *loop;
    bool stop; /* read and written on the loop's thread only */
} loop_thread;

static void *step_until_stopped(void *arg) {
    loop_thread *t = arg;
    while (!t->stop)
        if (host_loop_step(t->loop) != 0) {
            perror("host_loop_step");
            break;
        }
    return NULL;
}

static void stop_stepping(host_loop *loop, void *userdata) {
    (void)loop;
    ((loop_thread *)userdata)->stop = true;
}

/* ---- what the threads do ---- */

typedef struct {
    host_loop *loop;
    pthread_barrier_t *start;
    int index;
    int ok; /* calls whose answer was their own */
} worker;

/* Runs this thread's calls over the shared session; each echoes a text of its own. */
static void *work(void *arg) {
    worker *w = arg;
    pthread_barrier_wait(w->start);
    for (int c = 0; c < CALLS_PER_THREAD; c++) {
        char text[64], op[256];
        snprintf(text, sizeof text, "thread %d call %d", w->index, c);
        snprintf(op, sizeof op,
                 "{\"op\":\"call_tool\",\"mcp\":\"test\",\"tool\":\"echo\","
                 "\"arguments\":{\"text\":\"%s\"}}",
                 text);
        host_loop_result r;
        if (call(w->loop, op, NULL, NULL, &r) == MCPGW_RESULT_OK) {
            char want[128];
            snprintf(want, sizeof want, "\"text\":\"%s\"", text);
            if (strstr(r.json, want))
                w->ok++;
            else
                fprintf(stderr, "thread %d: call %d answered %s\n", w->index, c, r.json);
        }
        host_loop_result_free(&r);
    }
    return NULL;
}

typedef struct {
    double started;
    int chunks;
    bool in_order; /* each chunk's progress is its number */
} progress_log;

/* Called on the loop's thread for each progress chunk, as the gateway relays it. */
static void on_progress(void *userdata, const mcpgw_action *a) {
    progress_log *log = userdata;
    size_t len = 0;
    const char *chunk = (const char *)mcpgw_action_bytes(a, &len);
    char want[32];
    snprintf(want, sizeof want, "\"progress\":%d", ++log->chunks);
    if (!chunk || !strstr(chunk, want)) log->in_order = false;
    const char *progress = chunk ? strstr(chunk, "\"mcp_progress\"") : NULL;
    printf("  +%.2f s  progress: %.80s\n", example_now() - log->started,
           progress ? progress : "(none)");
    fflush(stdout);
}

/* A virtual MCP connection's events, on the thread that steps the loop. */
typedef struct {
    bool opened, answered, closed;
    char reason[512];
} connection;

static void on_connection(void *userdata, const mcpgw_action *a) {
    connection *c = userdata;
    size_t len = 0;
    const uint8_t *msg;
    switch (mcpgw_action_get_kind(a)) {
    case MCPGW_ACTION_KIND_CONNECTION_OPENED:
        c->opened = true;
        break;
    case MCPGW_ACTION_KIND_CONNECTION_MESSAGE:
        msg = mcpgw_action_bytes(a, &len);
        printf("  connection message: %.*s\n", (int)(len > 160 ? 160 : len), (const char *)msg);
        c->answered = true;
        break;
    case MCPGW_ACTION_KIND_CONNECTION_CLOSED:
        c->closed = true;
        snprintf(c->reason, sizeof c->reason, "%s",
                 mcpgw_action_text(a) ? mcpgw_action_text(a) : "");
        break;
    default:
        break;
    }
}

/* Opens a connection to MCP `test`: either it opens, answers a ping and closes when told, or
 * the gateway refuses it and it closes at once with the reason. Returns whether either
 * happened as it should. Steps the loop on this thread. */
static bool try_connection(host_loop *loop) {
    connection c = {false, false, false, ""};
    uint64_t id;
    mcpgw_error *err = NULL;
    if (host_loop_connect(loop, "test", NULL, NULL, on_connection, &c, &id, &err) !=
        MCPGW_RESULT_OK) {
        fprintf(stderr, "connect: %s\n", mcpgw_error_message(err));
        mcpgw_error_free(err);
        return false;
    }
    while (!c.opened && !c.closed)
        if (host_loop_step(loop) != 0) return false;
    if (c.closed) {
        printf("  the connection was refused: %s\n", c.reason);
        return c.reason[0] != '\0';
    }
    const char *ping = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}";
    if (host_loop_send(loop, id, ping, strlen(ping), &err) != MCPGW_RESULT_OK) {
        fprintf(stderr, "send: %s\n", mcpgw_error_message(err));
        mcpgw_error_free(err);
        return false;
    }
    while (!c.answered && !c.closed)
        if (host_loop_step(loop) != 0) return false;
    host_loop_close_connection(loop, id);
    while (!c.closed)
        if (host_loop_step(loop) != 0) return false;
    printf("  the connection opened, answered a ping and closed\n");
    return c.answered && c.reason[0] == '\0';
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s GATEWAY_BINARY TESTSERVER_BINARY\n", argv[0]);
        return 2;
    }
    /* A state directory of our own: its path in `attach`'s arguments finds the process later. */
    char state_dir[64];
    snprintf(state_dir, sizeof state_dir, "/tmp/mcpgw-session-example.%ld", (long)getpid());
    char *gateway = host_loop_json_string(argv[1]);
    char *spec = example_testserver_spec("test", argv[2]);
    host_loop *loop = gateway && spec ? example_loop("{\"backend\":{\"kind\":\"local\"},"
                                                     "\"gateway_path\":%s,\"state_dir\":\"%s\","
                                                     "\"timeout_ms\":30000}",
                                                     gateway, state_dir)
                                      : NULL;
    char *add = spec ? example_format("{\"op\":\"add_mcp\",\"spec\":%s}", spec) : NULL;
    if (!loop || !add) return 1;
    int status = 1;
    loop_thread stepper = {loop, false};
    pthread_t stepping;
    if (pthread_create(&stepping, NULL, step_until_stopped, &stepper) != 0) return 1;

    /* From here the loop is the stepping thread's: this one hands it operations. */
    double t0 = example_now();
    host_loop_result r = {0};
    if (call(loop, "{\"op\":\"open_session\"}", NULL, NULL, &r) != MCPGW_RESULT_OK) goto join;
    printf("session open after %.2f s: %s\n", example_now() - t0, r.json);
    host_loop_result_free(&r);
    if (call(loop, add, NULL, NULL, &r) != MCPGW_RESULT_OK) goto close;
    host_loop_result_free(&r);
    printf("test server registered over the session\n");

    /* Many threads, one channel: the calls are multiplexed by id. */
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, THREADS);
    worker workers[THREADS];
    pthread_t threads[THREADS];
    int started = 0;
    t0 = example_now();
    for (int i = 0; i < THREADS; i++) {
        workers[i] = (worker){loop, &start, i, 0};
        if (pthread_create(&threads[i], NULL, work, &workers[i]) != 0) break;
        started++;
    }
    if (started < THREADS) {
        /* The barrier would never open: the example cannot go on. */
        fprintf(stderr, "cannot start %d threads\n", THREADS);
        return 1;
    }
    int answered = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        answered += workers[i].ok;
    }
    pthread_barrier_destroy(&start);
    printf("%d of %d calls from %d threads answered correctly in %.2f s over one channel\n",
           answered, THREADS * CALLS_PER_THREAD, THREADS, example_now() - t0);
    if (answered != THREADS * CALLS_PER_THREAD) goto close;

    /* Progress as it happens: a 2-second call with 4 steps. */
    progress_log log = {example_now(), 0, true};
    printf("slow call, streaming:\n");
    if (call(loop,
             "{\"op\":\"call_tool\",\"mcp\":\"test\",\"tool\":\"slow\","
             "\"arguments\":{\"seconds\":2,\"steps\":4},\"stream\":true}",
             on_progress, &log, &r) != MCPGW_RESULT_OK)
        goto close;
    host_loop_result_free(&r);
    printf("  +%.2f s  result\n", example_now() - log.started);
    if (log.chunks != 4 || !log.in_order) {
        fprintf(stderr, "expected 4 progress chunks, in order\n");
        goto close;
    }
    status = 0;
close:
    if (call(loop, "{\"op\":\"close_session\"}", NULL, NULL, &r) != MCPGW_RESULT_OK) status = 1;
    host_loop_result_free(&r);
join:
    host_loop_call(loop, stop_stepping, &stepper);
    pthread_join(stepping, NULL);

    /* The loop is this thread's again. The channel's process ends once its input closed. */
    if (host_loop_settle(loop) != 0) status = 1;
    int left = example_processes("attach", state_dir, 0, NULL);
    printf("channel closed: %d attach process(es) left\n", left);
    if (left != 0) status = 1;

    /* Over a new session: a virtual MCP connection (raw JSON-RPC to the MCP). */
    printf("a virtual MCP connection:\n");
    if (!example_ok(loop, NULL, "{\"op\":\"open_session\"}") || !try_connection(loop) ||
        !example_ok(loop, NULL, "{\"op\":\"close_session\"}"))
        status = 1;
    /* The session's hello made the driver know the gateway it launched: stop it one-shot. */
    if (!example_ok(loop, NULL, "{\"op\":\"stop_gateway\"}")) status = 1;
    host_loop_free(loop);
    free(gateway);
    free(spec);
    free(add);
    return status;
}
