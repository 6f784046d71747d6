//! The OTLP/HTTP client: one `POST` of a JSON document over plain `http://`, on a std
//! `TcpStream`. An OpenTelemetry Collector (or Jaeger) listens for it on port 4318 at
//! `/v1/traces`. `https://` is refused with what to do instead: orbit carries no TLS stack,
//! and a collector on the same host (or a sidecar) forwards to an https backend.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::error::{Error, Result};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the documents go: host, port and path of an `http://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub url: String,
    pub host: String,
    pub port: u16,
    pub path: String,
    /// Extra request headers (`--header 'K: V'`), checked.
    pub headers: Vec<(String, String)>,
}

impl Endpoint {
    /// Reads `--endpoint URL` and its `--header` values. A URL without a path (or `/`)
    /// gets OTLP's `/v1/traces`.
    pub fn parse(url: &str, headers: &[String]) -> Result<Endpoint> {
        let bad = |why: &str| {
            Error::Usage(format!(
                "--endpoint '{}': {why} (e.g. http://localhost:4318, an OpenTelemetry Collector's OTLP/HTTP receiver)",
                url.escape_debug()
            ))
        };
        if url.starts_with("https://") {
            return Err(Error::Usage(format!(
                "--endpoint '{}': https is not supported by orbit's exporter; send to an OpenTelemetry Collector on this host over http (http://localhost:4318) and let it forward over TLS, or write the document with --output FILE",
                url.escape_debug()
            )));
        }
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| bad("not an http:// URL"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(bad(
                "no host (user names in the URL are not supported: use --header)",
            ));
        }
        let port_of = |p: &str| {
            p.parse::<u16>()
                .map_err(|_| bad("the port is not a number from 1 to 65535"))
        };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6.split_once(']').ok_or_else(|| bad("an unclosed ["))?;
            let port = match after.strip_prefix(':') {
                Some(p) => port_of(p)?,
                None if after.is_empty() => 80,
                None => return Err(bad("text after the address")),
            };
            (format!("[{h}]"), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), port_of(p)?),
                None => (authority.to_string(), 80),
            }
        };
        if host.is_empty() || port == 0 {
            return Err(bad("no host or port"));
        }
        if path.bytes().any(|b| b.is_ascii_control() || b == b' ') {
            return Err(bad("the path holds spaces or control characters"));
        }
        let path = if path.is_empty() || path == "/" {
            "/v1/traces".to_string()
        } else {
            path.to_string()
        };
        let headers = headers
            .iter()
            .map(|h| parse_header(h))
            .collect::<Result<Vec<_>>>()?;
        Ok(Endpoint {
            url: url.to_string(),
            host,
            port,
            path,
            headers,
        })
    }

    /// POSTs `body` as `application/json`; a non-2xx answer is an error naming it.
    pub fn post(&self, body: &str) -> Result<()> {
        let fail = |e: std::io::Error| {
            Error::io(
                format!(
                    "cannot send the trace to {} (is the OTLP/HTTP receiver running and listening there?)",
                    self.url
                ),
                e,
            )
        };
        let addrs: Vec<_> = (
            self.host.trim_start_matches('[').trim_end_matches(']'),
            self.port,
        )
            .to_socket_addrs()
            .map_err(fail)?
            .collect();
        let mut last = None;
        let mut stream = None;
        for a in &addrs {
            match TcpStream::connect_timeout(a, CONNECT_TIMEOUT) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        let mut stream = match stream {
            Some(s) => s,
            None => {
                return Err(fail(last.unwrap_or_else(|| {
                    std::io::Error::new(std::io::ErrorKind::NotFound, "the host has no address")
                })));
            }
        };
        stream.set_read_timeout(Some(IO_TIMEOUT)).map_err(fail)?;
        stream.set_write_timeout(Some(IO_TIMEOUT)).map_err(fail)?;
        let host = if self.port == 80 {
            self.host.clone()
        } else {
            format!("{}:{}", self.host, self.port)
        };
        let mut head = format!(
            "POST {} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nUser-Agent: orbit/{}\r\nConnection: close\r\n",
            self.path,
            body.len(),
            env!("CARGO_PKG_VERSION")
        );
        for (k, v) in &self.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).map_err(fail)?;
        stream.write_all(body.as_bytes()).map_err(fail)?;
        stream.flush().map_err(fail)?;
        let mut reader = BufReader::new(stream);
        let mut status_line = String::new();
        reader.read_line(&mut status_line).map_err(fail)?;
        let code = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse::<u16>().ok());
        let Some(code) = code else {
            return Err(Error::Refused(format!(
                "{} did not answer as an HTTP server ({:?}): check the URL and port of the OTLP/HTTP receiver (4318 for a Collector)",
                self.url,
                status_line.trim_end()
            )));
        };
        if (200..300).contains(&code) {
            return Ok(());
        }
        // What the receiver said, for the message: the rest of its head and a short body.
        let mut said = String::new();
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap_or(0) > 0 {
            if line == "\r\n" || line == "\n" {
                break;
            }
            line.clear();
        }
        let _ = reader.take(512).read_to_string(&mut said);
        let said: String = said
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        let hint = match code {
            401 | 403 => "pass the credentials it wants with --header 'Authorization: ...'",
            404 => "check the path (an OTLP/HTTP receiver takes traces at /v1/traces)",
            413 => "the receiver refuses a document this large: raise its limit",
            415 => {
                "the receiver does not take OTLP/JSON here: enable JSON on its OTLP/HTTP receiver"
            }
            _ => {
                "check the receiver's log; the export can be run again (the same spans keep their ids)"
            }
        };
        Err(Error::Refused(format!(
            "the OTLP receiver at http://{}:{}{} answered HTTP {code}{}: {hint}",
            self.host,
            self.port,
            self.path,
            if said.trim().is_empty() {
                String::new()
            } else {
                format!(" ({})", said.trim())
            }
        )))
    }
}

/// `K: V` → (K, V); K an HTTP token, V without control characters.
fn parse_header(h: &str) -> Result<(String, String)> {
    let bad = || {
        Error::Usage(format!(
            "--header '{}': write it as 'Name: value' (e.g. 'Authorization: Bearer TOKEN'), one line",
            h.escape_debug()
        ))
    };
    let (k, v) = h.split_once(':').ok_or_else(bad)?;
    let k = k.trim();
    let v = v.trim();
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if k.is_empty() || !k.chars().all(token) || v.chars().any(|c| c.is_control()) {
        return Err(bad());
    }
    let reserved = ["host", "content-length", "content-type", "connection"];
    if reserved.contains(&k.to_ascii_lowercase().as_str()) {
        return Err(Error::Usage(format!(
            "--header '{}': orbit sets {k} itself",
            h.escape_debug()
        )));
    }
    Ok((k.to_string(), v.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_without_a_path_gets_v1_traces() {
        let e = Endpoint::parse("http://localhost:4318", &[]).unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.path.as_str()),
            ("localhost", 4318, "/v1/traces")
        );
        let e = Endpoint::parse("http://collector/", &[]).unwrap();
        assert_eq!((e.port, e.path.as_str()), (80, "/v1/traces"));
        let e = Endpoint::parse("http://127.0.0.1:9/otlp/v1/traces", &[]).unwrap();
        assert_eq!(e.path, "/otlp/v1/traces");
    }

    #[test]
    fn https_and_bad_urls_and_headers_are_refused_with_the_reason() {
        let https = Endpoint::parse("https://api.example.com", &[]).unwrap_err();
        assert!(
            https.to_string().contains("https is not supported"),
            "{https}"
        );
        assert!(Endpoint::parse("localhost:4318", &[]).is_err());
        assert!(Endpoint::parse("http://h:99999", &[]).is_err());
        let h = Endpoint::parse("http://h:1", &["Authorization: Bearer x".into()]).unwrap();
        assert_eq!(h.headers, vec![("Authorization".into(), "Bearer x".into())]);
        assert!(Endpoint::parse("http://h:1", &["no colon".into()]).is_err());
        assert!(Endpoint::parse("http://h:1", &["X: a\r\nY: b".into()]).is_err());
        assert!(Endpoint::parse("http://h:1", &["Content-Length: 1".into()]).is_err());
    }
}
