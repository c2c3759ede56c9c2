//! The library's unit tests of this area (moved here so the library compiles once per test run).

mod diag_suggest;
mod ir;
mod ir_instance;
mod syntax_lexer;
