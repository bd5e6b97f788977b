//! hlatc's errors as Python exceptions: each an `hlatc.Error` and also the
//! builtin exception it means (`except ValueError` catches a bad config,
//! `except OSError` a file that cannot be written), carrying the fields
//! that say where the problem is (a syntax error's line and column, a
//! config's key, a batch's row and column).
//!
//! Every variant of hlatc's error enums is mapped by name, with no
//! catch-all arm: a new variant in the Rust library is a compile error
//! here until it is given its class.
//!
//! Every exception raised carries its `code`, the one the CLI prints for
//! the same error (`hlatc::error_code`). Outside this module an exception
//! is made only with one: [`to_py`] (the walk's), [`Kind::coded`] and
//! [`coded`], the usage errors (`usage.KIND`), [`loader_error`],
//! [`sharded_checkpoint_error`] and [`INTERNAL`]; the class-by-variant
//! functions below make theirs uncoded and are reached only through
//! those.

use hlatc::artifacts::checkpoint::sharded::ShardedCheckpointError;
use hlatc::artifacts::checkpoint::CheckpointError as RustCheckpointError;
use hlatc::batch_check::BatchError as RustBatchError;
use hlatc::compiler::LiteralError;
use hlatc::fit::checkpoints::RunCheckpointError;
use hlatc::models::layout::LayoutError;
use hlatc::models::ConfigError as RustConfigError;
use hlatc::passes::neuron_check::LocatedFinding;
use hlatc::passes::{RematPolicy, Target};
use hlatc::pipeline::FormError;
use hlatc::precision::Precision;
use hlatc::run_identity::{changed_message, FieldChange, FrontEnd, RunIdentityError};
use hlatc::runtime::{RuntimeError, TensorFileError};
use hlatc::spmd::SpmdError;
use hlatc::train::loader::LoaderError;
use hlatc::train::run_error::RunError as RustRunError;
use hlatc::train_step::StepError;
use hlatc::usage::UsageKind;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyOSError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyDict, PyTuple, PyType};
use pyo3::IntoPyObjectExt;
use pyo3::PyTypeInfo;

create_exception!(hlatc, Error, PyException, "Every error hlatc raises.");

/// The builtin exception a class also derives from.
#[derive(Clone, Copy)]
enum Builtin {
    Value,
    OS,
    Runtime,
    Type,
}

impl Builtin {
    fn type_object(self, py: Python<'_>) -> Bound<'_, PyType> {
        match self {
            Builtin::Value => PyValueError::type_object(py),
            Builtin::OS => PyOSError::type_object(py),
            Builtin::Runtime => PyRuntimeError::type_object(py),
            Builtin::Type => PyTypeError::type_object(py),
        }
    }
}

/// An exception class under `hlatc.Error` that is also a builtin one.
/// `create_exception!` makes classes of one base, so these are made by
/// calling `type(name, (Error, builtin), namespace)`, once.
pub(crate) struct Kind {
    cell: GILOnceCell<Py<PyType>>,
    name: &'static str,
    doc: &'static str,
    builtin: Builtin,
    /// The hlatc class it refines (`Error` when None).
    parent: Option<&'static Kind>,
    /// Attributes every instance has, `None` unless the error sets them.
    fields: &'static [&'static str],
}

impl Kind {
    const fn new(
        name: &'static str,
        builtin: Builtin,
        fields: &'static [&'static str],
        doc: &'static str,
    ) -> Kind {
        Kind {
            cell: GILOnceCell::new(),
            name,
            doc,
            builtin,
            parent: None,
            fields,
        }
    }

    /// A class under `parent` that is also `builtin`: a `parent` error
    /// that code catching `builtin` catches too.
    const fn under(
        parent: &'static Kind,
        name: &'static str,
        builtin: Builtin,
        doc: &'static str,
    ) -> Kind {
        Kind {
            cell: GILOnceCell::new(),
            name,
            doc,
            builtin,
            parent: Some(parent),
            fields: &[],
        }
    }

    /// The class, made on first use.
    pub(crate) fn type_object<'py>(&self, py: Python<'py>) -> PyResult<&Bound<'py, PyType>> {
        let ty = self.cell.get_or_try_init(py, || {
            let dict = PyDict::new(py);
            dict.set_item("__module__", "hlatc")?;
            dict.set_item("__doc__", self.doc)?;
            for f in self.fields {
                dict.set_item(*f, py.None())?;
            }
            let base = match self.parent {
                Some(parent) => parent.type_object(py)?.clone(),
                None => Error::type_object(py),
            };
            let bases = PyTuple::new(py, [base, self.builtin.type_object(py)])?;
            py.get_type::<PyType>()
                .call1((self.name, bases, dict))?
                .downcast_into::<PyType>()
                .map(Bound::unbind)
                .map_err(PyErr::from)
        })?;
        Ok(ty.bind(py))
    }

    /// An exception of this class with `message` and `code`.
    pub(crate) fn coded(&self, code: impl ToString, message: impl Into<String>) -> PyErr {
        coded(self.with(message.into(), &[]), code)
    }

    /// An exception of this class with `message`, `code` and the
    /// attributes `fields`.
    pub(crate) fn coded_with(
        &self,
        code: impl ToString,
        message: String,
        fields: &[(&str, PyObject)],
    ) -> PyErr {
        coded(self.with(message, fields), code)
    }

    /// An exception of this class with `message`, its code left to the
    /// caller (private: see the module's comment).
    fn err(&self, message: impl Into<String>) -> PyErr {
        self.with(message.into(), &[])
    }

    /// An exception of this class with `message` and the attributes
    /// `fields`, its code left to the caller. (Should the class fail to be
    /// made, an `hlatc.Error`.)
    fn with(&self, message: String, fields: &[(&str, PyObject)]) -> PyErr {
        Python::with_gil(|py| {
            let ty = match self.type_object(py) {
                Ok(ty) => ty.clone(),
                Err(_) => Error::type_object(py),
            };
            let err = PyErr::from_type(ty, message);
            let value = err.value(py);
            for (name, v) in fields {
                // Setting an attribute on a fresh exception object cannot fail.
                let _ = value.setattr(*name, v);
            }
            err
        })
    }
}

pub(crate) static HLO_SYNTAX: Kind = Kind::new(
    "HloSyntaxError",
    Builtin::Value,
    &["path", "line", "column"],
    "HLO text that does not parse (also a ValueError): `path`, `line` and `column` (1-based) say where.",
);
pub(crate) static CONFIG: Kind = Kind::new(
    "ConfigError",
    Builtin::Value,
    &["key", "source"],
    "A model config or option hlatc refuses (also a ValueError): `key` names it (None for a \
     file-level problem), `source` the file or preset.",
);
pub(crate) static BATCH: Kind = Kind::new(
    "BatchError",
    Builtin::Value,
    &["input", "row", "column", "value", "rank"],
    "Token data a step cannot take (also a ValueError): `input`, `row`, `column` and `value` \
     say which id, `rank` the rank of a sharded run.",
);
pub(crate) static FILE: Kind = Kind::new(
    "FileError",
    Builtin::OS,
    &["path"],
    "A file that cannot be read or written, or is not what it should be (also an OSError): \
     `path` names it.",
);
pub(crate) static PROTO: Kind = Kind::new(
    "ProtoError",
    Builtin::Value,
    &["path"],
    "An HloModuleProto hlatc cannot read (also a ValueError; an unmodeled field is named).",
);
pub(crate) static VERIFY: Kind = Kind::new(
    "VerifyError",
    Builtin::Value,
    &["path"],
    "A module that parses but is not valid HLO (also a ValueError: shapes that do not agree, say).",
);
pub(crate) static PASS: Kind = Kind::new(
    "PassError",
    Builtin::Value,
    &[],
    "A pass that is unknown or fails on the module given (also a ValueError).",
);
pub(crate) static NEURON_REFUSED: Kind = Kind::new(
    "NeuronRefusedError",
    Builtin::Value,
    &["path", "findings"],
    "neuronx-cc would refuse the step (the Neuron pre-flight found a refusal; also a \
     ValueError); nothing was written to `path`. `findings` lists the refusals, each an `hlatc.NeuronFinding` (code, rule, severity, file, line, column, instruction, message; `str()` its line).",
);
pub(crate) static RUN: Kind = Kind::new(
    "RunError",
    Builtin::Runtime,
    &[],
    "XLA CPU refused or failed to run a program, or it would not fit in memory (also a \
     RuntimeError).",
);
// Private, so that every `UsageError` this crate raises is made by
// `usage_error` with its category.
static USAGE: Kind = Kind::new(
    "UsageError",
    Builtin::Value,
    &["argument", "category"],
    "Arguments that do not fit together, or one refused at the boundary (also a ValueError: \
     inputs against a step, options, a negative count); `argument` names the argument \
     refused, where one is, and `category` the kind of mistake ('out_of_range', 'conflict', \
     'unsupported', 'not_found', 'invalid').",
);
static USAGE_TYPE: Kind = Kind::under(
    &USAGE,
    "UsageTypeError",
    Builtin::Type,
    "An argument of a type hlatc does not take: a UsageError that is also a TypeError; \
     `argument` names it, and its `category` is 'invalid'.",
);
pub(crate) static DATA: Kind = Kind::new(
    "DataError",
    Builtin::Value,
    &[
        "path",
        "line",
        "column",
        "offset",
        "field",
        "setting",
        "tokenizer_vocab",
        "model_vocab",
    ],
    "A corpus, tokenizer or loader setting the data loader refuses (also a ValueError): \
     `path` names the file (or glob), `line` and `column` (1-based) or `offset` (a byte, \
     or in a token-id file an id's index) the place, `field` a JSONL field, `setting` a \
     loader setting; `tokenizer_vocab` and `model_vocab` the sizes of a tokenizer too \
     large for the model. Attributes that do not apply are None.",
);
pub(crate) static CHECKPOINT: Kind = Kind::new(
    "CheckpointError",
    Builtin::OS,
    &["path"],
    "A checkpoint directory that cannot be read or written (also an OSError): `path` \
     names the file or directory.",
);
pub(crate) static INTERNAL: Internal = Internal(Kind::new(
    "InternalError",
    Builtin::Runtime,
    &[],
    "A failure inside hlatc that no input should cause, a Rust panic included (also a \
     RuntimeError): please report it.",
));

/// `InternalError`'s class, whose every error made here is coded
/// `internal`: a panic, or a failure no typed error describes, has no
/// case of its own to name (one raised from a typed error, through
/// [`to_py`], has that error's code instead).
pub(crate) struct Internal(Kind);

impl Internal {
    pub(crate) fn err(&self, message: impl Into<String>) -> PyErr {
        self.0.coded(INTERNAL_CODE, message)
    }
}

/// The code of an `InternalError` no typed error describes; one of the
/// codes only Python raises (`PYTHON_CODES`).
const INTERNAL_CODE: &str = "internal";

/// The codes only the Python API raises, none of them the code of a Rust
/// error (`every_error_code` lists those): `docs/src/python.md` lists
/// these, and a test holds the two together.
pub(crate) const PYTHON_CODES: [&str; 3] = [INTERNAL_CODE, "jax.peer_lost", "launch.port_taken"];

/// Every class under `Error`, in the order `hlatc.__all__` names them.
pub(crate) static KINDS: [&Kind; 14] = [
    &HLO_SYNTAX,
    &CONFIG,
    &BATCH,
    &FILE,
    &PROTO,
    &VERIFY,
    &PASS,
    &NEURON_REFUSED,
    &RUN,
    &USAGE,
    &USAGE_TYPE,
    &DATA,
    &CHECKPOINT,
    &INTERNAL.0,
];

/// Registers every exception class in the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    // `code` on every `hlatc.Error` hlatc raises: the CLI's error code
    // where the error came from the library ([`to_py`]), `usage.KIND` for
    // an argument the Python layer refused, one of `PYTHON_CODES` for the
    // rest. None on the class, for an `hlatc.Error` raised by hand.
    Error::type_object(py).setattr("code", py.None())?;
    m.add("Error", Error::type_object(py))?;
    for kind in KINDS {
        m.add(kind.name, kind.type_object(py)?)?;
    }
    m.add("PYTHON_CODES", PYTHON_CODES.to_vec())?;
    Ok(())
}

/// What a name outside its fixed set is refused as.
#[derive(Clone, Copy)]
pub(crate) enum Unknown {
    /// A `ConfigError`, as a model config's unknown name is.
    Config,
    /// A `UsageError` out of range naming the argument (`what`), as
    /// `args` refuses an unknown name of the hardware or the loader's.
    Argument,
}

/// The value of `all` named `name`, or an error (`unknown`'s) naming the
/// ones there are (`what`: the option, in words; `keyword`: its argument).
/// A `ConfigError`'s code is the compile option's the CLI prints for the
/// same name (`option.remat`), an argument's `usage.out_of_range`.
pub(crate) fn named<T: Copy>(
    unknown: Unknown,
    (keyword, what): (&str, &str),
    name: &str,
    all: &[T],
    name_of: fn(T) -> &'static str,
) -> PyResult<T> {
    all.iter()
        .copied()
        .find(|t| name_of(*t) == name)
        .ok_or_else(|| {
            let known: Vec<&str> = all.iter().map(|t| name_of(*t)).collect();
            let message = format!("unknown {what} '{name}' (known: {})", known.join(", "));
            match unknown {
                Unknown::Config => CONFIG.coded(option_code(keyword), message),
                Unknown::Argument => usage_error(UsageKind::OutOfRange, Some(what), message),
            }
        })
}

/// The code of a compile option's refusal, `option.KEYWORD`, as the CLI
/// prints it for the option's flag; `usage.out_of_range` for an argument
/// no compile option is (a name outside its set).
pub(crate) fn option_code(keyword: &str) -> String {
    match hlatc::compile_step::spellings::CompileOption::by_keyword(keyword) {
        Some(o) => format!("option.{}", o.keyword()),
        None => format!("usage.{}", UsageKind::OutOfRange.name()),
    }
}

/// `precision=`'s preset, refused (as `unknown` says) naming the presets.
pub(crate) fn precision_named(unknown: Unknown, name: &str) -> PyResult<Precision> {
    named(
        unknown,
        ("precision", "precision"),
        name,
        &Precision::ALL,
        Precision::name,
    )
}

/// `remat=`'s policy, refused (as `unknown` says) naming the policies.
pub(crate) fn remat_named(unknown: Unknown, name: &str) -> PyResult<RematPolicy> {
    named(
        unknown,
        ("remat", "remat policy"),
        name,
        &RematPolicy::ALL,
        RematPolicy::name,
    )
}

/// `target=`'s compiler, refused (as `unknown` says) naming the targets.
pub(crate) fn target_named(unknown: Unknown, name: &str) -> PyResult<Target> {
    named(
        unknown,
        ("target", "target"),
        name,
        &Target::ALL,
        Target::name,
    )
}

/// `instance=`'s machine, refused as an argument naming the instances.
pub(crate) fn instance_named(name: &str) -> PyResult<hlatc::plan::Instance> {
    use hlatc::plan::Instance;
    named(
        Unknown::Argument,
        ("instance", "instance"),
        name,
        &Instance::ALL,
        Instance::name,
    )
}

/// `UsageError(message)` of category `kind`, about no one argument.
pub(crate) fn usage(kind: UsageKind, message: impl Into<String>) -> PyErr {
    usage_error(kind, None, message.into())
}

/// A `UsageError` of category `kind`, with `argument` where one argument
/// is at fault: the one maker of them (`argument_usage` and the others call
/// it), so that a caller can sort every refusal by `category` alone, as
/// the facade's own (`hlatc::usage::UsageKind`).
pub(crate) fn usage_error(kind: UsageKind, argument: Option<&str>, message: String) -> PyErr {
    USAGE.with(message, &usage_fields(kind, argument))
}

/// A `UsageError` of category `kind` about the argument `name` that its
/// type allows but the call does not (a tick past the schedule, a chip
/// for a cpu bundle).
pub(crate) fn argument_usage(kind: UsageKind, name: &str, message: String) -> PyErr {
    usage_error(kind, Some(name), message)
}

/// A `UsageTypeError` about `argument`: a value of a type it does not
/// take is input that is not what it should be.
pub(crate) fn usage_type_error(argument: &str, message: String) -> PyErr {
    USAGE_TYPE.with(message, &usage_fields(UsageKind::Invalid, Some(argument)))
}

/// The fields every `UsageError` (and `UsageTypeError`) carries.
/// Its `code` is the CLI's for a usage error, `usage.KIND`, unless the
/// error it describes has its own ([`to_py`] sets that).
fn usage_fields(kind: UsageKind, argument: Option<&str>) -> [(&'static str, PyObject); 3] {
    Python::with_gil(|py| {
        [
            ("argument", obj(py, argument)),
            ("category", obj(py, kind.name())),
            ("code", obj(py, format!("usage.{}", kind.name()))),
        ]
    })
}

/// The category of a tensor that does not convert: a value past its
/// type's range, or bytes that are not the tensor said.
pub(crate) fn literal_kind(e: &LiteralError) -> UsageKind {
    match e {
        LiteralError::OutOfRange { .. } => UsageKind::OutOfRange,
        LiteralError::ByteCount { .. }
        | LiteralError::BadBool { .. }
        | LiteralError::WideByte { .. }
        | LiteralError::NegativeDim(_) => UsageKind::Invalid,
    }
}

/// The category of tensors that do not fit a model's layout.
fn layout_kind(e: &LayoutError) -> UsageKind {
    match e {
        LayoutError::Missing { .. } => UsageKind::NotFound,
        LayoutError::Shape { .. } | LayoutError::Type { .. } => UsageKind::Invalid,
    }
}

/// The refusals as `hlatc.NeuronFinding`s, field by field (their lines,
/// should the type not load).
fn neuron_findings(py: Python<'_>, findings: &[LocatedFinding]) -> PyObject {
    let make = || -> PyResult<PyObject> {
        let ty = py.import("hlatc._types")?.getattr("NeuronFinding")?;
        let items = findings
            .iter()
            .map(|f| {
                ty.call1((
                    f.code.as_str(),
                    f.rule,
                    f.severity.name(),
                    f.file.as_str(),
                    f.line,
                    f.column,
                    f.computation.as_str(),
                    f.instruction.as_deref(),
                    f.message.as_str(),
                ))
                .map(Bound::unbind)
            })
            .collect::<PyResult<Vec<_>>>()?;
        Ok(obj(py, items))
    };
    make().unwrap_or_else(|_| {
        obj(
            py,
            findings.iter().map(|f| f.to_string()).collect::<Vec<_>>(),
        )
    })
}

fn obj<'py, T: IntoPyObjectExt<'py>>(py: Python<'py>, v: T) -> PyObject {
    v.into_py_any(py).unwrap_or_else(|_| py.None())
}

/// `err` with `code`. (An exception object takes attributes; one that
/// would not keeps its class's `code`.)
pub(crate) fn coded(err: PyErr, code: impl ToString) -> PyErr {
    Python::with_gil(|py| {
        let _ = err.value(py).setattr("code", code.to_string());
    });
    err
}

/// An exception of `kind` whose `path` is `path`.
fn path_error(kind: &Kind, message: String, path: &std::path::Path) -> PyErr {
    let path = Python::with_gil(|py| obj(py, path.display().to_string()));
    kind.with(message, &[("path", path)])
}

/// A `CheckpointError` about the file or directory `path`.
fn checkpoint_file_error(message: String, path: &str) -> PyErr {
    let path = Python::with_gil(|py| obj(py, path));
    CHECKPOINT.with(message, &[("path", path)])
}

/// The Python exception for a loader's error: a `DataError` with the
/// fields the variant names.
pub(crate) fn loader_error(e: &LoaderError) -> PyErr {
    use LoaderError as L;
    let message = e.to_string();
    Python::with_gil(|py| {
        let path = |p: &std::path::Path| ("path", obj(py, p.display().to_string()));
        let fields: Vec<(&str, PyObject)> = match e {
            L::NoMatch { pattern } | L::BadPattern { pattern, .. } => {
                vec![("path", obj(py, pattern.as_str()))]
            }
            // A corpus file that cannot be read is a DataError too: the
            // loader's every refusal is one class (its `path` names the file).
            L::Io { path: p, .. }
            | L::TokenFile { path: p, .. }
            | L::Tokenizer { path: p, .. }
            | L::NeedsTokenizer { path: p } => vec![path(p)],
            L::MalformedJson {
                path: p,
                line,
                column,
                ..
            } => vec![
                path(p),
                ("line", obj(py, *line)),
                ("column", obj(py, *column)),
            ],
            L::NotAnObject { path: p, line, .. } | L::Encode { path: p, line, .. } => {
                vec![path(p), ("line", obj(py, *line))]
            }
            L::MissingField {
                path: p,
                line,
                field,
            }
            | L::FieldNotText {
                path: p,
                line,
                field,
                ..
            } => vec![
                path(p),
                ("line", obj(py, *line)),
                ("field", obj(py, field.as_str())),
            ],
            L::NotUtf8 { path: p, offset } => vec![path(p), ("offset", obj(py, *offset))],
            // Where the first block that differs starts.
            L::CorpusChanged { path: p, start, .. } => {
                vec![path(p), ("offset", obj(py, *start))]
            }
            L::IdOutsideVocabulary {
                path: p,
                index,
                vocab,
                ..
            } => vec![
                path(p),
                ("offset", obj(py, *index)),
                ("model_vocab", obj(py, *vocab)),
            ],
            L::TokenizerPastVocabulary {
                path: p,
                tokenizer_vocab,
                model_vocab,
                ..
            } => vec![
                path(p),
                ("tokenizer_vocab", obj(py, *tokenizer_vocab)),
                ("model_vocab", obj(py, *model_vocab)),
            ],
            L::NoSuchToken { path: p, .. } => vec![path(p)],
            L::NotRegularFile(e) => vec![path(&e.path)],
            L::FlagOutsideVocabulary { flag, .. } => vec![("setting", obj(py, *flag))],
            L::EmptyCorpus { sources, .. } => vec![("path", obj(py, sources.as_str()))],
            L::Setting { setting, .. } => vec![("setting", obj(py, *setting))],
            L::NoSources | L::Position { .. } | L::WorkerGone => Vec::new(),
        };
        // The CLI's code for it (`loader.needs_tokenizer`), wherever the
        // loader raised it: `to_py` is not on every path that reaches here.
        let case: &'static str = e.into();
        let code = format!("loader.{}", hlatc::error_code::snake_case(case));
        DATA.coded_with(code, message, &fields)
    })
}

/// The Python exception for a checkpoint directory's error: an I/O
/// failure is a `CheckpointError` naming its path; a bad argument (no
/// checkpoint kept, a file name a checkpoint cannot hold) a `UsageError`.
fn checkpoint_error(e: &RustCheckpointError) -> PyErr {
    let message = e.to_string();
    match e {
        RustCheckpointError::Io { path, .. } => {
            checkpoint_file_error(message, &path.display().to_string())
        }
        RustCheckpointError::BadName { .. } => usage(UsageKind::Invalid, message),
        RustCheckpointError::KeepNone { .. } => usage(UsageKind::OutOfRange, message),
    }
}

/// The Python exception for a per-rank checkpoint's error: a file or
/// directory that is missing, not what it should be, or cannot be written
/// is a `FileError` naming it (the marker, where the marker is the
/// problem); another world size, or a file name a checkpoint cannot
/// hold, a `UsageError`. Its code is its own
/// (`hlatc::error_code::sharded_checkpoint`): no command raises it.
pub(crate) fn sharded_checkpoint_error(e: &ShardedCheckpointError) -> PyErr {
    use ShardedCheckpointError as S;
    let message = e.to_string();
    let err = match e {
        S::SaveIntoFile { dir }
        | S::MakeDir { dir, .. }
        | S::NoDirectory { dir }
        | S::NotDirectory { dir } => path_error(&FILE, message, dir),
        S::NoMarker { marker, .. } | S::NotMarker { marker, .. } | S::Format { marker, .. } => {
            path_error(&FILE, message, marker)
        }
        S::Missing { file } | S::Changed { file } | S::Io { path: file, .. } => {
            path_error(&FILE, message, file)
        }
        S::Tensors(t) => tensor_file_error(t, message),
        S::NotRegularFile(n) => path_error(&FILE, message, &n.path),
        S::WorldSize { .. } => usage(UsageKind::Conflict, message),
        S::BadName { .. } => usage(UsageKind::Invalid, message),
    };
    coded(err, hlatc::error_code::sharded_checkpoint(e))
}

/// A `ConfigError` with `key` and `source`.
fn config_key(message: String, key: Option<&str>, source: Option<&str>) -> PyErr {
    let fields = Python::with_gil(|py| [("key", obj(py, key)), ("source", obj(py, source))]);
    CONFIG.with(message, &fields)
}

fn config_error(e: &RustConfigError) -> PyErr {
    let message = e.to_string();
    match e {
        RustConfigError::Field {
            source_name, field, ..
        }
        | RustConfigError::RopeScaling {
            source_name, field, ..
        } => config_key(message, Some(field), Some(source_name)),
        RustConfigError::File { source_name, .. } => config_key(message, None, Some(source_name)),
        RustConfigError::Unreadable { path, .. } => path_error(&FILE, message, path),
        RustConfigError::UnknownPreset { .. } => config_key(message, Some("model"), None),
        RustConfigError::NotRegularFile(n) => path_error(&FILE, message, &n.path),
    }
}

fn step_error(e: &StepError) -> PyErr {
    let message = e.to_string();
    match e {
        StepError::Config(c) => config_error(c),
        StepError::Optimizer(_) => config_key(message, Some("optimizer"), None),
        StepError::Capacity(_) => config_key(message, Some("capacity_factor"), None),
        StepError::Accumulation { .. } => config_key(message, Some("grad_accum"), None),
        StepError::Parallel(_) => config_key(message, Some("parallel"), None),
        StepError::ContextKernel { .. }
        | StepError::ContextTile { .. }
        | StepError::RingKernel { .. } => config_key(message, Some("kernels"), None),
        StepError::Spmd(s) => match s {
            SpmdError::ChoiceOnOneDevice { .. } => config_key(message, Some("spmd"), None),
            SpmdError::RankOutsideEntry { .. } | SpmdError::RankNameTaken => INTERNAL.err(message),
        },
        // The graph the model's config passed every check for could not be
        // built or differentiated: hlatc's failure, not the input's.
        StepError::Build(_) | StepError::Autodiff(_) => INTERNAL.err(message),
        StepError::HostMemory(_) => RUN.err(message),
        StepError::PipelineForm(f) => match f {
            FormError::SendWithoutStages { .. } => config_key(message, Some("pp_send"), None),
            FormError::RematWithoutStages { .. } => config_key(message, Some("remat"), None),
        },
        StepError::UnpairedStageSend { .. } => config_key(message, Some("pp_send"), None),
        StepError::StageLayersDiffer { .. } | StepError::KeptValuesUnknown => INTERNAL.err(message),
    }
}

/// The runtime's errors: inputs that do not fit the program are a
/// `UsageError` (a count of them, as the facade sorts a count of ranks'
/// inputs, a conflict; a tensor of another shape or type invalid); the
/// rest (XLA CPU refusing, failing, out of memory) a `RunError`.
fn runtime_error(e: &RuntimeError, message: String) -> PyErr {
    use RuntimeError as R;
    match e {
        R::InputCount { .. }
        | R::ReplicatedRun { .. }
        | R::ReplicaListCount { .. }
        | R::ReplicaInputCount { .. } => usage(UsageKind::Conflict, message),
        R::ReplicaInputMismatch { .. } | R::InputMismatch { .. } => {
            usage(UsageKind::Invalid, message)
        }
        R::PluginNotFound { .. }
        | R::Pjrt(_)
        | R::Verify(_)
        | R::Preflight { .. }
        | R::Rejected { .. }
        | R::MultiDevice { .. }
        | R::MultiDeviceAssignment { .. }
        | R::TooManyReplicas { .. }
        | R::DeviceCount { .. }
        | R::Lowering { .. }
        | R::UnsupportedResult(_)
        | R::UnsupportedParameter { .. }
        | R::HostMemory(_)
        // Buffers the Python API never hands out: the trainer's own.
        | R::ArgumentDevice { .. }
        | R::ArgumentRuntime { .. }
        | R::OutputCount { .. } => RUN.err(message),
    }
}

fn tensor_file_error(e: &TensorFileError, message: String) -> PyErr {
    match e {
        TensorFileError::Io { path, .. }
        | TensorFileError::Format { path, .. }
        | TensorFileError::Dtype { path, .. }
        | TensorFileError::NoDtype { path, .. } => {
            path_error(&FILE, message, std::path::Path::new(path))
        }
        TensorFileError::NotRegularFile(n) => path_error(&FILE, message, &n.path),
    }
}

fn artifact_error(e: &hlatc::artifacts::Error) -> PyErr {
    use hlatc::artifacts::Error as A;
    let message = e.to_string();
    match e {
        A::Io { path, .. } | A::File { path, .. } => path_error(&FILE, message, path),
        A::Tensors(t) => tensor_file_error(t, message),
        A::Proto { path, .. } => path_error(&PROTO, message, path),
        A::Verify { path, .. } => path_error(&VERIFY, message, path),
        A::Config(c) => config_error(c),
        A::Step(s) => step_error(s),
        A::Pass(_) => PASS.err(message),
        A::Batch(b) => batch_error(b),
        A::NeuronRefused { dir, findings, .. } => {
            let fields = Python::with_gil(|py| {
                [
                    ("path", obj(py, dir.display().to_string())),
                    ("findings", neuron_findings(py, findings)),
                ]
            });
            NEURON_REFUSED.with(message, &fields)
        }
        A::State(s) => usage(state_kind(s), message),
        A::Identity(i) => identity_error(i),
        A::Lock(l) => lock_error(l, message),
        A::StateMetadata(m) => usage(state_metadata_kind(m), message),
        A::Checkpoint(c) => checkpoint_error(c),
        A::NotRegularFile(n) => path_error(&FILE, message, &n.path),
    }
}

fn train_error(e: &hlatc::train::Error) -> PyErr {
    use hlatc::train::Error as T;
    let message = e.to_string();
    match e {
        T::Artifact(a) => artifact_error(a),
        T::Runtime(r) => runtime_error(r, message),
        T::Verification(_) => RUN.err(message),
        T::Run(r) => run_error(r, message),
        T::Loader(l) => loader_error(l),
    }
}

/// The category of a training state, or the tensors a run starts from,
/// that does not fit the step. A tensor the step does not hold is not
/// found, as the facade sorts an input the step does not take.
fn state_kind(e: &hlatc::artifacts::state_error::StateError) -> UsageKind {
    use hlatc::artifacts::state_error::StateError as S;
    match e {
        S::MissingTensor { .. }
        | S::UnknownTensor { .. }
        | S::CheckpointTensor { .. }
        | S::StageParameter { .. }
        | S::UnknownParameter { .. } => UsageKind::NotFound,
        S::TensorShape { .. }
        | S::NotFloat { .. }
        | S::NotState { .. }
        | S::NotStepInput { .. }
        | S::ManifestShape { .. }
        | S::MasterBeforeParameter { .. } => UsageKind::Invalid,
        S::Layout { error, .. } => layout_kind(error),
        S::Convert { error, .. } => literal_kind(error),
        S::ParameterCount { .. } | S::RankCount { .. } => UsageKind::Conflict,
        S::NotHuggingFaceRanges { .. } => UsageKind::Unsupported,
    }
}

/// The category of a rank file that is another rank's, layout's, step's,
/// precision's or run's (its metadata unreadable: invalid).
fn state_metadata_kind(e: &hlatc::artifacts::state_metadata::StateMetadataError) -> UsageKind {
    use hlatc::artifacts::state_metadata::StateMetadataError as M;
    match e {
        M::WrongRank { .. }
        | M::WrongLayout { .. }
        | M::MixedSteps { .. }
        | M::OtherPrecision { .. }
        | M::MixedRuns { .. } => UsageKind::Conflict,
        M::Malformed { .. } => UsageKind::Invalid,
    }
}

/// A checkpoint directory's lock: one another run holds is a conflict;
/// one that cannot be read or written, no usage error at all but a
/// `CheckpointError` naming its file.
fn lock_error(e: &hlatc::artifacts::checkpoint_lock::LockError, message: String) -> PyErr {
    use hlatc::artifacts::checkpoint_lock::LockError as L;
    match e {
        L::Held { .. } => usage(UsageKind::Conflict, message),
        L::Io { path, .. } => checkpoint_file_error(message, &path.display().to_string()),
    }
}

/// A run's own failures (a step that failed on its devices, the state
/// that went with it, a loss that diverged) are a `RunError`; programs,
/// state and inputs that do not fit together a `UsageError`.
fn run_error(e: &RustRunError, message: String) -> PyErr {
    use RustRunError as R;
    match e {
        R::StepFailed { .. } | R::StateGone { .. } | R::Diverged { .. } => RUN.err(message),
        // As the facade sorts a batch packed otherwise than the step.
        R::PackedMismatch { .. } | R::ProgramCount { .. } => usage(UsageKind::Conflict, message),
        R::MissingInput { .. }
        | R::NoStateFor { .. }
        | R::UnknownOutput { .. }
        | R::NoOutput { .. } => usage(UsageKind::NotFound, message),
        R::StateNotReturned { .. } | R::FewerOutputs => usage(UsageKind::Invalid, message),
        R::NoRanks => usage(UsageKind::OutOfRange, message),
    }
}

fn batch_error(e: &RustBatchError) -> PyErr {
    use RustBatchError as B;
    let message = e.to_string();
    Python::with_gil(|py| {
        let fields = match e {
            B::OutOfVocabulary {
                input,
                row,
                col,
                value,
                ..
            }
            | B::DocumentResumed {
                input,
                row,
                col,
                value,
                ..
            }
            | B::Decreasing {
                input,
                row,
                col,
                value,
                ..
            }
            | B::DocumentAfterPadding {
                input,
                row,
                col,
                value,
                ..
            } => vec![
                ("input", obj(py, input.as_str())),
                ("row", obj(py, *row)),
                ("column", obj(py, *col)),
                ("value", obj(py, *value)),
            ],
            B::NotIds { input, .. } => vec![("input", obj(py, input.as_str()))],
            B::Shape { input, .. } => vec![("input", obj(py, *input))],
        };
        BATCH.with(message, &fields)
    })
}

/// The Python exception for `e`, its `code` the one the CLI prints for it.
pub fn to_py(e: hlatc::Error) -> PyErr {
    let code = e.code();
    coded(described(e), code)
}

/// The `PassError` of a pass pipeline run on a module from Python, coded
/// as `hlatc opt` codes it (`pass_on.unknown_pass`); the message is the
/// pass's own, as the module may have no file to name.
pub(crate) fn pass_error(e: hlatc::passes::PassError) -> PyErr {
    let message = e.to_string();
    // The code names the case, never the path.
    let code = hlatc::Error::PassOn {
        path: std::path::PathBuf::new(),
        source: e,
    }
    .code();
    PASS.coded(code, message)
}

/// The Python exception of `e`, by its kind, with its fields.
fn described(e: hlatc::Error) -> PyErr {
    use hlatc::Error as E;
    let message = e.to_string();
    match &e {
        E::Parse { path, source } => {
            let fields = Python::with_gil(|py| {
                [
                    ("path", obj(py, path.display().to_string())),
                    ("line", obj(py, source.line)),
                    ("column", obj(py, source.column)),
                ]
            });
            HLO_SYNTAX.with(message, &fields)
        }
        E::RunModule { source, .. } => runtime_error(source, message),
        // Standard output or error could not be written: an I/O failure.
        E::Output { stream, .. } => {
            let path = Python::with_gil(|py| obj(py, *stream));
            FILE.with(message, &[("path", path)])
        }
        // The device memory the plan is over: the argument that refuses it.
        E::DoesNotFit {
            plan,
            device_memory,
            fix,
        } => argument_usage(
            UsageKind::OutOfRange,
            "device_memory",
            hlatc::does_not_fit(plan, *device_memory, fix.as_ref(), FrontEnd::Python),
        ),
        E::Usage(u) => usage(u.kind, message),
        E::Option(o) => argument_usage(
            UsageKind::OutOfRange,
            o.option.keyword(),
            o.python_message(),
        ),
        E::Kernel(hlatc::kernel_choice::KernelChoiceError::Request(r)) => {
            usage(kernel_request_kind(r), message)
        }
        // A softmax kernel asked of a step whose passes say otherwise.
        E::Kernel(hlatc::kernel_choice::KernelChoiceError::SoftmaxPass { .. }) => {
            usage(UsageKind::Conflict, message)
        }
        // A kernel point `plan` does not price.
        E::Kernel(hlatc::kernel_choice::KernelChoiceError::NotPriced { .. }) => {
            argument_usage(UsageKind::Unsupported, "kernels", message)
        }
        // A kernel file that cannot be read, or does not fit the step.
        E::Kernel(
            hlatc::kernel_choice::KernelChoiceError::Imported(_)
            | hlatc::kernel_choice::KernelChoiceError::NoCpuForm { .. },
        ) => CONFIG.err(message),
        E::NotWritten { .. } => RUN.err(message),
        // A chip for a cpu bundle: the argument that does not fit the target.
        E::Chip(_) => argument_usage(UsageKind::Conflict, "chip", message),
        E::Metrics(hlatc::metrics::MetricsError::Io { file, .. })
        | E::Metrics(hlatc::metrics::MetricsError::Syntax { file, .. }) => {
            path_error(&FILE, message, std::path::Path::new(file))
        }
        E::Metrics(hlatc::metrics::MetricsError::NotRegularFile(n)) => {
            path_error(&FILE, message, &n.path)
        }
        E::Artifact(a) => artifact_error(a),
        E::Train(t) => train_error(t),
        E::Plan(p) => plan_error(p, message),
        E::RunCheckpoint(r) => run_checkpoint_error(r),
        // A state or tensor that does not fit what it feeds.
        E::StateLayout(l) => usage(layout_kind(l), message),
        E::Tensor { source, .. } => usage(literal_kind(source), message),
        E::Bind { source, .. } => usage(
            match source {
                hlatc::passes::bind::BindError::UnknownParameter { .. } => UsageKind::NotFound,
                hlatc::passes::bind::BindError::Mismatch { .. } => UsageKind::Invalid,
            },
            message,
        ),
        E::Json(_) => usage(UsageKind::Invalid, message),
        E::RankInputs { source, .. } => artifact_error(source),
        E::PassOn { .. } => PASS.err(message),
        E::Plot { path, .. } => path_error(&FILE, message, path),
    }
}

/// The category of a kernel request that cannot be read: a name outside
/// the points' or implementations' fixed sets is out of range, as an
/// unknown name of any fixed set is.
fn kernel_request_kind(e: &hlatc::models::kernels::KernelRequestError) -> UsageKind {
    use hlatc::models::kernels::KernelRequestError as K;
    match e {
        K::NoEquals(_) | K::BadArgument { .. } => UsageKind::Invalid,
        K::UnknownPoint { .. } | K::UnknownImplementation { .. } => UsageKind::OutOfRange,
        K::Repeated(_) => UsageKind::Conflict,
    }
}

/// The Python exception for a planning error: a flag, layout or cluster
/// that does not fit together is a `UsageError`; a calibration file's row,
/// or a file that cannot be read or written, a `FileError` naming it.
fn plan_error(e: &hlatc::plan::PlanError, message: String) -> PyErr {
    use hlatc::plan::PlanError as P;
    match e {
        // The option as Python spells it, and the argument named.
        P::Option {
            option,
            given,
            problem,
        } => argument_usage(
            plan_option_kind(*option),
            option.keyword(),
            format!("{}={given}: {problem}", option.keyword()),
        ),
        P::NothingFits { .. } => usage(UsageKind::Conflict, message),
        // `append_measured_run` takes no `layout`: its layout is its
        // degrees, which the field "layout" names together.
        P::RunRefused { field, .. } if *field == "layout" => usage(UsageKind::Conflict, message),
        P::RunRefused { field, .. } => argument_usage(run_field_kind(field), field, message),
        P::Spec { spec, message } => argument_usage(
            UsageKind::Invalid,
            "layout",
            format!("layout={spec:?}: {message}"),
        ),
        P::Cluster(_) | P::Layout { .. } => usage(UsageKind::Conflict, message),
        P::Compile { .. } => usage(UsageKind::Unsupported, message),
        P::Calibration { path, .. } | P::Io { path, .. } => {
            path_error(&FILE, message, std::path::Path::new(path))
        }
        P::Chart(_) => FILE.err(message),
        P::NotRegularFile(n) => path_error(&FILE, message, &n.path),
    }
}

/// The category of a plan's option that no plan can take: a count or
/// price out of range, a precision Trainium does not compute in, an
/// output path where no file can be written, a kernel's tile that does
/// not cut the sequence.
fn plan_option_kind(option: hlatc::plan::PlanOption) -> UsageKind {
    use hlatc::plan::PlanOption as O;
    match option {
        O::Nodes | O::GlobalBatch | O::SeqLen | O::Top | O::Price => UsageKind::OutOfRange,
        O::Precision => UsageKind::Unsupported,
        O::Json | O::Plot | O::Layout => UsageKind::Invalid,
        O::Kernel => UsageKind::Conflict,
    }
}

/// The category of a measured run's field that reading it back would
/// refuse. `RunRefused` says which field, not why: a cell's text, or a
/// model that does not resolve, is invalid; a setting the layout's checks
/// name conflicts with the degrees; a count (`nodes`, `global_batch`, ...)
/// is out of range, as one below 1 is (`append_measured_run` sorts a
/// `nodes` or `global_batch` of 1 or more, which the layout refused, as a
/// conflict).
fn run_field_kind(field: &str) -> UsageKind {
    match field {
        "model" | "sdk" | "source" => UsageKind::Invalid,
        "sequence_parallel" | "remat" => UsageKind::Conflict,
        _ => UsageKind::OutOfRange,
    }
}

/// Runs `f`, turning a Rust panic into `hlatc.InternalError` (a bug in
/// hlatc, never a crash of the interpreter or a `PanicException`).
pub fn guarded<T>(f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown".into());
            Err(INTERNAL.err(format!(
                "internal error in hlatc (please report it): {what}"
            )))
        }
    }
}

/// The Python exception of a run's identity that cannot be used: another
/// run's (`IdentityError`, with each field's two values), a name
/// `allow_changes` may not use, a record that is not an identity, a file
/// that cannot be read.
fn identity_error(e: &RunIdentityError) -> PyErr {
    let message = e.to_string();
    match e {
        RunIdentityError::Changed {
            source_name,
            changes,
        } => changed_error(source_name, changes),
        // A field of this run's identity, as `allow_changes` names it.
        RunIdentityError::UnknownField { .. } => usage(UsageKind::NotFound, message),
        RunIdentityError::Malformed { .. } => CHECKPOINT.err(message),
        RunIdentityError::Io { path, .. } => path_error(&FILE, message, path),
        RunIdentityError::NotRegularFile(n) => path_error(&FILE, message, &n.path),
    }
}

/// `hlatc.IdentityError` (`hlatc._identity`'s, a `UsageError` with each
/// differing field's `(checkpoint, run)` values): a checkpoint `source`
/// of another run.
fn changed_error(source: &str, changes: &[FieldChange]) -> PyErr {
    Python::with_gil(|py| {
        let message = changed_message(source, changes, FrontEnd::Python);
        let fields = PyDict::new(py);
        for c in changes {
            fields.set_item(&c.field, (&c.saved, &c.now))?;
        }
        let class = py.import("hlatc._identity")?.getattr("IdentityError")?;
        Err(PyErr::from_value(class.call1((message, fields))?))
    })
    .unwrap_or_else(|e: PyErr| e)
}

/// The Python exception for a checkpoint directory that cannot be taken
/// up: another run's (`IdentityError`, with each field's two values), a
/// checkpoint without its state or with metrics hlatc cannot read
/// (`CheckpointError`), a directory another run holds (`UsageError`).
fn run_checkpoint_error(e: &RunCheckpointError) -> PyErr {
    let message = e.to_string();
    match e {
        RunCheckpointError::Identity(e) => identity_error(e),
        RunCheckpointError::NoState { checkpoint } => checkpoint_file_error(message, checkpoint),
        RunCheckpointError::Metrics(m) => match m {
            hlatc::metrics::MetricsError::Io { file, .. }
            | hlatc::metrics::MetricsError::Syntax { file, .. } => {
                checkpoint_file_error(message, file)
            }
            hlatc::metrics::MetricsError::NotRegularFile(n) => {
                checkpoint_file_error(message, &n.path.display().to_string())
            }
        },
        RunCheckpointError::Dir(d) => checkpoint_error(d),
        RunCheckpointError::Lock(l) => lock_error(l, message),
    }
}
