//! The cost model: a step's time from its programs' counts, the instance's
//! peaks and a few parameters.
//!
//! A program run takes
//!
//! ```text
//! t = matmul FLOPs / peak          * matmul
//!   + memory bytes / HBM bandwidth * memory
//!   + link bytes / NeuronLink      * link
//!   + network bytes / EFA share    * network
//!   + ring steps * nominal latency * latency
//!   + launch
//! ```
//!
//! and a step is the sum over its program runs (the accumulation's micro
//! steps and apply step; the pipeline's ticks, whose count holds the
//! bubble). Each parameter but `launch` is the reciprocal of the fraction
//! of its peak a run achieves, so the time is linear in them and a
//! calibration is a linear least-squares fit ([`super::calibration`]).
//! What is assumed rather than fitted is [`Assumptions`], each with its
//! reason.

use super::counts::{ProgramCounts, Traffic};
use super::hardware::Hardware;
use serde::Serialize;

/// How many free parameters the model has.
pub const PARAMS: usize = 6;

/// What each parameter is, as the docs, `--json` and the fit's report
/// name it, and the value the fit is drawn toward where the runs do not
/// decide it (its prior).
pub struct ParamInfo {
    pub name: &'static str,
    pub meaning: &'static str,
    pub prior: f64,
    pub prior_why: &'static str,
}

pub const PARAM_INFO: [ParamInfo; PARAMS] = [
    ParamInfo {
        name: "matmul",
        meaning: "1 / the fraction of TensorE's peak the dots achieve",
        prior: 2.0,
        prior_why:
            "half of peak: the SDK's published MFU for these runs is 30-45% of 6 N seq FLOPs",
    },
    ParamInfo {
        name: "memory",
        meaning: "1 / the fraction of HBM bandwidth the ops between dots achieve",
        prior: 2.0,
        prior_why: "half of the stated bandwidth",
    },
    ParamInfo {
        name: "link",
        meaning: "1 / the fraction of NeuronLink bandwidth a collective achieves within a node",
        prior: 2.0,
        prior_why: "half of the stated bandwidth",
    },
    ParamInfo {
        name: "network",
        meaning: "1 / the fraction of EFA bandwidth a collective achieves between nodes",
        prior: 2.0,
        prior_why: "half of the stated bandwidth",
    },
    ParamInfo {
        name: "latency",
        meaning: "the ring steps' latency, as a multiple of the nominal latencies (Assumptions)",
        prior: 1.0,
        prior_why: "the nominal latencies",
    },
    ParamInfo {
        name: "launch",
        meaning: "seconds each program run costs beyond its work (the host's launch)",
        prior: 1e-3,
        prior_why: "a millisecond per graph execution",
    },
];

/// The fitted parameters, in [`PARAM_INFO`]'s order.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CostParams(pub [f64; PARAMS]);

impl CostParams {
    /// Every parameter at its prior.
    pub fn priors() -> CostParams {
        CostParams(PARAM_INFO.map(|p| p.prior))
    }

    /// The parameters by name, for reports.
    pub fn named(&self) -> Vec<(&'static str, f64)> {
        PARAM_INFO.iter().map(|p| p.name).zip(self.0).collect()
    }
}

/// What the model assumes and does not fit: the shared file's runs cannot
/// tell these apart from the fitted parameters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Assumptions {
    /// The fraction of the data-parallel collectives hidden behind
    /// compute. 0: NxD reduces the gradients in the optimizer's step,
    /// after the backward pass (torch-xla's `reduce_gradients`), and
    /// hlatc's step orders them the same way.
    pub data_parallel_overlap: f64,
    /// Seconds per ring step within a node (a NeuronLink hop and its
    /// synchronization).
    pub link_latency: f64,
    /// Seconds per ring step between nodes (an EFA round trip).
    pub network_latency: f64,
    /// The fraction of the shorter of a program's matmul and memory times
    /// that runs beside the longer. 1: a NeuronCore's engines (TensorE for
    /// the dots; VectorE, ScalarE and GpSimd for the rest, fed by DMA)
    /// run at once, and neuronx-cc schedules one layer's elementwise work
    /// beside another's matmuls.
    pub engine_overlap: f64,
}

impl Default for Assumptions {
    fn default() -> Self {
        Assumptions {
            data_parallel_overlap: 0.0,
            link_latency: 10e-6,
            network_latency: 30e-6,
            engine_overlap: 1.0,
        }
    }
}

/// A step's programs, each with how many times it runs per step.
#[derive(Clone, Debug, Default)]
pub struct StepWork {
    pub runs: Vec<(ProgramCounts, f64)>,
}

/// One program run's time at the peaks (every parameter 1, launch 1 s),
/// by parameter.
pub type Row = [f64; PARAMS];

/// A step's program runs, each as its [`Row`] and how many times it runs:
/// what the cost model prices and a calibration fits.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepFeatures {
    pub runs: Vec<(Row, f64)>,
    /// How much of the shorter of a run's matmul and memory time hides
    /// behind the longer ([`Assumptions::engine_overlap`]).
    pub engine_overlap: f64,
}

/// Reads a step's program runs against the instance's peaks.
pub fn features(work: &StepWork, hw: &Hardware, a: &Assumptions) -> StepFeatures {
    let network_share = hw.network_bandwidth / hw.cores_per_node as f64;
    let runs = work
        .runs
        .iter()
        .map(|(c, times)| {
            let mut traffic: Traffic = c.exposed;
            traffic.add(&c.sends);
            traffic.add(&c.data_parallel.scaled(1.0 - a.data_parallel_overlap));
            let row = [
                c.matmul_flops / hw.bf16_flops
                    + c.matmul_flops_f32 / hw.fp32_flops
                    + c.matmul_flops_mx / hw.mx_flops.unwrap_or(hw.bf16_flops),
                c.memory_bytes / hw.hbm_bandwidth,
                traffic.link_bytes / hw.link_bandwidth,
                traffic.network_bytes / network_share,
                traffic.link_steps * a.link_latency + traffic.network_steps * a.network_latency,
                1.0,
            ];
            (row, *times)
        })
        .collect();
    StepFeatures {
        runs,
        engine_overlap: a.engine_overlap,
    }
}

impl StepFeatures {
    /// The step's columns at `p`, in which its time is linear: each run's
    /// shorter engine term counts `1 - engine_overlap` of itself, the one
    /// that is shorter at `p`.
    pub fn linear_at(&self, p: &CostParams) -> Row {
        let mut out = [0.0; PARAMS];
        for (row, times) in &self.runs {
            let mut r = *row;
            let hidden = 1.0 - self.engine_overlap;
            if r[0] * p.0[0] >= r[1] * p.0[1] {
                r[1] *= hidden;
            } else {
                r[0] *= hidden;
            }
            for (o, v) in out.iter_mut().zip(r) {
                *o += times * v;
            }
        }
        out
    }

    /// Where the step's time goes at `p`.
    pub fn breakdown(&self, p: &CostParams) -> Breakdown {
        let mut b = Breakdown::default();
        for (row, times) in &self.runs {
            let t: Vec<f64> = row.iter().zip(p.0).map(|(f, q)| times * f * q).collect();
            b.matmul += t[0];
            b.memory += t[1];
            b.overlapped += self.engine_overlap * t[0].min(t[1]);
            b.link += t[2];
            b.network += t[3];
            b.latency += t[4];
            b.launch += t[5];
        }
        b
    }
}

/// Where a step's predicted time goes, in seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Breakdown {
    /// The dots, on TensorE.
    pub matmul: f64,
    /// The ops between them, at HBM bandwidth.
    pub memory: f64,
    /// What of the two runs at once (the engines work in parallel), taken
    /// off their sum.
    pub overlapped: f64,
    pub link: f64,
    pub network: f64,
    pub latency: f64,
    pub launch: f64,
}

impl Breakdown {
    pub fn total(&self) -> f64 {
        self.matmul + self.memory - self.overlapped
            + self.link
            + self.network
            + self.latency
            + self.launch
    }
}

/// The parameters as the book's table lists them: each with what it is,
/// its prior and why, and its value in `p`.
pub fn params_markdown(p: &CostParams) -> String {
    let mut out = String::from(
        "| parameter | what it is | prior | why the prior | fitted |\n| --- | --- | --- | --- | --- |\n",
    );
    for (info, value) in PARAM_INFO.iter().zip(p.0) {
        out += &format!(
            "| `{}` | {} | {} | {} | {:.4} |\n",
            info.name, info.meaning, info.prior, info.prior_why, value
        );
    }
    out
}
