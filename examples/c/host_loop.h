/* host_loop.h: a thin I/O loop around libmcpgw's host driver (mcpgw_host), for C programs.
 *
 * The driver decides everything (session or one-shot, fallbacks, reopening, timers, the sandbox
 * backend's argv and what its failures mean); this loop only does what its actions say, on one
 * thread, with poll(2): it spawns each program in its own process group (stdin /dev/null, given
 * bytes, or held open), pipes a session channel's bytes both ways, kills a process group when
 * told to, reports every exit, and keeps the driver's one timer. Operations and results are the
 * driver's JSON (see mcpgw_host_submit in mcpgw.h and the README).
 *
 * Copy host_loop.c and host_loop.h into a project (`make install` puts them in share/mcpgw/):
 *
 *     host_loop *loop;
 *     host_loop_new("{\"backend\":{\"kind\":\"docker\",\"container\":\"box\"}}", &loop, &err);
 *     host_loop_result r;
 *     host_loop_run(loop, "{\"op\":\"start_gateway\"}", NULL, NULL, &r);
 *     ...
 *     host_loop_result_free(&r);
 *     host_loop_free(loop);
 *
 * One loop is one sandbox; loops made beside one another (host_loop_new_beside) share one poll
 * set, so one thread holds the sessions of any number of sandboxes. Threads: loops and
 * everything they call back belong to the thread that steps them; only host_loop_call may be
 * called from other threads (it hands that thread a function to run).
 * Linux: exits are watched through pidfds, or found by waitpid(WNOHANG) where the kernel or a
 * tool (valgrind) refuses pidfd_open. SIGPIPE needs no handling: the loop writes to children
 * through sockets with MSG_NOSIGNAL. */
#ifndef MCPGW_HOST_LOOP_H
#define MCPGW_HOST_LOOP_H

#include <mcpgw.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One sandbox: an mcpgw_host and the processes it asked for. */
typedef struct host_loop host_loop;

/* Receives the PROGRESS and DONE actions of one operation, or the CONNECTION_* actions of one
 * connection, on the loop's thread; `action` is borrowed for the call. It may submit, cancel
 * and send on the same loop, but not step it. */
typedef void (*host_loop_fn)(void *userdata, const mcpgw_action *action);

/* A function handed to the loop's thread with host_loop_call. */
typedef void (*host_loop_task_fn)(host_loop *loop, void *userdata);

/* Receives each NOTICE's text (a log line), on the loop's thread. */
typedef void (*host_loop_notice_fn)(void *userdata, const char *text);

/* How an operation run with host_loop_run ended. */
typedef struct {
    mcpgw_result code; /* MCPGW_RESULT_OK, or the failure's code */
    char *json;        /* the result, or the error {"code","name","message","http_status",
                          "detail","backend"}: NUL-terminated JSON */
    size_t len;        /* its length */
    char *message;     /* the failure's message; NULL on success */
} host_loop_result;

/* Makes a loop with a new driver configured by `config_json` (HostConfig: the backend, the
 * gateway path, timers...). Writes `*loop_out` on success; on failure `*error_out` (when not
 * NULL) receives the driver's error, to free with mcpgw_error_free. */
mcpgw_result host_loop_new(const char *config_json, host_loop **loop_out, mcpgw_error **error_out);

/* The same, for another sandbox, beside `beside` (NULL: on its own): both are then stepped
 * together, by the same thread. */
mcpgw_result host_loop_new_beside(host_loop *beside, const char *config_json,
                                  host_loop **loop_out, mcpgw_error **error_out);

/* Frees the loop and its driver, killing every process it still runs (with its process group)
 * and reaping it; the loops beside it go on. Close the session first (and host_loop_settle)
 * to let the channel end by itself. NULL is ignored. */
void host_loop_free(host_loop *loop);

/* The driver, for what the loop does not wrap (mcpgw_host_state_json). Do not feed it. */
mcpgw_host *host_loop_host(host_loop *loop);

/* Where NOTICE actions go (by default nowhere). */
void host_loop_set_notice(host_loop *loop, host_loop_notice_fn fn, void *userdata);

/* Submits an operation (JSON, as mcpgw_host_submit takes it); `fn` (may be NULL) receives its
 * PROGRESS actions and exactly one DONE. Writes its id to `*id_out` (may be NULL). Fails only
 * for JSON that is not an operation. */
mcpgw_result host_loop_submit(host_loop *loop, const char *op_json, host_loop_fn fn,
                              void *userdata, uint64_t *id_out, mcpgw_error **error_out);

/* Cancels operation `id` (its DONE, CANCELLED, follows); whether it was under way. */
bool host_loop_cancel(host_loop *loop, uint64_t id);

/* Opens a virtual MCP connection over the session channel (see mcpgw_host_open_connection);
 * `fn` receives its CONNECTION_OPENED, _MESSAGE and exactly one _CLOSED. */
mcpgw_result host_loop_connect(host_loop *loop, const char *mcp, const char *agent_id,
                               const char *session_id, host_loop_fn fn, void *userdata,
                               uint64_t *id_out, mcpgw_error **error_out);

/* Sends one JSON-RPC message on connection `conn`. */
mcpgw_result host_loop_send(host_loop *loop, uint64_t conn, const char *msg, size_t len,
                            mcpgw_error **error_out);

/* Closes connection `conn`; whether it was open. */
bool host_loop_close_connection(host_loop *loop, uint64_t conn);

/* Waits once for something to happen (a process's output or exit, a driver's timer, a
 * host_loop_call), in this loop or one beside it, and handles it. Returns 0, or -1 with errno
 * set when waiting failed. */
int host_loop_step(host_loop *loop);

/* Submits an operation and steps the loop until it is done; `progress` (may be NULL) receives
 * its PROGRESS actions. Returns its result code, also in `out->code`; free `out` with
 * host_loop_result_free. */
mcpgw_result host_loop_run(host_loop *loop, const char *op_json, host_loop_fn progress,
                           void *userdata, host_loop_result *out);

/* Fills `out` from a DONE action (copies what it holds), for callers that wait for an operation
 * their own way. */
void host_loop_result_set(host_loop_result *out, const mcpgw_action *done);

/* Frees what a result holds (not the struct). */
void host_loop_result_free(host_loop_result *result);

/* Steps the loop until none of its own processes runs (after close_session, the channel's end:
 * bounded by the driver's close grace, after which it kills the channel). Returns 0 or -1. */
int host_loop_settle(host_loop *loop);

/* How many processes the loop runs. */
size_t host_loop_processes(const host_loop *loop);

/* From any thread: runs `fn(loop, userdata)` on the loop's thread, at its next step (which it
 * wakes). Returns 0, or -1 when out of memory. */
int host_loop_call(host_loop *loop, host_loop_task_fn fn, void *userdata);

/* `s` as a JSON string, quotes included (malloc'd; NULL when out of memory), for building
 * operations and configurations from C strings. */
char *host_loop_json_string(const char *s);

#endif
