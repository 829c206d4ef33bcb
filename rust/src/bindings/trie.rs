//! `wordcast._core.CompactTrie`: `trie::Trie` over interned terms, for Python.

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::convert::{check_id, dedup_sorted, known_ids, strings, u32_buffer, MAX_SUB_ID};
use crate::error::CoreError;
use crate::interner::{self, Interner};
use crate::trie::{TermId, Trie};

/// The compact trie (web-syndication thesis §3.2.2) over interned terms.
#[pyclass(module = "wordcast._core")]
pub(crate) struct CompactTrie {
    trie: Trie,
    interner: Interner,
}

#[pymethods]
impl CompactTrie {
    /// ``order``: term -> rank, the order paths are sorted in (rarest first, say); terms it does
    /// not name come after, in the order they are first seen.
    #[new]
    #[pyo3(signature = (order=None))]
    fn new(order: Option<HashMap<String, u32>>) -> Self {
        CompactTrie {
            trie: Trie::new(),
            interner: Interner::with_order(order.unwrap_or_default()),
        }
    }

    fn __len__(&self) -> usize {
        self.trie.len()
    }

    /// Index subscription ``sub_id`` (0 … 2**31 - 1) by its analysed terms.
    fn add(&mut self, sub_id: u32, terms: &Bound<'_, PyAny>) -> PyResult<()> {
        let path = interner::path(&mut self.interner, &strings(terms)?);
        if path.is_empty() {
            return Err(CoreError::NoTerm(None).into());
        }
        self.trie.add(check_id(sub_id)?, &path);
        Ok(())
    }

    /// ``add`` for many subscriptions: their terms are interned first, then indexed with the
    /// GIL released. Nothing is added unless every subscription is valid.
    fn add_many(
        &mut self,
        py: Python<'_>,
        sub_ids: Vec<u32>,
        terms: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        // One flat run of ids with offsets, not a list of lists of strings: a million
        // subscriptions then cost a few bytes each in transit.
        let mut ids: Vec<TermId> = Vec::new();
        let mut ends: Vec<usize> = Vec::with_capacity(sub_ids.len());
        for (at, subscription) in terms.try_iter()?.enumerate() {
            let Some(&id) = sub_ids.get(at) else {
                return Err(
                    CoreError::Uneven("as many subscription ids as term lists, please").into(),
                );
            };
            check_id(id)?;
            let start = ids.len();
            for term in subscription?.try_iter()? {
                ids.push(self.interner.intern(term?.cast::<PyString>()?.to_str()?));
            }
            if ids.len() == start {
                return Err(CoreError::NoTerm(Some(id)).into());
            }
            ends.push(ids.len());
        }
        if ends.len() != sub_ids.len() {
            return Err(CoreError::Uneven("as many subscription ids as term lists, please").into());
        }
        let trie = &mut self.trie;
        py.detach(|| {
            let mut start = 0;
            for (&id, &end) in sub_ids.iter().zip(&ends) {
                let path = &mut ids[start..end];
                path.sort_unstable();
                let distinct = dedup_sorted(path);
                trie.add(id, &path[..distinct]);
                start = end;
            }
            // A load of this size has grown the arenas by doubling; trimming them costs a pass
            // over the trie, paid for by the load itself.
            if 4 * sub_ids.len() >= trie.len() {
                trie.shrink();
            }
        });
        Ok(())
    }

    /// Remove a subscription added with these terms; False if it is not there.
    fn remove(&mut self, sub_id: u32, terms: &Bound<'_, PyAny>) -> PyResult<bool> {
        let names = strings(terms)?;
        let path = interner::known(&self.interner, &names);
        if path.len() != {
            let mut distinct = names.clone();
            distinct.sort_unstable();
            distinct.dedup();
            distinct.len()
        } {
            return Ok(false); // a term never indexed: no subscription has it
        }
        Ok(sub_id <= MAX_SUB_ID && self.trie.remove(sub_id, &path))
    }

    /// The subscriptions whose every term is among ``terms``.
    #[pyo3(name = "match")]
    fn match_terms(&self, terms: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
        let item = known_ids(&self.interner, terms)?;
        let (mut found, mut stack) = (Vec::new(), Vec::new());
        self.trie.matches(&item, &mut found, &mut stack);
        Ok(found)
    }

    /// ``match`` of each publication of a batch, with the GIL released while matching.
    fn match_many(&self, py: Python<'_>, batch: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<u32>>> {
        let mut items = Vec::new();
        for terms in batch.try_iter()? {
            items.push(known_ids(&self.interner, &terms?)?);
        }
        let trie = &self.trie;
        Ok(py.detach(|| {
            let (mut found, mut stack) = (Vec::new(), Vec::new());
            items
                .iter()
                .map(|item| {
                    found.clear();
                    trie.matches(item, &mut found, &mut stack);
                    found.clone()
                })
                .collect()
        }))
    }

    /// ``match_many`` as two flat buffers of unsigned 32-bit integers (``memoryview``s cast to
    /// ``"I"``): the ids matched, publication after publication, and where each publication's
    /// run starts (``offsets[k]:offsets[k + 1]`` is publication k's; one more offset than
    /// publications). No Python object per match; the GIL released while matching.
    fn match_many_flat<'py>(
        &self,
        py: Python<'py>,
        batch: &Bound<'py, PyAny>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let mut items = Vec::new();
        for terms in batch.try_iter()? {
            items.push(known_ids(&self.interner, &terms?)?);
        }
        let trie = &self.trie;
        let (ids, offsets) = py.detach(|| {
            let (mut ids, mut stack) = (Vec::new(), Vec::new());
            let mut offsets = Vec::with_capacity(items.len() + 1);
            offsets.push(0u32);
            for item in &items {
                trie.matches(item, &mut ids, &mut stack);
                offsets.push(ids.len() as u32);
            }
            (ids, offsets)
        });
        Ok((u32_buffer(py, &ids)?, u32_buffer(py, &offsets)?))
    }

    /// Nodes, root included.
    #[getter]
    fn node_count(&self) -> usize {
        self.trie.node_count()
    }

    /// Bytes the trie and its term table take.
    #[getter]
    fn heap_bytes(&self) -> usize {
        self.trie.heap_bytes() + self.interner.heap_bytes()
    }

    /// True when no node but the root is a bare chain link (path compression holds).
    fn is_compressed(&self) -> bool {
        self.trie.is_compressed()
    }
}
