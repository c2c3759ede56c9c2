//! The executor's [`Report`] as text: the `--time` per-task table and the `--trace` JSON
//! (Chrome/Perfetto events, one track per worker thread).

use super::Report;
use crate::memory::human_bytes;
use std::fmt::Write as _;
use std::time::Duration;

impl Report {
    /// A per-task table: jobs, total and longest time, share of the run; then totals.
    pub fn time_summary(&self) -> String {
        let mut per: Vec<(usize, Duration, Duration)> =
            vec![(0, Duration::ZERO, Duration::ZERO); self.task_names.len()];
        for e in &self.events {
            let p = &mut per[e.task];
            p.0 += 1;
            p.1 += e.duration;
            p.2 = p.2.max(e.duration);
        }
        let busy: Duration = per.iter().map(|p| p.1).sum();
        let mut order: Vec<usize> = (0..per.len()).collect();
        order.sort_by(|&a, &b| per[b].1.cmp(&per[a].1));
        let width = self
            .task_names
            .iter()
            .map(|n| n.len())
            .max()
            .unwrap_or(4)
            .max(4);
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<width$}  {:>6}  {:>11}  {:>11}  {:>6}",
            "task", "chunks", "total ms", "max ms", "share"
        );
        for i in order {
            let (n, tot, max) = per[i];
            let share = if busy.is_zero() {
                0.0
            } else {
                100.0 * tot.as_secs_f64() / busy.as_secs_f64()
            };
            let _ = writeln!(
                s,
                "{:<width$}  {:>6}  {:>11.3}  {:>11.3}  {:>5.1}%",
                self.task_names[i],
                n,
                tot.as_secs_f64() * 1e3,
                max.as_secs_f64() * 1e3,
                share
            );
        }
        let _ = writeln!(
            s,
            "wall {:.3} ms on {} thread(s), busy {:.3} ms, {} page faults, peak memory {} (planned {})",
            self.wall.as_secs_f64() * 1e3,
            self.threads,
            busy.as_secs_f64() * 1e3,
            self.faults,
            human_bytes(self.peak_bytes),
            human_bytes(self.planned_bytes)
        );
        s
    }

    /// A Chrome/Perfetto trace (JSON): one track per worker thread, one slice per job.
    pub fn trace_json(&self) -> String {
        let mut s = String::from("{\"traceEvents\":[\n");
        let _ = write!(
            s,
            "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{{\"name\":\"tapc\"}}}}"
        );
        for w in 0..self.threads {
            let _ = write!(
                s,
                ",\n{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":{w},\"args\":{{\"name\":\"worker {w}\"}}}}"
            );
        }
        for e in &self.events {
            let _ = write!(
                s,
                ",\n{{\"name\":{},\"cat\":\"task\",\"ph\":\"X\",\"pid\":1,\"tid\":{},\"ts\":{:.3},\"dur\":{:.3},\"args\":{{\"task\":{}}}}}",
                json_string(&self.task_names[e.task]),
                e.worker,
                e.start.as_secs_f64() * 1e6,
                e.duration.as_secs_f64() * 1e6,
                e.task
            );
        }
        s.push_str("\n],\"displayTimeUnit\":\"ms\"}\n");
        s
    }
}

fn json_string(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}
