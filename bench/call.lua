-- wrk script: one tool call per request against a gateway with the AgentScope REST contract,
-- printing one JSON line of results at the end.
wrk.method = "POST"
wrk.body = '{"arguments":{"text":"hello"}}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("MCPGW_BENCH_TOKEN")

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"duration_us":%d,"errors":%d,"p50_us":%d,"p99_us":%d}\n',
    summary.requests, summary.duration,
    e.status + e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
