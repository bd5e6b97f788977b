//! Fuzz-style robustness: thousands of mutated texts and protos go through
//! the parser, decoder, verifier, printer and encoder. Every one must come
//! back as Ok or Err; a panic fails the test and prints the input.

use hlatc_compiler::{formats::proto, formats::text, verify};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

/// xorshift64*: deterministic, so a failure reproduces from the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Tokens that make mutations land on grammar decisions, not just bytes.
const TOKENS: &[&str] = &[
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    ",",
    "=",
    ":",
    "ROOT ",
    "ENTRY ",
    "%",
    "f32[",
    "pred[]",
    "s32[2,3]{1,0}",
    "(f32[], s32[])",
    "-1",
    "0",
    "99999999999999999999",
    "9223372036854775807",
    "1e309",
    "nan",
    "-inf",
    "\"",
    "\\",
    "/*",
    "*/",
    "x",
    "dimensions={}",
    "dimensions={0,1,2,3}",
    "to_apply=",
    "index=7",
    "slice={[0:1:0]}",
    "padding=0_-5",
    "constant(",
    "parameter(",
    "add(",
    "tuple(",
    "get-tuple-element(",
    "reduce(",
    "dot(",
    "broadcast(",
    "\n",
    " ",
];

fn mutate(src: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut v = src.to_vec();
    for _ in 0..1 + rng.below(2) {
        let at = rng.below(v.len() + 1);
        match rng.below(5) {
            0 if !v.is_empty() => {
                let i = at.min(v.len() - 1);
                v[i] = rng.next() as u8;
            }
            1 if !v.is_empty() => {
                let end = (at + 1 + rng.below(16)).min(v.len());
                v.drain(at.min(end)..end);
            }
            2 => {
                let t = TOKENS[rng.below(TOKENS.len())].as_bytes();
                v.splice(at..at, t.iter().copied());
            }
            3 => v.truncate(at),
            _ => {
                // Duplicate a chunk elsewhere (repeats names, lines, braces).
                if !v.is_empty() {
                    let s = rng.below(v.len());
                    let e = (s + 1 + rng.below(40)).min(v.len());
                    let chunk: Vec<u8> = v[s..e].to_vec();
                    let at = at.min(v.len());
                    v.splice(at..at, chunk);
                }
            }
        }
    }
    v
}

fn seeds() -> Vec<String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hlo");
    ["all_ops.hlo", "xla_classic.hlo", "unbounded_dims.hlo"]
        .iter()
        .map(|f| std::fs::read_to_string(root.join(f)).unwrap())
        .collect()
}

/// Everything downstream of a successful parse/decode must not panic either.
fn exercise(m: &hlatc_compiler::Module) {
    if verify(m).is_ok() {
        let printed = text::print_module(m);
        let again = text::parse_module(&printed).expect("a verified module's text must parse");
        // A value text cannot carry is named (and the CLI says so); the
        // rest must come back unchanged.
        assert!(
            again == *m || !text::unprintable(m).is_empty(),
            "verified module changed through text:\n{printed}"
        );
        let bytes = proto::encode_module(m);
        proto::decode_module(&bytes).expect("a verified module's proto must decode");
    } else {
        // Printing and emitting unverified modules is allowed to produce
        // garbage but not to crash.
        let _ = text::print_module(m);
        let _ = proto::encode_module(m);
    }
}

#[test]
fn mutated_text_never_panics() {
    let seeds = seeds();
    let mut rng = Rng(0x5EED_0001);
    let (mut ok, mut err) = (0, 0);
    for i in 0..4000 {
        let src = &seeds[i % seeds.len()];
        let input = String::from_utf8_lossy(&mutate(src.as_bytes(), &mut rng)).into_owned();
        let r = catch_unwind(AssertUnwindSafe(|| match text::parse_module(&input) {
            Ok(m) => {
                exercise(&m);
                true
            }
            Err(e) => {
                assert!(e.line >= 1 && e.column >= 1 && !e.message.is_empty());
                false
            }
        }));
        match r {
            Ok(true) => ok += 1,
            Ok(false) => err += 1,
            Err(_) => panic!("panic on mutated text #{i}:\n{input}"),
        }
    }
    // The mutations must actually reach both outcomes to mean anything.
    assert!(ok > 100 && err > 1000, "ok {ok}, err {err}");
}

#[test]
fn mutated_protos_never_panic() {
    let mut rng = Rng(0x5EED_0002);
    let protos: Vec<Vec<u8>> = seeds()
        .iter()
        .map(|s| proto::encode_module(&text::parse_module(s).unwrap()))
        .collect();
    let (mut ok, mut err) = (0, 0);
    for i in 0..4000 {
        let input = mutate(&protos[i % protos.len()], &mut rng);
        let r = catch_unwind(AssertUnwindSafe(|| match proto::decode_module(&input) {
            Ok(m) => {
                exercise(&m);
                true
            }
            Err(_) => false,
        }));
        match r {
            Ok(true) => ok += 1,
            Ok(false) => err += 1,
            Err(_) => panic!("panic on mutated proto #{i}: {input:?}"),
        }
    }
    // Most mutations break the wire format; dozens still decode and reach
    // the verifier, printer and encoder.
    assert!(ok > 50 && err > 1000, "ok {ok}, err {err}");
}
