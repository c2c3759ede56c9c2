//! The machine model of the `cost` pass: nodes with a compute throughput (flop/s, optionally
//! per kernel class and dtype), a memory bandwidth (bytes/s) and a memory capacity (bytes),
//! links between every pair of nodes with a bandwidth (bytes/s) and a latency (s), where each
//! source lives (one node, split over all nodes, or shared storage every node reads), and
//! whether sinks are gathered on one node or written where they are computed.
//!
//! Read from a small TOML file (`--machine FILE`; `tapc calibrate` writes one):
//!
//! ```toml
//! nodes = 2             # optional when [[node]] tables are given
//! flops = 5e10          # default flop/s of every node (every kernel class)
//! mem_bandwidth = 2e10  # default bytes/s between a node's cores and its memory
//! task_overhead = 2e-6  # default seconds per task besides its roofline time (default 0)
//! memory = 8589934592   # default bytes of every node
//! bandwidth = 1.25e10   # default bytes/s of every link
//! latency = 5e-6        # default seconds of every link
//! sink_node = 0         # where sinks are gathered (and reductions combined)
//! sinks = "gather"      # or "distributed": every node writes the sink pieces it computed
//! [throughput]          # optional flop/s per kernel class and dtype (else `flops`)
//! contraction_f32 = 1e11
//! elementwise_f32 = 2e10
//! reduction_f64 = 1e10
//! [[node]]              # per-node overrides, in node order
//! flops = 1e11
//! mem_bandwidth = 4e10
//! [[link]]              # per-pair overrides (both directions)
//! from = 0
//! to = 1
//! bandwidth = 1e9
//! latency = 1e-5
//! [sources]             # where each source starts (default "shared")
//! w1 = 1                # on node 1
//! x = "split"           # rows (axis 0) split evenly over all nodes, as `shard` splits
//! b = "shared"          # on storage every node reads: each reads only its windows
//! "*" = "shared"        # every source not listed
//! ```

use std::collections::HashMap;
use toml_edit::{DocumentMut, Item, Table};

/// The kernel classes the machine may give separate throughputs: a reduction whose every
/// step multiplies and adds (matmul, convolution), another reduction (sum, max), or an
/// apply without reduction variables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Contraction,
    Elementwise,
    Reduction,
}

impl Class {
    pub const ALL: [Class; 3] = [Class::Contraction, Class::Elementwise, Class::Reduction];
    pub fn name(self) -> &'static str {
        match self {
            Class::Contraction => "contraction",
            Class::Elementwise => "elementwise",
            Class::Reduction => "reduction",
        }
    }
    /// The `[throughput]` key of this class at `f64` or f32 (other dtypes use f32's).
    pub fn key(self, f64: bool) -> String {
        format!("{}_{}", self.name(), if f64 { "f64" } else { "f32" })
    }
    fn slot(self, f64: bool) -> usize {
        self as usize * 2 + usize::from(f64)
    }
}

/// One compute node.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// Sustained throughput, flop/s (of every class without its own figure).
    pub flops: f64,
    /// Memory capacity, bytes.
    pub memory: f64,
    /// Memory bandwidth, bytes/s: a task takes at least its footprint bytes over this.
    pub mem_bandwidth: f64,
    /// Flop/s per (class, dtype), by [`Class::key`] order; `None`: `flops`.
    pub throughput: [Option<f64>; 6],
    /// Seconds the runtime spends per task besides its roofline time (dispatch, buffer
    /// allocation); 0 unless measured (`tapc calibrate`).
    pub task_overhead: f64,
}

impl Node {
    /// Flop/s of kernels of `class` at f64 (`f64`) or f32.
    pub fn rate(&self, class: Class, f64: bool) -> f64 {
        self.throughput[class.slot(f64)].unwrap_or(self.flops)
    }
}

/// Where a source's data starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Whole on one node (which reads its file; the others get what they read over links).
    Node(u32),
    /// Axis 0 split evenly over all nodes (node `k` holds part `k` of `shard`'s split).
    Split,
    /// On storage every node reads: a node holds, and reads, only the windows its tasks read;
    /// nothing moves over links (the MPI runtime without `--inputs-on-root`).
    Shared,
}

impl Placement {
    fn parse(v: &Item, n: usize) -> Option<Placement> {
        if let Some(i) = v.as_integer() {
            return usize::try_from(i)
                .ok()
                .filter(|&i| i < n)
                .map(|i| Placement::Node(i as u32));
        }
        match v.as_str()? {
            "split" => Some(Placement::Split),
            "shared" => Some(Placement::Shared),
            _ => None,
        }
    }

    /// `root` (node 0), `split`, `shared`, or a node number: the `sources` pass option.
    pub fn from_option(v: &str) -> Result<Placement, String> {
        match v {
            "root" => Ok(Placement::Node(0)),
            "split" => Ok(Placement::Split),
            "shared" => Ok(Placement::Shared),
            _ => v.parse().map(Placement::Node).map_err(|_| {
                format!("sources takes root, split, shared or a node number, not `{v}`")
            }),
        }
    }
}

/// Nodes, links, and where data starts and ends.
#[derive(Clone, Debug, PartialEq)]
pub struct Machine {
    pub nodes: Vec<Node>,
    /// `bandwidth[a][b]`: bytes/s from node a to node b.
    pub bandwidth: Vec<Vec<f64>>,
    /// `latency[a][b]`: seconds per transfer from node a to node b.
    pub latency: Vec<Vec<f64>>,
    /// Where each named source starts; sources not listed: `default_source`.
    pub sources: HashMap<String, Placement>,
    pub default_source: Placement,
    /// Node the sinks are collected on (also where a reduction's combine runs).
    pub sink_node: u32,
    /// Sinks are written by the nodes that computed them (no gather on `sink_node`).
    pub distributed_sinks: bool,
    /// Whether the node count was given (a file without `nodes` nor `[[node]]`, such as
    /// `tapc calibrate` writes, describes every node of a machine of any size).
    pub sized: bool,
}

/// Defaults of [`Machine::default_local`]: one modern core with AVX2 FMA sustains about
/// 50 Gflop/s on f32; 20 GB/s of memory bandwidth (a few cores of a DDR4/DDR5 socket); 8 GiB
/// of memory per node; links at 100 Gb/s (12.5 GB/s) with 5 µs latency (a fast datacenter
/// network or a PCIe 4 x8 link).
pub const LOCAL_FLOPS: f64 = 5e10;
pub const LOCAL_MEM_BANDWIDTH: f64 = 2e10;
pub const LOCAL_MEMORY: f64 = 8.0 * 1024.0 * 1024.0 * 1024.0;
pub const LOCAL_BANDWIDTH: f64 = 1.25e10;
pub const LOCAL_LATENCY: f64 = 5e-6;

impl Machine {
    /// `nodes` identical nodes of [`LOCAL_FLOPS`] flop/s, [`LOCAL_MEM_BANDWIDTH`] bytes/s of
    /// memory bandwidth and [`LOCAL_MEMORY`] bytes, fully connected by links of
    /// [`LOCAL_BANDWIDTH`] bytes/s and [`LOCAL_LATENCY`] s; every source is on shared storage
    /// (each node reads its windows, as MPI ranks do without `--inputs-on-root`) and sinks are
    /// collected on node 0.
    pub fn default_local(nodes: u32) -> Machine {
        Machine::uniform(
            nodes.max(1) as usize,
            LOCAL_FLOPS,
            LOCAL_MEMORY,
            LOCAL_BANDWIDTH,
            LOCAL_LATENCY,
        )
    }

    /// `n` identical, fully connected nodes (memory bandwidth [`LOCAL_MEM_BANDWIDTH`]), sources
    /// shared, sinks gathered on node 0.
    pub fn uniform(n: usize, flops: f64, memory: f64, bandwidth: f64, latency: f64) -> Machine {
        let node = Node {
            flops,
            memory,
            mem_bandwidth: LOCAL_MEM_BANDWIDTH,
            throughput: [None; 6],
            task_overhead: 0.0,
        };
        Machine {
            nodes: vec![node; n],
            bandwidth: vec![vec![bandwidth; n]; n],
            latency: vec![vec![latency; n]; n],
            sources: HashMap::new(),
            default_source: Placement::Shared,
            sink_node: 0,
            distributed_sinks: false,
            sized: true,
        }
    }

    /// This machine's node 0 and its first link, as `n` identical nodes (for a machine file
    /// that did not give its size).
    pub fn with_nodes(&self, n: usize) -> Machine {
        let mut m = self.clone();
        m.nodes = vec![self.nodes[0].clone(); n];
        m.bandwidth = vec![vec![self.bandwidth[0][0]; n]; n];
        m.latency = vec![vec![self.latency[0][0]; n]; n];
        m.sized = true;
        m
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Where a source named `name` starts.
    pub fn source(&self, name: &str) -> Placement {
        self.sources
            .get(name)
            .copied()
            .unwrap_or(self.default_source)
    }

    /// Seconds to move `bytes` from node `a` to node `b` (zero on the same node).
    pub fn transfer(&self, a: usize, b: usize, bytes: f64) -> f64 {
        if a == b || bytes <= 0.0 {
            0.0
        } else {
            self.latency[a][b] + bytes / self.bandwidth[a][b]
        }
    }

    /// Seconds of a broadcast of `bytes` from `root` to the distinct nodes `receivers`, as
    /// MPI runs it (the runtime's `MPI_Ibcast`): a binomial tree, ⌈log2(k + 1)⌉ rounds for k
    /// receivers, each round one message over the slowest root–receiver link (the α–β model:
    /// latency + bytes / bandwidth per message).
    pub fn broadcast(&self, root: usize, receivers: &[usize], bytes: f64) -> f64 {
        let rounds = (usize::BITS - receivers.len().leading_zeros()) as f64;
        let slowest = receivers
            .iter()
            .map(|&r| self.transfer(root, r, bytes))
            .fold(0.0, f64::max);
        rounds * slowest
    }

    /// Seconds of a ring allreduce of `bytes` on each of `nodes` (in ring order), as MPI runs
    /// it for large messages (reduce-scatter then allgather): 2(p − 1) steps of bytes / p each,
    /// 2(p − 1)·α + 2(p − 1)/p · bytes · β with α and β of the slowest link of the ring. For
    /// when split reductions combine with `MPI_Allreduce`; the runtime does not yet.
    pub fn allreduce(&self, nodes: &[usize], bytes: f64) -> f64 {
        let p = nodes.len();
        if p < 2 || bytes <= 0.0 {
            return 0.0;
        }
        let (mut alpha, mut beta) = (0.0f64, 0.0f64);
        for (k, &a) in nodes.iter().enumerate() {
            let b = nodes[(k + 1) % p];
            alpha = alpha.max(self.latency[a][b]);
            beta = beta.max(1.0 / self.bandwidth[a][b]);
        }
        let steps = 2.0 * (p - 1) as f64;
        steps * alpha + steps / p as f64 * bytes * beta
    }

    /// Seconds of a reduce of `bytes` from the distinct nodes `senders` to `root`, as Open MPI
    /// 4.1 runs the runtime's `MPI_Ireduce` (libnbc), α and β of the slowest root–sender link:
    /// over at most 4 ranks and from 64 KiB, a chain of 8 KiB segments, whose schedule posts
    /// every segment at once, so each of the `p − 1` hops pays its latency once and the
    /// segments stream behind it: (p − 1)·α + (s + p − 2)·8 KiB·β for `s` segments (on 2 ranks
    /// α + bytes·β, one message); otherwise a binomial tree, ⌈log2 p⌉ rounds of
    /// α + bytes·β. Either moves each sender's bytes once.
    pub fn reduce(&self, root: usize, senders: &[usize], bytes: f64) -> f64 {
        let p = senders.iter().filter(|&&n| n != root).count() + 1;
        if p < 2 || bytes <= 0.0 {
            return 0.0;
        }
        let (mut alpha, mut beta) = (0.0f64, 0.0f64);
        for &n in senders.iter().filter(|&&n| n != root) {
            alpha = alpha.max(self.latency[n][root]);
            beta = beta.max(1.0 / self.bandwidth[n][root]);
        }
        const SEGMENT: f64 = 8192.0;
        if p <= 4 && bytes >= 65536.0 {
            let segments = (bytes / SEGMENT).ceil();
            let hops = p as f64 - 1.0;
            hops * alpha + (segments + hops - 1.0) * SEGMENT.min(bytes) * beta
        } else {
            let rounds = (usize::BITS - (p - 1).leading_zeros()) as f64;
            rounds * (alpha + bytes * beta)
        }
    }

    /// Parses the TOML format described in the module documentation. Every number must be
    /// positive; node indices must be in range.
    pub fn from_toml(text: &str) -> Result<Machine, String> {
        let doc: DocumentMut = text.parse().map_err(|e| format!("machine file: {e}"))?;
        let top = doc.as_table();
        if let Some(key) = top.iter().map(|(k, _)| k).find(|k| !TOP_KEYS.contains(k)) {
            return Err(format!("machine file: unknown key `{key}`"));
        }
        let node_tables = tables(top, "node")?;
        let n = match num(top, "nodes")? {
            Some(v) if v >= 1.0 && v.fract() == 0.0 && v <= 256.0 => {
                (v as usize).max(node_tables.len())
            }
            Some(_) => return Err("machine file: `nodes` must be an integer in 1..=256".into()),
            None => node_tables.len().max(1),
        };
        let bw = positive(top, "bandwidth", LOCAL_BANDWIDTH)?;
        let lat = num(top, "latency")?.unwrap_or(LOCAL_LATENCY);
        let local = Node {
            flops: LOCAL_FLOPS,
            memory: LOCAL_MEMORY,
            mem_bandwidth: LOCAL_MEM_BANDWIDTH,
            throughput: [None; 6],
            task_overhead: 0.0,
        };
        let base = parse_node(top, &local)?;
        let mut m = Machine::uniform(n, base.flops, base.memory, bw, lat);
        m.nodes = vec![base.clone(); n];
        m.sized = top.contains_key("nodes") || !node_tables.is_empty();
        for (i, t) in node_tables.iter().enumerate() {
            m.nodes[i] = parse_node(t, &base)?;
        }
        for t in tables(top, "link")? {
            let (from, to) = (index(t, "from", n)?, index(t, "to", n)?);
            let b = positive(t, "bandwidth", m.bandwidth[from][to])?;
            let l = num(t, "latency")?.unwrap_or(m.latency[from][to]);
            for (x, y) in [(from, to), (to, from)] {
                m.bandwidth[x][y] = b;
                m.latency[x][y] = l;
            }
        }
        if let Some(item) = top.get("sources") {
            parse_sources(item, n, &mut m)?;
        }
        if top.contains_key("sink_node") {
            m.sink_node = index(top, "sink_node", n)? as u32;
        }
        m.distributed_sinks = match top.get("sinks").map(|v| v.as_str()) {
            None | Some(Some("gather")) => false,
            Some(Some("distributed")) => true,
            Some(_) => {
                return Err("machine file: `sinks` must be \"gather\" or \"distributed\"".into())
            }
        };
        Ok(m)
    }
}

/// The keys a machine file may have at its top level.
const TOP_KEYS: [&str; 14] = [
    "nodes",
    "flops",
    "mem_bandwidth",
    "task_overhead",
    "memory",
    "bandwidth",
    "latency",
    "sink_node",
    "sinks",
    "throughput",
    "node",
    "link",
    "sources",
    "calibration",
];

/// `t[key]` as a non-negative number, if present.
fn num(t: &Table, key: &str) -> Result<Option<f64>, String> {
    let Some(item) = t.get(key) else {
        return Ok(None);
    };
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

/// `t[key]` as a positive number, or `default`.
fn positive(t: &Table, key: &str, default: f64) -> Result<f64, String> {
    match num(t, key)? {
        Some(v) if v > 0.0 => Ok(v),
        Some(_) => Err(format!("machine file: `{key}` must be positive")),
        None => Ok(default),
    }
}

/// `t[key]` as a node index below `n`.
fn index(t: &Table, key: &str, n: usize) -> Result<usize, String> {
    let v = t
        .get(key)
        .and_then(Item::as_integer)
        .ok_or_else(|| format!("machine file: `{key}` must be a node index"))?;
    usize::try_from(v)
        .ok()
        .filter(|&i| i < n)
        .ok_or_else(|| format!("machine file: node {v} out of range (0..{n})"))
}

/// The array of tables `[[key]]` (none when absent).
fn tables<'t>(top: &'t Table, key: &str) -> Result<Vec<&'t Table>, String> {
    match top.get(key) {
        None => Ok(vec![]),
        Some(Item::ArrayOfTables(a)) => Ok(a.iter().collect()),
        Some(_) => Err(format!(
            "machine file: `{key}` must be an array of tables ([[{key}]])"
        )),
    }
}

/// A node's figures from table `t` (the top level or a `[[node]]`), `base` where absent.
fn parse_node(t: &Table, base: &Node) -> Result<Node, String> {
    let mut node = Node {
        flops: positive(t, "flops", base.flops)?,
        memory: positive(t, "memory", base.memory)?,
        mem_bandwidth: positive(t, "mem_bandwidth", base.mem_bandwidth)?,
        throughput: base.throughput,
        task_overhead: num(t, "task_overhead")?.unwrap_or(base.task_overhead),
    };
    if let Some(item) = t.get("throughput") {
        let tp = item
            .as_table()
            .ok_or("machine file: `throughput` must be a table")?;
        for (key, _) in tp.iter() {
            let known = Class::ALL
                .iter()
                .any(|c| [c.key(false), c.key(true)].contains(&key.to_string()));
            if !known {
                return Err(format!(
                    "machine file: unknown throughput `{key}` (classes contraction, elementwise, reduction; suffix _f32 or _f64)"
                ));
            }
        }
        for c in Class::ALL {
            for f64 in [false, true] {
                if let Some(v) = num(tp, &c.key(f64))? {
                    if v <= 0.0 {
                        return Err(format!("machine file: `{}` must be positive", c.key(f64)));
                    }
                    node.throughput[c.slot(f64)] = Some(v);
                }
            }
        }
    }
    Ok(node)
}

/// The `[sources]` table: a node number, `"split"` or `"shared"` per source; `"*"` for the
/// sources not listed.
fn parse_sources(item: &Item, n: usize, m: &mut Machine) -> Result<(), String> {
    let t = item
        .as_table()
        .ok_or("machine file: `sources` must be a table")?;
    for (name, v) in t.iter() {
        let p = Placement::parse(v, n).ok_or_else(|| {
            format!(
                "machine file: source `{name}` must be a node in 0..{n}, \"split\" or \"shared\""
            )
        })?;
        if name == "*" {
            m.default_source = p;
        } else {
            m.sources.insert(name.to_string(), p);
        }
    }
    Ok(())
}
