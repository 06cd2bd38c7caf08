//! `pap-supervise FD -- PROGRAM ARGS…`: the supervisor of one command agent, as a binary of
//! its own so that starting it is cheap (see `src/agent/supervise.rs`). pap finds it beside
//! itself; it is not meant to be run by hand.
//!
//! The module is compiled in directly rather than through the `pap` library: linked through
//! the library, the binary carried the TLS stack's start-up code (it ran at every start).

#[allow(dead_code)]
#[path = "../agent/supervise.rs"]
mod supervise;

fn main() {
    supervise::main(std::env::args_os().skip(1).collect())
}
