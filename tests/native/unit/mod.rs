//! The library's unit tests of this area (moved here so the library compiles once per test run).

mod codegen_kernel;
mod codegen_schedule;
