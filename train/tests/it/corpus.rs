//! A small corpus the loader's tests read, shared with the root crate's
//! integration tests (`tests/it/main.rs` includes this file), so both
//! read the same documents.

/// A JSONL corpus (the text in `text`) of `docs` documents of one to
/// `max_sentences` sentences of a small grammar over the word tokenizer's (`tests/fixtures/tokenizer-words.json`)
/// words, written to `path`; the same `seed` writes the same file.
pub fn word_corpus(path: &std::path::Path, docs: usize, max_sentences: u64, seed: u64) {
    let subjects = [
        "the cat",
        "a dog",
        "the bird",
        "a fish",
        "the old cat",
        "a small dog",
    ];
    let verbs = [
        "sat on",
        "ran under",
        "flew over",
        "swam in",
        "found",
        "liked",
    ];
    let objects = [
        "the mat",
        "a log",
        "the tree",
        "the pond",
        "the sky",
        "a red log",
    ];
    let mut rng = hlatc_compiler::util::split_mix::SplitMix64::new(seed);
    let mut pick = |words: &[&'static str]| words[(rng.next_u64() % words.len() as u64) as usize];
    let mut out = String::new();
    for i in 0..docs {
        let n = 1 + (i as u64 * 7 + seed) % max_sentences;
        let text: Vec<String> = (0..n)
            .map(|_| format!("{} {} {} .", pick(&subjects), pick(&verbs), pick(&objects)))
            .collect();
        out.push_str(&serde_json::json!({ "text": text.join(" "), "id": i }).to_string());
        out.push('\n');
    }
    std::fs::write(path, out).unwrap();
}
