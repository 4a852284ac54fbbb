/* host_spawn.h: starting one of the host driver's argv programs as a process of this host, as
 * host_loop.c and exec_process.c both do: in its own process group (killing the group ends
 * everything it started), stdin /dev/null or a socket of ours, stdout and stderr pipes of ours,
 * every descriptor close-on-exec (no other child inherits them and keeps them open), SIGPIPE at
 * its default and no signal blocked whatever this process set, and a pidfd that becomes
 * readable when it exits, where the kernel (and valgrind, which refuses pidfd_open) gives one.
 *
 * Copy host_spawn.c and host_spawn.h with host_loop.c or exec_process.c (`make install` puts
 * them all in share/mcpgw/). Linux. */
#ifndef MCPGW_HOST_SPAWN_H
#define MCPGW_HOST_SPAWN_H

#include <stdbool.h>
#include <sys/types.h>

/* A process spawn_argv started, and our ends of its standard streams (-1 where none). */
typedef struct {
    pid_t pid;
    int pidfd;  /* readable once it exited; -1 where pidfds are refused */
    int in_fd;  /* its stdin (a socket: send(MSG_NOSIGNAL) gives EPIPE, never SIGPIPE); -1 for
                   /dev/null */
    int out_fd; /* its stdout and stderr, non-blocking */
    int err_fd;
} spawned;

/* Starts `argv` (NULL-terminated; found on PATH) in `cwd` (NULL: ours) with stdin open to
 * `in_fd` (`stdin_open`) or /dev/null. Returns 0 and fills `*out`, or an errno value. */
int spawn_argv(char *const argv[], const char *cwd, bool stdin_open, spawned *out);

/* Whether `pid` exited (waitpid without waiting: it is then reaped); its status in `*code`
 * (128 + N when signal N ended it). */
bool spawn_reaped(pid_t pid, int *code);

/* Closes `*fd` unless it is -1, and sets it to -1. */
void spawn_close(int *fd);

#endif
