//! Response builder: status line, lowercase headers, `content-length`, `connection: close`,
//! and the exact bytes that go on the wire.

/// One HTTP response. Every response closes its connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// Status code.
    pub status: u16,
    headers: Vec<(String, String)>,
    /// Body bytes; `content-length` is always their length.
    pub body: Vec<u8>,
}

impl Response {
    /// An empty response with `status`.
    pub fn new(status: u16) -> Response {
        Response {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// A JSON response from text the caller already serialised.
    pub fn json(status: u16, body: impl Into<Vec<u8>>) -> Response {
        Response::new(status)
            .header("content-type", "application/json")
            .body(body)
    }

    /// A JSON response from a value.
    pub fn json_value(status: u16, value: &serde_json::Value) -> Response {
        Response::json(status, value.to_string())
    }

    /// `{"error":"<message>"}` with `status`, the message JSON-escaped.
    pub fn error(status: u16, message: &str) -> Response {
        Response::json_value(status, &serde_json::json!({ "error": message }))
    }

    /// Add a header. The name is lowercased. A name or value that could split the head
    /// (CR, LF, NUL) or a name that is not a token is dropped rather than sent.
    pub fn header(mut self, name: &str, value: &str) -> Response {
        let name_ok = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_!#$%&'*+.^`|~".contains(&b));
        let value_ok = !value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0);
        let reserved = name.eq_ignore_ascii_case("content-length") || name.eq_ignore_ascii_case("connection");
        if name_ok && value_ok && !reserved {
            self.headers.push((name.to_ascii_lowercase(), value.to_string()));
        }
        self
    }

    /// Replace the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Response {
        self.body = body.into();
        self
    }

    /// The first value of header `name` (lowercase).
    pub fn header_value(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The wire bytes. With `head_only` (a HEAD request) the body is left out but its length
    /// is still announced.
    pub fn encode(&self, head_only: bool) -> Vec<u8> {
        let mut out = Vec::with_capacity(128 + self.body.len());
        self.status_and_fields(&mut out);
        out.extend_from_slice(
            format!("content-length: {}\r\nconnection: close\r\n\r\n", self.body.len()).as_bytes(),
        );
        if !head_only {
            out.extend_from_slice(&self.body);
        }
        out
    }
}

impl Response {
    /// The head of a response whose body is a stream ended by closing the connection: no
    /// `content-length`, `connection: close`.
    pub fn encode_stream_head(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(128);
        self.status_and_fields(&mut out);
        out.extend_from_slice(b"connection: close\r\n\r\n");
        out
    }

    /// The head of a response whose `content_length` body bytes follow separately.
    pub fn encode_head(&self, content_length: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(256);
        self.status_and_fields(&mut out);
        out.extend_from_slice(
            format!("content-length: {content_length}\r\nconnection: close\r\n\r\n").as_bytes(),
        );
        out
    }

    /// The status line and the header fields (each line ending CRLF).
    fn status_and_fields(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(format!("HTTP/1.1 {} {}\r\n", self.status, reason(self.status)).as_bytes());
        for (name, value) in &self.headers {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// The standard reason phrase for the codes this project sends.
pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        304 => "Not Modified",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        416 => "Range Not Satisfiable",
        421 => "Misdirected Request",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_bytes() {
        let r = Response::error(404, "not found").header("X-Murmur-Thing", "a");
        assert_eq!(
            String::from_utf8(r.encode(false)).unwrap(),
            "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\nx-murmur-thing: a\r\n\
             content-length: 21\r\nconnection: close\r\n\r\n{\"error\":\"not found\"}"
        );
    }

    #[test]
    fn refuses_header_injection_and_reserved_names() {
        let r = Response::new(200)
            .header("x-a", "1\r\nset-cookie: x")
            .header("bad name", "1")
            .header("Content-Length", "99")
            .header("Connection", "keep-alive");
        let text = String::from_utf8(r.encode(true)).unwrap();
        assert_eq!(
            text,
            "HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        );
    }
}
