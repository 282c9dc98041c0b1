//! The file input: a file chosen or dropped is uploaded at once, and the answer carries what the upload returned.

use leptos::prelude::*;

use super::Entries;
use crate::types::FormField;

/// What a file input takes, said beside it: its media types and largest size (`application/pdf, up to 2 MiB`).
pub fn file_limits(rules: &crate::types::FieldRules) -> Option<String> {
    let mut said = Vec::new();
    if !rules.accept.is_empty() {
        said.push(rules.accept.join(", "));
    }
    if let Some(max) = rules.max_bytes {
        said.push(format!("up to {}", crate::types::size_text(max)));
    }
    (!said.is_empty()).then(|| said.join(", "))
}

/// A file input that also takes a file dropped on it; the file is uploaded at once, and its name and size shown.
#[component]
pub(super) fn FileEditor(
    field: FormField,
    input_id: String,
    testid: String,
    described: String,
    entries: Entries,
) -> impl IntoView {
    let key = field.key.clone();
    let uploading = RwSignal::new(false);
    let over = RwSignal::new(false);
    let accept = field.rules.accept.join(",");
    let limits = file_limits(&field.rules).map(|limits| format!(" ({limits})"));
    #[cfg(feature = "hydrate")]
    let start = {
        let (key, path) = (key.clone(), super::path_of(&key));
        let (accept, max_bytes) = (field.rules.accept.clone(), field.rules.max_bytes);
        move |file: web_sys::File| {
            let (key, path) = (key.clone(), path.clone());
            let media_type = file.type_();
            let refuse = |problem: String| {
                entries.errors.update(|e| {
                    e.insert(path.clone(), problem);
                })
            };
            if !crate::types::media_type_accepted(&accept, &media_type) {
                return refuse(format!("must be one of {}", accept.join(", ")));
            }
            if let Some(max) = max_bytes.filter(|max| file.size() > *max as f64) {
                return refuse(format!("must be at most {}", crate::types::size_text(max)));
            }
            entries.errors.update(|e| {
                e.remove(&path);
            });
            uploading.set(true);
            leptos::task::spawn_local(async move {
                let result = crate::api::upload_file(file).await;
                uploading.set(false);
                match result {
                    Ok(uploaded) => entries.files.update(|f| {
                        f.insert(key, uploaded);
                    }),
                    Err(err) => entries.errors.update(|e| {
                        e.insert(path, err.message);
                    }),
                }
            });
        }
    };
    #[cfg(feature = "hydrate")]
    let (start_change, start_drop) = (start.clone(), start);
    let on_change = move |ev: leptos::ev::Event| {
        #[cfg(feature = "hydrate")]
        {
            use wasm_bindgen::JsCast;
            let input = ev.target().and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok());
            if let Some(file) = input.as_ref().and_then(|i| i.files()).and_then(|f| f.get(0)) {
                start_change(file);
            }
            if let Some(input) = input {
                input.set_value("");
            }
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = ev;
    };
    let on_drop = move |ev: leptos::ev::DragEvent| {
        ev.prevent_default();
        over.set(false);
        #[cfg(feature = "hydrate")]
        if let Some(file) = ev.data_transfer().and_then(|d| d.files()).and_then(|f| f.get(0)) {
            start_drop(file);
        }
    };
    let chosen = {
        let key = key.clone();
        move || entries.files.with(|f| f.get(&key).cloned())
    };
    let remove_key = key.clone();
    let (drop_testid, chosen_testid, remove_testid) =
        (format!("{testid}-drop"), format!("{testid}-chosen"), format!("{testid}-remove"));
    view! {
        <div class="dropzone" class:over=move || over.get() data-testid=drop_testid
            on:dragover=move |ev: leptos::ev::DragEvent| { ev.prevent_default(); over.set(true); }
            on:dragleave=move |_| over.set(false)
            on:drop=on_drop>
            <input type="file" id=input_id data-testid=testid.clone() accept=(!accept.is_empty()).then_some(accept)
                aria-describedby=described on:change=on_change/>
            <p class="muted">"or drop a file here" {limits}</p>
            {move || uploading.get().then(|| view! { <p class="muted" role="status">"Uploading…"</p> })}
            {move || chosen().map(|file| view! {
                <p class="file-chosen" data-testid=chosen_testid.clone()>
                    <span>{file.name.clone()}</span> " — " <span>{crate::types::size_text(file.size)}</span>
                    " "
                    <button type="button" class="link" data-testid=remove_testid.clone()
                        on:click={
                            let key = remove_key.clone();
                            move |_| entries.files.update(|f| { f.remove(&key); })
                        }>"Remove"</button>
                </p>
            })}
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_input_says_what_it_takes() {
        let mut rules = crate::types::FieldRules::default();
        assert_eq!(file_limits(&rules), None, "anything, up to the server's limit: nothing to say");
        rules.accept = vec!["application/pdf".into(), "image/*".into()];
        assert_eq!(file_limits(&rules).unwrap(), "application/pdf, image/*");
        rules.max_bytes = Some(2 * 1024 * 1024);
        assert_eq!(file_limits(&rules).unwrap(), "application/pdf, image/*, up to 2 MiB");
    }
}
