//! A client of the API, over the Unix socket or TCP: what `ribshard show`, `clear` and
//! `configure` use.

use bytes::{Buf, Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Where the daemon answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Unix(p) => write!(f, "{}", p.display()),
            Endpoint::Tcp(a) => write!(f, "{a}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach the daemon at {endpoint}: {source} (is `ribshard run` running, with its [management] socket there?)")]
    Connect {
        endpoint: Endpoint,
        source: std::io::Error,
    },
    #[error("the daemon's answer broke off: {0}")]
    Http(#[from] hyper::Error),
    #[error("{message}")]
    Status { status: StatusCode, message: String },
    #[error("the daemon's answer is not what this client expects: {0}")]
    Decode(#[from] serde_json::Error),
}

/// A connection to the API (one request at a time).
pub struct Client {
    endpoint: Endpoint,
}

impl Client {
    pub fn new(endpoint: Endpoint) -> Client {
        Client { endpoint }
    }

    async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<hyper::Response<Incoming>, ClientError> {
        let connect_err = |source| ClientError::Connect {
            endpoint: self.endpoint.clone(),
            source,
        };
        let mut sender = match &self.endpoint {
            Endpoint::Unix(p) => {
                let s = tokio::net::UnixStream::connect(p)
                    .await
                    .map_err(connect_err)?;
                handshake(s).await?
            }
            Endpoint::Tcp(a) => {
                let s = tokio::net::TcpStream::connect(a)
                    .await
                    .map_err(connect_err)?;
                handshake(s).await?
            }
        };
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, "ribshard")
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| ClientError::Status {
                status: StatusCode::BAD_REQUEST,
                message: e.to_string(),
            })?;
        let resp = sender.send_request(req).await?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        let status = resp.status();
        let bytes = resp.into_body().collect().await?.to_bytes();
        let message = serde_json::from_slice::<crate::api::ErrorReply>(&bytes)
            .map(|e| e.error)
            .unwrap_or_else(|_| String::from_utf8_lossy(&bytes).into_owned());
        Err(ClientError::Status { status, message })
    }

    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        let resp = self.request(Method::GET, path, None).await?;
        let bytes = resp.into_body().collect().await?.to_bytes();
        Ok(serde_json::from_slice(&bytes)?)
    }

    /// The raw JSON of a reply (`--json`).
    pub async fn get_raw(&self, path: &str) -> Result<Bytes, ClientError> {
        let resp = self.request(Method::GET, path, None).await?;
        Ok(resp.into_body().collect().await?.to_bytes())
    }

    pub async fn post<T: DeserializeOwned, B: Serialize>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ClientError> {
        let body = serde_json::to_vec(body)?;
        let resp = self.request(Method::POST, path, Some(body)).await?;
        let bytes = resp.into_body().collect().await?.to_bytes();
        Ok(serde_json::from_slice(&bytes)?)
    }

    /// A reply copied to `out` as it arrives; stops quietly when `out` is closed (a pipe
    /// into `head`).
    pub async fn copy(&self, path: &str, out: &mut impl std::io::Write) -> Result<(), ClientError> {
        let resp = self.request(Method::GET, path, None).await?;
        let mut body = resp.into_body();
        while let Some(f) = body.frame().await {
            if let Ok(data) = f?.into_data() {
                // Flushed a chunk at a time: a stream (`monitor`) shows as it comes.
                if out.write_all(&data).and_then(|()| out.flush()).is_err() {
                    return Ok(());
                }
            }
        }
        let _ = out.flush();
        Ok(())
    }

    /// A reply of JSON lines, read as it arrives.
    pub async fn lines(&self, path: &str) -> Result<Lines, ClientError> {
        let resp = self.request(Method::GET, path, None).await?;
        Ok(Lines {
            body: resp.into_body(),
            buf: BytesMut::new(),
            done: false,
        })
    }
}

async fn handshake<S>(
    stream: S,
) -> Result<hyper::client::conn::http1::SendRequest<Full<Bytes>>, ClientError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

/// JSON lines as they arrive.
pub struct Lines {
    body: Incoming,
    buf: BytesMut,
    done: bool,
}

impl Lines {
    /// The next line (without its newline), or `None` at the end.
    pub async fn next_line(&mut self) -> Result<Option<Bytes>, ClientError> {
        loop {
            if let Some(i) = self.buf.iter().position(|b| *b == b'\n') {
                let line = self.buf.split_to(i + 1).freeze();
                return Ok(Some(line.slice(..i)));
            }
            if self.done {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                let rest = self.buf.split().freeze();
                return Ok(Some(rest));
            }
            match self.body.frame().await {
                Some(f) => {
                    if let Ok(mut data) = f?.into_data() {
                        while data.has_remaining() {
                            let chunk = data.chunk();
                            self.buf.extend_from_slice(chunk);
                            let n = chunk.len();
                            data.advance(n);
                        }
                    }
                }
                None => self.done = true,
            }
        }
    }

    /// The next line decoded.
    pub async fn next<T: DeserializeOwned>(&mut self) -> Result<Option<T>, ClientError> {
        match self.next_line().await? {
            Some(l) => Ok(Some(serde_json::from_slice(&l)?)),
            None => Ok(None),
        }
    }
}
