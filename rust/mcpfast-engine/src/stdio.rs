//! stdio: child processes, many requests in flight per process (pipelined lines).

use crate::run::Ctx;

pub async fn child_session(_ctx: &Ctx, _slot: usize) {}
