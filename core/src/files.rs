//! Files (docs/api.md): what a person uploads to answer a `file` field, where its bytes are kept, who may download it,
//! and the worker that removes uploads no answer took.
//!
//! The bytes go to an object store through the `object_store` crate: a local directory by default (`files/` in the
//! data directory), or an S3-compatible bucket (`s3://bucket/prefix`) that several instances share. Each file is
//! kept under `<workspace id>/<file id>`; its row in the database (see `store::files`) says what it is, who uploaded
//! it and, once an answer references it, which question it belongs to. The bytes are stored before the row, and the
//! row is removed before the bytes, so a row never names bytes that are not there.
//!
//! Who may do what:
//! - uploading takes a role that may answer questions (responder, approver, admin): a file exists to be an answer's,
//!   and only the one who uploaded it may reference it in an answer. Agent and viewer tokens may not upload; an
//!   agent's file could never be referenced (agents ask, people answer).
//! - downloading a referenced file takes the right to see its question (so the agent that asked, through
//!   [`crate::visibility`], and every person of the workspace); an unreferenced one only its uploader may download.
//!   Anything else, other workspaces' files included, is not found.

use std::sync::Arc;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::{Stream, StreamExt};
use holdpoint_types::{Role, UploadedFile};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::credentials::Caller;
use crate::error::AppError;
use crate::store::{FileRow, Store, StoreResult};

/// The largest upload unless `HOLDPOINT_MAX_UPLOAD_BYTES` says otherwise: 10 MiB.
pub const DEFAULT_MAX_UPLOAD_BYTES: u64 = 10 * 1024 * 1024;
/// The largest `HOLDPOINT_MAX_UPLOAD_BYTES` taken.
pub const MAX_UPLOAD_BYTES_LIMIT: u64 = 256 * 1024 * 1024;
/// What an upload holds in memory: a file up to this size is stored in one write once it is whole; a larger one is
/// sent on in parts of this size (S3's smallest part) as it arrives, [`PARTS_IN_FLIGHT`] at a time at most.
const PART_BYTES: usize = 5 * 1024 * 1024;
const PARTS_IN_FLIGHT: usize = 2;
/// How long an upload no answer references is kept.
pub const UNREFERENCED_HOURS: i64 = 24;
/// The longest file name kept, in characters.
pub const NAME_MAX_CHARS: usize = 255;
/// What the worker removes per pass at most, and how often it looks.
const SWEEP_BATCH: i64 = 200;
const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(600);

/// Where files are kept and how large they may be.
#[derive(Debug, Clone, clap::Args)]
pub struct FilesConfig {
    /// Where uploaded files' bytes are kept: `file:///var/lib/holdpoint/files` (a local directory, created if
    /// missing) or `s3://bucket` or `s3://bucket/prefix` (an S3-compatible bucket, for several instances; its
    /// credentials, region and endpoint come from the usual `AWS_*` variables). Default: `files` in the data
    /// directory.
    #[arg(long, env = "HOLDPOINT_FILES_URL")]
    pub files_url: Option<String>,

    /// The largest file an upload may be, in bytes (413 beyond); a `file` field's `max_bytes` may not exceed it.
    #[arg(long, env = "HOLDPOINT_MAX_UPLOAD_BYTES", default_value_t = DEFAULT_MAX_UPLOAD_BYTES,
        value_parser = clap::value_parser!(u64).range(1..=MAX_UPLOAD_BYTES_LIMIT))]
    pub max_upload_bytes: u64,
}

impl FilesConfig {
    /// The defaults: files under the data directory, 10 MiB each at most.
    pub fn defaults() -> Self {
        FilesConfig { files_url: None, max_upload_bytes: DEFAULT_MAX_UPLOAD_BYTES }
    }
}

/// Why the file storage could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum FilesSetupError {
    #[error("HOLDPOINT_FILES_URL {url:?} is not a URL: {reason}")]
    NotAUrl { url: String, reason: String },
    #[error("HOLDPOINT_FILES_URL {0:?}: use file:///a/directory or s3://bucket/prefix")]
    UnsupportedScheme(String),
    #[error("cannot create the files directory {directory}: {source}")]
    Directory { directory: String, source: std::io::Error },
    #[error("the file storage {url}: {source}")]
    Store { url: String, source: object_store::Error },
}

/// Where files' bytes are kept: an object store and what to call it in logs.
#[derive(Debug, Clone)]
pub struct FileStorage {
    objects: Arc<dyn ObjectStore>,
    /// `file:///...` or `s3://...`, for messages.
    pub location: String,
}

impl FileStorage {
    /// The storage `config` names, `data_dir/files` when it names none.
    pub fn open(config: &FilesConfig, data_dir: &std::path::Path) -> Result<Self, FilesSetupError> {
        match config.files_url.as_deref().map(str::trim).filter(|url| !url.is_empty()) {
            Some(url) => Self::open_url(url),
            None => Self::open_directory(&data_dir.join("files")),
        }
    }

    /// Checks `config`'s URL without touching the directory or the bucket (what `holdpoint config check` runs).
    pub fn check(config: &FilesConfig) -> Result<(), FilesSetupError> {
        match config.files_url.as_deref().map(str::trim).filter(|url| !url.is_empty()) {
            Some(url) => Self::target(url).map(|_| ()),
            None => Ok(()),
        }
    }

    /// The storage at `url`: `file://` (a local directory) or `s3://` (a bucket, with an optional prefix).
    pub fn open_url(url: &str) -> Result<Self, FilesSetupError> {
        match Self::target(url)? {
            Target::Directory(directory) => Self::open_directory(&directory),
            Target::Bucket(bucket) => Ok(bucket),
        }
    }

    /// What `url` names (an `s3://` bucket's client is made without network access).
    fn target(url: &str) -> Result<Target, FilesSetupError> {
        let parsed = url::Url::parse(url)
            .map_err(|err| FilesSetupError::NotAUrl { url: url.to_owned(), reason: err.to_string() })?;
        match parsed.scheme() {
            "file" => parsed.to_file_path().map(Target::Directory).map_err(|()| FilesSetupError::NotAUrl {
                url: url.to_owned(),
                reason: "a file URL names an absolute path (file:///var/lib/holdpoint/files)".into(),
            }),
            "s3" | "s3a" => {
                let store_error = |source| FilesSetupError::Store { url: url.to_owned(), source };
                let bucket =
                    object_store::aws::AmazonS3Builder::from_env().with_url(url).build().map_err(store_error)?;
                let prefix = parsed.path().trim_matches('/');
                let objects: Arc<dyn ObjectStore> = if prefix.is_empty() {
                    Arc::new(bucket)
                } else {
                    let prefix = ObjectPath::parse(prefix).map_err(|err| store_error(err.into()))?;
                    Arc::new(object_store::prefix::PrefixStore::new(bucket, prefix))
                };
                Ok(Target::Bucket(FileStorage { objects, location: url.to_owned() }))
            }
            _ => Err(FilesSetupError::UnsupportedScheme(url.to_owned())),
        }
    }

    /// A local directory, created if missing.
    pub fn open_directory(directory: &std::path::Path) -> Result<Self, FilesSetupError> {
        let shown = directory.display().to_string();
        std::fs::create_dir_all(directory)
            .map_err(|source| FilesSetupError::Directory { directory: shown.clone(), source })?;
        let directory = std::path::absolute(directory)
            .map_err(|source| FilesSetupError::Directory { directory: shown.clone(), source })?;
        let local = object_store::local::LocalFileSystem::new_with_prefix(&directory)
            .map_err(|source| FilesSetupError::Store { url: shown, source })?
            // An emptied workspace's directory goes with its last file.
            .with_automatic_cleanup(true)
            // An upload acknowledged survives a power cut, as the row naming it does (SQLite's `synchronous=FULL`).
            .with_fsync(true);
        Ok(FileStorage { objects: Arc::new(local), location: format!("file://{}", directory.display()) })
    }

    /// Where a file's bytes are.
    fn path(workspace_id: Uuid, id: Uuid) -> ObjectPath {
        ObjectPath::from(format!("{workspace_id}/{id}"))
    }

    /// A new file's bytes, to be written as they come.
    fn writing(&self, workspace_id: Uuid, id: Uuid) -> Writing<'_> {
        Writing { storage: self, path: Self::path(workspace_id, id), held: Vec::new(), held_bytes: 0, parts: None }
    }

    /// A file's bytes, as a stream.
    pub async fn read(
        &self,
        workspace_id: Uuid,
        id: Uuid,
    ) -> object_store::Result<futures::stream::BoxStream<'static, object_store::Result<Bytes>>> {
        Ok(self.objects.get(&Self::path(workspace_id, id)).await?.into_stream())
    }

    /// Removes a file's bytes; bytes already gone are no error.
    pub async fn delete(&self, workspace_id: Uuid, id: Uuid) -> object_store::Result<()> {
        match self.objects.delete(&Self::path(workspace_id, id)).await {
            Err(object_store::Error::NotFound { .. }) => Ok(()),
            other => other,
        }
    }
}

/// A file's bytes on their way to the store: held until they pass [`PART_BYTES`], then sent in parts as they come.
struct Writing<'a> {
    storage: &'a FileStorage,
    path: ObjectPath,
    held: Vec<Bytes>,
    held_bytes: usize,
    parts: Option<WriteMultipart>,
}

impl Writing<'_> {
    async fn write(&mut self, chunk: Bytes) -> object_store::Result<()> {
        if let Some(parts) = &mut self.parts {
            parts.wait_for_capacity(PARTS_IN_FLIGHT).await?;
            parts.put(chunk);
            return Ok(());
        }
        self.held_bytes += chunk.len();
        self.held.push(chunk);
        if self.held_bytes > PART_BYTES {
            let upload = self.storage.objects.put_multipart(&self.path).await?;
            let mut parts = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
            for chunk in self.held.drain(..) {
                parts.put(chunk);
            }
            self.held_bytes = 0;
            self.parts = Some(parts);
        }
        Ok(())
    }

    /// Stores what was written, whole: nothing of it is readable before.
    async fn finish(self) -> object_store::Result<()> {
        match self.parts {
            Some(parts) => parts.finish().await.map(|_| ()),
            None => {
                self.storage.objects.put(&self.path, self.held.into_iter().collect::<PutPayload>()).await.map(|_| ())
            }
        }
    }

    /// Throws away the parts sent so far (a file held whole was never sent).
    async fn abort(self) {
        if let Some(parts) = self.parts
            && let Err(err) = parts.abort().await
        {
            tracing::warn!(error = %err, path = %self.path, "could not remove the parts of an upload that was refused");
        }
    }
}

/// What a files URL names.
enum Target {
    /// A local directory, to be created if missing.
    Directory(std::path::PathBuf),
    Bucket(FileStorage),
}

/// What an upload says of itself besides its bytes.
#[derive(Debug, Clone)]
pub struct UploadMeta {
    /// The file's name (`?name=`, or the multipart part's file name).
    pub name: Option<String>,
    /// Its media type (the request's or the part's `Content-Type`); `application/octet-stream` when none is given.
    pub media_type: Option<String>,
}

/// Refuses with 403 a caller whose role may not upload (see the module's docs).
pub fn require_upload_right(caller: &Caller) -> Result<(), AppError> {
    if caller.role().may_answer() {
        return Ok(());
    }
    let why =
        if caller.role() == Role::Agent { ": files are uploaded to answer questions, and agents ask" } else { "" };
    Err(AppError::Forbidden(format!("{} may not upload files{why}", caller.role().with_article())))
}

/// The name and media type an upload is stored with, checked: 422 naming `name` or `media_type`.
fn checked_meta(meta: UploadMeta) -> Result<(String, String), AppError> {
    let name = meta.name.map(|name| name.trim().to_owned()).unwrap_or_default();
    if name.is_empty() {
        return Err(AppError::invalid_field("name", "is required (?name=, or the multipart part's file name)"));
    }
    if name.chars().count() > NAME_MAX_CHARS {
        return Err(AppError::invalid_field("name", format!("must have at most {NAME_MAX_CHARS} characters")));
    }
    if name.chars().any(char::is_control) {
        return Err(AppError::invalid_field("name", "must not contain control characters"));
    }
    let media_type = meta.media_type.map(|m| m.trim().to_owned()).filter(|m| !m.is_empty());
    let media_type = media_type.unwrap_or_else(|| "application/octet-stream".to_owned());
    let parsed: Result<mime::Mime, _> = media_type.parse();
    match parsed {
        Ok(mime) if media_type.len() <= NAME_MAX_CHARS => Ok((name, mime.essence_str().to_owned())),
        _ => Err(AppError::invalid_field("media_type", format!("{media_type:?} is not a media type"))),
    }
}

/// What the upload of one file needs: where rows and bytes go and the largest file taken.
pub struct Uploading<'a> {
    pub store: &'a dyn Store,
    pub storage: &'a FileStorage,
    pub max_bytes: u64,
}

impl Uploading<'_> {
    /// Stores the file `body` streams: its bytes as they arrive (see [`PART_BYTES`]), with its SHA-256 and length,
    /// refused with 413 (nothing stored) as soon as it passes the largest size, then its row. The caller has passed
    /// [`require_upload_right`].
    pub async fn upload(
        &self,
        caller: &Caller,
        meta: UploadMeta,
        body: impl Stream<Item = Result<Bytes, AppError>>,
    ) -> Result<UploadedFile, AppError> {
        require_upload_right(caller)?;
        let (name, media_type) = checked_meta(meta)?;
        let mut body = std::pin::pin!(body);
        let (id, workspace_id) = (Uuid::now_v7(), caller.workspace_id());
        let (mut hasher, mut size, mut writing) = (Sha256::new(), 0u64, self.storage.writing(workspace_id, id));
        let received = async {
            while let Some(chunk) = body.next().await {
                let chunk = chunk?;
                size += chunk.len() as u64;
                if size > self.max_bytes {
                    return Err(too_large(self.max_bytes));
                }
                hasher.update(&chunk);
                writing.write(chunk).await.map_err(AppError::internal)?;
            }
            Ok(())
        }
        .await;
        if let Err(refused) = received {
            writing.abort().await;
            return Err(refused);
        }
        writing.finish().await.map_err(AppError::internal)?;
        let row = FileRow {
            id,
            workspace_id,
            uploaded_by: caller.principal.id,
            name,
            media_type,
            size: i64::try_from(size).map_err(AppError::internal)?,
            sha256: hex::encode(hasher.finalize()),
            created_at: crate::store::now(),
            question_id: None,
        };
        if let Err(err) = self.store.insert_file(&row).await {
            // The bytes are nobody's: no row names them.
            if let Err(removal) = self.storage.delete(row.workspace_id, row.id).await {
                tracing::warn!(error = %removal, file = %row.id, "could not remove the bytes of a file whose row failed");
            }
            return Err(err.into());
        }
        Ok(uploaded(&row))
    }
}

/// The 413 of an upload larger than `max_bytes`.
pub fn too_large(max_bytes: u64) -> AppError {
    AppError::TooLarge(format!("a file may have at most {max_bytes} bytes"))
}

/// A stored file as the API shows it.
pub fn uploaded(row: &FileRow) -> UploadedFile {
    UploadedFile {
        file_id: row.id,
        name: row.name.clone(),
        size: u64::try_from(row.size).unwrap_or_default(),
        media_type: row.media_type.clone(),
        sha256: row.sha256.clone(),
    }
}

/// The file `id` if the caller may download it (see the module's docs); 404 otherwise.
pub async fn downloadable(store: &dyn Store, caller: &Caller, id: Uuid) -> Result<FileRow, AppError> {
    let file = store.file(caller.workspace_id(), id).await?.ok_or(AppError::NotFound("file"))?;
    let allowed = match file.question_id {
        Some(question_id) => store
            .question(caller.workspace_id(), question_id)
            .await?
            .is_some_and(|question| caller.visibility().sees(question.created_by)),
        None => file.uploaded_by == caller.principal.id,
    };
    if allowed { Ok(file) } else { Err(AppError::NotFound("file")) }
}

/// The media type a download is served with: the stored one when browsers cannot run it as a page or script (an
/// image other than SVG, audio, video, PDF, plain text, CSV, JSON, archives), `application/octet-stream` otherwise.
pub fn served_media_type(stored: &str) -> &str {
    const SAFE: &[&str] =
        &["application/pdf", "application/json", "application/zip", "application/gzip", "text/plain", "text/csv"];
    let stored = stored.trim();
    let lower = stored.to_ascii_lowercase();
    let media = lower.starts_with("image/") && lower != "image/svg+xml"
        || lower.starts_with("audio/")
        || lower.starts_with("video/");
    if media || SAFE.contains(&lower.as_str()) { stored } else { "application/octet-stream" }
}

/// What RFC 8187 percent-encodes in an extended parameter's value: everything but its `attr-char`s.
const ATTR_CHAR_ESCAPED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'!')
    .remove(b'#')
    .remove(b'$')
    .remove(b'&')
    .remove(b'+')
    .remove(b'-')
    .remove(b'.')
    .remove(b'^')
    .remove(b'_')
    .remove(b'`')
    .remove(b'|')
    .remove(b'~');

/// `Content-Disposition: attachment` with the file's name: an ASCII fallback (`filename`) and the exact name in
/// UTF-8 (`filename*`, RFC 6266 and 8187).
pub fn content_disposition(name: &str) -> String {
    let fallback: String = name
        .chars()
        .map(|c| if (c.is_ascii_graphic() && c != '"' && c != '\\') || c == ' ' { c } else { '_' })
        .collect();
    let encoded = percent_encoding::utf8_percent_encode(name, ATTR_CHAR_ESCAPED);
    format!("attachment; filename=\"{fallback}\"; filename*=UTF-8''{encoded}")
}

/// Removes the files no answer referenced that were uploaded more than [`UNREFERENCED_HOURS`] before `now`: each
/// row first (only if still unreferenced: an answer taking the file at the same moment wins), then its bytes.
/// Returns how many it removed.
pub async fn remove_unreferenced(store: &dyn Store, storage: &FileStorage, now: DateTime<Utc>) -> StoreResult<usize> {
    let before = now - chrono::Duration::hours(UNREFERENCED_HOURS);
    let mut removed = 0;
    loop {
        let batch = store.unreferenced_files(before, SWEEP_BATCH).await?;
        let full = batch.len() as i64 == SWEEP_BATCH;
        let mut removed_here = 0;
        for file in batch {
            if !store.delete_unreferenced_file(file.workspace_id, file.id, before).await? {
                continue;
            }
            removed_here += 1;
            if let Err(err) = storage.delete(file.workspace_id, file.id).await {
                tracing::warn!(error = %err, file = %file.id, "could not remove an unreferenced file's bytes");
            }
        }
        removed += removed_here;
        if !full || removed_here == 0 {
            return Ok(removed);
        }
    }
}

/// Starts the worker that removes unreferenced uploads, now and every ten minutes.
pub fn spawn_sweeper(store: Arc<dyn Store>, storage: FileStorage) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            match remove_unreferenced(store.as_ref(), &storage, crate::store::now()).await {
                Ok(0) => {}
                Ok(removed) => tracing::info!(removed, "removed uploads no answer referenced"),
                Err(err) => tracing::warn!(error = %err, "could not remove unreferenced uploads; retrying"),
            }
            tokio::time::sleep(SWEEP_EVERY).await;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_and_scripts_are_served_as_bytes_and_media_as_themselves() {
        assert_eq!(served_media_type("image/png"), "image/png");
        assert_eq!(served_media_type("application/pdf"), "application/pdf");
        assert_eq!(served_media_type("video/mp4"), "video/mp4");
        for risky in ["text/html", "image/svg+xml", "application/javascript", "text/xml", "application/xhtml+xml"] {
            assert_eq!(served_media_type(risky), "application/octet-stream", "{risky}");
        }
    }

    #[test]
    fn an_attachments_name_has_an_ascii_fallback_and_the_exact_name_encoded() {
        assert_eq!(
            content_disposition("report \"final\".pdf"),
            "attachment; filename=\"report _final_.pdf\"; filename*=UTF-8''report%20%22final%22.pdf"
        );
        assert_eq!(
            content_disposition("résumé\r\n.txt"),
            "attachment; filename=\"r_sum___.txt\"; filename*=UTF-8''r%C3%A9sum%C3%A9%0D%0A.txt"
        );
    }

    #[test]
    fn an_upload_needs_a_name_and_a_media_type_that_parses() {
        let meta = |name: Option<&str>, media_type: Option<&str>| UploadMeta {
            name: name.map(str::to_owned),
            media_type: media_type.map(str::to_owned),
        };
        assert_eq!(
            checked_meta(meta(Some(" a.png "), Some("image/PNG; x=1"))).unwrap(),
            ("a.png".to_owned(), "image/png".to_owned())
        );
        assert_eq!(checked_meta(meta(Some("a"), None)).unwrap().1, "application/octet-stream");
        let field = |result: Result<(String, String), AppError>| match result {
            Err(AppError::Invalid { details: Some(details), .. }) => {
                details["fields"].as_object().unwrap().keys().next().unwrap().clone()
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(field(checked_meta(meta(None, None))), "name");
        assert_eq!(field(checked_meta(meta(Some("a\nb"), None))), "name");
        assert_eq!(field(checked_meta(meta(Some("a"), Some("not a type")))), "media_type");
    }

    #[test]
    fn files_urls_of_other_schemes_or_relative_paths_are_refused() {
        assert!(matches!(FileStorage::open_url("ftp://host/x"), Err(FilesSetupError::UnsupportedScheme(_))));
        assert!(matches!(FileStorage::open_url("files"), Err(FilesSetupError::NotAUrl { .. })));
        let config = |url: &str| FilesConfig { files_url: Some(url.to_owned()), ..FilesConfig::defaults() };
        assert!(FileStorage::check(&config("ftp://host/x")).is_err());
        assert!(FileStorage::check(&config("s3://bucket/prefix")).is_ok());
        let missing = std::env::temp_dir().join(format!("holdpoint-never-made-{}", Uuid::now_v7()));
        assert!(FileStorage::check(&config(&format!("file://{}", missing.display()))).is_ok());
        assert!(!missing.exists(), "a check makes no directory");
    }
}
