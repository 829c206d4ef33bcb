//! Language detection: fastText's supervised classifier (the `lid.176` model) run in the core.
//!
//! Prediction only, as `fasttext-predict` does it (Joulin et al., "Bag of Tricks for Efficient
//! Text Classification" and "FastText.zip"): a line's words and their character n-grams are
//! rows of the input matrix (product-quantised in a `.ftz`), averaged into a hidden vector that
//! the hierarchical softmax's tree scores label by label, best first. Every step is fastText's
//! own, in its order and its `f32`/`f64` mix, so the label is the one `fasttext-predict` gives
//! (held equal by the tests, `wordcast.testing.languages`); what differs is that nothing is
//! allocated per word or n-gram (hashes are FNV-1a, computed as an n-gram grows) and that a
//! batch runs without Python.
//!
//! Pure: no Python here; `bindings::detection` wraps it.

use rustc_hash::FxHashMap;

use crate::error::CoreError;

const MAGIC: i32 = 793_712_314;
const VERSION: i32 = 12;
const EOS: &[u8] = b"</s>";
const LABEL: &[u8] = b"__label__";
const HIERARCHICAL_SOFTMAX: i32 = 1;
const SUPERVISED: i32 = 3;
const KSUB: usize = 256; // centroids per sub-quantiser (fastText's ksub_)

/// A fastText model file read field by field (little-endian, as fastText writes it).
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], CoreError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len());
        let end = end.ok_or_else(|| invalid("the model file ends early"))?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], CoreError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn i32(&mut self) -> Result<i32, CoreError> {
        Ok(i32::from_le_bytes(self.array()?))
    }

    fn i64(&mut self) -> Result<i64, CoreError> {
        Ok(i64::from_le_bytes(self.array()?))
    }

    fn flag(&mut self) -> Result<bool, CoreError> {
        Ok(self.take(1)?[0] != 0)
    }

    fn count(&mut self, wide: bool) -> Result<usize, CoreError> {
        let n = if wide {
            self.i64()?
        } else {
            i64::from(self.i32()?)
        };
        usize::try_from(n).map_err(|_| invalid("a negative size in the model file"))
    }

    fn floats(&mut self, n: usize) -> Result<Vec<f32>, CoreError> {
        let size = n
            .checked_mul(4)
            .ok_or_else(|| invalid("a matrix too large"))?;
        let raw = self.take(size)?;
        Ok(raw
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    }

    fn word(&mut self) -> Result<&'a [u8], CoreError> {
        let rest = &self.bytes[self.at..];
        let end = rest.iter().position(|&b| b == 0);
        let word = self.take(end.ok_or_else(|| invalid("a word without its end"))?)?;
        self.at += 1;
        Ok(word)
    }
}

fn invalid(why: &str) -> CoreError {
    CoreError::Model(format!("not a fastText language model: {why}"))
}

/// fastText's product quantiser: `nsubq` slices of a row, each one of 256 centroids.
struct Quantiser {
    nsubq: usize,
    dsub: usize,
    lastdsub: usize,
    centroids: Vec<f32>,
}

impl Quantiser {
    fn read(reader: &mut Reader<'_>) -> Result<Self, CoreError> {
        let dim = reader.count(false)?;
        let nsubq = reader.count(false)?;
        let dsub = reader.count(false)?;
        let lastdsub = reader.count(false)?;
        let centroids = reader.floats(dim * KSUB)?;
        if nsubq == 0 || (nsubq - 1) * dsub + lastdsub != dim {
            return Err(invalid("a quantiser whose slices do not make its rows"));
        }
        Ok(Quantiser {
            nsubq,
            dsub,
            lastdsub,
            centroids,
        })
    }

    /// Centroid `code` of slice `m` (fastText's `get_centroids`).
    fn centroid(&self, m: usize, code: u8) -> &[f32] {
        let code = usize::from(code);
        if m == self.nsubq - 1 {
            let at = m * KSUB * self.dsub + code * self.lastdsub;
            &self.centroids[at..at + self.lastdsub]
        } else {
            let at = (m * KSUB + code) * self.dsub;
            &self.centroids[at..at + self.dsub]
        }
    }
}

/// One of the model's matrices: plain, or product-quantised with its rows' norms.
enum Matrix {
    Dense {
        rows: usize,
        cols: usize,
        data: Vec<f32>,
    },
    Quantised {
        rows: usize,
        codes: Vec<u8>,
        pq: Quantiser,
        norms: Option<(Vec<u8>, Quantiser)>,
    },
}

impl Matrix {
    fn read(reader: &mut Reader<'_>, quantised: bool) -> Result<Self, CoreError> {
        if !quantised {
            let rows = reader.count(true)?;
            let cols = reader.count(true)?;
            let data =
                reader.floats(rows.checked_mul(cols).ok_or_else(|| invalid("too large"))?)?;
            return Ok(Matrix::Dense { rows, cols, data });
        }
        let has_norms = reader.flag()?;
        let rows = reader.count(true)?;
        let _cols = reader.count(true)?;
        let size = reader.count(false)?;
        let codes = reader.take(size)?.to_vec();
        let pq = Quantiser::read(reader)?;
        if codes.len() != rows * pq.nsubq {
            return Err(invalid(
                "a quantised matrix whose codes do not fit its rows",
            ));
        }
        let norms = if has_norms {
            let codes = reader.take(rows)?.to_vec();
            Some((codes, Quantiser::read(reader)?))
        } else {
            None
        };
        Ok(Matrix::Quantised {
            rows,
            codes,
            pq,
            norms,
        })
    }

    fn rows(&self) -> usize {
        match self {
            Matrix::Dense { rows, .. } | Matrix::Quantised { rows, .. } => *rows,
        }
    }

    fn norm(&self, row: usize) -> f32 {
        match self {
            Matrix::Quantised {
                norms: Some((codes, npq)),
                ..
            } => npq.centroid(0, codes[row])[0],
            _ => 1.0,
        }
    }

    /// `x += row` (fastText's `addRowToVector`).
    fn add_row(&self, x: &mut [f32], row: usize) {
        match self {
            Matrix::Dense { cols, data, .. } => {
                for (x, a) in x.iter_mut().zip(&data[row * cols..(row + 1) * cols]) {
                    *x += *a;
                }
            }
            Matrix::Quantised { codes, pq, .. } => {
                let alpha = self.norm(row);
                let code = &codes[pq.nsubq * row..pq.nsubq * (row + 1)];
                for (m, &c) in code.iter().enumerate() {
                    for (n, value) in pq.centroid(m, c).iter().enumerate() {
                        x[m * pq.dsub + n] += alpha * *value;
                    }
                }
            }
        }
    }

    /// `row · x` (fastText's `dotRow`, its sum in `f32` in the same order).
    fn dot_row(&self, x: &[f32], row: usize) -> f32 {
        match self {
            Matrix::Dense { cols, data, .. } => {
                let mut d = 0.0f32;
                for (a, b) in data[row * cols..(row + 1) * cols].iter().zip(x) {
                    d += a * b;
                }
                d
            }
            Matrix::Quantised { codes, pq, .. } => {
                let code = &codes[pq.nsubq * row..pq.nsubq * (row + 1)];
                let mut res = 0.0f32;
                for (m, &c) in code.iter().enumerate() {
                    for (n, value) in pq.centroid(m, c).iter().enumerate() {
                        res += x[m * pq.dsub + n] * value;
                    }
                }
                res * self.norm(row)
            }
        }
    }
}

/// The settings of the model that prediction reads (fastText's `Args`).
struct Shape {
    dim: usize,
    word_ngrams: usize,
    bucket: u32,
    minn: usize,
    maxn: usize,
}

impl Shape {
    fn read(reader: &mut Reader<'_>) -> Result<Self, CoreError> {
        let mut ints = [0i32; 12];
        for int in &mut ints {
            *int = reader.i32()?;
        }
        reader.take(8)?; // the sampling threshold: training only
        let [dim, _ws, _epoch, _min_count, _neg, word_ngrams, loss, model, bucket, minn, maxn, _] =
            ints;
        if loss != HIERARCHICAL_SOFTMAX || model != SUPERVISED {
            return Err(invalid(
                "only supervised hierarchical-softmax models (lid.176's kind)",
            ));
        }
        let size = |v: i32| usize::try_from(v).map_err(|_| invalid("a negative setting"));
        Ok(Shape {
            dim: size(dim)?,
            word_ngrams: size(word_ngrams)?,
            bucket: u32::try_from(bucket)
                .ok()
                .filter(|&b| b > 0)
                .ok_or_else(|| invalid("bucket"))?,
            minn: size(minn)?,
            maxn: size(maxn)?,
        })
    }
}

/// The words the model knows (fastText's `Dictionary`), each with its input rows.
struct Vocabulary {
    ids: FxHashMap<Box<[u8]>, usize>,
    is_label: Vec<bool>,
    rows_of: Vec<Vec<i32>>,
    nwords: usize,
    labels: Vec<String>,
    label_counts: Vec<i64>,
    /// Pruned n-gram buckets and their rows; `None` when not pruned. (A table of every bucket,
    /// 8 MB for lid.176, was no faster.)
    pruned: Option<FxHashMap<i32, i32>>,
}

impl Vocabulary {
    fn read(reader: &mut Reader<'_>, shape: &Shape) -> Result<Self, CoreError> {
        let size = reader.count(false)?;
        let nwords = reader.count(false)?;
        let _nlabels = reader.count(false)?;
        let _ntokens = reader.i64()?;
        let pruned_size = reader.i64()?;
        let mut vocabulary = Vocabulary {
            ids: FxHashMap::default(),
            is_label: Vec::with_capacity(size),
            rows_of: Vec::with_capacity(size),
            nwords,
            labels: Vec::new(),
            label_counts: Vec::new(),
            pruned: None,
        };
        let mut words = Vec::with_capacity(size);
        for id in 0..size {
            let word = reader.word()?;
            let count = reader.i64()?;
            let label = reader.take(1)?[0] == 1;
            if label {
                let name = word.strip_prefix(LABEL).unwrap_or(word);
                vocabulary
                    .labels
                    .push(String::from_utf8_lossy(name).into_owned());
                vocabulary.label_counts.push(count);
            }
            vocabulary.ids.insert(word.into(), id);
            vocabulary.is_label.push(label);
            words.push(word);
        }
        if pruned_size >= 0 {
            let mut pruned = FxHashMap::default();
            for _ in 0..pruned_size {
                let (bucket, row) = (reader.i32()?, reader.i32()?);
                pruned.insert(bucket, row);
            }
            vocabulary.pruned = Some(pruned);
        }
        for (id, word) in words.iter().enumerate() {
            let mut rows = vec![id as i32];
            if *word != EOS {
                vocabulary.add_subwords(&wrapped(word), shape, &mut rows);
            }
            vocabulary.rows_of.push(rows);
        }
        Ok(vocabulary)
    }

    /// The row of n-gram bucket `bucket`, if the model kept it (fastText's `pushHash`).
    fn push_bucket(&self, bucket: i32, rows: &mut Vec<i32>) {
        let row = match &self.pruned {
            _ if bucket < 0 => return,
            None => bucket,
            Some(pruned) => match pruned.get(&bucket) {
                Some(&row) => row,
                None => return,
            },
        };
        rows.push(self.nwords as i32 + row);
    }

    /// The rows of a word's character n-grams, `minn` to `maxn` characters of `<word>` (fastText's
    /// `computeSubwords`), each hash grown a byte at a time rather than recomputed.
    fn add_subwords(&self, word: &[u8], shape: &Shape, rows: &mut Vec<i32>) {
        for i in 0..word.len() {
            if word[i] & 0xC0 == 0x80 {
                continue;
            }
            let (mut j, mut n, mut hash) = (i, 1, FNV_BASIS);
            while j < word.len() && n <= shape.maxn {
                hash = fnv(hash, word[j]);
                j += 1;
                while j < word.len() && word[j] & 0xC0 == 0x80 {
                    hash = fnv(hash, word[j]);
                    j += 1;
                }
                if n >= shape.minn && !(n == 1 && (i == 0 || j == word.len())) {
                    self.push_bucket((hash % shape.bucket) as i32, rows);
                }
                n += 1;
            }
        }
    }
}

const FNV_BASIS: u32 = 2_166_136_261;

/// One FNV-1a step, a byte read as a signed `char` as fastText's models were trained with.
fn fnv(hash: u32, byte: u8) -> u32 {
    (hash ^ (byte as i8 as i32 as u32)).wrapping_mul(16_777_619)
}

fn fnv_of(bytes: &[u8]) -> u32 {
    bytes.iter().fold(FNV_BASIS, |hash, &byte| fnv(hash, byte))
}

fn wrapped(word: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(word.len() + 2);
    out.push(b'<');
    out.extend_from_slice(word);
    out.push(b'>');
    out
}

/// A node of the hierarchical softmax's Huffman tree over the labels' counts.
#[derive(Clone, Copy)]
struct Node {
    left: i32,
    right: i32,
    count: i64,
}

/// fastText's `buildTree`: labels are leaves `0..n`, inner nodes `n..2n-1`, the root last.
fn huffman_tree(counts: &[i64]) -> Vec<Node> {
    let n = counts.len();
    let mut tree = vec![
        Node {
            left: -1,
            right: -1,
            count: 1_000_000_000_000_000
        };
        2 * n - 1
    ];
    for (node, &count) in tree.iter_mut().zip(counts) {
        node.count = count;
    }
    let (mut leaf, mut node) = (n as i64 - 1, n);
    for i in n..2 * n - 1 {
        let mut mini = [0usize; 2];
        for slot in &mut mini {
            if leaf >= 0 && tree[leaf as usize].count < tree[node].count {
                *slot = leaf as usize;
                leaf -= 1;
            } else {
                *slot = node;
                node += 1;
            }
        }
        tree[i].left = mini[0] as i32;
        tree[i].right = mini[1] as i32;
        tree[i].count = tree[mini[0]].count + tree[mini[1]].count;
    }
    tree
}

/// fastText's `std_log`: the logarithm taken in `f64` of `x + 1e-5`, kept in `f32`.
fn std_log(x: f32) -> f32 {
    (f64::from(x) + 1e-5).ln() as f32
}

/// A fastText language model, ready to predict.
pub struct LanguageModel {
    shape: Shape,
    vocabulary: Vocabulary,
    input: Matrix,
    output: Matrix,
    tree: Vec<Node>,
}

/// What one prediction reuses from the last: its rows, word hashes and hidden vector.
#[derive(Default)]
pub struct Scratch {
    rows: Vec<i32>,
    hashes: Vec<i32>,
    hidden: Vec<f32>,
    token: Vec<u8>,
}

impl LanguageModel {
    /// Reads a model file's bytes (`.bin` or `.ftz` of fastText 0.9's format, version 12).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, CoreError> {
        let mut reader = Reader { bytes, at: 0 };
        if reader.i32()? != MAGIC || reader.i32()? != VERSION {
            return Err(invalid("its header is not fastText's (version 12)"));
        }
        let shape = Shape::read(&mut reader)?;
        let vocabulary = Vocabulary::read(&mut reader, &shape)?;
        let quantised_input = reader.flag()?;
        let input = Matrix::read(&mut reader, quantised_input)?;
        let quantised_output = reader.flag()?;
        let output = Matrix::read(&mut reader, quantised_output)?;
        let labels = vocabulary.labels.len();
        if labels == 0 || output.rows() != labels || reader.at != bytes.len() {
            return Err(invalid("its output does not fit its labels"));
        }
        let tree = huffman_tree(&vocabulary.label_counts);
        let model = LanguageModel {
            shape,
            vocabulary,
            input,
            output,
            tree,
        };
        model.check_rows()?;
        Ok(model)
    }

    /// Every row a word or kept n-gram can name lies within the input matrix.
    fn check_rows(&self) -> Result<(), CoreError> {
        let rows = self.input.rows() as i64;
        let words = self
            .vocabulary
            .rows_of
            .iter()
            .flatten()
            .map(|&r| i64::from(r));
        let pruned = self.vocabulary.pruned.iter().flat_map(|p| p.values());
        let buckets = pruned.map(|&r| self.vocabulary.nwords as i64 + i64::from(r));
        let unpruned = self.vocabulary.nwords as i64 + i64::from(self.shape.bucket);
        let widest = words.chain(buckets).max().unwrap_or(0);
        let widest = if self.vocabulary.pruned.is_none() {
            widest.max(unpruned - 1)
        } else {
            widest
        };
        if widest >= rows || self.input_dim() != self.shape.dim {
            return Err(invalid(
                "its input matrix is smaller than its words and n-grams",
            ));
        }
        Ok(())
    }

    fn input_dim(&self) -> usize {
        match &self.input {
            Matrix::Dense { cols, .. } => *cols,
            Matrix::Quantised { pq, .. } => (pq.nsubq - 1) * pq.dsub + pq.lastdsub,
        }
    }

    /// The labels, in the model's order (codes without `__label__`).
    pub fn labels(&self) -> &[String] {
        &self.vocabulary.labels
    }

    /// The best label of one line of text (fastText's `predict(text, k=1)`: its words are what
    /// Python's `str.split()` makes of it), or `None` when no label scores above zero.
    pub fn predict(&self, text: &str, scratch: &mut Scratch) -> Option<usize> {
        scratch.rows.clear();
        scratch.hashes.clear();
        let words = text.split(is_python_space).filter(|w| !w.is_empty());
        // fastText also splits on NUL, which Python's `split` keeps inside a word.
        let tokens = words.flat_map(|w| w.split('\0')).filter(|w| !w.is_empty());
        for token in tokens.map(str::as_bytes).chain([EOS]) {
            if self.add_token(token, scratch) {
                break;
            }
        }
        self.add_word_ngrams(scratch);
        if scratch.rows.is_empty() {
            return None;
        }
        self.hidden(scratch);
        self.best_label(&scratch.hidden)
    }

    /// One token's rows (fastText's `getLine`); true at the end of the line (`</s>`).
    fn add_token(&self, token: &[u8], scratch: &mut Scratch) -> bool {
        let vocabulary = &self.vocabulary;
        let word = match vocabulary.ids.get(token) {
            Some(&id) if vocabulary.is_label[id] => false,
            Some(&id) => {
                scratch.rows.extend_from_slice(&vocabulary.rows_of[id]);
                true
            }
            None if token.starts_with(LABEL) => false,
            None => {
                scratch.token.clear();
                scratch.token.push(b'<');
                scratch.token.extend_from_slice(token);
                scratch.token.push(b'>');
                vocabulary.add_subwords(&scratch.token, &self.shape, &mut scratch.rows);
                true
            }
        };
        // Only word n-grams read the words' hashes: with none (lid.176) they are not made.
        if word && self.shape.word_ngrams > 1 {
            scratch.hashes.push(fnv_of(token) as i32);
        }
        token == EOS
    }

    /// The rows of the line's word n-grams (fastText's `addWordNgrams`; none for lid.176).
    fn add_word_ngrams(&self, scratch: &mut Scratch) {
        let (hashes, n) = (&scratch.hashes, self.shape.word_ngrams);
        for i in 0..hashes.len() {
            let mut h = hashes[i] as i64 as u64;
            for &next in hashes.iter().take(i + n).skip(i + 1) {
                h = h.wrapping_mul(116_049_371).wrapping_add(next as i64 as u64);
                let bucket = (h % u64::from(self.shape.bucket)) as i32;
                self.vocabulary.push_bucket(bucket, &mut scratch.rows);
            }
        }
    }

    /// The mean of the line's input rows (fastText's `averageRowsToVector`).
    fn hidden(&self, scratch: &mut Scratch) {
        scratch.hidden.clear();
        scratch.hidden.resize(self.shape.dim, 0.0);
        for &row in &scratch.rows {
            self.input.add_row(&mut scratch.hidden, row as usize);
        }
        let scale = (1.0f64 / scratch.rows.len() as f64) as f32;
        for x in &mut scratch.hidden {
            *x *= scale;
        }
    }

    /// The best leaf of the tree (fastText's `dfs` with k = 1 and threshold 0): a branch is left
    /// as soon as its score falls below the best leaf's; a leaf scoring as well replaces it.
    fn best_label(&self, hidden: &[f32]) -> Option<usize> {
        let labels = self.vocabulary.labels.len();
        let floor = std_log(0.0);
        let mut best: Option<(f32, usize)> = None;
        let mut todo = vec![(2 * labels - 2, 0.0f32)];
        while let Some((node, score)) = todo.pop() {
            if score < floor || best.is_some_and(|(b, _)| score < b) {
                continue;
            }
            let Node { left, right, .. } = self.tree[node];
            if left == -1 && right == -1 {
                best = Some((score, node));
                continue;
            }
            let f = self.output.dot_row(hidden, node - labels);
            let f = (1.0f64 / f64::from(1.0f32 + (-f).exp())) as f32;
            // Right pushed first: the left branch is walked first, as fastText's recursion does.
            let (to_left, to_right) = (std_log((1.0f64 - f64::from(f)) as f32), std_log(f));
            todo.push((right as usize, score + to_right));
            todo.push((left as usize, score + to_left));
        }
        best.map(|(_, label)| label)
    }
}

/// Python's `str.split()` whitespace: Unicode's `White_Space` and the four separators
/// U+001C–U+001F.
fn is_python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_hashes_bytes_as_signed_chars() {
        // fastText's hash of "a" and of a byte above 0x7F (sign-extended, as trained).
        assert_eq!(fnv_of(b"a"), 0xE40C_292C);
        assert_ne!(fnv_of(&[0xC3]), fnv(FNV_BASIS, 0x43));
        assert_eq!(
            fnv(FNV_BASIS, 0xC3),
            (FNV_BASIS ^ 0xFFFF_FFC3).wrapping_mul(16_777_619)
        );
    }

    #[test]
    fn the_huffman_tree_joins_the_two_smallest_each_time() {
        // Counts in fastText's order (descending): the two rarest leaves meet first.
        let tree = huffman_tree(&[5, 3, 2, 1]);
        assert_eq!((tree[4].left, tree[4].right, tree[4].count), (3, 2, 3));
        assert_eq!((tree[5].left, tree[5].right, tree[5].count), (4, 1, 6)); // a tie: the inner node first
        assert_eq!((tree[6].left, tree[6].right, tree[6].count), (0, 5, 11));
    }

    #[test]
    fn python_whitespace_includes_the_information_separators() {
        assert!(is_python_space('\u{1f}') && is_python_space('\u{a0}') && is_python_space('\t'));
        assert!(!is_python_space('\0') && !is_python_space('\u{200b}'));
    }

    #[test]
    fn a_file_that_is_not_a_model_is_refused() {
        assert!(LanguageModel::from_bytes(b"").is_err());
        assert!(LanguageModel::from_bytes(&[0u8; 64]).is_err());
        let mut header = MAGIC.to_le_bytes().to_vec();
        header.extend_from_slice(&VERSION.to_le_bytes());
        let error = LanguageModel::from_bytes(&header)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some("not a fastText language model: the model file ends early")
        );
    }
}
