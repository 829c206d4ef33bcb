//! Terms as small integers: the order they are sorted in is the order of their ids.

use rustc_hash::FxHashMap;

pub type TermId = u32;

/// Term -> id. Ids given by an explicit order (rarest first, say) come first; a term the order
/// does not know gets the next id after every id given so far.
#[derive(Default)]
pub struct Interner {
    ids: FxHashMap<Box<str>, TermId>,
    next: TermId,
}

impl Interner {
    pub fn with_order(order: impl IntoIterator<Item = (String, TermId)>) -> Interner {
        let mut interner = Interner::default();
        for (term, rank) in order {
            interner.next = interner.next.max(rank.saturating_add(1));
            interner.ids.insert(term.into_boxed_str(), rank);
        }
        interner
    }

    pub fn intern(&mut self, term: &str) -> TermId {
        if let Some(&id) = self.ids.get(term) {
            return id;
        }
        let id = self.next;
        self.next += 1;
        self.ids.insert(term.into(), id);
        id
    }

    pub fn get(&self, term: &str) -> Option<TermId> {
        self.ids.get(term).copied()
    }

    pub fn heap_bytes(&self) -> usize {
        // The table's slots, and each term's own allocation (rounded as an allocator would).
        self.ids.capacity() * (std::mem::size_of::<Box<str>>() + 4 + 1)
            + self
                .ids
                .keys()
                .map(|k| k.len().div_ceil(16) * 16)
                .sum::<usize>()
    }
}

/// The sorted, distinct ids of `terms`, interning new ones.
pub fn path(interner: &mut Interner, terms: &[String]) -> Vec<TermId> {
    let mut ids: Vec<TermId> = terms.iter().map(|t| interner.intern(t)).collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// The sorted, distinct ids of the known `terms` (an unknown term is in no subscription).
pub fn known(interner: &Interner, terms: &[String]) -> Vec<TermId> {
    let mut ids: Vec<TermId> = terms.iter().filter_map(|t| interner.get(t)).collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}
