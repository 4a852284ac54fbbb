/*
 * mcpgw.h as the Go binding includes it. Every cgo preamble of the package includes this file,
 * never <mcpgw.h> directly.
 *
 * libmcpgw 0.2.0's header declares a function with the name of a typedef,
 * `mcpgw_session_event_kind mcpgw_session_event_kind(const mcpgw_session_event *)`, which C
 * refuses (C++ accepts it). Until the function has a name of its own, its prototype is taken
 * aside here by a function-like macro (which leaves the type alone) and the function is reached
 * under the name mcpgw_go_session_event_kind, bound to the library's symbol with an asm label.
 */
#ifndef MCPGW_GO_CMCPGW_H
#define MCPGW_GO_CMCPGW_H

#include <stdint.h>

struct mcpgw_session_event;
uint32_t mcpgw_go_session_event_kind(const struct mcpgw_session_event *event)
    __asm__("mcpgw_session_event_kind");
#define mcpgw_session_event_kind(event) mcpgw_go_session_event_kind(event)
#include <mcpgw.h>
#undef mcpgw_session_event_kind

#endif
