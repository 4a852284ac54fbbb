/* example.c: see example.h. */
#define _POSIX_C_SOURCE 200809L

#include "example.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char *vformat(const char *fmt, va_list ap) {
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *s = n < 0 ? NULL : malloc((size_t)n + 1);
    if (s) vsnprintf(s, (size_t)n + 1, fmt, again);
    va_end(again);
    return s;
}

char *example_format(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = vformat(fmt, ap);
    va_end(ap);
    return s;
}

static void print_notice(void *userdata, const char *text) {
    (void)userdata;
    fprintf(stderr, "  (mcpgw: %s)\n", text);
}

host_loop *example_loop(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *config = vformat(fmt, ap);
    va_end(ap);
    host_loop *loop = NULL;
    mcpgw_error *err = NULL;
    mcpgw_result rc = config ? host_loop_new(config, &loop, &err) : MCPGW_RESULT_HOST_IO;
    if (rc != MCPGW_RESULT_OK) {
        fprintf(stderr, "host_loop_new(%s): %s: %s\n", config ? config : "?",
                mcpgw_result_name(rc), err ? mcpgw_error_message(err) : mcpgw_result_message(rc));
        loop = NULL;
    } else {
        host_loop_set_notice(loop, print_notice, NULL);
    }
    mcpgw_error_free(err);
    free(config);
    return loop;
}

host_loop *example_local_loop(const char *gateway_path) {
    char *gateway = host_loop_json_string(gateway_path);
    host_loop *loop =
        gateway ? example_loop("{\"backend\":{\"kind\":\"local\"},\"gateway_path\":%s}", gateway)
                : NULL;
    free(gateway);
    return loop;
}

/* The operation's name, from its JSON's "op" member, for messages. */
static void op_name(const char *op, char *name, size_t cap) {
    const char *at = strstr(op, "\"op\":\"");
    size_t n = 0;
    if (at)
        for (at += 6; at[n] && at[n] != '"' && n + 1 < cap; n++) name[n] = at[n];
    name[n] = '\0';
}

bool example_quiet;

static mcpgw_result vrun(host_loop *loop, mcpgw_result expected, host_loop_result *out,
                         const char *fmt, va_list ap) {
    char *op = vformat(fmt, ap);
    if (!op) return MCPGW_RESULT_HOST_IO;
    char name[64];
    op_name(op, name, sizeof name);
    host_loop_result r;
    mcpgw_result rc = host_loop_run(loop, op, NULL, NULL, &r);
    free(op);
    if (rc == MCPGW_RESULT_OK) {
        if (!example_quiet) printf("  %s: ok: %.160s%s\n", name, r.json, r.len > 160 ? "..." : "");
    } else {
        fprintf(rc == expected ? stdout : stderr, "  %s %s: %s: %s\n", name,
                rc == expected ? "failed as expected" : "failed", mcpgw_result_name(rc),
                r.message);
    }
    fflush(stdout);
    if (out)
        *out = r;
    else
        host_loop_result_free(&r);
    return rc;
}

mcpgw_result example_run(host_loop *loop, mcpgw_result expected, host_loop_result *out,
                         const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mcpgw_result rc = vrun(loop, expected, out, fmt, ap);
    va_end(ap);
    return rc;
}

bool example_ok(host_loop *loop, host_loop_result *out, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mcpgw_result rc = vrun(loop, MCPGW_RESULT_OK, out, fmt, ap);
    va_end(ap);
    return rc == MCPGW_RESULT_OK;
}

char *example_testserver_spec(const char *name, const char *path) {
    char *q = host_loop_json_string(path);
    char *spec = q ? example_format("{\"name\":\"%s\",\"mcp_config\":{\"type\":\"stdio_mcp\","
                                    "\"command\":%s,\"args\":[\"stdio\"]}}",
                                    name, q)
                   : NULL;
    free(q);
    return spec;
}

/* The driver's backend for a container: {"kind", "container", "options"} (free it). */
static char *container_backend(const char *kind, const char *container, char *const *options,
                               int n) {
    char *k = host_loop_json_string(kind), *c = host_loop_json_string(container);
    char *list = strdup("");
    for (int i = 0; i < n && list; i++) {
        char *q = host_loop_json_string(options[i]);
        char *longer = q ? example_format("%s%s%s", list, i ? "," : "", q) : NULL;
        free(q);
        free(list);
        list = longer;
    }
    char *backend = k && c && list ? example_format("{\"kind\":%s,\"container\":%s,"
                                                    "\"options\":[%s]}",
                                                    k, c, list)
                                   : NULL;
    free(k);
    free(c);
    free(list);
    return backend;
}

host_loop *example_container_loop(const char *kind, const char *container, char *const *options,
                                  int n, const char *gateway_path) {
    char *backend = container_backend(kind, container, options, n);
    char *path = host_loop_json_string(gateway_path);
    host_loop *loop = backend && path ? example_loop("{\"backend\":%s,\"gateway_path\":%s,"
                                                     "\"timeout_ms\":60000}",
                                                     backend, path)
                                      : NULL;
    free(backend);
    free(path);
    return loop;
}

host_loop *example_test_image(const char *kind, const char *container, char *const *options,
                              int n) {
    host_loop *loop =
        example_container_loop(kind, container, options, n, "/usr/local/bin/mcpgw-gateway");
    char *spec = example_testserver_spec("test", "/usr/local/bin/mcpgw-testserver");
    if (!loop || !spec || !example_ok(loop, NULL, "{\"op\":\"start_gateway\"}") ||
        !example_ok(loop, NULL, "{\"op\":\"add_mcp\",\"spec\":%s}", spec)) {
        host_loop_free(loop);
        loop = NULL;
    }
    free(spec);
    return loop;
}

char *example_print_chunk(const char *json) {
    mcpgw_tool_chunk *chunk = NULL;
    mcpgw_error *err = NULL;
    if (mcpgw_tool_chunk_from_json(json, &chunk, &err) != MCPGW_RESULT_OK) {
        fprintf(stderr, "not a ToolChunk: %s\n", mcpgw_error_message(err));
        mcpgw_error_free(err);
        return NULL;
    }
    char *first_text = NULL;
    size_t n = mcpgw_tool_chunk_block_count(chunk);
    printf("  chunk %s: state %d, last %d, %zu block(s), metadata %.120s\n",
           mcpgw_tool_chunk_id(chunk), (int)mcpgw_tool_chunk_state(chunk),
           (int)mcpgw_tool_chunk_is_last(chunk), n, mcpgw_tool_chunk_metadata_json(chunk));
    for (size_t i = 0; i < n; i++) {
        const mcpgw_block *b = NULL;
        if (mcpgw_tool_chunk_block(chunk, i, &b) != MCPGW_RESULT_OK) continue;
        const char *text;
        const uint8_t *data;
        size_t len;
        switch (mcpgw_block_get_type(b)) {
        case MCPGW_BLOCK_TYPE_TEXT:
            mcpgw_block_text(b, &text, &len);
            printf("    text (%zu bytes): %.*s\n", len, (int)(len > 200 ? 200 : len), text);
            if (!first_text) first_text = strndup(text, len);
            break;
        case MCPGW_BLOCK_TYPE_DATA:
            mcpgw_block_data(b, &data, &len);
            printf("    data: %s, %zu bytes\n", mcpgw_block_media_type(b), len);
            break;
        case MCPGW_BLOCK_TYPE_URL:
            printf("    url: %s (%s) %s\n", mcpgw_block_url(b), mcpgw_block_media_type(b),
                   mcpgw_block_name(b) ? mcpgw_block_name(b) : "");
            break;
        }
    }
    mcpgw_tool_chunk_free(chunk);
    return first_text;
}

bool example_backend_state(const host_loop_result *r, const char *state) {
    const char *backend = r->json ? strstr(r->json, "\"backend\":{") : NULL;
    char want[64];
    snprintf(want, sizeof want, "\"state\":\"%s\"", state);
    return backend && strstr(backend, want) != NULL;
}

/* The parent of process `pid` (from /proc/PID/stat, after the command name's last ')'). */
static int parent_of(const char *pid) {
    char path[300], stat[1024];
    snprintf(path, sizeof path, "/proc/%s/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[n] = '\0';
    const char *end = strrchr(stat, ')');
    int ppid = -1;
    return end && sscanf(end + 1, " %*c %d", &ppid) == 1 ? ppid : -1;
}

int example_processes(const char *a, const char *b, int parent, int *first) {
    DIR *proc = opendir("/proc");
    if (!proc) return -1;
    int found = 0;
    struct dirent *d;
    while ((d = readdir(proc)) != NULL) {
        if (d->d_name[0] < '0' || d->d_name[0] > '9') continue;
        if (parent && parent_of(d->d_name) != parent) continue;
        char path[300], args[65536];
        snprintf(path, sizeof path, "/proc/%s/cmdline", d->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        size_t n = fread(args, 1, sizeof args - 1, f);
        fclose(f);
        args[n] = '\0';
        bool has_a = false, has_b = false;
        for (size_t i = 0; i < n; i += strlen(args + i) + 1) {
            has_a = has_a || strstr(args + i, a);
            has_b = has_b || strstr(args + i, b);
        }
        if (!has_a || !has_b) continue;
        if (found++ == 0 && first) *first = atoi(d->d_name);
    }
    closedir(proc);
    return found;
}

double example_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
