//! The error body every failing endpoint returns.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The error body every failing endpoint returns: `{"error": {"code", "message", "details"}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// The inside of [`ErrorBody`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct ErrorDetail {
    /// A stable machine code: `bad_request`, `unauthorized`, `forbidden`, `not_found`, `conflict`, `gone`,
    /// `too_large`, `invalid`, `rate_limited`, `internal`.
    pub code: String,
    /// A sentence for people.
    pub message: String,
    /// Structured detail, e.g. field-level validation errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}
