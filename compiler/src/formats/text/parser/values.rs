//! The values of attributes, read from the forms the grammar told apart
//! before their keys give them meaning, and where they are written.

use super::*;

/// `{true,false,...}`.
pub(super) fn bools<'i>(v: Value, at: &impl Located<'i>) -> Result<Vec<bool>, ParseError> {
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

pub(super) fn int(i: &syntax::Int<'_>) -> Result<i64, ParseError> {
    let text = i.0.as_str();
    text.parse()
        .or_else(|_| err_at(&i.0, format!("integer {text} is out of range")))
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

    pub(in crate::formats::text) fn into_string_map<'i>(
        self,
        at: &impl Located<'i>,
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

pub(super) fn value(v: &syntax::Value<'_>) -> Result<Value, ParseError> {
    use syntax::ValueForm as Form;
    Ok(match &v.form {
        Form::String(inner) => match unescape(inner.as_str()) {
            Some(s) => Value::Str(s),
            None => return err_at(&v.at, "malformed escape sequence in string"),
        },
        Form::Number(n) => Value::Number(n.as_str().to_string()),
        Form::Word(w) => Value::Word(w.text().to_string()),
        Form::Ints(body) => Value::Ints(ints_of(body.as_str(), &v.at)?),
        Form::Words(ws) => Value::Words(ws.iter().map(|w| w.0.as_str().to_string()).collect()),
        Form::Raw(text) => Value::Raw(text.as_str().to_string()),
        Form::Shapes(shapes) => Value::Shapes(shapes.iter().map(shape).collect::<Result<_, _>>()?),
        Form::Shape(shaped) => match &shaped.literal {
            None => Value::Shape(shape(&shaped.shape)?),
            // Read as a constant's value is (one scalar for many elements
            // included), as XLA reads it.
            Some(lit) => {
                let declared = shape(&shaped.shape)?;
                Value::Literal(literal(lit, &declared, &shaped.shape.at())?.0)
            }
        },
        Form::Map(entries) => Value::Map(
            entries
                .iter()
                .map(|(k, v)| Ok((k.as_str().to_string(), value(v)?)))
                .collect::<Result<_, ParseError>>()?,
        ),
        Form::Slices(slices) => Value::Slices(
            slices
                .iter()
                .map(|s| {
                    Ok(SliceDim {
                        start: int(&s.start)?,
                        limit: int(&s.limit)?,
                        stride: s.stride.as_ref().map(int).transpose()?.unwrap_or(1),
                    })
                })
                .collect::<Result<_, ParseError>>()?,
        ),
        Form::Padding(pads) => Value::Padding(
            pads.iter()
                .map(|p| pad_dim(p, &v.at))
                .collect::<Result<_, _>>()?,
        ),
    })
}

/// One dimension's `low_high_interior`; `at` is where the padding starts.
fn pad_dim(p: &syntax::Pad<'_>, at: &Span<'_>) -> Result<PadDim, ParseError> {
    let read = |i: &syntax::Int<'_>| {
        i.0.as_str()
            .parse::<i64>()
            .or_else(|_| err_at(at, format!("malformed padding '{}'", p.at.as_str())))
    };
    Ok(PadDim {
        low: read(&p.low)?,
        high: read(&p.high)?,
        interior: p.interior.as_ref().map(read).transpose()?.unwrap_or(0),
    })
}

/// An attribute's key, its value as read, and where both are written.
pub(super) fn attribute<'i>(
    a: &syntax::Attribute<'i>,
) -> Result<(&'i str, Value, AttrPlace<'i>), ParseError> {
    let place = AttrPlace {
        attribute: a.at,
        value: a.value.at,
    };
    Ok((a.key.as_str(), value(&a.value)?, place))
}

/// Where an attribute is written: the attribute, which most errors point
/// at, and its value, which the readers of values with a syntax of their
/// own point into.
#[derive(Clone, Copy)]
pub(in crate::formats::text) struct AttrPlace<'i> {
    pub(in crate::formats::text) attribute: Span<'i>,
    pub(in crate::formats::text) value: Span<'i>,
}

/// Something written in the text, which errors point at.
pub(in crate::formats::text) trait Located<'i> {
    fn span(&self) -> Span<'i>;
}

impl<'i> Located<'i> for Span<'i> {
    fn span(&self) -> Span<'i> {
        *self
    }
}

impl<'i> Located<'i> for AttrPlace<'i> {
    fn span(&self) -> Span<'i> {
        self.attribute
    }
}

impl<'i> Located<'i> for syntax::Name<'i> {
    fn span(&self) -> Span<'i> {
        self.0
    }
}
