//! The library's unit tests of this area (moved here so the library compiles once per test run).

mod lsp_edits;
mod lsp_line_index;
mod lsp_names;
mod lsp_transport;
