//! What an upstream can make the gateway hold: one message is bounded by --max-reply-bytes
//! (junk and oversized replies stream past without being held), a large reply's memory goes
//! back to the system once it is answered, and a log flood is rate-limited. Resident memory is
//! read from the gateway's /proc/PID/status.

use std::time::{Duration, Instant};

use serde_json::json;

use mcpgw_testkit::*;

const MIB: u64 = 1024;

/// The gateway's resident memory once it has settled (KiB).
async fn settled_rss(gw: &Gateway) -> u64 {
    tokio::time::sleep(Duration::from_millis(1500)).await;
    rss_kib(gw.pid())
}

#[tokio::test]
async fn junk_and_oversized_replies_stream_past_without_being_held() {
    let gw = start_gateway(&[]);
    gw.add(rogue_stdio("rogue"), "").await.expect(200);
    gw.call("rogue", "junk", json!({"bytes": 1}))
        .await
        .expect(200);
    let baseline = settled_rss(&gw).await;

    // 200 MiB of junk on one line, then the answer.
    let sampler = RssSampler::start(gw.pid());
    let r = gw
        .call("rogue", "junk", json!({"bytes": 200 << 20}))
        .await
        .expect(200);
    let peak = sampler.peak();
    assert_eq!(r.json()["chunk"]["content"][0]["text"], "after junk");
    let after = settled_rss(&gw).await;
    eprintln!(
        "200 MiB junk line: baseline {} MiB, peak {} MiB, after {} MiB",
        baseline / MIB,
        peak / MIB,
        after / MIB
    );
    assert!(peak < baseline + 32 * MIB, "peak {peak} KiB");
    assert!(gw.log().contains("not JSON-RPC"));

    // A valid reply of 200 MiB, over the 64 MiB default: its call fails at once.
    let sampler = RssSampler::start(gw.pid());
    let started = Instant::now();
    let r = gw
        .call("rogue", "huge", json!({"bytes": 200 << 20}))
        .await
        .expect(502);
    let peak = sampler.peak();
    eprintln!(
        "200 MiB reply: peak {} MiB, answered in {:?}",
        peak / MIB,
        started.elapsed()
    );
    assert!(
        r.detail()
            .contains("more than --max-reply-bytes (67108864)"),
        "{}",
        r.detail()
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    // What looks like a message is held up to the limit (64 MiB), never more.
    assert!(peak < baseline + 3 * 64 * MIB, "peak {peak} KiB");
    let after = settled_rss(&gw).await;
    assert!(after < baseline + 16 * MIB, "after {after} KiB");

    // One line that never ends: bounded too, and the call meets its deadline.
    let sampler = RssSampler::start(gw.pid());
    gw.post(
        "/mcps/rogue/tools/endless?timeout=3",
        json!({"arguments": {}}),
    )
    .await
    .expect(504);
    let peak = sampler.peak();
    let after = settled_rss(&gw).await;
    eprintln!(
        "endless line for 3 s: peak {} MiB, after {} MiB",
        peak / MIB,
        after / MIB
    );
    assert!(peak < baseline + 3 * 64 * MIB, "peak {peak} KiB");
    assert!(after < baseline + 16 * MIB, "after {after} KiB");
    gw.delete("/mcps/rogue").await.expect(200);
}

#[tokio::test]
async fn a_large_reply_is_served_and_its_memory_given_back() {
    let gw = start_gateway(&[]);
    gw.add(rogue_stdio("rogue"), "").await.expect(200);
    gw.call("rogue", "huge", json!({"bytes": 1}))
        .await
        .expect(200);
    let baseline = settled_rss(&gw).await;
    let sampler = RssSampler::start(gw.pid());
    let r = gw
        .call("rogue", "huge", json!({"bytes": 48 << 20}))
        .await
        .expect(200);
    let peak = sampler.peak();
    let text = r.json()["chunk"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .len();
    assert_eq!(text, 48 << 20);
    drop(r);
    let after = settled_rss(&gw).await;
    eprintln!(
        "48 MiB reply: baseline {} MiB, peak {} MiB, after {} MiB",
        baseline / MIB,
        peak / MIB,
        after / MIB
    );
    assert!(
        after < baseline + 16 * MIB,
        "{after} KiB after, {baseline} KiB before"
    );
    // The limit is configurable.
    let small = start_gateway(&["--max-reply-bytes", "1048576"]);
    small.add(rogue_stdio("rogue"), "").await.expect(200);
    let r = small
        .call("rogue", "huge", json!({"bytes": 2 << 20}))
        .await
        .expect(502);
    assert!(r.detail().contains("(1048576)"), "{}", r.detail());
    small
        .call("rogue", "huge", json!({"bytes": 1000}))
        .await
        .expect(200);
}

#[tokio::test]
async fn a_log_flood_is_rate_limited() {
    let gw = start_gateway(&["--log-rate", "20"]);
    gw.add(rogue_stdio("rogue"), "").await.expect(200);
    let baseline = settled_rss(&gw).await;
    let log_before = gw.log().len();
    let sampler = RssSampler::start(gw.pid());
    let started = Instant::now();
    gw.call("rogue", "flood", json!({"count": 20_000}))
        .await
        .expect(200);
    let peak = sampler.peak();
    let took = started.elapsed();
    // The stderr reader may lag the reply a little.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let log = gw.log();
    let grown = log.len() - log_before;
    eprintln!(
        "20k log messages and stderr lines in {took:?}: log grew {} KiB, peak {} MiB (baseline {} MiB)",
        grown / 1024,
        peak / MIB,
        baseline / MIB
    );
    assert!(log.contains("suppressed"), "no summary line");
    // At 20 lines a second plus a burst, a few seconds of flood log at most some hundred lines.
    let allowed = (took.as_secs_f64() + 2.0) * 20.0 * 2.0 + 60.0;
    let lines = log[log_before..].lines().count() as f64;
    assert!(lines < allowed, "{lines} lines logged");
    assert!(peak < baseline + 64 * MIB, "peak {peak} KiB");
}

#[tokio::test]
async fn an_sse_event_that_never_ends_is_cut_at_the_limit_and_fails_the_call() {
    let server = rogue_sse();
    let gw = start_gateway(&["--max-reply-bytes", "8388608"]);
    gw.add(http_spec("sse", &server.url), "").await.expect(200);
    let baseline = settled_rss(&gw).await;
    let sampler = RssSampler::start(gw.pid());
    let started = Instant::now();
    let r = gw.call("sse", "endless", json!({})).await.expect(502);
    let peak = sampler.peak();
    eprintln!(
        "endless SSE event, 8 MiB limit: peak {} MiB (baseline {} MiB), failed in {:?}: {}",
        peak / MIB,
        baseline / MIB,
        started.elapsed(),
        r.detail()
    );
    assert!(
        r.detail()
            .contains("sent an event larger than --max-reply-bytes (8388608)"),
        "{}",
        r.detail()
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(peak < baseline + 48 * MIB, "peak {peak} KiB");
    gw.delete("/mcps/sse").await.expect(200);
    let after = settled_rss(&gw).await;
    assert!(after < baseline + 16 * MIB, "after {after} KiB");
}
