//! A small HTTP/1.1 server (hyper) for the `/metrics` and `/probe` endpoints of `server
//! --metrics` and `exporter`: it turns each GET into a [`Request`] for a handler and the
//! handler's [`Response`] into HTTP. It routes nothing and renders nothing itself.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

/// How long a client may take to send its request headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// A GET request, as a handler sees it.
#[derive(Debug, Clone)]
pub struct Request {
    /// The path, e.g. `/probe`.
    pub path: String,
    /// The query string without `?` (empty when there is none), still percent-encoded.
    pub query: String,
    /// The request's headers.
    pub headers: hyper::HeaderMap,
}

/// What a handler answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// HTTP status code.
    pub status: u16,
    /// The `Content-Type` header.
    pub content_type: &'static str,
    /// The body.
    pub body: String,
}

impl Response {
    /// A plain-text answer (errors, the index page): the body gets a final newline.
    pub fn text(status: u16, body: impl Into<String>) -> Response {
        let mut body = body.into();
        if !body.ends_with('\n') {
            body.push('\n');
        }
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body,
        }
    }
}

/// Binds a TCP listener for the HTTP server (port 0: the OS picks one).
pub async fn bind(addr: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen for HTTP on {addr}"))
}

/// Serves HTTP/1.1 on `listener` for ever: every GET (and HEAD) goes to `handler`; other
/// methods get 405. Each connection runs in a task of its own.
pub async fn serve<H, F>(listener: TcpListener, handler: H)
where
    H: Fn(Request) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response> + Send + 'static,
{
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            // Out of descriptors or a reset during accept costs one connection, not the server.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let handler = handler.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let handler = handler.clone();
                async move { Ok::<_, Infallible>(answer(req, handler).await) }
            });
            let _ = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn answer<H, F, B>(req: hyper::Request<B>, handler: H) -> hyper::Response<Full<Bytes>>
where
    H: Fn(Request) -> F,
    F: Future<Output = Response>,
{
    let r = if req.method() == Method::GET || req.method() == Method::HEAD {
        handler(Request {
            path: req.uri().path().to_string(),
            query: req.uri().query().unwrap_or("").to_string(),
            headers: req.headers().clone(),
        })
        .await
    } else {
        Response::text(405, "only GET and HEAD are served")
    };
    let mut resp = hyper::Response::new(Full::new(Bytes::from(r.body)));
    *resp.status_mut() =
        StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(r.content_type));
    if r.status == 405 {
        resp.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
    }
    resp
}
