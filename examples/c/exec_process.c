/* exec_process.c: see exec_process.h. */
#define _POSIX_C_SOURCE 200809L

#include "exec_process.h"
#include "host_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* How much is read from a pipe at a time. */
#define READ_CHUNK 65536
/* What is read of a pipe after its process exited at most, in chunks: the output it left (more
 * can only come from a grandchild still holding the pipe). */
#define READS_AFTER_EXIT 64
/* Without a pidfd, how often an exit is looked for (waitpid without waiting). */
#define REAP_EVERY_MS 5

typedef struct {
    unsigned char *data;
    size_t len, cap;
} buffer;

/* Makes room for `extra` more bytes in `b`; -1 when out of memory. */
static int reserve(buffer *b, size_t extra) {
    if (b->cap - b->len >= extra) return 0;
    size_t cap = b->cap ? b->cap : READ_CHUNK;
    while (cap - b->len < extra) cap *= 2;
    unsigned char *grown = realloc(b->data, cap);
    if (!grown) return -1;
    b->data = grown;
    b->cap = cap;
    return 0;
}

static int64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Refuses a request without argv (the `exec` backend's shell text), saying why. */
static bool has_argv(const mcpgw_exec_request *req, mcpgw_reply *reply) {
    if (req->argv && req->argc > 0) return true;
    mcpgw_reply_failed(reply, "exec_process runs the argv of the local, docker, podman, kubectl "
                              "and argv backends; the exec backend's sh -c text needs exec "
                              "callbacks of the caller's own");
    return false;
}

/* Starts the request's argv; on failure replies why and returns false. */
static bool start(const mcpgw_exec_request *req, bool stdin_open, spawned *s, mcpgw_reply *reply) {
    char **argv = calloc(req->argc + 1, sizeof *argv);
    int e = ENOMEM;
    if (argv) {
        for (size_t i = 0; i < req->argc; i++) argv[i] = (char *)req->argv[i];
        e = spawn_argv(argv, req->cwd, stdin_open, s);
        free(argv);
    }
    if (e == 0) return true;
    char why[512];
    snprintf(why, sizeof why, "cannot run %s: %s", req->argv[0], strerror(e));
    mcpgw_reply_failed(reply, why);
    return false;
}

/* Reads what `*fd` has now, up to `most` chunks, into `into` (or, when `into` is NULL, into
 * `scratch`, handing each chunk to `chunk`); closes it at its end. -1 when out of memory. */
static int drain(int *fd, int most, buffer *into, unsigned char *scratch,
                 void (*chunk)(void *, const unsigned char *, size_t), void *arg) {
    for (int reads = 0; *fd >= 0 && reads < most; reads++) {
        unsigned char *dst = scratch;
        if (into) {
            if (reserve(into, READ_CHUNK) != 0) return -1;
            dst = into->data + into->len;
        }
        ssize_t n = read(*fd, dst, READ_CHUNK);
        if (n > 0) {
            if (into)
                into->len += (size_t)n;
            else
                chunk(arg, dst, (size_t)n);
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return 0;
        } else {
            spawn_close(fd);
        }
    }
    return 0;
}

/* Kills the process's group and reaps it; its status. */
static int kill_and_reap(pid_t pid) {
    int status = 0;
    kill(-pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* ---- one-shot commands ---- */

static void exec_command(void *userdata, const mcpgw_exec_request *req, mcpgw_reply *reply) {
    (void)userdata;
    spawned s;
    if (!has_argv(req, reply) || !start(req, req->stdin_kind != MCPGW_STDIN_KIND_NULL, &s, reply))
        return;
    buffer out = {0}, err = {0};
    const unsigned char *in = req->stdin_kind == MCPGW_STDIN_KIND_BYTES ? req->stdin_bytes : NULL;
    size_t in_left = in ? req->stdin_len : 0;
    if (s.in_fd >= 0) fcntl(s.in_fd, F_SETFL, fcntl(s.in_fd, F_GETFL) | O_NONBLOCK);
    if (req->stdin_kind == MCPGW_STDIN_KIND_BYTES && in_left == 0) spawn_close(&s.in_fd);
    int64_t deadline = req->timeout_ms ? now_ms() + req->timeout_ms : -1;
    int code = -1;
    bool oom = false;
    while (code < 0) {
        struct pollfd fds[4];
        int n = 0;
        if (s.out_fd >= 0) fds[n++] = (struct pollfd){.fd = s.out_fd, .events = POLLIN};
        if (s.err_fd >= 0) fds[n++] = (struct pollfd){.fd = s.err_fd, .events = POLLIN};
        if (s.in_fd >= 0 && in_left) fds[n++] = (struct pollfd){.fd = s.in_fd, .events = POLLOUT};
        if (s.pidfd >= 0) fds[n++] = (struct pollfd){.fd = s.pidfd, .events = POLLIN};
        int wait = deadline < 0 ? -1 : (int)(deadline - now_ms() < 0 ? 0 : deadline - now_ms());
        if (s.pidfd < 0 && (wait < 0 || wait > REAP_EVERY_MS)) wait = REAP_EVERY_MS;
        if (poll(fds, (nfds_t)n, wait) < 0 && errno != EINTR) break;
        oom |= drain(&s.out_fd, 4, &out, NULL, NULL, NULL) != 0;
        oom |= drain(&s.err_fd, 4, &err, NULL, NULL, NULL) != 0;
        while (s.in_fd >= 0 && in_left) {
            ssize_t w = send(s.in_fd, in, in_left, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w > 0) {
                in += w;
                in_left -= (size_t)w;
            } else if (w < 0 && errno == EINTR) {
                continue;
            } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                break;
            } else {
                spawn_close(&s.in_fd); /* it stopped reading: its exit will tell */
            }
        }
        if (in && !in_left) spawn_close(&s.in_fd);
        int status;
        if (spawn_reaped(s.pid, &status)) {
            code = status;
        } else if (oom || (deadline >= 0 && now_ms() >= deadline)) {
            code = kill_and_reap(s.pid);
        }
    }
    if (code < 0) code = kill_and_reap(s.pid); /* poll failed */
    oom |= drain(&s.out_fd, READS_AFTER_EXIT, &out, NULL, NULL, NULL) != 0;
    oom |= drain(&s.err_fd, READS_AFTER_EXIT, &err, NULL, NULL, NULL) != 0;
    spawn_close(&s.in_fd);
    spawn_close(&s.out_fd);
    spawn_close(&s.err_fd);
    spawn_close(&s.pidfd);
    if (oom)
        mcpgw_reply_failed(reply, "out of memory for the command's output");
    else
        mcpgw_reply_exited(reply, code, out.data, out.len, err.data, err.len);
    free(out.data);
    free(err.data);
}

/* ---- the session channel ---- */

typedef struct {
    spawned s;
    bool exited;
    int code;
    unsigned char scratch[READ_CHUNK];
} channel;

static void *open_channel(void *userdata, const mcpgw_exec_request *req, mcpgw_reply *reply) {
    (void)userdata;
    channel *c = calloc(1, sizeof *c);
    if (!c) {
        mcpgw_reply_failed(reply, "out of memory");
        return NULL;
    }
    if (!has_argv(req, reply) || !start(req, true, &c->s, reply)) {
        free(c);
        return NULL;
    }
    return c;
}

static void write_channel(void *userdata, void *handle, const uint8_t *bytes, size_t len,
                          mcpgw_reply *reply) {
    (void)userdata;
    channel *c = handle;
    while (len) {
        ssize_t w = c->s.in_fd >= 0 ? send(c->s.in_fd, bytes, len, MSG_NOSIGNAL) : -1;
        if (w > 0) {
            bytes += w;
            len -= (size_t)w;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else {
            char why[256];
            snprintf(why, sizeof why, "writing to the channel's stdin: %s",
                     c->s.in_fd >= 0 ? strerror(errno) : "it was closed");
            mcpgw_reply_failed(reply, why);
            return;
        }
    }
}

static void to_stdout(void *reply, const unsigned char *bytes, size_t len) {
    mcpgw_reply_stdout(reply, bytes, len);
}

static void to_stderr(void *reply, const unsigned char *bytes, size_t len) {
    mcpgw_reply_stderr(reply, bytes, len);
}

/* Reads the channel's pipes, replying what came; its stdout's end once. */
static void read_pipes(channel *c, int most, mcpgw_reply *reply) {
    bool had_out = c->s.out_fd >= 0;
    drain(&c->s.out_fd, most, NULL, c->scratch, to_stdout, reply);
    drain(&c->s.err_fd, most, NULL, c->scratch, to_stderr, reply);
    if (had_out && c->s.out_fd < 0) mcpgw_reply_eof(reply);
}

static void read_channel(void *userdata, void *handle, uint32_t timeout_ms, mcpgw_reply *reply) {
    (void)userdata;
    channel *c = handle;
    if (c->exited) {
        mcpgw_reply_exited(reply, c->code, NULL, 0, NULL, 0);
        return;
    }
    struct pollfd fds[3];
    int n = 0;
    if (c->s.out_fd >= 0) fds[n++] = (struct pollfd){.fd = c->s.out_fd, .events = POLLIN};
    if (c->s.err_fd >= 0) fds[n++] = (struct pollfd){.fd = c->s.err_fd, .events = POLLIN};
    if (c->s.pidfd >= 0) fds[n++] = (struct pollfd){.fd = c->s.pidfd, .events = POLLIN};
    int wait = timeout_ms > INT32_MAX ? INT32_MAX : (int)timeout_ms;
    if (c->s.pidfd < 0 && wait > REAP_EVERY_MS) wait = REAP_EVERY_MS;
    if (poll(fds, (nfds_t)n, wait) < 0 && errno != EINTR) {
        char why[256];
        snprintf(why, sizeof why, "waiting for the channel: %s", strerror(errno));
        mcpgw_reply_failed(reply, why);
        return;
    }
    read_pipes(c, 4, reply);
    if (spawn_reaped(c->s.pid, &c->code)) {
        c->exited = true;
        read_pipes(c, READS_AFTER_EXIT, reply);
        mcpgw_reply_exited(reply, c->code, NULL, 0, NULL, 0);
    }
}

static void close_channel_input(void *userdata, void *handle) {
    (void)userdata;
    spawn_close(&((channel *)handle)->s.in_fd);
}

static int32_t close_channel(void *userdata, void *handle) {
    (void)userdata;
    channel *c = handle;
    int code = c->exited ? c->code : kill_and_reap(c->s.pid);
    spawn_close(&c->s.in_fd);
    spawn_close(&c->s.out_fd);
    spawn_close(&c->s.err_fd);
    spawn_close(&c->s.pidfd);
    free(c);
    return code;
}

static const mcpgw_client_callbacks CALLBACKS = {
    .size = sizeof(mcpgw_client_callbacks),
    .exec = exec_command,
    .channel_open = open_channel,
    .channel_write = write_channel,
    .channel_read = read_channel,
    .channel_close_input = close_channel_input,
    .channel_close = close_channel,
};

const mcpgw_client_callbacks *exec_process(void) { return &CALLBACKS; }
