//! Graph passes. Each pass lives in its own file and is a plain function over a verified
//! module; the pass manager (added with the first pass) runs them in one visible order and
//! re-verifies after each. No pass is registered yet: `tapc opt --passes=` accepts only an
//! empty list until the canonicalize/alias issue lands.
//!
//! `alias` already holds the stripe/sett/region set algebra that alias analysis is built on;
//! the analysis over graphs comes with that issue.

pub mod alias;

/// Names of the passes this build knows (none yet).
pub const REGISTERED: &[&str] = &[];
