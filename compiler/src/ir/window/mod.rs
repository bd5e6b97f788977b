//! How `convolution` and `reduce-window` slide over their input: XLA's
//! `Window` (a size, stride, padding and dilation per dimension) and a
//! convolution's dimension numbers, with their text forms
//! (`window={size=3x3 stride=2x2 pad=1_1x1_1}`, `dim_labels=b01f_01io->b01f`).

use std::fmt;

mod error;
pub use error::{DimLabelsError, WindowError};

/// One dimension of a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WindowDim {
    pub size: i64,
    pub stride: i64,
    pub padding_low: i64,
    pub padding_high: i64,
    /// `rhs_dilate`: holes between the window's elements.
    pub window_dilation: i64,
    /// `lhs_dilate`: holes between the input's elements.
    pub base_dilation: i64,
    pub window_reversal: bool,
}

impl WindowDim {
    /// A window of `size` with stride 1, no padding and no dilation.
    pub fn of_size(size: i64) -> WindowDim {
        WindowDim {
            size,
            stride: 1,
            padding_low: 0,
            padding_high: 0,
            window_dilation: 1,
            base_dilation: 1,
            window_reversal: false,
        }
    }

    /// How many positions the window takes over an input dimension of
    /// `base` elements (XLA's dilated, padded, strided bound).
    pub fn output_size(&self, base: i64) -> Result<i64, WindowError> {
        if self.size <= 0 || self.stride <= 0 {
            return Err(WindowError::NotPositive {
                size: self.size,
                stride: self.stride,
            });
        }
        if self.window_dilation < 1 || self.base_dilation < 1 {
            return Err(WindowError::Dilation {
                base_dilation: self.base_dilation,
                window_dilation: self.window_dilation,
            });
        }
        let dilated = |n: i64, d: i64| -> Option<i64> {
            if n == 0 {
                Some(0)
            } else {
                (n - 1).checked_mul(d)?.checked_add(1)
            }
        };
        let padded = dilated(base, self.base_dilation)
            .and_then(|b| {
                b.checked_add(self.padding_low)?
                    .checked_add(self.padding_high)
            })
            .ok_or(WindowError::TooLarge { base })?;
        if padded < 0 {
            return Err(WindowError::Overpadded {
                low: self.padding_low,
                high: self.padding_high,
                base,
            });
        }
        let window =
            dilated(self.size, self.window_dilation).ok_or(WindowError::TooLarge { base })?;
        Ok(if window > padded {
            0
        } else {
            (padded - window) / self.stride + 1
        })
    }
}

/// A window: one [`WindowDim`] per dimension it slides over.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Window {
    pub dims: Vec<WindowDim>,
}

impl Window {
    /// Reads what XLA writes inside `window={...}`: `size=` (required when
    /// anything is written), then any of `stride=`, `pad=`, `lhs_dilate=`,
    /// `rhs_dilate=` and `rhs_reversal=`, each with one `x`-separated entry
    /// per dimension.
    pub fn parse(text: &str) -> Result<Window, WindowError> {
        let mut fields: Vec<(&str, Vec<&str>)> = Vec::new();
        for item in text.split_whitespace() {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| WindowError::NotKeyValue(item.to_string()))?;
            if fields.iter().any(|(k, _)| *k == key) {
                return Err(WindowError::Twice(key.to_string()));
            }
            fields.push((key, value.split('x').collect()));
        }
        if fields.is_empty() {
            return Ok(Window::default());
        }
        let Some(sizes) = fields.iter().find(|(k, _)| *k == "size").map(|(_, v)| v) else {
            return Err(WindowError::NoSize);
        };
        let mut dims: Vec<WindowDim> = sizes
            .iter()
            .map(|s| int(s, "size").map(WindowDim::of_size))
            .collect::<Result<_, _>>()?;
        for (key, values) in &fields {
            if values.len() != dims.len() {
                return Err(WindowError::EntryCount {
                    key: key.to_string(),
                    entries: values.len(),
                    sizes: dims.len(),
                });
            }
            for (d, v) in dims.iter_mut().zip(values) {
                match *key {
                    "size" => {}
                    "stride" => d.stride = int(v, "stride")?,
                    "lhs_dilate" => d.base_dilation = int(v, "lhs_dilate")?,
                    "rhs_dilate" => d.window_dilation = int(v, "rhs_dilate")?,
                    "rhs_reversal" => {
                        d.window_reversal = match *v {
                            "0" => false,
                            "1" => true,
                            _ => return Err(WindowError::Reversal(v.to_string())),
                        }
                    }
                    "pad" => {
                        let (lo, hi) = v
                            .split_once('_')
                            .ok_or_else(|| WindowError::Pad(v.to_string()))?;
                        d.padding_low = int(lo, "pad")?;
                        d.padding_high = int(hi, "pad")?;
                    }
                    other => return Err(WindowError::UnknownItem(other.to_string())),
                }
            }
        }
        Ok(Window { dims })
    }

    /// Every dimension's output size over `base`, in order.
    pub fn output_dims(&self, base: &[i64]) -> Result<Vec<i64>, WindowError> {
        self.dims
            .iter()
            .zip(base)
            .map(|(d, &b)| d.output_size(b))
            .collect()
    }
}

fn int(s: &str, key: &'static str) -> Result<i64, WindowError> {
    s.parse().map_err(|_| WindowError::NotInteger {
        key,
        written: s.to_string(),
    })
}

impl fmt::Display for Window {
    /// XLA's spelling: `size` always, each other item only where some
    /// dimension differs from the default.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = &self.dims;
        let field = |f: &mut fmt::Formatter<'_>,
                     first: bool,
                     key: &str,
                     item: &dyn Fn(&WindowDim) -> String|
         -> fmt::Result {
            if !first {
                f.write_str(" ")?;
            }
            let items: Vec<String> = d.iter().map(item).collect();
            write!(f, "{key}={}", items.join("x"))
        };
        if d.is_empty() {
            return Ok(());
        }
        field(f, true, "size", &|w| w.size.to_string())?;
        if d.iter().any(|w| w.stride != 1) {
            field(f, false, "stride", &|w| w.stride.to_string())?;
        }
        if d.iter().any(|w| w.padding_low != 0 || w.padding_high != 0) {
            field(f, false, "pad", &|w| {
                format!("{}_{}", w.padding_low, w.padding_high)
            })?;
        }
        if d.iter().any(|w| w.base_dilation != 1) {
            field(f, false, "lhs_dilate", &|w| w.base_dilation.to_string())?;
        }
        if d.iter().any(|w| w.window_dilation != 1) {
            field(f, false, "rhs_dilate", &|w| w.window_dilation.to_string())?;
        }
        if d.iter().any(|w| w.window_reversal) {
            field(f, false, "rhs_reversal", &|w| {
                u8::from(w.window_reversal).to_string()
            })?;
        }
        Ok(())
    }
}

/// Which dimension of a convolution's input, kernel and output is which
/// (XLA's `ConvolutionDimensionNumbers`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ConvDims {
    pub input_batch: i64,
    pub input_feature: i64,
    pub input_spatial: Vec<i64>,
    pub kernel_input_feature: i64,
    pub kernel_output_feature: i64,
    pub kernel_spatial: Vec<i64>,
    pub output_batch: i64,
    pub output_feature: i64,
    pub output_spatial: Vec<i64>,
}

/// One operand's labels: the dimension holding each of the two named
/// roles, then each spatial dimension's.
type Labelled = (i64, i64, Vec<i64>);

/// A `?` labels a dimension of no role (cuDNN's vectorized int8
/// convolutions write `b01f?`); the dimension numbers leave it out, as
/// XLA's do.
fn read_labels(
    labels: &str,
    roles: [char; 2],
    operand: &'static str,
) -> Result<Labelled, DimLabelsError> {
    let rank = labels.chars().filter(|&c| c != '?').count();
    let spatial_count = rank.checked_sub(2).ok_or_else(|| DimLabelsError::TooFew {
        operand,
        labels: labels.to_string(),
        roles,
    })?;
    let (mut first, mut second) = (None, None);
    let mut spatial = vec![None; spatial_count];
    for (i, c) in labels.chars().enumerate() {
        let slot = if c == '?' {
            continue;
        } else if c == roles[0] {
            &mut first
        } else if c == roles[1] {
            &mut second
        } else if let Some(s) = c.to_digit(10).and_then(|s| spatial.get_mut(s as usize)) {
            s
        } else {
            return Err(DimLabelsError::Unknown {
                operand,
                labels: labels.to_string(),
                label: c,
                roles,
                spatial: spatial_count,
            });
        };
        if slot.replace(i as i64).is_some() {
            return Err(DimLabelsError::Twice {
                operand,
                labels: labels.to_string(),
                label: c,
            });
        }
    }
    let missing = |label: char| DimLabelsError::MissingRole {
        operand,
        labels: labels.to_string(),
        label,
    };
    Ok((
        first.ok_or_else(|| missing(roles[0]))?,
        second.ok_or_else(|| missing(roles[1]))?,
        spatial
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                s.ok_or_else(|| DimLabelsError::MissingSpatial {
                    operand,
                    labels: labels.to_string(),
                    spatial: i,
                })
            })
            .collect::<Result<_, _>>()?,
    ))
}

fn write_labels(
    f: &mut fmt::Formatter<'_>,
    roles: [char; 2],
    l: (i64, i64, &[i64]),
) -> fmt::Result {
    // As long as the highest dimension named, as XLA writes it: a `?`
    // past the last named dimension is not written back.
    let named = [l.0, l.1].into_iter().chain(l.2.iter().copied());
    let len = named
        .filter_map(|d| usize::try_from(d).ok())
        .map(|d| d + 1)
        .max()
        .unwrap_or(0)
        .max(l.2.len() + 2);
    let mut out = vec!['?'; len];
    let mut put = |dim: i64, c: char| {
        if let Some(slot) = usize::try_from(dim).ok().and_then(|d| out.get_mut(d)) {
            *slot = c;
        }
    };
    put(l.0, roles[0]);
    put(l.1, roles[1]);
    for (i, &d) in l.2.iter().enumerate() {
        put(d, char::from_digit(i as u32 % 10, 10).expect("a digit"));
    }
    f.write_str(&out.into_iter().collect::<String>())
}

/// The first of `dims` that is out of `0..rank` or repeats one before it.
pub(crate) fn misplaced_dimension(dims: impl IntoIterator<Item = i64>, rank: usize) -> Option<i64> {
    let mut seen = vec![false; rank];
    dims.into_iter().find(
        |&d| match usize::try_from(d).ok().and_then(|d| seen.get_mut(d)) {
            Some(s) if !*s => {
                *s = true;
                false
            }
            _ => true,
        },
    )
}

impl ConvDims {
    /// Whether `dim_labels` can spell these: each operand's dimension
    /// numbers name each of its dimensions once, with at most ten spatial
    /// dimensions (a digit each), and within the input's, kernel's and
    /// output's rank where `ranks` gives it (a custom call's operands may
    /// hold dimensions of no role, `?`). A convolution's are also checked
    /// against its operands; a custom call's have only this.
    pub fn check_writable(&self, ranks: [Option<usize>; 3]) -> Result<(), DimLabelsError> {
        let operands = [
            (
                "input",
                self.input_batch,
                self.input_feature,
                &self.input_spatial,
            ),
            (
                "kernel",
                self.kernel_input_feature,
                self.kernel_output_feature,
                &self.kernel_spatial,
            ),
            (
                "output",
                self.output_batch,
                self.output_feature,
                &self.output_spatial,
            ),
        ];
        for ((operand, a, b, spatial), known_rank) in operands.into_iter().zip(ranks) {
            if spatial.len() > 10 {
                return Err(DimLabelsError::TooManySpatial {
                    operand,
                    count: spatial.len(),
                });
            }
            // Dimensions of no role (`?`) may lie between or below the
            // named ones: without an operand's rank that could hold them
            // all (a custom call's operands need not be a convolution's),
            // the rank is the highest named dimension's, at most 64.
            let dims = [a, b].into_iter().chain(spatial.iter().copied());
            let highest = dims.clone().max().unwrap_or(0);
            let known_rank = known_rank.filter(|&r| r >= spatial.len() + 2);
            let rank = known_rank.unwrap_or_else(|| {
                usize::try_from(highest.saturating_add(1))
                    .unwrap_or(0)
                    .clamp(spatial.len() + 2, 64)
            });
            if let Some(dim) = misplaced_dimension(dims, rank) {
                return Err(DimLabelsError::Misplaced { operand, dim, rank });
            }
        }
        Ok(())
    }

    /// Reads `dim_labels` (`b01f_01io->b01f`): the input's batch, feature
    /// and spatial dimensions, the kernel's input and output features and
    /// spatial dimensions, then the output's.
    pub fn parse(text: &str) -> Result<ConvDims, DimLabelsError> {
        let (operands, output) = text
            .split_once("->")
            .ok_or_else(|| DimLabelsError::NoArrow(text.to_string()))?;
        let (input, kernel) = operands
            .split_once('_')
            .ok_or_else(|| DimLabelsError::NoUnderscore(text.to_string()))?;
        let (input_batch, input_feature, input_spatial) = read_labels(input, ['b', 'f'], "input")?;
        let (kernel_input_feature, kernel_output_feature, kernel_spatial) =
            read_labels(kernel, ['i', 'o'], "kernel")?;
        let (output_batch, output_feature, output_spatial) =
            read_labels(output, ['b', 'f'], "output")?;
        if input_spatial.len() != kernel_spatial.len()
            || input_spatial.len() != output_spatial.len()
        {
            return Err(DimLabelsError::SpatialCounts(text.to_string()));
        }
        Ok(ConvDims {
            input_batch,
            input_feature,
            input_spatial,
            kernel_input_feature,
            kernel_output_feature,
            kernel_spatial,
            output_batch,
            output_feature,
            output_spatial,
        })
    }
}

impl fmt::Display for ConvDims {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_labels(
            f,
            ['b', 'f'],
            (self.input_batch, self.input_feature, &self.input_spatial),
        )?;
        f.write_str("_")?;
        write_labels(
            f,
            ['i', 'o'],
            (
                self.kernel_input_feature,
                self.kernel_output_feature,
                &self.kernel_spatial,
            ),
        )?;
        f.write_str("->")?;
        write_labels(
            f,
            ['b', 'f'],
            (self.output_batch, self.output_feature, &self.output_spatial),
        )
    }
}
