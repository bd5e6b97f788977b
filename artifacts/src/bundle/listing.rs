//! The manifest's listings (`inputs`, `outputs`, `parallel.tp_split`) with
//! each run of layers stated once. A 70B step has 80 layers of the same
//! tensors under four roles, and listed one by one they made the manifest
//! 1.4 MB. Where consecutive layers hold the same entries, differing only
//! in the layer's number in their names and an index that moves by a
//! fixed step, the manifest holds the first layer's entries once, with the
//! layers they repeat over:
//!
//! ```json
//! {"layers": [0, 80], "index_stride": 7, "each": [
//!   {"index": 1, "name": "model.layers.{layer}.input_layernorm.weight", ...}, ...]}
//! ```
//!
//! Layer `l` of the run holds each entry with `{layer}` in its names read
//! as `l`, its `layer` `l` and its index moved by `(l - first) *
//! index_stride`, in that order: layer by layer, each layer's entries as
//! listed. Only entries whose `layer` says they are in one make runs; the
//! names' numbers are written from it, never read. A listing may
//! mix runs and single entries, and a manifest from before runs (every
//! entry single) reads the same.

use serde::{Deserialize, Serialize};

/// What stands for the layer's number in a run's names.
const LAYER: &str = "{layer}";

/// A run may not stand for more entries than this: a manifest lists a
/// model's tensors, and a malformed one must not make its reader allocate
/// without bound.
const MAX_ENTRIES: i64 = 1 << 22;

/// One element of a listing as written: an entry, or a run of layers.
#[derive(Serialize)]
#[serde(untagged)]
pub(crate) enum Listed<T> {
    Layers(LayerRun<T>),
    One(T),
}

/// Entries repeated over layers `[layers[0], layers[1])`.
#[derive(Serialize, Deserialize)]
pub(crate) struct LayerRun<T> {
    layers: [i64; 2],
    /// How far an entry's index moves from one layer to the next.
    index_stride: usize,
    /// Layer `layers[0]`'s entries, `{layer}` for its number in names.
    each: Vec<T>,
}

/// An entry a listing may state per layer.
pub(crate) trait PerLayer: Serialize + Sized {
    fn index(&self) -> usize;
    /// The entry as a run states it (its names' layer number written
    /// `{layer}`, its own `layer` left out), and that number; `None` for an
    /// entry in no layer, or one whose name a run could not give back.
    fn templated(&self) -> Option<(i64, Self)>;
    /// Whether two templates are the same but for their indices.
    fn alike(&self, other: &Self) -> bool;
}

/// `name` with the number of `layer` written `{layer}` where it stands in
/// `layers.N.`; `None` when it stands nowhere there (the run could not
/// give the name back), or the name already holds `{layer}` (it would be
/// read as a number).
pub(crate) fn template(name: &str, layer: i64) -> Option<String> {
    let templated = in_template(name, layer);
    (!name.contains(LAYER) && templated != name).then_some(templated)
}

/// `name` with the number of `layer` written `{layer}` where it is in
/// `layers.N.`: for the other names an entry holds (a fused tensor's
/// members), which lie in the entry's layer.
pub(crate) fn in_template(name: &str, layer: i64) -> String {
    name.replace(&format!("layers.{layer}."), &format!("layers.{LAYER}."))
}

/// `entries` as a listing: each longest run of at least two consecutive
/// layers whose entries match stated once, the rest one by one.
pub(crate) fn by_layer<T: PerLayer>(entries: Vec<T>) -> Vec<Listed<T>> {
    let index: Vec<usize> = entries.iter().map(PerLayer::index).collect();
    // Each entry's layer and template, made once: the first layer of a
    // run gives its `each`, the others are compared with it.
    let mut templates: Vec<Option<(i64, T)>> = entries.iter().map(PerLayer::templated).collect();
    let mut entries: Vec<Option<T>> = entries.into_iter().map(Some).collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < entries.len() {
        let Some(first) = templates[i].as_ref().map(|(l, _)| *l) else {
            out.extend(entries[i].take().map(Listed::One));
            i += 1;
            continue;
        };
        let k = templates[i..]
            .iter()
            .take_while(|t| t.as_ref().map(|(l, _)| *l) == Some(first))
            .count();
        let stride = index.get(i + k).and_then(|&n| n.checked_sub(index[i]));
        // Layer `first + b` matches the first, entry by entry: the same
        // but for the layer's number and an index `b` strides on.
        let matches = |b: usize| {
            let Some(stride) = stride else { return false };
            let at = i + b * k;
            at + k <= entries.len()
                && (0..k).all(|j| {
                    let (Some((l, t)), Some((_, t0))) = (&templates[at + j], &templates[i + j])
                    else {
                        return false;
                    };
                    let moved = b
                        .checked_mul(stride)
                        .and_then(|n| index[i + j].checked_add(n));
                    *l == first + b as i64 && moved == Some(index[at + j]) && t.alike(t0)
                })
        };
        let mut layers = 1;
        while matches(layers) {
            layers += 1;
        }
        if layers < 2 {
            out.extend(
                entries[i..i + k]
                    .iter_mut()
                    .filter_map(Option::take)
                    .map(Listed::One),
            );
            i += k;
            continue;
        }
        let each = templates[i..i + k]
            .iter_mut()
            .filter_map(|t| t.take().map(|(_, t)| t))
            .collect();
        out.push(Listed::Layers(LayerRun {
            layers: [first, first + layers as i64],
            index_stride: stride.unwrap_or(0),
            each,
        }));
        i += layers * k;
    }
    out
}

/// Why a listing is not one hlatc can read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListingError {
    /// Layers `[first, end)` of `each` entries.
    #[error("a run of layers [{first}, {end}) of {each} entries is not a range of at most {MAX_ENTRIES} entries")]
    Layers { first: i64, end: i64, each: usize },
    #[error("an element with `layers` is not a run of layers (layers, index_stride, each)")]
    NotARun,
    #[error("a run of layers moves its indices by {stride} a layer, past the largest index over {layers} layers")]
    StrideOverflow { layers: i64, stride: usize },
    #[error("a run of layers moves index {index} by {shift}, past the largest index")]
    IndexOverflow { index: usize, shift: usize },
}

/// An entry of a listing as read: a run's entry at layer `layer`, its
/// index moved by `shift`.
pub(crate) trait AtLayer: Sized {
    fn at_layer(&self, layer: i64, shift: usize) -> Result<Self, ListingError>;
}

/// One element of a listing as read.
#[derive(Deserialize)]
#[serde(untagged)]
pub(crate) enum ListedView<T> {
    Layers(LayerRun<T>),
    One(T),
}

/// Every entry of `listing`, runs read out layer by layer.
pub(crate) fn expand<T: AtLayer>(listing: Vec<ListedView<T>>) -> Result<Vec<T>, ListingError> {
    let mut out = Vec::with_capacity(listing.len());
    for element in listing {
        let run = match element {
            ListedView::One(t) => {
                out.push(t);
                continue;
            }
            ListedView::Layers(run) => run,
        };
        for (l, shift) in layer_shifts(&run)? {
            for t in &run.each {
                out.push(t.at_layer(l, shift)?);
            }
        }
    }
    Ok(out)
}

/// A listing of a manifest as JSON (`inputs`, `outputs`,
/// `parallel.tp_split`), runs read out layer by layer, for readers that
/// take the manifest as JSON: every entry as a manifest from before runs
/// lists it. Not an array is read as an empty listing.
pub fn expand_json(listing: &serde_json::Value) -> Result<Vec<serde_json::Value>, ListingError> {
    use serde_json::Value;
    /// `v` with `{layer}` read as `layer` in every string it holds.
    fn at(v: &Value, layer: i64) -> Value {
        match v {
            Value::String(s) => Value::String(at_layer(s, layer)),
            Value::Array(a) => Value::Array(a.iter().map(|x| at(x, layer)).collect()),
            Value::Object(o) => {
                Value::Object(o.iter().map(|(k, x)| (k.clone(), at(x, layer))).collect())
            }
            other => other.clone(),
        }
    }
    let mut out = Vec::new();
    for element in listing.as_array().into_iter().flatten() {
        if element.get("layers").is_none() {
            out.push(element.clone());
            continue;
        }
        let run = LayerRun::<Value>::deserialize(element).map_err(|_| ListingError::NotARun)?;
        for (l, shift) in layer_shifts(&run)? {
            for entry in &run.each {
                let mut e = at(entry, l);
                if let Some(index) = e.get("index").and_then(Value::as_u64) {
                    let index = usize::try_from(index).unwrap_or(usize::MAX);
                    e["index"] = shifted(index, shift)?.into();
                }
                if let Value::Object(fields) = &mut e {
                    fields.insert("layer".into(), l.into());
                }
                out.push(e);
            }
        }
    }
    Ok(out)
}

/// Each layer of `run` and how far its indices move.
fn layer_shifts<T>(run: &LayerRun<T>) -> Result<Vec<(i64, usize)>, ListingError> {
    let [first, end] = run.layers;
    let entries = i64::try_from(run.each.len())
        .ok()
        .and_then(|each| end.checked_sub(first)?.checked_mul(each));
    if first < 0 || end < first || entries.is_none_or(|n| n > MAX_ENTRIES) {
        return Err(ListingError::Layers {
            first,
            end,
            each: run.each.len(),
        });
    }
    (first..end)
        .map(|l| {
            usize::try_from(l - first)
                .ok()
                .and_then(|n| n.checked_mul(run.index_stride))
                .map(|shift| (l, shift))
                .ok_or(ListingError::StrideOverflow {
                    layers: l - first,
                    stride: run.index_stride,
                })
        })
        .collect()
}

/// `name` at layer `layer`: `{layer}` read as its number.
pub(crate) fn at_layer(name: &str, layer: i64) -> String {
    name.replace(LAYER, &layer.to_string())
}

/// `index` moved by `shift`, or the error that says it cannot be.
pub(crate) fn shifted(index: usize, shift: usize) -> Result<usize, ListingError> {
    index
        .checked_add(shift)
        .ok_or(ListingError::IndexOverflow { index, shift })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    struct Entry {
        index: usize,
        name: String,
        shape: Vec<i64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        layer: Option<i64>,
    }

    impl PerLayer for Entry {
        fn index(&self) -> usize {
            self.index
        }
        fn alike(&self, other: &Self) -> bool {
            (&self.name, &self.shape) == (&other.name, &other.shape)
        }
        fn templated(&self) -> Option<(i64, Self)> {
            let layer = self.layer?;
            Some((
                layer,
                Entry {
                    name: template(&self.name, layer)?,
                    layer: None,
                    ..self.clone()
                },
            ))
        }
    }

    impl AtLayer for Entry {
        fn at_layer(&self, layer: i64, shift: usize) -> Result<Self, ListingError> {
            Ok(Entry {
                index: shifted(self.index, shift)?,
                name: at_layer(&self.name, layer),
                shape: self.shape.clone(),
                layer: Some(layer),
            })
        }
    }

    /// An entry of no layer.
    fn entry(index: usize, name: &str, shape: &[i64]) -> Entry {
        Entry {
            index,
            name: name.to_string(),
            shape: shape.to_vec(),
            layer: None,
        }
    }

    /// An entry of layer `layer`, named `model.layers.{layer}.` and `name`.
    fn in_layer(index: usize, layer: i64, name: &str, shape: &[i64]) -> Entry {
        Entry {
            layer: Some(layer),
            ..entry(index, &format!("model.layers.{layer}.{name}"), shape)
        }
    }

    fn round_trip(entries: Vec<Entry>) -> (Vec<Entry>, serde_json::Value) {
        let json = serde_json::to_value(by_layer(entries)).unwrap();
        let view: Vec<ListedView<Entry>> = serde_json::from_value(json.clone()).unwrap();
        (expand(view).unwrap(), json)
    }

    #[test]
    fn an_entrys_layer_templates_its_name() {
        assert_eq!(
            template("adam_m.model.layers.12.mlp.down_proj.weight", 12),
            Some("adam_m.model.layers.{layer}.mlp.down_proj.weight".into())
        );
        // A name the layer's number does not stand in, or one a reader
        // would take `{layer}` in, cannot be given back by a run.
        assert_eq!(template("model.layers.12.w", 1), None);
        assert_eq!(template("model.norm.weight", 0), None);
        assert_eq!(template("model.layers.3", 3), None);
        assert_eq!(template("model.layers.{layer}.w.layers.3.", 3), None);
        assert_eq!(
            in_template("model.layers.3.self_attn.q_proj.weight", 3),
            "model.layers.{layer}.self_attn.q_proj.weight"
        );
    }

    #[test]
    fn layers_alike_are_one_run_and_read_back_as_they_were() {
        let mut entries = vec![entry(0, "embed", &[8, 4])];
        for l in 0..5 {
            entries.push(in_layer(1 + 2 * l as usize, l, "a", &[4]));
            entries.push(in_layer(2 + 2 * l as usize, l, "b", &[4, 4]));
        }
        entries.push(entry(11, "norm", &[4]));
        let (back, json) = round_trip(entries.clone());
        assert_eq!(back, entries);
        assert_eq!(
            json,
            serde_json::json!([
                {"index": 0, "name": "embed", "shape": [8, 4]},
                {"layers": [0, 5], "index_stride": 2, "each": [
                    {"index": 1, "name": "model.layers.{layer}.a", "shape": [4]},
                    {"index": 2, "name": "model.layers.{layer}.b", "shape": [4, 4]},
                ]},
                {"index": 11, "name": "norm", "shape": [4]},
            ])
        );
    }

    #[test]
    fn a_layer_that_differs_ends_the_run_and_a_lone_layer_is_listed() {
        // Layer 2's b has another shape; indices step by 3 (a skipped
        // input between layers), as tp_split's do.
        let mut entries = Vec::new();
        for l in 0..4 {
            let shape: &[i64] = if l == 2 { &[5] } else { &[4] };
            entries.push(in_layer(3 * l as usize, l, "a", &[4]));
            entries.push(in_layer(3 * l as usize + 1, l, "b", shape));
        }
        let (back, json) = round_trip(entries.clone());
        assert_eq!(back, entries);
        let list = json.as_array().unwrap();
        // [0, 2) as a run; layer 2 alone; layer 3 alone.
        assert_eq!(list.len(), 5);
        assert_eq!(list[0]["layers"], serde_json::json!([0, 2]));
        assert_eq!(list[0]["index_stride"], 3);
        assert_eq!(list[1]["name"], "model.layers.2.a");
        assert_eq!(list[1]["layer"], 2);
    }

    #[test]
    fn an_entry_of_no_layer_is_listed_alone_whatever_its_name() {
        // Its name looks like a layer's; its layer says it is in none.
        let entries: Vec<Entry> = (0..3)
            .map(|l| entry(l, &format!("model.layers.{l}.a"), &[4]))
            .collect();
        let (back, json) = round_trip(entries.clone());
        assert_eq!(back, entries);
        assert_eq!(json.as_array().unwrap().len(), 3);
    }

    #[test]
    fn a_run_past_its_bounds_is_refused() {
        let run = |layers: [i64; 2], stride: usize| -> Vec<ListedView<Entry>> {
            serde_json::from_value(serde_json::json!([
                {"layers": layers, "index_stride": stride, "each": [
                    {"index": 1, "name": "model.layers.{layer}.a", "shape": [4]}]}
            ]))
            .unwrap()
        };
        let layers = |first, end| ListingError::Layers {
            first,
            end,
            each: 1,
        };
        assert_eq!(expand(run([3, 1], 1)).err(), Some(layers(3, 1)));
        assert_eq!(expand(run([-1, 1], 1)).err(), Some(layers(-1, 1)));
        assert_eq!(expand(run([0, 1 << 40], 1)).err(), Some(layers(0, 1 << 40)));
        assert_eq!(
            expand(run([0, 3], usize::MAX)).err(),
            Some(ListingError::StrideOverflow {
                layers: 2,
                stride: usize::MAX
            })
        );
        // Layer 1 moves index 1 by usize::MAX.
        assert_eq!(
            expand(run([0, 2], usize::MAX)).err(),
            Some(ListingError::IndexOverflow {
                index: 1,
                shift: usize::MAX
            })
        );
    }

    #[test]
    fn a_json_listing_reads_as_the_entries_it_stands_for() {
        let entries: Vec<Entry> = (0..3)
            .flat_map(|l| {
                [
                    in_layer(2 * l as usize, l, "a", &[2]),
                    in_layer(2 * l as usize + 1, l, "b", &[3]),
                ]
            })
            .collect();
        let json = serde_json::to_value(by_layer(entries.clone())).unwrap();
        assert_eq!(json.as_array().unwrap().len(), 1);
        let flat: Vec<serde_json::Value> = entries
            .iter()
            .map(|e| serde_json::to_value(e).unwrap())
            .collect();
        assert_eq!(expand_json(&json).unwrap(), flat);
        // A listing without runs, as older manifests hold, reads as itself.
        assert_eq!(expand_json(&flat.clone().into()).unwrap(), flat);
        assert_eq!(
            expand_json(&serde_json::json!([{"layers": "all"}])).err(),
            Some(ListingError::NotARun)
        );
    }
}
