//! The Holdpoint web UI and the wire types every part of Holdpoint shares.
//!
//! The same components render on the server (feature `ssr`) and hydrate in the browser (feature `hydrate`). Server
//! functions serve only this UI; agents and the CLI use the versioned REST API under `/api/v1`.

pub use holdpoint_types as types;

mod answer;
mod api;
mod codec;
mod components;
mod deferred;
mod grant_offer;
pub mod live;
pub mod markdown;
mod modal;
pub mod navigation;
mod notify;
mod pages;
mod paging;
mod rich_input;
mod server_fns;

#[cfg(feature = "ssr")]
pub mod backend;

use leptos::prelude::*;
use leptos_meta::{MetaTags, Stylesheet, Title, provide_meta_context};
use leptos_router::{
    Lazy, ParamSegment, SsrMode, StaticSegment,
    components::{Outlet, ParentRoute, Redirect, Route, Router, Routes},
};

pub use server_fns::*;

/// The path prefix of the UI's server functions, kept apart from the public `/api/v1`.
pub const SERVER_FN_PREFIX: &str = "/ui/fn";

/// The HTML document around the app, rendered on the server only.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    let rendered_at = use_context::<live::RenderedAt>().map(|at| at.0.to_string());
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <meta name="color-scheme" content="light dark"/>
                {rendered_at.map(|at| view! { <meta name=live::RENDERED_AT_META content=at/> })}
                <HydrationScripts options/>
                // Registers the service worker that shows pushed questions; subscribes from the Settings page.
                <script type="module" src="/push.js" nonce=leptos::nonce::use_nonce()></script>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

/// The root component: stylesheet, title and the page routes.
#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    live::provide_live();
    deferred::provide();
    let deferred_loaded = deferred::module_loaded();

    view! {
        <Stylesheet id="holdpoint" href="/pkg/holdpoint.css"/>
        <Title text="Holdpoint"/>
        <Router>
            <Routes fallback=pages::NotFound>
                <Route path=StaticSegment("") view=|| view! { <Redirect path="/inbox"/> }/>
                <Route path=StaticSegment("signin") view={Lazy::<pages::SignInRoute>::new()}/>
                // Every signed-in page under one layout, whose top bar stays mounted as people move between pages.
                // Async: the server waits for the page's data and sends it complete, so reading and answering work
                // without JavaScript (out-of-order streaming needs a script to put streamed parts in place).
                <ParentRoute path=() view=SignedInLayout ssr=SsrMode::Async>
                    <Route path=StaticSegment("inbox") view={Lazy::<pages::InboxRoute>::new()} ssr=SsrMode::Async/>
                    <Route
                        path=(StaticSegment("questions"), ParamSegment("id"))
                        view={Lazy::<pages::QuestionRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route path=StaticSegment("approvals") view={Lazy::<pages::ApprovalsRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=StaticSegment("runs") view={Lazy::<pages::RunsRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=(StaticSegment("runs"), ParamSegment("id")) view={Lazy::<pages::RunRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=StaticSegment("settings") view={Lazy::<pages::SettingsRoute>::new()} ssr=SsrMode::Async/>
                    <Route
                        path=(StaticSegment("settings"), StaticSegment("workspace"))
                        view={Lazy::<pages::WorkspaceSettingsRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=(StaticSegment("settings"), StaticSegment("rules"))
                        view={Lazy::<pages::RulesSettingsRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=(StaticSegment("settings"), StaticSegment("gateway"))
                        view={Lazy::<pages::GatewaySettingsRoute>::new()}
                        ssr=SsrMode::Async
                    />
                    <Route path=StaticSegment("audit") view={Lazy::<pages::AuditRoute>::new()} ssr=SsrMode::Async/>
                    <Route
                        path=StaticSegment("notifications")
                        view={Lazy::<pages::NotificationsRoute>::new()}
                        ssr=SsrMode::Async
                    />
                </ParentRoute>
            </Routes>
            {move || deferred::show(deferred_loaded, deferred::Part::LiveModal)}
        </Router>
    }
}

/// The frame of every signed-in page: the top bar, then the page. Part of the main wasm module (every page but the
/// sign-in page has it), where it costs less than in a module the pages share: modules are compressed and
/// optimised one by one.
#[component]
fn SignedInLayout() -> impl IntoView {
    view! {
        <components::TopBar/>
        <Outlet/>
    }
}
