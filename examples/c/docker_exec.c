/* docker_exec.c: see docker_exec.h. */
#define _POSIX_C_SOURCE 200809L

#include "docker_exec.h"

#include <stdio.h>
#include <string.h>

#include "proc.h"

static int starts_with(const proc_buffer *b, const char *prefix) {
    size_t n = strlen(prefix);
    return b->len >= n && memcmp(b->data, prefix, n) == 0;
}

/* The first line of what the docker CLI said, as the reason a command could not run. */
static void first_line(const proc_buffer *b, char *dst, size_t cap) {
    size_t n = 0;
    while (n < b->len && b->data[n] != '\n' && n + 1 < cap) n++;
    memcpy(dst, b->data, n);
    dst[n] = '\0';
}

/* Whether the container still runs: after an exit of 126 or more it tells "the command
 * failed or was killed" from "the container ended under it". */
static int container_running(const char *container) {
    char *argv[] = {"docker", "inspect", "--format", "{{.State.Running}}", (char *)container, NULL};
    proc_job job;
    char why[256];
    int running = proc_run(&job, argv, 10000, NULL, 0, why, sizeof why) == 0 &&
                  job.exit_code == 0 && starts_with(&job.out[0], "true");
    proc_free(&job);
    return running;
}

int32_t docker_exec(void *userdata, const char *command, uint32_t timeout_ms,
                    mcpgw_exec_output *out) {
    const char *container = userdata;
    char *argv[] = {"docker", "exec", "-i", (char *)container, "sh", "-c", (char *)command, NULL};
    proc_job job;
    if (proc_run_exec(&job, argv, timeout_ms, out) != 0) return 1;
    char why[512];
    const proc_buffer *o = &job.out[0], *e = &job.out[1];
    int ran = 1;
    if (job.exit_code == 1 && (starts_with(e, "Error response from daemon:") ||
                               starts_with(e, "Cannot connect to the Docker daemon") ||
                               starts_with(e, "unable to upgrade to tcp"))) {
        ran = 0; /* no such container, not running, paused, being killed; no daemon */
        first_line(e, why, sizeof why);
    } else if (job.exit_code >= 126 && !container_running(container)) {
        /* Killed with the container (137), or caught by its end while starting (126:
         * `OCI runtime exec failed: ... setns ...`, or the shell's own failure to exec). */
        ran = 0;
        snprintf(why, sizeof why, "container %s stopped during the command (exit %d)", container,
                 job.exit_code);
    } else if (job.exit_code == 126 && starts_with(o, "OCI runtime exec failed")) {
        ran = 0; /* the container runs, but `sh` could not be started in it */
        first_line(o, why, sizeof why);
    }
    if (ran)
        mcpgw_exec_output_set(out, job.exit_code, o->data, o->len, e->data, e->len);
    else
        mcpgw_exec_output_set_error(out, why);
    proc_free(&job);
    return ran ? 0 : 1;
}
