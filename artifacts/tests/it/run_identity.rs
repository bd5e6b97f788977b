//! A run's identity (issue 59), as a resume compares it: the data's
//! fields (seed, batch, sequence length) are compared one by one and
//! allowed as a group. The refusals of resumes through the CLI are the
//! root crate's (`tests/it/run_identity.rs`).

#[test]
fn the_data_fields_are_compared_and_allowed_as_a_group() {
    use hlatc_artifacts::run_identity::{RunIdentity, RunIdentityError};
    let saved = RunIdentity::default().with_data_order(0, 8, 16);
    let now = RunIdentity::default().with_data_order(7, 8, 16);
    match now.check_resume(&saved, &[], 10, "syn/step-00000010") {
        Err(RunIdentityError::Changed { changes, .. }) => {
            assert_eq!(changes.len(), 1);
            assert_eq!(changes[0].field, "data.seed");
            assert_eq!(changes[0].saved.as_deref(), Some("0"));
            assert_eq!(changes[0].now.as_deref(), Some("7"));
        }
        other => panic!("not Changed: {other:?}"),
    }
    let (next, allowed) = now
        .check_resume(&saved, &["data".into()], 10, "syn/step-00000010")
        .unwrap();
    assert_eq!(allowed.len(), 1);
    assert_eq!(next.allowed_changes[0].field, "data.seed");
}
