//! The compact trie of the web-syndication thesis (§3.2.2), over integer term ids, in arenas.
//!
//! A subscription is the sorted set of its terms' ids, a path from the root. A node is 16 bytes:
//! its label (the run of further terms a *compact* node stands for: path compression), its
//! subscriptions (none, one id inline, or several in a side table: the thesis' types a, b, c) and
//! its children (none, or a sorted run of (term, child) edges in one shared arena while few, a
//! hash map once wide: types I and II). Matching is the scoped traversal of the plain trie
//! (S³-TM §4.1): from a node only the item's terms after the one that led there are tried (a
//! merge of two sorted runs while the node has few children), and a compact node is entered only
//! when every term of its label is in the item.
//!
//! Changes leave garbage behind in the arenas (a label shortened by a split, a run of edges moved
//! to the end when it grows); each arena is compacted once its garbage outweighs what is live, so
//! churn does not grow memory without bound.

use rustc_hash::FxHashMap;

pub type SubId = u32;
type NodeId = u32;
/// A term, interned: what a path is made of.
pub type TermId = u32;

const NONE: u32 = u32::MAX;
const MANY: u32 = 1 << 31; // in `Node::subs`: an index into `Trie::many`
const WIDE: u16 = u16::MAX; // in `Node::child_len`: `child_off` indexes `Trie::wide`
const WIDE_FROM: usize = 32; // children at which a run of edges becomes a hash map

#[derive(Clone, Copy)]
struct Node {
    label: u32, // offset into `labels`
    subs: u32,  // NONE, a subscription id, or MANY | index into `many`
    child_off: u32,
    label_len: u16,
    child_len: u16, // edges in `edges[child_off..]`, or WIDE
}

const EMPTY: Node = Node {
    label: 0,
    subs: NONE,
    child_off: 0,
    label_len: 0,
    child_len: 0,
};

/// The compact trie's nodes, edges and subscription lists, in arenas reused as they free up.
#[derive(Default)]
pub struct Trie {
    nodes: Vec<Node>,
    free_nodes: Vec<NodeId>,
    labels: Vec<TermId>,
    live_labels: usize,
    edges: Vec<(TermId, NodeId)>,
    live_edges: usize,
    wide: Vec<FxHashMap<TermId, NodeId>>,
    free_wide: Vec<u32>,
    many: Vec<Vec<SubId>>,
    free_many: Vec<u32>,
    count: usize,
}

impl Trie {
    /// An empty trie: its root alone.
    pub fn new() -> Trie {
        let mut trie = Trie::default();
        trie.nodes.push(EMPTY);
        trie
    }

    /// How many subscriptions are indexed.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when no subscription is indexed.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    fn label(&self, node: NodeId) -> &[TermId] {
        let n = &self.nodes[node as usize];
        &self.labels[n.label as usize..n.label as usize + n.label_len as usize]
    }

    fn new_node(&mut self, label: &[TermId]) -> NodeId {
        let start = self.labels.len() as u32;
        self.labels.extend_from_slice(label);
        self.live_labels += label.len();
        let node = Node {
            label: start,
            label_len: label.len() as u16,
            ..EMPTY
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

    fn free_node(&mut self, node: NodeId) {
        let n = self.nodes[node as usize];
        self.live_labels -= n.label_len as usize;
        self.drop_children(node);
        self.nodes[node as usize] = EMPTY;
        self.free_nodes.push(node);
    }

    fn children_count(&self, node: NodeId) -> usize {
        let n = &self.nodes[node as usize];
        match n.child_len {
            WIDE => self.wide[n.child_off as usize].len(),
            len => len as usize,
        }
    }

    fn edges_of(&self, n: &Node) -> &[(TermId, NodeId)] {
        if n.child_len == 0 {
            return &[]; // its offset may point past an arena compacted since
        }
        &self.edges[n.child_off as usize..n.child_off as usize + n.child_len as usize]
    }

    fn child(&self, node: NodeId, term: TermId) -> Option<NodeId> {
        let n = &self.nodes[node as usize];
        match n.child_len {
            0 => None,
            WIDE => self.wide[n.child_off as usize].get(&term).copied(),
            _ => {
                let run = self.edges_of(n);
                run.binary_search_by_key(&term, |&(t, _)| t)
                    .ok()
                    .map(|at| run[at].1)
            }
        }
    }

    fn add_child(&mut self, node: NodeId, term: TermId, child: NodeId) {
        let n = self.nodes[node as usize];
        if n.child_len == WIDE {
            self.wide[n.child_off as usize].insert(term, child);
            return;
        }
        let len = n.child_len as usize;
        if len + 1 > WIDE_FROM {
            let mut map: FxHashMap<TermId, NodeId> = self.edges_of(&n).iter().copied().collect();
            map.insert(term, child);
            self.live_edges -= len;
            let at = match self.free_wide.pop() {
                Some(at) => {
                    self.wide[at as usize] = map;
                    at
                }
                None => {
                    self.wide.push(map);
                    (self.wide.len() - 1) as u32
                }
            };
            let n = &mut self.nodes[node as usize];
            n.child_off = at;
            n.child_len = WIDE;
            return;
        }
        let off = n.child_off as usize;
        let pos = self.edges_of(&n).partition_point(|&(t, _)| t < term);
        if len > 0 && off + len == self.edges.len() {
            // The run ends the arena: it grows in place.
            self.edges.insert(off + pos, (term, child));
        } else {
            // Moved to the end of the arena with the new edge; the old run becomes garbage.
            let start = self.edges.len();
            self.edges.extend_from_within(off..off + pos);
            self.edges.push((term, child));
            self.edges.extend_from_within(off + pos..off + len);
            self.nodes[node as usize].child_off = start as u32;
        }
        self.nodes[node as usize].child_len = (len + 1) as u16;
        self.live_edges += 1;
    }

    fn remove_child(&mut self, node: NodeId, term: TermId) {
        let n = self.nodes[node as usize];
        if n.child_len == WIDE {
            let map = &mut self.wide[n.child_off as usize];
            map.remove(&term);
            if map.is_empty() {
                self.wide[n.child_off as usize] = FxHashMap::default();
                self.free_wide.push(n.child_off);
                let n = &mut self.nodes[node as usize];
                n.child_off = 0;
                n.child_len = 0;
            }
            return;
        }
        let off = n.child_off as usize;
        let len = n.child_len as usize;
        if let Ok(pos) = self.edges_of(&n).binary_search_by_key(&term, |&(t, _)| t) {
            self.edges.copy_within(off + pos + 1..off + len, off + pos);
            let n = &mut self.nodes[node as usize];
            n.child_len -= 1;
            if n.child_len == 0 {
                n.child_off = 0;
            }
            self.live_edges -= 1;
        }
    }

    /// Let go of a node's children (the node is being freed or takes over another's).
    fn drop_children(&mut self, node: NodeId) {
        let n = self.nodes[node as usize];
        match n.child_len {
            0 => {}
            WIDE => {
                self.wide[n.child_off as usize] = FxHashMap::default();
                self.free_wide.push(n.child_off);
            }
            len => self.live_edges -= len as usize,
        }
        let n = &mut self.nodes[node as usize];
        n.child_off = 0;
        n.child_len = 0;
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

    /// Add subscription `sub` whose terms are `path` (sorted, distinct, not empty, at most
    /// 65,535).
    pub fn add(&mut self, sub: SubId, path: &[TermId]) {
        debug_assert!(!path.is_empty() && path.len() <= u16::MAX as usize);
        let mut node: NodeId = 0;
        let mut i = 0;
        while i < path.len() {
            let Some(child) = self.child(node, path[i]) else {
                let leaf = self.new_node(&path[i + 1..]);
                self.add_sub(leaf, sub);
                self.add_child(node, path[i], leaf);
                self.count += 1;
                self.compact();
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
        self.compact();
    }

    /// Cut a compact node's label after `keep` terms; the tail becomes its only child.
    fn split(&mut self, node: NodeId, keep: usize) {
        let n = self.nodes[node as usize];
        let label: Vec<TermId> = self.label(node).to_vec();
        let tail = self.new_node(&label[keep + 1..]);
        let t = &mut self.nodes[tail as usize];
        t.child_off = n.child_off;
        t.child_len = n.child_len;
        t.subs = n.subs;
        let n = &mut self.nodes[node as usize];
        n.child_off = 0;
        n.child_len = 0;
        n.subs = NONE;
        n.label_len = keep as u16; // the same pool slice, shortened
        self.live_labels -= label.len() - keep;
        self.add_child(node, label[keep], tail);
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
        self.compact();
        true
    }

    /// Drop nodes left empty and re-compress the chain link the removal may have made.
    fn tidy(&mut self, mut node: NodeId, mut trail: Vec<(NodeId, TermId)>) {
        while let Some(&(parent, key)) = trail.last() {
            if self.nodes[node as usize].subs != NONE || self.children_count(node) > 0 {
                break;
            }
            trail.pop();
            self.remove_child(parent, key);
            self.free_node(node);
            node = parent;
        }
        let n = self.nodes[node as usize];
        if node != 0 && n.subs == NONE && self.children_count(node) == 1 {
            let (key, child) = match n.child_len {
                WIDE => {
                    let map = &self.wide[n.child_off as usize];
                    map.iter().next().map(|(&t, &c)| (t, c)).unwrap_or((0, 0))
                }
                _ => self.edges[n.child_off as usize],
            };
            self.merge_only_child(node, key, child);
        }
    }

    fn merge_only_child(&mut self, node: NodeId, key: TermId, child: NodeId) {
        let mut label: Vec<TermId> = self.label(node).to_vec();
        label.push(key);
        label.extend_from_slice(self.label(child));
        let start = self.labels.len() as u32;
        self.labels.extend_from_slice(&label);
        self.drop_children(node); // its one edge, to `child`
        let c = self.nodes[child as usize];
        let n = &mut self.nodes[node as usize];
        self.live_labels += label.len() - n.label_len as usize;
        n.label = start;
        n.label_len = label.len() as u16;
        n.child_off = c.child_off;
        n.child_len = c.child_len;
        n.subs = c.subs;
        // The child's children now belong to `node`: the child goes without them.
        let c = &mut self.nodes[child as usize];
        c.child_len = 0;
        c.subs = NONE;
        self.free_node(child);
    }

    /// Give back what the arenas hold beyond what is live: after a bulk load, whose growth
    /// left them up to twice the size they need.
    pub fn shrink(&mut self) {
        self.compact_labels();
        self.compact_edges();
        self.nodes.shrink_to_fit();
        self.free_nodes.shrink_to_fit();
        self.wide.shrink_to_fit();
        self.many.shrink_to_fit();
        for list in self.many.iter_mut() {
            list.shrink_to_fit();
        }
    }

    /// Copy the live labels and edges into fresh arenas once garbage outweighs them.
    fn compact(&mut self) {
        if self.labels.len() > 2 * self.live_labels + 4096 {
            self.compact_labels();
        }
        if self.edges.len() > 2 * self.live_edges + 4096 {
            self.compact_edges();
        }
    }

    fn compact_labels(&mut self) {
        let mut pool = Vec::with_capacity(self.live_labels);
        for n in self.nodes.iter_mut() {
            let start = pool.len() as u32;
            pool.extend_from_slice(
                &self.labels[n.label as usize..n.label as usize + n.label_len as usize],
            );
            n.label = start;
        }
        self.labels = pool;
    }

    fn compact_edges(&mut self) {
        let mut arena = Vec::with_capacity(self.live_edges);
        for n in self.nodes.iter_mut() {
            if n.child_len == 0 {
                n.child_off = 0;
            }
            if n.child_len == WIDE || n.child_len == 0 {
                continue;
            }
            let start = arena.len() as u32;
            let off = n.child_off as usize;
            arena.extend_from_slice(&self.edges[off..off + n.child_len as usize]);
            n.child_off = start;
        }
        self.edges = arena;
    }

    /// The subscriptions whose every term is in `item` (sorted, distinct term ids), appended to
    /// `found`; `stack` is scratch space, reused from call to call.
    pub fn matches(
        &self,
        item: &[TermId],
        found: &mut Vec<SubId>,
        stack: &mut Vec<(NodeId, usize)>,
    ) {
        let end = item.len();
        if end == 0 {
            return;
        }
        stack.clear();
        stack.push((0, 0));
        while let Some((node, start)) = stack.pop() {
            let n = &self.nodes[node as usize];
            match n.child_len {
                0 => {}
                WIDE => {
                    let map = &self.wide[n.child_off as usize];
                    for j in start..end {
                        if let Some(&child) = map.get(&item[j]) {
                            self.enter(child, item, j + 1, found, stack);
                        }
                    }
                }
                _ => {
                    let run = self.edges_of(n);
                    // Both runs are sorted: merge them.
                    let (mut j, mut e) = (start, 0);
                    while j < end && e < run.len() {
                        let (term, child) = run[e];
                        match item[j].cmp(&term) {
                            std::cmp::Ordering::Less => j += 1,
                            std::cmp::Ordering::Greater => e += 1,
                            std::cmp::Ordering::Equal => {
                                self.enter(child, item, j + 1, found, stack);
                                j += 1;
                                e += 1;
                            }
                        }
                    }
                }
            }
        }
    }

    /// A child whose edge term is in the item, before position `after`: collect its
    /// subscriptions and go on below it if its whole label is in the item too.
    #[inline]
    fn enter(
        &self,
        child: NodeId,
        item: &[TermId],
        mut after: usize,
        found: &mut Vec<SubId>,
        stack: &mut Vec<(NodeId, usize)>,
    ) {
        let c = &self.nodes[child as usize];
        for &t in self.label(child) {
            match item[after..].binary_search(&t) {
                Ok(k) => after += k + 1,
                Err(_) => return,
            }
        }
        if c.subs != NONE {
            if c.subs & MANY != 0 {
                found.extend_from_slice(&self.many[(c.subs & !MANY) as usize]);
            } else {
                found.push(c.subs);
            }
        }
        if c.child_len != 0 && after < item.len() {
            stack.push((child, after));
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
            if node != 0 && n.subs == NONE && self.children_count(node) == 1 {
                return false;
            }
            match n.child_len {
                0 => {}
                WIDE => stack.extend(self.wide[n.child_off as usize].values().copied()),
                _ => stack.extend(self.edges_of(&n).iter().map(|&(_, c)| c)),
            }
        }
        true
    }

    /// Bytes the trie's own structures take (capacities, not lengths).
    pub fn heap_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.free_nodes.capacity() * 4
            + self.labels.capacity() * 4
            + self.edges.capacity() * 8
            + self.wide.capacity() * std::mem::size_of::<FxHashMap<TermId, NodeId>>()
            + self.wide.iter().map(|m| m.capacity() * 9).sum::<usize>()
            + self.free_wide.capacity() * 4
            + self.many.capacity() * std::mem::size_of::<Vec<SubId>>()
            + self.many.iter().map(|v| v.capacity() * 4).sum::<usize>()
            + self.free_many.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(trie: &Trie, item: &[TermId]) -> Vec<SubId> {
        let (mut out, mut stack) = (Vec::new(), Vec::new());
        trie.matches(item, &mut out, &mut stack);
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
        trie.add(3, &[1, 5]);
        assert!(trie.remove(2, &[1, 2]));
        assert!(!trie.remove(2, &[1, 2]));
        assert!(trie.is_compressed());
        assert_eq!(found(&trie, &[1, 2, 3, 4, 5]), [1, 3]);
        assert!(trie.remove(3, &[1, 5]));
        assert!(trie.is_compressed());
        assert!(trie.remove(1, &[1, 2, 3, 4]));
        assert_eq!(trie.node_count(), 1);
        assert_eq!(trie.len(), 0);
    }

    #[test]
    fn a_node_whose_children_all_left_takes_new_ones_after_compaction() {
        let mut trie = Trie::new();
        trie.add(1, &[1, 2]);
        trie.add(2, &[1, 3]); // node 1 now has children 2 and 3
        for t in 0..3000u32 {
            trie.add(100 + t, &[10_000 + t, 20_000 + t]); // edges for the arena to hold
        }
        assert!(trie.remove(1, &[1, 2]));
        trie.add(3, &[1]);
        assert!(trie.remove(2, &[1, 3])); // node 1 keeps subscription 3 and no child
        for t in 0..3000u32 {
            assert!(trie.remove(100 + t, &[10_000 + t, 20_000 + t]));
        }
        trie.shrink(); // the arena is rebuilt shorter than node 1's old offset
        trie.add(4, &[1, 5]);
        assert_eq!(found(&trie, &[1, 5]), [3, 4]);
    }

    #[test]
    fn a_wide_node_matches_as_a_narrow_one_and_churn_stays_bounded() {
        let mut trie = Trie::new();
        for round in 0..20u32 {
            for t in 0..100u32 {
                trie.add(t, &[5, 10 + t, 1000 + round]);
            }
            assert_eq!(found(&trie, &[5, 10, 50, 109, 1000 + round]), [0, 40, 99]);
            for t in 0..100u32 {
                assert!(trie.remove(t, &[5, 10 + t, 1000 + round]));
            }
            assert_eq!(trie.node_count(), 1);
        }
        assert!(trie.labels.len() < 5000 && trie.edges.len() < 5000);
    }
}
