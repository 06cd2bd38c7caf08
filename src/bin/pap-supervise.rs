//! `pap-supervise FD -- PROGRAM ARGS…`: the supervisor of one command agent, as a binary of
//! its own so that starting it is cheap (see `pap::agent::supervise`). pap finds it beside
//! itself; it is not meant to be run by hand.

fn main() {
    pap::agent::supervise::main(std::env::args_os().skip(1).collect())
}
