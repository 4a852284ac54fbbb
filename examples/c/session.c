/* session.c: every operation over one long-lived channel into the sandbox, from many threads.
 *
 *   session GATEWAY_BINARY TESTSERVER_BINARY
 *
 * The "sandbox" is this machine. The channel is `sh -c "$(mcpgw_session_command)"` spawned
 * with its stdin and stdout piped (with Docker it would be `docker exec -i C sh -c ...`); that
 * command runs `mcpgw-gateway attach --launch`, so one spawn launches the gateway and opens the
 * channel. Over it: the test MCP server is registered, 8 threads run 16 tool calls at once,
 * a slow call prints each progress chunk as it arrives. Then the session is freed, which must
 * end the channel's process, and the gateway is stopped with an ordinary one-shot command.
 * Exits non-zero when anything unexpected happens. */
#define _GNU_SOURCE /* pipe2 */

#include <mcpgw.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"

#define THREADS 8
#define CALLS_PER_THREAD 2

extern char **environ;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Spawns `sh -c command` with its stdin and stdout piped to us; its stderr stays ours (logs). */
static pid_t spawn_channel(const char *command, int *read_fd, int *write_fd) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0) return -1;
    if (pipe2(out, O_CLOEXEC) != 0) {
        close(in[0]);
        close(in[1]);
        return -1;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    char *argv[] = {"sh", "-c", (char *)command, NULL};
    pid_t pid;
    int e = posix_spawnp(&pid, "sh", &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    close(in[0]);
    close(out[1]);
    if (e != 0) {
        close(in[1]);
        close(out[0]);
        errno = e;
        return -1;
    }
    *read_fd = out[0];
    *write_fd = in[1];
    return pid;
}

typedef struct {
    pid_t pid;
    int status, done;
    pthread_mutex_t lock;
    pthread_cond_t exited;
} reaper;

static void *reap(void *arg) {
    reaper *r = arg;
    int status = 0;
    while (waitpid(r->pid, &status, 0) < 0 && errno == EINTR) {
    }
    pthread_mutex_lock(&r->lock);
    r->status = status;
    r->done = 1;
    pthread_cond_signal(&r->exited);
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

/* Waits up to timeout_ms for child `pid` to exit; returns its wait status, or -1 when it did
 * not exit in time (it is then killed and reaped). A thread blocks in waitpid while this one
 * waits on its signal with a deadline. */
static int wait_exit(pid_t pid, int timeout_ms) {
    reaper r = {pid, 0, 0, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&r.exited, &attr);
    pthread_condattr_destroy(&attr);
    pthread_t thread;
    if (pthread_create(&thread, NULL, reap, &r) != 0) return -1;
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&r.lock);
    while (!r.done && pthread_cond_timedwait(&r.exited, &r.lock, &deadline) == 0) {
    }
    int in_time = r.done;
    pthread_mutex_unlock(&r.lock);
    if (!in_time) kill(pid, SIGKILL); /* the reaper then returns */
    pthread_join(thread, NULL);
    pthread_cond_destroy(&r.exited);
    return in_time ? r.status : -1;
}

/* How many processes run `... attach ...` with `marker` among their arguments. */
static int count_attach_processes(const char *marker) {
    DIR *proc = opendir("/proc");
    if (!proc) return -1;
    int found = 0;
    struct dirent *d;
    while ((d = readdir(proc)) != NULL) {
        if (d->d_name[0] < '0' || d->d_name[0] > '9') continue;
        char path[300], args[8192];
        snprintf(path, sizeof path, "/proc/%s/cmdline", d->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        size_t n = fread(args, 1, sizeof args - 1, f);
        fclose(f);
        args[n] = '\0';
        int is_attach = 0, has_marker = 0;
        for (size_t i = 0, k = 0; i < n; i += strlen(args + i) + 1, k++) {
            if (k == 1 && strcmp(args + i, "attach") == 0) is_attach = 1;
            if (strstr(args + i, marker)) has_marker = 1;
        }
        found += is_attach && has_marker;
    }
    closedir(proc);
    return found;
}

/* Prints an op's failure; frees the op. Returns its result. */
static mcpgw_result finish(mcpgw_op *op, mcpgw_result rc) {
    if (rc != MCPGW_RESULT_OK)
        fprintf(stderr, "%s failed (%s): %s\n", mcpgw_op_name(op), mcpgw_result_name(rc),
                mcpgw_error_message(mcpgw_op_error(op)));
    mcpgw_op_free(op);
    return rc;
}

typedef struct {
    const mcpgw_client *client;
    const mcpgw_blocking_session *session;
    pthread_barrier_t *start;
    int index;
    int ok; /* calls whose answer was their own */
} worker;

/* Runs this thread's calls over the shared session; each echoes a text of its own. */
static void *work(void *arg) {
    worker *w = arg;
    pthread_barrier_wait(w->start);
    for (int c = 0; c < CALLS_PER_THREAD; c++) {
        char text[64], args[128];
        snprintf(text, sizeof text, "thread %d call %d", w->index, c);
        snprintf(args, sizeof args, "{\"text\":\"%s\"}", text);
        mcpgw_op *op = NULL;
        if (mcpgw_client_prepare_call_tool(w->client, NULL, "test", "echo", args, &op) !=
            MCPGW_RESULT_OK)
            continue;
        mcpgw_result rc = mcpgw_blocking_session_run(w->session, op, NULL, NULL);
        mcpgw_tool_chunk *chunk = NULL;
        const mcpgw_block *block = NULL;
        const char *got = NULL;
        size_t len = 0;
        if (rc == MCPGW_RESULT_OK && mcpgw_op_tool_chunk(op, &chunk, NULL) == MCPGW_RESULT_OK &&
            mcpgw_tool_chunk_block(chunk, 0, &block) == MCPGW_RESULT_OK &&
            mcpgw_block_text(block, &got, &len) == MCPGW_RESULT_OK && len == strlen(text) &&
            memcmp(got, text, len) == 0)
            w->ok++;
        else if (rc == MCPGW_RESULT_OK)
            fprintf(stderr, "thread %d: call %d answered something else\n", w->index, c);
        mcpgw_tool_chunk_free(chunk);
        finish(op, rc);
    }
    return NULL;
}

typedef struct {
    double started;
    double first_at; /* when the first chunk came, 0 before */
    int chunks;
} progress_log;

/* Called on the calling thread for each progress chunk, as the gateway relays it. */
static void on_progress(void *userdata, const mcpgw_tool_chunk *chunk) {
    progress_log *log = userdata;
    double t = now_s() - log->started;
    if (log->chunks++ == 0) log->first_at = t;
    printf("  +%.2f s  progress: %s\n", t, mcpgw_tool_chunk_metadata_json(chunk));
    fflush(stdout);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s GATEWAY_BINARY TESTSERVER_BINARY\n", argv[0]);
        return 2;
    }
    /* The library writes requests to the channel's stdin: should the channel die, that write
     * must fail with EPIPE rather than end this process with SIGPIPE. */
    signal(SIGPIPE, SIG_IGN);

    /* A state directory of our own: its path in `attach`'s arguments finds the process later. */
    char state_dir[64];
    snprintf(state_dir, sizeof state_dir, "/tmp/mcpgw-session-example.%ld", (long)getpid());
    mcpgw_client_config *cfg = NULL;
    mcpgw_client *client = NULL;
    mcpgw_error *err = NULL;
    if (mcpgw_client_config_new(&cfg) != MCPGW_RESULT_OK ||
        mcpgw_client_config_set_gateway_path(cfg, argv[1]) != MCPGW_RESULT_OK ||
        mcpgw_client_config_set_state_dir(cfg, state_dir) != MCPGW_RESULT_OK ||
        mcpgw_client_config_set_timeout_ms(cfg, 30000) != MCPGW_RESULT_OK ||
        mcpgw_client_config_set_exec_stdin(cfg, true) != MCPGW_RESULT_OK) {
        fprintf(stderr, "config failed\n");
        mcpgw_client_config_free(cfg);
        return 1;
    }
    mcpgw_result rc = mcpgw_client_new(cfg, proc_exec_local, NULL, NULL, &client, &err);
    mcpgw_client_config_free(cfg);
    if (rc != MCPGW_RESULT_OK) {
        fprintf(stderr, "mcpgw_client_new: %s\n", mcpgw_error_message(err));
        mcpgw_error_free(err);
        return 1;
    }

    int status = 1;
    mcpgw_session *s = NULL;
    mcpgw_blocking_session *bs = NULL;
    mcpgw_op *op = NULL;
    pid_t channel = -1;
    int read_fd = -1, write_fd = -1;
    if ((rc = mcpgw_session_open(client, &s, &err)) != MCPGW_RESULT_OK) {
        fprintf(stderr, "session_open: %s\n", mcpgw_error_message(err));
        mcpgw_error_free(err);
        goto out;
    }
    printf("channel command: %s\n", mcpgw_session_command(s));
    if ((channel = spawn_channel(mcpgw_session_command(s), &read_fd, &write_fd)) < 0) {
        perror("spawning the channel");
        mcpgw_session_free(s);
        goto out;
    }
    /* The session and both descriptors are the library's from here, whatever happens. */
    double t0 = now_s();
    rc = mcpgw_blocking_session_start(s, read_fd, write_fd, 30000, &bs, &err);
    if (rc != MCPGW_RESULT_OK) {
        fprintf(stderr, "the channel did not open (%s): %s\n", mcpgw_result_name(rc),
                mcpgw_error_message(err));
        mcpgw_error_free(err);
        goto reap;
    }
    printf("session open after %.2f s; the gateway it launched listens on port %u\n",
           now_s() - t0, (unsigned)mcpgw_client_port(client));

    size_t spec_len = strlen(argv[2]) + 200;
    char *spec = malloc(spec_len);
    if (!spec) goto close;
    snprintf(spec, spec_len,
             "{\"name\":\"test\",\"mcp_config\":{\"type\":\"stdio_mcp\",\"command\":\"%s\","
             "\"args\":[\"stdio\"]}}",
             argv[2]);
    rc = mcpgw_client_prepare_add_mcp(client, NULL, spec, &op);
    free(spec);
    if (rc != MCPGW_RESULT_OK || finish(op, mcpgw_blocking_session_run(bs, op, NULL, NULL)) !=
                                     MCPGW_RESULT_OK)
        goto close;
    printf("test server registered over the session\n");

    /* Many threads, one channel: the calls are multiplexed by id. */
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, THREADS);
    worker workers[THREADS];
    pthread_t threads[THREADS];
    int started = 0;
    t0 = now_s();
    for (int i = 0; i < THREADS; i++) {
        workers[i] = (worker){client, bs, &start, i, 0};
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
           answered, THREADS * CALLS_PER_THREAD, THREADS, now_s() - t0);
    if (answered != THREADS * CALLS_PER_THREAD) goto close;

    /* Progress as it happens: a 2-second call with 4 steps. */
    progress_log log = {now_s(), 0, 0};
    printf("slow call, streaming:\n");
    rc = mcpgw_client_prepare_call_tool(client, NULL, "test", "slow",
                                        "{\"seconds\":2,\"steps\":4}", &op);
    if (rc != MCPGW_RESULT_OK ||
        finish(op, mcpgw_blocking_session_run(bs, op, on_progress, &log)) != MCPGW_RESULT_OK)
        goto close;
    double took = now_s() - log.started;
    printf("  +%.2f s  result\n", took);
    if (log.chunks != 4 || took - log.first_at < 0.5) {
        fprintf(stderr, "expected 4 progress chunks, the first well before the result\n");
        goto close;
    }
    status = 0;
close:
    mcpgw_blocking_session_free(bs); /* closes the channel's stdin: attach exits */
reap: {
    int ws = wait_exit(channel, 10000);
    if (ws == -1) {
        fprintf(stderr, "the channel's process did not exit after the session was freed\n");
        status = 1;
    } else {
        printf("channel process exited (%s %d)\n", WIFEXITED(ws) ? "status" : "signal",
               WIFEXITED(ws) ? WEXITSTATUS(ws) : WTERMSIG(ws));
    }
    int left = count_attach_processes(state_dir);
    if (left != 0) {
        fprintf(stderr, "%d attach process(es) left\n", left);
        status = 1;
    }
}
    /* The session's hello made the client know the gateway it launched: stop it one-shot. */
    if (mcpgw_client_port(client) != 0) {
        rc = mcpgw_client_prepare_stop_gateway(client, NULL, &op);
        if (rc != MCPGW_RESULT_OK || finish(op, mcpgw_client_run(client, op)) != MCPGW_RESULT_OK)
            status = 1;
        else
            printf("gateway stopped\n");
    }
out:
    mcpgw_client_free(client);
    return status;
}
