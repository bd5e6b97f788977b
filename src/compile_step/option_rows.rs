// The rows of the option table (`spellings.rs`): one per option. Adding
// an option is a row here, its field in `CompileOptions`, and its use.

compile_options! {
    library {
        Model = model, Preset {
            flag: "model", python: "model", default: Unset, value: "MODEL",
            py: "Optional[Model]",
            help: "Built-in model: tiny (2 layers, GQA; runs on XLA CPU), hlat-7b (Llama-2-7B shapes), \
                hlat-70b (Llama-2-70B shapes, 8 KV heads), llama3-8b, llama3.1-8b (llama3 RoPE \
                scaling), llama3.2-1b (tied), mistral-7b (sliding window 4096), qwen2-0.5b (q/k/v \
                biases), tinyllama, smollm-135m, tiny-moe (tiny with 4 experts; runs on XLA CPU), \
                mixtral-8x7b, qwen3-30b-a3b [default: compile and plan hlat-7b, train tiny]",
        },
        Config = model, ConfigPath {
            flag: "config", python: "config", default: Unset, value: "FILE",
            py: "Optional[Union[str, \"os.PathLike[str]\", Mapping[str, Any]]]",
            help: "Hugging Face `config.json` (model_type llama, mistral, qwen2, qwen3, mixtral, \
                qwen2_moe or qwen3_moe; transformers 4 or 5 layout) instead of a preset. Every key \
                is read, checked or known not to matter; anything else is refused by name",
        },
        BatchSize = batch_size, Maybe {
            flag: "batch-size", python: "batch_size", default: Unset, value: "N",
            py: "Optional[int]",
            help: "Sequences per step [default: compile 1, train 8]",
        },
        SeqLen = seq_len, Maybe {
            flag: "seq-len", python: "seq_len", default: Unset, value: "N",
            py: "Optional[int]",
            help: "Tokens per sequence [default: compile and plan min(4096, max_position_embeddings), train \
                min(16, ...)]",
        },
        Packed = packed, Switch {
            flag: "packed", python: "packed", default: Off, value: "",
            py: "bool",
            help: "Pack several documents per row: the step takes a `segment_ids` input (s32[batch, \
                seq], one id per document, documents contiguous); attention stays within a document \
                and positions restart at its start",
        },
        SeparateProjections = separate_projections, Switch {
            flag: "separate-projections", python: "separate_projections", default: Off, value: "",
            py: "bool",
            help: "Store q/k/v and gate/up as separate tensors, as Hugging Face does. By default they \
                are stored fused (`self_attn.qkv_proj`, `mlp.gate_up_proj`, rows stacked in that \
                order), so each layer reads its input with 4 dots instead of 7; checkpoints (`train \
                --init`, `--save`) are Hugging Face tensors either way, and the manifest says which \
                rows of a fused tensor are which",
        },
        CapacityFactor = capacity_factor, Maybe {
            flag: "capacity-factor", python: "capacity_factor", default: Unset, value: "F",
            py: "Optional[float]",
            help: "For a mixture-of-experts model: each expert takes at most C = min(S, ceil(S x k x F \
                / E)) tokens of each sequence of S (k experts per token, E experts), the earliest \
                first, and a token routed to a full expert is dropped from it, as NxD's capacity \
                factor does (it counts a rank's tokens; hlatc counts a sequence's, so dividing the \
                batch never changes what is dropped). The static buffers of --ep-exchange all-to-all \
                are C slots per expert per sequence. Default: dropless (C = S)",
        },
        Precision = precision, Choice {
            flag: "precision", python: "precision", default: Value("bf16-mixed"), value: "PRESET",
            py: "Precision",
            help: "Precision preset. bf16-mixed: bf16 compute (dots accumulate in f32; softmax, exp, \
                log, reductions, norms, loss and the optimizer stay f32) over f32 weights and f32 \
                Adam state. bf16-pure: the same compute over bf16 weights and Adam state, updated in \
                f32 and stored back with stochastic rounding. bf16-master: bf16 weights for compute \
                and communication, with an f32 master copy beside f32 Adam state (sharded over DP \
                with --zero1); the weight is its master rounded to nearest. mxfp8: bf16-master whose \
                linear layers multiply in MXFP8 (E4M3 values, a power-of-two scale per 32 along the \
                contracting dimension, f32 accumulation), forward and backward; attention's products, \
                the head and a router stay bf16; on neuron it needs --chip trn3, whose compiler \
                quantizes (QuantizeMX) and multiplies (a block-scaled dot). fp32: everything in f32. \
                fp64: everything in f64, for checking against float64 references, not for training. \
                The `amp` pass applies it; the manifest records every input's dtype",
        },
        Rounding = rounding, MaybeChoice {
            flag: "rounding", python: "rounding", default: Unset, value: "POLICY",
            py: "Optional[Rounding]",
            help: "Which converts to bf16 round stochastically: state-updates (the default, except rne \
                for bf16-master: the bf16 weight and Adam-state updates of bf16-pure), sr (every \
                convert to bf16) or rne (none). On neuron the bundle turns on the runtime's \
                stochastic rounding; on cpu it is lowered to plain HLO with its RNG state carried as \
                an input and output",
        },
        Target = target, Choice {
            flag: "target", python: "target", default: Value("neuron"), value: "TARGET",
            py: "Target",
            help: "Which compiler the bundle is for",
        },
        Chip = chip, MaybeChoice {
            flag: "chip", python: "chip", default: Unset, value: "CHIP",
            py: "Optional[Chip]",
            help: "The Trainium chip a neuron bundle is for: its neuronx-cc --target (and on trn2 \
                and trn3 --logical-nc-config=2 with the runtime's NEURON_LOGICAL_NC_CONFIG=2), the \
                chip its pre-flight checks, and the core its memory plan is held to by default (trn1 \
                16 GiB, trn2 24 GiB and trn3 36 GiB per logical core). Refused with --target cpu \
                [default: trn1]",
        },
        Passes = passes, CommaNames {
            flag: "passes", python: "passes", default: Unset, value: "PASSES",
            py: "Optional[Union[str, Sequence[str]]]",
            help: "Run exactly these passes, in order, instead of the default pipeline \
                (comma-separated; empty for none)",
        },
        DisablePass = disable_passes, EachName {
            flag: "disable-pass", python: "disable_pass", default: Empty, value: "NAME",
            py: "Union[str, Sequence[str]]",
            help: "Leave this pass out of the default pipeline (repeatable)",
        },
        VerifyEachPass = verify_each_pass, Switch {
            flag: "verify-each-pass", python: "verify_each_pass", default: Off, value: "",
            py: "bool",
            help: "Run the verifier after every pass, not only after the pipeline (the default in debug \
                builds)",
        },
        Remat = remat, Choice {
            flag: "remat", python: "remat", default: Value("core-attention"), value: "POLICY",
            py: "Remat",
            help: "Activation checkpointing: which forward activations the backward pass recomputes \
                instead of keeping. core-attention (HLAT's and NxD's choice) recomputes each layer's \
                attention scores and probabilities from q, k and v; full-layer recomputes each \
                decoder layer from its input, collectives included; none keeps everything. Under \
                --sequence-parallel both policies also keep each rank's run of the sequence and \
                all-gather it again in the backward pass, rather than keep the gathered whole",
        },
        Tp = parallel.tp, Plain {
            flag: "tp", python: "tp", default: Value("1"), value: "T",
            py: "int",
            help: "Tensor-parallel degree, Megatron style as NxD does it: q/k/v and gate/up split by \
                output columns (whole heads per rank; KV heads are replicated when there are fewer \
                than --tp), o and down split by input rows and all-reduced, the embedding and LM \
                head split by vocabulary rows (padded when --tp does not divide the vocabulary) with \
                the cross-entropy computed without any rank holding a full row of logits. It must \
                divide the query heads and the MLP width, and the KV heads must divide it or be \
                divisible by it",
        },
        Dp = parallel.dp, Plain {
            flag: "dp", python: "dp", default: Value("1"), value: "D",
            py: "int",
            help: "Data-parallel degree: --batch-size stays the global batch, and each of the D \
                replicas of a TP group takes batch/D sequences; gradients are averaged in f32. Ranks \
                are numbered TP-major: rank r is TP rank r % T of replica r / T, so TP groups are \
                runs of T ids",
        },
        Pp = parallel.pp, Plain {
            flag: "pp", python: "pp", default: Value("1"), value: "P",
            py: "int",
            help: "Pipeline-parallel degree: the decoder layers divided into P stages of equal length \
                (P must divide them), each stage on its own T x D ranks; rank r is on stage r / (T x \
                D). A step runs --grad-accum M micro-batches through the stages on a 1F1B-ordered \
                schedule of M + 2P - 1 ticks (bubble (P - 1) / (M + P - 1)), as four programs of one \
                micro-batch on one stage each (warm-up, steady, cool-down, and the apply step). Each \
                micro-batch in flight keeps what --remat keeps for its backward slot (--remat stage: \
                only the stage's input, the forward run again); stages send as --pp-send says. See \
                docs/src/pipeline.md",
        },
        Ep = parallel.ep, Plain {
            flag: "ep", python: "ep", default: Value("1"), value: "E",
            py: "int",
            help: "Expert-parallel degree, for a mixture-of-experts model: its experts divided over E \
                of the --dp replicas (E divides --dp and the expert count), NxD's [PP, DP_exp, EP, \
                TP] layout: DP replica d is EP rank d % E and holds that run of the experts; tokens \
                reach the experts of the other EP ranks as --ep-exchange says, and the experts' \
                gradients are averaged over the D / E replicas that hold them. See docs/src/moe.md",
        },
        EpExchange = parallel.ep_exchange, Choice {
            flag: "ep-exchange", python: "ep_exchange", default: Value("all-to-all"), value: "FORM",
            py: "EpExchange",
            help: "How tokens reach the experts of other EP ranks (needs --ep above 1). `all-to-all`: \
                each rank lays its tokens out in per-expert buffers of the capacity \
                (--capacity-factor, else every token of a sequence fits) and sends each EP rank its \
                experts' buffers, the outputs coming back the same way (NxD training's form). \
                `all-gather`: every rank gathers the group's tokens, runs its experts over all of \
                them and reduce-scatters the outputs back (NxD Inference's and vLLM-Neuron's form). \
                Both compute the same step",
        },
        Cp = parallel.cp, Plain {
            flag: "cp", python: "cp", default: Value("1"), value: "C",
            py: "int",
            help: "Context-parallel degree: each sequence divided over C ranks, which all-gather one \
                another's keys and values (at their own head count) for attention and reduce-scatter \
                their gradients, Llama 3's and torchtitan's form. Positions, the causal mask, \
                sliding windows and documents use global positions; labels are shifted before the \
                split. Gradients and the loss are summed over D x C ranks, --zero1 divides the \
                optimizer state over them, and an --fsdp shard group takes every CP rank of its \
                replicas. Ranks are numbered [PP, DP, CP, TP]: rank r is CP rank \
                (r / T) % C. --seq-len must cut into the chunks --cp-balance deals. See \
                docs/src/long-context.md",
        },
        CpBalance = parallel.cp_balance, Choice {
            flag: "cp-balance", python: "cp_balance", default: Value("head-tail"), value: "ORDER",
            py: "CpBalance",
            help: "Which chunks of a sequence each CP rank holds (needs --cp above 1). `head-tail`: \
                2C chunks, rank c holding chunks c and 2C - 1 - c, so under the causal mask every \
                rank has the same work (Llama 3's and torchtitan's order). `contiguous`: C chunks, \
                rank c holding chunk c (NxD's order; the last rank does the most work)",
        },
        CpExchange = parallel.cp_exchange, Choice {
            flag: "cp-exchange", python: "cp_exchange", default: Value("all-gather"), value: "FORM",
            py: "CpExchange",
            help: "How CP ranks see one another's keys and values (needs --cp above 1). \
                `all-gather`: gathered on every rank before attention, gradients reduce-scattered \
                back (Llama 3's and torchtitan's form; a rank holds the sequence's keys and values \
                for a layer). `ring`: each rank's block passed round its CP group by \
                collective-permute, one step per CP rank, merged into the queries' running rows \
                in f32, and the blocks' gradients passed round after them (ring attention; a rank \
                holds two blocks at a time; needs --kernel attention=looped)",
        },
        SequenceParallel = parallel.sequence_parallel, Switch {
            flag: "sequence-parallel", python: "sequence_parallel", default: Off, value: "",
            py: "bool",
            help: "Sequence parallelism (needs --tp above 1): norms and residuals on each rank's share \
                of the tokens, all-gathered before q/k/v and gate/up and reduce-scattered after o \
                and down, which cuts the activation memory of those ops by T",
        },
        Zero1 = parallel.zero1, Switch {
            flag: "zero1", python: "zero1", default: Off, value: "",
            py: "bool",
            help: "ZeRO-1 (needs --dp above 1): the Adam moments, and the master weights under \
                --precision bf16-master, divided over the D replicas. Gradients are reduce-scattered \
                (summed in f32, each replica keeping its 1/D of every tensor), each replica updates \
                its shard, and the new parameters are all-gathered: optimizer memory per rank falls \
                by D, at no extra communication",
        },
        Fsdp = parallel.fsdp, Plain {
            flag: "fsdp", python: "fsdp", default: Value("1"), value: "N",
            py: "int",
            help: "FSDP (ZeRO-3) over a shard group of N data-parallel replicas: the weights, their \
                master weights and Adam moments divided over the N replicas, each keeping 1/N of \
                every tensor. Each step all-gathers the weights (in their stored type) before the \
                forward, reduce-scatters the gradients (summed in f32) and updates its shards, so \
                the state per rank falls by N. --fsdp N alone means --dp N; with --dp D it divides \
                it: D / N shard groups of consecutive replicas (HSDP), each gradient shard summed \
                over the groups after the reduce-scatter. With --pp, each stage's weights over its \
                replicas, gathered by every tick program. Subsumes --zero1. See \
                docs/src/sharding.md",
        },
        Reshard = parallel.reshard, Choice {
            flag: "reshard", python: "reshard", default: Value("never"), value: "POLICY",
            py: "Reshard",
            help: "When FSDP frees the weights it gathered for the forward (needs --fsdp above 1). \
                `never`: kept until the backward reads them, each gathered once a step (the rank's \
                whole share alive at the peak; Llama 3's choice). `always`: freed after the forward \
                and gathered again in the backward unit by unit (the embedding, each decoder \
                layer, the final norm with the LM head) as it reaches them, behind remat's barrier: \
                one unit alive at a time, for a second gather of every weight (torchtitan's policy \
                without PP); not with --pp. `unless-pp`: torchtitan's `default` policy, `always` \
                without --pp and `never` with it. See docs/src/sharding.md",
        },
        LrMax = optimizer.lr_max, Maybe {
            flag: "lr-max", python: "lr_max", default: Unset, value: "LR",
            py: "Optional[float]",
            help: "Peak learning rate after warmup [default: compile 3e-4, train 1e-2]",
        },
        LrMin = optimizer.lr_min, Maybe {
            flag: "lr-min", python: "lr_min", default: Unset, value: "LR",
            py: "Optional[float]",
            help: "Final learning rate, end of the cosine decay [default: compile 3e-5, train 1e-3]",
        },
        WarmupSteps = optimizer.warmup_steps, Maybe {
            flag: "warmup-steps", python: "warmup_steps", default: Unset, value: "N",
            py: "Optional[int]",
            help: "Linear warmup steps [default: compile 2000, train steps/10]",
        },
        TotalSteps = optimizer.total_steps, Maybe {
            flag: "total-steps", python: "total_steps", default: Unset, value: "N",
            py: "Optional[int]",
            help: "Step at which the cosine decay reaches --lr-min [default: compile 100000, train \
                --steps]",
        },
        Beta1 = optimizer.beta1, Maybe {
            flag: "beta1", python: "beta1", default: Unset, value: "B",
            py: "Optional[float]",
            help: "AdamW first-moment decay [default: 0.9]",
        },
        Beta2 = optimizer.beta2, Maybe {
            flag: "beta2", python: "beta2", default: Unset, value: "B",
            py: "Optional[float]",
            help: "AdamW second-moment decay [default: 0.95; HLAT found 0.99 unstable in bf16]",
        },
        AdamEps = optimizer.adam_eps, Maybe {
            flag: "adam-eps", python: "adam_eps", default: Unset, value: "E",
            py: "Optional[float]",
            help: "AdamW epsilon [default: 1e-8]",
        },
        WeightDecay = optimizer.weight_decay, Maybe {
            flag: "weight-decay", python: "weight_decay", default: Unset, value: "W",
            py: "Optional[float]",
            help: "Decoupled weight decay on every parameter, norms included [default: 0.1]",
        },
        ClipNorm = optimizer.clip_norm, Maybe {
            flag: "clip-norm", python: "clip_norm", default: Unset, value: "C",
            py: "Optional[float]",
            help: "Global gradient-norm clip; 0 disables clipping [default: 1.0]",
        },
        ModuleMarkers = module_markers, Switch {
            flag: "module-markers", python: "module_markers", default: Off, value: "",
            py: "bool",
            help: "Mark where each decoder layer starts and ends, in the forward and the backward pass, \
                with neuronx-cc's module markers (AwsNeuronModuleMarkerStart-Forward, ...), so its \
                modular flow can compile one layer and reuse it. They pass their tensor through \
                (--verify runs them as that); off until tried on hardware",
        },
        DeviceMemory = device_memory, Memory {
            flag: "device-memory", python: "device_memory", default: Unset, value: "SIZE",
            py: "Optional[Union[int, str]]",
            help: "Device memory per rank that the step's memory plan must fit: a size (`16GiB`, \
                `24GB`, `512MiB`, bytes) or `none`. The summary prints the plan (parameters, master \
                weights, optimizer state, gradients, the activations the backward reads and its \
                working memory beyond them, both measured on the module) and the manifest records \
                it; a plan over the limit is refused with the smallest change that fits (--zero1, \
                --remat full-layer, more DP, more TP) and nothing is written. [default: one \
                NeuronCore of --chip, 16GiB on trn1, 24GiB on trn2 and 36GiB on trn3, for a sharded \
                step on neuron; \
                a single-device step is warned about; none on cpu]",
        },
        GradAccum = grad_accum, Plain {
            flag: "grad-accum", python: "grad_accum", default: Value("1"), value: "K",
            py: "int",
            help: "Accumulate each optimizer step's gradient over K micro-batches: the bundle then \
                holds two programs, micro_step/ (forward and backward over a K-th of each replica's \
                rows, added into f32 gradient accumulators; run K times) and apply_step/ (sum over \
                ranks, clip, AdamW; run once), each a complete bundle, and a manifest.json that says \
                how to drive them. Two programs, not a loop, because neuronx-cc unrolls loops. With \
                --pp, the micro-batches of the pipeline schedule: the bundle then holds warm_up/, \
                steady/, cool_down/ and apply_step/",
        },
        Spmd = spmd, MaybeChoice {
            flag: "spmd", python: "spmd", default: Unset, value: "FORM",
            py: "Optional[Spmd]",
            help: "How a sharded step says it is one program for every rank. `replicas`: \
                replica_count=N and replica-id, as torch-xla compiles it (NxD on torch-neuronx). \
                `partitions`: num_partitions=N, partition-id, a channel_id and \
                use_global_device_ids=true on every collective and sharding={manual} on the entry's \
                parameters and root, as JAX compiles it (jax-neuronx included). The same step either \
                way, proven equal on XLA CPU. Default: replicas",
        },
        RankSource = rank_source, MaybeChoice {
            flag: "rank-source", python: "rank_source", default: Unset, value: "SOURCE",
            py: "Optional[RankSource]",
            help: "Where a sharded step's rank reads its number. `device`: replica-id (or \
                partition-id). `input`: an extra s32[1] input named `rank`, fed r on rank r, as \
                NxD's SPMDRank does, since replica-id in one program for all ranks is not known to \
                compile on Neuron. Default: input for --target neuron, device for cpu",
        },
        ReplicaGroups = replica_groups, Choice {
            flag: "replica-groups", python: "replica_groups", default: Value("explicit"), value: "FORM",
            py: "ReplicaGroups",
            help: "How a sharded step's collectives write their replica groups. `explicit`: every \
                group's ids (`{{0,1},{2,3}}`), which every XLA reads and the one form known to reach \
                neuronx-cc. `iota`: XLA's compact form (`[64,32]<=[2048]`), which XLA CPU reads; \
                whether neuronx-cc reads it is not known",
        },
        PpSend = pp_send, MaybeChoice {
            flag: "pp-send", python: "pp_send", default: Unset, value: "FORM",
            py: "Optional[PpSend]",
            help: "How pipeline stages send activations and gradients (needs --pp 2 or more). \
                `all-gather`: an all-gather over each pair of twin ranks on neighbouring stages, the \
                receiver taking its partner's half, as neuronx-distributed's pipeline sends (twice \
                the bytes; an odd --pp needs an even --tp x --dp). `permute`: one collective-permute \
                from each rank to its twin, exactly the bytes sent, which NxD never emits. Both \
                compute the same step. Default: all-gather for --target neuron, permute for cpu",
        },
        Kernel = kernels, Kernels {
            flag: "kernel", python: "kernels", default: Unset, value: "POINT=IMPL[:ARG]",
            py: "Optional[Mapping[str, str]]",
            help: "Compute a kernel point by this implementation (repeatable). Points: attention (its \
                core: scores, masks, softmax, times v), softmax, rmsnorm, swiglu, cross-entropy. \
                Implementations: hlo, the plain graph, which every point has and every target takes \
                by default but softmax's; fused (softmax only, the default), each softmax and its \
                backward as one op by the fuse-softmax pass (on neuron its custom calls); blocked \
                (attention only), the flash algorithm tile by tile in plain HLO, so no [S, S] value \
                exists: `attention=blocked` takes the largest power of two up to 512 that cuts the \
                sequence into two or more tiles, `attention=blocked:128` tiles of 128; looped \
                (attention only), the same with its tile pairs in a static-trip-count while loop, \
                one body a layer whatever the sequence, the form --cp takes at long sequences \
                (`attention=looped:512`); imported \
                (attention only), HLO modules another stack lowered (a JAX kernel and its vjp, or \
                NKI's flash attention custom calls, which XLA CPU runs by hlatc's references), named \
                by a calling-convention file: `attention=imported:kernel.json`. A request whose \
                constraint does not hold (a tile that does not divide the sequence) falls back to \
                the target's default, with the reason printed. The manifest records what each point \
                took (config.kernels)",
        },
    }
    front_end {
        Out {
            flag: "out", name: "out", default: Unset, value: "DIR", takes: One,
            help: "Output directory (created if needed)",
        },
        Verify {
            flag: "verify", name: "verify", default: Off, value: "", takes: Switch,
            help: "Check the bundle on XLA CPU after writing it",
        },
        PassReport {
            flag: "pass-report", name: "pass_report", default: Off, value: "", takes: Switch,
            help: "Print what every pass did",
        },
    }
}
