//! Unit tests for the filetest support code: the FileCheck engine (`support/filecheck.rs`),
//! the diagnostic annotation parser (`support/annotations.rs`) and the harness helpers
//! (`support/mod.rs`: RUN lines, rendering, diffs, discovery).

// The binary's root loads support/mod.rs whole, which lets the harness helpers be tested here.
use crate::support;
use support::{annotations, filecheck};

use filecheck::{check, check_with, has_directives, Options};

/// Asserts that checking fails and that the message contains every `needle`.
fn fails(source: &str, output: &str, needles: &[&str]) {
    let err = check(source, output).expect_err("expected FileCheck to fail");
    for n in needles {
        assert!(err.contains(n), "message lacks {n:?}:\n{err}");
    }
}

fn passes(source: &str, output: &str) {
    if let Err(e) = check(source, output) {
        panic!("expected FileCheck to pass, got:\n{e}");
    }
}

mod plain {
    use super::*;

    #[test]
    fn substring_matches() {
        passes("// CHECK: b c", "a b c d\n");
    }

    #[test]
    fn matches_in_order() {
        passes("// CHECK: one\n// CHECK: three", "one\ntwo\nthree\n");
        fails(
            "// CHECK: three\n// CHECK: one",
            "one\ntwo\nthree\n",
            &["check line 2", "CHECK: one"],
        );
    }

    #[test]
    fn two_matches_on_one_line() {
        passes("// CHECK: a\n// CHECK: b", "a b\n");
    }

    #[test]
    fn missing_reports_directive_and_region() {
        let err = check(
            "x\n// CHECK: first\n// CHECK: nope",
            "zero\nfirst\nsecond\nthird\n",
        )
        .unwrap_err();
        assert!(
            err.contains("check line 3: CHECK: expected string not found in output"),
            "{err}"
        );
        assert!(err.contains("CHECK: nope"), "{err}");
        assert!(
            err.contains("searched output from line 2, column 6"),
            "{err}"
        );
        assert!(
            err.contains("    3 | second") && err.contains("    4 | third"),
            "{err}"
        );
        assert!(
            !err.contains("| zero"),
            "region starts after the previous match:\n{err}"
        );
    }

    #[test]
    fn literal_regex_metacharacters_are_escaped() {
        passes("// CHECK: a.b(c)*", "a.b(c)*\n");
        fails("// CHECK: a.b", "axb\n", &["expected string not found"]);
        passes("// CHECK: x[0] = $1 ^ y", "x[0] = $1 ^ y\n");
    }

    #[test]
    fn directive_may_follow_other_text() {
        passes("%v = add  ; CHECK: add", "add\n");
    }

    #[test]
    fn empty_output() {
        fails("// CHECK: x", "", &["(output is empty)"]);
    }

    #[test]
    fn possible_intended_match_hint() {
        fails(
            "// CHECK: node n1 = mul",
            "foo\nnode n1 = add\nbar\n",
            &["possible intended match at output line 2"],
        );
    }
}

mod whitespace {
    use super::*;

    #[test]
    fn runs_of_blanks_are_canonicalized() {
        passes("// CHECK: a b", "a  \t  b\n");
        passes("// CHECK: a \t   b", "a b\n");
    }

    #[test]
    fn a_blank_is_still_required() {
        fails("// CHECK: a b", "ab\n", &["expected string not found"]);
    }

    #[test]
    fn pattern_is_trimmed() {
        passes("// CHECK:    a   ", "xa\n");
    }

    #[test]
    fn strict_whitespace_option() {
        let opts = Options {
            strict_whitespace: true,
            ..Options::default()
        };
        assert!(check_with("// CHECK: a b", "a  b\n", &opts).is_err());
        assert!(check_with("// CHECK: a  b", "a  b\n", &opts).is_ok());
    }

    #[test]
    fn messages_show_original_whitespace() {
        fails(
            "// CHECK: zzz",
            "    indented   line\n",
            &["    1 |     indented   line"],
        );
    }

    #[test]
    fn newlines_are_not_blanks() {
        fails("// CHECK: a b", "a\nb\n", &["expected string not found"]);
    }
}

mod next {
    use super::*;

    #[test]
    fn next_line_passes() {
        passes(
            "// CHECK: a\n// CHECK-NEXT: b\n// CHECK-NEXT: c",
            "a\nb\nc\n",
        );
    }

    #[test]
    fn later_line_fails() {
        fails(
            "// CHECK: a\n// CHECK-NEXT: c",
            "a\nb\nc\n",
            &[
                "check line 2: CHECK-NEXT: is not on the line after the previous match",
                "found at output line 3",
                "previous match ended on output line 1",
            ],
        );
    }

    #[test]
    fn same_line_fails() {
        fails(
            "// CHECK: a\n// CHECK-NEXT: b",
            "a b\n",
            &["is on the same line as the previous match"],
        );
    }

    #[test]
    fn missing_fails() {
        fails(
            "// CHECK: a\n// CHECK-NEXT: z",
            "a\nb\n",
            &["CHECK-NEXT: expected string not found"],
        );
    }

    #[test]
    fn first_directive_is_an_error() {
        fails(
            "// CHECK-NEXT: a",
            "a\n",
            &["found 'CHECK-NEXT' without previous 'CHECK:' line"],
        );
        fails(
            "// CHECK-NOT: x\n// CHECK-SAME: a",
            "a\n",
            &["'CHECK-SAME' without previous"],
        );
    }
}

mod same {
    use super::*;

    #[test]
    fn same_line_passes() {
        passes("// CHECK: a\n// CHECK-SAME: b\n// CHECK-SAME: c", "a b c\n");
    }

    #[test]
    fn other_line_fails() {
        fails(
            "// CHECK: a\n// CHECK-SAME: b",
            "a\nb\n",
            &["CHECK-SAME: is not on the same line as the previous match"],
        );
    }

    #[test]
    fn must_come_after_previous_match() {
        fails(
            "// CHECK: b\n// CHECK-SAME: a",
            "a b\n",
            &["expected string not found"],
        );
    }
}

mod not {
    use super::*;

    #[test]
    fn absent_passes() {
        passes("// CHECK: a\n// CHECK-NOT: x\n// CHECK: b", "a\nb\n");
    }

    #[test]
    fn between_matches_fails() {
        let err = check("// CHECK: a\n// CHECK-NOT: x\n// CHECK: b", "a\nx\nb\n").unwrap_err();
        assert!(
            err.contains("check line 2: CHECK-NOT: excluded string found in output"),
            "{err}"
        );
        assert!(
            err.contains("found at output line 2:\n      2 | x\n        | ^"),
            "{err}"
        );
    }

    #[test]
    fn only_the_region_between_matches_counts() {
        passes("// CHECK: a\n// CHECK-NOT: x\n// CHECK: b", "x\na\nb\nx\n");
    }

    #[test]
    fn leading_not_covers_start_of_output() {
        fails(
            "// CHECK-NOT: x\n// CHECK: a",
            "x\na\n",
            &["excluded string found"],
        );
        passes("// CHECK-NOT: x\n// CHECK: a", "a\nx\n");
    }

    #[test]
    fn trailing_not_covers_end_of_output() {
        fails(
            "// CHECK: a\n// CHECK-NOT: x",
            "a\nb\nx\n",
            &["found at output line 3"],
        );
    }

    #[test]
    fn alone_covers_everything() {
        passes("// CHECK-NOT: x", "a\n");
        fails("// CHECK-NOT: x", "a\nx\n", &["excluded string found"]);
    }

    #[test]
    fn caret_marks_the_match() {
        fails(
            "// CHECK-NOT: bad",
            "a  bad b\n",
            &["1 | a  bad b\n        |    ^^^"],
        );
    }

    #[test]
    fn regex_not() {
        fails(
            "// CHECK-NOT: {{[0-9]+}}",
            "abc 42\n",
            &["excluded string found"],
        );
    }
}

mod label {
    use super::*;

    const OUT: &str = "func @f:\n  x\nfunc @g:\n  y\n";

    #[test]
    fn partitions_output() {
        passes(
            "// CHECK-LABEL: @f\n// CHECK: x\n// CHECK-LABEL: @g\n// CHECK: y",
            OUT,
        );
    }

    #[test]
    fn check_cannot_leak_into_next_block() {
        fails(
            "// CHECK-LABEL: @f\n// CHECK: y\n// CHECK-LABEL: @g",
            OUT,
            &["check line 2: CHECK: expected string not found"],
        );
    }

    #[test]
    fn next_after_label() {
        passes("// CHECK-LABEL: @g\n// CHECK-NEXT: y", OUT);
    }

    #[test]
    fn missing_label_fails() {
        fails(
            "// CHECK-LABEL: @h\n// CHECK: x",
            OUT,
            &["CHECK-LABEL: expected string not found"],
        );
    }

    #[test]
    fn labels_must_be_in_order() {
        fails(
            "// CHECK-LABEL: @g\n// CHECK-LABEL: @f",
            OUT,
            &["check line 2"],
        );
    }

    #[test]
    fn errors_of_all_blocks_are_reported() {
        let err = check(
            "// CHECK-LABEL: @f\n// CHECK: nope1\n// CHECK-LABEL: @g\n// CHECK: nope2",
            OUT,
        )
        .unwrap_err();
        assert!(err.contains("nope1") && err.contains("nope2"), "{err}");
    }

    #[test]
    fn not_is_scoped_to_block() {
        passes(
            "// CHECK-LABEL: @f\n// CHECK-NOT: y\n// CHECK-LABEL: @g",
            OUT,
        );
    }

    #[test]
    fn variables_survive_labels() {
        passes(
            "// CHECK-LABEL: @f\n// CHECK: [[V:[a-z]]]\n// CHECK-LABEL: @g\n// CHECK-NOT: [[V]]",
            OUT,
        );
    }

    #[test]
    fn cannot_define_or_use_variables() {
        fails(
            "// CHECK-LABEL: [[V:f]]",
            OUT,
            &["CHECK-LABEL: cannot define or use variables"],
        );
        fails(
            "// CHECK: [[V:f]]\n// CHECK-LABEL: [[V]]",
            OUT,
            &["CHECK-LABEL: cannot define or use"],
        );
    }

    #[test]
    fn at_line_is_allowed() {
        passes("// CHECK-LABEL: @f{{.*}}[[@LINE]]", "func @f: 1\n");
    }
}

mod dag {
    use super::*;

    #[test]
    fn any_order() {
        passes("// CHECK-DAG: b\n// CHECK-DAG: a", "a\nb\n");
    }

    #[test]
    fn missing_fails() {
        fails(
            "// CHECK-DAG: a\n// CHECK-DAG: z",
            "a\nb\n",
            &["check line 2: CHECK-DAG: expected string not found"],
        );
    }

    #[test]
    fn matches_do_not_overlap() {
        passes("// CHECK-DAG: a\n// CHECK-DAG: a", "a\na\n");
        fails("// CHECK-DAG: a\n// CHECK-DAG: a", "a\n", &["CHECK-DAG"]);
    }

    #[test]
    fn following_check_starts_after_last_dag_match() {
        passes("// CHECK-DAG: b\n// CHECK-DAG: a\n// CHECK: c", "a\nb\nc\n");
        fails(
            "// CHECK-DAG: c\n// CHECK-DAG: a\n// CHECK: b",
            "a\nb\nc\n",
            &["check line 3"],
        );
    }

    #[test]
    fn not_separates_groups() {
        let src =
            "// CHECK-DAG: a\n// CHECK-DAG: b\n// CHECK-NOT: x\n// CHECK-DAG: c\n// CHECK-DAG: d";
        passes(src, "b\na\nd\nc\n");
        fails(
            src,
            "b\na\nx\nd\nc\n",
            &["check line 3: CHECK-NOT: excluded string found"],
        );
    }

    #[test]
    fn dag_after_check() {
        passes(
            "// CHECK: start\n// CHECK-DAG: y\n// CHECK-DAG: x",
            "x\nstart\nx\ny\n",
        );
        fails(
            "// CHECK: start\n// CHECK-DAG: y\n// CHECK-DAG: x",
            "x\nstart\ny\n",
            &["check line 3"],
        );
    }
}

mod empty {
    use super::*;

    #[test]
    fn empty_next_line_passes() {
        passes("// CHECK: a\n// CHECK-EMPTY:\n// CHECK-NEXT: b", "a\n\nb\n");
    }

    #[test]
    fn non_empty_line_fails() {
        fails(
            "// CHECK: a\n// CHECK-EMPTY:",
            "a\nb\n",
            &["CHECK-EMPTY: expected an empty line", "output line 2"],
        );
    }

    #[test]
    fn end_of_output_fails() {
        fails("// CHECK: a\n// CHECK-EMPTY:", "a\n", &["output ends"]);
    }

    #[test]
    fn blank_only_line_is_not_empty() {
        fails(
            "// CHECK: a\n// CHECK-EMPTY:",
            "a\n \nb\n",
            &["expected an empty line"],
        );
    }

    #[test]
    fn pattern_is_an_error() {
        fails(
            "// CHECK: a\n// CHECK-EMPTY: x",
            "a\n\n",
            &["CHECK-EMPTY: must not have a pattern"],
        );
    }
}

mod count {
    use super::*;

    #[test]
    fn exact_count_passes() {
        passes("// CHECK-COUNT-3: x\n// CHECK-NOT: x", "x\nx x\ny\n");
    }

    #[test]
    fn too_few_fails() {
        fails(
            "// CHECK-COUNT-3: x",
            "x\nx\n",
            &[
                "CHECK-COUNT-3: expected string not found",
                "matched only 2 of 3 times",
            ],
        );
    }

    #[test]
    fn zero_is_not_a_directive() {
        fails(
            "// CHECK-COUNT-0: x",
            "x\n",
            &["unknown directive `CHECK-COUNT-0:`"],
        );
    }
}

mod regex {
    use super::*;

    #[test]
    fn inline_regex() {
        passes("// CHECK: %{{[0-9]+}} = add", "%12 = add\n");
        fails(
            "// CHECK: %{{[0-9]+}} = add",
            "%x = add\n",
            &["expected string not found"],
        );
    }

    #[test]
    fn regex_is_grouped() {
        passes("// CHECK: a{{b|c}}d", "acd\n");
    }

    #[test]
    fn several_regexes() {
        passes("// CHECK: {{^}}x {{[a-z]+}} {{.*}}{{$}}", "x yz w\n");
    }

    #[test]
    fn anchors_are_per_line() {
        passes("// CHECK: {{^}}b{{$}}", "a\nb\nc\n");
        fails("// CHECK: {{^}}b", "ab\n", &["expected string not found"]);
    }

    #[test]
    fn dot_does_not_cross_lines() {
        fails(
            "// CHECK: a{{.*}}b",
            "a\nb\n",
            &["expected string not found"],
        );
    }

    #[test]
    fn invalid_regex_is_reported() {
        fails("// CHECK: {{[a-}}", "x\n", &["line 1: invalid regex"]);
    }

    #[test]
    fn unterminated_regex_is_reported() {
        fails("// CHECK: {{abc", "abc\n", &["unterminated `{{` regex"]);
    }

    #[test]
    fn empty_regex_is_reported() {
        fails("// CHECK: a{{}}", "a\n", &["empty `{{}}` regex"]);
    }
}

mod variables {
    use super::*;

    #[test]
    fn capture_and_use() {
        passes(
            "// CHECK: [[X:%[0-9]+]] = const\n// CHECK: add [[X]], [[X]]",
            "%3 = const\nadd %3, %3\n",
        );
    }

    #[test]
    fn mismatched_use_fails_with_value() {
        fails(
            "// CHECK: [[X:%[0-9]+]] = const\n// CHECK: add [[X]]",
            "%3 = const\nadd %4\n",
            &[
                "check line 2: CHECK: expected string not found",
                "with \"X\" equal to \"%3\"",
            ],
        );
    }

    #[test]
    fn used_value_is_literal() {
        fails(
            "// CHECK: [[V:a.b]]\n// CHECK: [[V]]",
            "a.b\naxb\n",
            &["expected string not found"],
        );
    }

    #[test]
    fn character_class_inside_capture() {
        passes("// CHECK: [[V:[0-9]]]x\n// CHECK: y[[V]]", "7x\ny7\n");
        passes(
            "// CHECK: [[V:[\\]a]+]]\n// CHECK-NEXT: [[V]]",
            "a]a\na]a\n",
        );
    }

    #[test]
    fn redefinition_replaces_value() {
        passes(
            "// CHECK: [[V:[a-z]]]1\n// CHECK: [[V:[a-z]]]2\n// CHECK: =[[V]]",
            "a1\nb2\n=b\n",
        );
    }

    #[test]
    fn undefined_use_fails() {
        fails(
            "// CHECK: [[NOPE]]",
            "x\n",
            &["uses undefined variable `[[NOPE]]`"],
        );
    }

    #[test]
    fn use_in_defining_pattern_is_rejected() {
        fails(
            "// CHECK: [[V:a]] [[V]]",
            "a a\n",
            &["used in the same pattern that defines it"],
        );
    }

    #[test]
    fn double_definition_is_rejected() {
        fails("// CHECK: [[V:a]] [[V:b]]", "a b\n", &["defined twice"]);
    }

    #[test]
    fn invalid_name_is_rejected() {
        fails("// CHECK: [[1X:a]]", "a\n", &["invalid variable name `1X`"]);
    }

    #[test]
    fn unterminated_is_reported() {
        fails("// CHECK: [[V:a", "a\n", &["unterminated `[[` variable"]);
    }

    #[test]
    fn not_cannot_define() {
        fails(
            "// CHECK-NOT: [[V:a]]",
            "b\n",
            &["CHECK-NOT: cannot define variables"],
        );
    }

    #[test]
    fn dag_can_define() {
        passes(
            "// CHECK-DAG: b[[B:[0-9]]]\n// CHECK-DAG: a[[A:[0-9]]]\n// CHECK: [[A]][[B]]",
            "a1\nb2\n12\n",
        );
    }
}

mod at_line {
    use super::*;

    #[test]
    fn expands_to_directive_line() {
        passes("\n\n// CHECK: x.teg:[[@LINE]]:5", "x.teg:3:5\n");
    }

    #[test]
    fn offsets() {
        passes(
            "// CHECK: :[[@LINE+1]]:\nline2\n// CHECK: :[[@LINE-3]]:",
            ":2:\n:0:\n",
        );
    }

    #[test]
    fn bad_expression() {
        fails(
            "// CHECK: [[@LINE*2]]",
            "x\n",
            &["bad `[[@LINE*2]]` expression"],
        );
    }
}

mod directives {
    use super::*;

    #[test]
    fn custom_prefix() {
        let opts = Options {
            prefix: "OPT".into(),
            ..Options::default()
        };
        assert!(check_with("// OPT: a\n// CHECK: zzz", "a\n", &opts).is_ok());
        assert!(check_with("// OPT: a\n// OPT-NEXT: c", "a\nb\n", &opts)
            .unwrap_err()
            .contains("OPT-NEXT: expected string not found"));
    }

    #[test]
    fn prefix_needs_word_boundary() {
        fails(
            "// XCHECK: a\n// CHECKS: b\n// MY-CHECK: c",
            "a\n",
            &["no CHECK: directives found"],
        );
    }

    #[test]
    fn unknown_suffix_is_a_typo() {
        fails(
            "// CHECK-NXT: a",
            "a\n",
            &["line 1: unknown directive `CHECK-NXT:`"],
        );
    }

    #[test]
    fn lowercase_suffix_is_not_a_directive() {
        fails("// CHECK-note: a", "a\n", &["no CHECK: directives found"]);
    }

    #[test]
    fn empty_pattern_is_an_error() {
        fails(
            "// CHECK:\n// CHECK-NOT:   ",
            "a\n",
            &[
                "line 1: found empty check string with prefix 'CHECK:'",
                "line 2",
            ],
        );
    }

    #[test]
    fn no_directives_is_an_error() {
        fails("just text", "a\n", &["no CHECK: directives found"]);
    }

    #[test]
    fn has_directives_detects_valid_and_malformed() {
        assert!(has_directives("x\n// CHECK: a", "CHECK"));
        assert!(has_directives("// CHECK-NXT: a", "CHECK"));
        assert!(!has_directives("// RUN: opt\n// ERROR: E1", "CHECK"));
        assert!(!has_directives("// CHECK: a", "OPT"));
    }

    #[test]
    fn rest_of_line_is_the_pattern() {
        passes("// CHECK: a // CHECK: b", "a // CHECK: b\n");
    }
}

mod annotation_parsing {
    use super::annotations::{parse, Annotation, Severity};

    fn one(src: &str) -> Annotation {
        let mut all = parse(src).unwrap();
        assert_eq!(all.len(), 1, "{all:?}");
        all.remove(0)
    }

    #[test]
    fn same_line() {
        let a = one("x = 1 // ERROR: E0012 type mismatch");
        assert_eq!(a.severity, Severity::Error);
        assert_eq!(a.code.as_deref(), Some("E0012"));
        assert_eq!(a.message.as_deref(), Some("type mismatch"));
        assert_eq!((a.line, a.written_on), (1, 1));
    }

    #[test]
    fn offsets() {
        assert_eq!(one("// ERROR@+1: E1\nx").line, 2);
        assert_eq!(one("a\nb\n// ERROR@-2: E1").line, 1);
    }

    #[test]
    fn severities() {
        assert_eq!(one("// WARNING@+1: W0003\nx").severity, Severity::Warning);
        assert_eq!(one("// NOTE: here").severity, Severity::Note);
    }

    #[test]
    fn code_and_message_are_optional() {
        let a = one("// WARNING: unused value `x`");
        assert_eq!(
            (a.code, a.message.as_deref()),
            (None, Some("unused value `x`"))
        );
        let b = one("// ERROR: E0012");
        assert_eq!((b.code.as_deref(), b.message), (Some("E0012"), None));
        let c = one("// ERROR:");
        assert_eq!((c.code, c.message), (None, None));
    }

    #[test]
    fn prose_is_not_an_annotation() {
        assert!(parse(
            "// ERROR handling is hard\n// ERRORS: many\n// error: lower\n// RUN: check"
        )
        .unwrap()
        .is_empty());
    }

    #[test]
    fn bad_offset_is_an_error() {
        let err = parse("// ERROR@x: E1").unwrap_err();
        assert!(err.contains("line 1: expected `@+N:` or `@-N:`"), "{err}");
    }

    #[test]
    fn out_of_file_target_is_an_error() {
        let err = parse("// ERROR@-1: E1").unwrap_err();
        assert!(
            err.contains("targets line 0, outside the file (1..=1)"),
            "{err}"
        );
        assert!(parse("// ERROR@+1: E1").is_err());
    }

    #[test]
    fn several() {
        let all = parse("a // ERROR: E1\nb\n// WARNING@-1: W2 w").unwrap();
        let lines: Vec<_> = all.iter().map(|a| (a.line, a.severity)).collect();
        assert_eq!(lines, [(1, Severity::Error), (2, Severity::Warning)]);
    }
}

mod diagnostics {
    use super::annotations::{parse, parse_diagnostics, Diagnostic, Severity};

    const FULL: &str = r#"{"severity":"error","code":"E0012","message":"type mismatch","file":"tests/filetests/x.teg","labels":[{"style":"secondary","message":"defined here","byte_start":0,"byte_end":1,"line_start":1,"col_start":1,"line_end":1,"col_end":2},{"style":"primary","message":"here","byte_start":10,"byte_end":14,"line_start":3,"col_start":5,"line_end":3,"col_end":9}],"notes":["n"]}"#;

    fn diag(severity: Severity, code: Option<&str>, message: &str, line: usize) -> Diagnostic {
        Diagnostic {
            severity,
            code: code.map(str::to_string),
            message: message.into(),
            file: None,
            line: Some(line),
        }
    }

    fn compare(src: &str, actual: &[Diagnostic]) -> Result<(), String> {
        super::annotations::compare(&parse(src).unwrap(), actual)
    }

    #[test]
    fn parses_json_using_primary_label() {
        let d = Diagnostic::from_json(FULL).unwrap();
        assert_eq!(d.severity, Severity::Error);
        assert_eq!(d.code.as_deref(), Some("E0012"));
        assert_eq!(d.message, "type mismatch");
        assert_eq!(d.file.as_deref(), Some("tests/filetests/x.teg"));
        assert_eq!(d.line, Some(3));
    }

    #[test]
    fn null_code_and_no_labels() {
        let d = Diagnostic::from_json(
            r#"{"severity":"warning","code":null,"message":"m","labels":[],"notes":[]}"#,
        )
        .unwrap();
        assert_eq!(
            (d.severity, d.code, d.line),
            (Severity::Warning, None, None)
        );
    }

    #[test]
    fn invalid_lines_are_errors() {
        assert!(Diagnostic::from_json("error: plain text")
            .unwrap_err()
            .contains("not a JSON diagnostic"));
        assert!(Diagnostic::from_json(r#"{"severity":"fatal","message":"m"}"#).is_err());
        assert!(Diagnostic::from_json(r#"{"severity":"error"}"#).is_err());
    }

    #[test]
    fn json_lines_skip_blanks() {
        let all = parse_diagnostics(&format!("{FULL}\n\n{FULL}\n")).unwrap();
        assert_eq!(all.len(), 2);
    }

    #[test]
    fn all_matched() {
        let actual = [
            diag(Severity::Error, Some("E1"), "bad thing", 2),
            diag(Severity::Warning, None, "w", 3),
        ];
        compare("// ERROR@+1: E1 bad\nx\n// WARNING: w", &actual).unwrap();
    }

    #[test]
    fn unannotated_warnings_are_fine() {
        compare(
            "// ERROR: E1",
            &[
                diag(Severity::Error, Some("E1"), "m", 1),
                diag(Severity::Warning, None, "w", 1),
            ],
        )
        .unwrap();
    }

    #[test]
    fn unannotated_error_is_reported() {
        let err = compare(
            "// ERROR: E1\nx",
            &[
                diag(Severity::Error, Some("E1"), "m", 1),
                diag(Severity::Error, Some("E2"), "oops", 2),
            ],
        )
        .unwrap_err();
        assert!(
            err.contains("reported but not annotated:\n  line 2: error E2: oops"),
            "{err}"
        );
        assert!(!err.contains("expected but not reported"), "{err}");
    }

    #[test]
    fn missing_is_reported_with_same_line_hint() {
        let err = compare(
            "x // ERROR: E0012 mismatch",
            &[diag(Severity::Error, Some("E0099"), "other", 1)],
        )
        .unwrap_err();
        assert!(err.contains("expected but not reported:\n  line 1: error E0012 containing \"mismatch\" (annotation on line 1)"), "{err}");
        assert!(
            err.contains("reported on that line: line 1: error E0099: other"),
            "{err}"
        );
    }

    #[test]
    fn message_substring_must_match() {
        assert!(compare(
            "// ERROR: E1 foo",
            &[diag(Severity::Error, Some("E1"), "bar", 1)]
        )
        .is_err());
        compare(
            "// ERROR: E1 ar",
            &[diag(Severity::Error, Some("E1"), "bar", 1)],
        )
        .unwrap();
    }

    #[test]
    fn severity_and_line_must_match() {
        assert!(compare(
            "// WARNING: E1",
            &[diag(Severity::Error, Some("E1"), "m", 1)]
        )
        .is_err());
        assert!(compare(
            "// ERROR: E1\nx",
            &[diag(Severity::Error, Some("E1"), "m", 2)]
        )
        .is_err());
    }

    #[test]
    fn without_primary_label_cannot_match() {
        let mut d = diag(Severity::Error, Some("E1"), "m", 1);
        d.line = None;
        let err = compare("// ERROR: E1", &[d]).unwrap_err();
        assert!(err.contains("(no primary label): error E1: m"), "{err}");
    }

    #[test]
    fn duplicates_need_distinct_diagnostics() {
        let one = [diag(Severity::Error, Some("E1"), "m", 1)];
        assert!(compare("// ERROR: E1\n// ERROR@-1: E1", &one).is_err());
        let two = [one[0].clone(), one[0].clone()];
        compare("// ERROR: E1\n// ERROR@-1: E1", &two).unwrap();
    }

    #[test]
    fn specific_annotations_match_first() {
        let actual = [
            diag(Severity::Error, Some("E1"), "alpha", 1),
            diag(Severity::Error, Some("E1"), "beta", 1),
        ];
        compare("// ERROR: E1\n// ERROR@-1: E1 alpha", &actual).unwrap();
    }
}

mod harness {
    use super::support::{
        self, combined_output, diff_lines, discover, orphan_snapshots, render, run_lines, RunLine,
        RunResult, TestFile,
    };

    fn run(args: &[&str], stdout: &str, stderr: &str, code: i32) -> RunResult {
        RunResult {
            args: args.iter().map(|s| s.to_string()).collect(),
            stdout: stdout.into(),
            stderr: stderr.into(),
            code,
        }
    }

    #[test]
    fn test_file_paths() {
        let pkg = support::package_root();
        let root = pkg.join(support::DEFAULT_ROOT);
        let file = TestFile::new(root.join("opt/fold.add.teg"), &root);
        assert_eq!(file.rel, "tests/filetests/opt/fold.add.teg");
        assert_eq!(file.name, "opt/fold.add.teg");
        assert_eq!(file.stem(), "fold.add");
        assert_eq!(file.dir(), root.join("opt"));
    }

    #[test]
    fn filetests_root_defaults_and_can_be_overridden() {
        let configured = std::env::var(support::ROOT_ENV).unwrap_or(support::DEFAULT_ROOT.into());
        assert_eq!(
            support::filetests_root(),
            support::package_root().join(configured)
        );
    }

    #[test]
    fn run_lines_expand_percent_s() {
        let src =
            "// RUN: opt --passes=canonicalize %s\nx\n  // RUN:  check --in=%s --error-format=json";
        let runs = run_lines(src, "tests/filetests/a.teg").unwrap();
        assert_eq!(
            runs,
            [
                RunLine {
                    line: 1,
                    args: vec![
                        "opt".into(),
                        "--passes=canonicalize".into(),
                        "tests/filetests/a.teg".into()
                    ],
                },
                RunLine {
                    line: 3,
                    args: vec![
                        "check".into(),
                        "--in=tests/filetests/a.teg".into(),
                        "--error-format=json".into()
                    ],
                },
            ]
        );
    }

    #[test]
    fn run_lines_append_path_when_absent() {
        let runs = run_lines("// RUN: dump --graph", "f.teg").unwrap();
        assert_eq!(runs[0].args, ["dump", "--graph", "f.teg"]);
    }

    #[test]
    fn run_lines_reject_program_name_and_empty() {
        assert!(run_lines("// RUN: tapc opt %s", "f")
            .unwrap_err()
            .contains("line 1: RUN args exclude the program name"));
        assert!(run_lines("x\n// RUN:", "f")
            .unwrap_err()
            .contains("line 2: empty RUN line"));
        assert!(run_lines("// CHECK: RUN: x", "f").unwrap().is_empty());
    }

    #[test]
    fn render_omits_empty_sections() {
        let text = render(&[
            run(&["opt", "a.teg"], "out", "", 0),
            run(&["check", "a.teg"], "", "err\n", 1),
        ]);
        assert_eq!(text, "$ tapc opt a.teg\nexit: 0\n--- stdout\nout\n\n$ tapc check a.teg\nexit: 1\n--- stderr\nerr\n");
    }

    #[test]
    fn render_hides_package_root() {
        let root = support::package_root().display().to_string();
        let text = render(&[run(&["x"], &format!("{root}/a.teg\n"), "", 0)]);
        assert!(text.contains("$ROOT/a.teg"), "{text}");
    }

    #[test]
    fn combined_output_is_stdout_then_stderr_per_run() {
        let out = combined_output(&[run(&[], "o1", "e1", 0), run(&[], "", "e2\n", 0)]);
        assert_eq!(out, "o1\ne1\ne2\n");
    }

    #[test]
    fn diff_marks_changes_and_elides_context() {
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
        let new = "1\n2\n3\n4\n5\n6\n7\nX\n9\n";
        assert_eq!(
            diff_lines(old, new),
            "  ...\n  5\n  6\n  7\n- 8\n+ X\n  9\n"
        );
    }

    #[test]
    fn read_snapshot_skips_header() {
        let dir = temp_dir("snap");
        let path = dir.join("a.snap");
        std::fs::write(&path, "---\nsource: x\n---\nbody\nmore\n").unwrap();
        assert_eq!(
            support::read_snapshot(&path).as_deref(),
            Some("body\nmore\n")
        );
        assert_eq!(support::read_snapshot(&dir.join("missing.snap")), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn discovery_is_recursive_and_sorted_and_finds_orphans() {
        let dir = temp_dir("discover");
        for f in [
            "b.teg",
            "a/z.teg",
            "a/y.teg",
            "a/y.snap",
            "a/old.snap",
            "notes.txt",
        ] {
            let path = dir.join(f);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "").unwrap();
        }
        let names: Vec<_> = discover(&dir, "teg")
            .unwrap()
            .iter()
            .map(|p| p.strip_prefix(&dir).unwrap().to_path_buf())
            .collect();
        assert_eq!(
            names,
            [
                std::path::Path::new("a/y.teg"),
                "a/z.teg".as_ref(),
                "b.teg".as_ref()
            ]
        );
        assert_eq!(orphan_snapshots(&dir).unwrap(), [dir.join("a/old.snap")]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn temp_dir(tag: &str) -> std::path::PathBuf {
        crate::common::scratch(&format!("filetests-{tag}"))
    }
}
