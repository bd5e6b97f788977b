//! Programs of several replicas (`replica_count` N above 1, one partition)
//! on the shared runtime's devices: one input list per replica, the
//! collectives computed across them in process, one output list back per
//! replica; and the refusals that keep the plugin from aborting.

use crate::common::*;
use hlatc_compiler::{formats::text, Literal};
use hlatc_runtime::{Program, Runtime, RuntimeError, MAX_DEVICES, SHARED_DEVICES};

const SUM: &str =
    "sum {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n";

/// A module of `replicas` replicas with the `sum` reducer and `body` as
/// its entry.
fn replicated(replicas: usize, body: &str) -> String {
    format!("HloModule test, replica_count={replicas}\n\n{SUM}\nENTRY main {{\n{body}\n}}\n")
}

fn compile(hlo: &str) -> Result<Program, RuntimeError> {
    let m = text::parse_module(hlo).unwrap_or_else(|e| panic!("parse: {e}\n{hlo}"));
    runtime().compile(&m)
}

fn refused(hlo: &str) -> String {
    match compile(hlo) {
        Ok(_) => panic!("compiled:\n{hlo}"),
        Err(e) => e.to_string(),
    }
}

/// Replica r's input: `len` values r*100, r*100 + 1, ... .
fn rank_input(r: usize, len: usize) -> Literal {
    let v: Vec<f32> = (0..len).map(|i| (r * 100 + i) as f32).collect();
    f32s(&[len as i64], &v)
}

fn values(l: &Literal) -> Vec<f64> {
    l.to_f64_vec()
}

/// A program of partitions partitioned by hand (every entry parameter and
/// the root `manual`), as `--spmd partitions` writes a step: each
/// partition reads its own number, and a channelled all-reduce over global
/// ids sums each pair, as the replica form does.
#[test]
fn a_manually_partitioned_program_runs_one_partition_per_device() {
    let hlo = format!(
        "HloModule test, num_partitions=4\n\n{SUM}\nENTRY main {{\n  x = f32[3] parameter(0), sharding={{manual}}\n  r = f32[3] all-reduce(x), channel_id=1, replica_groups={{{{0,1}},{{2,3}}}}, use_global_device_ids=true, to_apply=sum\n  id = u32[] partition-id()\n  ROOT t = (f32[3], u32[]) tuple(r, id), sharding={{{{manual}}, {{manual}}}}\n}}\n"
    );
    let out = pairs_summed(&hlo);
    for (r, o) in out.iter().enumerate() {
        assert_eq!(values(&o[1]), [r as f64]);
    }
    // Without its channel the all-reduce would exchange between replicas,
    // of which there is one.
    let unchannelled = hlo
        .replace("channel_id=1, ", "")
        .replace("use_global_device_ids=true, ", "");
    let e = refused(&unchannelled);
    assert!(
        e.contains("all-reduce without a channel_id exchanges between replicas"),
        "{e}"
    );
}

#[test]
fn an_all_reduce_over_replica_pairs_sums_each_pair() {
    let hlo = replicated(
        4,
        "  x = f32[3] parameter(0)\n  ROOT r = f32[3] all-reduce(x), replica_groups={{0,1},{2,3}}, to_apply=sum",
    );
    pairs_summed(&hlo);
}

/// Runs `hlo`, whose first output sums its `f32[3]` input over the rank
/// pairs `{{0,1},{2,3}}`, on 4 ranks fed [`rank_input`]s, checks that
/// output, and returns every rank's outputs.
fn pairs_summed(hlo: &str) -> Vec<Vec<Literal>> {
    let p = compile(hlo).unwrap();
    assert_eq!(p.replicas(), 4);
    let inputs: Vec<Vec<Literal>> = (0..4).map(|r| vec![rank_input(r, 3)]).collect();
    let out = p.run_replicas(&inputs).unwrap();
    assert_eq!(out.len(), 4);
    // Ranks 0 and 1: (0 + 100, 1 + 101, 2 + 102); ranks 2 and 3: 200 + 300, ...
    for (r, o) in out.iter().enumerate() {
        let want = if r < 2 {
            [100.0, 102.0, 104.0]
        } else {
            [500.0, 502.0, 504.0]
        };
        assert_values(&o[0], &want, 0.0);
    }
    out
}

#[test]
fn all_gather_and_reduce_scatter_over_2_and_4_replicas() {
    for n in [2usize, 4] {
        let hlo = replicated(
            n,
            &format!(
                "  x = f32[2] parameter(0)\n  g = f32[{}] all-gather(x), replica_groups={{}}, dimensions={{0}}\n  y = f32[{}] parameter(1)\n  rs = f32[2] reduce-scatter(y), replica_groups={{}}, dimensions={{0}}, to_apply=sum\n  ROOT t = (f32[{}], f32[2]) tuple(g, rs)",
                2 * n,
                2 * n,
                2 * n
            ),
        );
        let p = compile(&hlo).unwrap();
        assert_eq!(p.replicas(), n);
        let inputs: Vec<Vec<Literal>> = (0..n)
            .map(|r| vec![rank_input(r, 2), rank_input(r, 2 * n)])
            .collect();
        let out = p.run_replicas(&inputs).unwrap();
        // Every rank gathers every rank's two values, in rank order.
        let gathered: Vec<f64> = (0..n)
            .flat_map(|r| [(r * 100) as f64, (r * 100 + 1) as f64])
            .collect();
        // Element i of the sum over ranks is sum_r (100 r + i); rank r
        // keeps elements 2r and 2r + 1.
        let ranks_sum = (0..n).map(|r| 100.0 * r as f64).sum::<f64>();
        for (r, o) in out.iter().enumerate() {
            assert_values(&o[0], &gathered, 0.0);
            let i = (2 * r) as f64;
            assert_values(
                &o[1],
                &[ranks_sum + n as f64 * i, ranks_sum + n as f64 * (i + 1.0)],
                0.0,
            );
        }
    }
}

#[test]
fn replica_id_gives_each_replica_its_number() {
    let n = SHARED_DEVICES;
    let hlo = replicated(n, "  ROOT id = u32[] replica-id()");
    let p = compile(&hlo).unwrap();
    let out = p.run_replicas(&vec![Vec::new(); n]).unwrap();
    let ids: Vec<f64> = out.iter().map(|o| values(&o[0])[0]).collect();
    assert_eq!(ids, (0..n).map(|r| r as f64).collect::<Vec<_>>());
}

/// A ring: each replica sends to the next, and the last to the first.
#[test]
fn a_collective_permute_over_replicas_passes_each_value_on() {
    let hlo = replicated(
        4,
        "  x = f32[2] parameter(0)\n  ROOT p = f32[2] collective-permute(x), source_target_pairs={{0,1},{1,2},{2,3},{3,0}}",
    );
    let p = compile(&hlo).unwrap();
    let inputs: Vec<Vec<Literal>> = (0..4).map(|r| vec![rank_input(r, 2)]).collect();
    let out = p.run_replicas(&inputs).unwrap();
    for (r, o) in out.iter().enumerate() {
        let from = ((r + 3) % 4 * 100) as f64;
        assert_values(&o[0], &[from, from + 1.0], 0.0);
    }
}

/// A single-device program runs the same through either form.
#[test]
fn one_replica_runs_through_run_and_run_replicas_alike() {
    let p = compile(&entry(
        "  x = f32[2] parameter(0)\n  ROOT n = f32[2] negate(x)",
    ))
    .unwrap();
    assert_eq!(p.replicas(), 1);
    let x = f32s(&[2], &[1.0, -2.0]);
    let one = p.run(std::slice::from_ref(&x)).unwrap();
    let lists = p.run_replicas(&[vec![x]]).unwrap();
    assert_eq!(lists, vec![one]);
}

#[test]
fn replica_inputs_are_checked_per_replica() {
    let p = compile(&replicated(
        2,
        "  x = f32[3] parameter(0)\n  ROOT r = f32[3] all-reduce(x), replica_groups={}, to_apply=sum",
    ))
    .unwrap();
    let e = p.run(&[rank_input(0, 3)]).unwrap_err();
    assert!(matches!(e, RuntimeError::ReplicatedRun { replicas: 2, .. }));
    assert_eq!(
        e.to_string(),
        "program 'test' runs on 2 replicas; run it with one input list per replica (`Program::run_replicas`)"
    );
    let e = p.run_replicas(&[vec![rank_input(0, 3)]]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "program 'test' runs on 2 replica(s); 1 input list(s) were given, one per replica is needed"
    );
    let e = p
        .run_replicas(&[vec![rank_input(0, 3)], vec![rank_input(1, 4)]])
        .unwrap_err();
    assert!(
        matches!(
            e,
            RuntimeError::ReplicaInputMismatch {
                replica: 1,
                index: 0,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "replica 1: input 0 ('x') is f32[4]{0}, parameter expects f32[3]{0}"
    );
    let e = p
        .run_replicas(&[vec![rank_input(0, 3)], Vec::new()])
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "replica 1: the module takes 1 parameter(s), 0 input(s) were given"
    );
}

#[test]
fn replicas_beyond_the_runtime_and_partitions_are_refused() {
    let many = SHARED_DEVICES + 8;
    let e = refused(&replicated(many, "  ROOT id = u32[] replica-id()"));
    assert_eq!(
        e,
        format!("module 'test' is for {many} replicas, but this runtime has {SHARED_DEVICES} device(s); a runtime made with as many (`Runtime::with_devices`) runs it, as `hlatc run` does")
    );
    let e = refused("HloModule test, replica_count=2, num_partitions=2\nENTRY main {\n  ROOT id = u32[] replica-id()\n}\n");
    // It says which partitioned programs do run, since hand-partitioned
    // ones (manual entry) now do.
    assert_eq!(
        e,
        "module 'test' is for 2 replica(s) x 2 partition(s); the XLA CPU runtime runs replicas of one partition, or partitions of one replica whose entry parameters and root are all sharding={manual} (partitioned already, as hlatc's --spmd partitions writes them), not programs XLA would partition itself (`hlatc run --one-device` runs one that is not yet partitioned as one device's program)"
    );
    for n in [0, MAX_DEVICES + 1] {
        let e = Runtime::with_devices(n).err().expect("refused");
        assert_eq!(
            e.to_string(),
            format!("a runtime has 1 to {MAX_DEVICES} devices; {n} were asked for")
        );
    }
}

/// XLA's verifier refuses most of these itself, after printing its stack
/// from inside the plugin; a permute with a channel aborts the process,
/// and replicas that reach a collective a different number of times make
/// XLA CPU exit after 40 s. Each is refused first, naming the numbers.
#[test]
fn collectives_that_do_not_fit_the_replicas_are_refused_before_the_plugin() {
    let cases = [
        (
            "  x = f32[2] parameter(0)\n  ROOT r = f32[2] all-reduce(x), replica_groups={{0,1}}, to_apply=sum",
            "instruction 'r': replica groups [[0, 1]] hold 2 of them; the module has 4 replicas (0 to 3), and its groups must hold each once",
        ),
        (
            "  x = f32[2] parameter(0)\n  ROOT r = f32[2] all-reduce(x), replica_groups={{0,1},{2,7}}, to_apply=sum",
            "instruction 'r': replica groups [[0, 1], [2, 7]] name replica 7; the module has 4 replicas (0 to 3), and its groups must hold each once",
        ),
        (
            "  x = f32[2] parameter(0)\n  ROOT g = f32[4] all-gather(x), replica_groups={}, dimensions={0}",
            "instruction 'g': all-gather gathers f32[2]{0} into f32[4]{0}, along dimension 0 a factor other than its group size 4",
        ),
        (
            "  x = f32[4] parameter(0)\n  ROOT rs = f32[2] reduce-scatter(x), replica_groups={}, dimensions={0}, to_apply=sum",
            "instruction 'rs': reduce-scatter scatters f32[4]{0} into f32[2]{0}, along dimension 0 a factor other than its group size 4",
        ),
        (
            "  x = f32[6] parameter(0)\n  ROOT at = f32[6] all-to-all(x), replica_groups={}, dimensions={0}",
            "instruction 'at': all-to-all splits dimension 0 of f32[6]{0} into 4 pieces (its group size), which does not divide 6",
        ),
        (
            "  x = f32[2] parameter(0)\n  ROOT p = f32[2] collective-permute(x), source_target_pairs={{0,1},{1,4}}",
            "instruction 'p': source_target_pairs name replica 4, and the module has 4 (0 to 3)",
        ),
        (
            "  x = f32[2] parameter(0)\n  ROOT p = f32[2] collective-permute(x), channel_id=1, source_target_pairs={{0,1},{1,0}}",
            "instruction 'p': collective-permute with a channel_id permutes partitions, and the module has one (its 4 replicas are permuted without a channel_id); XLA CPU aborts on it",
        ),
        (
            "  x = f32[4] parameter(0)\n  ROOT at = f32[4] all-to-all(x), channel_id=1, replica_groups={}, dimensions={0}",
            "instruction 'at': all-to-all with a channel_id exchanges between partitions, and the module has one (its 4 replicas exchange without a channel_id); XLA CPU fails running it",
        ),
    ];
    for (body, want) in cases {
        let e = refused(&replicated(4, body));
        assert!(
            e.starts_with("XLA CPU cannot run module 'test': computation 'main', ")
                && e.ends_with(want),
            "{e}"
        );
    }
    let in_a_branch = format!(
        "HloModule test, replica_count=2\n\n{SUM}\nyes {{\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] all-reduce(p), replica_groups={{}}, to_apply=sum\n}}\n\nno {{\n  ROOT p = f32[2] parameter(0)\n}}\n\nENTRY main {{\n  x = f32[2] parameter(0)\n  id = u32[] replica-id()\n  z = u32[] constant(0)\n  c = pred[] compare(id, z), direction=EQ\n  ROOT r = f32[2] conditional(c, x, x), true_computation=yes, false_computation=no\n}}\n"
    );
    let e = refused(&in_a_branch);
    assert!(
        e.ends_with("computation 'yes', instruction 'r': all-reduce inside a while loop or a conditional, which replicas may reach a different number of times; XLA CPU exits the process once its 2 replicas have waited on one another past its timeout, so a program of several replicas keeps its collectives out of control flow"),
        "{e}"
    );
}

/// A device assignment for as many replicas of one computation is the
/// dump's machine, not this one's: the program runs replica i on device i.
/// One for other counts is refused, naming both.
#[test]
fn a_device_assignment_for_the_replicas_runs_and_another_is_refused() {
    use hlatc_compiler::ir::device_assignment::DeviceAssignment;
    let mut m = text::parse_module(&replicated(2, "  ROOT id = u32[] replica-id()")).unwrap();
    m.device_assignment = Some(DeviceAssignment {
        replica_count: 2,
        computation_count: 1,
        devices: vec![vec![5, 3]],
    });
    let out = runtime()
        .compile(&m)
        .unwrap()
        .run_replicas(&[Vec::new(), Vec::new()])
        .unwrap();
    assert_eq!(
        out.iter().map(|o| values(&o[0])[0]).collect::<Vec<_>>(),
        [0.0, 1.0]
    );
    m.device_assignment = Some(DeviceAssignment {
        replica_count: 4,
        computation_count: 1,
        devices: vec![vec![0, 1, 2, 3]],
    });
    let e = runtime().compile(&m).err().expect("refused").to_string();
    assert_eq!(
        e,
        "module 'test' has a device assignment of 4 replica(s) x 1 computation(s) on devices [[0, 1, 2, 3]]; the XLA CPU runtime runs 2 replica(s) of one computation, each on a device of its own (`hlatc run --one-device` runs it as one device's program)"
    );
}
