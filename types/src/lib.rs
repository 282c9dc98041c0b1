//! Wire types shared by the browser, the server and the CLI.
//!
//! These are the JSON shapes of the HTTP API (docs/api.md). They compile for `wasm32` as well as for the server, so
//! nothing here may touch the database or the file system; rows stay server-side.

use serde::{Deserialize, Serialize};

/// Declares a string enum once, with its wire names, `as_str` and parsing.
macro_rules! wire_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $wire:literal),+ $(,)? }) => {
        $(#[$meta])*
        // Every wire name is the variant's name in snake_case (checked by a unit test), which serde and the
        // OpenAPI schema derive both understand.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
        #[serde(rename_all = "snake_case")]
        pub enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The wire name, as stored in the database and sent in JSON.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $wire),+ }
            }
        }

        impl std::str::FromStr for $name {
            type Err = UnknownVariant;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($wire => Ok($name::$variant),)+
                    _ => Err(UnknownVariant { type_name: stringify!($name), value: s.to_owned() }),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        // Stored as its wire name in a text column, exactly as a `&str` is: the same type, the same bytes.
        #[cfg(feature = "server")]
        impl<DB: sqlx::Database> sqlx::Type<DB> for $name
        where
            str: sqlx::Type<DB>,
        {
            fn type_info() -> DB::TypeInfo {
                <str as sqlx::Type<DB>>::type_info()
            }

            fn compatible(ty: &DB::TypeInfo) -> bool {
                <str as sqlx::Type<DB>>::compatible(ty)
            }
        }

        #[cfg(feature = "server")]
        impl<'q, DB: sqlx::Database> sqlx::Encode<'q, DB> for $name
        where
            &'q str: sqlx::Encode<'q, DB>,
        {
            fn encode_by_ref(
                &self,
                buf: &mut <DB as sqlx::Database>::ArgumentBuffer<'q>,
            ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
                <&'q str as sqlx::Encode<'q, DB>>::encode(self.as_str(), buf)
            }
        }

        #[cfg(feature = "server")]
        impl<'r, DB: sqlx::Database> sqlx::Decode<'r, DB> for $name
        where
            &'r str: sqlx::Decode<'r, DB>,
        {
            fn decode(value: <DB as sqlx::Database>::ValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
                Ok(<&'r str as sqlx::Decode<'r, DB>>::decode(value)?.parse()?)
            }
        }
    };
}

/// A string that names no variant of a wire enum.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not a valid {type_name}")]
pub struct UnknownVariant {
    /// The Rust type that was asked for.
    pub type_name: &'static str,
    /// What was given instead.
    pub value: String,
}

mod answers;
mod audit;
mod errors;
mod escalation;
mod events;
mod fields;
mod files;
mod grants;
pub mod markdown;
mod notifications;
mod people;
mod questions;
mod rules;
mod runs;
pub mod time;
mod upstreams;
mod webhooks;
pub use answers::*;
pub use audit::*;
pub use errors::*;
pub use escalation::*;
pub use events::*;
pub use fields::*;
pub use files::*;
pub use grants::*;
pub use notifications::*;
pub use people::*;
pub use questions::*;
pub use rules::*;
pub use runs::*;
pub use upstreams::*;
pub use webhooks::*;

/// A page of a cursor-paginated list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Pass as `cursor` to get the next page; `null` on the last one.
    pub next_cursor: Option<String>,
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn every_wire_name_is_what_serde_writes() {
        fn check<T: Serialize + std::fmt::Display>(values: &[T]) {
            for value in values {
                assert_eq!(serde_json::to_value(value).unwrap(), Value::String(value.to_string()));
            }
        }
        check(Role::ALL);
        check(QuestionKind::ALL);
        check(ResponseType::ALL);
        check(Urgency::ALL);
        check(QuestionStatus::ALL);
        check(Resolution::ALL);
        check(EventType::ALL);
        check(ActorKind::ALL);
        check(MinUrgency::ALL);
        check(FieldWidget::ALL);
    }

    #[test]
    fn wire_enums_round_trip_through_their_names() {
        for kind in QuestionKind::ALL {
            assert_eq!(kind.as_str().parse::<QuestionKind>().unwrap(), *kind);
            assert_eq!(serde_json::to_value(kind).unwrap(), Value::String(kind.as_str().into()));
        }
        assert!("sometimes".parse::<QuestionKind>().is_err());
    }
}
