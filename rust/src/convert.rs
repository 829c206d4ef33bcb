//! What crosses the boundary with Python: ids checked, strings and term ids read from Python
//! iterables, flat buffers handed back.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyMemoryView, PyString, PyTuple};

use crate::error::CoreError;
use crate::interner::{Interner, TermId};

/// Largest subscription id (the top bit marks shared subscription lists inside the trie).
pub(crate) const MAX_SUB_ID: u32 = (1 << 31) - 1;

pub(crate) fn check_id(sub_id: u32) -> PyResult<u32> {
    if sub_id > MAX_SUB_ID {
        return Err(CoreError::IdTooLarge {
            id: sub_id,
            max: MAX_SUB_ID,
        }
        .into());
    }
    Ok(sub_id)
}

/// The strings of any iterable of str (a list, a tuple, a frozenset).
pub(crate) fn strings(terms: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    let mut out = Vec::new();
    for item in terms.try_iter()? {
        out.push(item?.cast::<PyString>()?.to_str()?.to_owned());
    }
    Ok(out)
}

/// The sorted, distinct ids of the terms of `terms` this interner knows, without copying them.
pub(crate) fn known_ids(interner: &Interner, terms: &Bound<'_, PyAny>) -> PyResult<Vec<TermId>> {
    let mut ids = Vec::new();
    let mut take = |item: &Bound<'_, PyAny>| -> PyResult<()> {
        if let Some(id) = interner.get(item.cast::<PyString>()?.to_str()?) {
            ids.push(id);
        }
        Ok(())
    };
    // A list or a tuple is read by index: no iterator object, no reference counted per step.
    if let Ok(list) = terms.cast::<PyList>() {
        for item in list.iter() {
            take(&item)?;
        }
    } else if let Ok(tuple) = terms.cast::<PyTuple>() {
        for item in tuple.iter() {
            take(&item)?;
        }
    } else {
        for item in terms.try_iter()? {
            take(&item?)?;
        }
    }
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

/// A ``memoryview`` of unsigned 32-bit integers (format ``"I"``) holding `values`.
pub(crate) fn u32_buffer<'py>(py: Python<'py>, values: &[u32]) -> PyResult<Bound<'py, PyAny>> {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
    let view = PyMemoryView::from(&PyBytes::new(py, &bytes))?;
    view.call_method1("cast", ("I",))
}

/// Move the distinct values of a sorted slice to its front; how many there are.
pub(crate) fn dedup_sorted(values: &mut [TermId]) -> usize {
    let mut kept = 0;
    for i in 0..values.len() {
        if kept == 0 || values[i] != values[kept - 1] {
            values[kept] = values[i];
            kept += 1;
        }
    }
    kept
}
