//! The `agents` family against the in-repo mock responder (`examples/mock_server.rs`): the
//! think times the agents rest, as measured, follow the distribution configured.

#[allow(dead_code)]
#[path = "../examples/mock_server.rs"]
mod mock;

use std::time::{Duration, Instant};

use mcpfast_engine::config::{Family, JsonObject, MixCall, MixItem, Settings, StepOrder};
use mcpfast_engine::Engine;
use mock::MockOptions;

/// The `q` quantile (s) of (µs, count) buckets.
fn quantile(buckets: &[(u64, u64)], q: f64) -> f64 {
    let mut sorted = buckets.to_vec();
    sorted.sort_unstable();
    let total: u64 = sorted.iter().map(|b| b.1).sum();
    let rank = (total as f64 * q).ceil() as u64;
    let mut seen = 0;
    for (us, n) in sorted {
        seen += n;
        if seen >= rank {
            return us as f64 / 1e6;
        }
    }
    f64::NAN
}

#[test]
fn measured_think_times_follow_the_configured_distribution() {
    let (port, _) = mock::spawn(MockOptions::default());
    let (median, p90) = (0.1, 0.25);
    let (agents, steps) = (1500, 12);
    let settings = Settings {
        url: Some(format!("http://127.0.0.1:{port}/mcp")),
        family: Family::Agents,
        // one session of `steps` calls per agent, a think time before each
        agent_order: StepOrder::Weighted,
        agent_steps: (steps, steps),
        agent_list_tools: false,
        think: format!("lognormal:{median}:{p90}"),
        idle: Some("constant:0".into()),
        iterations: Some(agents),
        mix: vec![MixItem::new(
            MixCall::Tool {
                name: "echo".into(),
                arguments: JsonObject::new(),
            },
            1,
        )],
        ..Settings::default()
    };
    let e = Engine::new(settings.build().expect("valid config")).expect("engine");
    e.start().expect("start");
    e.set_users(agents as usize);
    // every session ends on its own: no think time is cut short by the stop (a run cut off
    // would keep the short ones and lose the long ones still running)
    let deadline = Instant::now() + Duration::from_secs(30);
    while e.status().iterations < agents && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    e.stop(Duration::from_secs(1));
    let think: Vec<(u64, u64)> = e
        .histograms()
        .into_iter()
        .filter(|h| h.0 == "agent:think" && !h.1)
        .flat_map(|h| h.2)
        .collect();
    let samples: u64 = think.iter().map(|b| b.1).sum();
    assert_eq!(
        samples,
        agents * u64::from(steps),
        "every think time measured"
    );
    // the p90 of 18,000 draws is within 1% of the distribution's (1 σ)
    let (got_median, got_p90) = (quantile(&think, 0.5), quantile(&think, 0.9));
    assert!(
        (got_median / median - 1.0).abs() < 0.05,
        "median {got_median} s, configured {median} s"
    );
    assert!(
        (got_p90 / p90 - 1.0).abs() < 0.05,
        "p90 {got_p90} s, configured {p90} s"
    );
    let status = e.status();
    assert_eq!(status.agents, 0, "every agent ended at the stop");
}
