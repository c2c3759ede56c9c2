//! The machine model of the `cost` pass: nodes with a compute throughput (flop/s) and a memory
//! capacity (bytes), links between every pair of nodes with a bandwidth (bytes/s) and a
//! latency (s), where each source lives, and the node that collects the sinks.
//!
//! Read from a small TOML file (`--machine FILE`):
//!
//! ```toml
//! nodes = 2            # optional when [[node]] tables are given
//! flops = 5e10         # default flop/s of every node
//! memory = 8589934592  # default bytes of every node
//! bandwidth = 1.25e10  # default bytes/s of every link
//! latency = 5e-6       # default seconds of every link
//! sink_node = 0        # where sinks are collected
//! [[node]]             # per-node overrides, in node order
//! flops = 1e11
//! [[link]]             # per-pair overrides (both directions)
//! from = 0
//! to = 1
//! bandwidth = 1e9
//! latency = 1e-5
//! [sources]            # where each source starts (default node 0)
//! w1 = 1
//! ```

use std::collections::HashMap;
use toml_edit::{DocumentMut, Item, Table};

/// One compute node.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// Sustained throughput, flop/s.
    pub flops: f64,
    /// Memory capacity, bytes.
    pub memory: f64,
}

/// Nodes, links, and where data starts and ends.
#[derive(Clone, Debug, PartialEq)]
pub struct Machine {
    pub nodes: Vec<Node>,
    /// `bandwidth[a][b]`: bytes/s from node a to node b.
    pub bandwidth: Vec<Vec<f64>>,
    /// `latency[a][b]`: seconds per transfer from node a to node b.
    pub latency: Vec<Vec<f64>>,
    /// Node each named source starts on; sources not listed start on node 0.
    pub sources: HashMap<String, u32>,
    /// Node the sinks are collected on (also where a reduction's combine runs).
    pub sink_node: u32,
}

/// Defaults of [`Machine::default_local`]: one modern core with AVX2 FMA sustains about
/// 50 Gflop/s on f32; 8 GiB of memory per node; links at 100 Gb/s (12.5 GB/s) with 5 µs latency
/// (a fast datacenter network or a PCIe 4 x8 link).
pub const LOCAL_FLOPS: f64 = 5e10;
pub const LOCAL_MEMORY: f64 = 8.0 * 1024.0 * 1024.0 * 1024.0;
pub const LOCAL_BANDWIDTH: f64 = 1.25e10;
pub const LOCAL_LATENCY: f64 = 5e-6;

impl Machine {
    /// `nodes` identical nodes of [`LOCAL_FLOPS`] flop/s and [`LOCAL_MEMORY`] bytes, fully
    /// connected by links of [`LOCAL_BANDWIDTH`] bytes/s and [`LOCAL_LATENCY`] s; every source
    /// starts on node 0 and sinks are collected on node 0.
    pub fn default_local(nodes: u32) -> Machine {
        Machine::uniform(
            nodes.max(1) as usize,
            LOCAL_FLOPS,
            LOCAL_MEMORY,
            LOCAL_BANDWIDTH,
            LOCAL_LATENCY,
        )
    }

    /// `n` identical, fully connected nodes.
    pub fn uniform(n: usize, flops: f64, memory: f64, bandwidth: f64, latency: f64) -> Machine {
        Machine {
            nodes: vec![Node { flops, memory }; n],
            bandwidth: vec![vec![bandwidth; n]; n],
            latency: vec![vec![latency; n]; n],
            sources: HashMap::new(),
            sink_node: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The node a source named `name` starts on.
    pub fn source_node(&self, name: &str) -> u32 {
        self.sources.get(name).copied().unwrap_or(0)
    }

    /// Seconds to move `bytes` from node `a` to node `b` (zero on the same node).
    pub fn transfer(&self, a: usize, b: usize, bytes: f64) -> f64 {
        if a == b || bytes <= 0.0 {
            0.0
        } else {
            self.latency[a][b] + bytes / self.bandwidth[a][b]
        }
    }

    /// Parses the TOML format described in the module documentation. Every number must be
    /// positive; node indices must be in range.
    pub fn from_toml(text: &str) -> Result<Machine, String> {
        let doc: DocumentMut = text.parse().map_err(|e| format!("machine file: {e}"))?;
        let top = doc.as_table();
        let num = |t: &Table, key: &str| -> Result<Option<f64>, String> {
            match t.get(key) {
                None => Ok(None),
                Some(item) => {
                    let v = item
                        .as_float()
                        .or_else(|| item.as_integer().map(|i| i as f64))
                        .ok_or_else(|| format!("machine file: `{key}` must be a number"))?;
                    if v.is_finite() && v >= 0.0 {
                        Ok(Some(v))
                    } else {
                        Err(format!(
                            "machine file: `{key}` must be a non-negative number"
                        ))
                    }
                }
            }
        };
        let positive = |t: &Table, key: &str, default: f64| -> Result<f64, String> {
            match num(t, key)? {
                Some(v) if v > 0.0 => Ok(v),
                Some(_) => Err(format!("machine file: `{key}` must be positive")),
                None => Ok(default),
            }
        };
        let node_tables: Vec<&Table> = match top.get("node") {
            None => vec![],
            Some(Item::ArrayOfTables(a)) => a.iter().collect(),
            Some(_) => {
                return Err("machine file: `node` must be an array of tables ([[node]])".into())
            }
        };
        let n = match num(top, "nodes")? {
            Some(v) if v >= 1.0 && v.fract() == 0.0 && v <= 256.0 => {
                (v as usize).max(node_tables.len())
            }
            Some(_) => return Err("machine file: `nodes` must be an integer in 1..=256".into()),
            None => node_tables.len().max(1),
        };
        let flops = positive(top, "flops", LOCAL_FLOPS)?;
        let memory = positive(top, "memory", LOCAL_MEMORY)?;
        let bw = positive(top, "bandwidth", LOCAL_BANDWIDTH)?;
        let lat = num(top, "latency")?.unwrap_or(LOCAL_LATENCY);
        let mut m = Machine::uniform(n, flops, memory, bw, lat);
        for (i, t) in node_tables.iter().enumerate() {
            m.nodes[i] = Node {
                flops: positive(t, "flops", flops)?,
                memory: positive(t, "memory", memory)?,
            };
        }
        let index = |t: &Table, key: &str| -> Result<usize, String> {
            let v = t
                .get(key)
                .and_then(Item::as_integer)
                .ok_or_else(|| format!("machine file: `{key}` must be a node index"))?;
            usize::try_from(v)
                .ok()
                .filter(|&i| i < n)
                .ok_or_else(|| format!("machine file: node {v} out of range (0..{n})"))
        };
        match top.get("link") {
            None => {}
            Some(Item::ArrayOfTables(a)) => {
                for t in a.iter() {
                    let (from, to) = (index(t, "from")?, index(t, "to")?);
                    let b = positive(t, "bandwidth", m.bandwidth[from][to])?;
                    let l = num(t, "latency")?.unwrap_or(m.latency[from][to]);
                    for (x, y) in [(from, to), (to, from)] {
                        m.bandwidth[x][y] = b;
                        m.latency[x][y] = l;
                    }
                }
            }
            Some(_) => {
                return Err("machine file: `link` must be an array of tables ([[link]])".into())
            }
        }
        if let Some(item) = top.get("sources") {
            let t = item
                .as_table()
                .ok_or("machine file: `sources` must be a table")?;
            for (name, v) in t.iter() {
                let i = v
                    .as_integer()
                    .and_then(|i| usize::try_from(i).ok())
                    .filter(|&i| i < n);
                let i = i.ok_or_else(|| {
                    format!("machine file: source `{name}` must name a node in 0..{n}")
                })?;
                m.sources.insert(name.to_string(), i as u32);
            }
        }
        if top.contains_key("sink_node") {
            m.sink_node = index(top, "sink_node")? as u32;
        }
        for key in top.iter().map(|(k, _)| k) {
            if ![
                "nodes",
                "flops",
                "memory",
                "bandwidth",
                "latency",
                "sink_node",
                "node",
                "link",
                "sources",
            ]
            .contains(&key)
            {
                return Err(format!("machine file: unknown key `{key}`"));
            }
        }
        Ok(m)
    }
}
