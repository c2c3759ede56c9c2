//! The library's unit tests of this area (moved here so the library compiles once per test run).

mod ir;
mod ir_instance;
mod syntax_lexer;
