/* host_spawn.c: see host_spawn.h. */
#define _GNU_SOURCE /* pipe2, posix_spawn_file_actions_addchdir_np, SYS_pidfd_open */

#include "host_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Whether the kernel (and whatever runs this program) gives pidfds: asked once per process. */
static pthread_once_t pidfd_probe_once = PTHREAD_ONCE_INIT;
static bool pidfds_work;

static void pidfd_probe(void) {
    int probe = (int)syscall(SYS_pidfd_open, getpid(), 0);
    pidfds_work = probe >= 0;
    spawn_close(&probe);
}

void spawn_close(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

static void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

int spawn_argv(char *const argv[], const char *cwd, bool stdin_open, spawned *out) {
    pthread_once(&pidfd_probe_once, pidfd_probe);
    int fds[2][2] = {{-1, -1}, {-1, -1}}, in[2] = {-1, -1};
    int *o = fds[0], *err = fds[1];
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    bool actions_made = false, attr_made = false;
    int e = 0;
    pid_t pid;
    if (pipe2(o, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 ||
        (stdin_open && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0)) {
        e = errno;
        goto fail;
    }
    if ((e = posix_spawn_file_actions_init(&actions)) != 0) goto fail;
    actions_made = true;
    if ((e = stdin_open ? posix_spawn_file_actions_adddup2(&actions, in[0], 0)
                        : posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY,
                                                           0)) != 0 ||
        (e = posix_spawn_file_actions_adddup2(&actions, o[1], 1)) != 0 ||
        (e = posix_spawn_file_actions_adddup2(&actions, err[1], 2)) != 0 ||
        (cwd && (e = posix_spawn_file_actions_addchdir_np(&actions, cwd)) != 0))
        goto fail;
    if ((e = posix_spawnattr_init(&attr)) != 0) goto fail;
    attr_made = true;
    sigset_t none, pipe_only;
    sigemptyset(&none);
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    if ((e = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                                 POSIX_SPAWN_SETSIGDEF)) != 0 ||
        (e = posix_spawnattr_setpgroup(&attr, 0)) != 0 ||
        (e = posix_spawnattr_setsigmask(&attr, &none)) != 0 ||
        (e = posix_spawnattr_setsigdefault(&attr, &pipe_only)) != 0)
        goto fail;
    if ((e = posix_spawnp(&pid, argv[0], &actions, &attr, argv, environ)) != 0) goto fail;
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    spawn_close(&o[1]);
    spawn_close(&err[1]);
    spawn_close(&in[0]);
    set_nonblocking(o[0]);
    set_nonblocking(err[0]);
    *out = (spawned){.pid = pid,
                     .pidfd = pidfds_work ? (int)syscall(SYS_pidfd_open, pid, 0) : -1,
                     .in_fd = in[1],
                     .out_fd = o[0],
                     .err_fd = err[0]};
    return 0;
fail:
    if (actions_made) posix_spawn_file_actions_destroy(&actions);
    if (attr_made) posix_spawnattr_destroy(&attr);
    for (int i = 0; i < 2; i++) {
        spawn_close(&o[i]);
        spawn_close(&err[i]);
        spawn_close(&in[i]);
    }
    return e;
}

bool spawn_reaped(pid_t pid, int *code) {
    int status;
    pid_t r;
    while ((r = waitpid(pid, &status, WNOHANG)) < 0 && errno == EINTR) {
    }
    if (r != pid) return false;
    *code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return true;
}
