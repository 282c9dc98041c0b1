//! Data flows one way (README, "Architecture"): the crates are the layers — the wire types, the channels, the store
//! (`holdpoint-store`), the use cases (`holdpoint-core`) and the doors with their wiring (`holdpoint-server`) — and
//! the compiler refuses an import from a layer above. What crates cannot say is how the use cases import each other
//! inside theirs: this test fails when those imports go round in a circle, so that each use case can be read, tested
//! and changed with only the ones below it in mind.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

/// A file's code without its unit-test module (`#[cfg(test)] mod tests`, last in a file by convention): tests are
/// built into no binary.
fn without_test_module(source: &str) -> &str {
    source.find("#[cfg(test)]\nmod tests").map_or(source, |at| &source[..at])
}

/// The top-level modules `source` names as `crate::<module>`, outside comments and the unit-test module.
fn crate_modules_named(source: &str) -> BTreeSet<String> {
    let mut named = BTreeSet::new();
    for line in without_test_module(source).lines() {
        let mut rest = line.split("//").next().unwrap_or_default();
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            let name: String = after.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if !name.is_empty() {
                named.insert(name);
            }
            rest = after;
        }
    }
    named
}

fn rust_files(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path: PathBuf = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let relative = path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
            out.push((relative, std::fs::read_to_string(&path).unwrap()));
        }
    }
}

/// The use cases' modules: the top-level modules of the files (path under core/src), `lib.rs` aside.
fn modules_of(files: &[(String, String)]) -> BTreeSet<String> {
    files
        .iter()
        .map(|(file, _)| file.split('/').next().unwrap_or_default().trim_end_matches(".rs").to_owned())
        .filter(|module| module != "lib")
        .collect()
}

/// Who imports whom among the use cases' modules: each module's imports of another, with the files that make them.
/// What the crate re-exports from below (`crate::store`, `crate::channels`) is no module of its own.
type ImportGraph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// The import graph between the use cases' modules among `files` (path under core/src, source).
fn use_case_imports(files: &[(String, String)]) -> ImportGraph {
    let use_cases = modules_of(files);
    let mut graph = ImportGraph::new();
    for (file, source) in files {
        let module = file.split('/').next().unwrap_or_default().trim_end_matches(".rs");
        if !use_cases.contains(module) {
            continue;
        }
        let imports = graph.entry(module.to_owned()).or_default();
        for named in crate_modules_named(source) {
            if named != module && use_cases.contains(&named) {
                imports.entry(named).or_default().insert(file.clone());
            }
        }
    }
    graph
}

/// The shortest path of imports from `from` to `to` (both included), if there is one.
fn shortest_path(graph: &ImportGraph, from: &str, to: &str) -> Option<Vec<String>> {
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([from]);
    while let Some(module) = queue.pop_front() {
        for next in graph.get(module).into_iter().flat_map(BTreeMap::keys) {
            if next == to {
                let mut path = vec![to.to_owned(), module.to_owned()];
                let mut at = module;
                while at != from {
                    at = came_from[at];
                    path.push(at.to_owned());
                }
                path.reverse();
                return Some(path);
            }
            if next != from && !came_from.contains_key(next.as_str()) {
                came_from.insert(next, module);
                queue.push_back(next);
            }
        }
    }
    None
}

/// Every import that closes a cycle, as the shortest cycle through it (`a -> b -> ... -> a`), each cycle once.
fn import_cycles(graph: &ImportGraph) -> BTreeSet<Vec<String>> {
    let mut cycles = BTreeSet::new();
    for (module, imports) in graph {
        for imported in imports.keys() {
            let Some(mut back) = shortest_path(graph, imported, module) else { continue };
            let mut cycle = vec![module.clone()];
            cycle.append(&mut back);
            // The same cycle found from another of its modules: start every cycle at its smallest module.
            cycle.pop();
            let first = (0..cycle.len()).min_by_key(|&at| &cycle[at]).unwrap_or(0);
            cycle.rotate_left(first);
            cycle.push(cycle[0].clone());
            cycles.insert(cycle);
        }
    }
    cycles
}

/// A cycle in words, each import with the files that make it.
fn describe(cycle: &[String], graph: &ImportGraph) -> String {
    let mut text = cycle.join(" -> ");
    for pair in cycle.windows(2) {
        let files = graph[&pair[0]][&pair[1]].iter().cloned().collect::<Vec<_>>().join(", ");
        text.push_str(&format!("\n    {} -> {}: {files}", pair[0], pair[1]));
    }
    text
}

#[test]
fn the_use_cases_import_each_other_without_a_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/src");
    let mut files = Vec::new();
    rust_files(&root, &root, &mut files);
    assert!(modules_of(&files).len() > 15, "the use cases' modules are read: {:?}", modules_of(&files));
    let graph = use_case_imports(&files);
    let cycles = import_cycles(&graph);
    let described: Vec<String> = cycles.iter().map(|cycle| describe(cycle, &graph)).collect();
    assert!(cycles.is_empty(), "the use cases import each other in {} cycles:\n{}", cycles.len(), described.join("\n"));
}

#[test]
fn the_cycle_check_finds_every_circle_of_imports_and_nothing_else() {
    let files = vec![
        ("questions/mod.rs".to_owned(), "use crate::notifications::reach;\nuse crate::store::Store;\n".to_owned()),
        ("notifications.rs".to_owned(), "fn f() { crate::audit::entry(); }\n".to_owned()),
        ("audit.rs".to_owned(), "// crate::questions is only mentioned in a comment\nuse crate::actions;\n".to_owned()),
        (
            "runs.rs".to_owned(),
            "use crate::runtime::Runtime;\n#[cfg(test)]\nmod tests {\n    use crate::questions;\n}\n".to_owned(),
        ),
        ("runtime/mod.rs".to_owned(), "use crate::questions::Asking;\n".to_owned()),
    ];
    assert!(import_cycles(&use_case_imports(&files)).is_empty(), "imports that go down only make no cycle");

    let mut circled = files;
    circled.push(("audit.rs".to_owned(), "use crate::questions::transition;\n".to_owned()));
    circled.push(("runtime/children.rs".to_owned(), "fn g() { crate::runs::new_run_row(); }\n".to_owned()));
    let graph = use_case_imports(&circled);
    let cycles: Vec<String> = import_cycles(&graph).iter().map(|cycle| cycle.join(" -> ")).collect();
    assert_eq!(cycles, ["audit -> questions -> notifications -> audit", "runs -> runtime -> runs"]);
    let described = describe(&import_cycles(&graph).into_iter().nth(1).unwrap(), &graph);
    assert_eq!(
        described,
        "runs -> runtime -> runs\n    runs -> runtime: runs.rs\n    runtime -> runs: runtime/children.rs"
    );
}
