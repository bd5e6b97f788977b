//! Every code an error of hlatc's can have ([`every_code`]): the walk of
//! `error_code` written as a list, from the same case names (each enum's
//! `strum::VariantNames`), so that `docs/src/cli.md` lists every code and
//! a renamed variant is a visible change there.
//!
//! The two are kept together by their tests: every code a test sees is
//! checked to be in this list, and the docs' list is this one.

use crate::error_code::snake_case;
use crate::usage::UsageKind;
use strum::{IntoEnumIterator, VariantNames};
use Wrap::{Instead, Under};

/// What a case of an error wraps, by the codes of the wrapped error.
enum Wrap {
    /// Its codes follow the case's name (`artifact.config.missing_key`).
    Under(Vec<String>),
    /// Its codes are the case's (a training error raised through the
    /// facade is coded as the training library codes it).
    Instead(Vec<String>),
}

/// Every code [`crate::Error::code`] can give, and those of the library
/// errors the Python API raises that no [`crate::Error`] wraps
/// ([`crate::error_code::sharded_checkpoint`]), sorted. A code that wraps
/// another (`not_written.`, `rank_inputs.`, `plan.compile.`) is listed
/// with each code it can wrap.
pub fn every_code() -> Vec<String> {
    let mut codes = facade(true);
    codes.extend(sharded_checkpoint());
    codes.sort();
    codes.dedup();
    codes
}

/// The facade's codes; `with_plan` is false under `plan.compile`, whose
/// compile never plans.
fn facade(with_plan: bool) -> Vec<String> {
    use crate::compile_step::spellings::CompileOption;
    cases::<crate::Error>(&[
        (
            "Usage",
            Under(
                UsageKind::ALL
                    .iter()
                    .map(|k| k.name().to_string())
                    .collect(),
            ),
        ),
        (
            "Option",
            Under(
                CompileOption::ALL
                    .iter()
                    .map(|o| o.keyword().to_string())
                    .collect(),
            ),
        ),
        ("Artifact", Under(artifact())),
        ("NotWritten", Under(train())),
        ("RankInputs", Under(artifact())),
        (
            "Plan",
            if with_plan {
                Under(plan())
            } else {
                Instead(Vec::new())
            },
        ),
        (
            "Kernel",
            Under(cases::<hlatc_step::kernel_choice::KernelChoiceError>(&[(
                "Imported",
                Under(names::<hlatc_models::imported_kernel::ImportedKernelError>()),
            )])),
        ),
        (
            "RunCheckpoint",
            Under(cases::<crate::fit::checkpoints::RunCheckpointError>(&[
                (
                    "Dir",
                    Under(names::<hlatc_artifacts::checkpoint::CheckpointError>()),
                ),
                (
                    "Lock",
                    Under(names::<hlatc_artifacts::checkpoint_lock::LockError>()),
                ),
                (
                    "Identity",
                    Under(names::<hlatc_artifacts::run_identity::RunIdentityError>()),
                ),
                ("Metrics", Under(names::<crate::metrics::MetricsError>())),
            ])),
        ),
        ("RunModule", Under(names::<hlatc_runtime::RuntimeError>())),
        ("Metrics", Under(names::<crate::metrics::MetricsError>())),
        (
            "StateLayout",
            Under(names::<hlatc_models::layout::LayoutError>()),
        ),
        ("Tensor", Under(names::<hlatc_compiler::LiteralError>())),
        ("Bind", Under(names::<hlatc_passes::bind::BindError>())),
        ("PassOn", Under(names::<hlatc_passes::PassError>())),
        ("Plot", Under(names::<crate::plot::PlotError>())),
        // A training error is coded by its own cases, not under `train`.
        ("Train", Instead(train())),
        // A chip without Neuron: two options that do not fit together.
        (
            "Chip",
            Instead(vec![format!("usage.{}", UsageKind::Conflict.name())]),
        ),
    ])
}

/// A per-rank checkpoint's codes ([`crate::error_code::sharded_checkpoint`]).
fn sharded_checkpoint() -> Vec<String> {
    use hlatc_artifacts::checkpoint::sharded::ShardedCheckpointError;
    cases::<ShardedCheckpointError>(&[(
        "Tensors",
        Under(names::<hlatc_runtime::TensorFileError>()),
    )])
    .into_iter()
    .map(|c| format!("sharded_checkpoint.{c}"))
    .collect()
}

fn artifact() -> Vec<String> {
    use hlatc_artifacts as a;
    cases::<a::Error>(&[
        ("Tensors", Under(names::<hlatc_runtime::TensorFileError>())),
        ("Config", Under(names::<hlatc_models::ConfigError>())),
        ("Step", Under(names::<hlatc_step::train_step::StepError>())),
        ("Pass", Under(names::<hlatc_passes::PassError>())),
        (
            "Batch",
            Under(names::<hlatc_step::batch_check::BatchError>()),
        ),
        (
            "Checkpoint",
            Under(names::<a::checkpoint::CheckpointError>()),
        ),
        ("State", Under(names::<a::state_error::StateError>())),
        (
            "Identity",
            Under(names::<a::run_identity::RunIdentityError>()),
        ),
        ("Lock", Under(names::<a::checkpoint_lock::LockError>())),
        (
            "StateMetadata",
            Under(names::<a::state_metadata::StateMetadataError>()),
        ),
    ])
}

fn train() -> Vec<String> {
    use hlatc_train as t;
    cases::<t::Error>(&[
        ("Artifact", Under(artifact())),
        ("Runtime", Under(names::<hlatc_runtime::RuntimeError>())),
        ("Loader", Under(names::<t::loader::LoaderError>())),
        (
            "Verification",
            Under(names::<t::verify_failure::VerifyFailure>()),
        ),
        ("Run", Under(names::<t::run_error::RunError>())),
    ])
}

fn plan() -> Vec<String> {
    use crate::plan::PlanOption;
    cases::<crate::plan::PlanError>(&[
        (
            "Option",
            Under(
                PlanOption::iter()
                    .map(|o| o.keyword().to_string())
                    .collect(),
            ),
        ),
        (
            "RunRefused",
            Under(
                crate::plan::calibration::RUN_FIELDS
                    .iter()
                    .map(|f| f.to_string())
                    .collect(),
            ),
        ),
        ("Compile", Under(facade(false))),
        ("Chart", Under(names::<crate::plot::PlotError>())),
    ])
}

/// `T`'s cases, by their names in snake case.
fn names<T: VariantNames>() -> Vec<String> {
    T::VARIANTS.iter().map(|v| snake_case(v)).collect()
}

/// `T`'s cases, each with the codes of what it wraps where `wraps` names
/// it (by its variant's name).
fn cases<T: VariantNames>(wraps: &[(&str, Wrap)]) -> Vec<String> {
    for (variant, _) in wraps {
        assert!(
            T::VARIANTS.contains(variant),
            "{variant} is not a case of {}",
            std::any::type_name::<T>()
        );
    }
    let mut out = Vec::new();
    for variant in T::VARIANTS {
        let name = snake_case(variant);
        match wraps.iter().find(|(v, _)| v == variant) {
            Some((_, Under(inner))) => out.extend(inner.iter().map(|c| format!("{name}.{c}"))),
            Some((_, Instead(codes))) => out.extend(codes.iter().cloned()),
            None => out.push(name),
        }
    }
    out
}

/// The codes that wrap another code; [`markdown_table`] lists the codes
/// they wrap once, not under each of them.
pub const WRAPPERS: [&str; 3] = ["not_written.", "rank_inputs.", "plan.compile."];

/// [`every_code`] as `docs/src/cli.md` lists it: a row for each group (a
/// code without its last name) with its cases, the wrapped codes left to
/// the rows of the codes they wrap.
pub fn markdown_table() -> String {
    let mut groups: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for code in every_code() {
        if WRAPPERS.iter().any(|w| code.starts_with(w)) {
            continue;
        }
        let (group, case) = code.rsplit_once('.').unwrap_or(("", &code));
        groups
            .entry(group.to_string())
            .or_default()
            .push(case.to_string());
    }
    let mut table = String::from("| group | cases |\n|---|---|\n");
    for (group, cases) in groups {
        let group = if group.is_empty() {
            "(none)".to_string()
        } else {
            format!("`{group}.`")
        };
        let cases: Vec<String> = cases.iter().map(|c| format!("`{c}`")).collect();
        table += &format!("| {group} | {} |\n", cases.join(", "));
    }
    table
}
