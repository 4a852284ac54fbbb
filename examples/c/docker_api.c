/* docker_api.c: exec callbacks that are not a process: each command goes to the Docker Engine's
 * HTTP API on its Unix socket (no docker CLI), so the callback is where a program plugs in
 * whatever reaches its sandbox (a provider's HTTP API, an SDK, an agent of its own).
 *
 *   docker_api CONTAINER
 *
 * The client's backend is `exec` (`{"kind":"exec","passes_stdin":true}`): the driver gives `sh
 * -c` text and stdin bytes, and these callbacks run it in CONTAINER with the Engine's exec API:
 * `POST /containers/{id}/exec`, then `POST /exec/{id}/start` upgraded to the raw stream (stdout
 * and stderr frames one way, stdin the other, half-closed at its end), then `GET
 * /exec/{id}/json` for the exit status. The session channel is one such exec that stays open.
 * The Engine's answers become the reply: 404 and 409 (no such container, not running) and a
 * socket that cannot be reached are failures to run, never a command's own failure.
 *
 * With the container's gateway (/usr/local/bin/mcpgw-gateway, and the test MCP server beside it,
 * as in tests/docker/sandbox.sh's image): launches it, registers the server, calls `echo`
 * one-shot with 1 MiB of arguments (through stdin), opens the session, calls over it with
 * progress, closes it, stops the gateway. The Engine's socket is DOCKER_HOST (unix://...) or
 * /var/run/docker.sock. Exits non-zero when anything unexpected happens.
 *
 * The Engine's exec API cannot kill an exec: a command past its time limit is left to end by
 * itself (the driver has already given it up), and a channel ends when its stdin closes. */
#define _GNU_SOURCE /* strndup */

#include <mcpgw.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "example.h"

typedef struct {
    char socket_path[108];
    char *container; /* as JSON-safe path text: checked to be [A-Za-z0-9_.-] */
} engine;

typedef struct {
    char *data;
    size_t len, cap;
} text;

static int add(text *t, const void *data, size_t len) {
    if (t->len + len + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 4096;
        while (cap < t->len + len + 1) cap *= 2;
        char *grown = realloc(t->data, cap);
        if (!grown) return -1;
        t->data = grown;
        t->cap = cap;
    }
    memcpy(t->data + t->len, data, len);
    t->len += len;
    t->data[t->len] = '\0';
    return 0;
}

/* A connection to the Engine, or -1 with the reason in `why`. */
static int dial(const engine *e, char *why, size_t why_len) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    memcpy(addr.sun_path, e->socket_path, sizeof addr.sun_path);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0) return fd;
    snprintf(why, why_len, "the Docker Engine at %s cannot be reached: %s", e->socket_path,
             strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
}

static int send_all(int fd, const void *data, size_t len) {
    const char *p = data;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Sends a request; 0, or -1 with the reason in `why`. */
static int request(int fd, const char *method, const char *path, const char *body, bool upgrade,
                   char *why, size_t why_len) {
    char head[512];
    size_t body_len = body ? strlen(body) : 0;
    int n = snprintf(head, sizeof head,
                     "%s %s HTTP/1.1\r\nHost: docker\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n%s\r\n",
                     method, path, body_len,
                     upgrade ? "Connection: Upgrade\r\nUpgrade: tcp\r\n" : "Connection: close\r\n");
    if (n < 0 || (size_t)n >= sizeof head || send_all(fd, head, (size_t)n) != 0 ||
        (body_len && send_all(fd, body, body_len) != 0)) {
        snprintf(why, why_len, "writing to the Docker Engine: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* Reads an answer's head (up to its blank line) into `head`; its status, or -1. */
static int read_head(int fd, text *head) {
    char c;
    while (!head->len || !strstr(head->data, "\r\n\r\n")) {
        ssize_t n = read(fd, &c, 1);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0 || add(head, &c, 1) != 0 || head->len > 16384) return -1;
    }
    int status = 0;
    return sscanf(head->data, "HTTP/1.%*d %d", &status) == 1 ? status : -1;
}

/* One whole request and answer on a connection of its own: the status, the body in `body`. */
static int exchange(const engine *e, const char *method, const char *path, const char *body_in,
                    text *body, char *why, size_t why_len) {
    int fd = dial(e, why, why_len);
    if (fd < 0) return -1;
    text head = {0};
    int status = -1;
    if (request(fd, method, path, body_in, false, why, why_len) == 0) {
        status = read_head(fd, &head);
        char buf[4096];
        ssize_t n;
        while ((n = read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
            if (n > 0 && add(body, buf, (size_t)n) != 0) status = -1;
        if (status > 0 && head.data && strcasestr(head.data, "transfer-encoding: chunked")) {
            /* Joins the chunks in place. */
            char *in = body->data, *out = body->data, *end = body->data + body->len;
            while (in && in < end) {
                size_t size = strtoul(in, &in, 16);
                in = strstr(in, "\r\n");
                if (!in || size == 0) break;
                in += 2;
                if (size > (size_t)(end - in)) size = (size_t)(end - in);
                memmove(out, in, size);
                out += size;
                in += size + 2;
            }
            body->len = (size_t)(out - body->data);
            body->data[body->len] = '\0';
        }
        if (status < 0) snprintf(why, why_len, "the Docker Engine's answer is not HTTP");
    }
    free(head.data);
    close(fd);
    return status;
}

/* The text of string member `key` of a JSON answer (no escapes in it), or NULL. */
static char *member(const char *json, const char *key) {
    char want[64];
    snprintf(want, sizeof want, "\"%s\":\"", key);
    const char *at = json ? strstr(json, want) : NULL;
    return at ? strndup(at + strlen(want), strcspn(at + strlen(want), "\"")) : NULL;
}

/* Explains a refused request: the Engine's message, which names the container's state. */
static void refused(int status, const text *body, const char *what, char *why, size_t why_len) {
    char *message = member(body->data, "message");
    snprintf(why, why_len, "the Docker Engine refused %s (HTTP %d): %s", what, status,
             message ? message : (body->data ? body->data : ""));
    free(message);
}

/* An exec being run: its id, and the upgraded connection carrying its streams. */
typedef struct {
    const engine *engine;
    char id[80];
    int fd;
    unsigned char frame[8]; /* the header of the frame being read */
    size_t have;            /* bytes of it read */
    size_t left;            /* payload bytes of the current frame still to come */
    int stream;             /* 1 stdout, 2 stderr */
    bool eof;
} execution;

/* Creates and starts an exec of `sh -c shell` in the container; false with `why` filled. */
static bool start(const engine *e, const char *shell, bool with_stdin, execution *x, char *why,
                  size_t why_len) {
    *x = (execution){.engine = e, .fd = -1};
    char *cmd = host_loop_json_string(shell);
    char *body = cmd ? example_format("{\"AttachStdin\":%s,\"AttachStdout\":true,"
                                      "\"AttachStderr\":true,\"Tty\":false,"
                                      "\"Cmd\":[\"sh\",\"-c\",%s]}",
                                      with_stdin ? "true" : "false", cmd)
                     : NULL;
    char path[256];
    snprintf(path, sizeof path, "/containers/%s/exec", e->container);
    text answer = {0};
    int status = body ? exchange(e, "POST", path, body, &answer, why, why_len) : -1;
    char *id = status == 201 ? member(answer.data, "Id") : NULL;
    if (status > 0 && status != 201) refused(status, &answer, "the exec", why, why_len);
    free(cmd);
    free(body);
    free(answer.data);
    if (!id || strlen(id) >= sizeof x->id) {
        if (status == 201) snprintf(why, why_len, "the Docker Engine gave no exec id");
        free(id);
        return false;
    }
    strcpy(x->id, id);
    free(id);
    snprintf(path, sizeof path, "/exec/%s/start", x->id);
    x->fd = dial(e, why, why_len);
    text head = {0};
    if (x->fd < 0 ||
        request(x->fd, "POST", path, "{\"Detach\":false,\"Tty\":false}", true, why, why_len) != 0 ||
        (status = read_head(x->fd, &head)) != 101) {
        if (x->fd >= 0 && status > 0 && status != 101)
            snprintf(why, why_len, "the Docker Engine did not start the exec (HTTP %d)", status);
        if (x->fd >= 0) close(x->fd);
        x->fd = -1;
        free(head.data);
        return false;
    }
    free(head.data);
    return true;
}

/* Reads what the exec's connection has (waiting up to `wait_ms`), handing each payload piece to
 * `out` (stream 1 or 2). Sets `x->eof` at its end. -1 on a read error. */
static int pump(execution *x, int wait_ms, void (*out)(void *, int, const char *, size_t),
                void *arg) {
    struct pollfd p = {.fd = x->fd, .events = POLLIN};
    if (poll(&p, 1, wait_ms) <= 0) return 0;
    char buf[65536];
    ssize_t n = read(x->fd, buf, sizeof buf);
    if (n < 0) return errno == EINTR || errno == EAGAIN ? 0 : -1;
    if (n == 0) {
        x->eof = true;
        return 0;
    }
    for (size_t i = 0; i < (size_t)n;) {
        if (x->left == 0) {
            x->frame[x->have++] = (unsigned char)buf[i++];
            if (x->have == 8) {
                x->stream = x->frame[0];
                x->left = (size_t)x->frame[4] << 24 | (size_t)x->frame[5] << 16 |
                          (size_t)x->frame[6] << 8 | x->frame[7];
                x->have = 0;
            }
            continue;
        }
        size_t take = (size_t)n - i < x->left ? (size_t)n - i : x->left;
        out(arg, x->stream, buf + i, take);
        i += take;
        x->left -= take;
    }
    return 0;
}

/* The exec's exit status once it ended, or -1 with `why` filled. */
static int exit_status(execution *x, char *why, size_t why_len) {
    char path[128];
    snprintf(path, sizeof path, "/exec/%s/json", x->id);
    for (int tries = 0; tries < 200; tries++) {
        text answer = {0};
        int status = exchange(x->engine, "GET", path, NULL, &answer, why, why_len);
        const char *code = answer.data ? strstr(answer.data, "\"ExitCode\":") : NULL;
        bool running = answer.data && strstr(answer.data, "\"Running\":true");
        int value = code ? atoi(code + strlen("\"ExitCode\":")) : -1;
        if (status != 200) refused(status, &answer, "the exec's status", why, why_len);
        free(answer.data);
        if (status != 200) return -1;
        if (!running && value >= 0) return value;
        usleep(5000); /* the stream ends a moment before the Engine records the exit */
    }
    snprintf(why, why_len, "the Docker Engine kept the exec running after its streams ended");
    return -1;
}

/* ---- the callbacks ---- */

typedef struct {
    text out, err;
} outputs;

static void collect(void *arg, int stream, const char *data, size_t len) {
    outputs *o = arg;
    add(stream == 2 ? &o->err : &o->out, data, len);
}

static void exec_cb(void *userdata, const mcpgw_exec_request *req, mcpgw_reply *reply) {
    char why[1024];
    execution x;
    bool with_stdin = req->stdin_kind != MCPGW_STDIN_KIND_NULL;
    if (!req->shell) {
        mcpgw_reply_failed(reply, "docker_api runs the exec backend's sh -c text");
        return;
    }
    if (!start(userdata, req->shell, with_stdin, &x, why, sizeof why)) {
        mcpgw_reply_failed(reply, why);
        return;
    }
    if (with_stdin && ((req->stdin_len && send_all(x.fd, req->stdin_bytes, req->stdin_len) != 0) ||
                       (req->stdin_kind == MCPGW_STDIN_KIND_BYTES && shutdown(x.fd, SHUT_WR) != 0))) {
        /* It stopped reading: its status tells. */
    }
    outputs o = {{0}, {0}};
    double deadline = example_now() + req->timeout_ms / 1000.0;
    while (!x.eof && example_now() < deadline)
        if (pump(&x, 50, collect, &o) != 0) break;
    close(x.fd);
    int code = x.eof ? exit_status(&x, why, sizeof why) : 137;
    if (code < 0)
        mcpgw_reply_failed(reply, why);
    else
        mcpgw_reply_exited(reply, code, (const uint8_t *)o.out.data, o.out.len,
                           (const uint8_t *)o.err.data, o.err.len);
    free(o.out.data);
    free(o.err.data);
}

static void *open_cb(void *userdata, const mcpgw_exec_request *req, mcpgw_reply *reply) {
    char why[1024];
    execution *x = malloc(sizeof *x);
    if (!x || !req->shell || !start(userdata, req->shell, true, x, why, sizeof why)) {
        mcpgw_reply_failed(reply, !x ? "out of memory" : !req->shell ? "no sh -c text" : why);
        free(x);
        return NULL;
    }
    return x;
}

static void write_cb(void *userdata, void *channel, const uint8_t *bytes, size_t len,
                     mcpgw_reply *reply) {
    (void)userdata;
    if (send_all(((execution *)channel)->fd, bytes, len) != 0)
        mcpgw_reply_failed(reply, "the exec's stdin is closed");
}

static void relay(void *reply, int stream, const char *data, size_t len) {
    if (stream == 2)
        mcpgw_reply_stderr(reply, (const uint8_t *)data, len);
    else
        mcpgw_reply_stdout(reply, (const uint8_t *)data, len);
}

static void read_cb(void *userdata, void *channel, uint32_t timeout_ms, mcpgw_reply *reply) {
    (void)userdata;
    execution *x = channel;
    char why[1024];
    if (pump(x, timeout_ms > 60000 ? 60000 : (int)timeout_ms, relay, reply) != 0) {
        mcpgw_reply_failed(reply, "reading the exec's streams failed");
        return;
    }
    if (!x->eof) return;
    mcpgw_reply_eof(reply);
    int code = exit_status(x, why, sizeof why);
    if (code < 0)
        mcpgw_reply_failed(reply, why);
    else
        mcpgw_reply_exited(reply, code, NULL, 0, NULL, 0);
}

static void close_input_cb(void *userdata, void *channel) {
    (void)userdata;
    shutdown(((execution *)channel)->fd, SHUT_WR);
}

static int32_t close_cb(void *userdata, void *channel) {
    (void)userdata;
    execution *x = channel;
    close(x->fd); /* its stdin ends with the connection: attach then ends too */
    free(x);
    return -1;
}

static const mcpgw_client_callbacks DOCKER_API = {
    .size = sizeof(mcpgw_client_callbacks),
    .exec = exec_cb,
    .channel_open = open_cb,
    .channel_write = write_cb,
    .channel_read = read_cb,
    .channel_close_input = close_input_cb,
    .channel_close = close_cb,
};

/* ---- the program ---- */

static int failures;

static bool ok(const char *what, mcpgw_result rc, mcpgw_error **errp) {
    mcpgw_error *err = *errp;
    *errp = NULL;
    printf("%s: %s%s%s\n", what, mcpgw_result_name(rc), err ? ": " : "",
           err ? mcpgw_error_message(err) : "");
    mcpgw_error_free(err);
    failures += rc != MCPGW_RESULT_OK;
    return rc == MCPGW_RESULT_OK;
}

static bool on_progress(void *userdata, const mcpgw_tool_chunk *chunk) {
    (void)chunk;
    ++*(int *)userdata;
    return true;
}

int main(int argc, char **argv) {
    if (argc != 2 || strspn(argv[1], "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                      "0123456789_.-") != strlen(argv[1])) {
        fprintf(stderr, "usage: %s CONTAINER (a name or id)\n", argv[0]);
        return 2;
    }
    engine e = {.container = argv[1]};
    const char *host = getenv("DOCKER_HOST");
    const char *path = host && strncmp(host, "unix://", 7) == 0 ? host + 7 : "/var/run/docker.sock";
    if (strlen(path) >= sizeof e.socket_path) return 2;
    strcpy(e.socket_path, path);

    mcpgw_client *client = NULL;
    mcpgw_error *err = NULL;
    if (!ok("new", mcpgw_client_new("{\"backend\":{\"kind\":\"exec\",\"passes_stdin\":true},"
                                    "\"gateway_path\":\"/usr/local/bin/mcpgw-gateway\"}",
                                    &DOCKER_API, &e, &client, &err),
            &err))
        return 1;
    if (!ok("start_gateway", mcpgw_client_start_gateway(client, &err), &err)) goto out;
    ok("add_mcp",
       mcpgw_client_add_mcp(client,
                            "{\"name\":\"test\",\"mcp_config\":{\"type\":\"stdio_mcp\","
                            "\"command\":\"/usr/local/bin/mcpgw-testserver\",\"args\":[\"stdio\"]}}",
                            &err),
       &err);
    /* 1 MiB of arguments: more than a command line holds, so it travels on stdin. */
    size_t big = 1 << 20;
    char *text = malloc(big + 1), *args = malloc(big + 32);
    if (!text || !args) return 1;
    memset(text, 'x', big);
    text[big] = '\0';
    snprintf(args, big + 32, "{\"text\":\"%s\"}", text);
    mcpgw_tool_chunk *chunk = NULL;
    if (ok("call_tool one-shot, 1 MiB of arguments",
           mcpgw_client_call_tool(client, "test", "echo", args, &chunk, &err), &err)) {
        const mcpgw_block *block = NULL;
        const char *echoed = NULL;
        size_t len = 0;
        bool same = mcpgw_tool_chunk_block(chunk, 0, &block) == MCPGW_RESULT_OK &&
                    mcpgw_block_text(block, &echoed, &len) == MCPGW_RESULT_OK && len == big &&
                    memcmp(echoed, text, big) == 0;
        printf("  echoed %zu bytes, %s\n", len, same ? "the same" : "DIFFERENT");
        failures += !same;
    }
    mcpgw_tool_chunk_free(chunk);
    chunk = NULL;
    free(text);
    free(args);
    if (ok("open_session", mcpgw_client_open_session(client, &err), &err)) {
        int chunks = 0;
        ok("call_tool over the session, streamed",
           mcpgw_client_call_tool_stream(client, "test", "slow", "{\"seconds\":1,\"steps\":3}",
                                         on_progress, &chunks, &chunk, &err),
           &err);
        mcpgw_tool_chunk_free(chunk);
        chunk = NULL;
        printf("  %d progress chunks\n", chunks);
        failures += chunks != 3;
        ok("close_session", mcpgw_client_close_session(client, &err), &err);
    }
    ok("stop_gateway", mcpgw_client_stop_gateway(client, &err), &err);
out:
    mcpgw_client_free(client);
    printf("%s\n", failures ? "FAILED" : "all as expected, through the Docker Engine's API");
    return failures ? 1 : 0;
}
