//! Per-rank checkpoints (`hlatc.jax.Trainer`'s), file by file as each
//! process writes and checks them: the protocol's collectives are the
//! caller's, so two ranks written one after the other stand for two
//! processes.

use crate::scratch;
use hlatc_artifacts::checkpoint::sharded::{
    loader_file_name, open_for_load, prepare_save, problem, prune, steps, write_file,
    write_rank_file, Marker, ShardedCheckpointError, FORMAT,
};
use hlatc_artifacts::checkpoint::{step_dir_name, SkipReason, COMPLETE, METRICS_FILE};
use hlatc_artifacts::run_identity::RunIdentity;
use hlatc_compiler::Literal;
use hlatc_runtime::read_safetensors;
use std::collections::BTreeMap;
use std::path::Path;

fn rank_state(rank: usize) -> Vec<(String, Literal)> {
    let w = Literal::from_f32(vec![2, 2], &[rank as f32; 4]).unwrap();
    vec![("w".to_string(), w)]
}

/// A checkpoint of `world` ranks after `done` steps in `dir`, as the
/// processes write it: every rank's file, the metrics, replica 0's loader
/// position, then the marker of every file's sha256.
fn save(dir: &Path, world: usize, done: u64) -> Marker {
    for first in [true, false] {
        prepare_save(dir, world, first).unwrap();
    }
    let mut files = BTreeMap::new();
    for rank in 0..world {
        let sum = write_rank_file(dir, rank, &rank_state(rank)).unwrap();
        files.insert(hlatc_artifacts::state_shards::rank_file_name(rank), sum);
    }
    let loader = loader_file_name(0);
    files.insert(loader.clone(), write_file(dir, &loader, b"[{}]").unwrap());
    let metrics = write_file(dir, METRICS_FILE, b"step,loss\n").unwrap();
    files.insert(METRICS_FILE.to_string(), metrics);
    let config = serde_json::json!({"parallel": {"tp": world}});
    let mut identity = RunIdentity::default();
    identity.set("precision", "fp32");
    let marker = Marker::new(done, world, config, Some(identity), files);
    marker.write(dir).unwrap();
    marker
}

#[test]
fn a_sharded_checkpoint_is_written_read_back_checked_and_pruned() {
    let root = scratch("sharded-checkpoint");
    let dir = root.join(step_dir_name(2));
    let written = save(&dir, 2, 2);

    // Read back: the marker as written, the format named, each rank's
    // tensors as given.
    let read = open_for_load(&dir, 2, &[0, 1]).unwrap();
    assert_eq!(read, written);
    assert_eq!(read.format, FORMAT);
    let text = std::fs::read_to_string(dir.join(COMPLETE)).unwrap();
    assert!(
        text.starts_with("{\n \"format\": \"hlatc-checkpoint/1\""),
        "{text}"
    );
    let r1 = read_safetensors(&dir.join("rank-00001.safetensors")).unwrap();
    assert_eq!(r1["w"], rank_state(1)[0].1);
    assert_eq!(problem(&dir, 2, &[0, 1], &[0]).unwrap(), None);

    // Another world size is refused, not passed over.
    let e = open_for_load(&dir, 4, &[0]).unwrap_err();
    assert!(matches!(
        e,
        ShardedCheckpointError::WorldSize {
            recorded: 2,
            world: 4,
            ..
        }
    ));
    assert!(
        e.to_string()
            .contains("a checkpoint of 2 ranks; this step runs on 4"),
        "{e}"
    );
    assert!(problem(&dir, 4, &[0], &[]).is_err());

    // A corrupt rank file is named, on load and on resume; the other
    // process's check passes.
    let copy = root.join(step_dir_name(3));
    std::fs::create_dir_all(&copy).unwrap();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
    }
    let mut marker = Marker::read(&copy).unwrap();
    marker.steps_done = 3;
    marker.write(&copy).unwrap();
    let rank1 = copy.join("rank-00001.safetensors");
    let mut bytes = std::fs::read(&rank1).unwrap();
    *bytes.last_mut().unwrap() ^= 1;
    std::fs::write(&rank1, bytes).unwrap();
    let e = open_for_load(&copy, 2, &[0, 1]).unwrap_err();
    assert!(matches!(&e, ShardedCheckpointError::Changed { file } if *file == rank1));
    assert!(
        e.to_string()
            .contains("rank-00001.safetensors: its sha256 is not the one"),
        "{e}"
    );
    assert_eq!(
        problem(&copy, 2, &[1], &[]).unwrap(),
        Some(SkipReason::Corrupt {
            name: "rank-00001.safetensors".into()
        })
    );
    assert_eq!(problem(&copy, 2, &[0], &[0]).unwrap(), None);

    // A marker of another step than its directory's name.
    let renamed = root.join(step_dir_name(5));
    std::fs::rename(&copy, &renamed).unwrap();
    assert_eq!(
        problem(&renamed, 2, &[0], &[]).unwrap(),
        Some(SkipReason::StepMismatch {
            marked: 3,
            named: 5
        })
    );
    std::fs::remove_dir_all(&renamed).unwrap();

    // No marker, a marker of another format, and what a save into the
    // directory again leaves: no marker, no rank file past its world.
    let e = Marker::read(&root).unwrap_err();
    assert!(matches!(e, ShardedCheckpointError::NoMarker { .. }), "{e}");
    std::fs::write(root.join(COMPLETE), r#"{"format": "other/2"}"#).unwrap();
    let e = Marker::read(&root).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: format \"other/2\", not {FORMAT}",
            root.join(COMPLETE).display()
        )
    );
    std::fs::remove_file(root.join(COMPLETE)).unwrap();
    prepare_save(&dir, 1, true).unwrap();
    assert!(!dir.join(COMPLETE).exists());
    assert!(dir.join("rank-00000.safetensors").exists());
    assert!(!dir.join("rank-00001.safetensors").exists());
    assert_eq!(
        problem(&dir, 2, &[0], &[]).unwrap(),
        Some(SkipReason::NoMarker)
    );
    assert!(matches!(
        prepare_save(&dir.join("rank-00000.safetensors"), 1, true),
        Err(ShardedCheckpointError::SaveIntoFile { .. })
    ));
    assert!(matches!(
        write_file(&dir, COMPLETE, b""),
        Err(ShardedCheckpointError::BadName { .. })
    ));

    // Pruning after the save of step 8, keeping 2: of the complete ones
    // before it, 6 stays; 2 (now without its marker) goes on process 0
    // only, 4 (complete, the third newest) on every process; 10, newer,
    // stays.
    for done in [4, 6, 8, 10] {
        save(&root.join(step_dir_name(done)), 1, done);
    }
    prune(&root, 8, 2, false).unwrap();
    assert_eq!(steps(&root).unwrap(), [2, 6, 8, 10]);
    prune(&root, 8, 2, true).unwrap();
    assert_eq!(steps(&root).unwrap(), [6, 8, 10]);
    std::fs::remove_dir_all(&root).unwrap();
}

/// `hlatc.jax.Trainer`'s checkpoints bind each rank file to its save by
/// the sha256 `COMPLETE` lists: rank 1 of another run's save (the same
/// names and shapes, other values) is refused by name, on load and on
/// resume.
#[test]
fn a_rank_file_of_another_run_is_refused_by_the_markers_sha256() {
    let root = scratch("sharded-checkpoint-mixed");
    let (ours, theirs) = (root.join("ours"), root.join("theirs"));
    save(&ours, 2, 4);
    prepare_save(&theirs, 2, true).unwrap();
    let other = Literal::from_f32(vec![2, 2], &[7.0; 4]).unwrap();
    write_rank_file(&theirs, 1, &[("w".to_string(), other)]).unwrap();
    let rank1 = ours.join("rank-00001.safetensors");
    std::fs::copy(theirs.join("rank-00001.safetensors"), &rank1).unwrap();
    let e = open_for_load(&ours, 2, &[0, 1]).unwrap_err();
    assert!(
        matches!(&e, ShardedCheckpointError::Changed { file } if *file == rank1),
        "{e}"
    );
    assert_eq!(
        problem(&ours, 2, &[0, 1], &[0]).unwrap(),
        Some(SkipReason::Corrupt {
            name: "rank-00001.safetensors".into()
        })
    );
    std::fs::remove_dir_all(&root).unwrap();
}
