//! `pap-supervise FD -- PROGRAM ARGS…`: the supervisor of one command agent, as a binary of
//! its own so that starting it is cheap (see `crates/pap-supervise`). pap finds it beside
//! itself; it is not meant to be run by hand.
//!
//! It names only the `pap-supervise` crate (std and nix): linked through the `pap` library,
//! the binary carried the TLS stack's start-up code (it ran at every start).

fn main() {
    pap_supervise::main(std::env::args_os().skip(1).collect())
}
