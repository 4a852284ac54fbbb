/* example.h: what the C examples share besides host_loop: building a loop and operations from
 * printf formats, running an operation with its outcome printed, printing a ToolChunk. */
#ifndef MCPGW_EXAMPLE_H
#define MCPGW_EXAMPLE_H

#include "host_loop.h"

#include <stdbool.h>

/* printf into a new string (free it), NULL when out of memory. */
char *example_format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A loop with the configuration printf'd from `fmt` (JSON; quote strings with
 * host_loop_json_string), its notices printed to stderr; NULL (the reason printed) on failure. */
host_loop *example_loop(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* example_loop on this machine (the local backend), the gateway binary at `gateway_path`; NULL
 * (the reason printed) on failure. */
host_loop *example_local_loop(const char *gateway_path);

/* Runs the operation printf'd from `fmt` and prints how it went: its result JSON (shortened), or
 * its failure, on stdout when the failure is `expected`, else on stderr. `out` (may be NULL)
 * receives the outcome, to free with host_loop_result_free. Returns the result code. */
mcpgw_result example_run(host_loop *loop, mcpgw_result expected, host_loop_result *out,
                         const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Whether example_run keeps its successes to itself (false: it prints them). */
extern bool example_quiet;

/* example_run expecting success: whether the operation succeeded. */
bool example_ok(host_loop *loop, host_loop_result *out, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* example_container_loop on the test image's own gateway (tests/docker/sandbox.sh), started,
 * with its test MCP server registered as `test`; NULL (the reason printed) on failure. */
host_loop *example_test_image(const char *kind, const char *container, char *const *options,
                              int n);

/* The spec of the project's test MCP server at `path`, over stdio, named `name` (free it). */
char *example_testserver_spec(const char *name, const char *path);

/* example_loop on container `container` of the CLI `kind` (docker, podman), with the `n` CLI
 * options `options`, the gateway at `gateway_path` in the container. */
host_loop *example_container_loop(const char *kind, const char *container, char *const *options,
                                  int n, const char *gateway_path);

/* Prints a ToolChunk given as JSON, block by block, through the C accessors of libmcpgw.
 * Returns its first text block's text (free it), or NULL when it has none. */
char *example_print_chunk(const char *json);

/* Whether a failure carries the backend's verdict `state` ("gone", "not_running",
 * "unreachable", "cannot_run"): the driver's BackendFailure in the error JSON. */
bool example_backend_state(const host_loop_result *r, const char *state);

/* How many processes have arguments containing `a` and `b` (each in one of them), counting
 * only children of `parent` unless it is 0; the first one found in `*first` (may be NULL).
 * -1 when /proc cannot be read. */
int example_processes(const char *a, const char *b, int parent, int *first);

/* Seconds on the monotonic clock. */
double example_now(void);

#endif
