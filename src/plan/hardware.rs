//! What the planner knows of each instance kind: the peak rates a rank
//! (one NeuronCore) and a node have, each from the Neuron SDK's own
//! architecture pages. The cost model divides the programs' work by these;
//! how much of each peak a run achieves is the calibration's business
//! ([`super::cost::CostParams`]), not this file's.

use std::fmt;

/// Where the figures below come from: the Neuron SDK's architecture pages
/// at one commit of `aws-neuron/aws-neuron-sdk`.
pub const SOURCE: &str = "aws-neuron/aws-neuron-sdk@81ce03ae261e: \
about-neuron/arch/neuron-hardware/{trainium.rst, trn1-arch.rst, trainium2.rst, trn2-arch.rst, \
trainium3.rst, trn3-arch.rst}, about-neuron/arch/neuron-features/logical-neuroncore-config.rst";

/// An instance kind a layout can be planned for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Instance {
    Trn1,
    Trn1n,
    Trn2,
    /// One server of a Trn3 Gen1 UltraServer (16 chips), servers joined
    /// by EFA.
    Trn3Server,
    /// A Trn3 Gen1 UltraServer: 4 servers of 16 chips, one switched
    /// scale-up domain of 64.
    Trn3Gen1,
    /// A Trn3 Gen2 UltraServer: 36 servers of 4 chips, 144.
    Trn3Gen2,
}

/// One instance kind's facts, per rank (a NeuronCore as the runtime
/// exposes it) and per node.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hardware {
    /// NeuronCores a node exposes: the ranks it runs.
    pub cores_per_node: i64,
    /// Dense BF16 matrix-multiply peak of one core, FLOP/s.
    pub bf16_flops: f64,
    /// FP32 matrix-multiply peak of one core, FLOP/s.
    pub fp32_flops: f64,
    /// MXFP8 matrix-multiply peak of one core, FLOP/s, where the chip
    /// has an MX matmul (a block-scaled dot of 8-bit values).
    pub mx_flops: Option<f64>,
    /// Device memory of one core, bytes.
    pub hbm_bytes: u64,
    /// Device-memory bandwidth of one core, bytes/s.
    pub hbm_bandwidth: f64,
    /// NeuronLink bandwidth within a node, per core, bytes/s.
    pub link_bandwidth: f64,
    /// EFA bandwidth between nodes, per node, bytes/s.
    pub network_bandwidth: f64,
}

const GIB: u64 = 1 << 30;

impl Instance {
    pub const ALL: [Instance; 6] = [
        Instance::Trn1,
        Instance::Trn1n,
        Instance::Trn2,
        Instance::Trn3Server,
        Instance::Trn3Gen1,
        Instance::Trn3Gen2,
    ];

    /// As AWS names it, and as `--instance` and the calibration CSV take
    /// it. The SDK's pages name no Trn3 instance type (only the runtime's
    /// `trn3pds`), so trn3's names are hlatc's own, after the pages'
    /// headings.
    pub fn name(self) -> &'static str {
        match self {
            Instance::Trn1 => "trn1.32xlarge",
            Instance::Trn1n => "trn1n.32xlarge",
            Instance::Trn2 => "trn2.48xlarge",
            Instance::Trn3Server => "trn3-server",
            Instance::Trn3Gen1 => "trn3-ultraserver-gen1",
            Instance::Trn3Gen2 => "trn3-ultraserver-gen2",
        }
    }

    pub fn from_name(s: &str) -> Option<Instance> {
        Self::ALL.into_iter().find(|i| i.name() == s)
    }

    /// The chip its NeuronCores are, which the Neuron pre-flight checks
    /// a program against.
    pub fn chip(self) -> hlatc_passes::neuron_check::Chip {
        use hlatc_passes::neuron_check::Chip;
        match self {
            Instance::Trn1 | Instance::Trn1n => Chip::Trn1,
            Instance::Trn2 => Chip::Trn2,
            Instance::Trn3Server | Instance::Trn3Gen1 | Instance::Trn3Gen2 => Chip::Trn3,
        }
    }

    /// The instance's facts.
    pub fn hardware(self) -> Hardware {
        match self {
            // Trainium: 2 NeuronCore-v2 per chip, 190 BF16 / 47.5 FP32
            // TFLOPS, 32 GiB HBM at 820 GiB/s, NeuronLink-v2 384 GB/s per
            // chip; 16 chips in a 2D torus; EFA 800 Gbps (trn1) or
            // 1,600 Gbps (trn1n). trn1n's NeuronLink is listed as 768 in a
            // column whose header the SDK has since deleted, so it is
            // taken as trn1's.
            Instance::Trn1 | Instance::Trn1n => Hardware {
                cores_per_node: 32,
                bf16_flops: 95e12,
                fp32_flops: 23.75e12,
                mx_flops: None,
                hbm_bytes: self.chip().hbm_per_core(),
                hbm_bandwidth: 410.0 * GIB as f64,
                link_bandwidth: 192e9,
                network_bandwidth: match self {
                    Instance::Trn1 => 800e9 / 8.0,
                    _ => 1600e9 / 8.0,
                },
            },
            // Trainium2: 8 physical NeuronCore-v3 per chip grouped into 4
            // logical cores (LNC=2, the default): 667 dense BF16 / 181 FP32
            // TFLOPS, 96 GiB HBM at 2.9 TB/s, NeuronLink-v3 1,024 GB/s per
            // chip within the instance; 16 chips; EFAv3 3,200 Gbps.
            Instance::Trn2 => Hardware {
                cores_per_node: 64,
                bf16_flops: 667e12 / 4.0,
                fp32_flops: 181e12 / 4.0,
                mx_flops: None,
                hbm_bytes: self.chip().hbm_per_core(),
                hbm_bandwidth: 2.9e12 / 4.0,
                link_bandwidth: 1024e9 / 4.0,
                network_bandwidth: 3200e9 / 8.0,
            },
            // Trainium3: 8 physical NeuronCore-v4 per chip, 4 logical
            // cores at LNC=2 (what hlatc compiles for): 671 dense BF16 /
            // 2,517 MXFP8 / 183 FP32 TFLOPS, 144 GiB HBM at 4.9 TB/s. Chips meet over
            // a switched PCIe fabric whose bandwidth per chip is given by
            // tier: 256 GB/s within a server, 320 GB/s across the servers
            // of a rack, 128 GB/s between racks; the model has one link
            // per node, so a node gets the slowest tier it spans (a Gen2
            // UltraServer's 36 servers are not placed in racks by the
            // page, so it is taken to span two). EFA: 12,800 Gbps per
            // Gen1 UltraServer (3,200 a server), 28,800 per Gen2.
            Instance::Trn3Server | Instance::Trn3Gen1 | Instance::Trn3Gen2 => {
                let (chips, link_per_chip, efa_gbps) = match self {
                    Instance::Trn3Server => (16, 256e9, 3_200e9),
                    Instance::Trn3Gen1 => (64, 256e9, 12_800e9),
                    _ => (144, 128e9, 28_800e9),
                };
                let per_chip = f64::from(self.chip().cores_per_chip());
                Hardware {
                    cores_per_node: chips * i64::from(self.chip().cores_per_chip()),
                    bf16_flops: 671e12 / per_chip,
                    fp32_flops: 183e12 / per_chip,
                    mx_flops: Some(2_517e12 / per_chip),
                    hbm_bytes: self.chip().hbm_per_core(),
                    hbm_bandwidth: 4.9e12 / per_chip,
                    link_bandwidth: link_per_chip / per_chip,
                    network_bandwidth: efa_gbps / 8.0,
                }
            }
        }
    }
}

impl fmt::Display for Instance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The instances' facts as the book's table lists them.
pub fn markdown_table() -> String {
    let mut out = String::from(
        "| instance | cores | BF16 TFLOPS / core | MXFP8 TFLOPS / core | FP32 TFLOPS / core | HBM / core | HBM GB/s / core | NeuronLink GB/s / core | EFA Gbps / node |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for i in Instance::ALL {
        let h = i.hardware();
        out += &format!(
            "| `{}` | {} | {:.2} | {} | {:.2} | {} GiB | {:.0} | {:.0} | {:.0} |\n",
            i.name(),
            h.cores_per_node,
            h.bf16_flops / 1e12,
            h.mx_flops
                .map_or("none".to_string(), |f| format!("{:.2}", f / 1e12)),
            h.fp32_flops / 1e12,
            h.hbm_bytes >> 30,
            h.hbm_bandwidth / 1e9,
            h.link_bandwidth / 1e9,
            h.network_bandwidth * 8.0 / 1e9
        );
    }
    out
}
