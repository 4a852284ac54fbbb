//! `GET /metrics`: Prometheus text exposition of calls, errors, latency and restarts per MCP.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use mcpgw::wire::McpState;

use crate::registry::Registry;
use crate::upstream::counters::BUCKETS;

/// A label value escaped for the text format.
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Renders every metric.
pub fn render(registry: &Registry) -> String {
    let mut all = registry.all();
    all.sort_by(|a, b| {
        (&a.0.agent_id, &a.0.session_id, &a.1.name).cmp(&(
            &b.0.agent_id,
            &b.0.session_id,
            &b.1.name,
        ))
    });
    let rows: Vec<(String, &crate::upstream::Upstream)> = all
        .iter()
        .map(|(scope, u)| {
            (
                format!(
                    "agent_id=\"{}\",session_id=\"{}\",mcp=\"{}\"",
                    label(&scope.agent_id),
                    label(&scope.session_id),
                    label(&u.name)
                ),
                u.as_ref(),
            )
        })
        .collect();
    let mut out = String::new();
    let mut family =
        |name: &str, kind: &str, help: &str, value: &dyn Fn(&crate::upstream::Upstream) -> u64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for (labels, u) in &rows {
                let _ = writeln!(out, "{name}{{{labels}}} {}", value(u));
            }
        };
    family(
        "mcpgw_tool_calls_total",
        "counter",
        "Tool calls received.",
        &|u| u.metrics.calls.load(Ordering::Relaxed),
    );
    family(
        "mcpgw_tool_call_errors_total",
        "counter",
        "Tool calls answered with an error status.",
        &|u| u.metrics.errors.load(Ordering::Relaxed),
    );
    family(
        "mcpgw_upstream_restarts_total",
        "counter",
        "Times the upstream was started again after it died.",
        &|u| u.restarts(),
    );
    family(
        "mcpgw_upstream_up",
        "gauge",
        "1 when the upstream has a live session (or is stateless).",
        &|u| u64::from(u.is_up()),
    );
    // The state `GET /mcps` reports, as one 0/1 series per state.
    let name = "mcpgw_upstream_state";
    let _ = writeln!(
        out,
        "# HELP {name} 1 for the state the upstream is in (the status.state of GET /mcps).\n# TYPE {name} gauge"
    );
    for (labels, u) in &rows {
        let current = u.state();
        for state in McpState::ALL {
            let _ = writeln!(
                out,
                "{name}{{{labels},state=\"{}\"}} {}",
                state.as_str(),
                u8::from(state == current)
            );
        }
    }
    let name = "mcpgw_tool_call_duration_seconds";
    let _ = writeln!(
        out,
        "# HELP {name} Time from a tool call's arrival to its answer.\n# TYPE {name} histogram"
    );
    for (labels, u) in &rows {
        let h = &u.metrics.latency;
        let mut cumulative = 0;
        for (bound, count) in BUCKETS.iter().zip(&h.counts) {
            cumulative += count.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{bound}\"}} {cumulative}");
        }
        let count = h.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {count}");
        let sum = h.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(
            out,
            "{name}_sum{{{labels}}} {sum}\n{name}_count{{{labels}}} {count}"
        );
    }
    let _ = writeln!(
        out,
        "# HELP mcpgw_mcps Registered MCPs, all scopes.\n# TYPE mcpgw_mcps gauge\nmcpgw_mcps {}",
        rows.len()
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped() {
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
