/* docker_exec.h: the libmcpgw exec callback for a Docker container, through the docker CLI.
 *
 * Copy docker_exec.c, docker_exec.h, proc.c and proc.h into your project (`make install`
 * puts them in share/mcpgw/), then:
 *
 *     mcpgw_client_config_set_exec_stdin(cfg, true);   // docker exec -i passes stdin
 *     mcpgw_client_new(cfg, docker_exec, "my-container", NULL, &client, &err);
 *
 * It runs `docker exec -i CONTAINER sh -c COMMAND` with the command's stdin bytes, and tells
 * "the command ran and failed" (returns 0 with its exit status and output) from "it could not
 * be run" (returns 1 with the reason, which the operation reports as MCPGW_RESULT_EXEC_FAILED):
 *
 *   exit 1, stderr `Error response from daemon: ...`    no such container, not running, paused
 *   exit 1, stderr `Cannot connect to the Docker daemon` no daemon
 *   exit 126 or more and the container no longer runs   killed during the command (docker
 *                                                        kill, rm -f, stop): 137, or 126 when
 *                                                        it ended as the command started
 *   exit 126, stdout `OCI runtime exec failed: ...`     the container cannot start `sh`
 *   the docker CLI cannot be started, or the command overruns its timeout (then killed)
 *
 * (The Docker CLI's codes and messages are measured in tests/docker/README.md.) The command's
 * own exits, 1, 126 and 137 included, are reported as what they are; an exit of 126 or more
 * costs one `docker inspect` to tell. Thread-safe: calls made
 * concurrently run concurrently. */
#ifndef MCPGW_DOCKER_EXEC_H
#define MCPGW_DOCKER_EXEC_H

#include <mcpgw.h>

/* The exec callback (mcpgw_exec_fn). `userdata` is the container's name or id, a NUL-terminated
 * string that must outlive the client. The docker CLI is `docker` on PATH; its environment
 * (DOCKER_HOST, DOCKER_CONTEXT, ...) chooses the daemon. */
int32_t docker_exec(void *userdata, const char *command, uint32_t timeout_ms,
                    mcpgw_exec_output *out);

#endif
