//! `hlatc plan --plot`: every layout that fits, its predicted throughput
//! against its memory per rank, the best one marked. Drawn as the loss
//! curves are ([`crate::plot`]): the same font, palette and whole-or-nothing
//! write.

use super::search::Plan;
use crate::plot::{encode_png, padded_range, register_font, PlotError, FONT, PALETTE};
use plotters::prelude::*;
use std::path::Path;

const WIDTH: u32 = 960;
const HEIGHT: u32 = 600;
const GIB: f64 = (1u64 << 30) as f64;

/// Draws `plan`'s layouts that fit and writes the PNG to `path`.
pub fn chart_to_file(plan: &Plan, path: &Path) -> Result<(), PlotError> {
    let rgb = render(plan)?;
    let png = encode_png(&rgb, WIDTH, HEIGHT)?;
    hlatc_runtime::atomic_file::write_atomic(path, &png).map_err(|source| PlotError::Io {
        path: path.display().to_string(),
        source,
    })
}

/// Each layout that fits as (memory per rank in GiB, sequences per
/// second), the best first.
fn points(plan: &Plan) -> Vec<(f64, f64)> {
    plan.candidates
        .iter()
        .filter(|c| c.fits)
        .map(|c| (c.memory_per_rank as f64 / GIB, c.seq_per_s))
        .collect()
}

/// The chart's axes, `(x0, x1)` and `(y0, y1)`: the points' ranges with a
/// margin, from zero at the least (memory and throughput are never
/// negative, even around one point).
// Public for the crate's tests (tests/it/plan.rs).
#[doc(hidden)]
pub fn axes(plan: &Plan) -> ((f64, f64), (f64, f64)) {
    let points = points(plan);
    let from_zero = |(lo, hi): (f64, f64)| (lo.max(0.0), hi);
    (
        from_zero(padded_range(points.iter().map(|p| p.0), false)),
        from_zero(padded_range(points.iter().map(|p| p.1), false)),
    )
}

/// Height of the strip under the chart that holds its legend, so the
/// legend never covers a point.
const LEGEND_HEIGHT: u32 = 36;

fn render(plan: &Plan) -> Result<Vec<u8>, PlotError> {
    register_font()?;
    let points = points(plan);
    let Some(&best) = points.first() else {
        return Err(PlotError::Empty(
            "no layout fits, so none can be drawn".into(),
        ));
    };
    let draw = |e: &dyn std::fmt::Display| PlotError::Draw(e.to_string());
    let mut buf = vec![0u8; WIDTH as usize * HEIGHT as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut buf, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| draw(&e))?;
        let (upper, legend) = root.split_vertically(HEIGHT - LEGEND_HEIGHT);
        let ((x0, x1), (y0, y1)) = axes(plan);
        let title = format!(
            "{} on {} x {}: {} layouts that fit",
            plan.model,
            plan.nodes,
            plan.instance,
            points.len()
        );
        let mut chart = ChartBuilder::on(&upper)
            .caption(title, (FONT, 22))
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(72)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(|e| draw(&e))?;
        chart
            .configure_mesh()
            .x_desc("memory per rank (GiB)")
            .y_desc("predicted sequences per second")
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 16))
            .light_line_style(WHITE)
            .draw()
            .map_err(|e| draw(&e))?;
        let dot = ShapeStyle::from(&PALETTE[0]).filled();
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 4, dot)))
            .map_err(|e| draw(&e))?;
        let mark = ShapeStyle::from(&PALETTE[1]).stroke_width(3);
        chart
            .draw_series(std::iter::once(Circle::new(best, 10, mark)))
            .map_err(|e| draw(&e))?;
        // The legend under the chart, a marker and its words each.
        let y = (LEGEND_HEIGHT / 2) as i32;
        let entries = [
            (
                28,
                Circle::new((28, y), 4, dot),
                "a layout that fits".to_string(),
            ),
            (
                238,
                Circle::new((238, y), 6, mark),
                format!("best: {}", plan.candidates[0].layout),
            ),
        ];
        for (x, marker, words) in entries {
            legend.draw(&marker).map_err(|e| draw(&e))?;
            legend
                .draw(&Text::new(words, (x + 14, y - 8), (FONT, 14)))
                .map_err(|e| draw(&e))?;
        }
        root.present().map_err(|e| draw(&e))?;
    }
    Ok(buf)
}
