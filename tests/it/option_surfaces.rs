//! The surfaces made from the option table (`hlatc::compile_step::spellings`)
//! that live in files of their own language: `hlatc.compile_step`'s
//! signature in the wrapper and in the stub, and the book's tables of
//! every option (the command line's and Python's). Each is the text
//! between two marker lines; a row added to the table fails here until
//! `HLATC_BLESS=1 cargo test --test it option_surfaces` writes it, and
//! the failure shows the lines that differ.
//!
//! And the command line the options write, `CompileOptions::command_line`
//! (issue 69): the planner's and the memory fit's commands are written
//! from the options, not spelled by hand. Every option the spelling list
//! names is written when it is not its default, and `hlatc compile` of the
//! words builds the library's own bundle of the options, byte for byte.

use crate::support::{hlatc, scratch, stderr};
use hlatc::compile_step::spellings::{CompileOption, DefaultValue, Spelling, SPELLINGS};
use hlatc::compile_step::{
    compile_step, CompileOptions, ModelSource, OptimizerOverrides, PyValue, ReplicaGroupForm, Takes,
};
use hlatc::memory_plan::DeviceMemory;
use hlatc::models::{EpExchange, KernelRequest, Parallelism};
use hlatc::passes::neuron_check::Chip;
use hlatc::passes::{RematPolicy, RoundingPolicy, Target};
use hlatc::precision::Precision;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A keyword's default as Python writes it.
fn python_default(s: &hlatc::compile_step::spellings::Spelling) -> String {
    match s.default {
        DefaultValue::Off => "False".into(),
        DefaultValue::Unset => "None".into(),
        DefaultValue::Empty => "()".into(),
        DefaultValue::Value(v) if matches!(s.python_type, "int" | "float") => v.into(),
        DefaultValue::Value(v) => format!("\"{v}\""),
    }
}

/// `compile_step`'s keywords, a line each, as the wrapper and the stub
/// declare them.
fn python_signature() -> String {
    SPELLINGS
        .iter()
        .filter_map(|s| {
            let keyword = s.python?;
            let (ty, default) = (s.python_type, python_default(s));
            Some(format!("    {keyword}: {ty} = {default},\n"))
        })
        .collect()
}

/// A flag as a command line writes it: `--tp T`.
fn flag_words(o: CompileOption) -> String {
    let s = o.spelling();
    match o.takes() {
        Takes::Switch => format!("--{}", s.flag),
        _ => format!("--{} {}", s.flag, s.value_name),
    }
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

/// What `--help` says of an option, to its first sentence's end (or the
/// default it states in words).
fn first_sentence(help: &str) -> &str {
    let ends = [help.find(". "), help.find(" [default")];
    let end = ends.into_iter().flatten().min().unwrap_or(help.len());
    &help[..end]
}

fn book_default(s: &hlatc::compile_step::spellings::Spelling) -> String {
    match s.default {
        DefaultValue::Off => "off".into(),
        DefaultValue::Unset | DefaultValue::Empty => String::new(),
        DefaultValue::Value(v) => format!("`{v}`"),
    }
}

/// The command line's table: every flag of `hlatc compile`, its Python
/// keyword and default.
fn cli_table() -> String {
    let mut t = String::from("| flag | Python | default | what |\n| --- | --- | --- | --- |\n");
    for &o in CompileOption::ALL {
        let s = o.spelling();
        let python = s.python.map(|k| format!("`{k}`")).unwrap_or_default();
        t.push_str(&format!(
            "| `{}` | {python} | {} | {} |\n",
            cell(&flag_words(o)),
            book_default(s),
            cell(first_sentence(s.help)),
        ));
    }
    t
}

/// Python's table: every keyword of `compile_step`, its type, default and
/// flag.
fn python_table() -> String {
    let mut t = String::from("| keyword | type | default | flag |\n| --- | --- | --- | --- |\n");
    for &o in CompileOption::ALL {
        let s = o.spelling();
        let Some(keyword) = s.python else { continue };
        t.push_str(&format!(
            "| `{keyword}` | `{}` | `{}` | `--{}` |\n",
            cell(s.python_type),
            python_default(s),
            s.flag
        ));
    }
    t
}

/// The `Literal` type of each option of a fixed set, as its row's Python
/// type names it (`Optional[Rounding]`: `Rounding`), with its names; in
/// table order, once each.
fn option_types() -> Vec<(&'static str, &'static Spelling, Vec<&'static str>)> {
    const TYPING: [&str; 9] = [
        "Optional", "Union", "Sequence", "Mapping", "Any", "Dict", "List", "Tuple", "Literal",
    ];
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for &o in CompileOption::ALL {
        let (s, Some(names)) = (o.spelling(), o.choices()) else {
            continue;
        };
        let words = s.python_type.split(|c: char| !c.is_ascii_alphanumeric());
        let mut types = words.filter(|w| w.starts_with(char::is_uppercase) && !TYPING.contains(w));
        if let Some(ty) = types.next() {
            if seen.insert(ty) {
                out.push((ty, s, names));
            }
        }
    }
    out
}

/// `_types.py`'s definitions of [`option_types`].
fn option_type_definitions() -> String {
    let mut t = String::new();
    for (ty, s, names) in option_types() {
        let quoted: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
        let one_line = format!("{ty} = Literal[{}]\n", quoted.join(", "));
        let keyword = s.python.map(|k| format!(" and `{k}=`")).unwrap_or_default();
        t.push_str(&format!("#: The names `--{}`{keyword} take.\n", s.flag));
        if one_line.len() <= 100 {
            t.push_str(&one_line);
        } else {
            t.push_str(&format!("{ty} = Literal[\n"));
            for q in quoted {
                t.push_str(&format!("    {q},\n"));
            }
            t.push_str("]\n");
        }
    }
    t
}

/// The names of [`option_types`], a line each, as `pattern` writes one
/// from the type and its row.
fn option_type_lines(pattern: fn(&str, &Spelling) -> String) -> String {
    option_types()
        .into_iter()
        .map(|(ty, s, _)| pattern(ty, s))
        .collect()
}

/// The generated region of `file`, between the line holding `begin` and
/// the next holding `end`, held to `want` (or written, when blessing).
fn hold(file: &str, begin: &str, end: &str, want: &str) {
    let path = root().join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let start = text
        .find(begin)
        .and_then(|at| text[at..].find('\n').map(|n| at + n + 1))
        .unwrap_or_else(|| panic!("{file}: no line with {begin:?}"));
    let stop = text[start..]
        .find(end)
        .and_then(|at| text[..start + at].rfind('\n').map(|n| n + 1))
        .unwrap_or_else(|| panic!("{file}: no line with {end:?} after {begin:?}"));
    let have = &text[start..stop];
    if have == want {
        return;
    }
    if std::env::var_os("HLATC_BLESS").is_some() {
        let blessed = format!("{}{want}{}", &text[..start], &text[stop..]);
        std::fs::write(&path, blessed).unwrap();
        return;
    }
    panic!(
        "{file} is not what the option table makes (HLATC_BLESS=1 cargo test --test it \
         option_surfaces writes it):\n{}",
        diff(have, want)
    );
}

/// The lines of `have` not in `want` (`-`) and of `want` not in `have`
/// (`+`).
fn diff(have: &str, want: &str) -> String {
    let (h, w): (Vec<&str>, Vec<&str>) = (have.lines().collect(), want.lines().collect());
    let gone = h.iter().filter(|l| !w.contains(l)).map(|l| format!("-{l}"));
    let new = w.iter().filter(|l| !h.contains(l)).map(|l| format!("+{l}"));
    gone.chain(new).collect::<Vec<_>>().join("\n")
}

const PY_BEGIN: &str = "# <compile options: generated from the option table>";
const PY_END: &str = "# </compile options>";
const MD_BEGIN: &str = "<!-- compile options: generated from the option table -->";
const MD_END: &str = "<!-- /compile options -->";

#[test]
fn the_wrapper_and_the_stub_declare_the_tables_keywords() {
    let signature = python_signature();
    hold("python/hlatc/__init__.py", PY_BEGIN, PY_END, &signature);
    hold("python/hlatc/_hlatc.pyi", PY_BEGIN, PY_END, &signature);
}

const TYPES_BEGIN: &str = "# <option types: generated from the option table>";
const TYPES_END: &str = "# </option types>";
const NAMES_BEGIN: &str = "# <option type names: generated from the option table>";
const NAMES_END: &str = "# </option type names>";
const CHOICES_BEGIN: &str = "# <option types by keyword: generated from the option table>";
const CHOICES_END: &str = "# </option types by keyword>";

#[test]
fn the_option_types_are_the_tables() {
    hold(
        "python/hlatc/_types.py",
        TYPES_BEGIN,
        TYPES_END,
        &option_type_definitions(),
    );
    let quoted = option_type_lines(|ty, _| format!("    \"{ty}\",\n"));
    let bare = option_type_lines(|ty, _| format!("    {ty},\n"));
    let by_keyword = option_type_lines(|ty, s| match s.python {
        Some(keyword) => format!("    \"{keyword}\": {ty},\n"),
        None => String::new(),
    });
    hold(
        "python/hlatc/_types.py",
        CHOICES_BEGIN,
        CHOICES_END,
        &by_keyword,
    );
    hold("python/hlatc/_types.py", NAMES_BEGIN, NAMES_END, &quoted);
    hold("python/hlatc/__init__.py", NAMES_BEGIN, NAMES_END, &quoted);
    hold("python/hlatc/__init__.py", TYPES_BEGIN, TYPES_END, &bare);
    hold("python/hlatc/_hlatc.pyi", TYPES_BEGIN, TYPES_END, &bare);
}

#[test]
fn the_book_lists_every_option_of_the_table() {
    hold("docs/src/cli.md", MD_BEGIN, MD_END, &cli_table());
    hold("docs/src/python.md", MD_BEGIN, MD_END, &python_table());
}

/// A word `option` reads that is not its default, chosen by the kind of
/// value it takes (so an option added to the table has one): `None` for a
/// switch.
fn changed_word(option: CompileOption) -> Option<String> {
    let s = option.spelling();
    let word = match option.python_value().expect("a library option") {
        PyValue::Bool => return None,
        PyValue::Int => "3",
        PyValue::Float => "0.5",
        PyValue::Name => {
            let names = option.choices().expect("a fixed set");
            let default = match s.default {
                DefaultValue::Value(v) => v,
                _ => "",
            };
            // Not the preset CompileOptions::default() names either.
            let n = names.iter().find(|n| **n != default && **n != "hlat-7b");
            return n.map(|n| n.to_string());
        }
        PyValue::Path | PyValue::Config => "some/config.json",
        PyValue::CommaList => "cse,dce",
        PyValue::Names => "remat",
        PyValue::Pairs => "attention=blocked:8",
        PyValue::IntOrWord => "1024",
    };
    Some(word.to_string())
}

/// Options with every library option changed from its default (the model
/// named by a preset; `--config` is the other way to name it). Not all of
/// them build together; only their words are read.
pub(crate) fn every_option_changed() -> CompileOptions {
    let mut o = CompileOptions::default();
    for &option in CompileOption::ALL {
        if option.is_library() && option != CompileOption::Config {
            o.set(option, changed_word(option).as_deref()).unwrap();
        }
    }
    o
}

/// Every option read back from the words [`CompileOptions::settings`]
/// writes: set in turn on the defaults, they give the same settings.
#[test]
fn every_option_reads_back_what_it_writes() {
    let o = every_option_changed();
    let settings = o.settings().unwrap();
    let set: BTreeSet<CompileOption> = settings.iter().map(|s| s.option).collect();
    let library: BTreeSet<CompileOption> = CompileOption::ALL
        .iter()
        .copied()
        .filter(|o| o.is_library() && *o != CompileOption::Config)
        .collect();
    assert_eq!(set, library);
    let mut again = CompileOptions::default();
    for s in &settings {
        again.set(s.option, s.value.as_deref()).unwrap();
    }
    assert_eq!(again.settings().unwrap(), settings);
    let mut config = CompileOptions::default();
    config
        .set(CompileOption::Config, Some("a/config.json"))
        .unwrap();
    let words = config.command_line().unwrap();
    assert_eq!(words, ["--config", "a/config.json"]);
}

/// A word the option's codec cannot read is refused naming the option as
/// each front end spells it.
#[test]
fn a_word_an_option_cannot_read_is_refused_naming_it() {
    let mut o = CompileOptions::default();
    let e = o.set(CompileOption::Tp, Some("two")).unwrap_err();
    assert_eq!(e.option, CompileOption::Tp);
    assert_eq!(e.given, "two");
    let e = o.set(CompileOption::Remat, Some("most")).unwrap_err();
    assert_eq!(e.option, CompileOption::Remat);
    assert!(e.problem.starts_with("unknown remat policy 'most'"), "{e}");
    assert!(o.set(CompileOption::Out, Some("dir")).is_err());
}

/// `_types.py`'s `Instance`: the planner's instance kinds, one a line,
/// generated so that a kind the planner gains is a name Python's types
/// take.
#[test]
fn the_instance_type_is_the_planners_kinds() {
    let names: String = hlatc::plan::Instance::ALL
        .iter()
        .map(|i| format!("    \"{}\",\n", i.name()))
        .collect();
    hold(
        "python/hlatc/_types.py",
        "# <instances: generated from the planner's instance kinds>",
        "# </instances>",
        &format!("Instance = Literal[\n{names}]\n"),
    );
}

/// `hlatc.plan`'s defaults are the library's ([`PlanOptions`]'
/// constants, which `hlatc plan`'s flags take as theirs). PyO3 prints a
/// default that is not a literal as `...`, so the Rust signature writes
/// them as literals, which stubtest holds to the stub and this to the
/// library.
///
/// [`PlanOptions`]: hlatc::plan::PlanOptions
#[test]
fn python_plans_defaults_are_the_librarys() {
    use hlatc::plan::PlanOptions as P;
    let stub = std::fs::read_to_string(root().join("python/hlatc/_hlatc.pyi")).unwrap();
    let at = stub.find("\ndef plan(").expect("the stub declares plan");
    let signature = &stub[at..at + stub[at..].find(") -> Plan").unwrap()];
    for (keyword, default) in [
        ("instance: Instance", format!("\"{}\"", P::INSTANCE.name())),
        ("nodes: int", P::NODES.to_string()),
        ("global_batch: int", P::GLOBAL_BATCH.to_string()),
        ("top: int", P::TOP.to_string()),
        ("threads: int", P::THREADS.to_string()),
    ] {
        let line = format!("    {keyword} = {default},");
        assert!(signature.contains(&line), "plan's stub lacks `{line}`");
    }
    let source = std::fs::read_to_string(root().join("python/src/plan.rs")).unwrap();
    let literals = format!(
        "instance=\"{}\",\n    nodes={}, global_batch={}, top={},",
        P::INSTANCE.name(),
        P::NODES,
        P::GLOBAL_BATCH,
        P::TOP
    );
    assert!(
        source.contains(&literals),
        "plan's PyO3 signature lacks {literals}"
    );
    assert!(source.contains(&format!("threads={},", P::THREADS)));
}

/// The options the libraries' messages name ([`OptionName`]) are the
/// option table's: each typed name a row's Python keyword, each flag that
/// row's flag, so a refusal spells the option as the reader wrote it
/// whichever front end prints it.
///
/// [`OptionName`]: hlatc::models::option_name::OptionName
#[test]
fn the_options_messages_name_are_the_tables() {
    use hlatc::models::option_name::OptionName;
    use strum::IntoEnumIterator;
    for name in OptionName::iter() {
        // The loader's options and a run's (`hlatc train --packing`, the
        // Python loader's `packing=`), not the step's.
        let not_the_steps = [
            (OptionName::Packing, "--packing"),
            (OptionName::TextField, "--text-field"),
            (OptionName::Tokenizer, "--tokenizer"),
            (OptionName::Keep, "--keep"),
        ];
        if let Some((_, flag)) = not_the_steps.iter().find(|(n, _)| *n == name) {
            assert_eq!(name.flag(), *flag);
            continue;
        }
        let row = CompileOption::by_keyword(name.keyword())
            .unwrap_or_else(|| panic!("{name:?}: no option's keyword is {}", name.keyword()));
        assert_eq!(row.flag(), name.flag(), "{name:?}");
    }
}

#[test]
fn every_spelled_option_is_written_when_it_is_not_its_default() {
    let words = crate::option_surfaces::every_option_changed()
        .command_line()
        .unwrap();
    for s in SPELLINGS.iter().filter(|s| s.python.is_some()) {
        // `--config` is the other way to name the model.
        if s.flag == "config" {
            continue;
        }
        let flag = format!("--{}", s.flag);
        assert!(words.contains(&flag), "{flag} is not written: {words:?}");
    }
    // The defaults write nothing but the model.
    let plain = CompileOptions::default().command_line().unwrap();
    assert_eq!(plain, ["--model", "hlat-7b"]);
    let config = CompileOptions {
        model: ModelSource::ConfigFile("my config.json".into()),
        ..CompileOptions::default()
    };
    assert_eq!(
        config.command_line_text().unwrap(),
        "--config 'my config.json'"
    );
    let json = CompileOptions {
        model: ModelSource::ConfigJson {
            json: "{}".into(),
            name: "config (dict)".into(),
        },
        ..CompileOptions::default()
    };
    assert_eq!(
        json.command_line().unwrap_err().to_string(),
        "config (dict) is not a preset or a config.json on disk, so no command line names it"
    );
}

#[test]
fn a_change_is_the_flags_it_adds() {
    let from = CompileOptions {
        model: ModelSource::Preset("tiny".into()),
        parallel: Parallelism {
            tp: 2,
            dp: 2,
            ..Parallelism::SINGLE
        },
        ..CompileOptions::default()
    };
    let to = CompileOptions {
        batch_size: Some(4),
        remat: RematPolicy::FullLayer,
        parallel: Parallelism {
            dp: 4,
            zero1: true,
            ..from.parallel
        },
        ..from.clone()
    };
    assert_eq!(
        to.change_from(&from).flags(),
        "--batch-size 4 --remat full-layer --dp 4 --zero1"
    );
    assert_eq!(
        to.change_from(&from).keywords(),
        "batch_size=4, remat=\"full-layer\", dp=4, zero1=True"
    );
    assert_eq!(from.change_from(&from).flags(), "");
}

/// `hlatc compile` of the words gives the library's bundle of the options.
#[test]
fn the_words_build_the_options_bundle() {
    let cases = [
        CompileOptions {
            model: ModelSource::Preset("tiny".into()),
            batch_size: Some(4),
            seq_len: Some(16),
            precision: Precision::Fp32,
            rounding: Some(RoundingPolicy::NearestEven),
            remat: RematPolicy::FullLayer,
            parallel: Parallelism {
                tp: 2,
                dp: 2,
                pp: 1,
                sequence_parallel: true,
                zero1: true,
                ..Parallelism::SINGLE
            },
            optimizer: OptimizerOverrides {
                lr_max: Some(1e-3),
                warmup_steps: Some(10),
                clip_norm: Some(0.5),
                ..OptimizerOverrides::default()
            },
            grad_accum: 2,
            replica_groups: ReplicaGroupForm::Iota,
            chip: Some(Chip::Trn2),
            device_memory: DeviceMemory::Bytes(1 << 34),
            ..CompileOptions::default()
        },
        CompileOptions {
            model: ModelSource::Preset("tiny".into()),
            seq_len: Some(16),
            target: Target::Cpu,
            remat: RematPolicy::None,
            kernels: vec![KernelRequest::parse("attention=blocked:8").unwrap()],
            module_markers: true,
            ..CompileOptions::default()
        },
        CompileOptions {
            model: ModelSource::Preset("tiny-moe".into()),
            batch_size: Some(4),
            seq_len: Some(16),
            target: Target::Cpu,
            capacity_factor: Some(1.25),
            parallel: Parallelism {
                dp: 4,
                ep: 2,
                ep_exchange: EpExchange::AllGather,
                ..Parallelism::SINGLE
            },
            ..CompileOptions::default()
        },
    ];
    for (k, o) in cases.iter().enumerate() {
        let dir = scratch(&format!("command-line-{k}"));
        let _ = std::fs::remove_dir_all(&dir);
        let (cli, lib) = (dir.join("cli"), dir.join("lib"));
        let words = o.command_line().unwrap();
        let mut args = vec!["compile".to_string()];
        args.extend(words.iter().cloned());
        args.extend(["--out".to_string(), cli.display().to_string()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = hlatc(&args);
        assert!(out.status.success(), "{words:?}: {}", stderr(&out));
        let compiled = compile_step(o).unwrap();
        hlatc::step_programs::write_bundle(&compiled, &lib).unwrap();
        assert_same_files(&cli, &lib);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Every file under `a` is under `b` with the same bytes, and no more.
fn assert_same_files(a: &Path, b: &Path) {
    let list = |d: &Path| {
        let mut v: Vec<_> = walk(d)
            .into_iter()
            .map(|p| p.strip_prefix(d).unwrap().to_path_buf())
            .collect();
        v.sort();
        v
    };
    let (la, lb) = (list(a), list(b));
    assert_eq!(la, lb);
    for rel in la {
        assert!(
            std::fs::read(a.join(&rel)).unwrap() == std::fs::read(b.join(&rel)).unwrap(),
            "{} differs",
            rel.display()
        );
    }
}

fn walk(d: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(d).unwrap() {
        let p = e.unwrap().path();
        match p.is_dir() {
            true => out.extend(walk(&p)),
            false => out.push(p),
        }
    }
    out
}
