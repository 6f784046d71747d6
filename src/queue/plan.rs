//! The order of the queue: which tasks cannot run at all (a file that does not parse, an
//! `After` naming no task, a cycle), which are blocked by a task they come after, and which
//! are ready to start (by priority, then age).

use std::collections::{BTreeMap, BTreeSet};

use super::store::{Found, State};
use super::task::Task;
use crate::contract::queue::TaskStatus;

/// Tasks (by name) and the tasks each comes after.
pub type Edges = BTreeMap<String, Vec<String>>;

/// A cycle of `edges`, as the names around it (the first again at the end), if any.
pub fn cycle(edges: &Edges) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        edges: &Edges,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == n) {
            let mut c = path[at..].to_vec();
            c.push(n.to_string());
            return Some(c);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_string());
        for d in edges.get(n).into_iter().flatten() {
            if let Some(c) = visit(d, edges, done, path) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for n in edges.keys() {
        if let Some(c) = visit(n, edges, &mut done, &mut Vec::new()) {
            return Some(c);
        }
    }
    None
}

/// Why each task that cannot run cannot: its file does not parse (with the line), its
/// `After` names no task, or it is in a cycle.
pub fn problems(found: &[Found]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let names: BTreeSet<&str> = found.iter().map(|f| f.name.as_str()).collect();
    let mut edges = Edges::new();
    for f in found {
        match &f.task {
            Err(e) => {
                out.insert(
                    f.name.clone(),
                    format!("{}:{}: {}", f.path.display(), e.line, e.reason),
                );
            }
            Ok(t) => {
                if let Some(missing) = t.after.iter().find(|a| !names.contains(a.as_str())) {
                    out.insert(
                        f.name.clone(),
                        format!(
                            "{}: **After:** names no task '{missing}' (the tasks are the .md files of .orbit/queue/)",
                            f.path.display()
                        ),
                    );
                }
                edges.insert(f.name.clone(), t.after.clone());
            }
        }
    }
    while let Some(c) = cycle(&edges) {
        let text = c.join(" → ");
        for n in &c {
            out.entry(n.clone())
                .or_insert_with(|| format!("in a dependency cycle: {text}: remove one **After:**"));
            edges.remove(n);
        }
    }
    out
}

/// What stops `task` from starting because of a task it comes after: a blocker (failed,
/// blocked, cannot run), as the reason; `Ok(false)` while one is not done yet; `Ok(true)`
/// when every one is done.
pub fn deps_state(
    task: &Task,
    status: &BTreeMap<String, TaskStatus>,
    problems: &BTreeMap<String, String>,
) -> Result<bool, String> {
    let mut all_done = true;
    for d in &task.after {
        if problems.contains_key(d) {
            return Err(format!("{d} cannot run (its file or its **After:**)"));
        }
        match status.get(d) {
            Some(TaskStatus::Failed) => return Err(format!("{d} failed")),
            Some(TaskStatus::Blocked) => return Err(format!("{d} is blocked")),
            Some(TaskStatus::Done) => {}
            _ => all_done = false,
        }
    }
    Ok(all_done)
}

/// The ready tasks in the order they start: the highest priority first, then the oldest.
pub fn order(ready: &mut [(String, i64)], state: &mut State) {
    for (n, _) in ready.iter() {
        state.task(n);
    }
    ready.sort_by_key(|(n, p)| (-*p, state.tasks[n].seq));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cycle_is_found_and_named() {
        let mut e = Edges::new();
        e.insert("a".into(), vec!["b".into()]);
        e.insert("b".into(), vec!["c".into()]);
        e.insert("c".into(), vec!["a".into()]);
        e.insert("d".into(), vec!["a".into()]);
        let c = cycle(&e).unwrap();
        assert_eq!(c.first(), c.last());
        assert_eq!(c.len(), 4);
        e.insert("c".into(), vec![]);
        assert_eq!(cycle(&e), None);
    }
}
