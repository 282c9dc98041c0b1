//! The browser entry point: hydrates the server-rendered page. Everything else lives in `app`.

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    let Some(body) = leptos::prelude::document().body() else { return };
    // The pages are lazy routes (their code is loaded with the page), which only the asynchronous hydration
    // supports: it waits for the shown page's module before it walks the server's HTML. Nothing may change the page
    // until that walk is done, so the live parts start after it (see `app::live::hydration_finished`).
    wasm_bindgen_futures::spawn_local(async move {
        leptos::mount::hydrate_from_async(body, app::App).await.forget();
        app::live::hydration_finished();
    });
}
