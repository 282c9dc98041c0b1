//! Data flows one way inside the server (spec §10): a door calls a use case, which hands the store what to persist.
//! This test reads the server's sources and fails when a module imports one of a layer above it: the store
//! importing a use case or a door, or a use case importing a door. An import from above to below is the normal
//! direction, so no upward import means no cycle between the doors, the use cases and the store. Inside the layer of
//! the use cases, modules import each other; a second test fails when those imports go round in a circle, so that
//! each use case can be read, tested and changed with only the ones below it in mind. A third test holds the store
//! to what a crate of its own would be held to: no file under store/ names a module above it, not in its unit tests
//! nor in a doc link.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

/// The server's top-level modules by layer, lowest first. The channels (email, Slack, web push) talk to services
/// outside and know nothing else of the server: below the store, so that they import neither it nor anything above.
const LAYERS: &[(&str, &[&str])] = &[
    // The crate holdpoint-channels (the channels, the outbound guard, the error chain), which the server re-exports
    // under these names: it depends on the wire types alone, so the compiler keeps it from reaching above.
    ("the channels", &["channels", "egress", "causes"]),
    ("the store", &["store"]),
    (
        "the use cases and what they share",
        &[
            "questions",
            "grants",
            "runs",
            "people",
            "sso",
            "notifications",
            "escalation",
            "webhooks",
            // The approval rules, which every door that decides a tool call asks.
            "rules",
            "audit",
            // The audit log's vocabulary, which the audit log and every use case name.
            "actions",
            "events",
            "visibility",
            "metrics",
            "error",
            // The faults of a request's fields, and the limits several use cases share.
            "validation",
            "credentials",
            // Executing runs is a use case: the executor decides each step's transition through its ledger.
            "runtime",
            "worker_api",
            // Uploads for answers' file fields, their downloads and the removal of those no answer took.
            "files",
        ],
    ),
    (
        "the doors and their wiring",
        &[
            "http",
            "mcp",
            // The MCP gateway: a door (`/mcp/gateway`) with its client of the upstreams, and the upstreams'
            // registration the API's door shares.
            "gateway",
            "web",
            // What the question page's plain form sent when the answer was refused, shown again (web's).
            "answer_drafts",
            "site",
            "cli",
            "headless",
            "responder",
            "client",
            "server",
            "demo",
            "state",
            "auth",
            "deadlines",
            "outbox",
            "webhook_sender",
            "act",
            "slack_door",
            "verify_email",
            // The configuration is read where the server is wired, which hands each use case the values it needs.
            "config",
            "config_file",
            "backup",
        ],
    ),
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, modules)| modules.contains(&module))
}

/// A file's code without its unit-test module (`#[cfg(test)] mod tests`, last in a file by convention): tests are
/// built into no binary. The store is held to more (see [`store_names_above_it`]).
fn without_test_module(source: &str) -> &str {
    source.find("#[cfg(test)]\nmod tests").map_or(source, |at| &source[..at])
}

/// The top-level modules `text` names as `crate::<module>`, wherever it names them.
fn crate_paths_in(text: &str, named: &mut BTreeSet<String>) {
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        let after = &rest[at + "crate::".len()..];
        let name: String = after.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if !name.is_empty() {
            named.insert(name);
        }
        rest = after;
    }
}

/// The top-level modules `source` names as `crate::<module>`, outside comments and the unit-test module.
fn crate_modules_named(source: &str) -> BTreeSet<String> {
    let mut named = BTreeSet::new();
    for line in without_test_module(source).lines() {
        crate_paths_in(line.split("//").next().unwrap_or_default(), &mut named);
    }
    named
}

/// `(file, imported module)` of every import of a module from a higher layer, among `files` (path under
/// server/src, source).
fn upward_imports(files: &[(String, String)]) -> Result<BTreeSet<(String, String)>, String> {
    let mut upward = BTreeSet::new();
    for (file, source) in files {
        let module = file.split('/').next().unwrap_or_default().trim_end_matches(".rs");
        if module == "lib" || module == "main" {
            continue;
        }
        let own = layer_of(module).ok_or_else(|| format!("{file}: the module {module} is in no layer of LAYERS"))?;
        for named in crate_modules_named(source) {
            let theirs =
                layer_of(&named).ok_or_else(|| format!("{file} names crate::{named}, which is in no layer"))?;
            if theirs > own {
                upward.insert((file.clone(), named));
            }
        }
    }
    Ok(upward)
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

#[test]
fn no_module_imports_one_of_a_layer_above_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root, &root, &mut files);
    let found = upward_imports(&files).unwrap();
    assert!(found.is_empty(), "imports from a layer above (data must flow down): {found:?}");
}

#[test]
fn every_module_of_the_server_is_in_a_layer() {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let modules: Vec<&str> = lib
        .lines()
        .filter_map(|line| line.trim().strip_prefix("pub mod ").or_else(|| line.trim().strip_prefix("mod ")))
        .map(|rest| rest.trim_end_matches(';'))
        .collect();
    assert!(modules.len() > 20, "{modules:?}");
    for module in modules {
        assert!(layer_of(module).is_some(), "the module {module} is in no layer of LAYERS");
    }
}

#[test]
fn the_check_catches_a_store_module_that_imports_a_use_case_or_a_door() {
    let files = vec![
        ("store/rows.rs".to_owned(), "use crate::store::now;\nuse crate::questions::build_question;\n".to_owned()),
        ("store/mod.rs".to_owned(), "// crate::http is only mentioned in a comment\nfn f() {}\n".to_owned()),
        ("questions.rs".to_owned(), "fn g() { crate::http::limits::check(); crate::store::now(); }\n".to_owned()),
        ("http/mod.rs".to_owned(), "use crate::questions;\nuse crate::store::Store;\n".to_owned()),
        (
            "store/sql.rs".to_owned(),
            "use crate::audit::verify;\n#[cfg(test)]\nmod tests {\n    use crate::questions::transition;\n}\n"
                .to_owned(),
        ),
    ];
    let found = upward_imports(&files).unwrap();
    let expected: BTreeSet<(String, String)> =
        [("store/rows.rs", "questions"), ("questions.rs", "http"), ("store/sql.rs", "audit")]
            .into_iter()
            .map(|(file, module)| (file.to_owned(), module.to_owned()))
            .collect();
    assert_eq!(found, expected);
    let channel = vec![("channels/email.rs".to_owned(), "use crate::store::Store;\n".to_owned())];
    let expected: BTreeSet<(String, String)> = [("channels/email.rs".to_owned(), "store".to_owned())].into();
    assert_eq!(upward_imports(&channel).unwrap(), expected, "a channel may not reach into the store");
    let unplaced = vec![("newdoor.rs".to_owned(), String::new())];
    assert!(upward_imports(&unplaced).is_err(), "a new module must be placed in a layer");
}

/// `(file, named module)` of every module outside the store and the layers below it that a file under store/ names,
/// among `files` (path under server/src, source): in its code, its unit tests and its doc comments alike. The store
/// is to be a crate of its own, which could not name the use cases or the doors at all: a test that needs a use case
/// belongs to the API tests, and an intra-doc link to a use case would point nowhere.
fn store_names_above_it(files: &[(String, String)]) -> BTreeSet<(String, String)> {
    let store = layer_of("store").expect("the store's layer");
    let mut above = BTreeSet::new();
    for (file, source) in files.iter().filter(|(file, _)| file.starts_with("store/")) {
        let mut named = BTreeSet::new();
        crate_paths_in(source, &mut named);
        for module in named {
            if layer_of(&module).is_none_or(|layer| layer > store) {
                above.insert((file.clone(), module));
            }
        }
    }
    above
}

#[test]
fn the_store_names_no_module_above_it_not_even_in_its_tests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root, &root, &mut files);
    assert!(files.iter().filter(|(file, _)| file.starts_with("store/")).count() > 10, "the store's files are read");
    let found = store_names_above_it(&files);
    assert!(found.is_empty(), "the store names modules above it (in code, tests or doc links): {found:?}");
}

#[test]
fn the_store_check_catches_a_name_in_tests_and_doc_links_and_nothing_below() {
    let files = vec![
        ("store/rows.rs".to_owned(), "//! Checked with [`crate::audit::verify`].\nuse crate::store::now;\n".to_owned()),
        (
            "store/sql.rs".to_owned(),
            "use crate::egress;\n#[cfg(test)]\nmod tests {\n    fn f() { crate::questions::transition(); }\n}\n"
                .to_owned(),
        ),
        ("store/sqlite/mod.rs".to_owned(), "fn g() { crate::newthing::h(); }\n".to_owned()),
        ("questions/mod.rs".to_owned(), "use crate::http::limits;\n".to_owned()),
    ];
    let expected: BTreeSet<(String, String)> =
        [("store/rows.rs", "audit"), ("store/sql.rs", "questions"), ("store/sqlite/mod.rs", "newthing")]
            .into_iter()
            .map(|(file, module)| (file.to_owned(), module.to_owned()))
            .collect();
    assert_eq!(store_names_above_it(&files), expected);
}

/// The layer whose modules may import each other, as long as they form no cycle.
const USE_CASES: &str = "the use cases and what they share";

/// Who imports whom among the modules of the use cases' layer: each module's imports of another module of the layer,
/// with the files that make them.
type ImportGraph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// The import graph between the modules of the use cases' layer among `files` (path under server/src, source).
fn use_case_imports(files: &[(String, String)]) -> ImportGraph {
    let (_, use_cases) = LAYERS.iter().find(|(name, _)| *name == USE_CASES).expect("the use cases' layer");
    let mut graph = ImportGraph::new();
    for (file, source) in files {
        let module = file.split('/').next().unwrap_or_default().trim_end_matches(".rs");
        if !use_cases.contains(&module) {
            continue;
        }
        let imports = graph.entry(module.to_owned()).or_default();
        for named in crate_modules_named(source) {
            if named != module && use_cases.contains(&named.as_str()) {
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
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root, &root, &mut files);
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
        ("http/mod.rs".to_owned(), "use crate::runs;\nuse crate::questions;\n".to_owned()),
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
