//! Question bodies as Markdown in the page: the renderer is the wire types' (`holdpoint_types::markdown`), shared
//! with the server's emails, so a body reads the same in the browser, on the server-rendered page and in a message.

use leptos::prelude::*;

pub use crate::types::markdown::*;

#[component]
pub fn Markdown(#[prop(into)] source: String, #[prop(optional, into)] testid: String) -> impl IntoView {
    view! { <div class="markdown" data-testid=testid inner_html=to_html(&source)></div> }
}
