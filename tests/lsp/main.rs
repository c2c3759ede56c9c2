//! `tapc lsp` end to end, in one binary: a JSON-RPC client driving the server (`lsp`; completion,
//! formatting and the other editing requests in `editing`), and headless
//! Neovim attached to it (both run the `tapc` executable).

#[path = "../common/lsp_client.rs"]
mod lsp_client;
#[path = "../common/syspkg.rs"]
#[allow(dead_code)] // only `ensure` is used here
mod syspkg;

mod editing;
mod lsp;
mod lsp_nvim;
mod unit;
