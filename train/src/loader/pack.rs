//! Documents into rows of `seq` tokens, one after another: a row holds
//! the end of the document the last row stopped in, then whole documents,
//! then the start of the next. Every slot holds a token, so a packed
//! corpus fills its rows but for the last row of a pass over it, which is
//! padded (a row never holds a document twice, and the next pass starts
//! afresh).
//!
//! Targets are the next token of the same document: its last token's
//! target (the next document's unpredictable first token) is ignored, and
//! a row's last token's target is its document's next token in the next
//! row. Padding follows the packed convention of MaxText and T5: token 0,
//! segment id 0, target ignored.

use super::sources::DocRef;
use hlatc_models::IGNORE_INDEX;
use serde::{Deserialize, Serialize};

/// How rows mark their documents.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Packing {
    /// Segment ids number each row's documents from 1, so attention stays
    /// within a document (hlatc's packed steps).
    Segments,
    /// Plain concatenation, as GPT-2 and nanoGPT train: no segment ids, and
    /// a document's last token's target is the next document's first when
    /// that is in the same row (a row that ends with a document's last
    /// token ignores its target: the next document is not packed yet).
    Concat,
}

impl Packing {
    pub const ALL: [Packing; 2] = [Packing::Segments, Packing::Concat];

    /// The name `hlatc train --packing` and Python's `packing=` take.
    pub fn name(self) -> &'static str {
        match self {
            Packing::Segments => "segments",
            Packing::Concat => "concat",
        }
    }

    pub fn from_name(name: &str) -> Option<Packing> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// One packed row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub tokens: Vec<i32>,
    pub targets: Vec<i32>,
    /// The document of each token (from 1), 0 for padding.
    pub segments: Vec<i32>,
    /// Slots holding a token rather than padding.
    pub filled: usize,
    /// Documents (or parts of one) in the row.
    pub documents: usize,
}

/// The document being packed: the ids not yet placed start at `next`.
#[derive(Clone, Debug)]
pub struct Carry {
    pub doc: DocRef,
    pub ids: Vec<u32>,
    pub next: usize,
}

pub struct Packer {
    seq: usize,
    packing: Packing,
    carry: Option<Carry>,
    tokens: Vec<i32>,
    segments: Vec<i32>,
}

impl Packer {
    pub fn new(seq: usize, packing: Packing) -> Packer {
        Packer {
            seq,
            packing,
            carry: None,
            tokens: Vec::with_capacity(seq),
            segments: Vec::with_capacity(seq),
        }
    }

    /// Whether the packer needs another document to go on.
    pub fn wants_doc(&self) -> bool {
        self.carry.is_none()
    }

    /// The document being packed and where in it, between rows.
    pub fn carry(&self) -> Option<(DocRef, usize)> {
        self.carry.as_ref().map(|c| (c.doc, c.next))
    }

    /// Continues with `doc` (its ids from `next` on); the packer must want
    /// one. An empty document is dropped.
    pub fn push(&mut self, doc: DocRef, ids: Vec<u32>, next: usize) {
        debug_assert!(self.carry.is_none());
        if next < ids.len() {
            self.carry = Some(Carry { doc, ids, next });
        }
    }

    /// Places the carried document's ids; returns a row once one is full.
    pub fn fill(&mut self) -> Option<Row> {
        let carry = self.carry.as_mut()?;
        let segment = self.segments.last().copied().unwrap_or(0) + 1;
        let room = self.seq - self.tokens.len();
        let take = room.min(carry.ids.len() - carry.next);
        let part = &carry.ids[carry.next..carry.next + take];
        self.tokens.extend(part.iter().map(|&t| t as i32));
        self.segments.extend(std::iter::repeat_n(segment, take));
        carry.next += take;
        let continues = carry.ids.get(carry.next).map(|&t| t as i32);
        if continues.is_none() {
            self.carry = None;
        }
        (self.tokens.len() == self.seq).then(|| self.finish_row(continues))
    }

    /// The row in progress, padded, if it holds any token (the end of a
    /// pass over the corpus).
    pub fn flush(&mut self) -> Option<Row> {
        if self.tokens.is_empty() {
            return None;
        }
        let continues = self
            .carry
            .as_ref()
            .and_then(|c| c.ids.get(c.next))
            .map(|&t| t as i32);
        self.carry = None;
        Some(self.finish_row(continues))
    }

    fn finish_row(&mut self, continues: Option<i32>) -> Row {
        let filled = self.tokens.len();
        let documents = self.segments.last().copied().unwrap_or(0) as usize;
        let mut tokens = std::mem::replace(&mut self.tokens, Vec::with_capacity(self.seq));
        let mut segments = std::mem::replace(&mut self.segments, Vec::with_capacity(self.seq));
        tokens.resize(self.seq, 0);
        segments.resize(self.seq, 0);
        let ignore = IGNORE_INDEX as i32;
        let targets = (0..self.seq)
            .map(|i| {
                if i >= filled {
                    ignore
                } else if i + 1 < filled {
                    let same_doc = segments[i + 1] == segments[i];
                    match self.packing {
                        Packing::Segments if !same_doc => ignore,
                        _ => tokens[i + 1],
                    }
                } else if filled == self.seq {
                    continues.unwrap_or(ignore)
                } else {
                    ignore
                }
            })
            .collect();
        Row {
            tokens,
            targets,
            segments,
            filled,
            documents,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(n: u64) -> DocRef {
        DocRef {
            file: 0,
            offset: n,
            line: n,
        }
    }

    #[test]
    fn documents_fill_rows_and_carry_over() {
        let mut p = Packer::new(4, Packing::Segments);
        p.push(doc(0), vec![10, 11, 12], 0);
        assert_eq!(p.fill(), None);
        p.push(doc(1), vec![20, 21, 22], 0);
        let row = p.fill().unwrap();
        assert_eq!(row.tokens, [10, 11, 12, 20]);
        assert_eq!(row.segments, [1, 1, 1, 2]);
        // 12 ends its document; 20's target is its document's next, 21.
        assert_eq!(row.targets, [11, 12, -100, 21]);
        assert_eq!((row.filled, row.documents), (4, 2));
        assert_eq!(p.carry(), Some((doc(1), 1)));
        assert_eq!(p.fill(), None);
        let row = p.flush().unwrap();
        assert_eq!(row.tokens, [21, 22, 0, 0]);
        assert_eq!(row.segments, [1, 1, 0, 0]);
        assert_eq!(row.targets, [22, -100, -100, -100]);
    }

    #[test]
    fn concatenation_predicts_across_documents() {
        let mut p = Packer::new(4, Packing::Concat);
        p.push(doc(0), vec![1, 2], 0);
        assert_eq!(p.fill(), None);
        p.push(doc(1), vec![3, 4], 0);
        let row = p.fill().unwrap();
        assert_eq!(row.targets, [2, 3, 4, -100]);
    }
}
