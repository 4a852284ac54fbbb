/* proc.h: run a command with its stdout and stderr captured, optional bytes on its stdin, and a
 * timeout; blocking, or step by step from the host's own poll() loop; and mcpgw exec callbacks
 * made of it. Shared by the mcpgw C examples and by docker_exec.c. */
#ifndef MCPGW_EXAMPLE_PROC_H
#define MCPGW_EXAMPLE_PROC_H

#include <mcpgw.h>

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The most descriptors one job adds to a poll set (stdin, stdout, stderr). */
#define PROC_MAX_POLLFDS 3

/* A growable byte buffer. */
typedef struct {
    unsigned char *data;
    size_t len;
    size_t cap;
} proc_buffer;

/* One running child process. */
typedef struct {
    pid_t pid;
    int fds[2];               /* stdout, stderr read ends; -1 once closed */
    proc_buffer out[2];       /* what they gave */
    int in_fd;                /* write end of its stdin; -1 once everything was written */
    const unsigned char *in;  /* bytes for its stdin (borrowed until the job ends) */
    size_t in_len, in_off;    /* how many there are, how many were written */
    long long deadline_ms;    /* monotonic ms after which the child is killed */
    int timed_out;
    int exit_code;            /* valid once proc_step() returned 1 */
} proc_job;

/* Starts argv[0] with argv (NULL-terminated) in its own process group, stdin from /dev/null.
 * Returns 0, or -1 with errno set. */
int proc_start(proc_job *job, char *const argv[], uint32_t timeout_ms);

/* The same, with `in_len` bytes of `in` (borrowed until the job ends; may be NULL when
 * `in_len` is 0) written to its stdin, which then reaches its end. A child that stops reading
 * early does not raise SIGPIPE in this process. */
int proc_start_stdin(proc_job *job, char *const argv[], uint32_t timeout_ms,
                     const unsigned char *in, size_t in_len);

/* Adds the job's open descriptors to fds (room for PROC_MAX_POLLFDS); returns how many. */
int proc_pollfds(const proc_job *job, struct pollfd *fds);

/* Writes what its stdin can take, reads whatever is ready on its pipes; kills it past its
 * deadline. Returns 1 once both pipes are closed and the child was reaped (exit_code is then
 * set), 0 while it runs, -1 on an error (errno set). */
int proc_step(proc_job *job);

/* Runs the job to its end. Returns 0, or -1 with errno set. */
int proc_wait(proc_job *job);

/* Milliseconds until the job's deadline (at least 0), for poll()'s timeout. */
int proc_ms_left(const proc_job *job);

/* Runs argv to its end with `in_len` bytes of `in` on its stdin. Returns 0 when it ran to its
 * end, whatever its exit status (job->exit_code, job->out); -1 when it could not be started or
 * overran `timeout_ms` and was killed, with the reason written into `why`. Call proc_free(job)
 * afterwards either way. */
int proc_run(proc_job *job, char *const argv[], uint32_t timeout_ms, const unsigned char *in,
             size_t in_len, char *why, size_t why_len);

/* Frees the job's buffers and closes what is still open. */
void proc_free(proc_job *job);

/* The start of an mcpgw exec callback: runs argv with the bytes mcpgw gives for the command's
 * stdin. Returns 0 when it ran to its end, whatever its exit status (job->exit_code, job->out;
 * call proc_free(job) afterwards); 1 when it could not be started or overran `timeout_ms` and
 * was killed: the reason is then set on `out` and the job is freed. */
int proc_run_exec(proc_job *job, char *const argv[], uint32_t timeout_ms, mcpgw_exec_output *out);

/* The body of an mcpgw exec callback: runs argv with the bytes mcpgw gives for the command's
 * stdin and reports its exit status and output into `out`. Returns what the callback returns:
 * 0 when it ran to its end (whatever its exit status), 1 when it could not be started or overran
 * `timeout_ms` and was killed (the reason is set on `out`). */
int32_t proc_exec_argv(char *const argv[], uint32_t timeout_ms, mcpgw_exec_output *out);

/* An mcpgw exec callback running each command with `sh -c` on this machine, passing its stdin
 * (userdata is unused). */
int32_t proc_exec_local(void *userdata, const char *command, uint32_t timeout_ms,
                        mcpgw_exec_output *out);

#endif
