//! Pass integration tests in one binary: canonicalize, the cost model and its search (as a
//! pass and from the CLI), fuse and shard, each against the interpreter as the oracle.

#[path = "../common/mod.rs"]
mod common;

mod canonicalize;
mod cost;
mod cost_chains;
mod cost_cli;
mod cost_model;
mod fuse;
mod gather;
mod grad;
mod grad_random;
mod scatter;
mod shard;
mod state;
mod unit;
mod vocab;
