//! Every input checked where it enters: a bundle's inputs made up from
//! their roles when not given, and token, target and segment ids checked
//! against the vocabulary and the packing before a step runs, in `run`, in
//! `train` and in the library.

use crate::support::{hlatc, stderr, stdout};
use hlatc::bundle::OpenedBundle;
use hlatc::compiler::ElementType;
use hlatc::Literal;
use std::path::PathBuf;
use std::process::Output;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hlatc-inputs-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// A `tiny` bundle (vocabulary 64) compiled with `extra` flags into `name`.
fn bundle(name: &str, extra: &[&str]) -> PathBuf {
    let dir = tmp(name);
    let mut args = vec!["compile", "--model", "tiny", "--out", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = hlatc(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    dir
}

/// The value printed for output `name` by `hlatc run`.
fn printed_scalar(out: &str, name: &str) -> f64 {
    let line = out
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no {name} in {out}"));
    line.rsplit('=').next().unwrap().trim().parse().unwrap()
}

fn ids(rows: &[&[i64]]) -> Literal {
    let bytes: Vec<u8> = rows
        .iter()
        .flat_map(|r| r.iter())
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let dims = vec![rows.len() as i64, rows[0].len() as i64];
    Literal::from_bytes(ElementType::S64, dims, bytes).unwrap()
}

fn batch_file(name: &str, tensors: &[(&str, Literal)]) -> PathBuf {
    let path = tmp(name);
    let named: Vec<(String, Literal)> = tensors
        .iter()
        .map(|(n, l)| (n.to_string(), l.clone()))
        .collect();
    hlatc::runtime::write_safetensors(&path, &named).unwrap();
    path
}

/// The default bundle (for Neuron) runs with nothing given: parameters
/// initialized as the model is, zero moments, a synthetic batch. The loss
/// is that of an untrained model and nothing is NaN (the generic uniform
/// fill made half of every update NaN).
#[test]
fn a_bundle_run_without_inputs_starts_as_training_does() {
    let dir = bundle("default", &["--seq-len", "8"]);
    let o = hlatc(&["run", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(
        err.contains("no --inputs: every input from its role"),
        "{err}"
    );
    assert!(
        err.contains("Neuron custom calls as the same math"),
        "{err}"
    );
    let uniform = 64f64.ln();
    let loss = printed_scalar(&out, "loss");
    assert!((loss - uniform).abs() < 0.1 * uniform, "loss {loss}");
    assert!(!out.contains("non-finite") && !out.contains("NaN"), "{out}");
    assert!(printed_scalar(&out, "grad_norm") > 0.0);

    // The same through the library.
    let b = OpenedBundle::open(&dir).unwrap();
    let (module, lowered) = b.cpu_module().unwrap();
    assert!(lowered);
    let rt = hlatc::runtime::Runtime::shared().unwrap();
    let program = rt.compile(&module).unwrap();
    let inputs = b.initial_inputs(0).unwrap();
    assert_eq!(inputs.len(), 1);
    b.check_batch(&inputs[0]).unwrap();
    let outputs = program.run(&inputs[0]).unwrap();
    let names: Vec<&str> = b.outputs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names[0], "loss");
    let lib_loss = outputs[0].to_f64_vec()[0];
    assert_eq!(
        lib_loss, loss as f32 as f64,
        "the CLI and the library agree"
    );
    for (name, o) in names.iter().zip(&outputs) {
        assert!(
            o.to_f64_vec().iter().all(|x| x.is_finite()),
            "{name} has a non-finite value"
        );
    }
}

/// Given only the batch, the run makes up the state from its roles and
/// says which inputs it made up; the batch it was given is used.
#[test]
fn missing_bundle_inputs_are_made_up_by_role_and_named() {
    let dir = bundle("partial", &["--target", "cpu", "--seq-len", "4"]);
    let d = dir.to_str().unwrap();
    let batch = batch_file(
        "batch.safetensors",
        &[
            ("tokens", ids(&[&[1, 2, 3, 4]])),
            ("targets", ids(&[&[2, 3, 4, -100]])),
        ],
    );
    let o = hlatc(&["run", d, "--inputs", batch.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("input(s) the --inputs files do not hold, made up from their roles (seed 0): model.embed_tokens.weight,"),
        "{err}"
    );
    assert!(
        !err.contains(": tokens") && !err.contains(", tokens"),
        "{err}"
    );
    // The same run with every input from roles differs only in the batch.
    let o2 = hlatc(&["run", d]);
    assert_ne!(
        printed_scalar(&stdout(&o), "loss"),
        printed_scalar(&stdout(&o2), "loss")
    );
}

fn assert_refused(o: &Output, parts: &[&str]) {
    assert_eq!(o.status.code(), Some(1), "{}", stdout(o));
    let err = stderr(o);
    for p in parts {
        assert!(err.contains(p), "{p:?} not in: {err}");
    }
}

/// An id past the vocabulary, a target of -1, and segment ids that are
/// not a packing are refused by name, row, column and value; -100 is the
/// one target outside the vocabulary that runs.
#[test]
fn a_bundle_run_checks_token_data() {
    let dir = bundle("ids", &["--target", "cpu", "--seq-len", "4", "--packed"]);
    let d = dir.to_str().unwrap();
    let run = |tokens: &[i64], targets: &[i64], segments: &[i64]| {
        let f = batch_file(
            "packed.safetensors",
            &[
                ("tokens", ids(&[tokens])),
                ("targets", ids(&[targets])),
                ("segment_ids", ids(&[segments])),
            ],
        );
        hlatc(&["run", d, "--inputs", f.to_str().unwrap()])
    };
    let o = run(&[1, 2, 3, 4], &[2, 3, -100, 5], &[1, 1, 2, 2]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_refused(
        &run(&[1, 64, 3, 4], &[2, 3, 4, 5], &[1, 1, 1, 1]),
        &["tokens[0, 1] is 64, outside the vocabulary 0..64"],
    );
    assert_refused(
        &run(&[1, 2, 3, 4], &[2, 3, 4, -1], &[1, 1, 1, 1]),
        &["targets[0, 3] is -1", "(and not the ignore index -100)"],
    );
    assert_refused(
        &run(&[1, 2, 3, 4], &[64, 3, 4, 5], &[1, 1, 1, 1]),
        &["targets[0, 0] is 64, outside the vocabulary 0..64"],
    );
    assert_refused(
        &run(&[1, 2, 3, 4], &[2, 3, 4, 5], &[1, 2, 2, 1]),
        &[
            "segment_ids[0, 3] is 1, but document 1 ended at column 0",
            "contiguous",
        ],
    );
    assert_refused(
        &run(&[1, 2, 3, 4], &[2, 3, 4, 5], &[3, 3, 2, 2]),
        &["segment_ids[0, 2] is 2, less than the 3 before it"],
    );
    // Refused before anything runs: no outputs are written.
    let outputs = tmp("refused-outputs.safetensors");
    let f = batch_file(
        "bad.safetensors",
        &[
            ("tokens", ids(&[&[1, 2, 3, 99]])),
            ("targets", ids(&[&[2, 3, 4, 5]])),
            ("segment_ids", ids(&[&[1, 1, 1, 1]])),
        ],
    );
    let o = hlatc(&[
        "run",
        d,
        "--inputs",
        f.to_str().unwrap(),
        "--outputs",
        outputs.to_str().unwrap(),
    ]);
    assert_refused(&o, &["tokens[0, 3] is 99"]);
    assert!(!outputs.exists(), "nothing is written on a refusal");
}

fn config_file(name: &str, rope: &str, max_positions: i64) -> PathBuf {
    let path = tmp(name);
    std::fs::write(
        &path,
        format!(
            r#"{{"model_type": "llama", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2, "max_position_embeddings": {max_positions}, "rope_parameters": {rope}}}"#
        ),
    )
    .unwrap();
    path
}

/// A sequence past `max_position_embeddings` is refused naming the flag,
/// the key, both numbers and the RoPE type; dynamic NTK, which defines the
/// longer sequence, compiles and the summary says what it did.
#[test]
fn seq_len_past_max_positions_names_the_flag_and_the_key() {
    let out = tmp("long").display().to_string();
    let o = hlatc(&[
        "compile",
        "--model",
        "tiny",
        "--seq-len",
        "32",
        "--out",
        &out,
    ]);
    assert_refused(
        &o,
        &[
            "--seq-len 32: 32 exceeds max_position_embeddings = 16",
            "RoPE without scaling",
            "(max_position_embeddings of tiny)",
        ],
    );
    let llama3 = config_file(
        "llama3.json",
        r#"{"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 4}"#,
        8,
    );
    let o = hlatc(&[
        "train",
        "--config",
        llama3.to_str().unwrap(),
        "--seq-len",
        "9",
        "--steps",
        "1",
    ]);
    assert_refused(
        &o,
        &[
            "--seq-len 9: 9 exceeds max_position_embeddings = 8",
            "RoPE type 'llama3'",
            "llama3.json",
        ],
    );
    assert!(!PathBuf::from(&out).exists(), "nothing written");

    let dynamic = config_file(
        "dynamic.json",
        r#"{"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0}"#,
        8,
    );
    let dy = dynamic.to_str().unwrap();
    let o = hlatc(&[
        "compile",
        "--config",
        dy,
        "--seq-len",
        "16",
        "--target",
        "cpu",
        "--out",
        &out,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // head_dim 8: 10000 * (2 * 16 / 8 - 1)^(8 / 6) = 10000 * 3^(4/3).
    let want = 10000.0 * 3f64.powf(4.0 / 3.0);
    assert!(
        stdout(&o).contains(&format!(
            "rope          dynamic NTK past max_position_embeddings = 8: base 10000 -> {want:.1} for 16 positions"
        )),
        "{}",
        stdout(&o)
    );
    // Packed rows would make the base depend on the data: refused.
    let o = hlatc(&[
        "compile",
        "--config",
        dy,
        "--seq-len",
        "16",
        "--packed",
        "--out",
        &out,
    ]);
    assert_refused(
        &o,
        &["seq_len: 16 exceeds max_position_embeddings = 8 in packed rows"],
    );
}

/// A pass named by hand says what it found: on the default fused step
/// `coalesce-linear` has nothing to merge, and says why.
#[test]
fn a_pass_that_finds_nothing_says_so() {
    let out = tmp("coalesce").display().to_string();
    let o = hlatc(&[
        "compile",
        "--model",
        "tiny",
        "--target",
        "cpu",
        "--passes",
        "coalesce-linear",
        "--out",
        &out,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = stdout(&o);
    assert!(
        s.contains("coalesce-linear ran, none changed the module")
            && s.contains("pass note     coalesce-linear: found no dots to merge")
            && s.contains("is coalesced already (--separate-projections builds them apart)"),
        "{s}"
    );
    let o = hlatc(&[
        "compile",
        "--model",
        "tiny",
        "--target",
        "cpu",
        "--separate-projections",
        "--passes",
        "coalesce-linear",
        "--out",
        &out,
    ]);
    let s = stdout(&o);
    assert!(
        !s.contains("found no dots") && s.contains("left 8 dot groups apart"),
        "{s}"
    );
}

#[test]
fn usage_errors_carry_their_category() {
    use hlatc::bundle::ProgramName;
    use hlatc::usage::UsageKind;
    let o = hlatc::compile_step::CompileOptions {
        model: hlatc::compile_step::ModelSource::Preset("tiny".into()),
        target: hlatc::passes::Target::Cpu,
        batch_size: Some(2),
        seq_len: Some(8),
        ..Default::default()
    };
    let compiled = hlatc::compile_step::compile_step(&o).unwrap();
    match compiled.program(ProgramName::MicroStep) {
        Err(hlatc::Error::Usage(u)) => {
            assert_eq!(u.kind, UsageKind::NotFound);
            assert!(u.message.contains("'micro_step'"), "{}", u.message);
        }
        other => panic!("{:?}", other.err()),
    }
    let names: Vec<&str> = UsageKind::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(
        names,
        [
            "out_of_range",
            "conflict",
            "unsupported",
            "not_found",
            "invalid"
        ]
    );
}
