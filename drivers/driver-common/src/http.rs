//! A POST over wasi:http `outgoing-handler`, reading the whole response body (capped).
//! Sets no auth header: the host attaches the credential for the endpoint's origin.

use crate::drive::{HttpResponse, TransportError};
use crate::url::Url;
use wasip2::http::outgoing_handler::{handle, ErrorCode};
use wasip2::http::types::{
    Fields, IncomingBody, Method, OutgoingBody, OutgoingRequest, RequestOptions, Scheme,
};
use wasip2::io::streams::StreamError;

/// The most bytes one `blocking-write-and-flush` accepts.
const WRITE_CHUNK: usize = 4096;
const READ_CHUNK: u64 = 64 * 1024;

/// POST `body` to `url` with `headers` (and a content-length); the response body is read
/// in full, failing with [`TransportError::TooLarge`] past `cap` bytes.
pub fn post(
    url: &Url,
    headers: &[(&str, &str)],
    body: &[u8],
    cap: usize,
) -> Result<HttpResponse, TransportError> {
    post_within(url, headers, body, cap, None)
}

/// [`post`], given up when connecting, the first response byte or any later gap between
/// bytes takes longer than `timeout` (the host's own limits apply when `None`).
pub fn post_within(
    url: &Url,
    headers: &[(&str, &str)],
    body: &[u8],
    cap: usize,
    timeout: Option<std::time::Duration>,
) -> Result<HttpResponse, TransportError> {
    let fields = Fields::new();
    let length = body.len().to_string();
    for (name, value) in headers
        .iter()
        .copied()
        .chain([("content-length", length.as_str())])
    {
        fields
            .append(name, value.as_bytes())
            .map_err(|e| TransportError::Failed(format!("header {name}: {e:?}")))?;
    }
    let request = OutgoingRequest::new(fields);
    let scheme = if url.https { Scheme::Https } else { Scheme::Http };
    let set = [
        request.set_method(&Method::Post),
        request.set_scheme(Some(&scheme)),
        request.set_authority(Some(&url.authority)),
        request.set_path_with_query(Some(&url.path_and_query)),
    ];
    if set.iter().any(Result::is_err) {
        return Err(TransportError::Failed(format!(
            "the host refused the URL parts of {url}"
        )));
    }
    let outgoing = request
        .body()
        .map_err(|()| TransportError::Failed("no request body stream".into()))?;
    // Send first, then write: the host streams the body to the connection as it is written.
    let future = handle(request, timeout.map(options)).map_err(from_code)?;
    let written = write_body(&outgoing, body);
    let finished = match written {
        Ok(()) => OutgoingBody::finish(outgoing, None).map_err(|e| format!("{e:?}")),
        Err(why) => {
            drop(outgoing);
            Err(why)
        }
    };
    future.subscribe().block();
    let response = match future.get() {
        Some(Ok(Ok(r))) => r,
        Some(Ok(Err(code))) => return Err(from_code(code)),
        Some(Err(())) => return Err(TransportError::Failed("response already taken".into())),
        None => return Err(TransportError::Failed("response not ready".into())),
    };
    drop(future);
    // A server may answer before the whole body went out (413, 401): keep its answer then.
    if let Err(why) = finished {
        if (200..300).contains(&response.status()) {
            return Err(TransportError::Failed(format!("sending the request body: {why}")));
        }
    }
    let status = response.status();
    let retry_after = {
        let headers = response.headers();
        let values = headers.get("retry-after");
        values.first().map(|v| String::from_utf8_lossy(v).into_owned())
    };
    let incoming = response
        .consume()
        .map_err(|()| TransportError::Failed("response body already consumed".into()))?;
    let read = read_body(&incoming, cap, status);
    drop(IncomingBody::finish(incoming));
    drop(response);
    Ok(HttpResponse {
        status,
        retry_after,
        body: read?,
    })
}

/// Request options giving up after `timeout` at each wait (an option the host does not
/// support is left at its default).
fn options(timeout: std::time::Duration) -> RequestOptions {
    let o = RequestOptions::new();
    let ns = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
    let _ = o.set_connect_timeout(Some(ns));
    let _ = o.set_first_byte_timeout(Some(ns));
    let _ = o.set_between_bytes_timeout(Some(ns));
    o
}

fn write_body(outgoing: &OutgoingBody, body: &[u8]) -> Result<(), String> {
    let stream = outgoing
        .write()
        .map_err(|()| "no body output stream".to_string())?;
    for chunk in body.chunks(WRITE_CHUNK) {
        stream
            .blocking_write_and_flush(chunk)
            .map_err(|e| stream_error(&e))?;
    }
    Ok(())
}

fn read_body(incoming: &IncomingBody, cap: usize, status: u16) -> Result<Vec<u8>, TransportError> {
    let stream = incoming
        .stream()
        .map_err(|()| TransportError::Failed("no response body stream".into()))?;
    let mut buf = Vec::new();
    loop {
        match stream.blocking_read(READ_CHUNK) {
            Ok(chunk) => {
                if buf.len().saturating_add(chunk.len()) > cap {
                    return Err(TransportError::TooLarge { status });
                }
                buf.extend_from_slice(&chunk);
            }
            Err(StreamError::Closed) => return Ok(buf),
            Err(e) => {
                return Err(TransportError::Failed(format!(
                    "the response body broke after {} bytes: {}",
                    buf.len(),
                    stream_error(&e)
                )))
            }
        }
    }
}

fn stream_error(e: &StreamError) -> String {
    match e {
        StreamError::Closed => "stream closed".into(),
        StreamError::LastOperationFailed(err) => match wasip2::http::types::http_error_code(err) {
            Some(code) => format!("{code:?}"),
            None => err.to_debug_string(),
        },
    }
}

fn from_code(code: ErrorCode) -> TransportError {
    match code {
        ErrorCode::HttpRequestDenied => {
            TransportError::Denied("HttpRequestDenied (not in capabilities.network.allow)".into())
        }
        other => TransportError::Failed(format!("{other:?}")),
    }
}
