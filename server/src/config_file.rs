//! The configuration file (`holdpoint.toml`): a key for every setting of every command.
//!
//! A key is a flag's long name with `_` for `-` (`--data-dir` is `data_dir`); a table groups keys by their first
//! word (`[oidc]` with `issuer = ...` is `oidc_issuer`). The file's values become the flags' defaults, so clap's
//! own order holds: a flag on the command line, then its environment variable, then the file, then the built-in
//! default. Every value is checked by the flag's own parser when the file is read, and a wrong key or value names
//! the file and the key: a setting that silently does nothing is worse than a server that does not start.
//!
//! The file is `--config FILE` or `HOLDPOINT_CONFIG`, else [`DEFAULT_PATH`] when it exists. It is looked for before
//! the command line is parsed, since it changes what the parse yields.
//!
//! One part of the file is no flag's: `[[gateway.upstreams]]`, the MCP servers the gateway starts as local
//! processes, a list of tables that only the file can hold (see [`crate::doors::gateway::stdio`]). It is read apart from the
//! flags' keys, checked as strictly, and handed to `serve` whole.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{Arg, ArgMatches, Command};

use crate::doors::gateway::stdio::{self, StdioUpstream};

/// Where an installed Holdpoint keeps its configuration (the Debian package's conffile).
pub const DEFAULT_PATH: &str = "/etc/holdpoint/holdpoint.toml";

/// The flag and variable naming the file.
pub const FLAG: &str = "config";
pub const VARIABLE: &str = "HOLDPOINT_CONFIG";

/// What is shown instead of a secret's value.
const REDACTED: &str = "[redacted]";

/// Why the configuration file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    #[error("cannot read the configuration file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    /// [`DEFAULT_PATH`] exists but this user may not read it: the package keeps it `root:holdpoint`, mode 0640, as
    /// it may hold secrets. Only the commands that take the server's settings need it (see `cli::with_configuration_file`).
    #[error(
        "cannot read the configuration file {path}: {source} (it holds the server's settings: run this as root or \
         in the holdpoint group, or name another file with --config)"
    )]
    DefaultUnreadable { path: PathBuf, source: std::io::Error },
    #[error("the configuration file {path} is not valid TOML: {message}")]
    Syntax { path: PathBuf, message: String },
    #[error("the configuration file {path} has no setting `{key}`{hint}")]
    UnknownKey { path: PathBuf, key: String, hint: String },
    #[error("the configuration file {path}: `{key}`: {message}")]
    Value { path: PathBuf, key: String, message: String },
}

/// A read configuration file: each key with its value as a flag would take it.
#[derive(Debug, Clone)]
pub struct ConfigFile {
    pub path: PathBuf,
    values: BTreeMap<String, String>,
    /// `[[gateway.upstreams]]`: the gateway's upstreams started as local processes.
    gateway_upstreams: Vec<StdioUpstream>,
}

impl ConfigFile {
    /// The file named by `--config` in `args`, else by `HOLDPOINT_CONFIG`, else [`DEFAULT_PATH`] if it exists.
    /// A file that is named but missing is an error; the default one is optional.
    pub fn locate(args: &[OsString]) -> Result<Option<ConfigFile>, ConfigFileError> {
        let named = named_on_command_line(args)
            .or_else(|| std::env::var_os(VARIABLE).filter(|value| !value.is_empty()).map(PathBuf::from));
        match named {
            Some(path) => ConfigFile::read(&path).map(Some),
            None if Path::new(DEFAULT_PATH).is_file() => match ConfigFile::read(Path::new(DEFAULT_PATH)) {
                Err(ConfigFileError::Read { path, source })
                    if source.kind() == std::io::ErrorKind::PermissionDenied =>
                {
                    Err(ConfigFileError::DefaultUnreadable { path, source })
                }
                read => read.map(Some),
            },
            None => Ok(None),
        }
    }

    /// Reads and flattens one file; its keys are checked against the commands by [`ConfigFile::apply`].
    pub fn read(path: &Path) -> Result<ConfigFile, ConfigFileError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read { path: path.to_owned(), source })?;
        ConfigFile::parse(path, &text)
    }

    /// Flattens `text`: top-level keys as they are, a table's keys prefixed with the table's name and `_`.
    pub fn parse(path: &Path, text: &str) -> Result<ConfigFile, ConfigFileError> {
        let table: toml::Table = toml::from_str(text)
            .map_err(|e| ConfigFileError::Syntax { path: path.to_owned(), message: e.to_string() })?;
        let mut values = BTreeMap::new();
        let mut gateway_upstreams = Vec::new();
        for (key, value) in table {
            match value {
                toml::Value::Table(mut group) => {
                    if key == "gateway"
                        && let Some(upstreams) = group.remove("upstreams")
                    {
                        gateway_upstreams = stdio::parse_entries(upstreams)
                            .map_err(|(key, message)| ConfigFileError::Value { path: path.to_owned(), key, message })?;
                    }
                    for (inner, value) in group {
                        let key = normalize(&format!("{key}_{inner}"));
                        let value = scalar(path, &key, value)?;
                        values.insert(key, value);
                    }
                }
                value => {
                    let key = normalize(&key);
                    let value = scalar(path, &key, value)?;
                    values.insert(key, value);
                }
            }
        }
        Ok(ConfigFile { path: path.to_owned(), values, gateway_upstreams })
    }

    /// The file's `[[gateway.upstreams]]`, checked.
    pub fn gateway_upstreams(&self) -> &[StdioUpstream] {
        &self.gateway_upstreams
    }

    /// Whether the file sets `key`.
    pub fn sets(&self, key: &str) -> bool {
        self.values.contains_key(key)
    }

    /// `command` with the file's values as the defaults of the flags they name, in every subcommand that has
    /// that flag (so `data_dir` is also where `holdpoint token create` looks). Each value is parsed by its flag's
    /// parser first; a key that names no flag of any command is refused.
    pub fn apply(&self, command: Command) -> Result<Command, ConfigFileError> {
        let mut used = BTreeSet::new();
        let command = self.apply_to(command, &mut used)?;
        if let Some(key) = self.values.keys().find(|key| !used.contains(*key)) {
            let known = keys_of(&command);
            let hint = closest(key, &known).map(|k| format!(" (did you mean `{k}`?)")).unwrap_or_default();
            return Err(ConfigFileError::UnknownKey { path: self.path.clone(), key: key.clone(), hint });
        }
        Ok(command)
    }

    fn apply_to(&self, mut command: Command, used: &mut BTreeSet<String>) -> Result<Command, ConfigFileError> {
        let settable: Vec<(clap::Id, String)> = command
            .get_arguments()
            .filter(|arg| arg.get_id() != FLAG)
            .filter_map(|arg| arg.get_long().map(|long| (arg.get_id().clone(), normalize(long))))
            .collect();
        for (id, key) in settable {
            let Some(value) = self.values.get(&key) else { continue };
            let arg = command.get_arguments().find(|arg| *arg.get_id() == id).expect("the argument was just listed");
            self.check(arg, &key, value)?;
            let value = value.clone();
            command = command.mut_arg(id, |arg| arg.default_value(value));
            used.insert(key);
        }
        let names: Vec<String> = command.get_subcommands().map(|sub| sub.get_name().to_owned()).collect();
        for name in names {
            let mut outcome = Ok(());
            command = command.mut_subcommand(&name, |sub| match self.apply_to(sub.clone(), used) {
                Ok(applied) => applied,
                Err(error) => {
                    outcome = Err(error);
                    sub
                }
            });
            outcome?;
        }
        Ok(command)
    }

    /// Parses `value` with `arg`'s own parser, alone, as if it were given on the command line.
    fn check(&self, arg: &Arg, key: &str, value: &str) -> Result<(), ConfigFileError> {
        let fail = |message: String| ConfigFileError::Value { path: self.path.clone(), key: key.to_owned(), message };
        let long = arg.get_long().expect("only flags are settable");
        let mut probe = Arg::new("value").long(long.to_owned()).action(arg.get_action().clone());
        probe = probe.value_parser(arg.get_value_parser().clone());
        if let Some(delimiter) = arg.get_value_delimiter() {
            probe = probe.value_delimiter(delimiter);
        }
        if let Some(count) = arg.get_num_args() {
            probe = probe.num_args(count);
        }
        let argv: Vec<String> = if arg.get_action().takes_values() {
            vec![format!("--{long}={value}")]
        } else {
            match value {
                "true" => vec![format!("--{long}")],
                "false" => Vec::new(),
                other => return Err(fail(format!("expected true or false, got {other:?}"))),
            }
        };
        let probe = Command::new("holdpoint.toml").no_binary_name(true).arg(probe);
        probe.try_get_matches_from(argv).map(|_| ()).map_err(|error| {
            let rendered = error.render().to_string();
            let first = rendered.lines().next().unwrap_or_default();
            fail(first.trim_start_matches("error: ").to_owned())
        })
    }
}

/// One setting as `holdpoint config check` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effective {
    pub key: String,
    /// The value as the command took it; `None` when the setting is unset. Secrets are [`REDACTED`].
    pub value: Option<String>,
    /// `command line`, `environment (NAME)`, `file`, `default` or `unset`.
    pub source: String,
}

/// The settings `command` (the subcommand that parsed into `matches`) took, in the order it declares them.
pub fn effective(command: &Command, matches: &ArgMatches, file: Option<&ConfigFile>) -> Vec<Effective> {
    command
        .get_arguments()
        .filter(|arg| arg.get_id() != FLAG && arg.get_id() != "help" && arg.get_id() != "version")
        .filter_map(|arg| {
            let long = arg.get_long()?;
            let key = normalize(long);
            let raw: Option<Vec<String>> = matches
                .get_raw(arg.get_id().as_str())
                .map(|values| values.map(|value| value.to_string_lossy().into_owned()).collect());
            let value = raw.map(|values| {
                let joined = values.join(&arg.get_value_delimiter().unwrap_or(',').to_string());
                if is_secret(arg) {
                    if key == "database_url" { crate::store::redacted_url(&joined) } else { REDACTED.to_owned() }
                } else {
                    joined
                }
            });
            let source = match matches.value_source(arg.get_id().as_str()) {
                Some(ValueSource::CommandLine) => "command line".to_owned(),
                Some(ValueSource::EnvVariable) => {
                    format!("environment ({})", arg.get_env().map(|e| e.to_string_lossy()).unwrap_or_default())
                }
                Some(ValueSource::DefaultValue) if file.is_some_and(|file| file.sets(&key)) => "file".to_owned(),
                Some(ValueSource::DefaultValue) => "default".to_owned(),
                _ => "unset".to_owned(),
            };
            Some(Effective { key, value, source })
        })
        .collect()
}

/// The effective settings as a TOML document a person can read and paste back into a file.
pub fn render(settings: &[Effective], file: Option<&ConfigFile>) -> String {
    let mut out = String::from("# The effective configuration: command line > environment > ");
    match file {
        Some(file) => out.push_str(&format!("{} > defaults.\n", file.path.display())),
        None => out.push_str("configuration file (none) > defaults.\n"),
    }
    for setting in settings {
        match &setting.value {
            Some(value) => {
                // Numbers and booleans as TOML writes them, so the output pastes back as a file people would write.
                let written = match value.as_str() {
                    "true" | "false" => value.clone(),
                    number if number.parse::<i64>().is_ok() => value.clone(),
                    text => toml::Value::String(text.to_owned()).to_string(),
                };
                out.push_str(&format!("{} = {written}  # {}\n", setting.key, setting.source));
            }
            None => out.push_str(&format!("# {} is not set\n", setting.key)),
        }
    }
    for upstream in file.map(ConfigFile::gateway_upstreams).unwrap_or_default() {
        let text = |value: &str| toml::Value::String(value.to_owned()).to_string();
        out.push_str("\n[[gateway.upstreams]]  # file\n");
        out.push_str(&format!(
            "workspace = {}\nname = {}\ncommand = {}\n",
            text(&upstream.workspace),
            text(&upstream.name),
            text(&upstream.command)
        ));
        let args: Vec<String> = upstream.args.iter().map(|arg| text(arg)).collect();
        out.push_str(&format!("args = [{}]\n", args.join(", ")));
        // The variables' values are often credentials.
        let env: Vec<String> = upstream.env.keys().map(|name| format!("{} = {}", text(name), text(REDACTED))).collect();
        out.push_str(&format!("env = {{ {} }}\n", env.join(", ")));
        if let Some(cwd) = &upstream.cwd {
            out.push_str(&format!("cwd = {}\n", text(&cwd.display().to_string())));
        }
    }
    out
}

/// Secrets are the flags whose environment values clap hides, and a database URL (it may carry a password).
fn is_secret(arg: &Arg) -> bool {
    arg.is_hide_env_values_set() || arg.get_long() == Some("database-url")
}

/// Every key the file may set: the flags of `command` and of its subcommands.
fn keys_of(command: &Command) -> BTreeSet<String> {
    let mut keys: BTreeSet<String> = command
        .get_arguments()
        .filter(|arg| arg.get_id() != FLAG)
        .filter_map(|arg| arg.get_long().map(normalize))
        .collect();
    for sub in command.get_subcommands() {
        keys.extend(keys_of(sub));
    }
    keys
}

/// The known key nearest to a misspelt one, when it is near enough to be what was meant.
fn closest<'a>(key: &str, known: &'a BTreeSet<String>) -> Option<&'a String> {
    known
        .iter()
        .map(|candidate| (strsim_distance(key, candidate), candidate))
        .filter(|(distance, _)| *distance <= 3)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// Levenshtein distance over characters (keys are short).
fn strsim_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let current = row[j + 1];
            row[j + 1] = if ca == *cb { previous } else { 1 + previous.min(row[j]).min(current) };
            previous = current;
        }
    }
    row[b.len()]
}

fn normalize(key: &str) -> String {
    key.replace('-', "_")
}

/// A value as a flag would take it: strings as they are, numbers and booleans written out, arrays joined by `,`.
fn scalar(path: &Path, key: &str, value: toml::Value) -> Result<String, ConfigFileError> {
    let fail =
        |message: &str| ConfigFileError::Value { path: path.to_owned(), key: key.to_owned(), message: message.into() };
    match value {
        toml::Value::String(text) => Ok(text),
        toml::Value::Integer(number) => Ok(number.to_string()),
        toml::Value::Float(number) => Ok(number.to_string()),
        toml::Value::Boolean(flag) => Ok(flag.to_string()),
        toml::Value::Array(items) => items
            .into_iter()
            .map(|item| match item {
                toml::Value::String(text) if !text.contains(',') => Ok(text),
                toml::Value::String(_) => Err(fail("a list's items cannot contain ','")),
                toml::Value::Integer(number) => Ok(number.to_string()),
                _ => Err(fail("a list holds strings or numbers")),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|items| items.join(",")),
        toml::Value::Datetime(_) => Err(fail("expected a string, a number, a boolean or a list, not a date")),
        toml::Value::Table(_) => Err(fail("tables nest one level deep: [group] then key = value")),
    }
}

/// `--config FILE` or `--config=FILE` before a `--` in `args` (the program name first).
fn named_on_command_line(args: &[OsString]) -> Option<PathBuf> {
    let flag = format!("--{FLAG}");
    let with_value = format!("--{FLAG}=");
    let mut words = args.iter().skip(1);
    while let Some(word) = words.next() {
        let text = word.to_string_lossy();
        if text == "--" {
            return None;
        }
        if text == flag {
            return words.next().map(PathBuf::from);
        }
        if let Some(path) = text.strip_prefix(&with_value) {
            return Some(PathBuf::from(path));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> Result<ConfigFile, ConfigFileError> {
        ConfigFile::parse(Path::new("holdpoint.toml"), text)
    }

    fn demo_command() -> Command {
        Command::new("holdpoint")
            .arg(Arg::new(FLAG).long(FLAG).global(true))
            .subcommand(
                Command::new("serve")
                    .arg(
                        Arg::new("addr")
                            .long("addr")
                            .default_value("127.0.0.1:3000")
                            .value_parser(clap::value_parser!(std::net::SocketAddr)),
                    )
                    .arg(Arg::new("data_dir").long("data-dir").default_value("./data"))
                    .arg(Arg::new("secure").long("secure-cookies").action(clap::ArgAction::SetTrue))
                    .arg(Arg::new("token").long("bootstrap-token").hide_env_values(true).env("DEMO_UNSET_TOKEN"))
                    .arg(Arg::new("hosts").long("allowed-hosts").value_delimiter(','))
                    .arg(Arg::new("issuer").long("oidc-issuer")),
            )
            .subcommand(Command::new("token").arg(Arg::new("data_dir").long("data-dir").default_value("./data")))
    }

    #[test]
    fn a_tables_keys_are_prefixed_with_its_name_and_dashes_read_as_underscores() {
        let file = file("data-dir = \"/srv\"\n[oidc]\nissuer = \"https://id.example\"\n").unwrap();
        assert!(file.sets("data_dir"));
        assert!(file.sets("oidc_issuer"));
    }

    #[test]
    fn the_files_values_are_the_defaults_of_every_command_that_has_the_flag() {
        let file = file("addr = \"0.0.0.0:8080\"\ndata_dir = \"/srv/hp\"\nsecure_cookies = true\n").unwrap();
        let command = file.apply(demo_command()).unwrap();
        let matches = command.clone().try_get_matches_from(["holdpoint", "serve"]).unwrap();
        let serve = matches.subcommand_matches("serve").unwrap();
        assert_eq!(serve.get_one::<std::net::SocketAddr>("addr").unwrap().to_string(), "0.0.0.0:8080");
        assert!(serve.get_flag("secure"));
        let matches = command.try_get_matches_from(["holdpoint", "token"]).unwrap();
        assert_eq!(matches.subcommand_matches("token").unwrap().get_one::<String>("data_dir").unwrap(), "/srv/hp");
    }

    #[test]
    fn a_flag_on_the_command_line_wins_over_the_file() {
        let command = file("data_dir = \"/srv/hp\"\n").unwrap().apply(demo_command()).unwrap();
        let matches = command.try_get_matches_from(["holdpoint", "serve", "--data-dir", "/tmp/x"]).unwrap();
        let serve = matches.subcommand_matches("serve").unwrap();
        assert_eq!(serve.get_one::<String>("data_dir").unwrap(), "/tmp/x");
        assert_eq!(serve.value_source("data_dir"), Some(ValueSource::CommandLine));
    }

    #[test]
    fn an_unknown_key_is_named_with_the_nearest_known_one() {
        let error = file("adr = \"0.0.0.0:1\"\n").unwrap().apply(demo_command()).unwrap_err().to_string();
        assert!(error.contains("no setting `adr`"), "{error}");
        assert!(error.contains("did you mean `addr`"), "{error}");
    }

    #[test]
    fn a_wrong_value_is_named_with_its_key_and_the_parsers_reason() {
        let error = file("addr = \"nowhere\"\n").unwrap().apply(demo_command()).unwrap_err().to_string();
        assert!(error.contains("`addr`"), "{error}");
        assert!(error.contains("nowhere"), "{error}");
        let error = file("secure_cookies = \"maybe\"\n").unwrap().apply(demo_command()).unwrap_err().to_string();
        assert!(error.contains("`secure_cookies`: expected true or false"), "{error}");
        let error = file("addr = 2026-11-28\n").unwrap_err().to_string();
        assert!(error.contains("not a date"), "{error}");
        assert!(matches!(file("addr = ").unwrap_err(), ConfigFileError::Syntax { .. }));
    }

    #[test]
    fn lists_become_the_flags_delimited_values() {
        let command = file("allowed_hosts = [\"a.example\", \"b.example\"]\n").unwrap().apply(demo_command()).unwrap();
        let matches = command.try_get_matches_from(["holdpoint", "serve"]).unwrap();
        let hosts: Vec<&String> = matches.subcommand_matches("serve").unwrap().get_many("hosts").unwrap().collect();
        assert_eq!(hosts, ["a.example", "b.example"]);
    }

    #[test]
    fn the_effective_settings_say_where_each_came_from_and_hide_secrets() {
        let file = file("addr = \"0.0.0.0:8080\"\nbootstrap_token = \"hp_secret_value\"\n").unwrap();
        let command = file.apply(demo_command()).unwrap();
        let matches = command.clone().try_get_matches_from(["holdpoint", "serve", "--data-dir", "/d"]).unwrap();
        let serve_command = command.find_subcommand("serve").unwrap();
        let settings = effective(serve_command, matches.subcommand_matches("serve").unwrap(), Some(&file));
        let by_key: BTreeMap<&str, &Effective> = settings.iter().map(|s| (s.key.as_str(), s)).collect();
        assert_eq!(by_key["addr"].source, "file");
        assert_eq!(by_key["data_dir"].source, "command line");
        assert_eq!(by_key["bootstrap_token"].value.as_deref(), Some(REDACTED));
        assert_eq!(by_key["oidc_issuer"].value, None);
        let text = render(&settings, Some(&file));
        assert!(!text.contains("hp_secret_value"), "{text}");
        assert!(text.contains("addr = \"0.0.0.0:8080\"  # file"), "{text}");
        assert!(text.contains("secure_cookies = false  # default"), "{text}");
    }

    #[test]
    fn gateway_upstreams_are_read_apart_from_the_flags_and_shown_without_their_variables_values() {
        let text = "addr = \"0.0.0.0:8080\"\n[[gateway.upstreams]]\nname = \"files\"\ncommand = \"mcp-files\"\n\
                    args = [\"--root\", \"/srv\"]\nenv = { API_KEY = \"k-123\" }\n";
        let file = file(text).unwrap();
        assert_eq!(file.gateway_upstreams().len(), 1);
        assert_eq!(file.gateway_upstreams()[0].args, ["--root", "/srv"]);
        let command = file.apply(demo_command()).unwrap();
        let matches = command.clone().try_get_matches_from(["holdpoint", "serve"]).unwrap();
        let serve = command.find_subcommand("serve").unwrap();
        let settings = effective(serve, matches.subcommand_matches("serve").unwrap(), Some(&file));
        let shown = render(&settings, Some(&file));
        assert!(shown.contains("[[gateway.upstreams]]") && shown.contains("name = \"files\""), "{shown}");
        assert!(shown.contains("API_KEY") && !shown.contains("k-123"), "{shown}");
        let error = ConfigFile::parse(Path::new("holdpoint.toml"), "[[gateway.upstreams]]\nname = \"x\"\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("`gateway.upstreams[0]`") && error.contains("command"), "{error}");
        let text = "[[gateway.upstreams]]\nname = \"x\"\ncommand = \"y\"\nargs = [\"--root\", 5]\n";
        let error = ConfigFile::parse(Path::new("holdpoint.toml"), text).unwrap_err().to_string();
        assert!(error.contains("`gateway.upstreams[0].args[1]`") && error.contains("integer"), "{error}");
    }

    #[test]
    fn the_file_is_named_by_the_flag_in_either_spelling_and_never_after_a_double_dash() {
        let args = |words: &[&str]| words.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(named_on_command_line(&args(&["hp", "serve", "--config", "a.toml"])), Some("a.toml".into()));
        assert_eq!(named_on_command_line(&args(&["hp", "--config=b.toml", "serve"])), Some("b.toml".into()));
        assert_eq!(named_on_command_line(&args(&["hp", "ask", "--", "--config", "c"])), None);
    }
}
