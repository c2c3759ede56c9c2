//! A small JSON-RPC client that drives the real `tapc lsp` binary over stdio (tests, bench).
#![allow(dead_code)] // each of tests/lsp.rs and benches/lsp.rs uses a part

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

pub struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    incoming: Receiver<Value>,
    next_id: i64,
    /// Notifications received while waiting for something else, oldest first.
    pub notifications: Vec<Value>,
    /// What the server wrote to stderr so far.
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

const TIMEOUT: Duration = Duration::from_secs(60);

impl Client {
    /// Starts `tapc lsp` with extra environment variables.
    pub fn start(env: &[(&str, &str)]) -> Client {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tapc"))
            .arg("lsp")
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn tapc lsp");
        let stdout = child.stdout.take().unwrap();
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let (err_pipe, err_text) = (child.stderr.take().unwrap(), stderr.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(err_pipe).lines().map_while(Result::ok) {
                let mut text = err_text.lock().unwrap();
                text.push_str(&line);
                text.push('\n');
            }
        });
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            while let Some(msg) = read_message(&mut r) {
                if tx.send(msg).is_err() {
                    break;
                }
            }
        });
        Client {
            stdin: child.stdin.take(),
            child,
            incoming: rx,
            next_id: 0,
            notifications: Vec::new(),
            stderr,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn send(&mut self, msg: Value) {
        let body = msg.to_string();
        self.send_raw(format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes());
    }

    /// Writes `bytes` to the server as they are (framing included, or not).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    /// What the server wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Sends a request with the id `id` (any JSON value) and waits for the response with that
    /// id; `None` if none comes within `wait`.
    pub fn request_with_id(
        &mut self,
        id: Value,
        method: &str,
        params: Value,
        wait: Duration,
    ) -> Option<Value> {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.response(&id, wait)
    }

    /// The next response with id `id` (`null` included), keeping notifications and other
    /// responses in [`Client::notifications`]; `None` if none comes within `wait`.
    pub fn response(&mut self, id: &Value, wait: Duration) -> Option<Value> {
        let deadline = Instant::now() + wait;
        if let Some(i) = self
            .notifications
            .iter()
            .position(|m| m.get("method").is_none() && m.get("id") == Some(id))
        {
            return Some(self.notifications.remove(i));
        }
        loop {
            let msg = self.recv(deadline)?;
            if msg.get("method").is_none() && msg.get("id") == Some(id) {
                return Some(msg);
            }
            self.notifications.push(msg);
        }
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request and waits for its whole response (`result` or `error` inside).
    pub fn request_raw(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let msg = self
                .recv(deadline)
                .unwrap_or_else(|| panic!("no response to {method}"));
            if msg.get("id") == Some(&json!(id)) && msg.get("method").is_none() {
                return msg;
            }
            self.notifications.push(msg);
        }
    }

    /// A request's `result`; panics on an error response.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let r = self.request_raw(method, params);
        assert!(r.get("error").is_none(), "{method} failed: {r}");
        r["result"].clone()
    }

    fn recv(&mut self, deadline: Instant) -> Option<Value> {
        let left = deadline.saturating_duration_since(Instant::now());
        self.incoming.recv_timeout(left).ok()
    }

    /// Waits for the next `publishDiagnostics` for `uri` at `version`; returns its diagnostics.
    pub fn diagnostics(&mut self, uri: &str, version: i64) -> Vec<Value> {
        let deadline = Instant::now() + TIMEOUT;
        let matches = |m: &Value| {
            m["method"] == "textDocument/publishDiagnostics"
                && m["params"]["uri"] == uri
                && m["params"]["version"] == version
        };
        if let Some(i) = self.notifications.iter().position(matches) {
            let m = self.notifications.remove(i);
            return m["params"]["diagnostics"].as_array().unwrap().clone();
        }
        loop {
            let m = self
                .recv(deadline)
                .unwrap_or_else(|| panic!("no diagnostics for {uri} version {version}"));
            if matches(&m) {
                return m["params"]["diagnostics"].as_array().unwrap().clone();
            }
            self.notifications.push(m);
        }
    }

    pub fn initialize(&mut self) -> Value {
        let r = self.request(
            "initialize",
            json!({"processId": null, "rootUri": null, "capabilities": {}}),
        );
        self.notify("initialized", json!({}));
        r
    }

    pub fn open(&mut self, uri: &str, text: &str) {
        let doc = json!({"uri": uri, "languageId": "teg", "version": 1, "text": text});
        self.notify("textDocument/didOpen", json!({ "textDocument": doc }));
    }

    /// Shutdown and exit; returns the server's exit code.
    pub fn shutdown(&mut self) -> Option<i32> {
        let r = self.request("shutdown", Value::Null);
        assert!(r.is_null(), "shutdown result: {r}");
        self.notify("exit", Value::Null);
        self.wait_exit()
    }

    /// Closes the server's stdin and waits for it to exit; returns its exit code.
    pub fn wait_exit(&mut self) -> Option<i32> {
        self.stdin = None;
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(Instant::now() < deadline, "tapc lsp did not exit");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read_message(r: &mut impl BufRead) -> Option<Value> {
    let mut len = None;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("Content-Length: ") {
            len = v.parse::<usize>().ok();
        }
    }
    let mut body = vec![0; len?];
    r.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}
