/* quickstart.c: the whole cycle against a local "sandbox" that is just `sh -c` on this machine.
 *
 *   quickstart GATEWAY_BINARY TESTSERVER_BINARY
 *
 * Launches the gateway, registers an MCP server (stdio), lists its tools, calls two of them,
 * shows an error, stops the gateway. Exits non-zero when anything unexpected happens. */
#define _POSIX_C_SOURCE 200809L

#include <mcpgw.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proc.h"

/* The exec callback: run `sh -c command` here, report exit status and output. */
static int32_t exec_local(void *userdata, const char *command, uint32_t timeout_ms,
                          mcpgw_exec_output *out) {
    (void)userdata;
    char *argv[] = {"sh", "-c", (char *)command, NULL};
    proc_job job;
    if (proc_start(&job, argv, timeout_ms) != 0 || proc_wait(&job) != 0) {
        mcpgw_exec_output_set_error(out, "cannot run sh");
        proc_free(&job);
        return 1;
    }
    mcpgw_exec_output_set(out, job.exit_code, job.out[0].data, job.out[0].len, job.out[1].data,
                          job.out[1].len);
    proc_free(&job);
    return 0;
}

static int fail(const char *what, mcpgw_result rc, mcpgw_error *err) {
    fprintf(stderr, "%s failed: %s (%d)\n  %s\n", what, mcpgw_result_message((uint32_t)rc),
            (int)rc, err ? mcpgw_error_message(err) : "");
    mcpgw_error_free(err);
    return 1;
}

static void print_chunk(const mcpgw_tool_chunk *chunk) {
    size_t n = mcpgw_tool_chunk_block_count(chunk);
    printf("chunk %s: state %d, last %d, %zu block(s), metadata %s\n", mcpgw_tool_chunk_id(chunk),
           (int)mcpgw_tool_chunk_state(chunk), (int)mcpgw_tool_chunk_is_last(chunk), n,
           mcpgw_tool_chunk_metadata_json(chunk));
    for (size_t i = 0; i < n; i++) {
        const mcpgw_block *b = NULL;
        if (mcpgw_tool_chunk_block(chunk, i, &b) != MCPGW_RESULT_OK) continue;
        const char *text;
        const uint8_t *data;
        size_t len;
        switch (mcpgw_block_get_type(b)) {
        case MCPGW_BLOCK_TYPE_TEXT:
            mcpgw_block_text(b, &text, &len);
            printf("  text (%zu bytes): %.*s\n", len, (int)(len > 200 ? 200 : len), text);
            break;
        case MCPGW_BLOCK_TYPE_DATA:
            mcpgw_block_data(b, &data, &len);
            printf("  data: %s, %zu bytes\n", mcpgw_block_media_type(b), len);
            break;
        case MCPGW_BLOCK_TYPE_URL:
            printf("  url: %s (%s) %s\n", mcpgw_block_url(b), mcpgw_block_media_type(b),
                   mcpgw_block_name(b) ? mcpgw_block_name(b) : "");
            break;
        }
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s GATEWAY_BINARY TESTSERVER_BINARY\n", argv[0]);
        return 2;
    }
    if (mcpgw_abi_version() != MCPGW_ABI_VERSION) {
        fprintf(stderr, "libmcpgw ABI %u, built against %u\n", mcpgw_abi_version(),
                (unsigned)MCPGW_ABI_VERSION);
        return 1;
    }
    printf("libmcpgw %s\n", mcpgw_version());

    mcpgw_error *err = NULL;
    mcpgw_result rc;
    mcpgw_client_config *cfg = NULL;
    mcpgw_client *client = NULL;
    if ((rc = mcpgw_client_config_new(&cfg)) != MCPGW_RESULT_OK ||
        (rc = mcpgw_client_config_set_gateway_path(cfg, argv[1])) != MCPGW_RESULT_OK ||
        (rc = mcpgw_client_config_set_timeout_ms(cfg, 30000)) != MCPGW_RESULT_OK) {
        mcpgw_client_config_free(cfg);
        return fail("config", rc, NULL);
    }
    rc = mcpgw_client_new(cfg, exec_local, NULL, NULL, &client, &err);
    mcpgw_client_config_free(cfg);
    if (rc != MCPGW_RESULT_OK) return fail("mcpgw_client_new", rc, err);

    int status = 1;
    char *json = NULL;
    mcpgw_tool_chunk *chunk = NULL;
    if ((rc = mcpgw_client_start_gateway(client, NULL, &json, &err)) != MCPGW_RESULT_OK) {
        fail("start_gateway", rc, err);
        goto out;
    }
    printf("gateway started: %s\n", json);
    mcpgw_string_free(json);
    json = NULL;

    /* An MCP server in its own scope; the JSON is AgentScope's MCPClient dump. */
    mcpgw_call_options opts = {"quickstart", "session-1", 20000};
    size_t spec_len = strlen(argv[2]) + 200;
    char *spec = malloc(spec_len);
    if (!spec) goto stop;
    snprintf(spec, spec_len,
             "{\"name\":\"test\",\"mcp_config\":{\"type\":\"stdio_mcp\",\"command\":\"%s\","
             "\"args\":[\"stdio\"]}}",
             argv[2]);
    rc = mcpgw_client_add_mcp(client, &opts, spec, &err);
    free(spec);
    if (rc != MCPGW_RESULT_OK) {
        fail("add_mcp", rc, err);
        goto stop;
    }
    if ((rc = mcpgw_client_list_tools(client, &opts, "test", &json, &err)) != MCPGW_RESULT_OK) {
        fail("list_tools", rc, err);
        goto stop;
    }
    printf("tools: %.160s...\n", json);
    mcpgw_string_free(json);
    json = NULL;

    rc = mcpgw_client_call_tool(client, &opts, "test", "echo",
                                "{\"text\":\"hello from C: it's $(not) `run`\"}", &chunk, &err);
    if (rc != MCPGW_RESULT_OK) {
        fail("call_tool echo", rc, err);
        goto stop;
    }
    print_chunk(chunk);
    mcpgw_tool_chunk_free(chunk);
    chunk = NULL;

    if ((rc = mcpgw_client_call_tool(client, &opts, "test", "media", "{}", &chunk, &err)) !=
        MCPGW_RESULT_OK) {
        fail("call_tool media", rc, err);
        goto stop;
    }
    print_chunk(chunk);
    mcpgw_tool_chunk_free(chunk);
    chunk = NULL;

    /* Failures have their own code and a message that says what to do. */
    rc = mcpgw_client_call_tool(client, &opts, "nope", "echo", "{}", &chunk, &err);
    if (rc != MCPGW_RESULT_NOT_FOUND || chunk != NULL) {
        fail("call_tool on an unknown MCP (expected NOT_FOUND)", rc, err);
        goto stop;
    }
    printf("expected failure: %s: HTTP %u, detail %s\n", mcpgw_error_message(err),
           (unsigned)mcpgw_error_http_status(err),
           mcpgw_error_detail(err) ? mcpgw_error_detail(err) : "(none)");
    mcpgw_error_free(err);
    err = NULL;

    if ((rc = mcpgw_client_remove_mcp(client, &opts, "test", &err)) != MCPGW_RESULT_OK) {
        fail("remove_mcp", rc, err);
        goto stop;
    }
    status = 0;
stop:
    if ((rc = mcpgw_client_stop_gateway(client, NULL, &err)) != MCPGW_RESULT_OK) {
        fail("stop_gateway", rc, err);
        status = 1;
    } else {
        printf("gateway stopped\n");
    }
out:
    mcpgw_client_free(client);
    return status;
}
