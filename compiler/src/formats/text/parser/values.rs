//! The values of attributes and the shapes, integer lists and aliasing
//! entries they hold; [`Attrs`], an instruction's attributes as read.

use super::*;

/// `{true,false,...}`.
pub(super) fn bools(v: Value, at: &Pair<'_>) -> Result<Vec<bool>, ParseError> {
    let words = match v {
        Value::Words(w) => w,
        Value::Word(w) => vec![w],
        _ => return err_at(at, "expected a list of true/false, such as {true,false}"),
    };
    words
        .iter()
        .map(|w| match w.as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            other => err_at(at, format!("expected true or false, found `{other}`")),
        })
        .collect()
}

pub(super) fn strip_sigil(s: &str) -> &str {
    s.strip_prefix('%').unwrap_or(s)
}

pub(super) fn int(p: &Pair<'_>) -> Result<i64, ParseError> {
    p.as_str()
        .parse()
        .or_else(|_| err_at(p, format!("integer {} is out of range", p.as_str())))
}

/// The integers of an atomic list token such as `{1, 0}` or `2,3`.
pub(super) fn ints_in(p: &Pair<'_>) -> Result<Vec<i64>, ParseError> {
    let body = p
        .as_str()
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}');
    ints_of(body, p)
}

/// An array shape's dimensions, and which of them are bounds (`<=8`), one
/// bit each as `ArrayShape::dynamic` holds them.
pub(super) fn dims_in(p: &Pair<'_>) -> Result<(Vec<i64>, u32), ParseError> {
    let text = p.as_str();
    if !text.bytes().any(|b| b == b'<' || b == b'?') {
        return Ok((ints_of(text, p)?, 0));
    }
    let mut dynamic = 0u32;
    let mut dims = Vec::new();
    for (i, d) in text.split(',').enumerate() {
        let d = d.trim();
        let bound = d.strip_prefix("<=");
        if bound.is_some() || d == "?" {
            if i > crate::ir::shape::MAX_DYNAMIC_DIMENSION {
                return err_at(
                    p,
                    format!(
                        "dimension {i} is dynamic; hlatc keeps dynamic dimensions up to {} only",
                        crate::ir::shape::MAX_DYNAMIC_DIMENSION
                    ),
                );
            }
            dynamic |= 1 << i;
        }
        match d {
            "?" => dims.push(crate::ir::shape::UNBOUNDED),
            _ => dims.extend(ints_of(bound.unwrap_or(d), p)?),
        }
    }
    Ok((dims, dynamic))
}

/// The comma-separated integers of `body` (part of `p`'s text), read
/// by hand: every shape's dims and layout come through here.
pub(super) fn ints_of(body: &str, p: &Pair<'_>) -> Result<Vec<i64>, ParseError> {
    let bytes = body.as_bytes();
    let mut out = Vec::with_capacity(bytes.iter().filter(|&&b| b == b',').count() + 1);
    let mut i = 0;
    let skip_space = |i: &mut usize| {
        while *i < bytes.len() && bytes[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    skip_space(&mut i);
    if i == bytes.len() {
        return Ok(out);
    }
    loop {
        let start = i;
        let negative = bytes.get(i) == Some(&b'-');
        i += usize::from(negative);
        let mut value: Option<i64> = Some(0);
        let digits_start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            let digit = i64::from(bytes[i] - b'0');
            value = value.and_then(|v| v.checked_mul(10)).and_then(|v| {
                if negative {
                    v.checked_sub(digit)
                } else {
                    v.checked_add(digit)
                }
            });
            i += 1;
        }
        match value {
            Some(v) if i > digits_start => out.push(v),
            Some(_) => return err_at(p, format!("expected an integer, found `{}`", body.trim())),
            None => {
                let token = &body[start..i];
                return err_at(p, format!("integer {token} is out of range"));
            }
        }
        skip_space(&mut i);
        if i == bytes.len() {
            return Ok(out);
        }
        if bytes[i] != b',' {
            return err_at(p, format!("expected an integer, found `{}`", body.trim()));
        }
        i += 1;
        skip_space(&mut i);
    }
}

pub(super) fn shape_index(p: Pair<'_>) -> Result<Vec<i64>, ParseError> {
    p.into_inner().map(|i| int(&i)).collect()
}

pub(super) fn alias_entry(p: Pair<'_>) -> Result<IoAlias, ParseError> {
    let mut it = p.into_inner();
    let output_index = shape_index(it.next().expect("grammar: output index"))?;
    let parameter = int(&it.next().expect("grammar: parameter"))?;
    let parameter_index = shape_index(it.next().expect("grammar: parameter index"))?;
    let kind = match it.next().map(|k| k.as_str().to_string()).as_deref() {
        Some("must-alias") => AliasKind::MustAlias,
        _ => AliasKind::MayAlias,
    };
    Ok(IoAlias {
        output_index,
        parameter,
        parameter_index,
        kind,
    })
}

pub(super) fn shape(p: Pair<'_>) -> Result<Shape, ParseError> {
    let inner = p.into_inner().next().expect("grammar: shape has one child");
    match inner.as_rule() {
        Rule::tuple_shape => Ok(Shape::Tuple(
            inner.into_inner().map(shape).collect::<Result<_, _>>()?,
        )),
        Rule::buffer_shape => {
            let held = inner.into_inner().next().expect("grammar: buffer's shape");
            match shape(held)? {
                Shape::Array(a) => Ok(Shape::Buffer(a)),
                other => err_at(&held, format!("a buffer holds an array, not {other}")),
            }
        }
        Rule::array_shape => {
            let mut it = inner.into_inner();
            let ty_pair = it.next().expect("grammar: element type");
            if ty_pair.as_str() == "token" {
                let dims_pair = it.next().expect("grammar: dims");
                return match (dims_pair.as_str().trim(), it.next()) {
                    ("", None) => Ok(Shape::Token),
                    _ => err_at(
                        &inner,
                        "a token is written token[], with no dimensions or layout",
                    ),
                };
            }
            let ty = match ElementType::from_name(ty_pair.as_str()) {
                Some(t) => t,
                None => {
                    let known: Vec<&str> = ElementType::ALL.iter().map(|t| t.name()).collect();
                    return err_at(
                        &ty_pair,
                        format!(
                            "unsupported element type '{}' (supported: {}, and token[])",
                            ty_pair.as_str(),
                            known.join(", ")
                        ),
                    );
                }
            };
            let dims_pair = it.next().expect("grammar: dims");
            let (dims, dynamic) = dims_in(&dims_pair)?;
            // `?` reads as XLA's unbounded size, the one negative allowed.
            if dims.iter().any(|&d| d < 0) {
                if let Some(d) = dims.iter().enumerate().find_map(|(i, &d)| {
                    (d < 0 && !(d == crate::ir::shape::UNBOUNDED && dynamic >> i & 1 == 1))
                        .then_some(d)
                }) {
                    return err_at(&dims_pair, format!("negative dimension {d}"));
                }
            }
            let mut a = ArrayShape::new(ty, dims);
            a.dynamic = dynamic;
            if let Some(layout) = it.next() {
                let text = layout.as_str();
                let (order, tail) = match text.find(':') {
                    Some(colon) => (
                        &text[1..colon],
                        Some((colon + 1, &text[colon + 1..text.len() - 1])),
                    ),
                    None => (&text[1..text.len() - 1], None),
                };
                let m2m = ints_of(order, &layout)?;
                if let Some((offset, tail)) = tail {
                    a.physical = read_text_at(&layout, offset, "layout", || {
                        crate::formats::text::layout::parse_physical_layout(tail)
                    })?;
                }
                if !m2m.is_empty() || a.rank() == 0 {
                    if m2m.len() != a.rank() {
                        return err_at(
                            &layout,
                            format!("layout has {} entries for rank {}", m2m.len(), a.rank()),
                        );
                    }
                    a.minor_to_major = m2m;
                }
            }
            Ok(Shape::Array(a))
        }
        r => unreachable!("grammar: unexpected {r:?} in shape"),
    }
}

/// A parsed attribute value, before the opcode gives it meaning.
#[derive(Debug, Clone)]
pub(in crate::formats::text) enum Value {
    Str(String),
    Number(String),
    Word(String),
    Ints(Vec<i64>),
    Words(Vec<String>),
    Map(Vec<(String, Value)>),
    Slices(Vec<SliceDim>),
    Padding(Vec<PadDim>),
    Shapes(Vec<Shape>),
    Shape(Shape),
    /// `s32[2]{0} {1, 2}`: a shape and a value of it.
    Literal(Literal),
    /// A braced value no other form reads (its text); no attribute hlatc
    /// models takes one.
    Raw(String),
}

impl Value {
    pub(in crate::formats::text) fn kind(&self) -> String {
        match self {
            Value::Str(_) => "a string".to_string(),
            Value::Number(_) => "a number".to_string(),
            Value::Word(_) => "a word".to_string(),
            Value::Ints(_) => "an integer list".to_string(),
            Value::Words(_) => "a word list".to_string(),
            Value::Map(_) => "a key=value map".to_string(),
            Value::Slices(_) => "slice ranges".to_string(),
            Value::Padding(_) => "a padding spec".to_string(),
            Value::Shapes(_) => "a shape list".to_string(),
            Value::Shape(s) => format!("the shape {s}"),
            Value::Literal(l) => format!("the {} literal {l}", l.shape),
            Value::Raw(text) => {
                let short: String = text.chars().take(60).collect();
                let more = if text.chars().count() > 60 { "..." } else { "" };
                format!("`{short}{more}`")
            }
        }
    }

    pub(in crate::formats::text) fn is_word(&self, w: &str) -> bool {
        matches!(self, Value::Word(s) | Value::Number(s) if s == w)
    }

    pub(in crate::formats::text) fn into_string_map(
        self,
        at: &Pair<'_>,
    ) -> Result<BTreeMap<String, String>, ParseError> {
        match self {
            Value::Map(kvs) => kvs
                .into_iter()
                .map(|(k, v)| match v {
                    Value::Str(s) | Value::Word(s) | Value::Number(s) => Ok((k, s)),
                    // A dictionary written unquoted, as Shardy's meshes
                    // are (`xla.sdy.meshes={mesh = #sdy.mesh<...>}`): XLA
                    // keeps its text, braces included, as the value.
                    Value::Raw(s) if s.starts_with('{') => Ok((k, s)),
                    other => err_at(
                        at,
                        format!("attribute '{k}' must be a string, got {}", other.kind()),
                    ),
                })
                .collect(),
            Value::Ints(v) if v.is_empty() => Ok(BTreeMap::new()),
            other => err_at(
                at,
                format!("expected a {{key=\"value\"}} map, got {}", other.kind()),
            ),
        }
    }
}

pub(super) fn value(p: Pair<'_>) -> Result<Value, ParseError> {
    Ok(match p.as_rule() {
        Rule::string => {
            let raw = p.into_inner().next().map(|s| s.as_str()).unwrap_or("");
            match unescape(raw) {
                Some(s) => Value::Str(s),
                None => return err_at(&p, "malformed escape sequence in string"),
            }
        }
        Rule::number => Value::Number(p.as_str().to_string()),
        Rule::word => Value::Word(strip_sigil(p.as_str()).to_string()),
        Rule::int_list => Value::Ints(ints_in(&p)?),
        Rule::word_list => Value::Words(p.into_inner().map(|w| w.as_str().to_string()).collect()),
        Rule::raw_value | Rule::arrow_value => Value::Raw(p.as_str().to_string()),
        Rule::shape_list => Value::Shapes(p.into_inner().map(shape).collect::<Result<_, _>>()?),
        Rule::shape => Value::Shape(shape(p)?),
        Rule::shaped_literal => {
            let mut it = p.into_inner();
            let shape_pair = it.next().expect("grammar: shape");
            let declared = shape(shape_pair)?;
            match it.next() {
                None => Value::Shape(declared),
                // Read as a constant's value is (one scalar for many
                // elements included), as XLA reads it.
                Some(lit) => Value::Literal(literal(lit, &declared, &shape_pair)?.0),
            }
        }
        Rule::kv_map => Value::Map(
            p.into_inner()
                .map(|kv| {
                    let mut it = kv.into_inner();
                    let k = it.next().expect("grammar: key").as_str().to_string();
                    Ok((k, value(it.next().expect("grammar: value"))?))
                })
                .collect::<Result<_, ParseError>>()?,
        ),
        Rule::slice_list => Value::Slices(
            p.into_inner()
                .map(|s| {
                    let v: Vec<i64> = s.into_inner().map(|i| int(&i)).collect::<Result<_, _>>()?;
                    Ok(SliceDim {
                        start: v[0],
                        limit: v[1],
                        stride: v.get(2).copied().unwrap_or(1),
                    })
                })
                .collect::<Result<_, ParseError>>()?,
        ),
        Rule::padding => {
            let mut dims = Vec::new();
            for d in p.as_str().split('x') {
                let v: Vec<i64> = match d.split('_').map(str::parse).collect() {
                    Ok(v) => v,
                    Err(_) => return err_at(&p, format!("malformed padding '{d}'")),
                };
                dims.push(PadDim {
                    low: v[0],
                    high: v[1],
                    interior: v.get(2).copied().unwrap_or(0),
                });
            }
            Value::Padding(dims)
        }
        r => unreachable!("grammar: unexpected {r:?} as attribute value"),
    })
}

pub(super) fn attribute(p: Pair<'_>) -> Result<(String, Value, Pair<'_>), ParseError> {
    let mut it = p.into_inner();
    let key = it
        .next()
        .expect("grammar: attribute name")
        .as_str()
        .to_string();
    let v = value(it.next().expect("grammar: attribute value"))?;
    Ok((key, v, p))
}

/// The attributes of one instruction, consumed by the opcode that owns them;
/// whatever is left over is reported as unsupported.
/// An attribute's value as an integer list (`key={0,1}`).
pub(in crate::formats::text) fn ints_value(
    key: &str,
    (v, p): (Value, Pair<'_>),
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
    (v, p): (Value, Pair<'_>),
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
    (v, p): (Value, Pair<'i>),
) -> Result<(String, Pair<'i>), ParseError> {
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
    (v, p): (Value, Pair<'_>),
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
    pub(in crate::formats::text) map: BTreeMap<String, (Value, Pair<'i>)>,
    pub(in crate::formats::text) at: Pair<'i>,
    pub(in crate::formats::text) opcode: String,
    /// The op an async start's short form (`call-start`, ...) wraps,
    /// for the computation the reader builds around it. Boxed: rare, and
    /// every instruction carries the slot.
    pub(in crate::formats::text) wrapped: Option<Box<Op>>,
}

impl<'i> Attrs<'i> {
    pub(in crate::formats::text) fn take(&mut self, key: &str) -> Option<(Value, Pair<'i>)> {
        self.map.remove(key)
    }

    pub(in crate::formats::text) fn required(
        &mut self,
        key: &str,
    ) -> Result<(Value, Pair<'i>), ParseError> {
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
    ) -> Result<(String, Pair<'i>), ParseError> {
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
    pub(in crate::formats::text) fn text(&mut self, key: &str) -> Option<(String, Pair<'i>)> {
        let (_, p) = self.take(key)?;
        let written = p.as_str().split_once('=').map_or("", |(_, v)| v.trim());
        Some((written.to_string(), p))
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
        Window::parse(inner).or_else(|e| err_at(&p, e))
    }

    /// `output_to_operand_aliasing={{0}: (1, {})}`; none when not written.
    pub(in crate::formats::text) fn operand_aliasing(
        &mut self,
    ) -> Result<Vec<OperandAlias>, ParseError> {
        match self.text("output_to_operand_aliasing") {
            None => Ok(Vec::new()),
            Some((text, p)) => OperandAlias::parse_list(&text).or_else(|e| err_at(&p, e)),
        }
    }

    /// `dim_labels=b01f_01io->b01f`, when written.
    pub(in crate::formats::text) fn dim_labels(&mut self) -> Result<Option<ConvDims>, ParseError> {
        self.text("dim_labels")
            .map(|(labels, p)| ConvDims::parse(&labels).or_else(|e| err_at(&p, e)))
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
