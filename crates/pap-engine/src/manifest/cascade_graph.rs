//! The cascade graph: agent A emits a type that a trigger routes to agent B. A loop is legal
//! (the runtime depth limit stops it) but almost never intended, so lint warns with the loop.

use super::compiled::{Agent, Trigger};

/// One edge: `from` agent emits `event_type`, which `trigger` routes to `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    pub from: usize,
    pub event_type: String,
    pub trigger: usize,
    pub to: usize,
}

/// A loop of edges, starting and ending at the same agent.
pub(crate) type Cycle = Vec<Edge>;

pub fn edges(agents: &[Agent], triggers: &[Trigger]) -> Vec<Edge> {
    let mut out = Vec::new();
    for (from, agent) in agents.iter().enumerate() {
        for event_type in agent.emitted_types() {
            for (ti, trigger) in triggers.iter().enumerate() {
                if trigger.enabled && trigger.pattern.matches(event_type) {
                    out.push(Edge {
                        from,
                        event_type: event_type.to_string(),
                        trigger: ti,
                        to: trigger.agent,
                    });
                }
            }
        }
    }
    out
}

/// One cycle per strongly connected component that has one (Tarjan), each as a concrete loop,
/// so a tangle of agents is one warning rather than an exponential list of loops.
pub(crate) fn cycles(agent_count: usize, edges: &[Edge]) -> Vec<Cycle> {
    let mut adjacency: Vec<Vec<&Edge>> = vec![Vec::new(); agent_count];
    for e in edges {
        adjacency[e.from].push(e);
    }
    let components = tarjan(agent_count, &adjacency);
    let mut out = Vec::new();
    for component in components {
        let start = *component.iter().min().expect("non-empty component");
        let self_loop = adjacency[start].iter().find(|e| e.to == start);
        if component.len() == 1 {
            if let Some(e) = self_loop {
                out.push(vec![(*e).clone()]);
            }
            continue;
        }
        if let Some(cycle) = find_loop(start, &component, &adjacency) {
            out.push(cycle);
        }
    }
    out.sort_by_key(|c| c.first().map(|e| e.from));
    out
}

/// Breadth-first search for the shortest path from `start` back to itself inside a component.
fn find_loop(start: usize, component: &[usize], adjacency: &[Vec<&Edge>]) -> Option<Cycle> {
    use std::collections::VecDeque;
    let mut via: Vec<Option<&Edge>> = vec![None; adjacency.len()];
    let mut queue = VecDeque::from([start]);
    let mut seen = vec![false; adjacency.len()];
    seen[start] = true;
    while let Some(node) = queue.pop_front() {
        for edge in &adjacency[node] {
            if !component.contains(&edge.to) {
                continue;
            }
            if edge.to == start {
                let mut cycle = vec![(*edge).clone()];
                let mut at = node;
                while at != start {
                    let e = via[at].expect("visited nodes have a parent edge");
                    cycle.push(e.clone());
                    at = e.from;
                }
                cycle.reverse();
                return Some(cycle);
            }
            if !seen[edge.to] {
                seen[edge.to] = true;
                via[edge.to] = Some(edge);
                queue.push_back(edge.to);
            }
        }
    }
    None
}

fn tarjan(n: usize, adjacency: &[Vec<&Edge>]) -> Vec<Vec<usize>> {
    struct State {
        index: usize,
        indices: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        out: Vec<Vec<usize>>,
    }
    fn visit(v: usize, adjacency: &[Vec<&Edge>], s: &mut State) {
        s.indices[v] = Some(s.index);
        s.low[v] = s.index;
        s.index += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for e in &adjacency[v] {
            let w = e.to;
            match s.indices[w] {
                None => {
                    visit(w, adjacency, s);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(wi) if s.on_stack[w] => s.low[v] = s.low[v].min(wi),
                _ => {}
            }
        }
        if Some(s.low[v]) == s.indices[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(component);
        }
    }
    let mut s = State {
        index: 0,
        indices: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        out: Vec::new(),
    };
    for v in 0..n {
        if s.indices[v].is_none() {
            visit(v, adjacency, &mut s);
        }
    }
    s.out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(from: usize, to: usize) -> Edge {
        Edge {
            from,
            event_type: format!("t.{from}.{to}"),
            trigger: 0,
            to,
        }
    }

    #[test]
    fn finds_self_loops_and_longer_loops_once_each() {
        let edges = vec![e(0, 1), e(1, 2), e(2, 0), e(3, 3), e(4, 0)];
        let cycles = cycles(5, &edges);
        assert_eq!(cycles.len(), 2);
        let path: Vec<(usize, usize)> = cycles[0].iter().map(|e| (e.from, e.to)).collect();
        assert_eq!(path, vec![(0, 1), (1, 2), (2, 0)]);
        assert_eq!(cycles[1].len(), 1);
        assert_eq!((cycles[1][0].from, cycles[1][0].to), (3, 3));
    }

    #[test]
    fn a_chain_is_not_a_loop() {
        assert!(cycles(3, &[e(0, 1), e(1, 2)]).is_empty());
    }
}
