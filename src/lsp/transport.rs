//! The LSP wire format (`Content-Length` framing of JSON-RPC) on any byte streams, hardened
//! against hostile clients; lsp-server's own reader allocates whatever length a header names
//! and ends the session at the first malformed frame, so the server uses this one.
//!
//! - A message body is at most [`MAX_MESSAGE_BYTES`] (64 MiB). A longer one is read past in
//!   small chunks (never allocated) and reported; a header line is at most 8 KiB.
//! - A framing error (no or bad `Content-Length`, a garbage line) is logged and the reader
//!   resynchronizes on the next `Content-Length` header.
//! - A body that is not JSON (invalid UTF-8 included) is answered with a parse error (-32700),
//!   a batch array or a non-object with an invalid request error (-32600), both with id `null`
//!   as JSON-RPC prescribes; a request whose `method` is not a string or whose id is not a
//!   number or string is an invalid request too. Every such error is also logged.
//! - A request id may be any JSON number or string: ids that are not 32-bit integers travel
//!   inside the server as marked strings and are written back as they came.
//!
//! Only the end of the input (or of the server) ends the reader; the session then ends as
//! the LSP says (exit code 1 unless `shutdown` came first).

use lsp_server::{Connection, ErrorCode, Message, Notification, Request, RequestId, Response};
use serde_json::{Map, Value};
use std::io::{self, BufRead, Read, Write};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The largest message body the server reads (64 MiB); documented in docs/teg.md §15.
pub const MAX_MESSAGE_BYTES: usize = 64 << 20;

/// The longest header line the server reads.
const MAX_HEADER_LINE: usize = 8 << 10;

/// Marks an id that is not a 32-bit integer: `\u{1}n` + the number, `\u{1}s` + a string
/// (strings that start with the mark are escaped so that no client id is mistaken for one),
/// `\u{1}` alone for the `null` id of an error about an unreadable message.
const MARK: char = '\u{1}';

/// Where framing and JSON errors are logged (stderr when serving stdio).
pub type Log = Arc<Mutex<dyn Write + Send>>;

/// Writes one line to the log (a failing log is ignored: there is nowhere else to report).
pub fn log(log: &Log, line: &str) {
    let mut w = log.lock().unwrap_or_else(|e| e.into_inner());
    let _ = writeln!(w, "tapc lsp: {line}");
    let _ = w.flush();
}

/// Sends an error reply from the reader straight to the writer, while the session lasts.
type Reply = Arc<Mutex<Option<Box<dyn Fn(Message) -> bool + Send>>>>;

/// The reader and writer threads of a connection made by [`connect`].
pub struct IoThreads {
    reader: JoinHandle<()>,
    writer: JoinHandle<io::Result<()>>,
    reply: Reply,
}

impl IoThreads {
    /// Ends the session once the server has dropped its connection: waits for the writer
    /// (all is written) and, when asked, for the reader (it ends with its input). `Err` when
    /// a thread panicked.
    pub fn join(self, wait_for_reader: bool) -> Result<io::Result<()>, String> {
        *self.reply.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let written = self.writer.join().map_err(|_| "the writer panicked")?;
        if wait_for_reader && self.reader.join().is_err() {
            return Err("the reader panicked".into());
        }
        Ok(written)
    }
}

/// A connection whose messages are read from `input` and written to `output`, with framing
/// and JSON errors answered or logged to `errors`.
pub fn connect(
    input: impl Read + Send + 'static,
    output: impl Write + Send + 'static,
    errors: Log,
) -> (Connection, IoThreads) {
    let (server, client) = Connection::memory();
    let to_writer = server.sender.clone();
    let reply: Reply = Arc::new(Mutex::new(Some(Box::new(move |m| {
        to_writer.send(m).is_ok()
    }))));
    let replies = reply.clone();
    let reader = std::thread::spawn(move || {
        let mut r = io::BufReader::with_capacity(64 << 10, input);
        loop {
            let frame = match read_frame(&mut r) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(e) => {
                    log(&errors, &format!("reading a message: {e}"));
                    break;
                }
            };
            if !frame.errors.is_empty() {
                log(
                    &errors,
                    &format!("framing error: {}", frame.errors.join("; ")),
                );
            }
            let sent = match frame.body.as_deref().map(decode) {
                None => true,
                Some(Ok(msg)) => client.sender.send(msg).is_ok(),
                Some(Err(bad)) => {
                    log(&errors, &bad.message);
                    let slot = replies.lock().unwrap_or_else(|e| e.into_inner());
                    match (bad.reply, slot.as_ref()) {
                        (Some(resp), Some(send)) => send((*resp).into()),
                        (Some(_), None) => false,
                        (None, _) => true,
                    }
                }
            };
            if !sent {
                break;
            }
        }
    });
    let receiver = client.receiver;
    let writer = std::thread::spawn(move || {
        let mut w = io::BufWriter::new(output);
        for msg in receiver {
            write_message(&mut w, msg)?;
        }
        w.flush()
    });
    (
        server,
        IoThreads {
            reader,
            writer,
            reply,
        },
    )
}

/// What one frame held: its body (when it was framed right) and the framing errors met on
/// the way to it (logged; the reader carries on after them).
#[derive(Debug, PartialEq)]
pub struct Frame {
    pub body: Option<Vec<u8>>,
    pub errors: Vec<String>,
}

/// The next frame, `None` at the end of the input (also inside a frame).
pub fn read_frame(r: &mut impl BufRead) -> io::Result<Option<Frame>> {
    let mut length: Option<Result<usize, String>> = None;
    let mut errors = Errors::default();
    loop {
        let Some(line) = read_line(r)? else {
            return Ok(None);
        };
        let Line::Text(line) = line else {
            errors.add(format!("a header line longer than {MAX_HEADER_LINE} bytes"));
            continue;
        };
        if line.is_empty() {
            if length.is_none() && errors.is_empty() {
                continue; // blank lines between messages
            }
            break;
        }
        let (header, skipped) = resync(&line);
        if skipped > 0 {
            errors.add(format!("{skipped} bytes that are no header"));
        }
        let colon = header.iter().position(|&b| b == b':');
        let token = |name: &[u8]| {
            !name.is_empty() && name.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'-')
        };
        let Some(colon) = colon.filter(|&c| token(&header[..c])) else {
            errors.add(format!("the header line {:?}", lossy(header)));
            continue;
        };
        if header[..colon].eq_ignore_ascii_case(b"content-length") {
            length = Some(parse_length(&header[colon + 1..]));
        }
    }
    let body = match length {
        None => {
            errors.add("a message without Content-Length".into());
            None
        }
        Some(Err(e)) => {
            errors.add(e);
            None
        }
        Some(Ok(n)) if n > MAX_MESSAGE_BYTES => {
            let skipped = io::copy(&mut r.take(n as u64), &mut io::sink())?;
            if skipped < n as u64 {
                return Ok(None);
            }
            errors.add(format!(
                "a message of {n} bytes, over the limit of {MAX_MESSAGE_BYTES} (64 MiB): skipped"
            ));
            None
        }
        Some(Ok(n)) => {
            let mut body = vec![0; n];
            if read_body(r, &mut body)?.is_none() {
                return Ok(None);
            }
            Some(body)
        }
    };
    Ok(Some(Frame {
        body,
        errors: errors.list,
    }))
}

/// The framing errors before one frame: the first few, then how many more (a stream of
/// garbage lines must not grow a list without end).
#[derive(Default)]
struct Errors {
    list: Vec<String>,
    more: usize,
}

impl Errors {
    const KEPT: usize = 8;

    fn add(&mut self, e: String) {
        if self.list.len() < Self::KEPT {
            self.list.push(e);
            return;
        }
        self.more += 1;
        let note = format!("{} more", self.more);
        if self.more == 1 {
            self.list.push(note);
        } else {
            *self.list.last_mut().expect("pushed above") = note;
        }
    }

    fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

fn read_body(r: &mut impl BufRead, body: &mut [u8]) -> io::Result<Option<()>> {
    match r.read_exact(body) {
        Ok(()) => Ok(Some(())),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(None),
        Err(e) => Err(e),
    }
}

enum Line {
    Text(Vec<u8>),
    TooLong,
}

/// One header line without its `\r\n` or `\n`; a longer one than [`MAX_HEADER_LINE`] is
/// consumed and reported, never held.
fn read_line(r: &mut impl BufRead) -> io::Result<Option<Line>> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let buf = match r.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(None);
        }
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if !too_long && line.len() + chunk.len() <= MAX_HEADER_LINE {
            line.extend_from_slice(chunk);
        } else {
            too_long = true;
            line.clear();
        }
        let used = done.unwrap_or(buf.len());
        r.consume(used);
        if done.is_some() {
            break;
        }
    }
    if too_long {
        return Ok(Some(Line::TooLong));
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(Some(Line::Text(line)))
}

/// The line from its last `Content-Length:` on when garbage (the rest of a body that was not
/// framed right) precedes it, and how many bytes were skipped.
fn resync(line: &[u8]) -> (&[u8], usize) {
    const NAME: &[u8] = b"content-length:";
    let at = line
        .windows(NAME.len())
        .rposition(|w| w.eq_ignore_ascii_case(NAME));
    match at {
        Some(i) => (&line[i..], i),
        None => (line, 0),
    }
}

fn parse_length(value: &[u8]) -> Result<usize, String> {
    let v = value.trim_ascii();
    let bad = || format!("a bad Content-Length {:?}", lossy(v));
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return Err(bad());
    }
    std::str::from_utf8(v)
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
        .ok_or_else(|| format!("a Content-Length over 2^64: {}", lossy(v)))
}

/// At most 80 bytes of `b`, for a log line.
fn lossy(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(&b[..b.len().min(80)]).into_owned();
    if b.len() > 80 {
        format!("{s}…")
    } else {
        s
    }
}

/// A body that is not a message: what to log and, when one is due, the error response.
pub struct Bad {
    pub message: String,
    pub reply: Option<Box<Response>>,
}

fn invalid(id: Option<RequestId>, code: ErrorCode, message: String) -> Bad {
    let id = id.unwrap_or_else(|| RequestId::from(MARK.to_string()));
    Bad {
        reply: Some(Box::new(Response::new_err(
            id,
            code as i32,
            message.clone(),
        ))),
        message,
    }
}

/// A message from a body, or why it is none.
pub fn decode(body: &[u8]) -> Result<Message, Bad> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| invalid(None, ErrorCode::ParseError, format!("not JSON: {e}")))?;
    let mut obj = match v {
        Value::Object(obj) => obj,
        Value::Array(_) => {
            let why = "a batch (JSON array): batches are not part of the LSP";
            return Err(invalid(None, ErrorCode::InvalidRequest, why.into()));
        }
        other => {
            let why = format!("a message must be a JSON object, not {other}");
            return Err(invalid(None, ErrorCode::InvalidRequest, why));
        }
    };
    let id = match obj.remove("id") {
        None => None,
        Some(id) => Some(id_in(&id).ok_or_else(|| {
            let why = format!("an id must be a number or a string, not {id}");
            invalid(None, ErrorCode::InvalidRequest, why)
        })?),
    };
    let params = obj.remove("params").unwrap_or(Value::Null);
    match (obj.remove("method"), id) {
        (Some(Value::String(method)), Some(id)) => Ok(Request { id, method, params }.into()),
        (Some(Value::String(method)), None) => Ok(Notification { method, params }.into()),
        (Some(m), id) => {
            let why = format!("a method must be a string, not {m}");
            Err(invalid(id, ErrorCode::InvalidRequest, why))
        }
        (None, Some(id)) => response(id, obj),
        (None, None) => {
            let why = "a message with neither a method nor an id".into();
            Err(invalid(None, ErrorCode::InvalidRequest, why))
        }
    }
}

/// A client's response (the server sends no requests, so it is read and then ignored).
fn response(id: RequestId, mut obj: Map<String, Value>) -> Result<Message, Bad> {
    let error = match obj.remove("error") {
        None | Some(Value::Null) => None,
        Some(e) => Some(serde_json::from_value(e).map_err(|e| Bad {
            message: format!("a response with a malformed error: {e}"),
            reply: None,
        })?),
    };
    Ok(Response {
        id,
        result: obj.remove("result"),
        error,
    }
    .into())
}

/// The server-side id of a client id: 32-bit integers as they are, other numbers and strings
/// marked; `None` for what is no id.
fn id_in(id: &Value) -> Option<RequestId> {
    match id {
        Value::Number(n) => match n.as_i64().and_then(|i| i32::try_from(i).ok()) {
            Some(i) => Some(RequestId::from(i)),
            None => Some(RequestId::from(format!("{MARK}n{n}"))),
        },
        Value::String(s) if s.starts_with(MARK) => Some(RequestId::from(format!("{MARK}s{s}"))),
        Value::String(s) => Some(RequestId::from(s.clone())),
        _ => None,
    }
}

/// The client's id of a server-side id (the inverse of [`id_in`]).
fn id_out(id: Value) -> Value {
    let Value::String(s) = &id else {
        return id;
    };
    let Some(rest) = s.strip_prefix(MARK) else {
        return id;
    };
    if rest.is_empty() {
        return Value::Null;
    }
    if let Some(s) = rest.strip_prefix('s') {
        return Value::String(s.to_string());
    }
    rest.strip_prefix('n')
        .and_then(|n| serde_json::from_str::<serde_json::Number>(n).ok())
        .map_or(id, Value::Number)
}

/// Writes one message, framed, with the client's id restored.
pub fn write_message(w: &mut impl Write, msg: Message) -> io::Result<()> {
    let mut v = serde_json::to_value(&msg).map_err(io::Error::other)?;
    if let Value::Object(obj) = &mut v {
        if let Some(id) = obj.remove("id") {
            obj.insert("id".into(), id_out(id));
        }
        obj.insert("jsonrpc".into(), Value::String("2.0".into()));
    }
    let body = serde_json::to_vec(&v).map_err(io::Error::other)?;
    write!(w, "Content-Length: {}\r\n\r\n", body.len())?;
    w.write_all(&body)?;
    w.flush()
}
