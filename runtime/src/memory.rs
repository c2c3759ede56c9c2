//! Memory planning: before a compiled program reads its inputs, it computes the peak memory of
//! its schedule ([`peak`]) and compares it with the memory it may use ([`limits`]:
//! `--max-memory`, the cgroup's `memory.max`, `RLIMIT_AS` and the kernel's `MemAvailable`), so
//! a plan that cannot fit is one clean error naming its biggest buffers ([`check`]) instead of
//! an allocation failure half way. Allocations stay fallible as a second line (the executor's
//! buffers, input data and any sink copy return errors naming what they were for).
//!
//! The peak is that of running the tasks in plan order, as the executor does on one thread:
//! constants and sources live from the start, a task's buffers are allocated when it becomes
//! ready and freed after their last task; sinks are written straight from their buffers, so
//! they cost nothing more. Inputs are held as read for the whole run and are counted too. More
//! threads can make more tasks ready at once; the check leaves a margin for that.

use crate::plan::{Init, Plan};
use std::collections::VecDeque;

/// The most bytes of buffers live at once, and the buffers live at that moment.
pub fn peak(plan: &Plan) -> (u64, Vec<u32>) {
    let mut live = vec![false; plan.buffers.len()];
    let mut bytes = 0u64;
    let mut best: Option<(u64, Vec<u32>)> = None;
    walk(plan, |e| match e {
        Event::Alloc(b) => {
            live[b as usize] = true;
            bytes = bytes.saturating_add(plan.buffers[b as usize].bytes);
        }
        Event::Free(b) => {
            live[b as usize] = false;
            bytes -= plan.buffers[b as usize].bytes;
        }
        Event::Settled => {
            if best.as_ref().is_none_or(|b| bytes > b.0) {
                best = Some((bytes, snapshot(&live)));
            }
        }
    });
    best.unwrap_or_default()
}

/// A step of [`walk`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The buffer is allocated (constants and sources at the start, scratch buffers when
    /// their first task becomes ready).
    Alloc(u32),
    /// The buffer's last task (or sink) is done: it is freed.
    Free(u32),
    /// The allocations and frees of one step are done: the live bytes may peak here.
    Settled,
}

/// Runs the tasks of `plan` in plan order, as the executor does on one thread, calling `on`
/// at every allocation and free of a buffer (the walk [`peak`] measures; `codegen::share`
/// plans dead-buffer sharing on it).
pub fn walk(plan: &Plan, mut on: impl FnMut(Event)) {
    let mut refs = plan.buffer_refs();
    let arg_bufs: Vec<Vec<u32>> = plan.tasks.iter().map(|t| t.buffers()).collect();
    let mut live = vec![false; plan.buffers.len()];
    for (i, b) in plan.buffers.iter().enumerate() {
        if !matches!(b.init, Init::Scratch) {
            live[i] = true;
            on(Event::Alloc(i as u32));
        }
    }
    on(Event::Settled);
    let (mut pending, dependents) = plan.waits();
    let mut queue: VecDeque<usize> = VecDeque::new();
    let ready =
        |i: usize, live: &mut Vec<bool>, q: &mut VecDeque<usize>, on: &mut dyn FnMut(Event)| {
            for &b in &arg_bufs[i] {
                if !live[b as usize] {
                    live[b as usize] = true;
                    on(Event::Alloc(b));
                }
            }
            q.push_back(i);
        };
    for (i, &p) in pending.iter().enumerate() {
        if p == 0 {
            ready(i, &mut live, &mut queue, &mut on);
        }
    }
    on(Event::Settled);
    while let Some(i) = queue.pop_front() {
        for &b in &arg_bufs[i] {
            refs[b as usize] -= 1;
            if refs[b as usize] == 0 && live[b as usize] {
                live[b as usize] = false;
                on(Event::Free(b));
            }
        }
        for &d in &dependents[i] {
            pending[d] -= 1;
            if pending[d] == 0 {
                ready(d, &mut live, &mut queue, &mut on);
            }
        }
        on(Event::Settled);
    }
}

fn snapshot(live: &[bool]) -> Vec<u32> {
    (0..live.len() as u32)
        .filter(|&b| live[b as usize])
        .collect()
}

/// What a buffer holds, for messages: the source, sink or first task that uses it.
pub fn buffer_name(plan: &Plan, b: u32) -> String {
    if let Some(s) = plan.sources.iter().find(|s| s.buffer == b) {
        return format!("source @{}", s.name);
    }
    if let Some(s) = plan.sinks.iter().find(|s| s.view.buffer == b) {
        return format!("sink @{}", s.name);
    }
    if let Some(t) = plan
        .tasks
        .iter()
        .find(|t| t.args.iter().any(|a| a.buffer == b))
    {
        return format!("a buffer of `{}`", t.name);
    }
    format!("buffer {b}")
}

/// The memory this process may use, smallest first: `(bytes, where the limit comes from)`.
pub fn limits(max_memory: Option<u64>) -> Vec<(u64, String)> {
    let mut v = Vec::new();
    if let Some(m) = max_memory {
        v.push((m, "--max-memory".to_string()));
    }
    if let Some(m) = cgroup_room() {
        v.push((m, "the cgroup's memory.max".to_string()));
    }
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into `rl`.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut rl) } == 0
        && rl.rlim_cur != libc::RLIM_INFINITY
    {
        let used = vm_size().unwrap_or(0);
        v.push((
            rl.rlim_cur.saturating_sub(used),
            "the address-space limit (RLIMIT_AS, ulimit -v), less what is mapped already"
                .to_string(),
        ));
    }
    if let Some(m) = meminfo("MemAvailable:") {
        v.push((m, "the available memory (MemAvailable)".to_string()));
    }
    v.sort_by_key(|l| l.0);
    v
}

/// `memory.max - memory.current` of this process's cgroup (v2), if limited.
fn cgroup_room() -> Option<u64> {
    let cg = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = cg.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = std::path::Path::new("/sys/fs/cgroup").join(rel.trim_start_matches('/'));
    let max: u64 = std::fs::read_to_string(dir.join("memory.max"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let cur: u64 = std::fs::read_to_string(dir.join("memory.current"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    Some(max.saturating_sub(cur))
}

fn vm_size() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().next()?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * page.max(4096) as u64)
}

fn meminfo(key: &str) -> Option<u64> {
    kb_field("/proc/meminfo", key)
}

/// The process's resident-set high-water mark (`VmHWM`): everything it touched, the program,
/// its libraries and the allocator's slack included; `None` where `/proc` does not say.
pub fn resident_peak() -> Option<u64> {
    kb_field("/proc/self/status", "VmHWM:")
}

/// The process's resident set now (`VmRSS`); `None` where `/proc` does not say.
pub fn resident_now() -> Option<u64> {
    kb_field("/proc/self/status", "VmRSS:")
}

/// The `KEY N kB` line of `file`, in bytes.
fn kb_field(file: &str, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(file).ok()?;
    let kb: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix(key))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// Bytes per worker thread beyond the buffers: its stack and alternate signal stack, the
/// allocator's arena, and the staging writer's buffer.
const PER_THREAD: u64 = 16 << 20;

/// What a process holds besides its plan's buffers: its inputs as read and (a rank of a
/// distributed job) the messages it sends and receives.
#[derive(Clone, Copy, Debug, Default)]
pub struct Held {
    pub inputs: u64,
    pub messages: u64,
}

/// Errors when running `plan` on `threads` workers, holding `held` besides its buffers, needs
/// more memory than the smallest of [`limits`]; the message names the biggest buffers (and
/// the messages a rank of a distributed job holds, when there are any).
pub fn check(
    plan: &Plan,
    held: Held,
    threads: usize,
    max_memory: Option<u64>,
) -> Result<u64, String> {
    let (buffers, live) = peak(plan);
    let need = buffers
        .saturating_add(held.inputs)
        .saturating_add(held.messages)
        .saturating_add(PER_THREAD.saturating_mul(threads as u64));
    let Some((room, from)) = limits(max_memory).into_iter().next() else {
        return Ok(need);
    };
    if need <= room {
        return Ok(need);
    }
    let mut big: Vec<u32> = live;
    big.sort_by_key(|&b| std::cmp::Reverse(plan.buffers[b as usize].bytes));
    let names: Vec<String> = big
        .iter()
        .take(3)
        .map(|&b| {
            format!(
                "{} ({})",
                buffer_name(plan, b),
                human_bytes(plan.buffers[b as usize].bytes)
            )
        })
        .collect();
    // A rank of a distributed job reads its inputs into its buffers: no inputs beside them.
    let beside = |bytes: u64, what: &str| match bytes {
        0 => String::new(),
        b => format!(", {} of {what}", human_bytes(b)),
    };
    let (inputs, messages) = (
        beside(held.inputs, "inputs"),
        beside(held.messages, "messages"),
    );
    Err(format!(
        "graph @{} needs {} of memory at its peak ({} of buffers{inputs}{messages}), more than the {} that {from} allows; its biggest buffers then: {}",
        plan.graph,
        human_bytes(need),
        human_bytes(buffers),
        human_bytes(room),
        names.join(", ")
    ))
}

/// `1.5 GiB`, `12.0 MiB`, `3.0 KiB`, `17 B`.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (u, name) in UNITS {
        if b >= u {
            return format!("{:.1} {name}", b as f64 / u as f64);
        }
    }
    format!("{b} B")
}

/// Parses `--max-memory` values: bytes, or a number with `K`/`M`/`G`/`T` (powers of 1024, with
/// or without `iB`/`B`), e.g. `512MiB`, `8G`, `1.5GiB`.
pub fn parse_bytes(s: &str) -> Option<u64> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let num: f64 = num.parse().ok()?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1u64,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return None,
    };
    let v = num * scale as f64;
    (v.is_finite() && v >= 0.0 && v < u64::MAX as f64).then_some(v as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_byte_sizes() {
        assert_eq!(parse_bytes("512"), Some(512));
        assert_eq!(parse_bytes("8GiB"), Some(8 << 30));
        assert_eq!(parse_bytes("1.5G"), Some(3 << 29));
        assert_eq!(parse_bytes("64 MB"), Some(64 << 20));
        assert_eq!(parse_bytes("lots"), None);
        assert_eq!(parse_bytes("5X"), None);
    }

    #[test]
    fn formats_byte_sizes() {
        assert_eq!(human_bytes(17), "17 B");
        assert_eq!(human_bytes(3 << 10), "3.0 KiB");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
    }
}
