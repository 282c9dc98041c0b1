//! The rules engine itself, without storage: a document checked and compiled once ([`compile`]), then any number of
//! calls evaluated against it ([`CompiledRules::evaluate`]) without parsing anything again.
//!
//! CEL is cel-rust's interpreter (the `cel` crate). It has no type checker, so saving checks what can be known
//! without a call: the syntax, that every name an expression reads is one of the variables (`args`, `tool`, `agent`,
//! `run`, `now`) or a comprehension's own, and, probed against an empty call, that it yields a boolean and calls
//! no unknown function. What only a real call can reveal (`args.amount > 1000` with a string amount) fails at
//! evaluation, where it fails closed.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, LazyLock, PoisonError, RwLock};

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use cel::common::types::{CelBool, CelString};
use cel::objects::{Key, Map};
use cel::{Context, Env, ExecutionError, Program, Value as Cel};
use chrono::{DateTime, Utc};
use holdpoint_types::{Rule, RuleDecision, RuleMode, RulesDocument};
use regex::Regex;
use serde_json::Value;
use uuid::Uuid;

use crate::validation::FieldErrors;

/// The variables a `when` expression may read.
pub const VARIABLES: [&str; 5] = ["args", "tool", "agent", "run", "now"];
/// CEL's type names, which an expression may name as identifiers (`type(args.amount) == int`).
const TYPE_NAMES: [&str; 12] =
    ["int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type", "timestamp", "duration"];
/// The longest glob, reason and `when` expression a rule may have.
const GLOB_MAX_CHARS: usize = 256;
const REASON_MAX_CHARS: usize = 2_000;
const WHEN_MAX_CHARS: usize = 4_000;
/// The most rules a document may hold.
pub const RULES_MAX: usize = 1_000;

/// A glob over names: `*` stands for any characters (none included); everything else is itself.
#[derive(Debug, Clone)]
pub struct Glob {
    /// The literal pieces between the stars; one piece (no star) must equal the name.
    pieces: Vec<String>,
}

impl Glob {
    /// The glob `pattern`, or why it is not one.
    pub fn parse(pattern: &str) -> Result<Glob, String> {
        let chars = pattern.chars().count();
        if chars == 0 || chars > GLOB_MAX_CHARS {
            return Err(format!("must have 1..={GLOB_MAX_CHARS} characters"));
        }
        if pattern.chars().any(char::is_control) {
            return Err("must not contain control characters".into());
        }
        if pattern.trim() != pattern {
            return Err("must not begin or end with spaces".into());
        }
        Ok(Glob { pieces: pattern.split('*').map(str::to_owned).collect() })
    }

    /// Whether `name` matches: it begins with the first piece, ends with the last, and holds the others in order
    /// between them. Taking each middle piece at its leftmost place is enough with only `*` as a wildcard.
    pub fn matches(&self, name: &str) -> bool {
        let [first, middle @ .., last] = self.pieces.as_slice() else {
            return self.pieces.first().is_some_and(|only| only == name);
        };
        if name.len() < first.len() + last.len() || !name.starts_with(first.as_str()) || !name.ends_with(last.as_str())
        {
            return false;
        }
        let mut rest = &name[first.len()..name.len() - last.len()];
        for piece in middle {
            match rest.find(piece.as_str()) {
                Some(at) => rest = &rest[at + piece.len()..],
                None => return false,
            }
        }
        true
    }
}

/// One rule, compiled.
pub struct CompiledRule {
    pub name: String,
    pub decision: RuleDecision,
    pub mode: RuleMode,
    tools: Vec<Glob>,
    /// `None`: any caller.
    agents: Option<Vec<Glob>>,
    when: Option<Program>,
    /// The rule as written, for its reason and ask settings.
    pub rule: Rule,
}

/// A document, compiled: what a decision reads.
pub struct CompiledRules {
    /// The stored version it was compiled from (0: none stored).
    pub version: i64,
    pub default: RuleDecision,
    pub rules: Vec<CompiledRule>,
    /// CEL's standard environment, built once and shared by every evaluation.
    env: Arc<Env>,
}

impl std::fmt::Debug for CompiledRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledRules").field("version", &self.version).field("rules", &self.rules.len()).finish()
    }
}

/// The call a document is evaluated against, as CEL sees it.
pub struct Call<'a> {
    pub tool: &'a str,
    pub arguments: &'a Value,
    pub agent: Option<&'a str>,
    /// `(id, project)` of the run the call belongs to.
    pub run: Option<(Uuid, Option<&'a str>)>,
    pub now: DateTime<Utc>,
}

/// What a document decided about a call.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    pub decision: RuleDecision,
    /// The index of the deciding rule; `None` when the default decided.
    pub rule: Option<usize>,
    /// The indexes of every rule that matched, dry-run ones too, in document order.
    pub matched: Vec<usize>,
    /// Rules whose `when` failed at evaluation, with the error: each counted as its decision fails closed.
    pub failures: Vec<(usize, String)>,
}

/// CEL's standard environment, with `matches` (`s.matches(re)`, `matches(s, re)`) compiling each regular
/// expression once: cel's own compiles it again at every evaluation, which cost tens of microseconds per rule
/// (ten rules with a `matches` took a decision's p99 past a millisecond; see docs/benchmarks.md).
fn environment() -> Env {
    let mut env = Env::stdlib();
    cel::add_overload!(env, fn matches: (CelString, CelString) -> Result<CelBool>, id = "matches")
        .expect("cel's standard library leaves `matches` to the regex feature, which is off");
    cel::add_member_overload!(env, fn matches: (CelString, CelString) -> Result<CelBool>)
        .expect("cel's standard library leaves `matches` to the regex feature, which is off");
    env
}

/// The most regular expressions kept compiled; past it the cache starts again (a document holds a few, and a
/// pattern built from a call's arguments must not grow it without end).
const REGEXES_MAX: usize = 1_024;

/// `text.matches(pattern)`: RE2 syntax, as CEL specifies, through the `regex` crate; each pattern compiled once.
fn matches(text: &CelString<'_>, pattern: &CelString<'_>) -> Result<CelBool, ExecutionError> {
    static COMPILED: LazyLock<RwLock<HashMap<String, Arc<Regex>>>> = LazyLock::new(Default::default);
    let pattern = pattern.inner();
    let known = COMPILED.read().unwrap_or_else(PoisonError::into_inner).get(pattern).cloned();
    let regex = match known {
        Some(regex) => regex,
        None => {
            let regex = Arc::new(Regex::new(pattern).map_err(|err| ExecutionError::FunctionError {
                function: "matches".to_owned(),
                message: format!("'{pattern}' not a valid regex:\n{err}"),
            })?);
            let mut compiled = COMPILED.write().unwrap_or_else(PoisonError::into_inner);
            if compiled.len() >= REGEXES_MAX {
                compiled.clear();
            }
            compiled.insert(pattern.to_owned(), Arc::clone(&regex));
            regex
        }
    };
    Ok(CelBool::from(regex.is_match(text.inner())))
}

/// Checks a whole document, collecting every fault: names (`[a-z0-9_-]{1,64}`, unique), globs, `when` expressions
/// (syntax with its position, names read, a boolean result), reasons. The compiled document on success.
pub fn compile(document: &RulesDocument, version: i64) -> Result<CompiledRules, FieldErrors> {
    let env = Arc::new(environment());
    let mut errors = FieldErrors::default();
    if document.rules.len() > RULES_MAX {
        errors.add("rules", format!("at most {RULES_MAX} rules"));
    }
    let mut names = HashSet::new();
    let mut rules = Vec::with_capacity(document.rules.len());
    for (i, rule) in document.rules.iter().enumerate() {
        let at = |field: &str| format!("rules[{i}].{field}");
        if !valid_name(&rule.name) {
            errors.add(at("name"), "must be 1..=64 of a-z, 0-9, _ and -");
        } else if !names.insert(rule.name.as_str()) {
            errors.add(at("name"), format!("{:?} is the name of an earlier rule", rule.name));
        }
        if rule.tools.is_empty() {
            errors.add(at("tools"), "must name at least one tool (\"*\" for all)");
        }
        let tools = globs(&rule.tools, &at("tools"), &mut errors);
        let agents = rule.agents.as_ref().map(|agents| {
            if agents.is_empty() {
                errors.add(at("agents"), "must name at least one agent, or be left out for any");
            }
            globs(agents, &at("agents"), &mut errors)
        });
        if rule.reason.as_ref().is_some_and(|r| r.trim().is_empty() || r.chars().count() > REASON_MAX_CHARS) {
            errors.add(at("reason"), format!("must have 1..={REASON_MAX_CHARS} characters"));
        }
        let when = match &rule.when {
            None => None,
            Some(source) => match compile_when(&env, source) {
                Ok(program) => Some(program),
                Err(message) => {
                    errors.add(at("when"), message);
                    None
                }
            },
        };
        rules.push(CompiledRule {
            name: rule.name.clone(),
            decision: rule.decision,
            mode: rule.mode,
            tools,
            agents,
            when,
            rule: rule.clone(),
        });
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(CompiledRules { version, default: document.default, rules, env })
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

fn globs(patterns: &[String], field: &str, errors: &mut FieldErrors) -> Vec<Glob> {
    patterns
        .iter()
        .enumerate()
        .filter_map(|(j, pattern)| match Glob::parse(pattern) {
            Ok(glob) => Some(glob),
            Err(message) => {
                errors.add(format!("{field}[{j}]"), message);
                None
            }
        })
        .collect()
}

/// Compiles a `when` expression, or says what is wrong with it and where (`line:column`, from 1).
fn compile_when(env: &Arc<Env>, source: &str) -> Result<Program, String> {
    if source.trim().is_empty() || source.chars().count() > WHEN_MAX_CHARS {
        return Err(format!("must have 1..={WHEN_MAX_CHARS} characters"));
    }
    let program = env.compile(source).map_err(|parse| match parse.errors.first() {
        Some(first) => format!("syntax error at {}:{}: {}", first.pos.0, first.pos.1 + 1, first.msg),
        None => "syntax error".to_owned(),
    })?;
    let mut unknown = Vec::new();
    undeclared_names(program.expression(), &mut Vec::new(), &mut unknown);
    if let Some((name, id)) = unknown.first() {
        let at = program.source_info().offset_for(*id).map(|(start, _)| position(source, start as usize));
        return Err(match at {
            Some((line, column)) => {
                format!("unknown name {name:?} at {line}:{column}: an expression reads {}", VARIABLES.join(", "))
            }
            None => format!("unknown name {name:?}: an expression reads {}", VARIABLES.join(", ")),
        });
    }
    // A probe with an empty call: a function that does not exist, or a result that is not a boolean, shows here
    // whenever the evaluation gets that far (reading an argument the probe lacks stops it first, and is no fault).
    let probe =
        Call { tool: "", arguments: &Value::Object(Default::default()), agent: None, run: None, now: Utc::now() };
    let context = context(env, &probe);
    match program.execute(&context) {
        Ok(Cel::Bool(_)) => {}
        Ok(other) => return Err(format!("must be a boolean expression; this one gives {}", other.type_of())),
        Err(ExecutionError::UndeclaredReference(name)) => return Err(format!("unknown function {name:?}")),
        Err(_) => {}
    }
    Ok(program)
}

/// The 1-based line and column (in characters) of byte `offset` in `source`.
fn position(source: &str, offset: usize) -> (usize, usize) {
    let before = &source[..offset.min(source.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Collects the identifiers `expr` reads that are neither variables, type names nor the variables of the
/// comprehensions around them (`scope`), with their node ids.
fn undeclared_names<'e>(expr: &'e IdedExpr, scope: &mut Vec<&'e str>, unknown: &mut Vec<(&'e str, u64)>) {
    match &expr.expr {
        Expr::Ident(name) => {
            let known = VARIABLES.contains(&name.as_str())
                || TYPE_NAMES.contains(&name.as_str())
                || name.starts_with('@')
                || scope.contains(&name.as_str());
            if !known {
                unknown.push((name, expr.id));
            }
        }
        Expr::Call(call) => {
            if let Some(target) = &call.target {
                undeclared_names(target, scope, unknown);
            }
            for arg in &call.args {
                undeclared_names(arg, scope, unknown);
            }
        }
        Expr::Comprehension(comp) => {
            undeclared_names(&comp.iter_range, scope, unknown);
            undeclared_names(&comp.accu_init, scope, unknown);
            let depth = scope.len();
            scope.push(&comp.iter_var);
            if let Some(second) = &comp.iter_var2 {
                scope.push(second);
            }
            scope.push(&comp.accu_var);
            for part in [&comp.loop_cond, &comp.loop_step, &comp.result] {
                undeclared_names(part, scope, unknown);
            }
            scope.truncate(depth);
        }
        Expr::List(list) => list.elements.iter().for_each(|e| undeclared_names(e, scope, unknown)),
        Expr::Map(map) => map.entries.iter().for_each(|entry| entry_names(&entry.expr, scope, unknown)),
        Expr::Struct(fields) => fields.entries.iter().for_each(|entry| entry_names(&entry.expr, scope, unknown)),
        Expr::Select(select) => undeclared_names(&select.operand, scope, unknown),
        Expr::Literal(_) | Expr::Unspecified => {}
    }
}

fn entry_names<'e>(entry: &'e EntryExpr, scope: &mut Vec<&'e str>, unknown: &mut Vec<(&'e str, u64)>) {
    match entry {
        EntryExpr::MapEntry(entry) => {
            undeclared_names(&entry.key, scope, unknown);
            undeclared_names(&entry.value, scope, unknown);
        }
        EntryExpr::StructField(field) => undeclared_names(&field.value, scope, unknown),
    }
}

/// The CEL value of a JSON value: integers that fit are `int` (so `args.amount > 1000` compares like with like),
/// larger ones `uint`, other numbers `double`.
pub fn cel_value(json: &Value) -> Cel {
    match json {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Cel::Int(i),
            (None, Some(u)) => Cel::UInt(u),
            _ => Cel::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Array(items) => Cel::List(Arc::new(items.iter().map(cel_value).collect())),
        Value::Object(fields) => Cel::Map(Map {
            map: Arc::new(fields.iter().map(|(k, v)| (Key::String(Arc::new(k.clone())), cel_value(v))).collect()),
        }),
    }
}

/// The variables of one call, bound once for every rule evaluated against it.
fn context<'c>(env: &Arc<Env>, call: &Call<'_>) -> Context<'c, 'c> {
    let mut context = Context::with_env(Arc::clone(env));
    context.add_variable_from_value("args", cel_value(call.arguments));
    context.add_variable_from_value("tool", Cel::String(Arc::new(call.tool.to_owned())));
    context.add_variable_from_value("agent", call.agent.map_or(Cel::Null, |a| Cel::String(Arc::new(a.to_owned()))));
    let run = match call.run {
        None => Cel::Null,
        Some((id, project)) => Cel::Map(Map {
            map: Arc::new(
                [
                    (Key::String(Arc::new("id".into())), Cel::String(Arc::new(id.to_string()))),
                    (
                        Key::String(Arc::new("project".into())),
                        project.map_or(Cel::Null, |p| Cel::String(Arc::new(p.to_owned()))),
                    ),
                ]
                .into_iter()
                .collect(),
            ),
        }),
    };
    context.add_variable_from_value("run", run);
    context.add_variable_from_value("now", Cel::Timestamp(call.now.fixed_offset()));
    context
}

impl CompiledRules {
    /// No rules, the default `ask`: what a workspace that never saved a document has.
    pub fn empty() -> CompiledRules {
        CompiledRules { version: 0, default: RuleDecision::Ask, rules: Vec::new(), env: Arc::new(environment()) }
    }

    /// Decides `call`: of the enforcing rules whose tools and agents match and whose `when` holds, the strictest
    /// decision, named by the first such rule in order; none, the default. A `when` that fails counts as holding
    /// for `deny` and `ask` and not for `allow`. Dry-run rules are evaluated the same way, listed in `matched`,
    /// and decide nothing.
    pub fn evaluate(&self, call: &Call<'_>) -> Evaluation {
        let mut context = None;
        let mut deciding: Option<usize> = None;
        let mut matched = Vec::new();
        let mut failures = Vec::new();
        for (i, rule) in self.rules.iter().enumerate() {
            if !rule.tools.iter().any(|glob| glob.matches(call.tool)) {
                continue;
            }
            if let Some(agents) = &rule.agents
                && !call.agent.is_some_and(|agent| agents.iter().any(|glob| glob.matches(agent)))
            {
                continue;
            }
            let holds = match &rule.when {
                None => true,
                Some(program) => {
                    // Bound on the first rule that needs it: most calls of most tools match no `when` at all.
                    let context = context.get_or_insert_with(|| self::context(&self.env, call));
                    match program.execute(context) {
                        Ok(Cel::Bool(holds)) => holds,
                        Ok(other) => {
                            failures.push((i, format!("gave {} instead of a boolean", other.type_of())));
                            rule.decision != RuleDecision::Allow
                        }
                        Err(err) => {
                            failures.push((i, err.to_string()));
                            rule.decision != RuleDecision::Allow
                        }
                    }
                }
            };
            if !holds {
                continue;
            }
            matched.push(i);
            if rule.mode == RuleMode::Enforce
                && deciding.is_none_or(|d| rule.decision.strictness() > self.rules[d].decision.strictness())
            {
                deciding = Some(i);
            }
        }
        let decision = deciding.map_or(self.default, |i| self.rules[i].decision);
        Evaluation { decision, rule: deciding, matched, failures }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn document(value: Value) -> RulesDocument {
        serde_json::from_value(value).unwrap()
    }

    fn call<'a>(tool: &'a str, arguments: &'a Value) -> Call<'a> {
        Call { tool, arguments, agent: None, run: None, now: Utc::now() }
    }

    fn errors(value: Value) -> String {
        let err = compile(&document(value), 1).expect_err("the document is refused");
        format!("{err:?}")
    }

    #[test]
    fn a_star_stands_for_any_characters_and_nothing_else_is_special() {
        let glob = Glob::parse("mcp:github/*").unwrap();
        assert!(glob.matches("mcp:github/create_issue"));
        assert!(glob.matches("mcp:github/"));
        assert!(!glob.matches("mcp:gitlab/create_issue"));
        let glob = Glob::parse("*delete*").unwrap();
        assert!(glob.matches("delete"));
        assert!(glob.matches("kubectl_delete_pod"));
        assert!(!glob.matches("remove"));
        let glob = Glob::parse("a*b*a").unwrap();
        assert!(glob.matches("aba"));
        assert!(!glob.matches("ab"), "the first and last pieces may not overlap");
        let glob = Glob::parse("shell").unwrap();
        assert!(glob.matches("shell"));
        assert!(!glob.matches("shells"));
        assert!(Glob::parse("sh?ll").unwrap().matches("sh?ll"));
        assert!(!Glob::parse("sh?ll").unwrap().matches("shell"));
    }

    #[test]
    fn an_empty_glob_or_one_with_control_characters_is_refused() {
        assert!(Glob::parse("").is_err());
        assert!(Glob::parse("shell\n").is_err());
        assert!(Glob::parse(" shell").is_err());
    }

    #[test]
    fn matches_takes_re2_patterns_in_both_forms_and_a_bad_pattern_fails_closed() {
        let rules = compile(
            &document(json!({ "rules": [
                { "name": "tf", "tools": ["shell"], "when": "args.command.matches('^terraform (apply|destroy)')", "decision": "deny" },
                { "name": "call", "tools": ["shell"], "when": "matches(args.command, 'kubectl +delete')", "decision": "ask" },
                { "name": "bad", "tools": ["bash"], "when": "args.command.matches('(')", "decision": "allow" },
            ]})),
            1,
        )
        .unwrap();
        for _ in 0..3 {
            let apply = json!({ "command": "terraform apply -auto-approve" });
            assert_eq!(rules.evaluate(&call("shell", &apply)).rule, Some(0));
            let delete = json!({ "command": "kubectl   delete pod x" });
            assert_eq!(rules.evaluate(&call("shell", &delete)).rule, Some(1));
            let plan = json!({ "command": "terraform plan" });
            assert_eq!(rules.evaluate(&call("shell", &plan)).matched, Vec::<usize>::new());
        }
        let bad = rules.evaluate(&call("bash", &json!({ "command": "ls" })));
        assert_eq!((bad.rule, bad.failures.len()), (None, 1), "an allow whose pattern is no regex never allows");
    }

    #[test]
    fn the_strictest_decision_wins_and_the_first_rule_of_it_names_it() {
        let rules = compile(
            &document(json!({ "rules": [
                { "name": "allow-all", "tools": ["*"], "decision": "allow" },
                { "name": "ask-shell", "tools": ["shell"], "decision": "ask" },
                { "name": "deny-rm", "tools": ["shell"], "when": "args.command.startsWith('rm')", "decision": "deny" },
                { "name": "deny-rm-again", "tools": ["sh*"], "when": "args.command.startsWith('rm')", "decision": "deny" },
            ]})),
            1,
        )
        .unwrap();
        let ls = json!({ "command": "ls" });
        let evaluation = rules.evaluate(&call("shell", &ls));
        assert_eq!((evaluation.decision, evaluation.rule), (RuleDecision::Ask, Some(1)));
        assert_eq!(evaluation.matched, vec![0, 1]);
        let rm = json!({ "command": "rm -rf /" });
        let evaluation = rules.evaluate(&call("shell", &rm));
        assert_eq!((evaluation.decision, evaluation.rule), (RuleDecision::Deny, Some(2)));
        assert_eq!(evaluation.matched, vec![0, 1, 2, 3]);
        let evaluation = rules.evaluate(&call("http_request", &ls));
        assert_eq!((evaluation.decision, evaluation.rule), (RuleDecision::Allow, Some(0)));
    }

    #[test]
    fn a_call_no_rule_matches_gets_the_default() {
        let rules =
            compile(&document(json!({ "rules": [{ "name": "r", "tools": ["shell"], "decision": "deny" }] })), 1)
                .unwrap();
        let none = json!({});
        let evaluation = rules.evaluate(&call("http_request", &none));
        assert_eq!((evaluation.decision, evaluation.rule), (RuleDecision::Ask, None));
        let rules = compile(&document(json!({ "rules": [], "default": "allow" })), 1).unwrap();
        assert_eq!(rules.evaluate(&call("http_request", &none)).decision, RuleDecision::Allow);
    }

    #[test]
    fn a_condition_splits_the_calls_of_one_tool() {
        let rules = compile(
            &document(json!({ "rules": [
                { "name": "small", "tools": ["pay"], "when": "args.amount <= 1000", "decision": "allow" },
                { "name": "large", "tools": ["pay"], "when": "args.amount > 1000", "decision": "ask" },
            ], "default": "deny" })),
            1,
        )
        .unwrap();
        let small = json!({ "amount": 900 });
        assert_eq!(rules.evaluate(&call("pay", &small)).decision, RuleDecision::Allow);
        let large = json!({ "amount": 1500.5 });
        assert_eq!(rules.evaluate(&call("pay", &large)).decision, RuleDecision::Ask);
    }

    #[test]
    fn a_condition_that_fails_to_evaluate_fails_closed() {
        let rules = compile(
            &document(json!({ "rules": [
                { "name": "allow-small", "tools": ["pay"], "when": "args.amount < 10", "decision": "allow" },
                { "name": "ask-large", "tools": ["pay"], "when": "args.amount > 1000", "decision": "ask" },
            ], "default": "allow" })),
            1,
        )
        .unwrap();
        let text = json!({ "amount": "lots" });
        let evaluation = rules.evaluate(&call("pay", &text));
        assert_eq!((evaluation.decision, evaluation.rule), (RuleDecision::Ask, Some(1)));
        assert_eq!(evaluation.matched, vec![1], "the allow rule's failure does not count for it");
        assert_eq!(evaluation.failures.len(), 2);
        let missing = json!({});
        assert_eq!(rules.evaluate(&call("pay", &missing)).decision, RuleDecision::Ask);
    }

    #[test]
    fn a_dry_run_rule_is_listed_but_never_decides() {
        let rules = compile(
            &document(json!({ "rules": [
                { "name": "would-deny", "tools": ["*"], "decision": "deny", "mode": "dry_run" },
            ], "default": "allow" })),
            1,
        )
        .unwrap();
        let none = json!({});
        let evaluation = rules.evaluate(&call("shell", &none));
        assert_eq!((evaluation.decision, evaluation.rule, evaluation.matched), (RuleDecision::Allow, None, vec![0]));
    }

    #[test]
    fn agents_globs_match_the_callers_name_and_a_nameless_caller_never() {
        let rules = compile(
            &document(json!({ "rules": [
                { "name": "bots", "tools": ["*"], "agents": ["deploy-*"], "decision": "deny" },
            ], "default": "allow" })),
            1,
        )
        .unwrap();
        let none = json!({});
        let named = |agent| Call { agent: Some(agent), ..call("shell", &none) };
        assert_eq!(rules.evaluate(&named("deploy-bot")).decision, RuleDecision::Deny);
        assert_eq!(rules.evaluate(&named("triage")).decision, RuleDecision::Allow);
        assert_eq!(rules.evaluate(&call("shell", &none)).decision, RuleDecision::Allow);
    }

    #[test]
    fn the_condition_sees_the_tool_the_agent_the_run_and_the_time() {
        let rules = compile(
            &document(json!({ "rules": [{
                "name": "prod",
                "tools": ["*"],
                "when": "tool == 'kubectl' && agent == 'ops' && run.project == 'prod' && now > timestamp('2020-01-01T00:00:00Z')",
                "decision": "deny",
            }], "default": "allow" })),
            1,
        )
        .unwrap();
        let none = json!({});
        let run = Uuid::now_v7();
        let full = Call { agent: Some("ops"), run: Some((run, Some("prod"))), ..call("kubectl", &none) };
        assert_eq!(rules.evaluate(&full).decision, RuleDecision::Deny);
        let staging = Call { agent: Some("ops"), run: Some((run, Some("staging"))), ..call("kubectl", &none) };
        assert_eq!(rules.evaluate(&staging).decision, RuleDecision::Allow);
    }

    #[test]
    fn every_fault_of_a_document_is_named_with_its_field() {
        let message = errors(json!({ "rules": [
            { "name": "ok", "tools": ["*"], "decision": "allow" },
            { "name": "ok", "tools": [""], "decision": "deny" },
            { "name": "Bad Name", "tools": ["*"], "when": "args.amount >", "decision": "ask" },
            { "name": "unknown", "tools": ["*"], "when": "amount > 3", "decision": "ask" },
            { "name": "not-bool", "tools": ["*"], "when": "tool", "decision": "ask" },
            { "name": "no-tools", "tools": [], "decision": "ask" },
        ]}));
        for field in [
            "rules[1].name",
            "rules[1].tools[0]",
            "rules[2].name",
            "rules[2].when",
            "rules[3].when",
            "rules[4].when",
            "rules[5].tools",
        ] {
            assert!(message.contains(&format!("\"{field}\"")), "{field} in {message}");
        }
        assert!(message.contains("syntax error at 1:"), "{message}");
        assert!(message.contains("unknown name \\\"amount\\\" at 1:1"), "{message}");
        assert!(!message.contains("rules[0]"), "{message}");
    }

    #[test]
    fn a_comprehension_may_read_its_own_variables() {
        let rules = compile(
            &document(json!({ "rules": [{
                "name": "any-prod",
                "tools": ["*"],
                "when": "args.hosts.exists(h, h.startsWith('prod'))",
                "decision": "deny",
            }], "default": "allow" })),
            1,
        )
        .unwrap();
        let hosts = json!({ "hosts": ["dev-1", "prod-2"] });
        assert_eq!(rules.evaluate(&call("ssh", &hosts)).decision, RuleDecision::Deny);
        let hosts = json!({ "hosts": ["dev-1"] });
        assert_eq!(rules.evaluate(&call("ssh", &hosts)).decision, RuleDecision::Allow);
    }

    #[test]
    fn an_unknown_function_is_refused_when_saved() {
        let message = errors(json!({ "rules": [
            { "name": "f", "tools": ["*"], "when": "frobnicate(tool)", "decision": "ask" },
        ]}));
        assert!(message.contains("unknown function"), "{message}");
    }
}
