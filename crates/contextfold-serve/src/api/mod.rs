//! The conversation APIs side by side: each reads its body's list into the model and hands
//! it to the shared path ([`crate::prepare`]), with a [`Wire`](crate::compaction::Wire) that
//! writes the list back in its own shape.

pub mod chat;
pub mod messages;
mod openai;
pub mod responses;

use crate::app::App;
use crate::error::ProxyError;
use crate::log::RequestLog;
use crate::prepare::Outbound;
use crate::received::Received;
use crate::route::Route;
use axum::http::request::Parts;

/// The body to send for a request on a conversation `route`, and what to learn from its
/// answer; anything else goes as it came.
pub async fn body(
    app: &App,
    route: Route,
    parts: &Parts,
    received: Received,
    log: &mut RequestLog,
) -> Result<Outbound, ProxyError> {
    match route {
        Route::Messages => messages::body(app, parts, received, log).await,
        Route::ChatCompletions => chat::body(app, parts, received, log).await,
        Route::Responses => responses::body(app, parts, received, log).await,
        Route::Forward(_) => Ok((received.into_bytes(), None)),
    }
}
