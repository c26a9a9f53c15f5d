//! mcpfast-load: a load generator for MCP over Streamable HTTP (the handshake era,
//! 2025-03-26..2025-11-25), built to run on one core without becoming the bottleneck.
//!
//! One thread (tokio current-thread runtime), one HTTP/1.1 client per keep-alive connection and
//! the MCP requests with their reply checks (both from `mcpfast-engine`, [`http`] and [`mcp`],
//! built on `mcpfast-core`'s scanner and SSE decoder), HDR histograms and the generator's own CPU
//! time ([`stats`]), and the four modes ([`modes`]).

pub mod cli;
pub mod modes;
pub mod stats;

/// The HTTP client and the MCP requests and reply checks are the engine's (on mcpfast-core).
pub use mcpfast_engine::{http, mcp};

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::cli::{Mode, Options};
use crate::mcp::{Proto, Target};
use crate::modes::{emit, Outcome, Run};
use crate::stats::Stats;

/// Run one mode to the end; prints the JSON lines and the human line, returns the exit status.
pub fn run(opts: Options) -> i32 {
    let target = match Target::parse(&opts.url) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("mcpfast-load: {e}");
            return 2;
        }
    };
    raise_open_files_limit();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("mcpfast-load: cannot start the runtime: {e}");
            return 2;
        }
    };
    let proto = Proto::new(
        target,
        opts.protocol_version.clone(),
        opts.timeout,
        &opts.tool,
        &opts.arguments,
    );
    let started = Instant::now();
    let run = Rc::new(Run {
        proto: Rc::new(proto),
        stats: Rc::new(RefCell::new(Stats::new())),
        started,
        deadline: started + opts.max_time,
        opts,
    });
    // loops stop starting requests at the deadline and each request has its own timeout; this
    // outer limit only catches what those would miss
    let limit = run.opts.max_time + run.opts.timeout * 2 + Duration::from_secs(10);
    let local = tokio::task::LocalSet::new();
    let mode_run = run.clone();
    let outcome = local.block_on(&runtime, async move {
        let fut = async move {
            match mode_run.opts.mode {
                Mode::Calls => modes::calls::run(mode_run).await,
                Mode::Handshakes => modes::handshakes::run(mode_run).await,
                Mode::Hold => modes::hold::run(mode_run).await,
                Mode::Churn => modes::churn::run(mode_run).await,
            }
        };
        tokio::time::timeout(limit, fut).await.ok()
    });
    let Some(Outcome {
        summary,
        human,
        cut_short,
    }) = outcome
    else {
        let stats = run.stats.borrow();
        let mut line = run.header("aborted");
        line["reason"] = json!("hard time limit reached");
        line["failures"] = stats.failures_json();
        line["generator_cpu_seconds"] = json!(stats::Cpu::now().total());
        emit(&line);
        eprintln!(
            "{}: aborted at the hard time limit ({:.0} s)",
            run.opts.mode.name(),
            limit.as_secs_f64()
        );
        return 3;
    };
    emit(&summary);
    eprintln!("{human}");
    let failed = run.stats.borrow().failures_total() > 0;
    if cut_short {
        3
    } else if failed {
        1
    } else {
        0
    }
}

/// One socket per connection: lift the soft limit on open files to the hard limit.
fn raise_open_files_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        if soft < hard {
            let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
        }
    }
}
