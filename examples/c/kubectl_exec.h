/* kubectl_exec.h: the libmcpgw exec callback for a Kubernetes pod, through kubectl.
 *
 *     kubectl_pod pod = {"default", "my-pod"};          // must outlive the client
 *     mcpgw_client_config_set_exec_stdin(cfg, true);    // kubectl exec -i passes stdin
 *     mcpgw_client_new(cfg, kubectl_exec, &pod, NULL, &client, &err);
 *
 * It runs `kubectl exec -i -n NS POD -- sh -c COMMAND` with the command's stdin bytes.
 * kubectl passes the command's exit status through and says so on stderr (`command terminated
 * with exit code N`); its own failures (no such pod or container, no API server, forbidden)
 * exit 1 without that line: those return 1 with kubectl's message (the operation then fails
 * with MCPGW_RESULT_EXEC_FAILED). Thread-safe. Uses proc.c. */
#ifndef MCPGW_KUBECTL_EXEC_H
#define MCPGW_KUBECTL_EXEC_H

#include <mcpgw.h>

/* Where commands run: a pod (its first container) in a namespace. */
typedef struct {
    const char *ns;
    const char *name;
} kubectl_pod;

/* The exec callback (mcpgw_exec_fn); `userdata` is a `const kubectl_pod *`. kubectl is
 * `kubectl` on PATH; its environment (KUBECONFIG, ...) chooses the cluster. */
int32_t kubectl_exec(void *userdata, const char *command, uint32_t timeout_ms,
                     mcpgw_exec_output *out);

#endif
