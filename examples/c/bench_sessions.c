/* bench_sessions.c: one thread holding many open sessions, and calling across all of them.
 *
 *   bench_sessions GATEWAY TESTSERVER [SESSIONS [GATEWAYS [CALLS_PER_SESSION]]]
 *
 * Launches GATEWAYS gateways on this machine (the `local` backend; 4 by default), each with the
 * test MCP server, then SESSIONS loops beside one another (1000 by default), each a sandbox's
 * driver with its session open on one of the gateways (an `attach` process each). One thread
 * steps them all. Every session then calls `echo` CALLS_PER_SESSION times (5), one call in
 * flight per session. Prints
 *   host sessions: N open, library KiB per session: X, threads: T, calls/s: Z
 * where X is this process's resident memory growth per open session (the attach processes are
 * not this process: their memory is not counted), T this process's thread count once they are
 * open (the same as before), and Z the calls per second across them all; beside it, as the
 * baseline, the calls per second of as many calls over one session per gateway. */
#define _GNU_SOURCE /* strndup */

#include <mcpgw.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "example.h"
#include "host_loop.h"

/* A number from /proc/self/status ("VmRSS:", "Threads:"). */
static long status_field(const char *name) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long value = -1;
    size_t n = strlen(name);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, name, n) == 0) value = strtol(line + n, NULL, 10);
    if (f) fclose(f);
    return value;
}

/* The text of string member `key` in a flat JSON object (no escapes in it), or NULL. */
static char *member(const char *json, const char *key) {
    char want[64];
    snprintf(want, sizeof want, "\"%s\":", key);
    const char *at = strstr(json, want);
    if (!at) return NULL;
    at += strlen(want);
    if (*at != '"') return strndup(at, strcspn(at, ",}"));
    return strndup(at + 1, strcspn(at + 1, "\""));
}

typedef struct {
    host_loop *loop;
    int calls_left;
    bool busy;
    bool failed;
} session;

static int done_ops, failed_ops;

static void on_done(void *userdata, const mcpgw_action *a) {
    session *s = userdata;
    if (mcpgw_action_get_kind(a) != MCPGW_ACTION_KIND_DONE) return;
    s->busy = false;
    done_ops++;
    if (mcpgw_action_result(a) != MCPGW_RESULT_OK) {
        if (!s->failed)
            fprintf(stderr, "%s\n", mcpgw_action_text(a) ? mcpgw_action_text(a) : "failed");
        s->failed = true;
        failed_ops++;
    }
}

static bool submit(session *s, const char *op) {
    mcpgw_error *err = NULL;
    s->busy = true;
    if (host_loop_submit(s->loop, op, on_done, s, NULL, &err) == MCPGW_RESULT_OK) return true;
    fprintf(stderr, "submit: %s\n", mcpgw_error_message(err));
    mcpgw_error_free(err);
    s->busy = false;
    return false;
}

/* Calls `echo` `calls` times in each of the first `n` sessions, one call in flight per session;
 * returns the calls per second, or -1 when a call failed. */
static double calls_across(session *s, int n, int calls) {
    const char *echo = "{\"op\":\"call_tool\",\"mcp\":\"test\",\"tool\":\"echo\","
                       "\"arguments\":{\"text\":\"across sessions\"}}";
    for (int i = 0; i < n; i++) s[i].calls_left = calls;
    done_ops = 0;
    double t0 = example_now();
    for (bool more = true; more;) {
        more = false;
        for (int i = 0; i < n; i++) {
            if (!s[i].busy && s[i].calls_left > 0 && !s[i].failed) {
                s[i].calls_left--;
                if (!submit(&s[i], echo)) return -1;
            }
            more = more || s[i].busy || (s[i].calls_left > 0 && !s[i].failed);
        }
        if (more && host_loop_step(s[0].loop) != 0) return -1;
    }
    return failed_ops ? -1 : done_ops / (example_now() - t0);
}

/* Steps until every session is idle. */
static bool settle(session *s, int n) {
    for (int i = 0; i < n;) {
        if (!s[i].busy) {
            i++;
            continue;
        }
        if (host_loop_step(s[i].loop) != 0) return false;
    }
    return true;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s GATEWAY TESTSERVER [SESSIONS [GATEWAYS [CALLS]]]\n", argv[0]);
        return 2;
    }
    int n = argc > 3 ? atoi(argv[3]) : 1000, gateways = argc > 4 ? atoi(argv[4]) : 4;
    int calls = argc > 5 ? atoi(argv[5]) : 5;
    if (n < 1 || gateways < 1 || calls < 1) return 2;
    example_quiet = true;
    /* Four descriptors a session, and room to spare. */
    struct rlimit files;
    getrlimit(RLIMIT_NOFILE, &files);
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);

    char *gateway = host_loop_json_string(argv[1]);
    char *spec = example_testserver_spec("test", argv[2]);
    host_loop **launcher = calloc((size_t)gateways, sizeof *launcher);
    char **attach_to = calloc((size_t)gateways, sizeof *attach_to);
    session *s = calloc((size_t)n, sizeof *s);
    if (!gateway || !spec || !launcher || !attach_to || !s) return 1;
    int status = 1, g;
    for (g = 0; g < gateways; g++) {
        host_loop_result r;
        launcher[g] = example_loop("{\"backend\":{\"kind\":\"local\"},\"gateway_path\":%s}",
                                   gateway);
        if (!launcher[g] || host_loop_run(launcher[g], "{\"op\":\"start_gateway\"}", NULL, NULL,
                                          &r) != MCPGW_RESULT_OK) {
            fprintf(stderr, "start_gateway: %s\n", r.message);
            host_loop_result_free(&r);
            goto stop;
        }
        char *port = member(r.json, "port"), *token = member(r.json, "token_file");
        char *nonce = member(r.json, "instance_nonce");
        attach_to[g] = example_format("{\"backend\":{\"kind\":\"local\"},\"gateway_path\":%s,"
                                      "\"port\":%s,\"token_file\":\"%s\",\"instance_nonce\":\"%s\"}",
                                      gateway, port, token, nonce);
        free(port);
        free(token);
        free(nonce);
        host_loop_result_free(&r);
        if (!example_ok(launcher[g], NULL, "{\"op\":\"add_mcp\",\"spec\":%s}", spec)) goto stop;
    }
    long rss0 = status_field("VmRSS:"), threads0 = status_field("Threads:");
    double t0 = example_now();
    int opened = 0;
    for (int i = 0; i < n; i++) {
        mcpgw_error *err = NULL;
        if (host_loop_new_beside(launcher[0], attach_to[i % gateways], &s[i].loop, &err) !=
            MCPGW_RESULT_OK) {
            fprintf(stderr, "session %d: %s\n", i, err ? mcpgw_error_message(err) : "no memory");
            mcpgw_error_free(err);
            goto stop;
        }
        if (!submit(&s[i], "{\"op\":\"open_session\"}")) goto stop;
        opened++;
    }
    if (!settle(s, n) || failed_ops) goto close;
    long rss1 = status_field("VmRSS:"), threads1 = status_field("Threads:");
    printf("%d sessions opened in %.2f s (%d attach processes beside this one)\n", n,
           example_now() - t0, n);

    double rate = calls_across(s, n, calls);
    if (rate < 0) goto close;
    printf("host sessions: %d open, library KiB per session: %.1f, threads: %ld, calls/s: %.0f\n",
           n, (double)(rss1 - rss0) / n, threads1, rate);
    /* The baseline: the same number of calls, over one session per gateway. */
    double base = calls_across(s, gateways < n ? gateways : n, calls * n / gateways);
    printf("  baseline, the same %d calls over %d session(s): calls/s: %.0f; threads before the "
           "sessions: %ld\n",
           calls * n, gateways, base, threads0);
    status = base > 0 && threads1 == threads0 && (double)(rss1 - rss0) / n <= 64 ? 0 : 1;
close:
    for (int i = 0; i < opened; i++)
        if (!submit(&s[i], "{\"op\":\"close_session\"}")) status = 1;
    settle(s, opened);
    for (int i = 0; i < opened; i++)
        if (host_loop_settle(s[i].loop) != 0) status = 1;
stop:
    for (int i = 0; i < n; i++) host_loop_free(s[i].loop);
    for (int k = 0; k < gateways; k++) {
        if (launcher[k] && !example_ok(launcher[k], NULL, "{\"op\":\"stop_gateway\"}"))
            status = 1;
        host_loop_free(launcher[k]);
        free(attach_to[k]);
    }
    free(launcher);
    free(attach_to);
    free(s);
    free(gateway);
    free(spec);
    return status;
}
