//! A crate's module tree, read from its `mod` lines starting at the crate root (so
//! `#[path]`-mounted folders such as tapc's `passes/` are found as the compiler finds them),
//! and the files each file uses: every `crate::`, `super::`, `self::` or child-module path in
//! a `use` (grouped `use a::{b, c::d}` included) or in code, resolved to the file of the
//! deepest module it names (an item inside a module resolves to that module's file).
//!
//! A circle is two files that use each other where neither is the file of a module that
//! contains the other's: a `mod.rs` and its own submodules' files are one unit (the parent
//! declares the children and is their namespace, and by the rule above a child's `super::X`
//! resolves to the parent's file even when `X` is a sibling's item the parent re-exports).

use super::lexer::{tokens, Kind, Token};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

/// A module path below the crate root (`[]` is the root).
type ModPath = Vec<String>;

/// A path written in a file: the module it is written in, its segments and its line.
struct Written {
    scope: ModPath,
    segments: Vec<String>,
    line: usize,
}

/// A `mod NAME;` line: the module it is written in, the name and its `#[path]`, if any.
struct Declared {
    scope: ModPath,
    name: String,
    path_attr: Option<String>,
    line: usize,
}

/// What one file says about modules: inline modules, declared module files, written paths.
#[derive(Default)]
struct Outline {
    inline: Vec<ModPath>,
    declared: Vec<Declared>,
    written: Vec<Written>,
}

/// One crate: every module (inline ones too) and the file it lives in, each file's own
/// module, and the paths written in each file.
pub struct Crate {
    modules: BTreeMap<ModPath, PathBuf>,
    module_of: BTreeMap<PathBuf, ModPath>,
    written: BTreeMap<PathBuf, Vec<Written>>,
}

/// Two files' uses of each other.
pub type Pair = (Use, Use);

/// File `from` uses file `to`: where, and the path as written.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Use {
    pub from: PathBuf,
    pub line: usize,
    pub path: String,
    pub to: PathBuf,
}

impl Crate {
    /// Reads the crate whose root file is `root` (`lib.rs` or `main.rs`) and every module
    /// file its `mod` lines declare.
    pub fn load(root: &Path) -> Result<Crate, String> {
        let mut c = Crate {
            modules: BTreeMap::new(),
            module_of: BTreeMap::new(),
            written: BTreeMap::new(),
        };
        let mut todo = vec![(ModPath::new(), root.to_path_buf())];
        while let Some((module, file)) = todo.pop() {
            let src = std::fs::read_to_string(&file)
                .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            let outline = outline(&module, &tokens(&src));
            c.modules.insert(module.clone(), file.clone());
            c.module_of.insert(file.clone(), module.clone());
            for m in &outline.inline {
                c.modules.insert(m.clone(), file.clone());
            }
            for d in &outline.declared {
                let mut child = d.scope.clone();
                child.push(d.name.clone());
                todo.push((child, module_file(&file, &module, d)?));
            }
            c.written.insert(file, outline.written);
        }
        Ok(c)
    }

    /// Every file of the crate.
    pub fn files(&self) -> BTreeSet<&Path> {
        self.modules.values().map(PathBuf::as_path).collect()
    }

    /// Every use of one file by another, first occurrence per pair of files.
    pub fn uses(&self) -> Vec<Use> {
        let mut first: BTreeMap<(&Path, &Path), Use> = BTreeMap::new();
        for (file, written) in &self.written {
            for w in written {
                let Some(to) = self.resolve(&w.scope, &w.segments) else {
                    continue;
                };
                if to == file.as_path() {
                    continue;
                }
                first.entry((file, to)).or_insert_with(|| Use {
                    from: file.clone(),
                    line: w.line,
                    path: w.segments.join("::"),
                    to: to.to_path_buf(),
                });
            }
        }
        first.into_values().collect()
    }

    /// Every pair of files that use each other (each with the use in both directions):
    /// circles, and (second) those between a module's file and a file of its own submodule,
    /// which are no circle (see the module docs).
    pub fn circles(&self) -> (Vec<Pair>, Vec<Pair>) {
        let uses = self.uses();
        let by_pair: BTreeMap<(&Path, &Path), &Use> = uses
            .iter()
            .map(|u| ((u.from.as_path(), u.to.as_path()), u))
            .collect();
        uses.iter()
            .filter(|u| u.from < u.to)
            .filter_map(|u| {
                let back = by_pair.get(&(u.to.as_path(), u.from.as_path()))?;
                Some((u.clone(), (*back).clone()))
            })
            .partition(|(a, b)| !self.nested(&a.from, &b.from))
    }

    /// Whether one of files `a`, `b` holds a module that contains the other's module.
    fn nested(&self, a: &Path, b: &Path) -> bool {
        let (ma, mb) = (&self.module_of[a], &self.module_of[b]);
        ma.starts_with(mb) || mb.starts_with(ma)
    }

    /// The file of the deepest module `segments` names, written in module `scope`; `None`
    /// for paths into other crates (or to items of `scope` itself).
    fn resolve(&self, scope: &[String], segments: &[String]) -> Option<&Path> {
        let (mut at, rest): (ModPath, &[String]) = match segments.first()?.as_str() {
            "crate" => (vec![], &segments[1..]),
            "self" => (scope.to_vec(), &segments[1..]),
            "super" => {
                let ups = segments.iter().take_while(|s| *s == "super").count();
                let keep = scope.len().checked_sub(ups)?;
                (scope[..keep].to_vec(), &segments[ups..])
            }
            _ => (scope.to_vec(), segments),
        };
        let before = at.len();
        for s in rest {
            at.push(s.clone());
            if !self.modules.contains_key(&at) {
                at.pop();
                break;
            }
        }
        // A path with no `crate`/`self`/`super` root must start with a child module.
        let relative = !matches!(segments[0].as_str(), "crate" | "self" | "super");
        if relative && at.len() == before {
            return None;
        }
        self.modules.get(&at).map(PathBuf::as_path)
    }
}

/// The file of module `d`, declared in `file` (the file of module `module`).
fn module_file(file: &Path, module: &[String], d: &Declared) -> Result<PathBuf, String> {
    let here = file.parent().unwrap_or(Path::new("."));
    let at = format!("{}:{}", file.display(), d.line);
    let inline = &d.scope[module.len()..];
    if let Some(p) = &d.path_attr {
        if !inline.is_empty() {
            return Err(format!(
                "{at}: `#[path]` inside an inline module is not supported"
            ));
        }
        return Ok(normalize(&here.join(p)));
    }
    // A `mod.rs`, `lib.rs` or `main.rs` owns its folder; `name.rs` owns `name/`.
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let mut dir = here.to_path_buf();
    if !matches!(stem, "mod" | "lib" | "main") {
        dir.push(stem);
    }
    dir.extend(inline);
    let candidates = [
        dir.join(format!("{}.rs", d.name)),
        dir.join(&d.name).join("mod.rs"),
    ];
    let found: Vec<&PathBuf> = candidates.iter().filter(|p| p.is_file()).collect();
    match found[..] {
        [one] => Ok(one.clone()),
        [] => Err(format!("{at}: no file for `mod {}`", d.name)),
        _ => Err(format!("{at}: both {:?} exist", candidates)),
    }
}

/// `path` with its `a/..` pairs removed (so a `#[path]`-mounted folder reads as itself).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir if out.file_name().is_some() => {
                out.pop();
            }
            _ => out.push(c),
        }
    }
    out
}

/// The outline of a file of module `module`.
fn outline(module: &[String], toks: &[Token]) -> Outline {
    let mut o = Outline::default();
    // One entry per open `{`: the inline module it opens, if any.
    let mut scopes: Vec<Option<String>> = Vec::new();
    let mut path_attr: Option<String> = None;
    let scope = |scopes: &[Option<String>]| -> ModPath {
        let mut m = module.to_vec();
        m.extend(scopes.iter().flatten().cloned());
        m
    };
    let mut i = 0;
    while i < toks.len() {
        let here = scope(&scopes);
        match (&toks[i].kind, toks.get(i + 1).map(|t| &t.kind)) {
            (Kind::Punct('#'), Some(Kind::Punct('['))) => {
                if let Some(p) = path_attribute(&toks[i..]) {
                    path_attr = Some(p);
                }
            }
            (Kind::Ident(k), Some(Kind::Ident(name))) if k == "mod" => {
                match toks.get(i + 2).map(|t| &t.kind) {
                    Some(Kind::Punct(';')) => o.declared.push(Declared {
                        scope: here,
                        name: name.clone(),
                        path_attr: path_attr.take(),
                        line: toks[i].line,
                    }),
                    Some(Kind::Punct('{')) => {
                        path_attr = None;
                        scopes.push(Some(name.clone()));
                        o.inline.push(scope(&scopes));
                        i += 3;
                        continue;
                    }
                    _ => {}
                }
                path_attr = None;
                i += 2;
                continue;
            }
            (Kind::Ident(k), _) if k == "use" => {
                let end = (i..toks.len())
                    .find(|&j| toks[j].kind == Kind::Punct(';'))
                    .unwrap_or(toks.len());
                for segments in use_paths(&toks[i + 1..end]) {
                    o.written.push(Written {
                        scope: here.clone(),
                        segments,
                        line: toks[i].line,
                    });
                }
                i = end + 1;
                continue;
            }
            // `pub(in crate::a)` restricts visibility; it uses nothing.
            (Kind::Ident(k), Some(Kind::Punct('('))) if k == "pub" => {
                i = closing(toks, i + 1, '(', ')') + 1;
                continue;
            }
            (Kind::Punct('{'), _) => scopes.push(None),
            (Kind::Punct('}'), _) => {
                scopes.pop();
            }
            (Kind::Ident(first), Some(Kind::PathSep)) if starts_path(toks, i) => {
                let segments = code_path(&toks[i..], first);
                let line = toks[i].line;
                i += 2 * segments.len() - 1;
                o.written.push(Written {
                    scope: here,
                    segments,
                    line,
                });
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    o
}

/// Whether the identifier at `i` starts a path (is not a later segment of one).
fn starts_path(toks: &[Token], i: usize) -> bool {
    i == 0 || toks[i - 1].kind != Kind::PathSep
}

/// `a::b::c` at the start of `toks` (stopping before `::<` or `::{`).
fn code_path(toks: &[Token], first: &str) -> Vec<String> {
    let mut segments = vec![first.to_string()];
    let mut j = 1;
    while let (Some(Kind::PathSep), Some(Kind::Ident(s))) = (
        toks.get(j).map(|t| &t.kind),
        toks.get(j + 1).map(|t| &t.kind),
    ) {
        segments.push(s.clone());
        j += 2;
    }
    segments
}

/// The string of `#[path = "..."]` at the start of `toks`.
fn path_attribute(toks: &[Token]) -> Option<String> {
    match toks.get(2..6)?.iter().map(|t| &t.kind).collect::<Vec<_>>()[..] {
        [Kind::Ident(p), Kind::Punct('='), Kind::Str(s), Kind::Punct(']')] if p == "path" => {
            Some(s.clone())
        }
        _ => None,
    }
}

/// The index of the bracket closing the one at `open`.
fn closing(toks: &[Token], open: usize, l: char, r: char) -> usize {
    let mut depth = 0;
    for (j, t) in toks.iter().enumerate().skip(open) {
        if t.kind == Kind::Punct(l) {
            depth += 1;
        } else if t.kind == Kind::Punct(r) {
            depth -= 1;
            if depth == 0 {
                return j;
            }
        }
    }
    toks.len()
}

/// The paths of a use tree (the tokens between `use` and `;`), groups expanded: `a::{b,
/// c::{self, d}}` is `a::b`, `a::c`, `a::c::d`. A `*` or `as` ends a path where it stands.
fn use_paths(toks: &[Token]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    use_tree(toks, &mut 0, &mut Vec::new(), &mut out);
    out
}

/// One tree at the cursor, below `prefix`: its paths go to `out`, the cursor past it.
fn use_tree(toks: &[Token], i: &mut usize, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let depth = prefix.len();
    // A leading `::` names an external crate: nothing of ours.
    if toks.get(*i).map(|t| &t.kind) == Some(&Kind::PathSep) && depth == 0 {
        *i = toks.len();
        return;
    }
    loop {
        match toks.get(*i).map(|t| &t.kind) {
            Some(Kind::Ident(s)) if s == "self" && depth > 0 => *i += 1,
            Some(Kind::Ident(s)) if s == "as" => {
                *i += 2;
                break;
            }
            Some(Kind::Punct('*')) => {
                *i += 1;
                break;
            }
            Some(Kind::Ident(s)) => {
                prefix.push(s.clone());
                *i += 1;
            }
            Some(Kind::PathSep) => *i += 1,
            Some(Kind::Punct('{')) => {
                *i += 1;
                use_group(toks, i, prefix, out);
                prefix.truncate(depth);
                return;
            }
            _ => break,
        }
    }
    if prefix.len() > depth || depth > 0 {
        out.push(prefix.clone());
    }
    prefix.truncate(depth);
}

/// The trees of a `{...}` group (the cursor is past its `{`), up to and past its `}`.
fn use_group(toks: &[Token], i: &mut usize, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let depth = prefix.len();
    while let Some(t) = toks.get(*i) {
        match t.kind {
            Kind::Punct('}') => {
                *i += 1;
                return;
            }
            Kind::Punct(',') => *i += 1,
            _ => {
                let before = *i;
                use_tree(toks, i, prefix, out);
                prefix.truncate(depth);
                // A token no tree starts with (not Rust we know): step over it.
                *i = (*i).max(before + 1);
            }
        }
    }
}
