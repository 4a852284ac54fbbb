//! `GET /metrics`: Prometheus text exposition of calls, errors, latency and restarts per MCP.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use mcpgw::wire::McpState;

use crate::registry::Registry;

/// Upper bounds (seconds) of the latency histogram's buckets.
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0, 300.0,
];

/// A lock-free latency histogram.
#[derive(Default)]
pub struct Histogram {
    counts: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        if let Some(i) = BUCKETS.iter().position(|&b| secs <= b) {
            self.counts[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_micros.fetch_add(
            d.as_micros().min(u128::from(u64::MAX)) as u64,
            Ordering::Relaxed,
        );
    }
}

/// Counters of one upstream.
#[derive(Default)]
pub struct UpstreamMetrics {
    /// Tool calls received.
    pub calls: AtomicU64,
    /// Tool calls that ended in an error status.
    pub errors: AtomicU64,
    /// How long calls took, errors included.
    pub latency: Histogram,
}

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
    fn histogram_buckets_and_labels() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(300));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(1000));
        assert_eq!(h.counts[0].load(Ordering::Relaxed), 1);
        assert_eq!(h.counts[3].load(Ordering::Relaxed), 1);
        assert_eq!(h.count.load(Ordering::Relaxed), 3);
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
