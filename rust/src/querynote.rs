//! QueryNote's matching of a batch of documents (Luwak thesis §3.3, §4, §5), compiled.
//!
//! A query is its terms by decreasing weight (the first is its representative term) and how many
//! of the others its QueryNote stores (`extra`, decided in Python by the thesis' cost model,
//! `wordcast.engines.querynote`). A batch becomes postings (term -> increasing document
//! positions); the first layer takes the queries whose representative term occurs; the second
//! ANDs the roaring bitmaps of the QueryNote's terms, which drops a query whose result is empty
//! and, when every term is indexed, *is* the answer; the rest get Lucene's leapfrogging
//! conjunction over the postings. `extra = 0` for every query is Luwak's representative-term
//! presearch, the baseline.

use std::time::Instant;

use crate::error::CoreError;
use pyo3::prelude::*;
use pyo3::types::PyString;
use roaring::RoaringBitmap;
use rustc_hash::FxHashMap;

use crate::interner::{Interner, TermId};

type SubId = u32;

struct Query {
    terms: Vec<TermId>, // by decreasing weight
    extra: usize,
    members: Vec<SubId>,
}

#[derive(Default)]
struct Index {
    queries: Vec<Option<Query>>,
    free: Vec<usize>,
    by_terms: FxHashMap<Vec<TermId>, usize>,
    by_rep: FxHashMap<TermId, Vec<usize>>,
    count: usize,
}

struct Batch {
    postings: FxHashMap<TermId, Vec<u32>>,
    bitmaps: FxHashMap<TermId, RoaringBitmap>,
}

impl Batch {
    fn new(docs: &[Vec<TermId>]) -> Batch {
        let mut postings: FxHashMap<TermId, Vec<u32>> = FxHashMap::default();
        for (position, doc) in docs.iter().enumerate() {
            for &term in doc {
                postings.entry(term).or_default().push(position as u32);
            }
        }
        Batch {
            postings,
            bitmaps: FxHashMap::default(),
        }
    }

    fn bitmap(&mut self, term: TermId) -> &RoaringBitmap {
        let postings = &self.postings;
        self.bitmaps
            .entry(term)
            .or_insert_with(|| match postings.get(&term) {
                Some(docs) => {
                    RoaringBitmap::from_sorted_iter(docs.iter().copied()).unwrap_or_default()
                }
                None => RoaringBitmap::new(),
            })
    }

    fn lists(&self, terms: &[TermId]) -> Option<Vec<&[u32]>> {
        terms
            .iter()
            .map(|t| self.postings.get(t).map(Vec::as_slice))
            .collect()
    }
}

/// Lucene's conjunction: the shortest list leads, the others advance to its document.
fn leapfrog(mut lists: Vec<&[u32]>) -> Vec<u32> {
    let mut found = Vec::new();
    if lists.iter().any(|l| l.is_empty()) {
        return found;
    }
    lists.sort_by_key(|l| l.len());
    let (lead, others) = lists.split_first().expect("at least one list");
    let mut at = vec![0usize; others.len()];
    let mut i = 0;
    'docs: while i < lead.len() {
        let doc = lead[i];
        for (k, list) in others.iter().enumerate() {
            let p = at[k] + list[at[k]..].partition_point(|&d| d < doc);
            at[k] = p;
            if p == list.len() {
                return found;
            }
            if list[p] != doc {
                let next = list[p];
                i += 1 + lead[i + 1..].partition_point(|&d| d < next);
                continue 'docs;
            }
        }
        found.push(doc);
        i += 1;
    }
    found
}

impl Index {
    fn add(&mut self, sub: SubId, terms: Vec<TermId>, extra: usize) {
        if let Some(&q) = self.by_terms.get(&terms) {
            if let Some(query) = self.queries[q].as_mut() {
                query.members.push(sub);
                self.count += 1;
                return;
            }
        }
        let rep = terms[0];
        let query = Query {
            terms: terms.clone(),
            extra,
            members: vec![sub],
        };
        let q = match self.free.pop() {
            Some(q) => {
                self.queries[q] = Some(query);
                q
            }
            None => {
                self.queries.push(Some(query));
                self.queries.len() - 1
            }
        };
        self.by_terms.insert(terms, q);
        self.by_rep.entry(rep).or_default().push(q);
        self.count += 1;
    }

    fn remove(&mut self, sub: SubId, terms: &[TermId]) -> bool {
        let Some(&q) = self.by_terms.get(terms) else {
            return false;
        };
        let Some(query) = self.queries[q].as_mut() else {
            return false;
        };
        let Some(at) = query.members.iter().position(|&m| m == sub) else {
            return false;
        };
        query.members.remove(at);
        self.count -= 1;
        if query.members.is_empty() {
            let rep = query.terms[0];
            self.queries[q] = None;
            self.free.push(q);
            self.by_terms.remove(terms);
            if let Some(bucket) = self.by_rep.get_mut(&rep) {
                bucket.retain(|&other| other != q);
                if bucket.is_empty() {
                    self.by_rep.remove(&rep);
                }
            }
        }
        true
    }

    fn match_batch(&self, docs: &[Vec<TermId>]) -> Vec<(SubId, u32)> {
        let mut batch = Batch::new(docs);
        let mut out = Vec::new();
        let reps: Vec<TermId> = batch
            .postings
            .keys()
            .copied()
            .filter(|t| self.by_rep.contains_key(t))
            .collect();
        for rep in reps {
            for &q in &self.by_rep[&rep] {
                let Some(query) = self.queries[q].as_ref() else {
                    continue;
                };
                let matched = match_query(query, &mut batch);
                for doc in matched {
                    out.extend(query.members.iter().map(|&m| (m, doc)));
                }
            }
        }
        out
    }
}

fn match_query(query: &Query, batch: &mut Batch) -> Vec<u32> {
    let terms = &query.terms;
    if query.extra == 0 {
        if terms.len() == 1 {
            return batch.postings.get(&terms[0]).cloned().unwrap_or_default();
        }
        return batch.lists(terms).map(leapfrog).unwrap_or_default();
    }
    let mut bits = batch.bitmap(terms[0]).clone();
    let indexed = query.extra.min(terms.len() - 1);
    if indexed == terms.len() - 1 {
        // Every term indexed: the AND is the answer.
        for &term in &terms[1..] {
            bits &= batch.bitmap(term);
            if bits.is_empty() {
                break;
            }
        }
        return bits.iter().collect();
    }
    for &term in &terms[1..indexed] {
        bits &= batch.bitmap(term);
        if bits.is_empty() {
            return Vec::new();
        }
    }
    // The last AND only has to say whether anything is left: no bitmap is built.
    if bits.is_disjoint(batch.bitmap(terms[indexed])) {
        return Vec::new();
    }
    batch.lists(terms).map(leapfrog).unwrap_or_default()
}

/// QueryNote over a batch of documents (``extra`` per query, as decided by the cost model).
#[pyclass(module = "wordcast._core")]
pub struct QueryNote {
    index: Index,
    interner: Interner,
}

fn ids_of(interner: &Interner, terms: &Bound<'_, PyAny>) -> PyResult<Option<Vec<TermId>>> {
    let mut ids = Vec::new();
    for item in terms.try_iter()? {
        match interner.get(item?.cast::<PyString>()?.to_str()?) {
            Some(id) => ids.push(id),
            None => return Ok(None),
        }
    }
    Ok(Some(ids))
}

#[pymethods]
impl QueryNote {
    #[new]
    fn new() -> Self {
        QueryNote {
            index: Index::default(),
            interner: Interner::default(),
        }
    }

    fn __len__(&self) -> usize {
        self.index.count
    }

    /// Index ``sub_id`` by ``terms`` in decreasing weight (the first is the representative), the
    /// QueryNote storing ``extra`` of the others.
    fn add(&mut self, sub_id: u32, terms: Vec<String>, extra: usize) -> PyResult<()> {
        if terms.is_empty() {
            return Err(CoreError::NoTerm(None).into());
        }
        let ids: Vec<TermId> = terms.iter().map(|t| self.interner.intern(t)).collect();
        self.index.add(sub_id, ids, extra);
        Ok(())
    }

    /// Remove a subscription added with these (weight-ordered) terms; False if not there.
    fn remove(&mut self, sub_id: u32, terms: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(match ids_of(&self.interner, terms)? {
            Some(ids) => self.index.remove(sub_id, &ids),
            None => false,
        })
    }

    /// Every (subscription, document position) of the batch that matches, the GIL released.
    fn match_batch(&self, py: Python<'_>, docs: &Bound<'_, PyAny>) -> PyResult<Vec<(u32, u32)>> {
        let batch = self.document_ids(docs)?;
        let index = &self.index;
        Ok(py.detach(|| index.match_batch(&batch)))
    }

    /// The term-collection cost model's costs (Luwak thesis §5), calibrated on this machine:
    /// seconds per operation on this batch and these (weight-ordered) queries, on this compiled
    /// path: (full check, AND of two bitmaps, output of one). Part of the algorithm, which
    /// weighs these to choose each query's extra terms; the engines' benchmarks are criterion's
    /// (`rust/benches/`).
    #[pyo3(signature = (docs, queries, repeat=3))]
    fn operation_costs(
        &self,
        py: Python<'_>,
        docs: &Bound<'_, PyAny>,
        queries: Vec<Vec<String>>,
        repeat: usize,
    ) -> PyResult<(f64, f64, f64)> {
        let batch_ids = self.document_ids(docs)?;
        let usable: Vec<Vec<TermId>> = queries
            .iter()
            .filter_map(|q| {
                q.iter()
                    .map(|t| self.interner.get(t))
                    .collect::<Option<Vec<_>>>()
            })
            .filter(|q| q.len() > 1)
            .take(500)
            .collect();
        if usable.is_empty() {
            return Err(CoreError::NothingToTime.into());
        }
        Ok(py.detach(|| {
            let mut batch = Batch::new(&batch_ids);
            for q in &usable {
                for &t in q {
                    batch.bitmap(t);
                }
            }
            let per = |run: &mut dyn FnMut()| {
                let mut best = f64::INFINITY;
                for _ in 0..repeat.max(1) {
                    let started = Instant::now();
                    run();
                    best = best.min(started.elapsed().as_secs_f64());
                }
                best / usable.len() as f64
            };
            let mut sink = 0usize;
            let check = per(&mut || {
                for q in &usable {
                    sink += batch.lists(q).map(leapfrog).map_or(0, |v| v.len());
                }
            });
            let and = per(&mut || {
                for q in &usable {
                    sink += (batch.bitmaps[&q[0]].clone() & &batch.bitmaps[&q[1]]).len() as usize;
                }
            });
            let avoid = per(&mut || {
                for q in &usable {
                    sink += batch.bitmaps[&q[0]].iter().count();
                }
            });
            std::hint::black_box(sink);
            (check, and, avoid)
        }))
    }
}

impl QueryNote {
    fn document_ids(&self, docs: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<TermId>>> {
        let mut batch = Vec::new();
        for doc in docs.try_iter()? {
            let mut ids = Vec::new();
            for term in doc?.try_iter()? {
                if let Some(id) = self.interner.get(term?.cast::<PyString>()?.to_str()?) {
                    ids.push(id);
                }
            }
            ids.sort_unstable();
            ids.dedup();
            batch.push(ids);
        }
        Ok(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leapfrog_is_the_intersection() {
        assert_eq!(
            leapfrog(vec![&[1, 3, 5, 7], &[3, 4, 5, 8], &[0, 3, 5]]),
            [3, 5]
        );
        assert!(leapfrog(vec![&[1, 2], &[]]).is_empty());
        assert_eq!(leapfrog(vec![&[2, 9]]), [2, 9]);
    }

    #[test]
    fn every_mode_finds_the_conjunctions() {
        let docs = vec![vec![1, 2, 3], vec![1, 3], vec![2, 3], vec![1, 2, 3, 4]];
        for extra in 0..3 {
            let mut index = Index::default();
            index.add(7, vec![1, 2, 3], extra);
            index.add(8, vec![3, 1], extra.min(1));
            let mut found = index.match_batch(&docs);
            found.sort_unstable();
            assert_eq!(
                found,
                [(7, 0), (7, 3), (8, 0), (8, 1), (8, 3)],
                "extra {extra}"
            );
        }
    }

    #[test]
    fn duplicates_share_a_query_and_leave_one_by_one() {
        let mut index = Index::default();
        index.add(1, vec![5, 6], 1);
        index.add(2, vec![5, 6], 1);
        assert!(index.remove(1, &[5, 6]));
        assert!(!index.remove(1, &[5, 6]));
        assert_eq!(index.match_batch(&[vec![5, 6]]), [(2, 0)]);
        assert!(index.remove(2, &[5, 6]));
        assert!(index.by_rep.is_empty());
    }
}
