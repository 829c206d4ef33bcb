//! The engines' benchmarks (`cargo bench --manifest-path rust/Cargo.toml`), apart from the
//! extension: the analyser's tokenising and the compact trie's adding and matching, on
//! synthetic text of corpus-like shape. End-to-end figures are `make bench-*`'s.

use std::hint::black_box;

use _core::engines::{
    for_each_entity, kept, normalised_tokens, stop_word_set, EntityScratch, Trie,
};
use criterion::{criterion_group, criterion_main, Criterion};

/// A deterministic word list: `words` distinct made-up words of 3 to 9 letters.
fn vocabulary(words: usize) -> Vec<String> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..words)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = 3 + (state % 7) as usize;
            (0..len)
                .map(|k| (b'a' + ((state >> (5 * k)) % 26) as u8) as char)
                .collect()
        })
        .collect()
}

fn texts(vocabulary: &[String], count: usize, length: usize) -> Vec<String> {
    (0..count)
        .map(|t| {
            (0..length)
                .map(|k| vocabulary[(t * 7919 + k * 104_729) % vocabulary.len()].as_str())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

fn analysis(c: &mut Criterion) {
    let posts = texts(&vocabulary(20_000), 1_000, 20);
    let stop = stop_word_set();
    c.bench_function("analysis: tokenise 1,000 posts of 20 words", |b| {
        let mut tokens = Vec::new();
        b.iter(|| {
            let mut kept_count = 0;
            for post in &posts {
                tokens.clear();
                normalised_tokens(black_box(post), &mut tokens);
                kept_count += tokens.iter().filter(|t| kept(t, &stop)).count();
            }
            kept_count
        })
    });
}

/// Posts with an entity in every `every` words: a hashtag, a mention, a cashtag or a link.
fn entity_texts(vocabulary: &[String], count: usize, length: usize, every: usize) -> Vec<String> {
    let markers = ["#", "@", "$", "https://example.com/"];
    (0..count)
        .map(|t| {
            (0..length)
                .map(|k| {
                    let word = &vocabulary[(t * 7919 + k * 104_729) % vocabulary.len()];
                    match k % every {
                        0 => format!("{}{word}", markers[(t + k / every) % markers.len()]),
                        _ => word.clone(),
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// What finding entities adds to analysis (issue 53's target: at most a tenth): the scan alone
/// on posts without a marker (the byte check), with two entities (a tweet's), and with an
/// entity in every five words, beside tokenising the same posts.
fn entities(c: &mut Criterion) {
    let vocabulary = vocabulary(20_000);
    for (name, posts) in [
        ("posts of 20 words", texts(&vocabulary, 1_000, 20)),
        (
            "posts with two entities",
            entity_texts(&vocabulary, 1_000, 20, 10),
        ),
        (
            "posts with an entity in five words",
            entity_texts(&vocabulary, 1_000, 20, 5),
        ),
    ] {
        c.bench_function(&format!("entities: tokenise 1,000 {name}"), |b| {
            let mut tokens = Vec::new();
            b.iter(|| {
                posts.iter().fold(0, |n, post| {
                    normalised_tokens(black_box(post), &mut tokens);
                    n + tokens.len()
                })
            })
        });
        c.bench_function(&format!("entities: find those of 1,000 {name}"), |b| {
            let mut scratch = EntityScratch::default();
            b.iter(|| {
                posts.iter().fold(0, |n, post| {
                    let mut found = 0;
                    for_each_entity(black_box(post), &mut scratch, |_| found += 1);
                    n + found
                })
            })
        });
    }
}

fn trie(c: &mut Criterion) {
    let words = 50_000u32;
    let subscriptions: Vec<Vec<u32>> = (0..100_000u32)
        .map(|s| {
            let mut path = vec![s % words, (s * 31 + 7) % words];
            path.sort_unstable();
            path.dedup();
            path
        })
        .collect();
    c.bench_function("trie: add 100,000 subscriptions of 2 terms", |b| {
        b.iter(|| {
            let mut trie = Trie::new();
            for (id, path) in subscriptions.iter().enumerate() {
                trie.add(id as u32, path);
            }
            trie.len()
        })
    });
    let mut trie = Trie::new();
    for (id, path) in subscriptions.iter().enumerate() {
        trie.add(id as u32, path);
    }
    let posts: Vec<Vec<u32>> = (0..1_000u32)
        .map(|p| {
            let mut item: Vec<u32> = (0..20).map(|k| (p * 7919 + k * 104_729) % words).collect();
            item.sort_unstable();
            item.dedup();
            item
        })
        .collect();
    c.bench_function("trie: match 1,000 posts of 20 terms", |b| {
        let (mut found, mut stack) = (Vec::new(), Vec::new());
        b.iter(|| {
            let mut matched = 0;
            for item in &posts {
                found.clear();
                trie.matches(black_box(item), &mut found, &mut stack);
                matched += found.len();
            }
            matched
        })
    });
}

criterion_group!(benches, analysis, entities, trie);
criterion_main!(benches);
