//! Training curves drawn to a PNG: one line per run, from the metrics that
//! `hlatc train --metrics` writes.
//!
//! Text is drawn with DejaVu Sans compiled into the binary, so a plot looks
//! the same on a machine without fonts, and the same inputs give the same
//! bytes. The file is written whole or not at all.

use crate::metrics::{MetricsLog, Series};
use plotters::prelude::*;
use std::path::Path;

/// One run's curve and the name its legend entry shows.
pub struct Curve<'a> {
    pub label: String,
    pub log: &'a MetricsLog,
}

/// How the curves are drawn.
#[derive(Clone, Debug)]
pub struct PlotOptions {
    pub series: Series,
    pub title: String,
    /// Logarithmic y axis (every value must be positive).
    pub log_y: bool,
    pub width: u32,
    pub height: u32,
}

impl PlotOptions {
    pub fn new(series: Series) -> Self {
        PlotOptions {
            series,
            title: format!("{} by step", series.column()),
            log_y: false,
            width: 960,
            height: 540,
        }
    }
}

#[derive(Debug, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum PlotError {
    #[error("nothing to plot: {0}")]
    Empty(String),
    #[error("{label}: {column} is {value} at step {step}; {why}")]
    BadValue {
        label: String,
        column: &'static str,
        value: f64,
        step: f64,
        why: &'static str,
    },
    #[error("drawing the plot: {0}")]
    Draw(String),
    #[error("encoding the PNG: {0}")]
    Encode(#[from] png::EncodingError),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

/// Distinct, print-safe line colours (Okabe and Ito's palette), in order.
pub(crate) const PALETTE: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
];

/// The colour of the `k`-th curve.
pub fn curve_color(k: usize) -> (u8, u8, u8) {
    let c = PALETTE[k % PALETTE.len()];
    (c.0, c.1, c.2)
}

pub(crate) const FONT: &str = "sans-serif";

pub(crate) fn register_font() -> Result<(), PlotError> {
    static REGISTERED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular()).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(PlotError::Draw(
            "the embedded DejaVu Sans font did not load".into(),
        ))
    }
}

/// The curves' points, checked: finite, and positive on a log axis.
fn checked_points(curves: &[Curve], opts: &PlotOptions) -> Result<Vec<Vec<(f64, f64)>>, PlotError> {
    let column = opts.series.column();
    let mut all = Vec::with_capacity(curves.len());
    for c in curves {
        let points = c.log.points(opts.series);
        for &(step, value) in &points {
            let why = if !value.is_finite() {
                Some("only finite values can be drawn")
            } else if opts.log_y && value <= 0.0 {
                Some("a logarithmic axis needs positive values")
            } else {
                None
            };
            if let Some(why) = why {
                return Err(PlotError::BadValue {
                    label: c.label.clone(),
                    column,
                    value,
                    step,
                    why,
                });
            }
        }
        all.push(points);
    }
    if all.iter().all(|p| p.is_empty()) {
        return Err(PlotError::Empty(format!("no step has a {column} value")));
    }
    Ok(all)
}

/// `(lo, hi)` of `values` with a margin, never empty.
pub(crate) fn padded_range(values: impl Iterator<Item = f64>, log: bool) -> (f64, f64) {
    let (mut lo, mut hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if log {
        let (l, h) = (lo.log10(), hi.log10());
        let pad = ((h - l) * 0.05).max(0.05);
        return (10f64.powf(l - pad), 10f64.powf(h + pad));
    }
    if hi - lo < f64::EPSILON * hi.abs().max(1.0) {
        lo -= 0.5 * lo.abs().max(1e-3);
        hi += 0.5 * hi.abs().max(1e-3);
    }
    let pad = (hi - lo) * 0.05;
    (lo - pad, hi + pad)
}

/// Draws `curves` into an RGB buffer of `opts.width` x `opts.height`.
pub fn render(curves: &[Curve], opts: &PlotOptions) -> Result<Vec<u8>, PlotError> {
    register_font()?;
    let points = checked_points(curves, opts)?;
    let (w, h) = (opts.width, opts.height);
    let mut buf = vec![0u8; w as usize * h as usize * 3];
    let draw = |e: &dyn std::fmt::Display| PlotError::Draw(e.to_string());
    {
        let root = BitMapBackend::with_buffer(&mut buf, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| draw(&e))?;
        let (x0, x1) = padded_range(points.iter().flatten().map(|p| p.0), false);
        let (y0, y1) = padded_range(points.iter().flatten().map(|p| p.1), opts.log_y);
        let mut chart = ChartBuilder::on(&root);
        chart
            .caption(&opts.title, (FONT, 24))
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(72);
        let style = |k: usize| ShapeStyle::from(&PALETTE[k % PALETTE.len()]).stroke_width(2);
        let x_desc = "step";
        let y_desc = opts.series.column();
        macro_rules! draw_chart {
            ($chart:expr) => {{
                let mut chart = $chart;
                chart
                    .configure_mesh()
                    .x_desc(x_desc)
                    .x_label_formatter(&|x| format!("{x:.0}"))
                    .y_desc(y_desc)
                    .label_style((FONT, 14))
                    .light_line_style(WHITE)
                    .axis_desc_style((FONT, 16))
                    .draw()
                    .map_err(|e| draw(&e))?;
                for (k, (curve, pts)) in curves.iter().zip(&points).enumerate() {
                    let s = style(k);
                    chart
                        .draw_series(LineSeries::new(pts.iter().copied(), s))
                        .map_err(|e| draw(&e))?
                        .label(curve.label.clone())
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], s));
                }
                chart
                    .configure_series_labels()
                    .position(SeriesLabelPosition::UpperRight)
                    .label_font((FONT, 15))
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK)
                    .draw()
                    .map_err(|e| draw(&e))?;
            }};
        }
        if opts.log_y {
            draw_chart!(chart
                .build_cartesian_2d(x0..x1, (y0..y1).log_scale())
                .map_err(|e| draw(&e))?);
        } else {
            draw_chart!(chart
                .build_cartesian_2d(x0..x1, y0..y1)
                .map_err(|e| draw(&e))?);
        }
        root.present().map_err(|e| draw(&e))?;
    }
    Ok(buf)
}

/// `rgb` (width x height, 8-bit RGB) as PNG bytes.
pub fn encode_png(rgb: &[u8], width: u32, height: u32) -> Result<Vec<u8>, PlotError> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, width, height);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        enc.set_compression(png::Compression::Best);
        enc.set_adaptive_filter(png::AdaptiveFilterType::Adaptive);
        let mut w = enc.write_header()?;
        w.write_image_data(rgb)?;
    }
    Ok(out)
}

/// Draws `curves` and writes the PNG to `path`, whole or not at all.
pub fn plot_to_file(curves: &[Curve], opts: &PlotOptions, path: &Path) -> Result<(), PlotError> {
    let rgb = render(curves, opts)?;
    let png = encode_png(&rgb, opts.width, opts.height)?;
    hlatc_runtime::atomic_file::write_atomic(path, &png).map_err(|source| PlotError::Io {
        path: path.display().to_string(),
        source,
    })
}
