//! How the browser reads JSON: always from bytes.
//!
//! serde_json compiles a deserializer per type and per kind of input. Server functions' responses are decoded from
//! bytes (`from_slice`); Leptos' default codec for the data a server render hands to hydration, and a plain
//! `from_str`, read from a `&str`: every type the pages read was in the wasm twice, once per reader (about 100 KB
//! of code before compression). Reading everything from bytes keeps one copy.

use leptos::prelude::*;
use leptos::server::codee::{Decoder, Encoder};
use serde::{Serialize, de::DeserializeOwned};

/// JSON for resources, decoded from the bytes of the text (see the module's documentation).
#[derive(Debug)]
pub struct Json;

impl<T: Serialize> Encoder<T> for Json {
    type Error = serde_json::Error;
    type Encoded = String;

    fn encode(value: &T) -> Result<String, serde_json::Error> {
        serde_json::to_string(value)
    }
}

impl<T: DeserializeOwned> Decoder<T> for Json {
    type Error = serde_json::Error;
    type Encoded = str;

    fn decode(text: &str) -> Result<T, serde_json::Error> {
        from_json(text)
    }
}

/// Parses JSON text as the rest of the browser's code does (from bytes).
pub fn from_json<T: DeserializeOwned>(text: &str) -> Result<T, serde_json::Error> {
    serde_json::from_slice(text.as_bytes())
}

/// `Resource::new` with the [`Json`] codec: loaded on the server during the render, handed to the browser with
/// the page.
#[track_caller]
pub fn resource<T, S, Fut>(
    source: impl Fn() -> S + Send + Sync + 'static,
    fetcher: impl Fn(S) -> Fut + Send + Sync + 'static,
) -> Resource<T, Json>
where
    T: Serialize + DeserializeOwned + Send + Sync + 'static,
    S: PartialEq + Clone + Send + Sync + 'static,
    Fut: Future<Output = T> + Send + 'static,
{
    Resource::new_with_options(source, fetcher, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Question, QuestionStatus};

    #[test]
    fn a_resource_value_decodes_to_what_was_encoded() {
        let question = crate::types::sample_question("Deploy “1.4”?\n", QuestionStatus::Pending);
        let encoded = <Json as Encoder<Question>>::encode(&question).unwrap();
        let decoded: Question = <Json as Decoder<Question>>::decode(&encoded).unwrap();
        assert_eq!(decoded, question);
    }

    #[test]
    fn text_that_is_not_the_type_is_an_error() {
        assert!(from_json::<Question>("{\"title\": 1}").is_err());
        assert!(from_json::<u32>("").is_err());
        assert_eq!(from_json::<Option<u32>>("null").unwrap(), None);
    }
}
