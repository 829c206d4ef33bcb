//! The compact trie of the web-syndication thesis (§3.2.2), over integer term ids, in an arena.
//!
//! A subscription is the sorted set of its terms' ids, a path from the root. A node is 16 bytes:
//! its label (the run of further terms a *compact* node stands for: path compression), its
//! subscriptions (none, one id inline, or several in a side table: the thesis' types a, b, c) and
//! its children (none, or an index into a table of child sets: types I and II). Labels live in one
//! pool, child sets in another; a child set is a sorted vector while small and a hash map once
//! wide (the root's). Matching is the scoped traversal of the plain trie (S³-TM §4.1): from a node,
//! only the item's terms after the one that led there are tried, and a compact node is entered
//! only when every term of its label is in the item.

use rustc_hash::FxHashMap;

pub type SubId = u32;
type NodeId = u32;
type TermId = u32;

const NONE: u32 = u32::MAX;
const MANY: u32 = 1 << 31; // in `Node::subs`: an index into `Trie::many`
const WIDE_FROM: usize = 16; // children at which a sorted vector becomes a hash map

#[derive(Clone, Copy)]
struct Node {
    label: u32, // offset into `labels`
    label_len: u32,
    subs: u32,     // NONE, a subscription id, or MANY | index into `many`
    children: u32, // NONE or index into `child_sets`
}

enum Children {
    Few(Vec<(TermId, NodeId)>), // sorted by term
    Wide(FxHashMap<TermId, NodeId>),
}

impl Children {
    fn get(&self, term: TermId) -> Option<NodeId> {
        match self {
            Children::Few(v) => v
                .binary_search_by_key(&term, |&(t, _)| t)
                .ok()
                .map(|at| v[at].1),
            Children::Wide(m) => m.get(&term).copied(),
        }
    }

    fn insert(&mut self, term: TermId, node: NodeId) {
        match self {
            Children::Few(v) => {
                let at = v.partition_point(|&(t, _)| t < term);
                v.insert(at, (term, node));
                if v.len() > WIDE_FROM {
                    *self = Children::Wide(v.iter().copied().collect());
                }
            }
            Children::Wide(m) => {
                m.insert(term, node);
            }
        }
    }

    fn remove(&mut self, term: TermId) {
        match self {
            Children::Few(v) => {
                if let Ok(at) = v.binary_search_by_key(&term, |&(t, _)| t) {
                    v.remove(at);
                }
            }
            Children::Wide(m) => {
                m.remove(&term);
            }
        }
    }

    fn len(&self) -> usize {
        match self {
            Children::Few(v) => v.len(),
            Children::Wide(m) => m.len(),
        }
    }

    fn only(&self) -> Option<(TermId, NodeId)> {
        match self {
            Children::Few(v) if v.len() == 1 => Some(v[0]),
            Children::Wide(m) if m.len() == 1 => m.iter().next().map(|(&t, &n)| (t, n)),
            _ => None,
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Children::Few(v) => v.capacity() * 8,
            Children::Wide(m) => m.capacity() * 12,
        }
    }
}

#[derive(Default)]
pub struct Trie {
    nodes: Vec<Node>,
    free_nodes: Vec<NodeId>,
    labels: Vec<TermId>,
    child_sets: Vec<Children>,
    free_child_sets: Vec<u32>,
    many: Vec<Vec<SubId>>,
    free_many: Vec<u32>,
    count: usize,
    live_labels: usize, // label terms live nodes use; the rest of the pool is garbage
}

impl Trie {
    pub fn new() -> Trie {
        let mut trie = Trie::default();
        trie.nodes.push(Node {
            label: 0,
            label_len: 0,
            subs: NONE,
            children: NONE,
        });
        let root_children = trie.new_child_set();
        trie.nodes[0].children = root_children;
        trie
    }

    pub fn len(&self) -> usize {
        self.count
    }

    fn label(&self, node: NodeId) -> &[TermId] {
        let n = &self.nodes[node as usize];
        &self.labels[n.label as usize..(n.label + n.label_len) as usize]
    }

    fn new_node(&mut self, label: &[TermId]) -> NodeId {
        let start = self.labels.len() as u32;
        self.labels.extend_from_slice(label);
        self.live_labels += label.len();
        let node = Node {
            label: start,
            label_len: label.len() as u32,
            subs: NONE,
            children: NONE,
        };
        match self.free_nodes.pop() {
            Some(id) => {
                self.nodes[id as usize] = node;
                id
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as NodeId
            }
        }
    }

    fn new_child_set(&mut self) -> u32 {
        match self.free_child_sets.pop() {
            Some(id) => {
                self.child_sets[id as usize] = Children::Few(Vec::new());
                id
            }
            None => {
                self.child_sets.push(Children::Few(Vec::new()));
                (self.child_sets.len() - 1) as u32
            }
        }
    }

    fn free_child_set(&mut self, id: u32) {
        self.child_sets[id as usize] = Children::Few(Vec::new());
        self.free_child_sets.push(id);
    }

    fn child(&self, node: NodeId, term: TermId) -> Option<NodeId> {
        let children = self.nodes[node as usize].children;
        if children == NONE {
            return None;
        }
        self.child_sets[children as usize].get(term)
    }

    fn add_child(&mut self, node: NodeId, term: TermId, child: NodeId) {
        if self.nodes[node as usize].children == NONE {
            let set = self.new_child_set();
            self.nodes[node as usize].children = set;
        }
        let set = self.nodes[node as usize].children;
        self.child_sets[set as usize].insert(term, child);
    }

    fn add_sub(&mut self, node: NodeId, sub: SubId) {
        let current = self.nodes[node as usize].subs;
        if current == NONE {
            self.nodes[node as usize].subs = sub;
        } else if current & MANY != 0 {
            self.many[(current & !MANY) as usize].push(sub);
        } else {
            let list = vec![current, sub];
            let at = match self.free_many.pop() {
                Some(at) => {
                    self.many[at as usize] = list;
                    at
                }
                None => {
                    self.many.push(list);
                    (self.many.len() - 1) as u32
                }
            };
            self.nodes[node as usize].subs = MANY | at;
        }
    }

    fn remove_sub(&mut self, node: NodeId, sub: SubId) -> bool {
        let current = self.nodes[node as usize].subs;
        if current == NONE {
            return false;
        }
        if current & MANY == 0 {
            if current != sub {
                return false;
            }
            self.nodes[node as usize].subs = NONE;
            return true;
        }
        let at = (current & !MANY) as usize;
        let list = &mut self.many[at];
        let Some(pos) = list.iter().position(|&s| s == sub) else {
            return false;
        };
        list.remove(pos);
        if list.len() == 1 {
            self.nodes[node as usize].subs = list[0];
            self.many[at] = Vec::new();
            self.free_many.push(at as u32);
        }
        true
    }

    /// Add subscription `sub` whose terms are `path` (sorted, distinct, not empty).
    pub fn add(&mut self, sub: SubId, path: &[TermId]) {
        debug_assert!(!path.is_empty());
        let mut node: NodeId = 0;
        let mut i = 0;
        while i < path.len() {
            let Some(child) = self.child(node, path[i]) else {
                let leaf = self.new_node(&path[i + 1..]);
                self.add_sub(leaf, sub);
                self.add_child(node, path[i], leaf);
                self.count += 1;
                return;
            };
            i += 1;
            let label = self.label(child);
            let mut common = 0;
            while common < label.len()
                && i + common < path.len()
                && label[common] == path[i + common]
            {
                common += 1;
            }
            if common < label.len() {
                self.split(child, common);
            }
            i += common;
            node = child;
        }
        self.add_sub(node, sub);
        self.count += 1;
        self.compact_labels();
    }

    /// Cut a compact node's label after `keep` terms; the tail becomes its only child.
    fn split(&mut self, node: NodeId, keep: usize) {
        let n = self.nodes[node as usize];
        let label: Vec<TermId> = self.label(node).to_vec();
        let tail = self.new_node(&label[keep + 1..]);
        self.nodes[tail as usize].children = n.children;
        self.nodes[tail as usize].subs = n.subs;
        let node_ref = &mut self.nodes[node as usize];
        node_ref.children = NONE;
        node_ref.subs = NONE;
        node_ref.label_len = keep as u32; // the same pool slice, shortened
        self.live_labels -= label.len() - keep;
        self.add_child(node, label[keep], tail);
    }

    fn free_node(&mut self, node: NodeId) {
        let n = &mut self.nodes[node as usize];
        self.live_labels -= n.label_len as usize;
        *n = Node {
            label: 0,
            label_len: 0,
            subs: NONE,
            children: NONE,
        };
        self.free_nodes.push(node);
    }

    /// Copy the live labels into a fresh pool once garbage outweighs them: removals and splits
    /// leave old label runs behind, and churn must not grow memory without bound.
    fn compact_labels(&mut self) {
        if self.labels.len() <= 2 * self.live_labels + 4096 {
            return;
        }
        let mut pool = Vec::with_capacity(self.live_labels);
        for n in self.nodes.iter_mut() {
            let start = pool.len() as u32;
            pool.extend_from_slice(
                &self.labels[n.label as usize..(n.label + n.label_len) as usize],
            );
            n.label = start;
        }
        self.labels = pool;
    }

    /// Remove subscription `sub` added with `path`; false if it is not there.
    pub fn remove(&mut self, sub: SubId, path: &[TermId]) -> bool {
        let mut trail: Vec<(NodeId, TermId)> = Vec::new();
        let mut node: NodeId = 0;
        let mut i = 0;
        while i < path.len() {
            let Some(child) = self.child(node, path[i]) else {
                return false;
            };
            let label = self.label(child);
            let end = i + 1 + label.len();
            if end > path.len() || path[i + 1..end] != *label {
                return false;
            }
            trail.push((node, path[i]));
            i = end;
            node = child;
        }
        if !self.remove_sub(node, sub) {
            return false;
        }
        self.count -= 1;
        self.tidy(node, trail);
        self.compact_labels();
        true
    }

    /// Drop nodes left empty and re-compress the chain link the removal may have made.
    fn tidy(&mut self, mut node: NodeId, mut trail: Vec<(NodeId, TermId)>) {
        loop {
            let n = self.nodes[node as usize];
            let childless = n.children == NONE || self.child_sets[n.children as usize].len() == 0;
            if trail.is_empty() || n.subs != NONE || !childless {
                break;
            }
            let (parent, key) = trail.pop().unwrap_or((0, 0));
            let set = self.nodes[parent as usize].children;
            self.child_sets[set as usize].remove(key);
            if n.children != NONE {
                self.free_child_set(n.children);
            }
            self.free_node(node);
            if parent != 0 && self.child_sets[set as usize].len() == 0 {
                self.free_child_set(set);
                self.nodes[parent as usize].children = NONE;
            }
            node = parent;
        }
        let n = self.nodes[node as usize];
        if node != 0 && n.subs == NONE && n.children != NONE {
            if let Some((key, child)) = self.child_sets[n.children as usize].only() {
                self.merge_only_child(node, key, child);
            }
        }
    }

    fn merge_only_child(&mut self, node: NodeId, key: TermId, child: NodeId) {
        let mut label: Vec<TermId> = self.label(node).to_vec();
        label.push(key);
        label.extend_from_slice(self.label(child));
        let start = self.labels.len() as u32;
        self.labels.extend_from_slice(&label);
        let c = self.nodes[child as usize];
        self.free_child_set(self.nodes[node as usize].children);
        let n = &mut self.nodes[node as usize];
        self.live_labels += label.len() - n.label_len as usize;
        n.label = start;
        n.label_len = label.len() as u32;
        n.children = c.children;
        n.subs = c.subs;
        let c = &mut self.nodes[child as usize];
        c.children = NONE;
        c.subs = NONE;
        self.free_node(child);
    }

    /// The subscriptions whose every term is in `item` (sorted, distinct term ids).
    pub fn matches(&self, item: &[TermId], found: &mut Vec<SubId>) {
        let end = item.len();
        if end == 0 {
            return;
        }
        let mut stack: Vec<(NodeId, usize)> = vec![(0, 0)];
        while let Some((node, start)) = stack.pop() {
            let set = &self.child_sets[self.nodes[node as usize].children as usize];
            for j in start..end {
                let Some(child) = set.get(item[j]) else {
                    continue;
                };
                let mut after = j + 1;
                let label = self.label(child);
                if !label.is_empty() {
                    // Every term of the label must be in the item, after the one that led here.
                    let mut whole = true;
                    for &t in label {
                        match item[after..].binary_search(&t) {
                            Ok(k) => after += k + 1,
                            Err(_) => {
                                whole = false;
                                break;
                            }
                        }
                    }
                    if !whole {
                        continue;
                    }
                }
                let c = self.nodes[child as usize];
                if c.subs != NONE {
                    if c.subs & MANY != 0 {
                        found.extend_from_slice(&self.many[(c.subs & !MANY) as usize]);
                    } else {
                        found.push(c.subs);
                    }
                }
                if c.children != NONE && after < end {
                    stack.push((child, after));
                }
            }
        }
    }

    /// Nodes, root included (the trie's size in S³-TM's cost model).
    pub fn node_count(&self) -> usize {
        self.nodes.len() - self.free_nodes.len()
    }

    /// True when no node but the root is a bare chain link (no subscriptions, one child).
    pub fn is_compressed(&self) -> bool {
        let mut stack = vec![0 as NodeId];
        while let Some(node) = stack.pop() {
            let n = self.nodes[node as usize];
            if n.children == NONE {
                continue;
            }
            let set = &self.child_sets[n.children as usize];
            if node != 0 && n.subs == NONE && set.len() == 1 {
                return false;
            }
            match set {
                Children::Few(v) => stack.extend(v.iter().map(|&(_, c)| c)),
                Children::Wide(m) => stack.extend(m.values().copied()),
            }
        }
        true
    }

    /// Bytes the trie's own structures take (capacities, not lengths).
    pub fn heap_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.free_nodes.capacity() * 4
            + self.labels.capacity() * 4
            + self.child_sets.capacity() * std::mem::size_of::<Children>()
            + self.child_sets.iter().map(Children::bytes).sum::<usize>()
            + self.free_child_sets.capacity() * 4
            + self.many.capacity() * std::mem::size_of::<Vec<SubId>>()
            + self.many.iter().map(|v| v.capacity() * 4).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(trie: &Trie, item: &[TermId]) -> Vec<SubId> {
        let mut out = Vec::new();
        trie.matches(item, &mut out);
        out.sort_unstable();
        out
    }

    #[test]
    fn subscriptions_match_supersets_of_their_terms() {
        let mut trie = Trie::new();
        trie.add(1, &[1, 2, 3]);
        trie.add(2, &[1, 3]);
        trie.add(3, &[2]);
        trie.add(4, &[1, 2, 3]);
        assert_eq!(found(&trie, &[1, 2, 3, 4]), [1, 2, 3, 4]);
        assert_eq!(found(&trie, &[1, 3]), [2]);
        assert_eq!(found(&trie, &[2, 3]), [3]);
        assert!(found(&trie, &[4]).is_empty());
        assert!(trie.is_compressed());
    }

    #[test]
    fn removing_restores_compression_and_forgets_the_path() {
        let mut trie = Trie::new();
        trie.add(1, &[1, 2, 3, 4]);
        trie.add(2, &[1, 2]);
        assert!(trie.remove(2, &[1, 2]));
        assert!(!trie.remove(2, &[1, 2]));
        assert!(trie.is_compressed());
        assert_eq!(found(&trie, &[1, 2, 3, 4]), [1]);
        assert!(trie.remove(1, &[1, 2, 3, 4]));
        assert_eq!(trie.node_count(), 1);
        assert_eq!(trie.len(), 0);
    }

    #[test]
    fn a_wide_node_matches_as_a_narrow_one() {
        let mut trie = Trie::new();
        for t in 0..100u32 {
            trie.add(t, &[5, 10 + t]);
        }
        assert_eq!(found(&trie, &[5, 10, 50, 109]), [0, 40, 99]);
        for t in 0..100u32 {
            assert!(trie.remove(t, &[5, 10 + t]));
        }
        assert_eq!(trie.node_count(), 1);
    }
}
