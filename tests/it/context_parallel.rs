//! Context parallelism: each sequence divided over CP ranks that gather
//! one another's keys and values. Over three steps it computes what one
//! device computes on the same global batch, in f64 to `train/tests/it/sharded.rs`'
//! 1e-10 (loss, grad norm, every parameter and Adam moment): with
//! head-tail chunks and contiguous ones, alone and with TP (+SP), DP with
//! ZeRO-1, pipeline stages, a mixture of experts with EP, packed documents
//! and a sliding window. Chunks given the wrong positions, or labels cut
//! without the load-balancing order, are caught.

use crate::kernels::run_packed;
use crate::sharded::run_with;
use crate::sharded::{
    assert_caught, compile_error, differences, gqa_odd_vocab, mha_tied, replicas_agree, run,
    step_config, Run, EQUAL_IN, F64_RTOL,
};
use hlatc::compiler::Literal;
use hlatc::grad_accum::build_accumulation_steps;
use hlatc::models::parallel::Fault;
use hlatc::models::{
    AttentionKernel, BatchShape, CpBalance, CpExchange, Kernels, ModelConfig, Parallelism,
};
use hlatc::passes::RematPolicy;
use hlatc::runtime::Runtime;
use hlatc::train_step::StepConfig;
use hlatc::trainer::Trainer;

/// `model` able to take sequences of `seq`.
fn long(model: ModelConfig, seq: i64) -> ModelConfig {
    ModelConfig {
        max_position_embeddings: seq,
        ..model
    }
}

/// CP `cp` dealt by `balance`.
fn cp(cp: i64, balance: CpBalance) -> Parallelism {
    Parallelism {
        cp,
        cp_balance: balance,
        ..Parallelism::SINGLE
    }
}

/// CP `cp` dealt by `balance`, keys and values passed round a ring.
fn ring(cp_degree: i64, balance: CpBalance) -> Parallelism {
    Parallelism {
        cp_exchange: CpExchange::Ring,
        ..cp(cp_degree, balance)
    }
}

/// `model`'s step over `par` on 4 sequences of `seq`.
fn config(model: ModelConfig, par: Parallelism, seq: i64) -> StepConfig {
    let mut cfg = step_config(long(model, seq), par, EQUAL_IN);
    cfg.batch = BatchShape {
        batch_size: 4,
        seq_len: seq,
    };
    cfg
}

/// What differs between three steps of `cfg` and of one device's step
/// (its plain graph of attention) on the same batches.
fn against_one_device_of(cfg: &StepConfig, run: impl Fn(&StepConfig) -> Run) -> (Vec<String>, Run) {
    let single = run(&StepConfig {
        parallel: Parallelism::SINGLE,
        fault: None,
        kernels: Kernels::default(),
        ..cfg.clone()
    });
    let divided = run(cfg);
    // A step that did nothing would agree too: the state moved.
    assert!(single.stats[2].loss < single.stats[0].loss);
    (differences(&single, &divided, F64_RTOL), divided)
}

/// Three steps of `model` over `par` at `seq` equal one device's.
fn equals_one_device(model: ModelConfig, par: Parallelism, seq: i64) {
    let (diffs, divided) = against_one_device_of(&config(model, par, seq), run);
    assert!(diffs.is_empty(), "{par}: {}", diffs.join("; "));
    twins_agree(&divided, par);
}

/// The replicas of `divided` hold the same state, where they are twins:
/// EP ranks hold different experts, FSDP ranks different shards.
fn twins_agree(divided: &Run, par: Parallelism) {
    if par.ep == 1 && !par.shards_weights() {
        replicas_agree(divided, par);
    }
}

macro_rules! context_equals_one_device {
    ($($name:ident: $model:expr, $par:expr, $seq:expr;)*) => {$(
        #[test]
        fn $name() {
            equals_one_device($model, $par, $seq);
        }
    )*};
}

context_equals_one_device! {
    cp2_head_tail: gqa_odd_vocab(), cp(2, CpBalance::HeadTail), 256;
    cp4_head_tail: mha_tied(), cp(4, CpBalance::HeadTail), 256;
    cp2_contiguous: gqa_odd_vocab(), cp(2, CpBalance::Contiguous), 256;
    cp4_contiguous: gqa_odd_vocab(), cp(4, CpBalance::Contiguous), 64;
    cp2_tp2_sp: gqa_odd_vocab(), Parallelism {
        tp: 2,
        sequence_parallel: true,
        ..cp(2, CpBalance::HeadTail)
    }, 64;
    cp2_dp2_zero1: mha_tied(), Parallelism {
        dp: 2,
        zero1: true,
        ..cp(2, CpBalance::HeadTail)
    }, 64;
    cp4_zero1: gqa_odd_vocab(), Parallelism {
        zero1: true,
        ..cp(4, CpBalance::HeadTail)
    }, 64;
    cp2_fsdp2: gqa_odd_vocab(), Parallelism {
        dp: 2,
        fsdp: 2,
        ..cp(2, CpBalance::HeadTail)
    }, 64;
    cp2_hsdp: mha_tied(), Parallelism {
        dp: 4,
        fsdp: 2,
        ..cp(2, CpBalance::HeadTail)
    }, 64;
    cp2_sliding_window: ModelConfig {
        sliding_window: Some(20),
        ..gqa_odd_vocab()
    }, cp(2, CpBalance::HeadTail), 64;
}

/// Attention tile by tile in a loop, tiles of `tile`.
fn looped(tile: i64) -> Kernels {
    Kernels {
        attention: AttentionKernel::Looped { tile },
        ..Kernels::default()
    }
}

/// Three steps of `model` over `par` at `seq`, attention by `kernels`,
/// equal one device's plain graph.
fn equals_one_device_with(model: ModelConfig, par: Parallelism, seq: i64, kernels: Kernels) {
    let cfg = StepConfig {
        kernels,
        ..config(model, par, seq)
    };
    let (diffs, divided) = against_one_device_of(&cfg, run);
    assert!(
        diffs.is_empty(),
        "{par}, {}: {}",
        cfg.kernels.attention,
        diffs.join("; ")
    );
    twins_agree(&divided, par);
}

#[test]
fn looped_attention_under_cp_equals_one_device() {
    let head_tail = cp(2, CpBalance::HeadTail);
    equals_one_device_with(gqa_odd_vocab(), head_tail, 64, looped(8));
    equals_one_device_with(mha_tied(), cp(4, CpBalance::HeadTail), 64, looped(8));
    equals_one_device_with(
        gqa_odd_vocab(),
        cp(2, CpBalance::Contiguous),
        64,
        looped(16),
    );
    let windowed = ModelConfig {
        sliding_window: Some(20),
        ..gqa_odd_vocab()
    };
    equals_one_device_with(windowed, head_tail, 64, looped(8));
    let layout = Parallelism {
        tp: 2,
        sequence_parallel: true,
        dp: 2,
        zero1: true,
        ..head_tail
    };
    equals_one_device_with(gqa_odd_vocab(), layout, 64, looped(8));
}

/// Ring attention: each CP rank's keys and values passed round its
/// group, alone, with GQA, contiguous chunks, a sliding window, TP with SP
/// and DP with ZeRO-1.
#[test]
fn ring_attention_equals_one_device() {
    let head_tail = ring(2, CpBalance::HeadTail);
    equals_one_device_with(gqa_odd_vocab(), head_tail, 256, looped(32));
    equals_one_device_with(mha_tied(), ring(4, CpBalance::HeadTail), 256, looped(16));
    equals_one_device_with(gqa_odd_vocab(), ring(4, CpBalance::HeadTail), 64, looped(8));
    equals_one_device_with(
        gqa_odd_vocab(),
        ring(2, CpBalance::Contiguous),
        64,
        looped(16),
    );
    let windowed = ModelConfig {
        sliding_window: Some(20),
        ..gqa_odd_vocab()
    };
    equals_one_device_with(windowed, head_tail, 64, looped(8));
}

#[test]
fn ring_attention_with_tp_sp_and_dp_zero1_equals_one_device() {
    let head_tail = ring(2, CpBalance::HeadTail);
    let tp = Parallelism {
        tp: 2,
        sequence_parallel: true,
        ..head_tail
    };
    equals_one_device_with(gqa_odd_vocab(), tp, 64, looped(8));
    let dp = Parallelism {
        dp: 2,
        zero1: true,
        ..head_tail
    };
    equals_one_device_with(mha_tied(), dp, 64, looped(8));
}

/// The exchanges a test runs: the all-gather of the plain graph and of
/// looped attention, and the ring.
fn exchanges() -> [(Parallelism, Kernels); 3] {
    let head_tail = cp(2, CpBalance::HeadTail);
    [
        (head_tail, Kernels::default()),
        (head_tail, looped(8)),
        (ring(2, CpBalance::HeadTail), looped(8)),
    ]
}

#[test]
fn packed_documents_under_cp_equal_one_device() {
    for (par, kernels) in exchanges() {
        for model in [gqa_odd_vocab(), mha_tied()] {
            let cfg = StepConfig {
                packed: true,
                kernels: kernels.clone(),
                ..config(model, par, 64)
            };
            let (diffs, _) = against_one_device_of(&cfg, run_packed);
            assert!(
                diffs.is_empty(),
                "{}: {}",
                kernels.attention,
                diffs.join("; ")
            );
        }
    }
}

/// Three steps with their CP ranks run by `trainer`, against one device.
fn equals_one_device_run_by(
    cfg: StepConfig,
    trainer: impl Fn(&Runtime, &StepConfig, Vec<Literal>) -> Result<Trainer, hlatc::train::Error> + Copy,
) {
    let par = cfg.parallel;
    let (diffs, _) = against_one_device_of(&cfg, |c| match c.parallel.is_single() {
        true => run(c),
        false => run_with(c, trainer),
    });
    assert!(diffs.is_empty(), "{par}: {}", diffs.join("; "));
}

#[test]
fn cp2_pipeline_stages_equal_one_device() {
    let model = ModelConfig {
        num_hidden_layers: 4,
        ..gqa_odd_vocab()
    };
    for (par, kernels) in exchanges() {
        let par = Parallelism { pp: 2, ..par };
        let cfg = StepConfig {
            kernels,
            ..config(model.clone(), par, 64)
        };
        equals_one_device_run_by(cfg, |rt, cfg, params| {
            crate::cpu_trainers::pipelined(rt, cfg, 2, RematPolicy::None, params)
        });
    }
}

#[test]
fn cp2_accumulated_micro_batches_equal_one_device() {
    for (par, kernels) in [exchanges()[0].clone(), exchanges()[2].clone()] {
        let cfg = StepConfig {
            kernels,
            ..config(mha_tied(), par, 64)
        };
        equals_one_device_run_by(cfg, |rt, cfg, params| {
            let steps = build_accumulation_steps(cfg, 2)?;
            crate::cpu_trainers::accumulating(rt, cfg, steps, RematPolicy::None, params)
        });
    }
}

#[test]
fn cp2_mixture_of_experts_with_ep_equals_one_device() {
    let moe = ModelConfig::preset("tiny-moe").unwrap();
    for ep in [1, 2] {
        let par = Parallelism {
            ep,
            ..cp(2, CpBalance::HeadTail)
        };
        equals_one_device(moe.clone(), par, 64);
    }
    let ring = Parallelism {
        ep: 2,
        ..ring(2, CpBalance::HeadTail)
    };
    equals_one_device_with(moe, ring, 64, looped(8));
}

/// A fault in a CP step over `par` with `kernels`: what differs from one
/// device.
fn broken(fault: Fault, (par, kernels): (Parallelism, Kernels)) -> Vec<String> {
    let cfg = StepConfig {
        fault: Some(fault),
        kernels,
        ..config(gqa_odd_vocab(), par, 64)
    };
    against_one_device_of(&cfg, run).0
}

#[test]
fn chunks_given_each_others_positions_are_caught() {
    for exchange in [exchanges()[0].clone(), exchanges()[2].clone()] {
        assert_caught(&broken(Fault::ChunkPositionsSwapped, exchange), "loss");
    }
}

#[test]
fn labels_cut_without_the_balancing_order_are_caught() {
    for exchange in [exchanges()[0].clone(), exchanges()[2].clone()] {
        assert_caught(&broken(Fault::LabelsNotBalanced, exchange), "loss");
    }
}

#[test]
fn layouts_context_parallelism_cannot_take_are_refused_by_name() {
    let e = compile_error(&["--model", "tiny", "--seq-len", "12", "--cp", "4"]);
    assert!(
        e.contains("--cp 4 with --cp-balance head-tail cuts each sequence into 8 equal chunks, and --seq-len 12 does not divide into 8"),
        "{e}"
    );
    let e = compile_error(&[
        "--model",
        "tiny",
        "--seq-len",
        "16",
        "--cp-balance",
        "contiguous",
    ]);
    assert!(
        e.contains("--cp-balance contiguous needs --cp above 1"),
        "{e}"
    );
    let e = compile_error(&[
        "--model",
        "tiny",
        "--seq-len",
        "16",
        "--cp",
        "2",
        "--kernel",
        "attention=blocked:4",
    ]);
    assert!(
        e.contains("--cp 2 with --kernel attention=blocked:4"),
        "{e}"
    );
    let e = compile_error(&[
        "--model",
        "tiny",
        "--seq-len",
        "16",
        "--cp-exchange",
        "ring",
    ]);
    assert!(e.contains("--cp-exchange ring needs --cp above 1"), "{e}");
    let e = compile_error(&[
        "--model",
        "tiny",
        "--seq-len",
        "16",
        "--cp",
        "2",
        "--cp-exchange",
        "ring",
    ]);
    assert!(
        e.contains("--cp-exchange ring merges each step's block") && e.contains("attention=hlo"),
        "{e}"
    );
}

/// The planner: above 8,192 tokens its search tries CP (looped attention,
/// head-tail chunks of at least 4,096 tokens), never below; a CP layout
/// spelled in a SPEC is priced with its exchange on the links it crosses,
/// fits a trn1 core at Llama 3.1's 128K, and prints a command that
/// compiles.
#[test]
fn the_planner_searches_and_prices_context_parallelism() {
    use hlatc::compile_step::ModelSource;
    use hlatc::plan::search::search_space;
    use hlatc::plan::{plan, PlanOptions};
    let cfg = ModelConfig::preset("llama3.1-8b").unwrap();
    let o = PlanOptions {
        model: ModelSource::Preset("llama3.1-8b".into()),
        nodes: 16,
        ..PlanOptions::default()
    };
    let degrees = |seq: i64| -> Vec<i64> {
        let mut cps: Vec<i64> = search_space(&cfg, seq, &o, 512)
            .unwrap()
            .iter()
            .map(|l| l.parallel.cp)
            .collect();
        cps.sort();
        cps.dedup();
        cps
    };
    assert_eq!(degrees(8192), vec![1]);
    assert_eq!(degrees(131072), vec![1, 2, 4, 8, 16]);
    let long = search_space(&cfg, 131072, &o, 512).unwrap();
    assert!(long
        .iter()
        .filter(|l| l.parallel.cp > 1)
        .all(|l| l.attention.to_string() == "attention=looped:512" && l.micro_batch == 1));
    // Both exchanges, for every CP layout.
    let by = |e: CpExchange| {
        long.iter()
            .filter(|l| l.parallel.cp > 1 && l.parallel.cp_exchange == e)
            .count()
    };
    assert!(by(CpExchange::Ring) > 0 && by(CpExchange::Ring) == by(CpExchange::AllGather));

    for (spec, exchange) in [
        (
            "tp=32,cp=16,dp=1,sp,zero1,remat=none,attention=looped:512",
            "",
        ),
        (
            "tp=32,cp=16,cp_exchange=ring,dp=1,sp,zero1,remat=none,attention=looped:512",
            "--cp-exchange ring",
        ),
    ] {
        let p = plan(&PlanOptions {
            seq_len: Some(131072),
            global_batch: 16,
            layout: Some(spec.into()),
            top: 1,
            ..o.clone()
        })
        .unwrap();
        let best = p.best().expect("the layout is priced");
        assert!(best.fits, "{}", best.layout);
        assert!(best.memory_per_rank < 16 << 30);
        // A CP group's ranks are a TP group (a node) apart: the keys and
        // values cross the network.
        assert!(best.breakdown.network > 0.0, "{:?}", best.breakdown);
        assert!(best.command.contains("--cp 16") && best.command.contains("attention=looped:512"));
        assert!(best.command.contains(exchange), "{}", best.command);
    }
}
