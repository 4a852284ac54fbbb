/* kubectl_exec.c: see kubectl_exec.h. */
#define _POSIX_C_SOURCE 200809L

#include "kubectl_exec.h"

#include <stdlib.h>
#include <string.h>

#include "proc.h"

/* The last line of what kubectl said (after its client-side log lines), as the reason a
 * command could not run. */
static void last_line(const char *text, char *dst, size_t cap) {
    size_t end = strlen(text);
    while (end > 0 && text[end - 1] == '\n') end--;
    size_t start = end;
    while (start > 0 && text[start - 1] != '\n') start--;
    size_t n = end - start < cap - 1 ? end - start : cap - 1;
    memcpy(dst, text + start, n);
    dst[n] = '\0';
}

int32_t kubectl_exec(void *userdata, const char *command, uint32_t timeout_ms,
                     mcpgw_exec_output *out) {
    const kubectl_pod *pod = userdata;
    char *argv[] = {"kubectl", "exec", "-i", "-n", (char *)pod->ns, (char *)pod->name, "--",
                    "sh", "-c", (char *)command, NULL};
    proc_job job;
    if (proc_run_exec(&job, argv, timeout_ms, out) != 0) return 1;
    char why[512];
    const proc_buffer *o = &job.out[0], *e = &job.out[1];
    char *err = strndup(e->len ? (const char *)e->data : "", e->len); /* to search it */
    int ran = job.exit_code == 0 || (err && strstr(err, "command terminated with exit code"));
    if (ran) {
        mcpgw_exec_output_set(out, job.exit_code, o->data, o->len, e->data, e->len);
    } else {
        last_line(err ? err : "", why, sizeof why);
        mcpgw_exec_output_set_error(out, *why ? why : "kubectl exec failed");
    }
    free(err);
    proc_free(&job);
    return ran ? 0 : 1;
}
