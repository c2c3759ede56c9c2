//! State in graphs (`%w = state @w : type`, `update @w %v`, docs/teg.md §8): the words that
//! lead these statements, and the checks that need only names: every state has exactly one
//! update, and every update names a state of its graph. The update's type is the verifier's.

use super::cx::{err, Cx};
use crate::diag::{codes, Span};
use crate::syntax::ast;
use crate::syntax::hints::{misspelling_of, not_a_keyword};
use std::collections::HashMap;

/// The states and updates of one graph, as lowering meets them.
#[derive(Default)]
pub(super) struct StateBook {
    states: Vec<(String, Span)>,
    updates: HashMap<String, Span>,
}

impl StateBook {
    pub(super) fn state(&mut self, name: &ast::Name) {
        self.states.push((name.text.clone(), name.span));
    }

    /// Records `update @name`; false, after E0066, when the state already has an update.
    pub(super) fn update(&mut self, cx: &mut Cx, name: &ast::Name) -> bool {
        if let Some(&prev) = self.updates.get(&name.text) {
            cx.report(
                err(
                    codes::TWO_UPDATES,
                    format!("state `@{}` is updated twice", name.text),
                    name.span,
                    "second update",
                )
                .secondary(prev, "first update here")
                .note("a state has exactly one next value per step"),
            );
            return false;
        }
        self.updates.insert(name.text.clone(), name.span);
        true
    }

    /// E0064 for each state without an update, E0065 for each update of no state.
    pub(super) fn finish(&self, cx: &mut Cx) {
        for (name, span) in &self.states {
            if !self.updates.contains_key(name) {
                cx.report(
                    err(
                        codes::STATE_WITHOUT_UPDATE,
                        format!("state `@{name}` has no update"),
                        *span,
                        "never updated",
                    )
                    .note(format!(
                        "add `update @{name} %next` giving its value for the next step"
                    )),
                );
            }
        }
        let mut orphans: Vec<(&String, &Span)> = self
            .updates
            .iter()
            .filter(|(u, _)| !self.states.iter().any(|(s, _)| s == *u))
            .collect();
        orphans.sort_by_key(|(_, s)| s.start);
        for (name, span) in orphans {
            let d = err(
                codes::UPDATE_WITHOUT_STATE,
                format!("`update @{name}` names no state of this graph"),
                *span,
                "not a state",
            );
            let names: Vec<&str> = self.states.iter().map(|(s, _)| s.as_str()).collect();
            cx.report(
                match crate::diag::suggest::closest(name, names.iter().copied()) {
                    Some(s) => d.note(format!("did you mean `@{s}`?")),
                    None => d.note(format!("declare it: `%{name} = state @{name} : TYPE`")),
                },
            );
        }
    }
}

/// Whether `WORD @name : type` declares a state (`word` is `state`) or a source (no word);
/// `None`, after E0014, for any other word.
pub(super) fn source_word(cx: &mut Cx, word: &Option<ast::Name>) -> Option<bool> {
    let Some(w) = word else {
        return Some(false);
    };
    if w.text == "state" {
        return Some(true);
    }
    // `%x = soure @x : T` is a misspelt `source`, as the parser would say of it elsewhere.
    if let Some(kw) = misspelling_of(&w.text, &["source"]) {
        cx.report(not_a_keyword(&w.text, kw, w.span));
        return None;
    }
    let d = err(
        codes::UNKNOWN_INSTR,
        format!("unknown instruction `{}`", w.text),
        w.span,
        "not `source` or `state`",
    );
    cx.report(match misspelling_of(&w.text, &["state"]) {
        Some(kw) => d.note(format!("help: did you mean `{kw}`?")),
        None => d.note("`%v = WORD @name : type` declares a `source` or a `state`"),
    });
    None
}

/// Whether `WORD @name %v` is an update; E0014 for any other word.
pub(super) fn update_word(cx: &mut Cx, word: &ast::Name) -> bool {
    if word.text == "update" {
        return true;
    }
    // `snk @out %v` is a misspelt `sink`.
    if let Some(kw) = misspelling_of(&word.text, &["sink"]) {
        cx.report(not_a_keyword(&word.text, kw, word.span));
        return false;
    }
    let d = err(
        codes::UNKNOWN_INSTR,
        format!("unknown graph statement `{}`", word.text),
        word.span,
        "not a statement",
    );
    cx.report(match misspelling_of(&word.text, &["update"]) {
        Some(kw) => d.note(format!("help: did you mean `{kw}`?")),
        None => d.note("`WORD @name %v` is `update @state %next`; a sink is `sink @name %v`"),
    });
    false
}
