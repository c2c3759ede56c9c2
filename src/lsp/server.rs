//! The server loop: initialize, then requests and notifications until shutdown. Edits only
//! update the text; documents are recompiled (and their diagnostics published) once no message
//! has come for [`DEBOUNCE`] (or edits have kept coming for [`MAX_DELAY`]), and before a
//! request, so a burst of keystrokes costs one compilation. A compilation that a newer edit,
//! queued meanwhile, makes stale is not published. The custom request `tapc/stats` reports
//! how many compilations ran, were published and were superseded ([`Stats`]).

use super::analysis::Document;
use super::transport::{self, Log};
use super::{complete, edits, hover, nav, rename, semantic, sighelp};
use lsp_server::{Connection, ErrorCode, Message, Notification, Request, Response};
use lsp_types::notification::{
    DidChangeTextDocument, DidCloseTextDocument, DidOpenTextDocument, Exit, LogMessage,
    Notification as _, PublishDiagnostics,
};
use lsp_types::request::{
    CodeActionRequest, Completion, DocumentSymbolRequest, Formatting, GotoDefinition, HoverRequest,
    Initialize, InlayHintRequest, PrepareRenameRequest, References, Rename, Request as _,
    SemanticTokensFullRequest, Shutdown, SignatureHelpRequest,
};
use lsp_types::*;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Test hook: a request whose method is named by this variable panics in its handler, so
/// tests can check that a panic becomes an error response and the server carries on.
const TEST_PANIC_VAR: &str = "TAPC_LSP_TEST_PANIC";

/// Test hook: every compilation first sleeps this many milliseconds, so tests can send an
/// edit while one runs (and see that the stale compilation is not published).
const TEST_SLOW_VAR: &str = "TAPC_LSP_TEST_SLOW_COMPILE_MS";

/// How long the server waits after a message for more before it compiles changed documents:
/// far longer than the gap between the messages of one burst, short beside the 100 ms that
/// diagnostics may take after an edit (docs/benchmarks.md).
pub const DEBOUNCE: Duration = Duration::from_millis(20);

/// The longest a changed document waits for its compilation while edits keep coming.
const MAX_DELAY: Duration = Duration::from_millis(500);

/// The custom request that answers with the server's [`Stats`].
pub const STATS_METHOD: &str = "tapc/stats";

/// What the server counted since it started (the answer to `tapc/stats`).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Stats {
    /// Documents compiled (every text analysed, stale or not).
    pub compiles: u64,
    /// Diagnostics published.
    pub published: u64,
    /// Compilations not published because a newer edit of the document came meanwhile.
    pub superseded: u64,
}

pub fn capabilities() -> ServerCapabilities {
    ServerCapabilities {
        text_document_sync: Some(TextDocumentSyncCapability::Kind(
            TextDocumentSyncKind::INCREMENTAL,
        )),
        hover_provider: Some(HoverProviderCapability::Simple(true)),
        definition_provider: Some(OneOf::Left(true)),
        references_provider: Some(OneOf::Left(true)),
        document_symbol_provider: Some(OneOf::Left(true)),
        document_formatting_provider: Some(OneOf::Left(true)),
        code_action_provider: Some(CodeActionProviderCapability::Simple(true)),
        inlay_hint_provider: Some(OneOf::Left(true)),
        completion_provider: Some(CompletionOptions {
            trigger_characters: Some(vec!["@".into(), "%".into(), "<".into(), "(".into()]),
            ..Default::default()
        }),
        signature_help_provider: Some(SignatureHelpOptions {
            trigger_characters: Some(vec!["(".into(), "<".into(), ",".into()]),
            ..Default::default()
        }),
        semantic_tokens_provider: Some(SemanticTokensServerCapabilities::SemanticTokensOptions(
            SemanticTokensOptions {
                legend: SemanticTokensLegend {
                    token_types: semantic::LEGEND.to_vec(),
                    token_modifiers: Vec::new(),
                },
                full: Some(SemanticTokensFullOptions::Bool(true)),
                ..Default::default()
            },
        )),
        rename_provider: Some(OneOf::Right(RenameOptions {
            prepare_provider: Some(true),
            work_done_progress_options: Default::default(),
        })),
        ..Default::default()
    }
}

/// Serves `conn` until exit (`Ok(true)` when shutdown came first, as LSP wants for exit code
/// 0) or the end of the input (`Ok(false)` unless shutdown came first). `log` gets what no
/// client sees: a panic in a handler is also logged there.
pub fn serve(conn: &Connection, log: &Log) -> Result<bool, Error> {
    if !initialize(conn)? {
        return Ok(false);
    }
    let mut state = State {
        texts: HashMap::new(),
        docs: HashMap::new(),
        dirty: BTreeSet::new(),
        dirty_since: None,
        pending: VecDeque::new(),
        stats: Stats::default(),
        panic_on: std::env::var(TEST_PANIC_VAR).ok(),
        slow: std::env::var(TEST_SLOW_VAR)
            .ok()
            .and_then(|ms| ms.parse().ok())
            .map(Duration::from_millis),
        log: log.clone(),
    };
    let mut shut_down = false;
    loop {
        let Some(msg) = state.next(conn)? else {
            return Ok(shut_down);
        };
        match msg {
            Message::Request(req) if shut_down => {
                let why = format!("{} after shutdown", req.method);
                let resp = Response::new_err(req.id, ErrorCode::InvalidRequest as i32, why);
                conn.sender.send(resp.into())?;
            }
            Message::Request(req) if req.method == Shutdown::METHOD => {
                shut_down = true;
                conn.sender.send(Response::new_ok(req.id, ()).into())?;
            }
            Message::Request(req) => {
                state.flush(conn, false)?;
                let (id, method) = (req.id.clone(), req.method.clone());
                let resp =
                    catch_unwind(AssertUnwindSafe(|| state.request(req))).unwrap_or_else(|panic| {
                        let why = format!("internal error in {method}: {}", message(&panic));
                        transport::log(log, &why);
                        Response::new_err(
                            id,
                            ErrorCode::InternalError as i32,
                            format!("tapc lsp: {why}"),
                        )
                    });
                conn.sender.send(resp.into())?;
            }
            Message::Notification(n) if n.method == Exit::METHOD => return Ok(shut_down),
            Message::Notification(n) => {
                let method = n.method.clone();
                if let Err(panic) = catch_unwind(AssertUnwindSafe(|| state.notification(n))) {
                    let why = format!("internal error in {method}: {}", message(&panic));
                    state.report(conn, why)?;
                }
            }
            Message::Response(_) => {}
        }
    }
}

/// Waits for `initialize` and answers it: `Ok(false)` when the input ends or `exit` comes
/// first. Other requests are refused as LSP says; notifications and responses are dropped.
fn initialize(conn: &Connection) -> Result<bool, Error> {
    loop {
        let Ok(msg) = conn.receiver.recv() else {
            return Ok(false);
        };
        match msg {
            Message::Request(req) if req.method == Initialize::METHOD => {
                let result = serde_json::json!({
                    "capabilities": capabilities(),
                    "serverInfo": { "name": "tapc", "version": env!("CARGO_PKG_VERSION") },
                });
                conn.sender.send(Response::new_ok(req.id, result).into())?;
                return Ok(true);
            }
            Message::Request(req) => {
                let why = format!("{} before initialize", req.method);
                let code = ErrorCode::ServerNotInitialized as i32;
                conn.sender
                    .send(Response::new_err(req.id, code, why).into())?;
            }
            Message::Notification(n) if n.method == Exit::METHOD => return Ok(false),
            Message::Notification(_) | Message::Response(_) => {}
        }
    }
}

fn message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}

struct State {
    /// The current text and version of every open document.
    texts: HashMap<Url, (String, i32)>,
    /// The analysis of each document's text as of the last flush.
    docs: HashMap<Url, Document>,
    /// Documents whose text changed since their analysis.
    dirty: BTreeSet<Url>,
    /// When the oldest change still waiting for its compilation came.
    dirty_since: Option<Instant>,
    /// Messages read while looking for edits queued behind a compilation, oldest first.
    pending: VecDeque<Message>,
    stats: Stats,
    panic_on: Option<String>,
    slow: Option<Duration>,
    log: Log,
}

impl State {
    /// The next message to handle (`None` at the end of the input). While documents are
    /// changed, it waits [`DEBOUNCE`] for each message, and compiles when none comes.
    fn next(&mut self, conn: &Connection) -> Result<Option<Message>, Error> {
        loop {
            if let Some(m) = self.pending.pop_front() {
                return Ok(Some(m));
            }
            let Some(since) = self.dirty_since else {
                return Ok(conn.receiver.recv().ok());
            };
            if since.elapsed() >= MAX_DELAY {
                self.flush(conn, true)?;
                continue;
            }
            match conn.receiver.recv_timeout(DEBOUNCE) {
                Ok(m) => return Ok(Some(m)),
                Err(e) if e.is_timeout() => self.flush(conn, true)?,
                Err(_) => return Ok(None),
            }
        }
    }

    /// Applies the edits already queued, up to the first other message (kept in `pending`,
    /// so that every message is still handled in order).
    fn take_queued_edits(&mut self, conn: &Connection) {
        while self.pending.is_empty() {
            let Ok(m) = conn.receiver.try_recv() else {
                return;
            };
            match m {
                Message::Notification(n) if is_edit(&n.method) => {
                    // A panic here is the one `notification` would report: handle it there.
                    let again = n.clone();
                    if catch_unwind(AssertUnwindSafe(|| self.notification(n))).is_err() {
                        self.pending.push_back(Message::Notification(again));
                    }
                }
                other => self.pending.push_back(other),
            }
        }
    }

    /// Recompiles every changed document and publishes its diagnostics. A compiler panic on
    /// a text is reported (log and client) and the document has no analysis until it changes.
    /// With `take_edits`, edits queued meanwhile are applied after each compilation, and a
    /// compilation they make stale is kept for requests but not published (the document is
    /// compiled again after the next pause).
    fn flush(&mut self, conn: &Connection, take_edits: bool) -> Result<(), Error> {
        self.dirty_since = None;
        for uri in std::mem::take(&mut self.dirty) {
            let doc = match self.texts.get(&uri) {
                None => None,
                Some((text, version)) => {
                    self.stats.compiles += 1;
                    if let Some(pause) = self.slow {
                        std::thread::sleep(pause);
                    }
                    let new = || Document::new(text.clone(), *version);
                    match catch_unwind(AssertUnwindSafe(new)) {
                        Ok(doc) => Some(doc),
                        Err(panic) => {
                            self.docs.remove(&uri);
                            let why =
                                format!("internal error analysing {uri}: {}", message(&panic));
                            self.report(conn, why)?;
                            continue;
                        }
                    }
                }
            };
            if take_edits {
                self.take_queued_edits(conn);
            }
            if self.dirty.contains(&uri) {
                self.stats.superseded += 1;
                if let Some(doc) = doc {
                    self.docs.insert(uri, doc);
                }
                continue;
            }
            self.stats.published += 1;
            let diagnostics = doc.as_ref().map_or(Vec::new(), |d| d.lsp_diagnostics(&uri));
            let version = doc.as_ref().map(|d| d.version);
            let params = PublishDiagnosticsParams::new(uri.clone(), diagnostics, version);
            let n = Notification::new(PublishDiagnostics::METHOD.into(), params);
            conn.sender.send(n.into())?;
            // Replacing the old analysis frees a whole module: after publishing, not before.
            match doc {
                Some(doc) => self.docs.insert(uri, doc),
                None => self.docs.remove(&uri),
            };
        }
        Ok(())
    }

    /// An internal error no request answers: logged, and shown to the client's log.
    fn report(&self, conn: &Connection, why: String) -> Result<(), Error> {
        transport::log(&self.log, &why);
        let params = LogMessageParams {
            typ: MessageType::ERROR,
            message: format!("tapc lsp: {why}"),
        };
        let n = Notification::new(LogMessage::METHOD.into(), params);
        conn.sender.send(n.into())?;
        Ok(())
    }

    /// Marks `uri` changed.
    fn touch(&mut self, uri: Url) {
        self.dirty.insert(uri);
        self.dirty_since.get_or_insert_with(Instant::now);
    }

    fn notification(&mut self, n: Notification) {
        match n.method.as_str() {
            DidOpenTextDocument::METHOD => {
                if let Ok(p) = serde_json::from_value::<DidOpenTextDocumentParams>(n.params) {
                    let d = p.text_document;
                    self.texts.insert(d.uri.clone(), (d.text, d.version));
                    self.touch(d.uri);
                }
            }
            DidChangeTextDocument::METHOD => {
                if let Ok(p) = serde_json::from_value::<DidChangeTextDocumentParams>(n.params) {
                    let uri = p.text_document.uri;
                    if let Some((text, version)) = self.texts.get_mut(&uri) {
                        for change in p.content_changes {
                            apply_change(text, change);
                        }
                        *version = p.text_document.version;
                        self.touch(uri);
                    }
                }
            }
            DidCloseTextDocument::METHOD => {
                if let Ok(p) = serde_json::from_value::<DidCloseTextDocumentParams>(n.params) {
                    let uri = p.text_document.uri;
                    self.docs.remove(&uri);
                    if self.texts.remove(&uri).is_some() {
                        self.touch(uri); // publishes no diagnostics: clears them
                    }
                }
            }
            _ => {}
        }
    }

    fn request(&mut self, req: Request) -> Response {
        if self.panic_on.as_deref() == Some(req.method.as_str()) {
            panic!("{TEST_PANIC_VAR} asked {} to panic", req.method);
        }
        let docs = &self.docs;
        match req.method.as_str() {
            STATS_METHOD => Response::new_ok(req.id, self.stats),
            HoverRequest::METHOD => respond(req, |p| hover_at(docs, p)),
            GotoDefinition::METHOD => respond(req, |p| definition(docs, p)),
            References::METHOD => respond(req, |p| references(docs, p)),
            DocumentSymbolRequest::METHOD => respond(req, |p: DocumentSymbolParams| {
                let doc = docs.get(&p.text_document.uri)?;
                Some(DocumentSymbolResponse::Nested(nav::symbols(doc)))
            }),
            Formatting::METHOD => formatting(docs, req),
            CodeActionRequest::METHOD => respond(req, |p| code_actions(docs, p)),
            InlayHintRequest::METHOD => respond(req, |p| inlay_hints(docs, p)),
            Completion::METHOD => respond(req, |p| completion(docs, p)),
            SignatureHelpRequest::METHOD => respond(req, |p| signature_help(docs, p)),
            PrepareRenameRequest::METHOD => respond_result(req, |p: TextDocumentPositionParams| {
                let Some((doc, offset)) = at(docs, &p) else {
                    return Ok(None);
                };
                let range = rename::prepare(doc, offset)?;
                Ok(Some(PrepareRenameResponse::Range(doc.range(range))))
            }),
            Rename::METHOD => respond_result(req, |p| rename_edits(docs, p)),
            SemanticTokensFullRequest::METHOD => respond(req, |p: SemanticTokensParams| {
                let doc = docs.get(&p.text_document.uri)?;
                Some(SemanticTokensResult::Tokens(SemanticTokens {
                    result_id: None,
                    data: semantic::tokens(doc),
                }))
            }),
            _ => Response::new_err(
                req.id,
                ErrorCode::MethodNotFound as i32,
                format!("tapc lsp does not handle {}", req.method),
            ),
        }
    }
}

type Docs = HashMap<Url, Document>;

fn hover_at(docs: &Docs, p: HoverParams) -> Option<Hover> {
    let (doc, offset) = at(docs, &p.text_document_position_params)?;
    let (text, span) = hover::hover(doc, offset)?;
    Some(Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value: text,
        }),
        range: Some(doc.range(span)),
    })
}

fn definition(docs: &Docs, p: GotoDefinitionParams) -> Option<GotoDefinitionResponse> {
    let pos = &p.text_document_position_params;
    let (doc, offset) = at(docs, pos)?;
    let def = nav::definition(doc, offset)?;
    let loc = Location::new(pos.text_document.uri.clone(), doc.range(def.span.clone()));
    Some(GotoDefinitionResponse::Scalar(loc))
}

fn references(docs: &Docs, p: ReferenceParams) -> Option<Vec<Location>> {
    let (doc, offset) = at(docs, &p.text_document_position)?;
    let uri = &p.text_document_position.text_document.uri;
    let refs = nav::references(doc, offset, p.context.include_declaration);
    Some(
        refs.iter()
            .map(|o| Location::new(uri.clone(), doc.range(o.span.clone())))
            .collect(),
    )
}

/// The whole document printed canonically; a file with errors is not formatted (an error
/// response says why).
fn formatting(docs: &Docs, req: Request) -> Response {
    let id = req.id.clone();
    let Ok(p) = serde_json::from_value::<DocumentFormattingParams>(req.params.clone()) else {
        return respond(req, |_: DocumentFormattingParams| ());
    };
    let Some(doc) = docs.get(&p.text_document.uri) else {
        return Response::new_ok(id, ());
    };
    if doc.diags.iter().any(|d| d.is_error()) {
        return Response::new_err(
            id,
            ErrorCode::RequestFailed as i32,
            "tapc fmt: the file has errors; fix them to format it".into(),
        );
    }
    let edits: Vec<TextEdit> = edits::format(doc)
        .map(|text| TextEdit::new(doc.range(0..doc.text.len()), text))
        .into_iter()
        .collect();
    Response::new_ok(id, edits)
}

/// Quick fixes of the diagnostics in the range ([`edits::quick_fixes`]).
fn code_actions(docs: &Docs, p: CodeActionParams) -> Option<Vec<CodeActionOrCommand>> {
    let uri = &p.text_document.uri;
    let doc = docs.get(uri)?;
    let range = doc.offset(p.range.start)..doc.offset(p.range.end);
    let actions = edits::quick_fixes(doc, range)
        .into_iter()
        .map(|fix| {
            let edits: Vec<TextEdit> = fix
                .edits
                .into_iter()
                .map(|(span, text)| TextEdit::new(doc.range(span), text))
                .collect();
            let diag = doc.lsp_diagnostic(uri, &doc.diags[fix.diagnostic]);
            CodeActionOrCommand::CodeAction(CodeAction {
                title: fix.title,
                kind: Some(CodeActionKind::QUICKFIX),
                diagnostics: Some(vec![diag]),
                edit: Some(WorkspaceEdit::new(HashMap::from([(uri.clone(), edits)]))),
                is_preferred: Some(true),
                ..Default::default()
            })
        })
        .collect();
    Some(actions)
}

/// Inferred result types in the range.
fn inlay_hints(docs: &Docs, p: InlayHintParams) -> Option<Vec<InlayHint>> {
    let doc = docs.get(&p.text_document.uri)?;
    let range = doc.offset(p.range.start)..doc.offset(p.range.end);
    let hints = edits::inlay_hints(doc, range)
        .into_iter()
        .map(|(offset, label)| InlayHint {
            position: doc.range(offset..offset).start,
            label: InlayHintLabel::String(label),
            kind: Some(InlayHintKind::TYPE),
            text_edits: None,
            tooltip: None,
            padding_left: Some(true),
            padding_right: None,
            data: None,
        })
        .collect();
    Some(hints)
}

/// Completions at the cursor, each replacing the word being typed (sigil included).
fn completion(docs: &Docs, p: CompletionParams) -> Option<CompletionResponse> {
    let (doc, offset) = at(docs, &p.text_document_position)?;
    let (word, items) = complete::complete(doc, offset);
    let range = doc.range(word);
    let items = items
        .into_iter()
        .map(|i| CompletionItem {
            kind: Some(match i.kind {
                complete::Kind::Op => CompletionItemKind::FUNCTION,
                complete::Kind::Graph => CompletionItemKind::MODULE,
                complete::Kind::Value => CompletionItemKind::VARIABLE,
                complete::Kind::Param => CompletionItemKind::TYPE_PARAMETER,
                complete::Kind::Port => CompletionItemKind::FIELD,
                complete::Kind::Function => CompletionItemKind::FUNCTION,
                complete::Kind::IndexVar => CompletionItemKind::VARIABLE,
                complete::Kind::Size => CompletionItemKind::CONSTANT,
                complete::Kind::Type => CompletionItemKind::TYPE_PARAMETER,
                complete::Kind::Keyword => CompletionItemKind::KEYWORD,
            }),
            detail: Some(i.detail),
            documentation: i.documentation.map(Documentation::String),
            text_edit: Some(CompletionTextEdit::Edit(TextEdit::new(
                range,
                i.label.clone(),
            ))),
            label: i.label,
            ..Default::default()
        })
        .collect();
    Some(CompletionResponse::Array(items))
}

/// The signature of the apply around the cursor.
fn signature_help(docs: &Docs, p: SignatureHelpParams) -> Option<SignatureHelp> {
    let (doc, offset) = at(docs, &p.text_document_position_params)?;
    let h = sighelp::signature_help(doc, offset)?;
    let parameters = h
        .params
        .iter()
        .map(|r| ParameterInformation {
            label: ParameterLabel::LabelOffsets([
                h.label[..r.start].encode_utf16().count() as u32,
                h.label[..r.end].encode_utf16().count() as u32,
            ]),
            documentation: None,
        })
        .collect();
    Some(SignatureHelp {
        signatures: vec![SignatureInformation {
            label: h.label,
            documentation: None,
            parameters: Some(parameters),
            active_parameter: Some(h.active as u32),
        }],
        active_signature: Some(0),
        active_parameter: Some(h.active as u32),
    })
}

/// The workspace edit of a rename; an error response says why a rename is refused.
fn rename_edits(docs: &Docs, p: RenameParams) -> Result<Option<WorkspaceEdit>, String> {
    let pos = &p.text_document_position;
    let Some((doc, offset)) = at(docs, pos) else {
        return Ok(None);
    };
    let edits = rename::rename(doc, offset, &p.new_name)?
        .into_iter()
        .map(|(r, text)| TextEdit::new(doc.range(r), text))
        .collect();
    let uri = pos.text_document.uri.clone();
    Ok(Some(WorkspaceEdit::new(HashMap::from([(uri, edits)]))))
}

/// The document and byte offset a position names.
fn at<'a>(docs: &'a Docs, p: &TextDocumentPositionParams) -> Option<(&'a Document, usize)> {
    let doc = docs.get(&p.text_document.uri)?;
    Some((doc, doc.offset(p.position)))
}

/// Parses the request's params and answers with `f`'s result (`null` for `None`).
fn respond<P: DeserializeOwned, T: Serialize>(req: Request, f: impl FnOnce(P) -> T) -> Response {
    match serde_json::from_value::<P>(req.params) {
        Ok(p) => Response::new_ok(req.id, f(p)),
        Err(e) => Response::new_err(req.id, ErrorCode::InvalidParams as i32, e.to_string()),
    }
}

/// As [`respond`], for handlers that may refuse with a message (a `RequestFailed` error).
fn respond_result<P: DeserializeOwned, T: Serialize>(
    req: Request,
    f: impl FnOnce(P) -> Result<T, String>,
) -> Response {
    let id = req.id.clone();
    let Ok(p) = serde_json::from_value::<P>(req.params.clone()) else {
        return respond(req, |_: P| ());
    };
    match f(p) {
        Ok(v) => Response::new_ok(id, v),
        Err(e) => Response::new_err(id, ErrorCode::RequestFailed as i32, e),
    }
}

/// Notifications that change a document's text.
fn is_edit(method: &str) -> bool {
    [
        DidOpenTextDocument::METHOD,
        DidChangeTextDocument::METHOD,
        DidCloseTextDocument::METHOD,
    ]
    .contains(&method)
}

/// Applies one content change: a range edit (incremental sync) or the whole text.
fn apply_change(text: &mut String, change: TextDocumentContentChangeEvent) {
    match change.range {
        Some(range) => {
            let lines = super::line_index::LineIndex::new(text);
            let start = lines.offset(text, range.start);
            let end = lines.offset(text, range.end).max(start);
            text.replace_range(start..end, &change.text);
        }
        None => *text = change.text,
    }
}
