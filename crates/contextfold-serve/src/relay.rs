//! The upstream's response, relayed as it arrives: status and headers first (only once the
//! upstream has sent them), then each chunk of the body the moment it comes, never
//! buffered, never rebuilt. A body the upstream cuts, or leaves silent past the idle
//! timeout, ends the client's response with an error, so the client never mistakes a
//! partial answer for a whole one. A client that leaves drops the relay, which drops the
//! upstream response and so cancels the upstream request.

use crate::headers::client_response;
use crate::log::RequestLog;
use crate::usage::{Observer, UsageProbe};
use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use futures_util::stream::{BoxStream, Stream, StreamExt};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::{Instant, Sleep};

/// The client's response for the upstream's `response`; `log` is written when it ends, and
/// `observer` learns the input tokens the upstream counted, when a successful, uncompressed
/// answer states them.
pub fn relay(response: reqwest::Response, idle: Duration, mut log: RequestLog, observer: Option<Observer>) -> Response {
    let status = response.status();
    let head = log.method == "HEAD";
    log.status = status.as_u16();
    let headers = client_response(response.headers());
    let readable = status.is_success() && !headers.contains_key(axum::http::header::CONTENT_ENCODING);
    let content_type = headers.get(axum::http::header::CONTENT_TYPE).and_then(|value| value.to_str().ok());
    let usage = observer.filter(|_| readable).and_then(|observer| UsageProbe::new(content_type, observer));
    // No body comes for HEAD, 204 and 304; the server then never polls the relay.
    let bodiless = head || matches!(status.as_u16(), 204 | 304) || response.content_length() == Some(0);
    let body = Relay {
        bodiless,
        remaining: response.content_length(),
        inner: response.bytes_stream().boxed(),
        idle,
        deadline: Box::pin(tokio::time::sleep(idle)),
        log: Some(log),
        usage,
        finished: false,
    };
    let mut out = Response::new(Body::from_stream(body));
    *out.status_mut() = status;
    *out.headers_mut() = headers;
    out
}

/// The body of a relayed response.
struct Relay {
    /// Whether the answer has no body, so that its end is its headers.
    bodiless: bool,
    inner: BoxStream<'static, reqwest::Result<Bytes>>,
    /// Bytes still to come, when the upstream said how many (the server stops polling a
    /// body of known length once it has them all).
    remaining: Option<u64>,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
    /// Taken when the line is written.
    log: Option<RequestLog>,
    /// Reads the provider's token count on the way.
    usage: Option<UsageProbe>,
    /// Whether the body has ended (whole, cut or timed out).
    finished: bool,
}

impl Relay {
    fn end(&mut self, how: &str) {
        let reported = self.usage.take().and_then(|mut usage| {
            if how == "complete" {
                usage.finish();
            }
            usage.reported()
        });
        if let Some(mut log) = self.log.take() {
            log.reported = reported;
            log.emit(how);
        }
    }

    /// Ends the body with an error the client sees as a broken response.
    fn fail(&mut self, why: String) -> Poll<Option<Result<Bytes, std::io::Error>>> {
        self.finished = true;
        self.end(&format!("cut: {why}"));
        Poll::Ready(Some(Err(std::io::Error::other(why))))
    }
}

impl Stream for Relay {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.finished {
            return Poll::Ready(None);
        }
        match this.inner.poll_next_unpin(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                let next = Instant::now() + this.idle;
                this.deadline.as_mut().reset(next);
                if let Some(log) = &mut this.log {
                    log.relayed(chunk.len());
                }
                if let Some(usage) = &mut this.usage {
                    usage.feed(&chunk);
                }
                if let Some(remaining) = &mut this.remaining {
                    *remaining = remaining.saturating_sub(chunk.len() as u64);
                    if *remaining == 0 {
                        this.end("complete");
                    }
                }
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(Some(Err(_))) => this.fail("the upstream's response broke off".to_string()),
            Poll::Ready(None) => {
                this.finished = true;
                this.end("complete");
                Poll::Ready(None)
            }
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    this.fail(format!("the upstream was silent for {} s (--idle-timeout)", this.idle.as_secs_f64()))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.end(if self.bodiless { "complete" } else { "client closed" });
    }
}
