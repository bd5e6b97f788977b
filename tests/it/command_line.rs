//! `CompileOptions::command_line` (issue 69): the planner's and the memory
//! fit's commands are written from the options, not spelled by hand. Every
//! option the spelling list names is written when it is not its default,
//! and `hlatc compile` of the words builds the library's own bundle of the
//! options, byte for byte.

use crate::support::{hlatc, scratch, stderr};
use hlatc::compile_step::spellings::SPELLINGS;
use hlatc::compile_step::{
    compile_step, CompileOptions, ModelSource, OptimizerOverrides, ReplicaGroupForm,
};
use hlatc::memory_plan::DeviceMemory;
use hlatc::models::{EpExchange, KernelRequest, Parallelism};
use hlatc::passes::neuron_check::Chip;
use hlatc::passes::{RematPolicy, RoundingPolicy, Target};
use hlatc::precision::Precision;
use std::path::Path;

#[test]
fn every_spelled_option_is_written_when_it_is_not_its_default() {
    let words = crate::option_surfaces::every_option_changed()
        .command_line()
        .unwrap();
    for s in SPELLINGS.iter().filter(|s| s.python.is_some()) {
        // `--config` is the other way to name the model.
        if s.flag == "config" {
            continue;
        }
        let flag = format!("--{}", s.flag);
        assert!(words.contains(&flag), "{flag} is not written: {words:?}");
    }
    // The defaults write nothing but the model.
    let plain = CompileOptions::default().command_line().unwrap();
    assert_eq!(plain, ["--model", "hlat-7b"]);
    let config = CompileOptions {
        model: ModelSource::ConfigFile("my config.json".into()),
        ..CompileOptions::default()
    };
    assert_eq!(
        config.command_line_text().unwrap(),
        "--config 'my config.json'"
    );
    let json = CompileOptions {
        model: ModelSource::ConfigJson {
            json: "{}".into(),
            name: "config (dict)".into(),
        },
        ..CompileOptions::default()
    };
    assert_eq!(
        json.command_line().unwrap_err().to_string(),
        "config (dict) is not a preset or a config.json on disk, so no command line names it"
    );
}

#[test]
fn a_change_is_the_flags_it_adds() {
    let from = CompileOptions {
        model: ModelSource::Preset("tiny".into()),
        parallel: Parallelism {
            tp: 2,
            dp: 2,
            ..Parallelism::SINGLE
        },
        ..CompileOptions::default()
    };
    let to = CompileOptions {
        batch_size: Some(4),
        remat: RematPolicy::FullLayer,
        parallel: Parallelism {
            dp: 4,
            zero1: true,
            ..from.parallel
        },
        ..from.clone()
    };
    assert_eq!(
        to.change_from(&from).flags(),
        "--batch-size 4 --remat full-layer --dp 4 --zero1"
    );
    assert_eq!(
        to.change_from(&from).keywords(),
        "batch_size=4, remat=\"full-layer\", dp=4, zero1=True"
    );
    assert_eq!(from.change_from(&from).flags(), "");
}

/// `hlatc compile` of the words gives the library's bundle of the options.
#[test]
fn the_words_build_the_options_bundle() {
    let cases = [
        CompileOptions {
            model: ModelSource::Preset("tiny".into()),
            batch_size: Some(4),
            seq_len: Some(16),
            precision: Precision::Fp32,
            rounding: Some(RoundingPolicy::NearestEven),
            remat: RematPolicy::FullLayer,
            parallel: Parallelism {
                tp: 2,
                dp: 2,
                pp: 1,
                sequence_parallel: true,
                zero1: true,
                ..Parallelism::SINGLE
            },
            optimizer: OptimizerOverrides {
                lr_max: Some(1e-3),
                warmup_steps: Some(10),
                clip_norm: Some(0.5),
                ..OptimizerOverrides::default()
            },
            grad_accum: 2,
            replica_groups: ReplicaGroupForm::Iota,
            chip: Some(Chip::Trn2),
            device_memory: DeviceMemory::Bytes(1 << 34),
            ..CompileOptions::default()
        },
        CompileOptions {
            model: ModelSource::Preset("tiny".into()),
            seq_len: Some(16),
            target: Target::Cpu,
            remat: RematPolicy::None,
            kernels: vec![KernelRequest::parse("attention=blocked:8").unwrap()],
            module_markers: true,
            ..CompileOptions::default()
        },
        CompileOptions {
            model: ModelSource::Preset("tiny-moe".into()),
            batch_size: Some(4),
            seq_len: Some(16),
            target: Target::Cpu,
            capacity_factor: Some(1.25),
            parallel: Parallelism {
                dp: 4,
                ep: 2,
                ep_exchange: EpExchange::AllGather,
                ..Parallelism::SINGLE
            },
            ..CompileOptions::default()
        },
    ];
    for (k, o) in cases.iter().enumerate() {
        let dir = scratch(&format!("command-line-{k}"));
        let _ = std::fs::remove_dir_all(&dir);
        let (cli, lib) = (dir.join("cli"), dir.join("lib"));
        let words = o.command_line().unwrap();
        let mut args = vec!["compile".to_string()];
        args.extend(words.iter().cloned());
        args.extend(["--out".to_string(), cli.display().to_string()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = hlatc(&args);
        assert!(out.status.success(), "{words:?}: {}", stderr(&out));
        let compiled = compile_step(o).unwrap();
        hlatc::step_programs::write_bundle(&compiled, &lib).unwrap();
        assert_same_files(&cli, &lib);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Every file under `a` is under `b` with the same bytes, and no more.
fn assert_same_files(a: &Path, b: &Path) {
    let list = |d: &Path| {
        let mut v: Vec<_> = walk(d)
            .into_iter()
            .map(|p| p.strip_prefix(d).unwrap().to_path_buf())
            .collect();
        v.sort();
        v
    };
    let (la, lb) = (list(a), list(b));
    assert_eq!(la, lb);
    for rel in la {
        assert!(
            std::fs::read(a.join(&rel)).unwrap() == std::fs::read(b.join(&rel)).unwrap(),
            "{} differs",
            rel.display()
        );
    }
}

fn walk(d: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(d).unwrap() {
        let p = e.unwrap().path();
        match p.is_dir() {
            true => out.extend(walk(&p)),
            false => out.push(p),
        }
    }
    out
}
