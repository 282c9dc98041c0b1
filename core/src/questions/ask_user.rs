//! The arguments of `ask_user`, the tool that asks a person: the same for MCP clients (`/mcp`) and for the models
//! Holdpoint's own agents run (the runtime's built-in tool), so both take the same rich fields (docs/api.md), or a
//! `response_schema`, and describe them to the caller with one JSON Schema, generated from these types.
//!
//! They are the `POST /questions` body with the spellings a model or an MCP client finds easiest (an option may be a
//! plain string); [`AskUserArgs::into_new_question`] hands MCP's on to the same checks as REST, and the runtime reads
//! a model's arguments as a `POST /questions` body once [`plain_options_as_objects`] has spelled its options out.

use holdpoint_types::{NewQuestion, QuestionOption};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The kinds of question `ask_user` asks (approvals go through `request_approval`).
#[derive(Debug, Clone, Copy, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AskKind {
    /// The agent needs the answer to go on (the default).
    Blocking,
    /// A preference: the call returns at once with status `pending`; the answer may come later (over MCP,
    /// `get_question` reads it).
    NonBlocking,
    /// The agent hit an error and asks how to go on: `retry`, `skip`, `abort` or an option.
    ErrorRecovery,
}

/// How a question is answered.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AskResponseType {
    Text,
    Boolean,
    Choice,
    MultiChoice,
    ErrorRecovery,
    Form,
    Number,
    Integer,
    /// `YYYY-MM-DD`.
    Date,
    /// RFC 3339 with an offset.
    Datetime,
    /// `HH:MM`.
    Time,
    /// 1..=`max` stars (`max` 3..=10, default 5).
    Rating,
    Email,
    /// An absolute http or https URL.
    Url,
    Markdown,
    /// An array of row objects; needs `columns`.
    Table,
    /// A file a person uploads (`accept`, `max_bytes`); the outcome carries its bytes (see the tool's description).
    File,
}

/// How a form field is answered.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FieldResponseType {
    Text,
    Boolean,
    Choice,
    MultiChoice,
    Number,
    Integer,
    Date,
    Datetime,
    Time,
    Rating,
    Email,
    Url,
    Markdown,
    Table,
    File,
}

/// How a table's column is answered.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ColumnResponseType {
    Text,
    Number,
    Integer,
    Boolean,
    Date,
    Choice,
}

/// One column of a table.
#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct ColumnArg {
    /// The column's key in each row object.
    pub key: String,
    pub label: String,
    pub response_type: ColumnResponseType,
    /// For `choice` columns, 2..=20.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<OptionArg>,
    #[serde(default)]
    pub required: bool,
}

/// The bounds of a field's (or a single-value question's) type, as `POST /questions` names them.
#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
pub struct RulesArg {
    /// The least value of an integer or number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<f64>")]
    pub min: Option<serde_json::Number>,
    /// The greatest value of an integer or number; a rating's stars (3..=10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<f64>")]
    pub max: Option<serde_json::Number>,
    /// The increment of an integer or number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<f64>")]
    pub step: Option<serde_json::Number>,
    /// `slider`, for an integer or number with min and max.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub widget: Option<WidgetArg>,
    /// The fewest choices of a multi_choice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_items: Option<u32>,
    /// The most choices of a multi_choice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_items: Option<u32>,
    /// A table's columns, 1..=20.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<ColumnArg>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_rows: Option<u32>,
    /// At most 200.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rows: Option<u32>,
    /// The media types a file may have (`application/pdf`, `image/*`); any when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accept: Vec<String>,
    /// The largest file, in bytes (at most, and by default, the server's upload limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WidgetArg {
    Slider,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AskUrgency {
    Low,
    Normal,
    High,
    Critical,
}

/// One choice of a `choice`, `multi_choice` or `error_recovery` question or form field: a plain string, which is its
/// own value and label (as the Python and TypeScript libraries take options), or an object.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum OptionArg {
    /// The option's value, which is also what a person reads.
    Plain(String),
    /// An option whose label differs from its value.
    Labelled {
        /// What the answer carries; unique within the question.
        value: String,
        /// What a person reads.
        label: String,
        #[serde(default)]
        description: Option<String>,
    },
}

impl Serialize for OptionArg {
    /// Always as the object of `POST /questions`, whichever spelling the caller used: `ask_user` hands its
    /// arguments on to the same checks as REST.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let option = match self.clone() {
            OptionArg::Plain(value) => QuestionOption { label: value.clone(), value, description: None },
            OptionArg::Labelled { value, label, description } => QuestionOption { value, label, description },
        };
        option.serialize(serializer)
    }
}

/// One field of a form.
#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct FieldArg {
    /// The field's key in the answer object.
    pub key: String,
    pub label: String,
    pub response_type: FieldResponseType,
    /// For `choice` and `multi_choice` fields, 2..=20.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<OptionArg>,
    #[serde(default)]
    pub required: bool,
    /// Help shown under the label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<String>,
    /// What the input starts with; must fit the field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    #[serde(flatten)]
    pub rules: RulesArg,
}

/// The arguments of `ask_user`: the `POST /questions` body.
#[derive(Debug, Deserialize, Serialize, schemars::JsonSchema)]
pub struct AskUserArgs {
    /// The question, 1..=300 characters.
    pub title: String,
    /// Details, in Markdown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<AskKind>,
    /// `text` by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_type: Option<AskResponseType>,
    /// For choices, 2..=20 with unique values: plain strings or `{"value", "label", "description"?}`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<OptionArg>,
    /// For forms, 1..=30 fields.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<FieldArg>,
    /// Instead of `fields`: a JSON Schema object as MCP elicitation's `requestedSchema` (properties of type string
    /// with minLength, maxLength, pattern and format email, uri, date or date-time; number and integer with minimum
    /// and maximum; boolean; enum or oneOf of {const, title}; arrays of those with minItems and maxItems; required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Map<String, Value>>")]
    pub response_schema: Option<Value>,
    /// A single-value question's bounds (`min`, `max`, `columns`, ...), as a field's.
    #[serde(flatten)]
    pub rules: RulesArg,
    /// A free label for grouping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub urgency: Option<AskUrgency>,
    /// How long a person has, in seconds (5 min ..= 24 h by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i64>,
    /// Applied when the deadline passes: `{"value": ..., "comment"?: ...}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_response: Option<Value>,
    /// A JSON object shown with the question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
}

impl AskUserArgs {
    /// The question these arguments ask, as `POST /questions` takes it.
    pub fn into_new_question(self) -> Result<NewQuestion, serde_json::Error> {
        serde_json::to_value(&self).and_then(serde_json::from_value)
    }

    /// The JSON Schema of the arguments, every definition written in place (no `$ref`), as the Chat Completions
    /// API's function `parameters` is best given to every model behind it.
    pub fn parameters_schema() -> Value {
        schemars::generate::SchemaSettings::draft2020_12()
            .with(|settings| settings.inline_subschemas = true)
            .into_generator()
            .into_root_schema_for::<AskUserArgs>()
            .to_value()
    }
}

/// `args` (a question's JSON) with every option given as a plain string — the question's, its fields', their
/// columns' — written as the `{"value", "label"}` object `POST /questions` takes; anything else is left as it is, for
/// the question's own checks to judge.
pub fn plain_options_as_objects(mut args: Value) -> Value {
    fn options(object: &mut Value) {
        if let Some(Value::Array(options)) = object.get_mut("options") {
            for option in options.iter_mut() {
                if let Value::String(value) = option {
                    *option = serde_json::json!({"value": value, "label": value});
                }
            }
        }
    }
    options(&mut args);
    for list in ["fields", "columns"] {
        if let Some(Value::Array(items)) = args.get_mut(list) {
            for item in items.iter_mut() {
                options(item);
                if let Some(Value::Array(columns)) = item.get_mut("columns") {
                    columns.iter_mut().for_each(options);
                }
            }
        }
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn options_may_be_plain_strings_and_become_the_objects_of_post_questions() {
        let args: AskUserArgs = serde_json::from_value(json!({
            "title": "Region?", "response_type": "choice",
            "options": ["eu", {"value": "us", "label": "United States"}]
        }))
        .unwrap();
        let question = args.into_new_question().unwrap();
        assert_eq!(question.options[0], QuestionOption { value: "eu".into(), label: "eu".into(), description: None });
        assert_eq!(question.options[1].label, "United States");
    }

    #[test]
    fn a_file_is_asked_for_with_the_media_types_and_size_it_may_have() {
        let args: AskUserArgs = serde_json::from_value(json!({
            "title": "The incident report?", "response_type": "form",
            "fields": [{ "key": "report", "label": "Report", "response_type": "file", "required": true,
                         "accept": ["application/pdf", "text/*"], "max_bytes": 200000 }]
        }))
        .unwrap();
        let question = args.into_new_question().unwrap();
        let field = &question.fields[0];
        assert_eq!(field.response_type, holdpoint_types::ResponseType::File);
        assert_eq!(field.rules.accept, ["application/pdf", "text/*"]);
        assert_eq!(field.rules.max_bytes, Some(200_000));
        let single: AskUserArgs =
            serde_json::from_value(json!({ "title": "A photo?", "response_type": "file", "accept": ["image/*"] }))
                .unwrap();
        let question = single.into_new_question().unwrap();
        assert_eq!(question.response_type, Some(holdpoint_types::ResponseType::File));
        assert_eq!(question.rules.accept, ["image/*"]);
    }

    #[test]
    fn plain_string_options_become_objects_wherever_they_are() {
        let args = json!({"title": "t", "options": ["a", {"value": "b", "label": "B"}],
            "fields": [{"key": "k", "options": ["x"], "columns": [{"key": "c", "options": ["y", 3]}]}],
            "columns": [{"key": "d", "options": ["z"]}]});
        assert_eq!(
            plain_options_as_objects(args),
            json!({"title": "t", "options": [{"value": "a", "label": "a"}, {"value": "b", "label": "B"}],
                "fields": [{"key": "k", "options": [{"value": "x", "label": "x"}],
                            "columns": [{"key": "c", "options": [{"value": "y", "label": "y"}, 3]}]}],
                "columns": [{"key": "d", "options": [{"value": "z", "label": "z"}]}]})
        );
    }

    #[test]
    fn the_schema_names_every_rich_type_and_the_response_schema_without_references() {
        let schema = AskUserArgs::parameters_schema();
        let text = schema.to_string();
        assert!(!text.contains("$ref"), "{text}");
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], json!(["title"]));
        let field_types = schema["properties"]["fields"]["items"]["properties"]["response_type"].to_string();
        for kind in ["integer", "date", "datetime", "time", "rating", "email", "url", "markdown", "table", "file"] {
            assert!(field_types.contains(&format!("\"{kind}\"")), "{kind}: {field_types}");
        }
        assert!(schema["properties"]["response_schema"].is_object(), "{text}");
        for bound in
            ["min", "max", "step", "columns", "min_rows", "max_rows", "min_items", "max_items", "accept", "max_bytes"]
        {
            assert!(schema["properties"][bound].is_object(), "{bound}: {text}");
        }
    }
}
