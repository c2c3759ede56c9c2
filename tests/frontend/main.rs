//! Front-end integration tests in one binary: the CLI in-process, error codes, lossless `tapc fmt`, messages, the
//! multi-mistake corpus, pathological nesting, the examples, interpreter semantics, the
//! printer round trip, the FileCheck/annotation support code, the fuzzer's CI slice, and the
//! check that no two files of a crate import each other.

#[path = "../common/mod.rs"]
mod common;
#[path = "../fuzzing/mod.rs"]
mod fuzzing;
#[path = "../support/mod.rs"]
mod support;

mod cli;
mod codes;
mod corpus;
mod corpus_pathological;
mod examples;
mod filecheck;
mod fmt;
mod fuzz;
mod import_circles;
mod interp;
mod messages;
mod no_lib_tests;
mod roundtrip;
mod unit;
