//! State that stays on the devices between runs: uploaded once, donated
//! to each run whose output aliases it, that output the next run's input;
//! lent buffers left as they were; arguments refused before a run handed
//! back whole.

use crate::common::*;
use hlatc_compiler::{formats::text, Literal};
use hlatc_runtime::{Arg, DeviceBuffer, ExecuteError, Program, RuntimeError};

/// `state + x` (aliasing the state) and `state * x`.
const ACCUMULATE: &str = "HloModule acc, input_output_alias={ {0}: (0, {}, may-alias) }\n\nENTRY main {\n  s = f32[4] parameter(0)\n  x = f32[4] parameter(1)\n  n = f32[4] add(s, x)\n  m = f32[4] multiply(s, x)\n  ROOT t = (f32[4], f32[4]) tuple(n, m)\n}\n";

fn compile(hlo: &str) -> Program {
    let m = text::parse_module(hlo).unwrap_or_else(|e| panic!("parse: {e}\n{hlo}"));
    runtime().compile(&m).unwrap_or_else(|e| panic!("{e}"))
}

fn host(b: &DeviceBuffer) -> Vec<f32> {
    b.to_literal().unwrap().to_f32_vec()
}

fn x(v: f32) -> Literal {
    f32s(&[4], &[v; 4])
}

#[test]
fn a_donated_state_carries_from_run_to_run_on_its_device() {
    let p = compile(ACCUMULATE);
    assert_eq!(p.aliases(), [(0, 0)]);
    let mut state = p.to_device(&f32s(&[4], &[1.0, 2.0, 3.0, 4.0]), 0).unwrap();
    for step in 1..=3 {
        let input = p.to_device(&x(10.0), 0).unwrap();
        let mut out = p
            .execute(vec![vec![Arg::Donated(state), Arg::Donated(input)]])
            .unwrap();
        let [new, product]: [DeviceBuffer; 2] = out.pop().unwrap().try_into().unwrap();
        let before = 10.0 * (step - 1) as f32;
        assert_eq!(
            host(&product),
            [1.0, 2.0, 3.0, 4.0].map(|v| (v + before) * 10.0)
        );
        state = new;
    }
    assert_eq!(host(&state), [31.0, 32.0, 33.0, 34.0]);
}

#[test]
fn a_lent_state_is_left_as_it_was() {
    let p = compile(ACCUMULATE);
    let state = p.to_device(&x(2.0), 0).unwrap();
    let input = p.to_device(&x(3.0), 0).unwrap();
    let out = p
        .execute(vec![vec![Arg::Lent(&state), Arg::Lent(&input)]])
        .unwrap();
    assert_eq!(host(&out[0][0]), [5.0; 4]);
    assert_eq!(host(&out[0][1]), [6.0; 4]);
    // The aliased output went to a buffer of its own.
    assert_eq!(host(&state), [2.0; 4]);
    assert_eq!(host(&input), [3.0; 4]);
}

/// What a refused run hands back: the error and the donated buffers.
fn refusal(e: ExecuteError<'_>) -> (RuntimeError, Vec<DeviceBuffer>) {
    match e {
        ExecuteError::Refused { error, args } => {
            let donated = args
                .into_iter()
                .flatten()
                .filter_map(|a| match a {
                    Arg::Donated(b) => Some(b),
                    Arg::Lent(_) => None,
                })
                .collect();
            (error, donated)
        }
        ExecuteError::Failed(e) => panic!("ran and failed: {e}"),
    }
}

#[test]
fn arguments_refused_before_the_run_come_back_whole() {
    let p = compile(ACCUMULATE);
    let state = p.to_device(&x(7.0), 0).unwrap();
    let wrong = p.to_device(&f32s(&[2], &[1.0, 2.0]), 0).unwrap();
    let (error, back) = refusal(
        p.execute(vec![vec![Arg::Donated(state), Arg::Donated(wrong)]])
            .unwrap_err(),
    );
    assert!(
        matches!(&error, RuntimeError::InputMismatch { index: 1, name, .. } if name == "x"),
        "{error}"
    );
    assert_eq!(back.len(), 2);
    assert_eq!(host(&back[0]), [7.0; 4]);

    // A buffer on another device than its replica's.
    let state = back.into_iter().next().unwrap();
    let elsewhere = p.to_device(&x(1.0), 1).unwrap();
    let (error, back) = refusal(
        p.execute(vec![vec![Arg::Donated(state), Arg::Donated(elsewhere)]])
            .unwrap_err(),
    );
    assert!(
        matches!(
            error,
            RuntimeError::ArgumentDevice {
                replica: 0,
                index: 1,
                device: 1,
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(host(&back[0]), [7.0; 4]);
}

#[test]
fn each_replica_carries_its_own_state_on_its_device() {
    let hlo = "HloModule acc, replica_count=2, input_output_alias={ {0}: (0, {}, may-alias) }\n\nsum {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\nENTRY main {\n  s = f32[4] parameter(0)\n  x = f32[4] parameter(1)\n  g = f32[4] all-reduce(x), replica_groups={}, to_apply=sum\n  n = f32[4] add(s, g)\n  ROOT t = (f32[4], f32[4]) tuple(n, g)\n}\n";
    let p = compile(hlo);
    let mut states: Vec<DeviceBuffer> = (0..2)
        .map(|r| p.to_device(&x(100.0 * r as f32), r).unwrap())
        .collect();
    for _ in 0..2 {
        let args = states
            .into_iter()
            .enumerate()
            .map(|(r, s)| {
                let input = p.to_device(&x(1.0 + r as f32), r).unwrap();
                vec![Arg::Donated(s), Arg::Donated(input)]
            })
            .collect();
        let out = p.execute(args).unwrap();
        for (r, list) in out.iter().enumerate() {
            assert_eq!(list[0].replica(), r);
            assert_eq!(host(&list[1]), [3.0; 4]);
        }
        states = out
            .into_iter()
            .map(|l| l.into_iter().next().unwrap())
            .collect();
    }
    assert_eq!(host(&states[0]), [6.0; 4]);
    assert_eq!(host(&states[1]), [106.0; 4]);
}
