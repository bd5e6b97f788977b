//! The metrics log (`metrics.csv`): written and read back exactly, and a
//! malformed one refused naming its line and column.

use hlatc::metrics::{MetricsLog, Series, StepMetrics};

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
