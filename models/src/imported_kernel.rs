//! A kernel brought from another stack (`--kernel attention=imported:FILE`):
//! HLO modules for its forward and its backward, as JAX lowers them, and
//! the calling convention that says what each module's parameters and
//! results are. FILE is the convention, a JSON object:
//!
//! ```json
//! {
//!   "point": "attention",
//!   "layout": "batch,heads,seq,head_dim",
//!   "masks": ["causal"],
//!   "forward": {"module": "fwd.hlo", "parameters": ["q", "k", "v"], "results": ["output"]},
//!   "backward": {"module": "bwd.hlo", "parameters": ["q", "k", "v", "d_output"],
//!                "results": ["d_q", "d_k", "d_v"]}
//! }
//! ```
//!
//! Module paths are relative to the convention's folder. A forward result
//! `residual:NAME` is kept for the backward, whose parameter of the same
//! name reads it. `layout` is every tensor's order of dimensions; a
//! module's `layouts` (`{"q": "batch,heads,head_dim,seq"}`) gives one role
//! another, which hlatc transposes to and from around the call (NKI's
//! flash kernels take q and k with `head_dim` before `seq`). Every key is
//! read or refused; every role is checked against the modules' parameters
//! and results when the file is read, and the operand shapes against the
//! step's when the step is built.

use crate::kernel_layout::{standard_form, TensorLayout};
use hlatc_compiler::formats::{proto, text};
use hlatc_compiler::graph::autodiff::BackwardOperand;
use hlatc_compiler::util::input_file::{self, NotRegularFile};
use hlatc_compiler::{ArrayShape, ElementType, Module, Shape};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What a parameter or result of an imported module is.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    Q,
    K,
    V,
    /// The attention's output.
    Output,
    /// A value the forward keeps for the backward.
    Residual(String),
    /// The adjoint of the output.
    DOutput,
    DQ,
    DK,
    DV,
}

impl Role {
    fn read(name: &str) -> Option<Role> {
        Some(match name {
            "q" => Role::Q,
            "k" => Role::K,
            "v" => Role::V,
            "output" => Role::Output,
            "d_output" => Role::DOutput,
            "d_q" => Role::DQ,
            "d_k" => Role::DK,
            "d_v" => Role::DV,
            _ => Role::Residual(name.strip_prefix("residual:")?.to_string()),
        })
    }

    /// The role as a convention writes it.
    pub fn name(&self) -> String {
        match self {
            Role::Q => "q".into(),
            Role::K => "k".into(),
            Role::V => "v".into(),
            Role::Output => "output".into(),
            Role::Residual(n) => format!("residual:{n}"),
            Role::DOutput => "d_output".into(),
            Role::DQ => "d_q".into(),
            Role::DK => "d_k".into(),
            Role::DV => "d_v".into(),
        }
    }

    /// The operand index (q 0, k 1, v 2) of an input or its adjoint.
    pub fn operand(&self) -> Option<usize> {
        match self {
            Role::Q | Role::DQ => Some(0),
            Role::K | Role::DK => Some(1),
            Role::V | Role::DV => Some(2),
            _ => None,
        }
    }
}

/// One of the kernel's modules, and the roles of its parameters and
/// results, in order.
#[derive(Clone, Debug)]
pub struct KernelModule {
    pub path: PathBuf,
    /// The module as read.
    pub module: Module,
    pub parameters: Vec<Role>,
    pub results: Vec<Role>,
    /// Each parameter's and result's layout; `None` for a residual, which
    /// passes as it is.
    pub parameter_layouts: Vec<Option<TensorLayout>>,
    pub result_layouts: Vec<Option<TensorLayout>>,
    /// What the step calls: the module, wrapped in the transposes that take
    /// every operand and result to and from `[batch, heads, seq, head_dim]`
    /// where its layout is another.
    pub callable: Module,
}

impl KernelModule {
    /// This module with `module` in place of the one read (the same
    /// parameters and results), its callable made again.
    pub fn with_module(&self, module: Module) -> Result<KernelModule, ImportedKernelError> {
        let callable = standard_form(&module, &self.parameter_layouts, &self.result_layouts)
            .map_err(|problem| ImportedKernelError::Convention {
                path: self.path.clone(),
                field: "layouts".into(),
                problem: problem.to_string(),
            })?;
        Ok(KernelModule {
            module,
            callable,
            ..self.clone()
        })
    }
}

/// A kernel read from its convention file.
#[derive(Clone, Debug)]
pub struct ImportedKernel {
    /// The convention file, as it was named.
    pub path: PathBuf,
    pub forward: KernelModule,
    pub backward: KernelModule,
    /// What each backward parameter reads (a residual by its place among
    /// the forward's residual results), derived from the roles when they
    /// are checked.
    pub backward_reads: Vec<BackwardOperand>,
    /// For each backward result, the input (q 0, k 1, v 2) it is the
    /// adjoint of.
    pub backward_adjoints: Vec<usize>,
}

impl PartialEq for ImportedKernel {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path
    }
}

impl Eq for ImportedKernel {}

impl std::hash::Hash for ImportedKernel {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.path.hash(h);
    }
}

/// Why a kernel file cannot be used.
#[derive(Debug, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum ImportedKernelError {
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {message}", .path.display())]
    Json { path: PathBuf, message: String },
    #[error("{}:{source}", .path.display())]
    Text {
        path: PathBuf,
        #[source]
        source: text::ParseError,
    },
    #[error("{}: {source}", .path.display())]
    Proto {
        path: PathBuf,
        #[source]
        source: proto::ProtoError,
    },
    #[error("{}: {field}: {problem}", .path.display())]
    Convention {
        path: PathBuf,
        field: String,
        problem: String,
    },
    /// An operand of the step's shape that the module does not take.
    #[error("{}: parameter {index} ({role}) is {found}, where the step passes {expected}", .path.display())]
    Shape {
        path: PathBuf,
        index: usize,
        role: String,
        expected: String,
        found: String,
    },
    /// Not a regular file (a device, a FIFO), refused before it is read.
    #[error(transparent)]
    NotRegularFile(#[from] NotRegularFile),
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ConventionFile {
    point: String,
    layout: String,
    masks: Vec<String>,
    forward: ModuleEntry,
    backward: ModuleEntry,
    /// Where the kernel came from, for a reader; not used.
    #[serde(default)]
    #[allow(dead_code)]
    source: Option<String>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ModuleEntry {
    module: String,
    parameters: Vec<String>,
    results: Vec<String>,
    /// Roles whose layout is not the convention's `layout`.
    #[serde(default)]
    layouts: BTreeMap<String, String>,
}

impl ImportedKernel {
    /// Reads the convention at `path` and the modules it names, and checks
    /// the roles against the modules.
    pub fn load(path: &Path) -> Result<ImportedKernel, ImportedKernelError> {
        let bytes = input_file::read(path, |source| ImportedKernelError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let file: ConventionFile =
            serde_json::from_slice(&bytes).map_err(|e| ImportedKernelError::Json {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
        let bad = |field: &str, problem: String| ImportedKernelError::Convention {
            path: path.to_path_buf(),
            field: field.to_string(),
            problem,
        };
        if file.point != "attention" {
            return Err(bad(
                "point",
                format!("'{}': only attention can be imported", file.point),
            ));
        }
        let layout = TensorLayout::parse(&file.layout).map_err(|p| bad("layout", p.to_string()))?;
        if file.masks != ["causal"] {
            return Err(bad(
                "masks",
                format!(
                    "{:?}: a kernel is read that applies the causal mask alone, [\"causal\"]",
                    file.masks
                ),
            ));
        }
        let folder = path.parent().unwrap_or(Path::new(""));
        let forward = read_module(path, folder, "forward", &file.forward, layout)?;
        let backward = read_module(path, folder, "backward", &file.backward, layout)?;
        let mut kernel = ImportedKernel {
            path: path.to_path_buf(),
            forward,
            backward,
            backward_reads: Vec::new(),
            backward_adjoints: Vec::new(),
        };
        kernel.check_roles()?;
        (kernel.backward_reads, kernel.backward_adjoints) = kernel.backward_roles()?;
        Ok(kernel)
    }

    /// What the backward's parameters read and its results are the
    /// adjoints of, from roles [`ImportedKernel::check_roles`] allowed.
    fn backward_roles(&self) -> Result<(Vec<BackwardOperand>, Vec<usize>), ImportedKernelError> {
        let unmapped = |field: &str, role: &Role| ImportedKernelError::Convention {
            path: self.path.clone(),
            field: field.to_string(),
            problem: format!("{} has no place in the backward's call", role.name()),
        };
        let residuals: Vec<&Role> = self
            .forward
            .results
            .iter()
            .filter(|r| matches!(r, Role::Residual(_)))
            .collect();
        let reads = self
            .backward
            .parameters
            .iter()
            .map(|role| match role {
                Role::Output => Ok(BackwardOperand::Output),
                Role::DOutput => Ok(BackwardOperand::Adjoint),
                Role::Residual(_) => residuals
                    .iter()
                    .position(|r| *r == role)
                    .map(BackwardOperand::Residual)
                    .ok_or_else(|| unmapped("backward.parameters", role)),
                other => other
                    .operand()
                    .map(BackwardOperand::Input)
                    .ok_or_else(|| unmapped("backward.parameters", other)),
            })
            .collect::<Result<_, _>>()?;
        let adjoints = self
            .backward
            .results
            .iter()
            .map(|r| r.operand().ok_or_else(|| unmapped("backward.results", r)))
            .collect::<Result<_, _>>()?;
        Ok((reads, adjoints))
    }

    /// Each role where a kernel of attention can have it.
    fn check_roles(&self) -> Result<(), ImportedKernelError> {
        let bad = |field: &str, problem: String| ImportedKernelError::Convention {
            path: self.path.clone(),
            field: field.to_string(),
            problem,
        };
        let once =
            |field: &str, roles: &[Role], want: &[Role]| -> Result<(), ImportedKernelError> {
                for w in want {
                    let n = roles.iter().filter(|r| *r == w).count();
                    if n != 1 {
                        return Err(bad(
                            field,
                            format!("{} appears {n} times, once is needed", w.name()),
                        ));
                    }
                }
                Ok(())
            };
        let f = &self.forward;
        let b = &self.backward;
        // Every role of `roles` one `allowed` takes, or `field` is refused
        // saying what it takes.
        let only =
            |field: &str, roles: &[Role], allowed: &dyn Fn(&Role) -> bool, takes: &str| match roles
                .iter()
                .find(|r| !allowed(r))
            {
                Some(r) => Err(bad(field, format!("{} is not {takes}", r.name()))),
                None => Ok(()),
            };
        only(
            "forward.parameters",
            &f.parameters,
            &|r| matches!(r, Role::Q | Role::K | Role::V),
            "q, k or v",
        )?;
        once(
            "forward.parameters",
            &f.parameters,
            &[Role::Q, Role::K, Role::V],
        )?;
        only(
            "forward.results",
            &f.results,
            &|r| matches!(r, Role::Output | Role::Residual(_)),
            "the output or a residual",
        )?;
        once("forward.results", &f.results, &[Role::Output])?;
        only(
            "backward.parameters",
            &b.parameters,
            &|r| match r {
                Role::Residual(_) => f.results.contains(r),
                _ => matches!(
                    r,
                    Role::Q | Role::K | Role::V | Role::Output | Role::DOutput
                ),
            },
            "an input, the output, a forward residual or d_output",
        )?;
        once("backward.parameters", &b.parameters, &[Role::DOutput])?;
        only(
            "backward.results",
            &b.results,
            &|r| matches!(r, Role::DQ | Role::DK | Role::DV),
            "d_q, d_k or d_v",
        )?;
        once(
            "backward.results",
            &b.results,
            &[Role::DQ, Role::DK, Role::DV],
        )
    }

    /// Checks that the forward takes q, k and v of `expected` (the step's
    /// `[batch, heads, seq, head_dim]` on a rank, in its compute type), each
    /// in its role's layout.
    pub fn check_operands(&self, expected: &ArrayShape) -> Result<(), ImportedKernelError> {
        for (k, m) in [&self.forward, &self.backward].into_iter().enumerate() {
            let entry = m.module.entry();
            let ids = entry.parameters();
            let parameters = ids.iter().zip(&m.parameters).zip(&m.parameter_layouts);
            for (index, ((&p, role), layout)) in parameters.enumerate() {
                let Some(layout) = layout else { continue };
                let expected_shape = Shape::Array(layout.arrange(expected));
                let found = &entry.instr(p).shape;
                if !same_array(found, &expected_shape) {
                    return Err(ImportedKernelError::Shape {
                        path: m.path.clone(),
                        index,
                        role: format!("{} of the {}", role.name(), ["forward", "backward"][k]),
                        expected: expected_shape.to_string(),
                        found: found.to_string(),
                    });
                }
            }
        }
        Ok(())
    }
}

/// Equal dimensions and element type, whatever the layout.
fn same_array(a: &Shape, b: &Shape) -> bool {
    match (a.as_array(), b.as_array()) {
        (Some(a), Some(b)) => a.dims == b.dims && a.ty == b.ty,
        _ => false,
    }
}

/// The shape q, k, v and the output have on a rank.
pub fn attention_operand(ty: ElementType, dims: [i64; 4]) -> ArrayShape {
    ArrayShape::new(ty, dims.to_vec())
}

fn read_module(
    convention: &Path,
    folder: &Path,
    which: &str,
    entry: &ModuleEntry,
    layout: TensorLayout,
) -> Result<KernelModule, ImportedKernelError> {
    let path = folder.join(&entry.module);
    let bytes = input_file::read(&path, |source| ImportedKernelError::Io {
        path: path.clone(),
        source,
    })?;
    let module = match bytes.starts_with(b"HloModule") {
        true => {
            let text = String::from_utf8_lossy(&bytes);
            text::parse_module(&text).map_err(|source| ImportedKernelError::Text {
                path: path.clone(),
                source,
            })?
        }
        false => proto::decode_module(&bytes).map_err(|source| ImportedKernelError::Proto {
            path: path.clone(),
            source,
        })?,
    };
    let roles = |field: &str, names: &[String]| -> Result<Vec<Role>, ImportedKernelError> {
        names
            .iter()
            .map(|n| {
                Role::read(n).ok_or_else(|| ImportedKernelError::Convention {
                    path: convention.to_path_buf(),
                    field: format!("{which}.{field}"),
                    problem: format!("unknown role '{n}' (known: q, k, v, output, d_output, d_q, d_k, d_v, residual:NAME)"),
                })
            })
            .collect()
    };
    hlatc_compiler::verify(&module).map_err(|e| ImportedKernelError::Convention {
        path: path.clone(),
        field: "module".into(),
        problem: e.to_string(),
    })?;
    let parameters = roles("parameters", &entry.parameters)?;
    let results = roles("results", &entry.results)?;
    let count = |field: &str, roles: usize, module: usize| ImportedKernelError::Convention {
        path: convention.to_path_buf(),
        field: format!("{which}.{field}"),
        problem: format!("{roles} named, where {} has {module}", path.display()),
    };
    let e = module.entry();
    if e.parameters().len() != parameters.len() {
        return Err(count("parameters", parameters.len(), e.parameters().len()));
    }
    let result_count = match e.root().map(|r| &e.instr(r).shape) {
        Some(Shape::Tuple(items)) => items.len(),
        Some(_) => 1,
        None => 0,
    };
    if result_count != results.len() {
        return Err(count("results", results.len(), result_count));
    }
    let field = format!("{which}.layouts");
    let layouts = read_layouts(convention, &field, &entry.layouts, [&parameters, &results])?;
    let of = |roles: &[Role]| -> Vec<Option<TensorLayout>> {
        roles
            .iter()
            .map(|r| match r {
                Role::Residual(_) => None,
                r => Some(layouts.get(r).copied().unwrap_or(layout)),
            })
            .collect()
    };
    let (parameter_layouts, result_layouts) = (of(&parameters), of(&results));
    let callable =
        standard_form(&module, &parameter_layouts, &result_layouts).map_err(|problem| {
            ImportedKernelError::Convention {
                path: path.clone(),
                field: field.clone(),
                problem: problem.to_string(),
            }
        })?;
    Ok(KernelModule {
        path,
        module,
        parameters,
        results,
        parameter_layouts,
        result_layouts,
        callable,
    })
}

/// A module entry's `layouts`: each key a role the module has (not a
/// residual, which passes as it is), each value a layout.
fn read_layouts(
    convention: &Path,
    field: &str,
    layouts: &BTreeMap<String, String>,
    roles: [&[Role]; 2],
) -> Result<BTreeMap<Role, TensorLayout>, ImportedKernelError> {
    let bad = |problem: String| ImportedKernelError::Convention {
        path: convention.to_path_buf(),
        field: field.to_string(),
        problem,
    };
    let mut out = BTreeMap::new();
    for (name, text) in layouts {
        let role = Role::read(name)
            .filter(|r| !matches!(r, Role::Residual(_)))
            .ok_or_else(|| bad(format!("'{name}' is not a role a layout applies to (q, k, v, output, d_output, d_q, d_k, d_v)")))?;
        if !roles.iter().any(|rs| rs.contains(&role)) {
            return Err(bad(format!(
                "'{name}' is not among the module's parameters and results"
            )));
        }
        let layout = TensorLayout::parse(text).map_err(|p| bad(format!("{name}: {p}")))?;
        out.insert(role, layout);
    }
    Ok(out)
}
