//! Graph passes. Each pass lives in its own folder (`canonicalize/`, `alias/`, `shard/`,
//! `fuse/`, `cost/`), implements [`pass::Pass`], and is listed in [`manager::registry`]; the
//! manager runs them in the order the pipeline names them and re-verifies after each one.
//! Besides the module a pass sees a [`context::PassContext`], which owns the verification facts
//! (passes never call the verifier), and `rewrite` holds what graph rewrites share.

pub mod alias;
pub mod canonicalize;
pub mod context;
pub mod cost;
pub mod fuse;
pub mod grad;
pub mod manager;
pub mod pass;
pub mod rewrite;
pub mod shard;
