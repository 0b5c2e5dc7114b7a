//! A forward HTTP proxy on loopback for the proxy tests (issue 23 item 2): what a cluster's
//! egress proxy does, small enough to read.
//!
//! - `CONNECT host:port` opens a tunnel (HTTPS through the proxy);
//! - an absolute-form request (`GET http://host:port/path HTTP/1.1`) is forwarded in origin
//!   form (plain HTTP through the proxy), one request per connection (`Connection: close`
//!   both ways, so a client never sends a request for another host down the same upstream).
//!
//! It counts, per `host:port` the client asked for, the tunnels and requests it forwarded:
//! that count rising is what "the pull went through the proxy" means in a test. It resolves no
//! name: each `host:port` must be given a route ([`ForwardProxy::start`]), or be an IP
//! address, so a test never reaches past loopback; anything else is answered 502.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use crate::HarnessError;

/// Most bytes of a request head read.
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// A running proxy; dropping it stops it (tunnels already open finish on their own).
pub struct ForwardProxy {
    address: SocketAddr,
    forwarded: Arc<Mutex<BTreeMap<String, usize>>>,
    task: tokio::task::JoinHandle<()>,
}

impl ForwardProxy {
    /// Starts a proxy on a free loopback port that connects each `host:port` of `routes` to
    /// its address (an IP `host:port` without a route is connected to as written).
    ///
    /// # Errors
    /// When no loopback port can be bound.
    pub async fn start(routes: HashMap<String, SocketAddr>) -> Result<Self, HarnessError> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(HarnessError::io("binding the forward proxy"))?;
        let address = listener
            .local_addr()
            .map_err(HarnessError::io("reading the forward proxy's address"))?;
        let forwarded = Arc::new(Mutex::new(BTreeMap::new()));
        let routes = Arc::new(routes);
        let counts = forwarded.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(serve(client, routes.clone(), counts.clone()));
            }
        });
        Ok(Self {
            address,
            forwarded,
            task,
        })
    }

    /// `http://127.0.0.1:<port>`, for `Proxy.status.httpProxy` / `httpsProxy`.
    #[must_use]
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// How many tunnels and requests were forwarded to `authority` (`host:port`, as the client
    /// wrote it).
    #[must_use]
    pub fn forwarded_to(&self, authority: &str) -> usize {
        self.forwarded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(authority)
            .copied()
            .unwrap_or(0)
    }

    /// Every `host:port` forwarded to, with its count.
    #[must_use]
    pub fn forwarded(&self) -> BTreeMap<String, usize> {
        self.forwarded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Drop for ForwardProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One client connection: one tunnel or one forwarded request.
async fn serve(
    mut client: TcpStream,
    routes: Arc<HashMap<String, SocketAddr>>,
    forwarded: Arc<Mutex<BTreeMap<String, usize>>>,
) {
    let Some((head, rest)) = read_head(&mut client).await else {
        return;
    };
    let Some(request) = Request::parse(&head) else {
        let _ = client.write_all(&answer(400, "Bad Request")).await;
        return;
    };
    let Some(target) = route(&request.authority, &routes) else {
        let _ = client.write_all(&answer(502, "Bad Gateway")).await;
        return;
    };
    let Ok(mut upstream) = TcpStream::connect(target).await else {
        let _ = client.write_all(&answer(502, "Bad Gateway")).await;
        return;
    };
    *forwarded
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(request.authority.clone())
        .or_default() += 1;
    let sent = if request.method == "CONNECT" {
        client
            .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            .await
    } else {
        upstream.write_all(&request.origin_form(&head)).await
    };
    if sent.is_err() || upstream.write_all(&rest).await.is_err() {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}

/// Reads up to the end of the request head; the head and what followed it.
async fn read_head(client: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buffer.split_off(end + 4);
            return Some((String::from_utf8(buffer).ok()?, rest));
        }
        if buffer.len() > MAX_HEAD_BYTES {
            return None;
        }
        let n = client.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(chunk.get(..n)?);
    }
}

/// The request line, parsed.
struct Request {
    method: String,
    /// `host:port` (the port defaulted for an absolute-form `http://` URL without one).
    authority: String,
    /// The path and query of an absolute-form request.
    path: String,
    version: String,
}

impl Request {
    fn parse(head: &str) -> Option<Self> {
        let line = head.lines().next()?;
        let mut parts = line.split(' ');
        let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
        if method == "CONNECT" {
            return Some(Self {
                method: method.to_owned(),
                authority: target.to_owned(),
                path: String::new(),
                version: version.to_owned(),
            });
        }
        let rest = target.strip_prefix("http://")?;
        let (authority, path) = match rest.find('/') {
            Some(slash) => rest.split_at(slash),
            None => (rest, "/"),
        };
        let has_port = authority.rsplit_once(':').is_some_and(|(host, port)| {
            !port.is_empty()
                && port.bytes().all(|b| b.is_ascii_digit())
                && (!host.contains(':') || host.ends_with(']'))
        });
        let authority = if has_port {
            authority.to_owned()
        } else {
            format!("{authority}:80")
        };
        Some(Self {
            method: method.to_owned(),
            authority,
            path: path.to_owned(),
            version: version.to_owned(),
        })
    }

    /// The head to send upstream: the request line in origin form, the client's headers but
    /// the hop-by-hop ones, and `Connection: close`.
    fn origin_form(&self, head: &str) -> Vec<u8> {
        let mut out = format!("{} {} {}\r\n", self.method, self.path, self.version);
        for line in head.lines().skip(1).filter(|l| !l.is_empty()) {
            let name = line
                .split(':')
                .next()
                .unwrap_or_default()
                .to_ascii_lowercase();
            if !matches!(
                name.as_str(),
                "connection" | "proxy-connection" | "proxy-authorization" | "keep-alive"
            ) {
                out.push_str(line);
                out.push_str("\r\n");
            }
        }
        out.push_str("Connection: close\r\n\r\n");
        out.into_bytes()
    }
}

/// Where `authority` is connected to: its route, else itself when it names an IP address.
fn route(authority: &str, routes: &HashMap<String, SocketAddr>) -> Option<SocketAddr> {
    routes
        .get(authority)
        .copied()
        .or_else(|| authority.parse().ok())
}

fn answer(code: u16, text: &str) -> Vec<u8> {
    format!("HTTP/1.1 {code} {text}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").into_bytes()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn request_lines_are_read_in_both_forms() {
        let connect = Request::parse("CONNECT 0.0.0.0:5000 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        assert_eq!(
            (connect.method.as_str(), connect.authority.as_str()),
            ("CONNECT", "0.0.0.0:5000")
        );
        let get = Request::parse(
            "GET http://0.0.0.0:5000/v2/x/manifests/v1?a=b HTTP/1.1\r\nHost: 0.0.0.0:5000\r\n\
             Proxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n",
        )
        .unwrap();
        assert_eq!(get.authority, "0.0.0.0:5000");
        assert_eq!(
            String::from_utf8(get.origin_form(
                "GET http://0.0.0.0:5000/v2/x/manifests/v1?a=b HTTP/1.1\r\nHost: 0.0.0.0:5000\r\n\
                 Proxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n"
            ))
            .unwrap(),
            "GET /v2/x/manifests/v1?a=b HTTP/1.1\r\nHost: 0.0.0.0:5000\r\nAccept: */*\r\n\
             Connection: close\r\n\r\n"
        );
        assert_eq!(
            Request::parse("HEAD http://registry.test HTTP/1.1\r\n\r\n")
                .unwrap()
                .authority,
            "registry.test:80"
        );
        assert!(Request::parse("GET /origin-form HTTP/1.1\r\n\r\n").is_none());
    }

    #[test]
    fn only_routes_and_addresses_are_connected_to() {
        let routes = HashMap::from([(
            "registry.test:5000".to_owned(),
            "127.0.0.1:6000".parse().unwrap(),
        )]);
        assert_eq!(
            route("registry.test:5000", &routes),
            Some("127.0.0.1:6000".parse().unwrap())
        );
        assert_eq!(
            route("0.0.0.0:7000", &routes),
            Some("0.0.0.0:7000".parse().unwrap())
        );
        assert_eq!(route("quay.io:443", &routes), None, "no name is resolved");
    }
}
