//! Checking what a caller sent: the faults found in a request's fields, and the limits several use cases hold the
//! same kind of field to.

use std::collections::BTreeMap;

use crate::error::AppError;

/// The longest comment a person may leave with an answer or a decision.
pub const COMMENT_MAX_CHARS: usize = 10_000;
/// The longest project name a question or a run may carry.
pub const PROJECT_MAX_CHARS: usize = 100;

/// Field-level validation errors, collected so a caller learns of all of them at once.
#[derive(Debug, Default)]
pub struct FieldErrors(BTreeMap<String, String>);

impl FieldErrors {
    pub fn add(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.entry(field.into()).or_insert_with(|| message.into());
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The fields named, in order.
    pub fn fields(&self) -> Vec<String> {
        self.0.keys().cloned().collect()
    }

    /// Adds `other`'s errors to these (a field named in both keeps its first message).
    pub fn merge(&mut self, other: FieldErrors) {
        for (field, message) in other.0 {
            self.add(field, message);
        }
    }

    /// Adds `other`'s errors on the fields these do not name, nor lie inside of (`rules[1].when` is inside
    /// `rules[1]`): what a later check found beside the faults already known.
    pub fn merge_beside(&mut self, other: FieldErrors) {
        let known = self.fields();
        for (field, message) in other.0 {
            let inside = |known: &String| {
                field.strip_prefix(known.as_str()).is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
            };
            if !known.iter().any(inside) {
                self.0.insert(field, message);
            }
        }
    }

    /// These errors with the fields at or inside `from` (`resume[0].value`, `resume[0].value.x`) named at `to`
    /// instead: a check named them as its own input, which the caller sent under another name.
    pub fn renamed(self, from: &str, to: &str) -> FieldErrors {
        let rename = |field: String| match field.strip_prefix(from) {
            Some(rest) if rest.is_empty() || rest.starts_with(['.', '[']) => format!("{to}{rest}"),
            _ => field,
        };
        FieldErrors(self.0.into_iter().map(|(field, message)| (rename(field), message)).collect())
    }

    /// `Ok` if nothing was wrong, else a 422 whose `details.fields` maps each field to what is wrong with it.
    pub fn into_result(self, what: &str) -> Result<(), AppError> {
        if self.0.is_empty() {
            return Ok(());
        }
        let summary = self.0.iter().map(|(field, message)| format!("{field}: {message}")).collect::<Vec<_>>();
        Err(AppError::Invalid {
            message: format!("{what} is not valid: {}", summary.join("; ")),
            details: Some(serde_json::json!({ "fields": self.0 })),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_beside_leaves_out_the_fields_inside_those_named_and_only_those() {
        let mut known = FieldErrors::default();
        known.add("rules[1]", "must be an object");
        known.add("rules[2].decision", "must be allow, ask or deny");
        let mut later = FieldErrors::default();
        for field in ["rules[1].name", "rules[1]", "rules[2].decision", "rules[10].name", "rules[2].when", "rules[2]"] {
            later.add(field, "later");
        }
        known.merge_beside(later);
        assert_eq!(
            known.fields(),
            ["rules[10].name", "rules[1]", "rules[2]", "rules[2].decision", "rules[2].when"],
            "rules[10] is not inside rules[1]; rules[2] itself is beside rules[2].decision"
        );
        assert_eq!(known.0["rules[2].decision"], "must be allow, ask or deny", "a known field keeps its message");
    }
}
