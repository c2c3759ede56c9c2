//! `tapc lsp` end to end, in one binary: a JSON-RPC client driving the server (`lsp`; completion,
//! formatting and the other editing requests in `editing`; a burst of edits in `burst`), headless Neovim attached to it
//! (both run the `tapc` executable), the hardening against bad input and a slice of the LSP
//! fuzzer (in-process).

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/lsp_client.rs"]
mod lsp_client;
#[path = "../fuzzing/lsp.rs"]
mod lsp_fuzz;

use common::syspkg;

mod burst;
mod editing;
mod fuzz;
mod hardening;
mod lsp;
mod lsp_nvim;
mod unit;
