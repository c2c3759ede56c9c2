//! Unit tests of `tapc::lsp::transport`, kept out of the library so that `cargo test` compiles it once.

use lsp_server::{Message, Response};
use serde_json::Value;
use std::io;
use tapc::lsp::transport::*;

fn frames(input: &[u8]) -> Vec<Frame> {
    let mut r = io::BufReader::new(input);
    std::iter::from_fn(|| read_frame(&mut r).unwrap()).collect()
}

#[test]
fn framing_errors_are_reported_and_the_reader_resynchronizes() {
    let input = b"Content-Length: 2\r\n\r\n{}\
        Content-Length: x\r\n\r\n{\"a\":1}Content-Length: 3\r\n\r\n[1]\
        Content-Length: 4611686018427387904\r\n\r\n";
    let f = frames(input);
    let body = |b: &[u8]| Some(b.to_vec());
    assert_eq!((&f[0].body, f[0].errors.len()), (&body(b"{}"), 0));
    assert_eq!(f[1].body, None);
    assert!(f[1].errors[0].contains("bad Content-Length"), "{f:?}");
    assert_eq!(f[2].body, body(b"[1]"));
    assert_eq!(f[2].errors, ["7 bytes that are no header"]);
    assert_eq!(f.len(), 3, "{f:?}"); // the huge message ends with the input
    let big = format!("Content-Length: {}\r\n\r\n", MAX_MESSAGE_BYTES + 1);
    let mut input = big.into_bytes();
    input.resize(input.len() + MAX_MESSAGE_BYTES + 1, b' ');
    input.extend_from_slice(b"Content-Length: 2\r\n\r\n{}");
    let f = frames(&input);
    assert_eq!(f[0].body, None);
    assert!(f[0].errors[0].contains("over the limit"), "{f:?}");
    assert_eq!(f[1].body, body(b"{}"));
    // A thousand garbage lines: eight reported, the rest counted.
    let mut input = b"x\n".repeat(1000);
    input.extend_from_slice(b"Content-Length: 2\r\n\r\n{}");
    let f = frames(&input);
    assert_eq!(f[0].body, body(b"{}"));
    assert_eq!(f[0].errors.len(), 9);
    assert_eq!(f[0].errors[8], "992 more");
}

#[test]
fn ids_of_any_number_or_string_round_trip() {
    for id in [
        "0",
        "2147483647",
        "2147483648",
        "-2147483649",
        "18446744073709551615",
        "1.5",
        "1e300",
        "\"x\"",
        "\"\\u0001n5\"",
        "\"\\u0001\"",
    ] {
        let body = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"m\"}}");
        let Ok(Message::Request(req)) = decode(body.as_bytes()) else {
            panic!("{id} not decoded")
        };
        let mut out = Vec::new();
        write_message(&mut out, Response::new_ok(req.id, ()).into()).unwrap();
        let body = &out[out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4..];
        let v: Value = serde_json::from_slice(body).unwrap();
        assert_eq!(v["id"], serde_json::from_str::<Value>(id).unwrap(), "{id}");
    }
}
