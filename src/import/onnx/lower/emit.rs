//! The TEG text the lowering builds: op definitions (one per distinct kernel, deduplicated by
//! their text), graph statements with every result's type written out, value names taken from
//! the ONNX graph (made into TEG identifiers, unique), and literals exact in their dtype.

use std::collections::{HashMap, HashSet};
use tapc_runtime::{DType, Tensor};

/// A TEG value of the graph being built: its name (without `%`), dtype and shape.
#[derive(Clone, Debug, PartialEq)]
pub struct D {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

impl D {
    /// `%name`.
    pub fn v(&self) -> String {
        format!("%{}", self.name)
    }
    pub fn rank(&self) -> usize {
        self.shape.len()
    }
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// `f32[2, 3]`.
pub fn ty(dtype: DType, shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    format!("{}[{}]", dtype.name(), dims.join(", "))
}

/// `[a, b, c]`.
pub fn list<T: ToString>(v: &[T]) -> String {
    let items: Vec<String> = v.iter().map(T::to_string).collect();
    format!("[{}]", items.join(", "))
}

/// An ONNX name as a TEG identifier: `[A-Za-z0-9_]` kept, anything else `_`, a leading
/// digit prefixed with `_`; never empty.
pub fn ident(name: &str) -> String {
    let mut s = crate::syntax::lexer::identifier_chars(name);
    let s2 = s.trim_matches('_').to_string();
    if !s2.is_empty() {
        s = s2;
    }
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, 'v');
    }
    s
}

/// A literal of `dtype` with value `v`, exact in that dtype (floats print the shortest text
/// that reads back to the same value; negative values are parenthesized).
pub fn lit(v: f64, dtype: DType) -> String {
    let text = if dtype == DType::Bool {
        return if v != 0.0 { "true" } else { "false" }.into();
    } else if dtype.is_float() {
        let s = if dtype == DType::F64 {
            format!("{:?}", v.abs())
        } else {
            format!("{:?}", (v as f32).abs())
        };
        if s.contains(['.', 'e']) {
            s
        } else {
            format!("{s}.0")
        }
    } else {
        format!("{}", v.abs() as i64)
    };
    if v < 0.0 {
        format!("(-{text})")
    } else {
        text
    }
}

/// The text of the module being built.
#[derive(Default)]
pub struct Emitter {
    /// Op definitions in order, each with `{NAME}` already replaced.
    ops: Vec<String>,
    /// Op text with `{NAME}` → its name.
    by_text: HashMap<String, String>,
    op_names: HashSet<String>,
    lines: Vec<String>,
    names: HashSet<String>,
    /// Weights to write: source name and tensor.
    pub weights: Vec<(String, Tensor)>,
}

impl Emitter {
    /// A fresh value name derived from `hint`.
    pub fn fresh(&mut self, hint: &str) -> String {
        let base = ident(hint);
        let mut name = base.clone();
        let mut k = 1;
        while !self.names.insert(name.clone()) {
            name = format!("{base}_{k}");
            k += 1;
        }
        name
    }

    /// Defines (once) the op whose text is `text` with `{NAME}` for its name; returns the name.
    pub fn op(&mut self, base: &str, text: &str) -> String {
        if let Some(n) = self.by_text.get(text) {
            return n.clone();
        }
        let base = ident(base);
        let mut name = base.clone();
        let mut k = 1;
        while !self.op_names.insert(name.clone()) {
            name = format!("{base}_{k}");
            k += 1;
        }
        self.ops.push(text.replace("{NAME}", &name));
        self.by_text.insert(text.to_string(), name.clone());
        name
    }

    /// `%hint = rhs : type`, returning the new value.
    pub fn stmt(&mut self, hint: &str, rhs: &str, dtype: DType, shape: Vec<usize>) -> D {
        let name = self.fresh(hint);
        self.lines
            .push(format!("  %{name} = {rhs} : {}", ty(dtype, &shape)));
        D { name, dtype, shape }
    }

    /// `%hint = apply @op<params>(args) : type`.
    pub fn apply(
        &mut self,
        hint: &str,
        op: &str,
        params: &[(&str, i64)],
        args: &[&D],
        dtype: DType,
        shape: Vec<usize>,
    ) -> D {
        let ps: Vec<String> = params.iter().map(|(k, v)| format!("{k} = {v}")).collect();
        let ps = if ps.is_empty() {
            String::new()
        } else {
            format!("<{}>", ps.join(", "))
        };
        let args: Vec<String> = args.iter().map(|d| d.v()).collect();
        self.stmt(
            hint,
            &format!("apply @{op}{ps}({})", args.join(", ")),
            dtype,
            shape,
        )
    }

    /// A raw graph line (a source or sink).
    pub fn line(&mut self, text: String) {
        self.lines.push(text);
    }

    /// The whole module: a header comment, the ops, then the graph.
    pub fn finish(&self, header: &str, graph: &str) -> String {
        let mut s = String::new();
        for l in header.lines() {
            s.push_str(&format!("// {l}\n"));
        }
        for o in &self.ops {
            s.push('\n');
            s.push_str(o);
            s.push('\n');
        }
        s.push_str(&format!("\ngraph @{graph} {{\n"));
        for l in &self.lines {
            s.push_str(l);
            s.push('\n');
        }
        s.push_str("}\n");
        s
    }
}
