//! What the benchmark programs share: one measured run, its statistics, and wrk as the HTTP
//! load generator.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The repository's root.
pub fn repo_root() -> PathBuf {
    mcpgw_testkit::repo()
}

/// Cargo's target directory: `$CARGO_TARGET_DIR`, else `target/` in the repository.
pub fn target_dir() -> PathBuf {
    mcpgw_testkit::target_root()
}

/// The static release gateway that `make bench` builds (`$MCPGW_STATIC_GATEWAY` names another).
pub fn static_gateway() -> PathBuf {
    mcpgw_testkit::static_gateway_path()
}

/// The release test server that `make bench` builds, in the target directory.
pub fn release_testserver() -> PathBuf {
    target_dir().join("release/mcpgw-testserver")
}

/// Throughput and latency of one measured run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Run {
    pub calls: u64,
    pub secs: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub errors: u64,
}

impl Run {
    /// A run from the latencies (seconds) of its calls.
    pub fn from_latencies(mut latencies: Vec<f64>, secs: f64, errors: u64) -> Run {
        latencies.sort_by(f64::total_cmp);
        Run {
            calls: latencies.len() as u64,
            secs,
            p50_ms: percentile(&latencies, 50.0) * 1e3,
            p99_ms: percentile(&latencies, 99.0) * 1e3,
            errors,
        }
    }

    /// Calls a second.
    pub fn per_sec(&self) -> f64 {
        self.calls as f64 / self.secs
    }
}

/// The `p`th percentile (0 to 100) of sorted values; NaN for none.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p / 100.0).round() as usize;
    sorted[i]
}

/// The median of the values; NaN for none.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    percentile(&v, 50.0)
}

/// `POST`s to `url` with `connections` connections for `secs` seconds from one wrk thread (one
/// thread drives 32 connections easily and leaves the other core to the systems under test),
/// through `script` (bench/call.lua: the bearer token from `MCPGW_BENCH_TOKEN`, the echo body,
/// a JSON summary line).
pub fn wrk(url: &str, token: &str, connections: usize, secs: u64, script: &Path) -> Run {
    let out = Command::new("wrk")
        .args(["-t", "1", "-c", &connections.to_string()])
        .args(["-d", &format!("{secs}s"), "--timeout", "10s", "-s"])
        .arg(script)
        .arg(url)
        .env("MCPGW_BENCH_TOKEN", token)
        .output()
        .expect("wrk runs (make bench installs it)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("wrk printed no result: {stdout}"));
    let v: Value = serde_json::from_str(line).unwrap();
    Run {
        calls: v["requests"].as_u64().unwrap(),
        secs: v["duration_us"].as_f64().unwrap() / 1e6,
        p50_ms: v["p50_us"].as_f64().unwrap() / 1e3,
        p99_ms: v["p99_us"].as_f64().unwrap() / 1e3,
        errors: v["errors"].as_u64().unwrap(),
    }
}
