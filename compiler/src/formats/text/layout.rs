//! A layout's text after the `:`, as in `{1,0:T(8,128)(2,1)E(4)S(1)}`:
//! the items hlatc keeps ([`PhysicalLayout`]), and a named refusal for
//! those it does not model.

use super::cursor::{AttrSyntaxError, Cursor};
use crate::ir::shape::{PhysicalLayout, SplitConfig, COMBINE_DIMENSION};

type Result<T> = std::result::Result<T, AttrSyntaxError>;

/// Items of XLA's layout syntax that hlatc does not model, by their
/// prefix, longest first where one prefix starts another.
const UNMODELED: &[(&str, &str)] = &[
    ("D(", "dimension level types (a sparse layout)"),
    ("#(", "an index primitive type"),
    ("*(", "a pointer primitive type"),
    ("P(", "a physical shape"),
    ("M(", "dynamic shape metadata"),
];

/// The items hlatc reads, and whether one may be written more than once.
/// `SC` comes before `S`: one prefix starts the other.
const ITEMS: [(&str, bool); 5] = [
    ("SC", true),
    ("T", false),
    ("L", false),
    ("E", false),
    ("S", false),
];

/// `None` when the text says nothing beyond XLA's defaults.
pub(crate) fn parse_physical_layout(text: &str) -> Result<Option<Box<PhysicalLayout>>> {
    let mut c = Cursor::new(text);
    let mut p = PhysicalLayout::default();
    // The single-valued items already read, one bit per index in `ITEMS`.
    let mut seen = 0u8;
    loop {
        c.skip_ws();
        if c.peek().is_none() {
            break;
        }
        let at = c.pos;
        if let Some((pre, what)) = UNMODELED.iter().find(|(pre, _)| c.rest().starts_with(pre)) {
            return c.fail(format!("`{pre}...)` ({what}) is not supported in a layout"));
        }
        let (index, &(item, repeats)) = ITEMS
            .iter()
            .enumerate()
            .find(|(_, (k, _))| c.rest().starts_with(k))
            .ok_or_else(|| AttrSyntaxError {
                offset: at,
                message: format!(
                    "expected a layout item (T, L, E, S or SC), found `{}`",
                    c.rest().chars().take(12).collect::<String>()
                ),
            })?;
        if !repeats {
            if seen & 1 << index != 0 {
                return c.fail(format!("`{item}` is written twice in one layout"));
            }
            seen |= 1 << index;
        }
        c.pos += item.len();
        match item {
            "T" => {
                if !c.rest().starts_with('(') {
                    return c.fail("expected a tile such as `(8,128)` after `T`");
                }
                while c.rest().starts_with('(') {
                    p.tiles.push(tile(&mut c)?);
                }
            }
            "L" => p.tail_padding_alignment_in_elements = single(&mut c)?,
            "E" => p.element_size_in_bits = single(&mut c)?,
            "S" => p.memory_space = single(&mut c)?,
            _ => {
                c.require("(")?;
                let dimension = c.int()?;
                c.require(":")?;
                let split_indices = c.ints()?;
                c.require(")")?;
                p.split_configs.push(SplitConfig {
                    dimension,
                    split_indices,
                });
            }
        }
    }
    Ok(p.boxed_unless_default())
}

/// `(n)`.
fn single(c: &mut Cursor<'_>) -> Result<i64> {
    c.require("(")?;
    let v = c.int()?;
    c.require(")")?;
    Ok(v)
}

/// `(8,128)`, a dimension written `*` where the tile combines dimensions.
fn tile(c: &mut Cursor<'_>) -> Result<Vec<i64>> {
    c.require("(")?;
    let mut dims = Vec::new();
    loop {
        dims.push(if c.eat("*") {
            COMBINE_DIMENSION
        } else {
            c.int()?
        });
        if !c.eat(",") {
            break;
        }
    }
    c.require(")")?;
    Ok(dims)
}
