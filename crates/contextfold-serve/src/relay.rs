//! The upstream's response, relayed as it arrives: status and headers first (only once the
//! upstream has sent them), then each chunk of the body the moment it comes, never
//! buffered, never rebuilt. A body the upstream cuts, or leaves silent past the idle
//! timeout, ends the client's response with an error, so the client never mistakes a
//! partial answer for a whole one. A client that leaves drops the relay, which drops the
//! upstream response and so cancels the upstream request.

use crate::headers::client_response;
use crate::log::RequestLog;
use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use futures_util::stream::{BoxStream, Stream, StreamExt};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::{Instant, Sleep};

/// The client's response for the upstream's `response`; `log` is written when it ends.
pub fn relay(response: reqwest::Response, idle: Duration, mut log: RequestLog) -> Response {
    let status = response.status();
    log.status = status.as_u16();
    let headers = client_response(response.headers());
    let body = Relay {
        inner: response.bytes_stream().boxed(),
        idle,
        deadline: Box::pin(tokio::time::sleep(idle)),
        log: Some(log),
    };
    let mut out = Response::new(Body::from_stream(body));
    *out.status_mut() = status;
    *out.headers_mut() = headers;
    out
}

/// The body of a relayed response.
struct Relay {
    inner: BoxStream<'static, reqwest::Result<Bytes>>,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
    /// Taken when the line is written; `None` once the body has ended.
    log: Option<RequestLog>,
}

impl Relay {
    fn end(&mut self, how: &str) {
        if let Some(log) = self.log.take() {
            log.emit(how);
        }
    }
}

impl Stream for Relay {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.log.is_none() {
            return Poll::Ready(None);
        }
        match this.inner.poll_next_unpin(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                let next = Instant::now() + this.idle;
                this.deadline.as_mut().reset(next);
                if let Some(log) = &mut this.log {
                    log.relayed(chunk.len());
                }
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(Some(Err(_))) => {
                this.end("cut: the upstream's response broke off");
                Poll::Ready(Some(Err(std::io::Error::other("the upstream's response broke off"))))
            }
            Poll::Ready(None) => {
                this.end("complete");
                Poll::Ready(None)
            }
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    let why =
                        format!("cut: the upstream was silent for {} s (--idle-timeout)", this.idle.as_secs_f64());
                    this.end(&why);
                    Poll::Ready(Some(Err(std::io::Error::other(why))))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.end("client closed");
    }
}
