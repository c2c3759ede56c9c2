//! Unit tests of `tapc::passes::manager`, kept out of the library so that `cargo test` compiles it once.

use tapc::diag::codes;
use tapc::passes::manager::*;

#[test]
fn pipelines_with_options_split_at_top_level_commas() {
    let p = parse_pipeline("canonicalize, shard{parts=4,dims=auto},fuse").unwrap();
    assert_eq!(p.len(), 3);
    assert_eq!(p[1].name, "shard");
    assert_eq!(
        p[1].options,
        vec![("parts".into(), "4".into()), ("dims".into(), "auto".into())]
    );
    assert!(parse_pipeline("").unwrap().is_empty());
}

#[test]
fn malformed_pipelines_are_errors() {
    assert!(parse_pipeline("shard{parts=4").is_err());
    assert!(parse_pipeline("shard}").is_err());
    assert!(parse_pipeline("shard{parts}").is_err());
    assert!(parse_pipeline("sh ard").is_err());
}

#[test]
fn input_paths_are_the_file_options_of_the_pipeline_and_the_config() {
    let cfg = RunConfig {
        pass_options: vec![("cost".into(), "machine".into(), "b.toml".into())],
        ..RunConfig::default()
    };
    let pipeline = "canonicalize,cost{machine=a.toml,seed=2},cost{machine=a.toml}";
    assert_eq!(input_paths(pipeline, &cfg), ["a.toml", "b.toml"]);
    assert!(input_paths("canonicalize", &cfg).is_empty());
    assert!(input_paths("cost{", &cfg).is_empty());
}

#[test]
fn unknown_passes_and_options_are_diagnostics() {
    let cfg = RunConfig::default();
    assert_eq!(
        build("nosuch", &cfg).err().unwrap().code,
        Some(codes::BAD_PASS)
    );
    assert_eq!(
        build("canonicalize{bogus=1}", &cfg).err().unwrap().code,
        Some(codes::BAD_PASS)
    );
    let cfg = RunConfig {
        print_after: vec!["nosuch".into()],
        ..RunConfig::default()
    };
    assert!(build("", &cfg).is_err());
}
