/* proc.c: see proc.h. */
#define _GNU_SOURCE /* pipe2, SOCK_CLOEXEC */

#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int buffer_reserve(proc_buffer *b, size_t more) {
    if (b->len + more <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more) cap *= 2;
    unsigned char *p = realloc(b->data, cap);
    if (!p) return -1;
    b->data = p;
    b->cap = cap;
    return 0;
}

static void close_fd(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

int proc_start(proc_job *job, char *const argv[], uint32_t timeout_ms) {
    return proc_start_stdin(job, argv, timeout_ms, NULL, 0);
}

int proc_start_stdin(proc_job *job, char *const argv[], uint32_t timeout_ms,
                     const unsigned char *in, size_t in_len) {
    /* Every descriptor is close-on-exec, so a child started by another thread at the same time
     * does not inherit this one's pipes (which would keep them open past this child's end). */
    int out[2] = {-1, -1}, err[2] = {-1, -1}, sin[2] = {-1, -1};
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    int e = 0, actions_made = 0, attr_made = 0;
    memset(job, 0, sizeof *job);
    job->fds[0] = job->fds[1] = job->in_fd = -1;
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) goto fail_errno;
    /* stdin is a socket pair rather than a pipe: send(MSG_NOSIGNAL) to a child that stopped
     * reading fails with EPIPE instead of killing this process with SIGPIPE. */
    if (in_len > 0 && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sin) != 0) goto fail_errno;
    if ((e = posix_spawn_file_actions_init(&actions)) != 0) goto fail;
    actions_made = 1;
    if (in_len > 0)
        e = posix_spawn_file_actions_adddup2(&actions, sin[0], 0);
    else
        e = posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    if (e || (e = posix_spawn_file_actions_adddup2(&actions, out[1], 1)) != 0 ||
        (e = posix_spawn_file_actions_adddup2(&actions, err[1], 2)) != 0)
        goto fail;
    if ((e = posix_spawnattr_init(&attr)) != 0) goto fail;
    attr_made = 1;
    /* Its own process group, so a timeout kills everything the command started. */
    if ((e = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP)) != 0 ||
        (e = posix_spawnattr_setpgroup(&attr, 0)) != 0)
        goto fail;
    if ((e = posix_spawnp(&job->pid, argv[0], &actions, &attr, argv, environ)) != 0) goto fail;
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    close(out[1]);
    close(err[1]);
    job->fds[0] = out[0];
    job->fds[1] = err[0];
    fcntl(out[0], F_SETFL, fcntl(out[0], F_GETFL) | O_NONBLOCK);
    fcntl(err[0], F_SETFL, fcntl(err[0], F_GETFL) | O_NONBLOCK);
    if (in_len > 0) {
        close(sin[0]);
        job->in_fd = sin[1];
        job->in = in;
        job->in_len = in_len;
        fcntl(sin[1], F_SETFL, fcntl(sin[1], F_GETFL) | O_NONBLOCK);
    }
    job->deadline_ms = now_ms() + (timeout_ms ? timeout_ms : 60000);
    return 0;
fail_errno:
    e = errno;
fail:
    if (actions_made) posix_spawn_file_actions_destroy(&actions);
    if (attr_made) posix_spawnattr_destroy(&attr);
    for (int i = 0; i < 2; i++) {
        close_fd(&out[i]);
        close_fd(&err[i]);
        close_fd(&sin[i]);
    }
    errno = e;
    return -1;
}

int proc_pollfds(const proc_job *job, struct pollfd *fds) {
    int n = 0;
    for (int i = 0; i < 2; i++) {
        if (job->fds[i] >= 0) {
            fds[n].fd = job->fds[i];
            fds[n].events = POLLIN;
            fds[n].revents = 0;
            n++;
        }
    }
    if (job->in_fd >= 0) {
        fds[n].fd = job->in_fd;
        fds[n].events = POLLOUT;
        fds[n].revents = 0;
        n++;
    }
    return n;
}

int proc_ms_left(const proc_job *job) {
    long long left = job->deadline_ms - now_ms();
    return left < 0 ? 0 : (left > 1000000 ? 1000000 : (int)left);
}

/* Writes what the child's stdin takes now; closes it once everything is written or the child
 * stopped reading. */
static int feed_stdin(proc_job *job) {
    while (job->in_fd >= 0 && job->in_off < job->in_len) {
        ssize_t n = send(job->in_fd, job->in + job->in_off, job->in_len - job->in_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n >= 0) {
            job->in_off += (size_t)n;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            return 0;
        } else if (errno == EPIPE || errno == ECONNRESET) {
            break; /* it does not want the rest: its exit status will tell */
        } else if (errno != EINTR) {
            return -1;
        }
    }
    close_fd(&job->in_fd);
    return 0;
}

int proc_step(proc_job *job) {
    if (feed_stdin(job) != 0) return -1;
    for (int i = 0; i < 2; i++) {
        while (job->fds[i] >= 0) {
            if (buffer_reserve(&job->out[i], 65536) != 0) return -1;
            ssize_t n = read(job->fds[i], job->out[i].data + job->out[i].len, 65536);
            if (n > 0) {
                job->out[i].len += (size_t)n;
            } else if (n == 0) {
                close_fd(&job->fds[i]);
            } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
                break;
            } else if (errno != EINTR) {
                return -1;
            }
        }
    }
    if (!job->timed_out && now_ms() >= job->deadline_ms) {
        job->timed_out = 1;
        kill(-job->pid, SIGKILL);
    }
    if (job->fds[0] >= 0 || job->fds[1] >= 0) return 0;
    /* Both pipes ended: whatever it did not read of its stdin it will not read. */
    close_fd(&job->in_fd);
    int status;
    pid_t r;
    while ((r = waitpid(job->pid, &status, 0)) < 0 && errno == EINTR) {
    }
    if (r < 0) return -1;
    job->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return 1;
}

int proc_wait(proc_job *job) {
    for (;;) {
        int r = proc_step(job);
        if (r != 0) return r < 0 ? -1 : 0;
        struct pollfd fds[PROC_MAX_POLLFDS];
        int n = proc_pollfds(job, fds);
        if (poll(fds, (nfds_t)n, proc_ms_left(job)) < 0 && errno != EINTR) return -1;
    }
}

int proc_run(proc_job *job, char *const argv[], uint32_t timeout_ms, const unsigned char *in,
             size_t in_len, char *why, size_t why_len) {
    if (proc_start_stdin(job, argv, timeout_ms, in, in_len) != 0) {
        snprintf(why, why_len, "cannot run %s: %s", argv[0], strerror(errno));
        return -1;
    }
    if (proc_wait(job) != 0) {
        snprintf(why, why_len, "running %s failed: %s", argv[0], strerror(errno));
        kill(-job->pid, SIGKILL);
        waitpid(job->pid, NULL, 0);
        return -1;
    }
    if (job->timed_out) {
        snprintf(why, why_len, "the command did not finish within %u ms and was killed",
                 (unsigned)timeout_ms);
        return -1;
    }
    return 0;
}

void proc_free(proc_job *job) {
    for (int i = 0; i < 2; i++) {
        close_fd(&job->fds[i]);
        free(job->out[i].data);
        job->out[i].data = NULL;
    }
    close_fd(&job->in_fd);
}

int proc_run_exec(proc_job *job, char *const argv[], uint32_t timeout_ms, mcpgw_exec_output *out) {
    const uint8_t *in = NULL;
    size_t in_len = 0;
    mcpgw_exec_output_stdin(out, &in, &in_len);
    char why[256];
    if (proc_run(job, argv, timeout_ms, in, in_len, why, sizeof why) != 0) {
        mcpgw_exec_output_set_error(out, why);
        proc_free(job);
        return 1;
    }
    return 0;
}

int32_t proc_exec_argv(char *const argv[], uint32_t timeout_ms, mcpgw_exec_output *out) {
    proc_job job;
    if (proc_run_exec(&job, argv, timeout_ms, out) != 0) return 1;
    mcpgw_exec_output_set(out, job.exit_code, job.out[0].data, job.out[0].len, job.out[1].data,
                          job.out[1].len);
    proc_free(&job);
    return 0;
}

int32_t proc_exec_local(void *userdata, const char *command, uint32_t timeout_ms,
                        mcpgw_exec_output *out) {
    (void)userdata;
    char *argv[] = {"sh", "-c", (char *)command, NULL};
    return proc_exec_argv(argv, timeout_ms, out);
}
