//! [`Attrs`]: the attributes of one instruction, consumed by the opcode
//! that owns them; whatever is left over is reported as unsupported.

use super::*;

/// An attribute's value as an integer list (`key={0,1}`).
pub(in crate::formats::text) fn ints_value(
    key: &str,
    (v, p): (Value, AttrPlace<'_>),
) -> Result<Vec<i64>, ParseError> {
    match v {
        Value::Ints(v) => Ok(v),
        other => err_at(
            &p,
            format!(
                "'{key}' must be an integer list like {{0,1}}, got {}",
                other.kind()
            ),
        ),
    }
}

/// An attribute's value as an integer (`key=3`).
pub(in crate::formats::text) fn int_value(
    key: &str,
    (v, p): (Value, AttrPlace<'_>),
) -> Result<i64, ParseError> {
    match v {
        Value::Number(n) => n
            .parse()
            .or_else(|_| err_at(&p, format!("'{key}' must be an integer, got {n}"))),
        other => err_at(
            &p,
            format!("'{key}' must be an integer, got {}", other.kind()),
        ),
    }
}

/// An attribute's value as a bare word (`key=name`), with where it is.
pub(in crate::formats::text) fn word_value<'i>(
    key: &str,
    (v, p): (Value, AttrPlace<'i>),
) -> Result<(String, AttrPlace<'i>), ParseError> {
    match v {
        Value::Word(w) => Ok((w, p)),
        other => err_at(
            &p,
            format!("'{key}' must be a bare word, got {}", other.kind()),
        ),
    }
}

/// An attribute's value as `true` or `false`.
pub(in crate::formats::text) fn flag_value(
    key: &str,
    (v, p): (Value, AttrPlace<'_>),
) -> Result<bool, ParseError> {
    match v {
        Value::Word(w) => match w.as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => err_at(&p, format!("'{key}' must be true or false, got {w}")),
        },
        other => err_at(
            &p,
            format!("'{key}' must be true or false, got {}", other.kind()),
        ),
    }
}

pub(in crate::formats::text) struct Attrs<'i> {
    pub(in crate::formats::text) map: BTreeMap<&'i str, (Value, AttrPlace<'i>)>,
    /// Where the instruction is written, for what it lacks.
    pub(in crate::formats::text) at: Span<'i>,
    pub(in crate::formats::text) opcode: &'i str,
    /// The op an async start's short form (`call-start`, ...) wraps,
    /// for the computation the reader builds around it. Boxed: rare, and
    /// every instruction carries the slot.
    pub(in crate::formats::text) wrapped: Option<Box<Op>>,
    /// The callees the op's attributes name, in the order read: the op
    /// holds each as its index here until the computation's reader
    /// resolves them ([`Attrs::callee`]).
    pub(in crate::formats::text) callees: Vec<WrittenCallee<'i>>,
    /// The attributes that write a computation inline, each with which
    /// one (in the order written).
    pub(in crate::formats::text) inline: BTreeMap<&'i str, usize>,
}

/// A callee as an attribute writes it, kept until the computations it may
/// name are known.
pub(in crate::formats::text) enum WrittenCallee<'i> {
    /// A name, and where it is written.
    Named { name: String, at: AttrPlace<'i> },
    /// The `k`-th computation the instruction writes inline.
    Inline(usize),
}

impl<'i> Attrs<'i> {
    /// None yet, for the instruction written at `at`.
    pub(in crate::formats::text) fn new(at: Span<'i>) -> Self {
        Attrs {
            map: BTreeMap::new(),
            at,
            opcode: "",
            wrapped: None,
            callees: Vec::new(),
            inline: BTreeMap::new(),
        }
    }

    /// Keeps the callee `key` names as `name` at `at` (the computation
    /// `key` writes inline, if it writes one) until it is resolved, and
    /// gives the id the op holds for it meanwhile: its index here.
    pub(in crate::formats::text) fn callee(
        &mut self,
        key: &str,
        name: &str,
        at: AttrPlace<'i>,
    ) -> ComputationId {
        let written = match self.inline.get(key) {
            Some(&k) if name == INLINE_NAME => WrittenCallee::Inline(k),
            _ => WrittenCallee::Named {
                name: strip_sigil(name).to_string(),
                at,
            },
        };
        self.callees.push(written);
        ComputationId::new(self.callees.len() - 1)
    }

    pub(in crate::formats::text) fn take(&mut self, key: &str) -> Option<(Value, AttrPlace<'i>)> {
        self.map.remove(key)
    }

    pub(in crate::formats::text) fn required(
        &mut self,
        key: &str,
    ) -> Result<(Value, AttrPlace<'i>), ParseError> {
        match self.take(key) {
            Some(v) => Ok(v),
            None => err_at(&self.at, format!("{} needs attribute '{key}'", self.opcode)),
        }
    }

    pub(in crate::formats::text) fn ints(&mut self, key: &str) -> Result<Vec<i64>, ParseError> {
        ints_value(key, self.required(key)?)
    }

    pub(in crate::formats::text) fn ints_or_empty(
        &mut self,
        key: &str,
    ) -> Result<Vec<i64>, ParseError> {
        if self.map.contains_key(key) {
            self.ints(key)
        } else {
            Ok(Vec::new())
        }
    }

    pub(in crate::formats::text) fn int(&mut self, key: &str) -> Result<i64, ParseError> {
        int_value(key, self.required(key)?)
    }

    /// A float attribute, read as XLA reads it: as a double, then rounded
    /// to f32.
    pub(in crate::formats::text) fn f32(&mut self, key: &str) -> Result<F32Bits, ParseError> {
        match self.required(key)? {
            (Value::Number(n), p) => n
                .parse::<f64>()
                .map(|v| F32Bits::new(v as f32))
                .or_else(|_| err_at(&p, format!("'{key}' must be a number, got {n}"))),
            (other, p) => err_at(
                &p,
                format!("'{key}' must be a number, got {}", other.kind()),
            ),
        }
    }

    pub(in crate::formats::text) fn optional_int(
        &mut self,
        key: &str,
    ) -> Result<Option<i64>, ParseError> {
        if self.map.contains_key(key) {
            self.int(key).map(Some)
        } else {
            Ok(None)
        }
    }

    pub(in crate::formats::text) fn word(
        &mut self,
        key: &str,
    ) -> Result<(String, AttrPlace<'i>), ParseError> {
        word_value(key, self.required(key)?)
    }

    pub(in crate::formats::text) fn string(
        &mut self,
        key: &str,
    ) -> Result<Option<String>, ParseError> {
        match self.take(key) {
            None => Ok(None),
            Some((Value::Str(s), _)) => Ok(Some(s)),
            Some((other, p)) => err_at(
                &p,
                format!("'{key}' must be a quoted string, got {}", other.kind()),
            ),
        }
    }

    /// `backend_config`: a quoted string, or JSON written bare
    /// (`backend_config={"k":1}`), kept as its text.
    pub(in crate::formats::text) fn backend_config(&mut self) -> Result<String, ParseError> {
        match self.take("backend_config") {
            None => Ok(String::new()),
            Some((Value::Str(s), _)) => Ok(s),
            Some((Value::Raw(text), _)) if text.starts_with('{') => Ok(text),
            Some((Value::Ints(v), _)) if v.is_empty() => Ok("{}".to_string()),
            Some((other, p)) => err_at(
                &p,
                format!(
                    "'backend_config' must be a quoted string or a JSON object, got {}",
                    other.kind()
                ),
            ),
        }
    }

    pub(in crate::formats::text) fn flag(&mut self, key: &str) -> Result<bool, ParseError> {
        self.take(key).map_or(Ok(false), |v| flag_value(key, v))
    }

    /// An attribute's value as written (`window={size=3 pad=1_1}` gives
    /// `{size=3 pad=1_1}`): for values with a syntax of their own, which
    /// the attribute grammar reads as raw text or, by accident, as a map.
    pub(in crate::formats::text) fn text(&mut self, key: &str) -> Option<(&'i str, AttrPlace<'i>)> {
        let (_, p) = self.take(key)?;
        Some((p.value.as_str(), p))
    }

    /// `window={...}`; an op without one slides over no dimensions.
    pub(in crate::formats::text) fn window(&mut self) -> Result<Window, ParseError> {
        let Some((text, p)) = self.text("window") else {
            return Ok(Window::default());
        };
        let inner = text
            .strip_prefix('{')
            .and_then(|t| t.strip_suffix('}'))
            .map_or_else(
                || err_at(&p, "'window' must be braced: window={size=3x3 ...}"),
                Ok,
            )?;
        Window::parse(inner).or_else(|e| err_at(&p, e.to_string()))
    }

    /// `output_to_operand_aliasing={{0}: (1, {})}`; none when not written.
    pub(in crate::formats::text) fn operand_aliasing(
        &mut self,
    ) -> Result<Vec<OperandAlias>, ParseError> {
        match self.text("output_to_operand_aliasing") {
            None => Ok(Vec::new()),
            Some((text, p)) => {
                OperandAlias::parse_list(text).or_else(|e| err_at(&p, e.to_string()))
            }
        }
    }

    /// `dim_labels=b01f_01io->b01f`, when written.
    pub(in crate::formats::text) fn dim_labels(&mut self) -> Result<Option<ConvDims>, ParseError> {
        self.text("dim_labels")
            .map(|(labels, p)| ConvDims::parse(labels).or_else(|e| err_at(&p, e.to_string())))
            .transpose()
    }

    pub(in crate::formats::text) fn precision(&mut self) -> Result<Vec<Precision>, ParseError> {
        match self.take("operand_precision") {
            None => Ok(Vec::new()),
            Some((Value::Words(ws), p)) => ws
                .iter()
                // XLA reads the names in any case (`HIGH` as `high`).
                .map(|w| {
                    Precision::from_name(&w.to_ascii_lowercase())
                        .map_or_else(|| err_at(&p, format!("unknown precision '{w}'")), Ok)
                })
                .collect(),
            Some((other, p)) => err_at(
                &p,
                format!(
                    "'operand_precision' must be a word list, got {}",
                    other.kind()
                ),
            ),
        }
    }

    pub(in crate::formats::text) fn finish(self) -> Result<(), ParseError> {
        if let Some((key, (_, p))) = self.map.into_iter().next() {
            return err_at(
                &p,
                format!("unsupported attribute '{key}' on {}", self.opcode),
            );
        }
        Ok(())
    }
}
