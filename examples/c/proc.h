/* proc.h: run a command with its stdout and stderr captured, with a timeout; blocking, or
 * step by step from the host's own poll() loop. Shared by the mcpgw C examples. */
#ifndef MCPGW_EXAMPLE_PROC_H
#define MCPGW_EXAMPLE_PROC_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A growable byte buffer. */
typedef struct {
    unsigned char *data;
    size_t len;
    size_t cap;
} proc_buffer;

/* One running child process. */
typedef struct {
    pid_t pid;
    int fds[2];            /* stdout, stderr read ends; -1 once closed */
    proc_buffer out[2];    /* what they gave */
    long long deadline_ms; /* monotonic ms after which the child is killed */
    int timed_out;
    int exit_code;         /* valid once proc_finished() */
} proc_job;

/* Starts argv[0] with argv (NULL-terminated) in its own process group. Returns 0, or -1 with
 * errno set. */
int proc_start(proc_job *job, char *const argv[], uint32_t timeout_ms);

/* Adds the job's open pipes to fds (room for 2); returns how many were added. */
int proc_pollfds(const proc_job *job, struct pollfd *fds);

/* Reads whatever is ready on the job's pipes; kills it past its deadline. Returns 1 once both
 * pipes are closed and the child was reaped (exit_code is then set), 0 while it runs, -1 on
 * an error (errno set). */
int proc_step(proc_job *job);

/* Runs the job to its end. Returns 0, or -1 with errno set. */
int proc_wait(proc_job *job);

/* Milliseconds until the job's deadline (at least 0), for poll()'s timeout. */
int proc_ms_left(const proc_job *job);

/* Frees the job's buffers. */
void proc_free(proc_job *job);

#endif
