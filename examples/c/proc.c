/* proc.c: see proc.h. */
#define _POSIX_C_SOURCE 200809L

#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

int proc_start(proc_job *job, char *const argv[], uint32_t timeout_ms) {
    int out[2], err[2];
    memset(job, 0, sizeof *job);
    job->fds[0] = job->fds[1] = -1;
    if (pipe(out) != 0) return -1;
    if (pipe(err) != 0) {
        close(out[0]);
        close(out[1]);
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(out[0]); close(out[1]); close(err[0]); close(err[1]);
        errno = e;
        return -1;
    }
    if (pid == 0) {
        /* Own process group, so a timeout kills everything the command started. */
        setpgid(0, 0);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, 0);
        dup2(out[1], 1);
        dup2(err[1], 2);
        close(out[0]); close(out[1]); close(err[0]); close(err[1]);
        execvp(argv[0], argv);
        _exit(127);
    }
    setpgid(pid, pid);
    close(out[1]);
    close(err[1]);
    job->pid = pid;
    job->fds[0] = out[0];
    job->fds[1] = err[0];
    fcntl(out[0], F_SETFL, fcntl(out[0], F_GETFL) | O_NONBLOCK);
    fcntl(err[0], F_SETFL, fcntl(err[0], F_GETFL) | O_NONBLOCK);
    job->deadline_ms = now_ms() + (timeout_ms ? timeout_ms : 60000);
    return 0;
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
    return n;
}

int proc_ms_left(const proc_job *job) {
    long long left = job->deadline_ms - now_ms();
    return left < 0 ? 0 : (left > 1000000 ? 1000000 : (int)left);
}

int proc_step(proc_job *job) {
    for (int i = 0; i < 2; i++) {
        while (job->fds[i] >= 0) {
            if (buffer_reserve(&job->out[i], 65536) != 0) return -1;
            ssize_t n = read(job->fds[i], job->out[i].data + job->out[i].len, 65536);
            if (n > 0) {
                job->out[i].len += (size_t)n;
            } else if (n == 0) {
                close(job->fds[i]);
                job->fds[i] = -1;
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
        struct pollfd fds[2];
        int n = proc_pollfds(job, fds);
        if (poll(fds, (nfds_t)n, proc_ms_left(job)) < 0 && errno != EINTR) return -1;
    }
}

void proc_free(proc_job *job) {
    for (int i = 0; i < 2; i++) {
        if (job->fds[i] >= 0) close(job->fds[i]);
        free(job->out[i].data);
        job->out[i].data = NULL;
    }
}
