//! `hlatc plot`: training curves from metrics CSVs into a PNG.

use super::console::note;
use hlatc::metrics::{MetricsLog, Series};
use hlatc::plot::{plot_to_file, Curve, PlotOptions};
use hlatc::Error;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Draw loss curves (or another column) from one or more metrics files
/// into a PNG.
///
/// Each FILE is a CSV that `hlatc train --metrics` wrote
/// (`step,loss,grad_norm,learning_rate,held_out_loss`); each becomes one
/// line, named in the legend by its --label or else by its file name.
/// Text uses a font built into hlatc, so the picture is the same on every
/// machine.
///
/// Example, three precisions of the same run:
///   hlatc train --precision fp32 --metrics fp32.csv
///   hlatc train --precision bf16-mixed --metrics mixed.csv
///   hlatc plot fp32.csv mixed.csv --out loss.png --title "tiny, 100 steps"
#[derive(clap::Args)]
pub struct Args {
    /// Metrics files from `hlatc train --metrics`, a curve each
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Where to write the PNG
    #[arg(short, long, value_name = "FILE.png")]
    out: PathBuf,
    /// Legend names, one per FILE in order [default: each file's name]
    #[arg(long, value_name = "NAME")]
    label: Vec<String>,
    /// Which column to draw
    #[arg(long, default_value = "loss", value_parser = parse_series)]
    series: Series,
    /// The title above the plot [default: "<series> by step"]
    #[arg(long)]
    title: Option<String>,
    /// Logarithmic y axis
    #[arg(long)]
    log_y: bool,
    #[command(flatten)]
    size: SizeArgs,
}

/// The picture's size, shared by `plot` and `train --plot`.
#[derive(clap::Args, Clone, Copy)]
pub struct SizeArgs {
    /// Width of the PNG in pixels
    #[arg(long, default_value_t = 960, value_parser = clap::value_parser!(u32).range(200..=8192))]
    pub width: u32,
    /// Height of the PNG in pixels
    #[arg(long, default_value_t = 540, value_parser = clap::value_parser!(u32).range(150..=8192))]
    pub height: u32,
}

pub fn parse_series(s: &str) -> Result<Series, String> {
    Series::from_column(s).ok_or_else(|| {
        let names: Vec<&str> = Series::ALL.iter().map(|s| s.column()).collect();
        format!("unknown series `{s}`; expected one of {}", names.join(", "))
    })
}

/// The legend name of a file: its name without `.csv`.
fn default_label(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// Writes `curves` to `out` with `opts`, and says so.
pub fn write_plot(curves: &[Curve], opts: &PlotOptions, out: &Path) -> Result<(), Error> {
    plot_to_file(curves, opts, out).map_err(|source| Error::Plot {
        path: out.to_path_buf(),
        source,
    })?;
    note!(
        "wrote {} ({} curve{} of {}, {}x{})",
        out.display(),
        curves.len(),
        if curves.len() == 1 { "" } else { "s" },
        opts.series.column(),
        opts.width,
        opts.height
    )
}

pub fn main(a: Args) -> Result<ExitCode, Error> {
    if !a.label.is_empty() && a.label.len() != a.files.len() {
        return Err(Error::conflict(format!(
            "{} --label for {} files; give one per file, in order, or none",
            a.label.len(),
            a.files.len()
        )));
    }
    let logs = a
        .files
        .iter()
        .map(|f| MetricsLog::read(f).map_err(Error::from))
        .collect::<Result<Vec<_>, _>>()?;
    let curves: Vec<Curve> = logs
        .iter()
        .enumerate()
        .map(|(k, log)| Curve {
            label: a
                .label
                .get(k)
                .cloned()
                .unwrap_or_else(|| default_label(&a.files[k])),
            log,
        })
        .collect();
    let mut opts = PlotOptions::new(a.series);
    if let Some(t) = a.title {
        opts.title = t;
    }
    opts.log_y = a.log_y;
    opts.width = a.size.width;
    opts.height = a.size.height;
    write_plot(&curves, &opts, &a.out)?;
    Ok(ExitCode::SUCCESS)
}
