//! A run's metrics: the log (`metrics.csv`) written and read back
//! exactly, and a malformed one refused naming its line and column; and
//! its plot (`hlatc plot` and `train --plot`): the PNG holds the curves
//! where the numbers put them, the same inputs give the same bytes, and
//! bad input is refused by file, line and column with nothing written.

use hlatc::metrics::{MetricsLog, Series, StepMetrics};
use hlatc::plot::{curve_color, encode_png, render, Curve, PlotError, PlotOptions};
use std::path::Path;
use std::process::Command;

fn step(step: u64, loss: f64, held_out_loss: Option<f64>) -> StepMetrics {
    StepMetrics {
        step,
        loss,
        grad_norm: 0.5,
        learning_rate: 1e-3,
        held_out_loss,
    }
}

#[test]
fn csv_round_trips_exactly() {
    let mut log = MetricsLog::default();
    log.push(step(1, 4.158_883_083_359_672, None));
    log.push(step(2, 0.1 + 0.2, Some(3.25)));
    let text = log.to_csv();
    assert!(text.starts_with("step,loss,grad_norm,learning_rate,held_out_loss\n"));
    assert_eq!(MetricsLog::parse(&text, "m.csv").unwrap(), log);
    assert_eq!(log.points(Series::HeldOutLoss), vec![(2.0, 3.25)]);
    assert_eq!(log.points(Series::Loss).len(), 2);
}

#[test]
fn errors_name_line_and_column() {
    let bad =
        "step,loss,grad_norm,learning_rate,held_out_loss\n1,4.1,0.5,1e-3,\n2,oops,0.5,1e-3,\n";
    let e = MetricsLog::parse(bad, "m.csv").unwrap_err().to_string();
    assert_eq!(e, "m.csv:3:3: loss `oops` is not a number");
    let e = MetricsLog::parse("step,loss,grad,learning_rate,held_out_loss\n", "m.csv")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("m.csv:1:11: column 3 is `grad`, expected `grad_norm`"),
        "{e}"
    );
    let e = MetricsLog::parse("step,loss\n", "m.csv")
        .unwrap_err()
        .to_string();
    assert_eq!(e, "m.csv:1:10: missing column `grad_norm`");
    let e = MetricsLog::parse(
        "step,loss,grad_norm,learning_rate,held_out_loss\n2,1,1,1,\n2,1,1,1,\n",
        "m.csv",
    )
    .unwrap_err()
    .to_string();
    assert_eq!(e, "m.csv:3:1: step 2 does not follow step 2");
    let e = MetricsLog::parse(
        "step,loss,grad_norm,learning_rate,held_out_loss\n1,2\n",
        "m.csv",
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("m.csv:2:1: 2 fields, expected 5"), "{e}");
    assert!(MetricsLog::parse("", "m.csv").is_err());
}

fn log(values: impl Iterator<Item = f64>) -> MetricsLog {
    MetricsLog {
        steps: values
            .enumerate()
            .map(|(k, loss)| StepMetrics {
                step: k as u64 + 1,
                loss,
                grad_norm: 1.0,
                learning_rate: 1e-3,
                held_out_loss: None,
            })
            .collect(),
    }
}

/// The pixels of colour `c`, as (x, y).
fn pixels_of(rgb: &[u8], width: u32, c: (u8, u8, u8)) -> Vec<(u32, u32)> {
    rgb.chunks_exact(3)
        .enumerate()
        .filter(|(_, p)| (p[0], p[1], p[2]) == c)
        .map(|(i, _)| (i as u32 % width, i as u32 / width))
        .collect()
}

fn mean_y(points: &[(u32, u32)], keep: impl Fn(u32) -> bool) -> f64 {
    let ys: Vec<f64> = points
        .iter()
        .filter(|p| keep(p.0))
        .map(|p| p.1 as f64)
        .collect();
    assert!(!ys.is_empty(), "no pixels in that part of the plot");
    ys.iter().sum::<f64>() / ys.len() as f64
}

#[test]
fn curves_land_where_their_values_put_them() {
    // One run falls from 4 to 1; the other stays at 3.5.
    let falling = log((0..100).map(|k| 4.0 - 3.0 * k as f64 / 99.0));
    let flat = log((0..100).map(|_| 3.5));
    let curves = [
        Curve {
            label: "falling".into(),
            log: &falling,
        },
        Curve {
            label: "flat".into(),
            log: &flat,
        },
    ];
    let opts = PlotOptions::new(Series::Loss);
    let rgb = render(&curves, &opts).unwrap();
    assert_eq!(rgb.len(), (opts.width * opts.height * 3) as usize);
    let (w, h) = (opts.width, opts.height);
    let white = rgb
        .chunks_exact(3)
        .filter(|p| p == &[255, 255, 255])
        .count();
    assert!(white > (w * h / 2) as usize, "the background is white");

    let a = pixels_of(&rgb, w, curve_color(0));
    let b = pixels_of(&rgb, w, curve_color(1));
    assert!(a.len() > 300 && b.len() > 300, "both lines are drawn");
    // Screen y grows downwards: the falling curve starts high (small y)
    // and ends low; the flat one keeps one height across the plot.
    let left = |x: u32| x < w / 3;
    let right = |x: u32| x > 2 * w / 3 && x < w - 200; // clear of the legend
    assert!(mean_y(&a, left) + 100.0 < mean_y(&a, right));
    let (bl, br) = (mean_y(&b, left), mean_y(&b, right));
    assert!((bl - br).abs() <= 2.0, "flat stays flat: {bl} vs {br}");
    // 3.5 lies between the falling curve's ends (4 and 1).
    assert!(mean_y(&a, left) < bl && bl < mean_y(&a, right));

    // The same curves give the same bytes, and a valid PNG of that size.
    assert_eq!(render(&curves, &opts).unwrap(), rgb);
    let png = encode_png(&rgb, w, h).unwrap();
    let decoder = png::Decoder::new(png.as_slice());
    let reader = decoder.read_info().unwrap();
    assert_eq!((reader.info().width, reader.info().height), (w, h));
}

#[test]
fn bad_values_are_refused_by_step() {
    let with_nan = log([2.0, f64::NAN, 1.0].into_iter());
    let curves = [Curve {
        label: "run".into(),
        log: &with_nan,
    }];
    let e = render(&curves, &PlotOptions::new(Series::Loss))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "run: loss is NaN at step 2; only finite values can be drawn"
    );

    let with_zero = log([2.0, 0.0].into_iter());
    let curves = [Curve {
        label: "run".into(),
        log: &with_zero,
    }];
    let mut opts = PlotOptions::new(Series::Loss);
    opts.log_y = true;
    let e = render(&curves, &opts).unwrap_err();
    assert!(
        matches!(e, PlotError::BadValue { value, .. } if value <= 0.0),
        "{e}"
    );

    let e = render(&curves, &PlotOptions::new(Series::HeldOutLoss))
        .unwrap_err()
        .to_string();
    assert_eq!(e, "nothing to plot: no step has a held_out_loss value");
}

fn hlatc(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hlatc"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn the_cli_plots_files_and_refuses_bad_ones_without_writing() {
    let dir = tempdir();
    let good = dir.join("fp32.csv");
    std::fs::write(&good, log((0..20).map(|k| 4.0 / (1.0 + k as f64))).to_csv()).unwrap();
    let bad = dir.join("bad.csv");
    std::fs::write(
        &bad,
        "step,loss,grad_norm,learning_rate,held_out_loss\n1,4.0,1,1e-3,\n2,4.x,1,1e-3,\n",
    )
    .unwrap();
    let out = dir.join("loss.png");
    let s = |p: &Path| p.to_str().unwrap().to_string();

    let r = hlatc(&["plot", &s(&good), &s(&bad), "--out", &s(&out)]);
    assert!(!r.status.success());
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("bad.csv:3:3: loss `4.x` is not a number"),
        "{err}"
    );
    assert!(!out.exists(), "nothing is written on an error");

    let r = hlatc(&[
        "plot",
        &s(&good),
        "--label",
        "a",
        "--label",
        "b",
        "--out",
        &s(&out),
    ]);
    assert_eq!(crate::support::error_code(&r), "usage.conflict");

    let r = hlatc(&["plot", &s(&good), "--out", &s(&out), "--series", "loss_ema"]);
    assert_eq!(
        crate::support::error_code(&r),
        "cli.value_validation.series"
    );

    let r = hlatc(&[
        "plot",
        &s(&good),
        "--out",
        &s(&out),
        "--log-y",
        "--width",
        "640",
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let bytes = std::fs::read(&out).unwrap();
    let reader = png::Decoder::new(bytes.as_slice()).read_info().unwrap();
    assert_eq!((reader.info().width, reader.info().height), (640, 540));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn train_plots_its_own_run() {
    let dir = tempdir();
    let png_path = dir.join("run.png");
    let csv = dir.join("run.csv");
    let r = hlatc(&[
        "train",
        "--steps",
        "8",
        "--precision",
        "fp32",
        "--metrics",
        csv.to_str().unwrap(),
        "--plot",
        png_path.to_str().unwrap(),
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let m = MetricsLog::read(&csv).unwrap();
    assert_eq!(m.steps.len(), 8);
    let bytes = std::fs::read(&png_path).unwrap();
    let mut reader = png::Decoder::new(bytes.as_slice()).read_info().unwrap();
    let mut rgb = vec![0; reader.output_buffer_size()];
    reader.next_frame(&mut rgb).unwrap();
    assert!(pixels_of(&rgb, 960, curve_color(0)).len() > 100);
    std::fs::remove_dir_all(&dir).unwrap();
}

fn tempdir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "hlatc-plot-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}
