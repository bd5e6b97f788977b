//! The most bytes a program's temporaries hold at once, as a fusing
//! compiler lays them out and a memory-minding scheduler orders them.
//!
//! Which values take memory of their own is what a fusing compiler (XLA's
//! CPU and GPU backends, neuronx-cc) decides, not what the graph lists: an
//! elementwise chain is one loop that writes only its last value, and a
//! broadcast is re-read in every loop that reads it. Counting every
//! instruction's result would put the score gradient's `[B, H, S, S]`
//! chain in memory several times over; counting none would miss it. The
//! rule, per value:
//!
//! - **Views** take nothing of their own: `tuple`, `get-tuple-element`,
//!   `reshape`, `bitcast` and `opt-barrier` name their operands' bytes
//!   (XLA's dataflow analysis forwards them; a reshape of a dense array is
//!   a bitcast on every backend this plans for). What reads a view reads
//!   its operands; an `opt-barrier` reads them whole (it exists to keep
//!   them from being fused into what follows).
//! - **Recomputed where read**: `broadcast`, `iota` and constants are
//!   computed again inside every loop that reads them (XLA duplicates
//!   them into each consumer), so they take memory only where an op that
//!   reads whole arrays (below) reads them.
//! - **Fusible**: elementwise ops and the moves and slices of elements
//!   (transpose, concatenate, pad, reverse, slice, dynamic-slice) are
//!   fused into the one loop that reads them. They take memory when more
//!   than one loop reads them (a fusing compiler does not compute an
//!   `exp` twice: XLA duplicates only the cheap producers above), or when
//!   an op that reads whole arrays does.
//! - **Everything else materializes** its result and reads its operands
//!   as whole arrays: dots, collectives, custom calls, calls, scatters
//!   and gathers, sorts, random bits. A `reduce` reads its operand in its
//!   own loop (XLA's input fusion), so it is a fusing reader, but writes
//!   its own result. The entry's outputs are written where the runtime
//!   asks and its parameters are the caller's: neither is a temporary.
//!
//! Each value that takes memory is a loop; a loop reads the loops behind
//! its operands (through fused values and views), and its value is alive
//! from its loop to the last loop that reads it. A `call`'s callee runs
//! at the call, and its own values (a softmax's exponentials) are alive
//! there beside the call's operands and result; a `while`'s body runs at
//! the `while` (one trip's values at a time, beside the loop's state,
//! which the `while` writes as its own: XLA copies a loop's initial state
//! into the buffers the loop updates).
//!
//! The order is the better of two: the emitted post-order, and the order
//! a list scheduler runs the loops in (XLA's `ListScheduler` rule: of the
//! loops whose inputs are written, the one that frees the most bytes less
//! what it takes; the emitted order breaks ties). XLA's default scheduler
//! keeps the best of its list, DFS and post-order schedules in the same
//! way. The emitted post-order alone is no backend's schedule: it visits
//! operands as listed, so the clip's sum over every gradient runs the
//! whole backward for the first gradient it names (the embedding's)
//! before any layer's weight gradients, and every layer's activations
//! stay alive to the backward's end (1.06x and 1.31x what XLA CPU
//! reserves on the small step without remat and with core-attention).
//!
//! Cost: two passes over the instructions to find the loops, one walk per
//! loop through the fused values behind its operands (each visited once
//! per loop that reads it), and a heap over the loops: `O(n log n)`, one
//! to two milliseconds on 70B's 36,000 instructions.

use hlatc_compiler::ir::op::OpFamily;
use hlatc_compiler::{Computation, ComputationId, InstrId, Module, Op};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// How a value's bytes exist in a fusing compiler's memory.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Its operands' bytes under another name.
    View,
    /// Computed again wherever it is read.
    Duplicated,
    /// Fused into the one loop that reads it.
    Fusible,
    /// Always a buffer of its own.
    Materialized,
}

fn kind(op: &Op) -> Kind {
    match op {
        Op::Tuple
        | Op::GetTupleElement { .. }
        | Op::Reshape { .. }
        | Op::Bitcast
        | Op::OptBarrier => Kind::View,
        Op::Broadcast { .. }
        | Op::Iota { .. }
        | Op::Constant(_)
        | Op::TupleConstant(_)
        | Op::Parameter(_) => Kind::Duplicated,
        Op::Transpose { .. }
        | Op::Concatenate { .. }
        | Op::Pad { .. }
        | Op::Reverse { .. }
        | Op::Slice { .. }
        | Op::DynamicSlice { .. } => Kind::Fusible,
        op if op.family() == OpFamily::Elementwise && !matches!(op, Op::Map { .. }) => {
            Kind::Fusible
        }
        _ => Kind::Materialized,
    }
}

/// Whether `op` reads its operands inside its own loop (so a fusible
/// operand is fused into it) rather than as whole arrays.
fn fuses_operands(op: &Op) -> bool {
    matches!(kind(op), Kind::Fusible | Kind::Duplicated) || matches!(op, Op::Reduce { .. })
}

/// The peak of a computation's temporaries, and where it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Peak {
    /// Bytes alive at once at the peak.
    pub bytes: u64,
    /// The instruction running at the peak (`None` for an empty walk).
    pub at: Option<InstrId>,
}

/// How many loops read a value, and whether an op reads it whole.
#[derive(Clone, Copy, Default)]
struct Demand {
    fused_readers: u32,
    whole: bool,
}

/// Which values of `c` take memory of their own (the rule above), by
/// index. `emitted` is any order that puts producers first.
fn ownership(c: &Computation, emitted: &[InstrId]) -> Vec<bool> {
    let bound = c.id_bound();
    let mut demand = vec![Demand::default(); bound];
    let mut owns = vec![false; bound];
    if let Some(r) = c.root() {
        demand[r.index()].whole = true;
    }
    // The last instruction that read each value, so an operand listed
    // twice (`multiply(x, x)`) is one reader, in time linear in the
    // operands (a tuple may list thousands).
    let mut seen_by = vec![u32::MAX; bound];
    // Users before producers: each value's demand is complete when it is
    // reached.
    for &i in emitted.iter().rev() {
        let op = &c.instr(i).op;
        let k = kind(op);
        let d = demand[i.index()];
        owns[i.index()] = match k {
            Kind::View => false,
            Kind::Duplicated => d.whole && !matches!(op, Op::Parameter(_)),
            Kind::Fusible => d.whole || d.fused_readers > 1,
            Kind::Materialized => true,
        };
        for &o in c.operand_ids(i) {
            if std::mem::replace(&mut seen_by[o.index()], i.index() as u32) == i.index() as u32 {
                continue;
            }
            let od = &mut demand[o.index()];
            if k == Kind::View && !matches!(op, Op::OptBarrier) {
                od.fused_readers = od.fused_readers.saturating_add(d.fused_readers);
                od.whole |= d.whole;
            } else if fuses_operands(op) {
                od.fused_readers = od.fused_readers.saturating_add(1);
            } else {
                od.whole = true;
            }
        }
    }
    owns
}

/// The one value a `get-tuple-element` reads when its tuple is built in
/// place (a `tuple`, or an `opt-barrier` of one), and the barrier: reading
/// element 3 of a recomputation's barrier keeps that input alive, not
/// every input (which would also make each read cost the whole tuple),
/// but waits for the barrier, which waits for all of them (the
/// recomputation's trigger among them).
fn element(c: &Computation, id: InstrId) -> Option<(InstrId, Option<InstrId>)> {
    let Op::GetTupleElement { index } = c.instr(id).op else {
        return None;
    };
    let mut tuple = *c.operand_ids(id).first()?;
    let mut barrier = None;
    if matches!(c.instr(tuple).op, Op::OptBarrier) {
        barrier = Some(tuple);
        tuple = *c.operand_ids(tuple).first()?;
    }
    match c.instr(tuple).op {
        Op::Tuple => c
            .operand_ids(tuple)
            .get(usize::try_from(index).ok()?)
            .map(|&e| (e, barrier)),
        _ => None,
    }
}

/// The peak of `module`'s entry: the most bytes its temporaries (every
/// value that takes memory of its own, less the entry's parameters,
/// constants and outputs) hold at once.
pub(super) fn peak(module: &Module) -> Peak {
    let mut callees = HashMap::new();
    peak_of(module, module.entry, &mut callees)
}

/// The peak of computation `id`. Its root is its caller's (the entry's:
/// the program's outputs), so it is not counted, and neither are its
/// parameters.
fn peak_of(module: &Module, id: ComputationId, callees: &mut HashMap<ComputationId, u64>) -> Peak {
    let c = module.computation(id);
    let emitted = c.post_order();
    let owns = ownership(c, &emitted);
    let loops = Loops::of(c, &emitted, &owns);
    let inner: Vec<u64> = loops
        .ids
        .iter()
        .map(|&i| match c.instr(i).op {
            // A loop's body runs at the loop, one trip at a time: its
            // values are alive there beside the loop's state, as a
            // call's callee's are beside the call.
            Op::Call {
                to_apply: callee, ..
            }
            | Op::While { body: callee, .. } => match callees.get(&callee) {
                Some(&b) => b,
                None => {
                    let b = peak_of(module, callee, callees).bytes;
                    callees.insert(callee, b);
                    b
                }
            },
            _ => 0,
        })
        .collect();
    let as_emitted: Vec<u32> = (0..loops.ids.len() as u32).collect();
    let listed = loops.list_order();
    let a = loops.peak_in(&as_emitted, &inner);
    let b = loops.peak_in(&listed, &inner);
    if b.bytes < a.bytes {
        b
    } else {
        a
    }
}

/// The values of a computation that take memory of their own, each the
/// loop that writes it, and the others' bytes they read (through fused
/// values and views), as compressed rows.
struct Loops {
    /// The instruction of each loop, in the emitted order.
    ids: Vec<InstrId>,
    /// The bytes each loop's value counts: none for the parameters,
    /// constants and the computation's result.
    bytes: Vec<u64>,
    input_start: Vec<u32>,
    inputs: Vec<u32>,
    reader_start: Vec<u32>,
    readers: Vec<u32>,
}

impl Loops {
    fn of(c: &Computation, emitted: &[InstrId], owns: &[bool]) -> Loops {
        let bound = c.id_bound();
        let mut index = vec![u32::MAX; bound];
        let mut ids = Vec::new();
        // An opt-barrier is a loop of no bytes of its own: what reads
        // through it waits for all its operands.
        for &i in emitted {
            if owns[i.index()] || matches!(c.instr(i).op, Op::OptBarrier) {
                index[i.index()] = ids.len() as u32;
                ids.push(i);
            }
        }
        // The loops `from` reads: its operands, looking through the
        // values that take no memory to the ones that do. `stamp` marks
        // what this walk has seen.
        let mut stamp = vec![u32::MAX; bound];
        let mut stack = Vec::new();
        let mut collect = |from: InstrId, mark: u32, out: &mut Vec<u32>| {
            stack.clear();
            stack.extend_from_slice(c.operand_ids(from));
            while let Some(o) = stack.pop() {
                if stamp[o.index()] == mark {
                    continue;
                }
                stamp[o.index()] = mark;
                match index[o.index()] {
                    u32::MAX => match element(c, o) {
                        Some((e, barrier)) => stack.extend(std::iter::once(e).chain(barrier)),
                        None => stack.extend_from_slice(c.operand_ids(o)),
                    },
                    l => out.push(l),
                }
            }
        };
        let mut input_start = Vec::with_capacity(ids.len() + 1);
        let mut inputs = Vec::new();
        for (l, &i) in ids.iter().enumerate() {
            input_start.push(inputs.len() as u32);
            collect(i, l as u32, &mut inputs);
        }
        input_start.push(inputs.len() as u32);
        let mut output = vec![false; ids.len()];
        if let Some(r) = c.root() {
            let mut read = Vec::new();
            match index[r.index()] {
                u32::MAX => collect(r, ids.len() as u32, &mut read),
                l => read.push(l),
            }
            for l in read {
                output[l as usize] = true;
            }
        }
        let bytes = ids
            .iter()
            .zip(&output)
            .map(|(&i, &out)| {
                let instr = c.instr(i);
                match instr.op {
                    Op::Parameter(_) | Op::Constant(_) | Op::TupleConstant(_) | Op::OptBarrier => 0,
                    _ if out => 0,
                    _ => instr.shape.byte_size(),
                }
            })
            .collect();
        // Readers: the same edges the other way round.
        let mut count = vec![0u32; ids.len() + 1];
        for &b in &inputs {
            count[b as usize + 1] += 1;
        }
        for k in 1..count.len() {
            count[k] += count[k - 1];
        }
        let reader_start = count.clone();
        let mut readers = vec![0u32; inputs.len()];
        for l in 0..ids.len() {
            for &b in &inputs[input_start[l] as usize..input_start[l + 1] as usize] {
                readers[count[b as usize] as usize] = l as u32;
                count[b as usize] += 1;
            }
        }
        Loops {
            ids,
            bytes,
            input_start,
            inputs,
            reader_start,
            readers,
        }
    }

    fn inputs(&self, l: u32) -> &[u32] {
        &self.inputs
            [self.input_start[l as usize] as usize..self.input_start[l as usize + 1] as usize]
    }

    fn readers(&self, l: u32) -> &[u32] {
        &self.readers
            [self.reader_start[l as usize] as usize..self.reader_start[l as usize + 1] as usize]
    }

    /// The peak of the loops run in `order`: each value alive from its
    /// loop to its last reader, and a call's callee at the call.
    fn peak_in(&self, order: &[u32], inner: &[u64]) -> Peak {
        let n = order.len();
        let mut position = vec![0usize; n];
        for (p, &l) in order.iter().enumerate() {
            position[l as usize] = p;
        }
        let mut delta = vec![0i128; n + 1];
        for (l, &bytes) in self.bytes.iter().enumerate() {
            if bytes == 0 {
                continue;
            }
            let born = position[l];
            let dies = self
                .readers(l as u32)
                .iter()
                .map(|&r| position[r as usize])
                .fold(born, usize::max);
            delta[born] += i128::from(bytes);
            delta[dies + 1] -= i128::from(bytes);
        }
        let mut live: i128 = 0;
        let mut best = Peak::default();
        for (p, &l) in order.iter().enumerate() {
            live += delta[p];
            let now = u64::try_from(live)
                .unwrap_or(0)
                .saturating_add(inner[l as usize]);
            if best.at.is_none() || now > best.bytes {
                best = Peak {
                    bytes: now,
                    at: Some(self.ids[l as usize]),
                };
            }
        }
        best
    }

    /// The order a list scheduler runs the loops in (see the module
    /// doc): each value is read last where its last reader runs, so a
    /// weight gradient's dot runs as soon as it frees the activation it
    /// reads, not where the emitted order lists it.
    fn list_order(&self) -> Vec<u32> {
        let n = self.ids.len();
        let mut pending: Vec<u32> = (0..n as u32).map(|l| self.inputs(l).len() as u32).collect();
        let mut unread: Vec<u32> = (0..n as u32)
            .map(|l| self.readers(l).len() as u32)
            .collect();
        let mut done = vec![false; n];
        let mut key = vec![0i64; n];
        let gain = |l: u32, unread: &[u32]| -> i64 {
            let freed: u64 = self
                .inputs(l)
                .iter()
                .filter(|&&b| unread[b as usize] == 1)
                .map(|&b| self.bytes[b as usize])
                .sum();
            i64::try_from(freed)
                .unwrap_or(i64::MAX)
                .saturating_sub(i64::try_from(self.bytes[l as usize]).unwrap_or(i64::MAX))
        };
        let mut ready: BinaryHeap<(i64, Reverse<u32>)> = BinaryHeap::new();
        for l in 0..n as u32 {
            if pending[l as usize] == 0 {
                key[l as usize] = gain(l, &unread);
                ready.push((key[l as usize], Reverse(l)));
            }
        }
        let mut order = Vec::with_capacity(n);
        while let Some((k, Reverse(l))) = ready.pop() {
            if done[l as usize] || k != key[l as usize] {
                continue;
            }
            done[l as usize] = true;
            order.push(l);
            for &b in self.inputs(l) {
                unread[b as usize] -= 1;
                if unread[b as usize] == 1 {
                    // Its last reader now frees it.
                    if let Some(&r) = self.readers(b).iter().find(|&&r| !done[r as usize]) {
                        if pending[r as usize] == 0 {
                            key[r as usize] = gain(r, &unread);
                            ready.push((key[r as usize], Reverse(r)));
                        }
                    }
                }
            }
            for &r in self.readers(l) {
                pending[r as usize] -= 1;
                if pending[r as usize] == 0 {
                    key[r as usize] = gain(r, &unread);
                    ready.push((key[r as usize], Reverse(r)));
                }
            }
        }
        order
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hlatc_compiler::formats::text::parse_module;

    fn peak_of_text(text: &str) -> u64 {
        peak(&parse_module(text).unwrap_or_else(|e| panic!("{e}"))).bytes
    }

    /// An elementwise chain is one loop: only its end, read by the dot,
    /// takes memory (4 KiB), beside the dot's own result (4 KiB). The
    /// broadcast is recomputed in the loop, the reshape is a view, and
    /// the parameters and the output are not temporaries.
    #[test]
    fn a_fused_chain_takes_only_the_memory_of_what_a_dot_reads() {
        let text = r#"HloModule m

ENTRY e {
  p0 = f32[32,32] parameter(0)
  p1 = f32[32,32] parameter(1)
  c = f32[] constant(2)
  b = f32[32,32] broadcast(c), dimensions={}
  m = f32[32,32] multiply(p0, b)
  e1 = f32[32,32] exponential(m)
  r = f32[32,32] reshape(e1)
  d = f32[32,32] dot(r, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  n = f32[32,32] negate(d)
  ROOT t = (f32[32,32]) tuple(n)
}
"#;
        assert_eq!(peak_of_text(text), 2 * 4096);
    }

    /// A value read by two loops takes memory (an `exp` is not computed
    /// twice) and stays alive until the later of them reads it.
    #[test]
    fn a_value_read_twice_is_kept_until_its_last_reader() {
        let text = r#"HloModule m

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  p0 = f32[64,64] parameter(0)
  x = f32[64,64] exponential(p0)
  z = f32[] constant(0)
  s = f32[64] reduce(x, z), dimensions={1}, to_apply=add
  d = f32[64,64] dot(x, p0), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bs = f32[64,64] broadcast(s), dimensions={0}
  ROOT o = f32[64,64] add(d, bs)
}
"#;
        // x (16 KiB) and the dot's result (16 KiB) alive at the dot, with
        // the row sums (256 bytes); the root is the output.
        assert_eq!(peak_of_text(text), 2 * 16384 + 256);
    }
}
