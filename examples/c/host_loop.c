/* host_loop.c: see host_loop.h. */
#define _GNU_SOURCE /* pipe2 */

#include "host_loop.h"
#include "host_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* How much is read from one pipe at a time, and how many times per step (so that one busy
 * channel does not starve the others). */
#define READ_CHUNK 65536
#define READS_PER_STEP 4
/* What is read after an exit at most: the output it left in its pipes (more can only come from
 * a grandchild still holding them). */
#define READS_AFTER_EXIT 64
/* Without a pidfd an exit is found by waitpid(WNOHANG): soon after its pipes closed, and
 * within a while when something else (a grandchild) still holds them. */
#define REAP_SOON_MS 5
#define REAP_LATER_MS 200

typedef struct {
    unsigned char *data;
    size_t len, cap;
} buffer;

/* One process the driver asked for: a one-shot command (RUN) or a session channel (OPEN). */
typedef struct {
    uint64_t id;
    pid_t pid;
    int pidfd;     /* readable once it exited; -1 where pidfds are refused */
    bool channel;  /* its output goes to the driver as it comes */
    int in_fd;     /* our end of its stdin (a socket; HOLD: open, empty, until it exits) */
    int out_fd;    /* its stdout, stderr; -1 once they ended */
    int err_fd;
    buffer in;     /* bytes still to write to its stdin, from in_off */
    size_t in_off;
    bool close_input; /* close its stdin once `in` is written */
    bool ended;       /* its pidfd said it exited */
    buffer out;       /* a one-shot command's output */
    buffer err;
} process;

typedef struct {
    uint64_t id;
    host_loop_fn fn;
    void *userdata;
} waiter;

typedef struct task {
    host_loop *loop;
    host_loop_task_fn fn;
    void *userdata;
    struct task *next;
} task;

/* What a descriptor in the poll set is. */
typedef enum { FD_WAKE, FD_OUT, FD_ERR, FD_IN, FD_PID } fd_role;

typedef struct {
    host_loop *loop;
    process *proc;
    fd_role role;
} fd_owner;

/* What loops made beside one another share: one thread, one poll set, one wake pipe. */
typedef struct {
    host_loop **loops;
    size_t nloops, cap_loops;
    unsigned char *scratch; /* READ_CHUNK bytes for a channel's output */
    struct pollfd *fds;     /* the poll set, and what each of its entries is */
    fd_owner *owners;
    size_t cap_fds, cap_owners;
    int wake[2]; /* host_loop_call writes a byte to wake[1] */
    pthread_mutex_t lock;
    task *tasks, **tasks_end; /* in the order they came; guarded by lock */
} group;

/* One sandbox's driver and the processes it asked for. */
struct host_loop {
    group *group;
    mcpgw_host *host;
    process **procs;
    size_t nprocs, cap_procs;
    waiter *waiters;
    size_t nwaiters, cap_waiters;
    host_loop_notice_fn notice;
    void *notice_userdata;
    bool draining;
};

/* Makes room for `need` items of `size` bytes in the array whose pointer is at `items` (the
 * address of a pointer of any object type; copied with memcpy, so no type is punned). */
static int grow(void *items, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return 0;
    size_t cap2 = *cap ? *cap * 2 : 16;
    while (cap2 < need) cap2 *= 2;
    void *old, *p;
    memcpy(&old, items, sizeof old);
    if (!(p = realloc(old, cap2 * size))) return -1;
    memcpy(items, &p, sizeof p);
    *cap = cap2;
    return 0;
}

static int buffer_append(buffer *b, const void *data, size_t len) {
    if (grow(&b->data, &b->cap, b->len + len, 1) != 0) return -1;
    if (len) memcpy(b->data + b->len, data, len);
    b->len += len;
    return 0;
}

static void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

static process *find_process(const host_loop *l, uint64_t id) {
    for (size_t i = 0; i < l->nprocs; i++)
        if (l->procs[i]->id == id) return l->procs[i];
    return NULL;
}

static void free_process(process *p) {
    spawn_close(&p->in_fd);
    spawn_close(&p->out_fd);
    spawn_close(&p->err_fd);
    spawn_close(&p->pidfd);
    free(p->in.data);
    free(p->out.data);
    free(p->err.data);
    free(p);
}

static void handle(host_loop *l, const mcpgw_action *a);

/* Does what the driver asks until it asks nothing more. Reentrant calls (from a callback that
 * submits) leave it to the outer one. */
static void drain(host_loop *l) {
    if (l->draining) return;
    l->draining = true;
    mcpgw_action *a;
    while ((a = mcpgw_host_next_action(l->host)) != NULL) {
        handle(l, a);
        mcpgw_action_free(a);
    }
    l->draining = false;
}

/* ---- processes ---- */

/* Spawns a RUN (channel false) or OPEN action's argv (host_spawn.c). Whatever fails is reported to
 * the driver as a program that could not be run. */
static void start(host_loop *l, const mcpgw_action *a, bool channel) {
    uint64_t id = mcpgw_action_proc(a);
    size_t argc = mcpgw_action_argc(a);
    char why[512];
    if (argc == 0) {
        /* The `exec` backend's shell text is for a host's own exec function. */
        mcpgw_host_on_exec_failed(l->host, id,
                                  "this loop runs argv programs: the exec backend needs the "
                                  "host's own exec function (use an argv backend instead)");
        return;
    }
    char **argv = calloc(argc + 1, sizeof *argv);
    process *p = calloc(1, sizeof *p);
    int e = ENOMEM;
    if (!argv || !p || grow(&l->procs, &l->cap_procs, l->nprocs + 1, sizeof *l->procs)) goto fail;
    for (size_t i = 0; i < argc; i++) argv[i] = (char *)mcpgw_action_argv(a, i);
    mcpgw_stdin_kind stdin_kind = channel ? MCPGW_STDIN_KIND_HOLD : mcpgw_action_stdin_kind(a);
    spawned s;
    if ((e = spawn_argv(argv, mcpgw_action_cwd(a), stdin_kind != MCPGW_STDIN_KIND_NULL, &s)) != 0)
        goto fail;
    free(argv);
    p->id = id;
    p->channel = channel;
    p->pid = s.pid;
    p->pidfd = s.pidfd;
    p->in_fd = s.in_fd;
    p->out_fd = s.out_fd;
    p->err_fd = s.err_fd;
    if (p->in_fd >= 0) set_nonblocking(p->in_fd);
    if (stdin_kind == MCPGW_STDIN_KIND_BYTES) {
        size_t len = 0;
        const uint8_t *bytes = mcpgw_action_bytes(a, &len);
        p->close_input = true;
        if (buffer_append(&p->in, bytes, len) != 0) spawn_close(&p->in_fd); /* its exit tells */
    }
    l->procs[l->nprocs++] = p;
    return;
fail:
    snprintf(why, sizeof why, "cannot run %s: %s", mcpgw_action_argv(a, 0), strerror(e));
    free(argv);
    free(p);
    mcpgw_host_on_exec_failed(l->host, id, why);
}

/* Writes what the process's stdin takes now; closes it once everything is written and that
 * was asked for, or when the process stopped reading (its exit will tell). */
static void flush_input(process *p) {
    while (p->in_fd >= 0 && p->in_off < p->in.len) {
        ssize_t n = send(p->in_fd, p->in.data + p->in_off, p->in.len - p->in_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n >= 0) {
            p->in_off += (size_t)n;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            return;
        } else if (errno != EINTR) {
            spawn_close(&p->in_fd);
        }
    }
    p->in.len = p->in_off = 0;
    if (p->close_input) spawn_close(&p->in_fd);
}

/* Reads what one of the process's pipes has now (`all`: until it is empty), feeding a
 * channel's output to the driver as it comes. */
static void read_pipe(host_loop *l, process *p, bool is_err, bool all) {
    int *fd = is_err ? &p->err_fd : &p->out_fd;
    int most = all ? READS_AFTER_EXIT : READS_PER_STEP;
    for (int reads = 0; *fd >= 0 && reads < most; reads++) {
        buffer *b = is_err ? &p->err : &p->out;
        unsigned char *dst = l->group->scratch;
        if (!p->channel) {
            if (grow(&b->data, &b->cap, b->len + READ_CHUNK, 1) != 0) return;
            dst = b->data + b->len;
        }
        ssize_t n = read(*fd, dst, READ_CHUNK);
        if (n > 0) {
            if (!p->channel)
                b->len += (size_t)n;
            else if (is_err)
                mcpgw_host_on_stderr(l->host, p->id, dst, (size_t)n);
            else
                mcpgw_host_on_data(l->host, p->id, dst, (size_t)n);
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else {
            spawn_close(fd);
            if (p->channel && !is_err) mcpgw_host_on_eof(l->host, p->id);
        }
    }
}

/* Reports the exit of a process already taken out of the table, with what it wrote before
 * (what a grandchild still holding its pipes writes later is not its output). */
static void finish(host_loop *l, process *p, int code) {
    read_pipe(l, p, false, true);
    read_pipe(l, p, true, true);
    if (p->channel)
        mcpgw_host_on_exit(l->host, p->id, code, NULL, 0, NULL, 0);
    else
        mcpgw_host_on_exit(l->host, p->id, code, p->out.data, p->out.len, p->err.data,
                           p->err.len);
    free_process(p);
    drain(l);
}

/* ---- actions ---- */

static waiter *find_waiter(host_loop *l, uint64_t id) {
    for (size_t i = 0; i < l->nwaiters; i++)
        if (l->waiters[i].id == id) return &l->waiters[i];
    return NULL;
}

static int add_waiter(host_loop *l, uint64_t id, host_loop_fn fn, void *userdata) {
    if (!fn) return 0;
    if (grow(&l->waiters, &l->cap_waiters, l->nwaiters + 1, sizeof *l->waiters) != 0)
        return -1;
    l->waiters[l->nwaiters++] = (waiter){id, fn, userdata};
    return 0;
}

/* Hands an operation's or connection's action to its callback; its last one (DONE,
 * CONNECTION_CLOSED) also forgets the callback. */
static void deliver(host_loop *l, const mcpgw_action *a, bool last) {
    waiter *w = find_waiter(l, mcpgw_action_id(a));
    if (!w) return;
    waiter copy = *w;
    if (last) *w = l->waiters[--l->nwaiters];
    copy.fn(copy.userdata, a);
}

static void handle(host_loop *l, const mcpgw_action *a) {
    process *p = find_process(l, mcpgw_action_proc(a));
    size_t len = 0;
    const uint8_t *bytes;
    switch (mcpgw_action_get_kind(a)) {
    case MCPGW_ACTION_KIND_RUN:
        start(l, a, false);
        break;
    case MCPGW_ACTION_KIND_OPEN:
        start(l, a, true);
        break;
    case MCPGW_ACTION_KIND_WRITE:
        bytes = mcpgw_action_bytes(a, &len);
        if (p && p->in_fd >= 0) {
            if (buffer_append(&p->in, bytes, len) != 0)
                spawn_close(&p->in_fd); /* the driver learns of the loss from the channel's end */
            flush_input(p);
        }
        break;
    case MCPGW_ACTION_KIND_CLOSE_INPUT:
        if (p) {
            p->close_input = true;
            flush_input(p);
        }
        break;
    case MCPGW_ACTION_KIND_KILL:
        if (p) kill(-p->pid, SIGKILL); /* its exit is reported when it is reaped */
        break;
    case MCPGW_ACTION_KIND_PROGRESS:
    case MCPGW_ACTION_KIND_CONNECTION_OPENED:
    case MCPGW_ACTION_KIND_CONNECTION_MESSAGE:
        deliver(l, a, false);
        break;
    case MCPGW_ACTION_KIND_DONE:
    case MCPGW_ACTION_KIND_CONNECTION_CLOSED:
        deliver(l, a, true);
        break;
    case MCPGW_ACTION_KIND_NOTICE:
        if (l->notice) l->notice(l->notice_userdata, mcpgw_action_text(a));
        break;
    }
}

/* ---- the loop ---- */

static void group_free(group *g) {
    for (task *t = g->tasks, *next; t; t = next) {
        next = t->next;
        free(t);
    }
    spawn_close(&g->wake[0]);
    spawn_close(&g->wake[1]);
    pthread_mutex_destroy(&g->lock);
    free(g->loops);
    free(g->fds);
    free(g->owners);
    free(g->scratch);
    free(g);
}

static group *group_new(void) {
    group *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->wake[0] = g->wake[1] = -1;
    g->tasks_end = &g->tasks;
    g->scratch = malloc(READ_CHUNK);
    if (!g->scratch || pipe2(g->wake, O_CLOEXEC | O_NONBLOCK) != 0 ||
        pthread_mutex_init(&g->lock, NULL) != 0) {
        spawn_close(&g->wake[0]);
        spawn_close(&g->wake[1]);
        free(g->scratch);
        free(g);
        return NULL;
    }
    return g;
}

mcpgw_result host_loop_new(const char *config_json, host_loop **loop_out,
                           mcpgw_error **error_out) {
    return host_loop_new_beside(NULL, config_json, loop_out, error_out);
}

mcpgw_result host_loop_new_beside(host_loop *beside, const char *config_json,
                                  host_loop **loop_out, mcpgw_error **error_out) {
    if (!loop_out) return MCPGW_RESULT_NULL_PARAMETER;
    host_loop *l = calloc(1, sizeof *l);
    if (!l) return MCPGW_RESULT_HOST_IO;
    mcpgw_result rc = mcpgw_host_new(config_json, &l->host, error_out);
    if (rc != MCPGW_RESULT_OK) {
        free(l);
        return rc;
    }
    group *g = beside ? beside->group : group_new();
    if (!g || grow(&g->loops, &g->cap_loops, g->nloops + 1, sizeof *g->loops) != 0) {
        if (g && !beside) group_free(g);
        mcpgw_host_free(l->host);
        free(l);
        return MCPGW_RESULT_HOST_IO;
    }
    g->loops[g->nloops++] = l;
    l->group = g;
    *loop_out = l;
    return MCPGW_RESULT_OK;
}

void host_loop_free(host_loop *l) {
    if (!l) return;
    for (size_t i = 0; i < l->nprocs; i++) {
        process *p = l->procs[i];
        kill(-p->pid, SIGKILL);
        while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR) {
        }
        free_process(p);
    }
    group *g = l->group;
    /* Its tasks not yet run go with it. */
    pthread_mutex_lock(&g->lock);
    g->tasks_end = &g->tasks;
    for (task *t = g->tasks, *next; t; t = next) {
        next = t->next;
        if (t->loop == l) {
            free(t);
            continue;
        }
        *g->tasks_end = t;
        g->tasks_end = &t->next;
    }
    *g->tasks_end = NULL;
    pthread_mutex_unlock(&g->lock);
    for (size_t i = 0; i < g->nloops; i++)
        if (g->loops[i] == l) g->loops[i] = g->loops[--g->nloops];
    if (g->nloops == 0) group_free(g);
    mcpgw_host_free(l->host);
    free(l->procs);
    free(l->waiters);
    free(l);
}

mcpgw_host *host_loop_host(host_loop *l) { return l->host; }

void host_loop_set_notice(host_loop *l, host_loop_notice_fn fn, void *userdata) {
    l->notice = fn;
    l->notice_userdata = userdata;
}

/* After a submit or an open (`rc`): remembers the callback of `id`, or, out of memory, undoes
 * it (`undo`: cancel, close), so that nothing runs that no callback hears of. */
static mcpgw_result watch(host_loop *l, mcpgw_result rc, uint64_t id, host_loop_fn fn,
                          void *userdata, uint64_t *id_out, bool (*undo)(mcpgw_host *, uint64_t)) {
    if (rc == MCPGW_RESULT_OK && add_waiter(l, id, fn, userdata) != 0) {
        undo(l->host, id);
        rc = MCPGW_RESULT_HOST_IO;
    } else if (rc == MCPGW_RESULT_OK && id_out) {
        *id_out = id;
    }
    drain(l);
    return rc;
}

mcpgw_result host_loop_submit(host_loop *l, const char *op_json, host_loop_fn fn, void *userdata,
                              uint64_t *id_out, mcpgw_error **error_out) {
    uint64_t id = 0;
    mcpgw_result rc = mcpgw_host_submit(l->host, op_json, &id, error_out);
    return watch(l, rc, id, fn, userdata, id_out, mcpgw_host_cancel);
}

bool host_loop_cancel(host_loop *l, uint64_t id) {
    bool was = mcpgw_host_cancel(l->host, id);
    drain(l);
    return was;
}

mcpgw_result host_loop_connect(host_loop *l, const char *mcp, const char *agent_id,
                               const char *session_id, host_loop_fn fn, void *userdata,
                               uint64_t *id_out, mcpgw_error **error_out) {
    uint64_t id = 0;
    mcpgw_result rc =
        mcpgw_host_open_connection(l->host, mcp, agent_id, session_id, &id, error_out);
    return watch(l, rc, id, fn, userdata, id_out, mcpgw_host_close_connection);
}

mcpgw_result host_loop_send(host_loop *l, uint64_t conn, const char *msg, size_t len,
                            mcpgw_error **error_out) {
    mcpgw_result rc = mcpgw_host_send(l->host, conn, (const uint8_t *)msg, len, error_out);
    drain(l);
    return rc;
}

bool host_loop_close_connection(host_loop *l, uint64_t conn) {
    bool was = mcpgw_host_close_connection(l->host, conn);
    drain(l);
    return was;
}

/* Runs the functions other threads handed over. */
static void run_tasks(group *g) {
    char sink[64];
    while (read(g->wake[0], sink, sizeof sink) > 0) {
    }
    pthread_mutex_lock(&g->lock);
    task *t = g->tasks;
    g->tasks = NULL;
    g->tasks_end = &g->tasks;
    pthread_mutex_unlock(&g->lock);
    while (t) {
        task *next = t->next;
        t->fn(t->loop, t->userdata);
        drain(t->loop);
        free(t);
        t = next;
    }
}

/* The poll set: the wake pipe, and every process's open descriptors. Returns how many, or
 * -1; `*wait_ms` is lowered for exits that only waitpid can find. */
static int poll_set(group *g, int *wait_ms) {
    size_t most = 1;
    for (size_t k = 0; k < g->nloops; k++) most += 4 * g->loops[k]->nprocs;
    if (grow(&g->fds, &g->cap_fds, most, sizeof *g->fds) != 0 ||
        grow(&g->owners, &g->cap_owners, most, sizeof *g->owners) != 0)
        return -1;
    int n = 0;
    g->fds[n] = (struct pollfd){g->wake[0], POLLIN, 0};
    g->owners[n++] = (fd_owner){NULL, NULL, FD_WAKE};
    for (size_t k = 0; k < g->nloops; k++) {
        host_loop *l = g->loops[k];
        for (size_t i = 0; i < l->nprocs; i++) {
            process *p = l->procs[i];
            struct {
                int fd;
                short events;
                fd_role role;
            } want[] = {{p->out_fd, POLLIN, FD_OUT},
                        {p->err_fd, POLLIN, FD_ERR},
                        {p->in_off < p->in.len ? p->in_fd : -1, POLLOUT, FD_IN},
                        {p->pidfd, POLLIN, FD_PID}};
            for (size_t w = 0; w < sizeof want / sizeof *want; w++) {
                if (want[w].fd < 0) continue;
                g->fds[n] = (struct pollfd){want[w].fd, want[w].events, 0};
                g->owners[n++] = (fd_owner){l, p, want[w].role};
            }
            if (p->pidfd < 0) {
                int cap = p->out_fd < 0 && p->err_fd < 0 ? REAP_SOON_MS : REAP_LATER_MS;
                if (*wait_ms < 0 || *wait_ms > cap) *wait_ms = cap;
            }
        }
    }
    return n;
}

/* The soonest of the drivers' timers, for poll(2). */
static int next_timer(const group *g) {
    int wait_ms = -1;
    for (size_t k = 0; k < g->nloops; k++) {
        int64_t t = mcpgw_host_timeout_ms(g->loops[k]->host);
        if (t < 0) continue;
        int ms = t > INT_MAX ? INT_MAX : (int)t;
        if (wait_ms < 0 || ms < wait_ms) wait_ms = ms;
    }
    return wait_ms;
}

/* Reports the exits of a loop's processes that ended. */
static void reap(host_loop *l) {
    for (size_t i = 0; i < l->nprocs;) {
        process *p = l->procs[i];
        int code;
        if ((p->pidfd >= 0 && !p->ended) || !spawn_reaped(p->pid, &code)) {
            i++;
            continue;
        }
        l->procs[i] = l->procs[--l->nprocs];
        finish(l, p, code);
    }
}

int host_loop_step(host_loop *loop) {
    group *g = loop->group;
    int wait_ms = next_timer(g);
    int n = poll_set(g, &wait_ms);
    if (n < 0) {
        errno = ENOMEM;
        return -1;
    }
    if (poll(g->fds, (nfds_t)n, wait_ms) < 0) {
        if (errno != EINTR) return -1;
        n = 0;
    }
    for (int i = 0; i < n; i++) {
        if (!g->fds[i].revents) continue;
        fd_owner o = g->owners[i];
        switch (o.role) {
        case FD_WAKE:
            run_tasks(g);
            break;
        case FD_OUT:
        case FD_ERR:
            read_pipe(o.loop, o.proc, o.role == FD_ERR, false);
            drain(o.loop);
            break;
        case FD_IN:
            flush_input(o.proc);
            break;
        case FD_PID:
            o.proc->ended = true;
            break;
        }
    }
    for (size_t k = 0; k < g->nloops; k++) reap(g->loops[k]);
    for (size_t k = 0; k < g->nloops; k++) {
        host_loop *l = g->loops[k];
        if (mcpgw_host_timeout_ms(l->host) == 0) {
            mcpgw_host_on_timeout(l->host);
            drain(l);
        }
    }
    return 0;
}

typedef struct {
    host_loop_fn progress;
    void *userdata;
    host_loop_result *out;
    bool done;
} run_state;

static char *copy_text(const void *data, size_t len) {
    char *s = malloc(len + 1);
    if (s) {
        if (len) memcpy(s, data, len);
        s[len] = '\0';
    }
    return s;
}

void host_loop_result_set(host_loop_result *out, const mcpgw_action *done) {
    size_t len = 0;
    const uint8_t *json = mcpgw_action_bytes(done, &len);
    const char *message = mcpgw_action_text(done);
    out->code = mcpgw_action_result(done);
    out->json = copy_text(json, len);
    out->len = out->json ? len : 0;
    out->message = out->code != MCPGW_RESULT_OK && message ? strdup(message) : NULL;
}

static void run_callback(void *userdata, const mcpgw_action *a) {
    run_state *s = userdata;
    if (mcpgw_action_get_kind(a) == MCPGW_ACTION_KIND_PROGRESS) {
        if (s->progress) s->progress(s->userdata, a);
        return;
    }
    host_loop_result_set(s->out, a);
    s->done = true;
}

mcpgw_result host_loop_run(host_loop *l, const char *op_json, host_loop_fn progress,
                           void *userdata, host_loop_result *out) {
    memset(out, 0, sizeof *out);
    run_state s = {progress, userdata, out, false};
    mcpgw_error *err = NULL;
    uint64_t id;
    mcpgw_result rc = host_loop_submit(l, op_json, run_callback, &s, &id, &err);
    if (rc != MCPGW_RESULT_OK) {
        out->code = rc;
        out->message = strdup(err ? mcpgw_error_message(err) : mcpgw_result_message(rc));
        mcpgw_error_free(err);
        return rc;
    }
    while (!s.done) {
        if (host_loop_step(l) == 0) continue;
        char why[256];
        snprintf(why, sizeof why, "waiting for the operation failed: %s", strerror(errno));
        host_loop_cancel(l, id); /* its DONE (CANCELLED) comes at once */
        host_loop_result_free(out);
        out->code = MCPGW_RESULT_HOST_IO;
        out->message = strdup(why);
        return out->code;
    }
    return out->code;
}

void host_loop_result_free(host_loop_result *r) {
    if (!r) return;
    free(r->json);
    free(r->message);
    r->json = r->message = NULL;
    r->len = 0;
}

int host_loop_settle(host_loop *l) {
    while (l->nprocs > 0)
        if (host_loop_step(l) != 0) return -1;
    return 0;
}

size_t host_loop_processes(const host_loop *l) { return l->nprocs; }

int host_loop_call(host_loop *l, host_loop_task_fn fn, void *userdata) {
    task *t = malloc(sizeof *t);
    if (!t) return -1;
    *t = (task){l, fn, userdata, NULL};
    group *g = l->group;
    pthread_mutex_lock(&g->lock);
    *g->tasks_end = t;
    g->tasks_end = &t->next;
    pthread_mutex_unlock(&g->lock);
    /* A full pipe already wakes the loop. */
    ssize_t ignored = write(g->wake[1], "", 1);
    (void)ignored;
    return 0;
}

char *host_loop_json_string(const char *s) {
    size_t n = 3;
    for (const char *c = s; *c; c++) n += (unsigned char)*c < 0x20 ? 6 : 2;
    char *q = malloc(n), *d = q;
    if (!q) return NULL;
    *d++ = '"';
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') {
            *d++ = '\\';
            *d++ = (char)*c;
        } else if (*c < 0x20) {
            d += sprintf(d, "\\u%04x", *c);
        } else {
            *d++ = (char)*c;
        }
    }
    *d++ = '"';
    *d = '\0';
    return q;
}
