//! stdio: child processes, many requests in flight per process (pipelined lines).
