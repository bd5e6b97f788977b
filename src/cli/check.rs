//! `hlatc check`: the Neuron pre-flight on any module or bundle.

use super::console::{note, out};
use hlatc::compiler::util::input_file;
use hlatc::passes::neuron_check::{
    check_module, check_planned_step, CheckReport, Chip, Finding, IntegerFlags, Sdk,
    INSTRUCTION_LIMIT, RULES, SDK_COMMIT,
};
use hlatc::text::TextPositions;
use hlatc::{Error, Format};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Say what neuronx-cc would refuse in a module, before an hour's compile.
///
/// Reads HLO text, a serialized HloModuleProto (from any stack: JAX,
/// torch-xla, the Neuron compile cache's model.hlo_module.pb) or a bundle
/// directory `hlatc compile` wrote, and checks it against the rules the
/// Neuron SDK documents, each with its NCC_ error code: unsupported
/// types (f64, complex, FNUZ and e4m3fn 8-bit floats, f4e2m1fn),
/// unrecognized custom-call targets, dynamic shapes, conditionals,
/// variadic reductions, reduce-precision, non-default RNG algorithms,
/// reduce-window and convolution forms neuronx-cc refuses, integer ops
/// without an integer datapath, 64-bit integers narrowed to 32 bits,
/// loops without a static trip count, gathers and scatters at iota indices
/// past their operand, sort on trn2, replica-id in one program for every
/// rank, and input and output tensors past a core's HBM (16 GiB on trn1,
/// 24 GiB on trn2). `hlatc check --rules` lists them for the chip and SDK, with
/// the page (or public report) each rule was read from.
///
/// Every finding is a line `FILE:LINE:COL: instruction %name: NCC_CODE
/// what (detail), advice`. A rule whose page gives no code shows its own
/// name in brackets (`[conditional]`). Lines and columns are those of the
/// text file read; for a proto they are those of the text `hlatc fmt FILE`
/// prints, and for a bundle those of its model.hlo.txt.
///
/// A refusal is what neuronx-cc stops on; a warning what it compiles
/// while losing something (an integer op run in f32, a 64-bit integer
/// narrowed) or what hlatc cannot prove fine. The exit status is 2 when
/// there is a refusal, 0 otherwise (1 for an error reading the module).
///
/// The instruction count is a lower bound: the TensorE instructions the
/// dots need (128 x 128 x 512 tiles), which neuronx-cc's own count (every
/// engine, after tiling and unrolling) can only exceed.
#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
hlatc check dump.hlo                           HLO text: positions in the file\n  \
hlatc check model.hlo_module.pb --target trn2  a proto: positions in `hlatc fmt`'s text\n  \
hlatc check build/hlat-7b                      a bundle, for its own --target\n  \
hlatc check dump.hlo --sdk next --format json  the next SDK's defaults, for tools\n  \
hlatc check dump.hlo --target trn3             trn3: f8e4m3fn native, int64 as on trn2\n  \
hlatc check --rules --target trn2              the rules, their codes and sources")]
pub struct Args {
    /// A module (HLO text or HloModuleProto) or a bundle directory
    #[arg(required_unless_present = "rules")]
    path: Option<PathBuf>,
    /// List the rules that apply on the chip under the SDK's defaults, with
    /// their codes and sources, instead of checking
    #[arg(long)]
    rules: bool,
    /// The chip, as neuronx-cc's --target names it (default: a bundle's
    /// own --target, else trn1)
    #[arg(long, value_enum)]
    target: Option<ChipArg>,
    /// Whose compiler defaults to assume for the integer flags a module
    /// does not pin: 2.32 (integer downcasts warn, 64-bit integers are
    /// narrowed) or next (the release its notes announce: downcasts are
    /// errors, trn2 and later run int64 natively). A bundle hlatc wrote
    /// pins both flags in compile_flags.json, and is checked under those
    /// [default: 2.32]
    #[arg(long, value_enum)]
    sdk: Option<SdkArg>,
    /// text: a line per finding; json: one object for tools
    #[arg(long, value_enum, default_value = "text")]
    format: OutputFormat,
}

/// A Trainium chip, as neuronx-cc's `--target` names it (`check
/// --target`, `compile --chip`).
#[derive(Clone, Copy, clap::ValueEnum)]
pub(super) enum ChipArg {
    Trn1,
    Trn2,
    Trn3,
}

impl From<ChipArg> for Chip {
    fn from(c: ChipArg) -> Chip {
        match c {
            ChipArg::Trn1 => Chip::Trn1,
            ChipArg::Trn2 => Chip::Trn2,
            ChipArg::Trn3 => Chip::Trn3,
        }
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum SdkArg {
    #[value(name = "2.32")]
    V2_32,
    Next,
}

impl From<SdkArg> for Sdk {
    fn from(s: SdkArg) -> Sdk {
        match s {
            SdkArg::V2_32 => Sdk::V2_32,
            SdkArg::Next => Sdk::Next,
        }
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum OutputFormat {
    Text,
    Json,
}

/// The module to check and the text its findings point into.
struct Input {
    module: hlatc::Module,
    /// The file findings are located in, as printed.
    shown: PathBuf,
    /// That file's text, or the printed module's for a proto.
    text: Source,
    /// A bundle's own chip (its compile_flags.json's --target).
    chip: Option<Chip>,
    /// A bundle's compile flags (its compile_flags.json), which may pin
    /// the integer flags.
    flags: Vec<String>,
    /// Whether hlatc built it with a memory plan (its manifest's
    /// `memory_per_rank`): the plan, not the boundary's estimate, decides
    /// whether it fits, as when `hlatc compile` checked it.
    planned: bool,
}

enum Source {
    /// A text file: read again only if a finding needs a position.
    File(PathBuf),
    /// A proto: its module printed as `hlatc fmt` prints it.
    Printed,
}

pub fn main(a: Args) -> Result<ExitCode, Error> {
    let Some(path) = a.path.as_deref().filter(|_| !a.rules) else {
        let chip = a.target.map_or(Chip::Trn1, Chip::from);
        print_rules(chip, sdk(&a))?;
        return Ok(ExitCode::SUCCESS);
    };
    let programs = read(path)?;
    let mut refused = false;
    let mut json = Vec::new();
    for (name, input) in &programs {
        let chip = chip_of(&a, input);
        let judged = integer_flags(&a, input, chip)?;
        let report = match input.planned {
            true => check_planned_step(&input.module, chip, judged.flags),
            false => check_module(&input.module, chip, judged.flags),
        };
        refused |= report.refused();
        let positions = if report.names_instructions() {
            positions(input)?
        } else {
            None
        };
        let shown = input.shown.display().to_string();
        match a.format {
            OutputFormat::Text => {
                if let Some(name) = name {
                    out!("{name}:")?;
                }
                if matches!(input.text, Source::Printed) && report.names_instructions() {
                    note!(
                        "{shown} is a proto: lines and columns are those of the text `hlatc fmt {shown}` prints"
                    )?;
                }
                for f in &report.findings {
                    out!("{}", f.line(&shown, positions.as_ref()))?;
                }
                out!("{shown}: {}", summary(&report, &judged))?;
            }
            OutputFormat::Json => {
                let j = Json::new(&shown, input, &report, &judged, positions.as_ref());
                let v = serde_json::to_value(&j)?;
                json.push(match name {
                    Some(n) => serde_json::json!({"program": n, "check": v}),
                    None => v,
                });
            }
        }
    }
    if let OutputFormat::Json = a.format {
        // One program's report as it always was; a bundle of several, a
        // list of each under its program's name.
        let v = match (programs.len(), json.pop()) {
            (1, Some(only)) => only,
            (_, last) => serde_json::Value::Array(json.into_iter().chain(last).collect()),
        };
        let s = serde_json::to_string_pretty(&v)?;
        out!("{s}")?;
    } else if let Some(total) = manifest_memory(path) {
        let chip = programs
            .first()
            .map_or(Chip::Trn1, |(_, input)| chip_of(&a, input));
        let core = chip.hbm_per_core();
        let verdict = match total > core {
            true => {
                "over it: the step does not fit a core (compile wrote it under --device-memory)"
            }
            false => "fits",
        };
        out!(
            "{}: memory plan per rank {} (manifest.json), of {chip}'s {} per core: {verdict}",
            path.display(),
            hlatc::memory_plan::gib(total),
            hlatc::memory_plan::gib(core)
        )?;
    }
    if matches!(a.format, OutputFormat::Text) && programs.len() > 1 {
        let verdict = if refused {
            "refused: neuronx-cc would refuse a program"
        } else {
            "no program refused"
        };
        out!("{}: {} programs, {verdict}", path.display(), programs.len())?;
    }
    Ok(if refused {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

/// The rules that apply on `chip` under `sdk`, a line each: code,
/// severity, id, what, and the SDK pages read.
fn print_rules(chip: Chip, sdk: Sdk) -> Result<(), Error> {
    out!("rules for {chip} under SDK {sdk} defaults (sources: aws-neuron/aws-neuron-sdk at {SDK_COMMIT}):")?;
    for r in RULES {
        let Some(severity) = r.severity(chip, sdk) else {
            continue;
        };
        let code = r.code.ncc().unwrap_or_else(|| "(no code)".to_string());
        out!(
            "  {code:<12} {:<8} {:<38} {}; {}",
            severity.name(),
            r.id,
            r.what,
            r.sources.join(", ")
        )?;
    }
    Ok(())
}

/// The SDK whose defaults fill what a module does not pin.
fn sdk(a: &Args) -> Sdk {
    a.sdk.map_or(Sdk::default(), Sdk::from)
}

/// The integer flags a module is judged under, and where they came from.
struct Judged {
    flags: IntegerFlags,
    /// `SDK 2.32 defaults`, `pinned in compile_flags.json`.
    from: String,
    /// The SDK whose defaults filled a flag the module does not pin.
    sdk: Option<Sdk>,
}

/// `input`'s integer flags: what its bundle pins, the rest from `--sdk`'s
/// defaults. `--sdk` where a bundle pins all the chip takes changes
/// nothing, which a note says.
fn integer_flags(a: &Args, input: &Input, chip: Chip) -> Result<Judged, Error> {
    let sdk = sdk(a);
    let read = IntegerFlags::from_compile_flags(&input.flags, sdk.integer_flags())
        .map_err(|e| Error::file(&input.shown, format!("compile_flags.json: {e}")))?;
    let takes = IntegerFlags::from(sdk).compile_flags(chip).len();
    let files = hlatc::bundle::FLAGS_FILE;
    Ok(match read.pinned {
        0 => Judged {
            flags: read.flags,
            from: format!("SDK {sdk} defaults"),
            sdk: Some(sdk),
        },
        n if n >= takes => {
            if a.sdk.is_some() {
                note!("the bundle pins its integer flags in {files}: --sdk changes nothing")?;
            }
            Judged {
                flags: read.flags,
                from: format!("pinned in {files}"),
                sdk: None,
            }
        }
        _ => Judged {
            flags: read.flags,
            from: format!("{files}, and SDK {sdk} defaults for the rest"),
            sdk: Some(sdk),
        },
    })
}

/// `trn1 (pinned in compile_flags.json: --implicit-integer-downcast=none):
/// 1 refusal in 942 instructions; ...`.
fn summary(r: &CheckReport, judged: &Judged) -> String {
    format!(
        "{} ({}: {}): {} in {} instructions; TensorE instructions at least {} (the dots' tiles alone, a lower bound on neuronx-cc's count), of its limit of {} per module",
        r.chip,
        judged.from,
        r.flags_shown(),
        r.tally(),
        r.instructions,
        r.tensor_instructions,
        INSTRUCTION_LIMIT
    )
}

/// Reads a module file or a bundle directory: a bundle of several
/// programs (gradient accumulation's two, a pipeline's four) as each
/// program under its name, in the order they run.
fn read(path: &Path) -> Result<Vec<(Option<String>, Input)>, Error> {
    if !path.is_dir() {
        return Ok(vec![(None, read_module(path)?)]);
    }
    if path.join(hlatc::bundle::PROTO_FILE).is_file() {
        super::bundle_digest::check_program(path, None, None)?;
        return Ok(vec![(None, read_bundle(path)?)]);
    }
    let (micro, apply) = (hlatc::bundle::MICRO_DIR, hlatc::bundle::APPLY_DIR);
    let ticks: Vec<&str> = hlatc::pipeline::Phase::ALL
        .iter()
        .map(|p| p.name())
        .collect();
    let names: Vec<&str> = if path.join(micro).is_dir() {
        vec![micro, apply]
    } else if ticks.iter().any(|t| path.join(t).is_dir()) {
        ticks.into_iter().chain([apply]).collect()
    } else {
        return Err(Error::file(
            path,
            format!(
                "is a directory without {} (nor {micro}/ and {apply}/, nor a pipeline's programs): not a bundle",
                hlatc::bundle::PROTO_FILE
            ),
        ));
    };
    names
        .into_iter()
        .map(|n| {
            let dir = path.join(n);
            if !dir.join(hlatc::bundle::PROTO_FILE).is_file() {
                return Err(Error::file(
                    &dir,
                    format!(
                        "has no {}: the bundle is incomplete",
                        hlatc::bundle::PROTO_FILE
                    ),
                ));
            }
            super::bundle_digest::check_program(&dir, Some(n), Some(path))?;
            Ok((Some(n.to_string()), read_bundle(&dir)?))
        })
        .collect()
}

/// Reads one program's bundle directory.
fn read_bundle(path: &Path) -> Result<Input, Error> {
    let proto = path.join(hlatc::bundle::PROTO_FILE);
    let text = path.join(hlatc::bundle::TEXT_FILE);
    // The proto is what neuronx-cc compiles; its findings are located
    // in the bundle's text of the same module.
    let module = load(&proto)?;
    let (shown, source) = if text.is_file() {
        (text.clone(), Source::File(text))
    } else {
        (proto, Source::Printed)
    };
    Ok(Input {
        module,
        shown,
        text: source,
        chip: bundle_chip(path),
        flags: bundle_flags(path),
        planned: manifest_memory(path).is_some(),
    })
}

/// The chip `input` is checked for: `--target`, else its bundle's own,
/// else trn1.
fn chip_of(a: &Args, input: &Input) -> Chip {
    a.target
        .map(Chip::from)
        .or(input.chip)
        .unwrap_or(Chip::Trn1)
}

/// The memory plan per rank a bundle hlatc wrote records (its manifest's
/// `memory_per_rank.total`), if it does.
fn manifest_memory(dir: &Path) -> Option<u64> {
    let manifest = dir.join(hlatc::bundle::MANIFEST_FILE);
    let text = input_file::read_to_string(&manifest, std::convert::identity).ok()?;
    let manifest: serde_json::Value = serde_json::from_str(&text).ok()?;
    manifest["memory_per_rank"]["total"].as_u64()
}

/// Reads a module file.
fn read_module(path: &Path) -> Result<Input, Error> {
    let module = load(path)?;
    // The format is told by the first bytes, as `load` told it.
    let mut head = Vec::with_capacity(4096);
    let bytes_are_text = input_file::open(path, std::convert::identity)
        .and_then(|(f, _)| std::io::Read::read_to_end(&mut std::io::Read::take(f, 4096), &mut head))
        .map(|_| Format::sniff(&head) == Format::Text)
        .unwrap_or(false);
    Ok(Input {
        module,
        shown: path.to_path_buf(),
        text: if bytes_are_text {
            Source::File(path.to_path_buf())
        } else {
            Source::Printed
        },
        chip: None,
        flags: Vec::new(),
        planned: false,
    })
}

/// Reads and verifies a module; a module that fails verification is one
/// neuronx-cc's own verifier refuses too, which the error says.
fn load(path: &Path) -> Result<hlatc::Module, Error> {
    match super::load(path) {
        Err(e @ Error::Artifact(hlatc::artifacts::Error::Verify { .. })) => {
            note!(
                "neuronx-cc verifies its input as well and would refuse this module (NCC_EVRF064)"
            )?;
            Err(e)
        }
        r => r,
    }
}

/// The chip a bundle's compile_flags.json names with --target.
fn bundle_chip(dir: &Path) -> Option<Chip> {
    bundle_flags(dir)
        .iter()
        .find_map(|f| f.strip_prefix("--target="))
        .and_then(Chip::from_name)
}

/// A bundle's compile_flags.json; none where it has none (a cpu bundle).
fn bundle_flags(dir: &Path) -> Vec<String> {
    let flags = dir.join(hlatc::bundle::FLAGS_FILE);
    input_file::read_to_string(&flags, std::convert::identity)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

/// Where each instruction is written in the text the findings point into.
fn positions(input: &Input) -> Result<Option<TextPositions>, Error> {
    let text = match &input.text {
        Source::File(p) => input_file::read_to_string(p, |e| Error::io(p, e))?,
        Source::Printed => hlatc::text::print_module(&input.module),
    };
    // The module was read from this text (or printed into it), so it
    // parses; should it not, findings go without positions.
    Ok(hlatc::text::instruction_positions(&text).ok())
}

#[derive(Serialize)]
struct Json<'a> {
    /// The file lines and columns refer to.
    file: &'a str,
    /// Whether that file is the text of a proto as `hlatc fmt` prints it.
    printed_from_proto: bool,
    chip: &'static str,
    /// The integer flags it was judged under, as neuronx-cc takes them.
    integer_flags: Vec<String>,
    /// Where they came from.
    flags_from: &'a str,
    /// The SDK whose defaults filled a flag the module does not pin; null
    /// where a bundle pins them all.
    sdk: Option<&'static str>,
    /// The aws-neuron/aws-neuron-sdk commit the rules were read from.
    sdk_docs_commit: &'static str,
    refused: bool,
    instructions: usize,
    /// A lower bound on neuronx-cc's instruction count: the TensorE
    /// instructions the dots need.
    tensor_instructions_at_least: u64,
    instruction_limit: u64,
    findings: Vec<JsonFinding<'a>>,
}

#[derive(Serialize)]
struct JsonFinding<'a> {
    severity: &'static str,
    rule: &'static str,
    /// `NCC_...`, or null where the SDK documents no code.
    code: Option<String>,
    computation: &'a str,
    instruction: Option<&'a str>,
    line: Option<usize>,
    column: Option<usize>,
    what: &'static str,
    detail: &'a str,
    advice: &'static str,
    sources: &'static [&'static str],
}

impl<'a> Json<'a> {
    fn new(
        file: &'a str,
        input: &Input,
        r: &'a CheckReport,
        judged: &'a Judged,
        positions: Option<&TextPositions>,
    ) -> Json<'a> {
        Json {
            file,
            printed_from_proto: matches!(input.text, Source::Printed),
            chip: r.chip.name(),
            integer_flags: r.flags.compile_flags(r.chip),
            flags_from: &judged.from,
            sdk: judged.sdk.map(Sdk::name),
            sdk_docs_commit: SDK_COMMIT,
            refused: r.refused(),
            instructions: r.instructions,
            tensor_instructions_at_least: r.tensor_instructions,
            instruction_limit: INSTRUCTION_LIMIT,
            findings: r
                .findings
                .iter()
                .map(|f| JsonFinding::new(f, positions))
                .collect(),
        }
    }
}

impl<'a> JsonFinding<'a> {
    fn new(f: &'a Finding, positions: Option<&TextPositions>) -> JsonFinding<'a> {
        let at = positions.and_then(|p| f.position(p));
        JsonFinding {
            severity: f.severity.name(),
            rule: f.rule.id,
            code: f.rule.code.ncc(),
            computation: &f.computation,
            instruction: f.instruction.as_deref(),
            line: at.map(|(l, _)| l),
            column: at.map(|(_, c)| c),
            what: f.rule.what,
            detail: &f.detail,
            advice: f.rule.advice,
            sources: f.rule.sources,
        }
    }
}
