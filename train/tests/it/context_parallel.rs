//! Context parallelism: each sequence divided over CP ranks that gather
//! one another's keys and values. Over three steps it computes what one
//! device computes on the same global batch, in f64 to `sharded.rs`'
//! 1e-10 (loss, grad norm, every parameter and Adam moment): with
//! head-tail chunks and contiguous ones, alone and with TP (+SP), DP with
//! ZeRO-1, pipeline stages, a mixture of experts with EP, packed documents
//! and a sliding window. Chunks given the wrong positions, or labels cut
//! without the load-balancing order, are caught. The layouts the CLI
//! refuses and the planner's CP layouts are the root crate's
//! (`tests/it/sharded.rs`).

use crate::runs::{
    assert_caught, differences, gqa_odd_vocab, mha_tied, replicas_agree, run, run_packed, run_with,
    step_config, Run, EQUAL_IN, F64_RTOL,
};
use hlatc_compiler::Literal;
use hlatc_models::parallel::Fault;
use hlatc_models::{
    AttentionKernel, BatchShape, CpBalance, CpExchange, Kernels, ModelConfig, Parallelism,
};
use hlatc_passes::RematPolicy;
use hlatc_runtime::Runtime;
use hlatc_step::grad_accum::build_accumulation_steps;
use hlatc_step::train_step::StepConfig;
use hlatc_train::trainer::Trainer;

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
    trainer: impl Fn(&Runtime, &StepConfig, Vec<Literal>) -> Result<Trainer, hlatc_train::Error> + Copy,
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
