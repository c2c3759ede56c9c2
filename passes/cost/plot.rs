//! The frontier as an SVG plot (plotters, SVG backend): for each graph, two panels side by
//! side, estimated time against peak memory per node and time against bytes moved between
//! nodes. Every frontier point is a dot; the line joins the points that are also Pareto-optimal
//! in that 2-D projection (the frontier has four objectives, so the other dots lie above it).
//! The chosen plan is ringed. Text only: the caller writes the file.

use super::pareto::Point;
use plotters::prelude::*;

/// One graph's frontier and the chosen point, for [`frontier_svg`].
pub struct GraphFrontier<'a> {
    pub graph: &'a str,
    pub nodes: usize,
    pub front: &'a [Point],
    pub chosen: Option<&'a Point>,
}

const PANEL: (u32, u32) = (480, 360);

/// The 2-D non-dominated subset of `pts` (minimise both), sorted by x.
fn staircase(pts: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut s: Vec<(f64, f64)> = pts.to_vec();
    s.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let mut out: Vec<(f64, f64)> = Vec::new();
    for p in s {
        if out.last().is_none_or(|l| p.1 < l.1) {
            out.push(p);
        }
    }
    out
}

/// A range around `lo..hi` with a margin, never empty.
fn padded(lo: f64, hi: f64) -> std::ops::Range<f64> {
    let span = (hi - lo).abs().max(hi.abs() * 1e-3).max(1e-12);
    (lo - 0.08 * span)..(hi + 0.08 * span)
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    xdesc: &str,
    x: usize,
    g: &GraphFrontier,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let pts: Vec<(f64, f64)> = g.front.iter().map(|p| (p.obj[x], p.obj[0])).collect();
    let (x0, x1) = pts
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (y0, y1) = pts
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    let (x0, x1, y0, y1) = if pts.is_empty() {
        (0.0, 1.0, 0.0, 1.0)
    } else {
        (x0, x1, y0, y1)
    };
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(padded(x0, x1), padded(y0 * 1e3, y1 * 1e3))
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc(xdesc)
        .y_desc("time (ms)")
        .x_labels(5)
        .y_labels(6)
        .x_label_formatter(&|v| format!("{v:.2e}"))
        .y_label_formatter(&|v| format!("{v:.3}"))
        .draw()
        .map_err(e)?;
    chart
        .draw_series(LineSeries::new(
            staircase(&pts).into_iter().map(|(a, b)| (a, b * 1e3)),
            BLUE.stroke_width(1),
        ))
        .map_err(e)?;
    chart
        .draw_series(PointSeries::of_element(
            pts.iter().map(|&(a, b)| (a, b * 1e3)),
            4,
            RED.filled(),
            &|c, s, st| EmptyElement::at(c) + Circle::new((0, 0), s, st),
        ))
        .map_err(e)?;
    if let Some(c) = g.chosen {
        chart
            .draw_series(std::iter::once(Circle::new(
                (c.obj[x], c.obj[0] * 1e3),
                8,
                BLACK.stroke_width(2),
            )))
            .map_err(e)?;
    }
    Ok(())
}

/// The SVG text of the frontier plots of `graphs` (one row of two panels per graph).
pub fn frontier_svg(graphs: &[GraphFrontier]) -> Result<String, String> {
    let mut out = String::new();
    {
        let rows = graphs.len().max(1) as u32;
        let root =
            SVGBackend::with_string(&mut out, (2 * PANEL.0, rows * PANEL.1)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let cells = root.split_evenly((rows as usize, 2));
        for (g, pair) in graphs.iter().zip(cells.chunks(2)) {
            let name = format!("@{} on {} nodes", g.graph, g.nodes);
            panel(
                &pair[0],
                &format!("{name}: time vs peak memory"),
                "peak memory per node (bytes)",
                3,
                g,
            )?;
            panel(
                &pair[1],
                &format!("{name}: time vs bytes moved"),
                "bytes moved between nodes",
                2,
                g,
            )?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}
