//! Graph passes. Each pass lives in its own file, implements [`manager::Pass`], and is listed
//! in [`manager::registry`]; the manager runs them in the order the pipeline names them and
//! re-verifies after each one.

pub mod alias;
pub mod canonicalize;
pub mod cost;
pub mod fuse;
pub mod manager;
pub mod rewrite;
pub mod shard;
