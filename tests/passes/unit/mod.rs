//! The library's unit tests of this area (moved here so the library compiles once per test run).

mod alias_analysis;
mod alias_differential;
mod alias_regions;
mod alias_sett;
mod alias_stripe;
mod canonicalize_chain;
mod fuse_affine;
mod fuse_emit;
mod fuse_kernel;
mod fuse_views;
mod manager;
