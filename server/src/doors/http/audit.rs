//! `/api/v1/audit`: the workspace's audit log, for admins. A page at a time (newest first), or all of it as an
//! export in chain order (JSONL or CSV), which an auditor can verify without the database.

use app::types::{ActorKind, AuditEntry, AuditFilter, Page, Role};
use axum::{
    body::Body,
    extract::{Query, State},
    http::header,
    response::{IntoResponse, Response},
};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::credentials::Caller;
use crate::doors::http::openapi::ErrorResponses;
use crate::error::{ApiJson, ApiResult, AppError};
use crate::state::AppState;
use crate::store::{AuditQuery, AuditRow};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_audit)).routes(routes!(export_audit))
}

const DEFAULT_PAGE_SIZE: u32 = 50;
const MAX_PAGE_SIZE: u32 = 200;
/// Rows an export reads at a time while it streams.
const EXPORT_PAGE: u32 = 500;

/// The filters both endpoints take. Empty values mean "any", as an HTML form sends them.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FilterQuery {
    /// An action, e.g. `question.answered`, `tool_call.decided`, `signin`, `token.created`.
    action: Option<String>,
    /// The actor's name, exactly.
    actor: Option<String>,
    /// `human`, `token`, `policy` or `timeout`.
    #[param(value_type = Option<ActorKind>)]
    actor_kind: Option<String>,
    /// The id of the question, tool call, run, token... the entry is about.
    subject_id: Option<String>,
    /// Entries at or after this time (RFC 3339).
    #[param(value_type = Option<String>, format = DateTime)]
    since: Option<String>,
    /// Entries before this time (RFC 3339).
    #[param(value_type = Option<String>, format = DateTime)]
    until: Option<String>,
}

fn non_empty(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

fn parse_time(value: Option<String>, name: &str) -> ApiResult<Option<DateTime<Utc>>> {
    non_empty(value)
        .map(|text| {
            DateTime::parse_from_rfc3339(&text).map(|t| t.with_timezone(&Utc)).map_err(|_| {
                AppError::BadRequest(format!("{name} must be an RFC 3339 time such as 2026-01-31T09:00:00Z"))
            })
        })
        .transpose()
}

impl FilterQuery {
    /// The store's filter; 400 for a kind or a time that does not parse.
    pub fn into_filter(self) -> ApiResult<AuditFilter> {
        let actor_kind = non_empty(self.actor_kind)
            .map(|kind| {
                kind.parse::<ActorKind>().map_err(|_| {
                    AppError::BadRequest(format!("actor_kind must be human, token, policy or timeout, not {kind:?}"))
                })
            })
            .transpose()?;
        Ok(AuditFilter {
            action: non_empty(self.action),
            actor: non_empty(self.actor),
            actor_kind,
            subject_id: non_empty(self.subject_id),
            since: parse_time(self.since, "since")?,
            until: parse_time(self.until, "until")?,
        })
    }
}

/// The page parameters of `GET /audit`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct PageQuery {
    /// 1..=200, default 50.
    #[param(minimum = 1, maximum = 200)]
    limit: Option<u32>,
    /// The `next_cursor` of the previous page.
    #[param(pattern = r"^(s\.-?[0-9]{1,18})?$")]
    cursor: Option<String>,
}

/// The export's format.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ExportQuery {
    /// `jsonl` (one entry per line, the default) or `csv`.
    #[param(pattern = "^(jsonl|csv)?$")]
    format: Option<String>,
}

/// Refuses with 403 unless the caller is an admin: the audit log shows everyone's decisions.
fn require_admin(caller: &Caller) -> ApiResult<()> {
    if caller.role() == Role::Admin {
        Ok(())
    } else {
        Err(AppError::Forbidden(format!(
            "only admins may read the audit log; this is {}",
            caller.role().with_article()
        )))
    }
}

fn query_of<T>(query: Result<Query<T>, axum::extract::rejection::QueryRejection>) -> ApiResult<T> {
    query.map(|Query(q)| q).map_err(|err| AppError::BadRequest(err.body_text()))
}

/// `GET /audit`: a page of the workspace's audit log, newest first.
#[utoipa::path(get, path = "/audit", tag = "audit", params(FilterQuery, PageQuery),
    responses((status = 200, description = "A page of audit entries, newest first", body = Page<AuditEntry>),
        ErrorResponses))]
#[tracing::instrument(skip_all, fields(workspace = %caller.principal.workspace))]
async fn list_audit(
    State(state): State<AppState>,
    caller: Caller,
    filter: Result<Query<FilterQuery>, axum::extract::rejection::QueryRejection>,
    page: Result<Query<PageQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<ApiJson<Page<AuditEntry>>> {
    require_admin(&caller)?;
    let filter = query_of(filter)?.into_filter()?;
    let page = query_of(page)?;
    let limit = page.limit.unwrap_or(DEFAULT_PAGE_SIZE);
    if !(1..=MAX_PAGE_SIZE).contains(&limit) {
        return Err(AppError::BadRequest(format!("limit must be within 1..={MAX_PAGE_SIZE}")));
    }
    let cursor_seq = match non_empty(page.cursor) {
        Some(cursor) => Some(
            cursor
                .strip_prefix("s.")
                .and_then(|seq| seq.parse::<i64>().ok())
                .ok_or_else(|| AppError::BadRequest("cursor is not one this list gave out".into()))?,
        ),
        None => None,
    };
    let query = AuditQuery { filter, ascending: false, cursor_seq, limit: limit + 1 };
    let mut rows = state.store.list_audit(caller.workspace_id(), &query).await?;
    let next_cursor = if rows.len() > limit as usize {
        rows.truncate(limit as usize);
        rows.last().map(|last| format!("s.{}", last.seq))
    } else {
        None
    };
    let items = rows.iter().map(|row| row.to_entry(&caller.principal.workspace)).collect::<Result<_, _>>()?;
    Ok(ApiJson(Page { items, next_cursor }))
}

/// `GET /audit/export?format=jsonl|csv`: every matching entry in chain order (oldest first), streamed as a file.
#[utoipa::path(get, path = "/audit/export", tag = "audit", params(FilterQuery, ExportQuery),
    responses((status = 200, description = "The matching entries, oldest first: JSON Lines (`format=jsonl`) or CSV \
        (`format=csv`), as an attachment",
        content((String = "application/x-ndjson"), (String = "text/csv"))),
        ErrorResponses))]
#[tracing::instrument(skip_all, fields(workspace = %caller.principal.workspace))]
async fn export_audit(
    State(state): State<AppState>,
    caller: Caller,
    filter: Result<Query<FilterQuery>, axum::extract::rejection::QueryRejection>,
    format: Result<Query<ExportQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    require_admin(&caller)?;
    let filter = query_of(filter)?.into_filter()?;
    let csv = match non_empty(query_of(format)?.format).as_deref() {
        None | Some("jsonl") => false,
        Some("csv") => true,
        Some(other) => return Err(AppError::BadRequest(format!("format must be jsonl or csv, not {other:?}"))),
    };
    let store = std::sync::Arc::clone(&state.store);
    let workspace_id = caller.workspace_id();
    let workspace = caller.principal.workspace.clone();
    // Pages are read as the client takes them, so an export of any size holds one page in memory.
    let body = async_stream::stream! {
        if csv {
            yield Ok::<_, std::io::Error>(format!("{}\r\n", CSV_COLUMNS.join(",")));
        }
        let mut cursor_seq = None;
        loop {
            let query = AuditQuery { filter: filter.clone(), ascending: true, cursor_seq, limit: EXPORT_PAGE };
            let rows = match store.list_audit(workspace_id, &query).await {
                Ok(rows) => rows,
                Err(err) => {
                    // The status line is sent; all that is left is to end the body short, which clients see.
                    tracing::error!(error = %err, "the audit export failed part-way");
                    yield Err(std::io::Error::other("the audit export failed"));
                    break;
                }
            };
            let full = rows.len() == EXPORT_PAGE as usize;
            cursor_seq = rows.last().map(|row| row.seq);
            let mut chunk = String::new();
            for row in &rows {
                match export_line(row, &workspace, csv) {
                    Ok(line) => chunk.push_str(&line),
                    Err(err) => {
                        tracing::error!(error = %err, "an audit entry cannot be exported");
                        yield Err(std::io::Error::other("the audit export failed"));
                        return;
                    }
                }
            }
            if !chunk.is_empty() {
                yield Ok(chunk);
            }
            if !full {
                break;
            }
        }
    };
    let (content_type, extension) =
        if csv { ("text/csv; charset=utf-8", "csv") } else { ("application/x-ndjson", "jsonl") };
    let file_name: String = caller
        .principal
        .workspace
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .collect();
    Ok((
        [
            (header::CONTENT_TYPE, content_type.to_owned()),
            (header::CONTENT_DISPOSITION, format!("attachment; filename=\"holdpoint-audit-{file_name}.{extension}\"")),
            (header::CACHE_CONTROL, "no-store".to_owned()),
        ],
        Body::from_stream(body),
    )
        .into_response())
}

/// The CSV export's columns, in order. `before`, `after` and `diff` are the JSON text the hash covers.
pub const CSV_COLUMNS: [&str; 16] = [
    "seq",
    "id",
    "workspace_id",
    "workspace",
    "created_at",
    "actor_kind",
    "actor",
    "actor_id",
    "action",
    "subject_type",
    "subject_id",
    "before",
    "after",
    "diff",
    "prev_hash",
    "hash",
];

/// One CSV field: quoted when it holds a comma, a quote or a line break (RFC 4180), quotes doubled.
fn csv_field(value: Option<&str>) -> String {
    match value {
        None => String::new(),
        Some(v) if v.contains([',', '"', '\n', '\r']) => format!("\"{}\"", v.replace('"', "\"\"")),
        Some(v) => v.to_owned(),
    }
}

/// One entry as a line of the export, line break included.
fn export_line(row: &AuditRow, workspace: &str, csv: bool) -> Result<String, crate::store::StoreError> {
    if !csv {
        let entry = row.to_entry(workspace)?;
        let json = serde_json::to_string(&entry).map_err(|e| crate::store::StoreError::Corrupt(e.to_string()))?;
        return Ok(format!("{json}\n"));
    }
    let seq = row.seq.to_string();
    let id = row.id.to_string();
    let workspace_id = row.workspace_id.to_string();
    let created_at = crate::audit::hashed_time(&row.created_at);
    let fields = [
        Some(seq.as_str()),
        Some(id.as_str()),
        Some(workspace_id.as_str()),
        Some(workspace),
        Some(created_at.as_str()),
        Some(row.actor_kind.as_str()),
        Some(row.actor.as_str()),
        row.actor_id.as_deref(),
        Some(row.action.as_str()),
        Some(row.subject_type.as_str()),
        row.subject_id.as_deref(),
        row.before.as_deref(),
        row.after.as_deref(),
        row.diff.as_deref(),
        Some(row.prev_hash.as_str()),
        Some(row.hash.as_str()),
    ];
    let line: Vec<String> = fields.into_iter().map(csv_field).collect();
    Ok(format!("{}\r\n", line.join(",")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_only_when_they_need_it() {
        assert_eq!(csv_field(Some("alice")), "alice");
        assert_eq!(csv_field(Some(r#"{"a":1,"b":"x"}"#)), r#""{""a"":1,""b"":""x""}""#);
        assert_eq!(csv_field(Some("two\nlines")), "\"two\nlines\"");
        assert_eq!(csv_field(None), "");
    }

    #[test]
    fn empty_filters_mean_any_and_bad_ones_are_refused() {
        let filter = FilterQuery { action: Some(" ".into()), actor_kind: Some(String::new()), ..Default::default() }
            .into_filter()
            .unwrap();
        assert_eq!(filter, AuditFilter::default());
        let bad_kind = FilterQuery { actor_kind: Some("robot".into()), ..Default::default() }.into_filter();
        assert!(matches!(bad_kind, Err(AppError::BadRequest(_))));
        let bad_time = FilterQuery { since: Some("yesterday".into()), ..Default::default() }.into_filter();
        assert!(matches!(bad_time, Err(AppError::BadRequest(_))));
        let since = FilterQuery { since: Some("2026-01-31T09:00:00+01:00".into()), ..Default::default() }
            .into_filter()
            .unwrap()
            .since
            .unwrap();
        assert_eq!(since.to_rfc3339(), "2026-01-31T08:00:00+00:00");
    }
}
