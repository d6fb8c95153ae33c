use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

// ------------------------------------------------------------------------------------ HTTP

/// A minimal HTTP/1.1 client (one request per connection) so the tests need no HTTP client
/// crate, and can send raw paths (`%2e%2e%2f`) exactly as written.
#[derive(Debug, Clone)]
pub struct Http {
    /// Server address.
    pub addr: SocketAddr,
    /// Bearer token sent with every request.
    pub token: Option<String>,
}

/// An HTTP response.
#[derive(Debug, Clone)]
pub struct Resp {
    /// Status code.
    pub status: u16,
    /// Headers (lower-case names).
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: Vec<u8>,
}

impl Resp {
    /// The body as JSON (panics with the body otherwise).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "status {}: body is not JSON ({e}): {}",
                self.status,
                self.text()
            )
        })
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Asserts a 2xx status and answers the JSON body (`Null` when empty).
    pub fn ok(&self) -> Value {
        assert!(
            (200..300).contains(&self.status),
            "expected 2xx, got {}: {}",
            self.status,
            self.text()
        );
        if self.body.is_empty() {
            Value::Null
        } else {
            self.json()
        }
    }

    /// Asserts a 2xx status and answers the body as text.
    pub fn ok_text(&self) -> String {
        assert!(
            (200..300).contains(&self.status),
            "expected 2xx, got {}: {}",
            self.status,
            self.text()
        );
        self.text()
    }

    /// Asserts the status.
    pub fn expect(&self, status: u16) -> &Self {
        assert_eq!(self.status, status, "body: {}", self.text());
        self
    }
}

impl Http {
    /// The same client with a bearer token.
    pub fn with_token(&self, t: &str) -> Http {
        Http {
            addr: self.addr,
            token: Some(t.to_string()),
        }
    }

    /// `GET path`.
    pub async fn get(&self, path: &str) -> Resp {
        self.raw("GET", path, None, &[]).await
    }

    /// `DELETE path`.
    pub async fn delete(&self, path: &str) -> Resp {
        self.raw("DELETE", path, None, &[]).await
    }

    /// `POST path` with a JSON body.
    pub async fn post(&self, path: &str, body: &Value) -> Resp {
        self.raw("POST", path, Some(body.to_string().as_bytes()), &[])
            .await
    }

    /// `PUT path` with a JSON body.
    pub async fn put(&self, path: &str, body: &Value) -> Resp {
        self.raw("PUT", path, Some(body.to_string().as_bytes()), &[])
            .await
    }

    /// `PATCH path` with a JSON body.
    pub async fn patch(&self, path: &str, body: &Value) -> Resp {
        self.raw("PATCH", path, Some(body.to_string().as_bytes()), &[])
            .await
    }

    /// Any request; `path` is sent exactly as given. Bounded by 30 s.
    pub async fn raw(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        headers: &[(&str, &str)],
    ) -> Resp {
        tokio::time::timeout(
            Duration::from_secs(30),
            self.raw_inner(method, path, body, headers),
        )
        .await
        .unwrap_or_else(|_| panic!("{method} {path}: no answer within 30 s"))
        .unwrap_or_else(|| panic!("{method} {path}: connection failed or unparsable response"))
    }

    /// Like [`Http::raw`] but answers `None` instead of panicking when the connection fails
    /// (e.g. the server was killed mid-request). Bounded by 30 s.
    pub async fn try_raw(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        headers: &[(&str, &str)],
    ) -> Option<Resp> {
        tokio::time::timeout(
            Duration::from_secs(30),
            self.raw_inner(method, path, body, headers),
        )
        .await
        .ok()
        .flatten()
    }

    async fn raw_inner(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        headers: &[(&str, &str)],
    ) -> Option<Resp> {
        let mut s = TcpStream::connect(self.addr).await.ok()?;
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n",
            self.addr
        );
        if let Some(t) = &self.token {
            req.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        if let Some(b) = body {
            req.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                b.len()
            ));
        }
        req.push_str("\r\n");
        let mut bytes = req.into_bytes();
        bytes.extend_from_slice(body.unwrap_or_default());
        // Write and read at once: the server may answer (e.g. 413) and close before the body is
        // sent. A reset after the answer still leaves the answer in `buf`.
        let (mut rd, mut wr) = s.split();
        let mut buf = Vec::new();
        let ((), _) = tokio::join!(
            async {
                let _ = wr.write_all(&bytes).await;
            },
            rd.read_to_end(&mut buf)
        );
        parse_response(&buf)
    }
}

fn parse_response(buf: &[u8]) -> Option<Resp> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&buf[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let raw = &buf[end + 4..];
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        let mut out = Vec::new();
        let mut rest = raw;
        loop {
            let nl = rest.windows(2).position(|w| w == b"\r\n")?;
            let size = usize::from_str_radix(
                std::str::from_utf8(&rest[..nl])
                    .ok()?
                    .split(';')
                    .next()?
                    .trim(),
                16,
            )
            .ok()?;
            rest = &rest[nl + 2..];
            if size == 0 {
                break;
            }
            out.extend_from_slice(rest.get(..size)?);
            rest = rest.get(size + 2..)?;
        }
        out
    } else {
        match headers
            .iter()
            .find(|(k, _)| k == "content-length")
            .and_then(|(_, v)| v.parse::<usize>().ok())
        {
            Some(n) => raw.get(..n)?.to_vec(),
            None => raw.to_vec(),
        }
    };
    Some(Resp {
        status,
        headers,
        body,
    })
}
