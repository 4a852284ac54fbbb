/* exec_process.h: ready callbacks for mcpgw_client that run the host driver's commands as
 * processes of this host.
 *
 * For the `local`, `docker`, `podman`, `kubectl` and `argv` backends the driver builds each
 * command's argv itself (`docker exec -i box sh -c '...'`, `kubectl exec -i ...`): these
 * callbacks start it (host_spawn.c: its own process group, close-on-exec pipes), give it its
 * stdin, collect its output within its time limit (then kill its group), and carry the session
 * channel (`attach` behind the backend's CLI). A program then names its sandbox in the
 * configuration and writes no exec code:
 *
 *     mcpgw_client *client;
 *     mcpgw_client_new("{\"backend\":{\"kind\":\"docker\",\"container\":\"box\"}}",
 *                      exec_process(), NULL, &client, &err);
 *
 * Their userdata is unused (pass NULL). The `exec` backend's `sh -c` text is for callbacks of
 * the caller's own, which reach the sandbox their own way (examples/c/docker_api.c).
 *
 * Copy exec_process.c, exec_process.h, host_spawn.c and host_spawn.h into a project (`make
 * install` puts them in share/mcpgw/). Linux. */
#ifndef MCPGW_EXEC_PROCESS_H
#define MCPGW_EXEC_PROCESS_H

#include <mcpgw.h>

/* The callbacks (static: valid for the life of the program). */
const mcpgw_client_callbacks *exec_process(void);

#endif
