//! Rich fields (docs/api.md): what a value of a type beyond text, choices and yes/no must keep to — bounds of numbers
//! and ratings, how many choices, a table's columns and rows, a file's media types and size — carried by a form field
//! and, for a question that asks for one value, by the question itself, with the same names in both places.

use serde::{Deserialize, Serialize};
use serde_json::Number;

use crate::{QuestionOption, ResponseType, UnknownVariant};

/// The most fields a form may have.
pub const FORM_FIELDS_MAX: usize = 30;
/// The most rows a table may be given (and the most its `max_rows` may allow).
pub const TABLE_ROWS_MAX: u32 = 200;
/// The most columns a table may have.
pub const TABLE_COLUMNS_MAX: usize = 20;
/// The longest `markdown` (or `text`) value.
pub const MARKDOWN_MAX_CHARS: usize = 10_000;
/// The bounds of a rating's `max`, and the `max` a rating has when it names none.
pub const RATING_MAX_RANGE: std::ops::RangeInclusive<u32> = 3..=10;
pub const RATING_DEFAULT_MAX: u32 = 5;

wire_enum! {
    /// How a bounded number is entered.
    FieldWidget {
        /// A slider from `min` to `max` (both must be set).
        Slider = "slider",
    }
}

/// The response types a table's column may have.
pub const TABLE_COLUMN_TYPES: [ResponseType; 6] = [
    ResponseType::Text,
    ResponseType::Number,
    ResponseType::Integer,
    ResponseType::Boolean,
    ResponseType::Date,
    ResponseType::Choice,
];

/// One column of a `table`: each row of the answer is an object with a value of `response_type` under `key`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct TableColumn {
    /// The key of this column in each row object.
    pub key: String,
    /// What a person reads at the top of the column.
    pub label: String,
    /// `text`, `number`, `integer`, `boolean`, `date` or `choice`.
    pub response_type: ResponseType,
    /// The choices of a `choice` column, 2..=20.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<QuestionOption>,
    /// Whether every row must have a value in this column.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
    /// What else the definition named, which is no attribute of it: refused by name, as a misspelt bound
    /// (`minimum` for `min`) would otherwise be dropped and the value never held to it.
    #[serde(flatten, skip_serializing_if = "serde_json::Map::is_empty")]
    #[cfg_attr(feature = "server", schema(ignore))]
    pub unknown: serde_json::Map<String, serde_json::Value>,
}

impl TableColumn {
    /// A column with only its key, label and type: optional, without choices.
    pub fn new(key: impl Into<String>, label: impl Into<String>, response_type: ResponseType) -> Self {
        TableColumn {
            key: key.into(),
            label: label.into(),
            response_type,
            options: Vec::new(),
            required: false,
            unknown: serde_json::Map::new(),
        }
    }
}

/// What a value of a field (or of a single-value question) must keep to besides its type. Each attribute belongs to
/// some types only, and a definition that gives one to another type is refused (422 naming it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct FieldRules {
    /// The least value of an `integer` or `number`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(value_type = Option<f64>))]
    pub min: Option<Number>,
    /// The greatest value of an `integer` or `number`; a `rating`'s number of stars (3..=10, default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(value_type = Option<f64>))]
    pub max: Option<Number>,
    /// The increment of an `integer` or `number`, from `min` (or 0): a value must be a whole number of steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(value_type = Option<f64>))]
    pub step: Option<Number>,
    /// `slider`, for an `integer` or `number` with both `min` and `max`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub widget: Option<FieldWidget>,
    /// The fewest choices of a `multi_choice`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_items: Option<u32>,
    /// The most choices of a `multi_choice`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_items: Option<u32>,
    /// A `table`'s columns, 1..=20.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<TableColumn>,
    /// The fewest rows of a `table` (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_rows: Option<u32>,
    /// The most rows of a `table` (at most and by default 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(maximum = 200))]
    pub max_rows: Option<u32>,
    /// The media types a `file` may have (`application/pdf`, or `image/*` for every image); any when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accept: Vec<String>,
    /// The largest `file`, in bytes (at most the server's `HOLDPOINT_MAX_UPLOAD_BYTES`, its limit when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
}

impl FieldRules {
    /// Whether no attribute is set (a question of a plain type stores none).
    pub fn is_empty(&self) -> bool {
        *self == FieldRules::default()
    }

    /// A rating's number of stars.
    /// `max` may be written `10.0` (as JSON from many languages' floats): the checks take a whole number however it
    /// is written, and so does the count of stars.
    pub fn rating_max(&self) -> u32 {
        let whole = |max: &Number| {
            max.as_u64().or_else(|| max.as_f64().filter(|m| m.fract() == 0.0 && *m >= 0.0).map(|m| m as u64))
        };
        self.max.as_ref().and_then(whole).map_or(RATING_DEFAULT_MAX, |max| max.min(u64::from(u32::MAX)) as u32)
    }
}

impl ResponseType {
    /// Whether a form field may have this type.
    pub fn is_field_type(self) -> bool {
        !matches!(self, ResponseType::Approval | ResponseType::ErrorRecovery | ResponseType::Form)
    }

    /// Whether a value of this type is a string a person types (or picks from a native date or time input).
    pub fn is_string_input(self) -> bool {
        matches!(
            self,
            ResponseType::Text
                | ResponseType::Markdown
                | ResponseType::Email
                | ResponseType::Url
                | ResponseType::Date
                | ResponseType::Datetime
                | ResponseType::Time
        )
    }

    /// Whether a value of this type is a number.
    pub fn is_numeric(self) -> bool {
        matches!(self, ResponseType::Number | ResponseType::Integer | ResponseType::Rating)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_with_nothing_set_are_empty_and_serialize_to_nothing() {
        assert!(FieldRules::default().is_empty());
        assert_eq!(serde_json::to_value(FieldRules::default()).unwrap(), serde_json::json!({}));
        let rules: FieldRules = serde_json::from_value(serde_json::json!({"min": 1, "max": 2.5})).unwrap();
        assert_eq!(serde_json::to_value(&rules).unwrap(), serde_json::json!({"min": 1, "max": 2.5}), "kept as given");
    }

    #[test]
    fn a_rating_has_five_stars_unless_it_says_otherwise() {
        assert_eq!(FieldRules::default().rating_max(), 5);
        let rules = FieldRules { max: Some(10.into()), ..Default::default() };
        assert_eq!(rules.rating_max(), 10);
        // As a Python or JavaScript client may send it; the server's checks accept it as 10.
        let written_as_float: FieldRules = serde_json::from_value(serde_json::json!({"max": 10.0})).unwrap();
        assert_eq!(written_as_float.rating_max(), 10);
    }
}
