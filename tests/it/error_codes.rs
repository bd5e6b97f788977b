//! An error's code (`hlatc::Error::code`, printed by the CLI as
//! `error[CODE]:`): the path of its variants, which a script and the other
//! tests match instead of the sentence.

use hlatc::error_code::snake_case;
use hlatc::usage::UsageKind;
use hlatc::Error;

#[test]
fn a_usage_error_is_coded_by_its_category() {
    for (kind, code) in [
        (UsageKind::OutOfRange, "usage.out_of_range"),
        (UsageKind::Conflict, "usage.conflict"),
        (UsageKind::NotFound, "usage.not_found"),
    ] {
        assert_eq!(Error::usage(kind, "a message").code().to_string(), code);
    }
}

#[test]
fn wrappers_are_followed_down_to_the_case() {
    let e: Error = hlatc::run_identity::RunIdentityError::UnknownField {
        field: "model.rope_theat".into(),
        known: Vec::new(),
    }
    .into();
    assert_eq!(e.code().parts(), ["artifact", "identity", "unknown_field"]);
    let io = Error::io(
        "x".as_ref(),
        std::io::Error::from(std::io::ErrorKind::NotFound),
    );
    assert_eq!(io.code().to_string(), "artifact.io");
    // An artifacts error raised by the training library is the same code.
    let through_train: Error = hlatc::train::Error::Artifact(hlatc::artifacts::Error::File {
        path: "b".into(),
        message: "m".into(),
    })
    .into();
    assert_eq!(through_train.code().to_string(), "artifact.file");
}

#[test]
fn an_options_refusal_is_coded_by_its_typed_name() {
    let mut o = hlatc::compile_step::CompileOptions::default();
    let e: Error = o
        .set(
            hlatc::compile_step::spellings::CompileOption::Tp,
            Some("two"),
        )
        .unwrap_err()
        .into();
    assert_eq!(e.code().to_string(), "option.tp");
}

#[test]
fn camel_case_names_become_snake_case() {
    assert_eq!(snake_case("OutOfRange"), "out_of_range");
    assert_eq!(snake_case("Io"), "io");
    assert_eq!(snake_case("RunCheckpoint"), "run_checkpoint");
}

#[test]
fn every_code_is_a_path_of_snake_case_names_and_lists_the_walks_codes() {
    let every = hlatc::every_error_code::every_code();
    assert!(every.len() > 300, "{} codes", every.len());
    for code in &every {
        assert!(
            code.split('.').all(|name| !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')),
            "{code} is not a path of snake-case names"
        );
    }
    // Codes the walk gives, through each kind of wrapper, are listed.
    let pass_report = hlatc::compile_step::spellings::CompileOption::PassReport;
    for code in [
        "artifact.identity.unknown_field",
        "not_written.runtime.pjrt",
        "not_written.artifact.io",
        "rank_inputs.tensors.io",
        "plan.compile.artifact.step.parallel",
        "plan.run_refused.fsdp",
        "plan.option.kernels",
        "kernel.imported.json",
        "usage.conflict",
        &format!("option.{}", pass_report.keyword()),
    ] {
        assert!(every.iter().any(|c| c == code), "{code} is not listed");
    }
    assert!(!every.iter().any(|c| c.starts_with("train.") || c == "chip"));
}
