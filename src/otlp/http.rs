//! The OTLP/HTTP client: one `POST` of a JSON document. Over plain `http://` on a std
//! `TcpStream` (an OpenTelemetry Collector or Jaeger listens on port 4318 at `/v1/traces`);
//! over `https://` (a vendor's endpoint) through the machine's `curl`, as the loop's own
//! notifications go: orbit carries no TLS stack of its own. curl is given its settings in a
//! private file (mode 0600, removed after), so that no header (an API key) is on a command
//! line another process can read, and it reads no `~/.curlrc`, follows no redirect and
//! speaks https only.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::error::{Error, Result};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the documents go: host, port and path of an `http://` or `https://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub url: String,
    /// `https://`: sent through curl.
    pub tls: bool,
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
        let (tls, rest) = match (url.strip_prefix("https://"), url.strip_prefix("http://")) {
            (Some(rest), _) => (true, rest),
            (None, Some(rest)) => (false, rest),
            _ => return Err(bad("not an http:// or https:// URL")),
        };
        let default_port = if tls { 443 } else { 80 };
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
                None if after.is_empty() => default_port,
                None => return Err(bad("text after the address")),
            };
            (format!("[{h}]"), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), port_of(p)?),
                None => (authority.to_string(), default_port),
            }
        };
        if host.is_empty() || port == 0 {
            return Err(bad("no host or port"));
        }
        if url
            .bytes()
            .any(|b| b.is_ascii_control() || b == b' ' || b == b'"' || b == b'\\')
        {
            return Err(bad(
                "the URL holds spaces, quotes, backslashes or control characters",
            ));
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
            tls,
            host,
            port,
            path,
            headers,
        })
    }

    /// The URL the document is POSTed to: the scheme, the host and port, the path.
    fn target(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}:{}{}", self.host, self.port, self.path)
    }

    /// POSTs `body` as `application/json`; a non-2xx answer is an error naming it.
    pub fn post(&self, body: &str) -> Result<()> {
        if self.tls {
            return self.post_with_curl(body);
        }
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
        Err(self.refusal(code, &said))
    }

    /// `body` POSTed through curl, its settings in a private file: the answer's code read
    /// from curl's `--write-out`, the answer's body kept for the message.
    fn post_with_curl(&self, body: &str) -> Result<()> {
        let url = self.target();
        let curl = crate::schedule::local::which("curl").ok_or_else(|| {
            Error::Usage(format!(
                "--endpoint {url}: sending over https needs curl, which is not on PATH: install curl (apt-get install curl), or send to an OpenTelemetry Collector on this host over http (http://localhost:4318)"
            ))
        })?;
        let mut conf = format!(
            "url = \"{url}\"\nrequest = \"POST\"\nproto = \"=https\"\nsilent\nshow-error\nconnect-timeout = {}\nmax-time = {}\ndata-binary = \"@-\"\nwrite-out = \"\\n%{{http_code}}\"\nheader = \"Content-Type: application/json\"\nheader = \"User-Agent: orbit/{}\"\n",
            CONNECT_TIMEOUT.as_secs(),
            (CONNECT_TIMEOUT + IO_TIMEOUT).as_secs(),
            env!("CARGO_PKG_VERSION")
        );
        for (k, v) in &self.headers {
            conf.push_str(&format!("header = \"{k}: {}\"\n", curl_quote(v)));
        }
        let file = PrivateFile::write(&conf)
            .map_err(|e| Error::io("cannot write curl's settings for the export".to_string(), e))?;
        let fail = |e: std::io::Error| {
            Error::io(
                format!("cannot send the trace to {url} through {}", curl.display()),
                e,
            )
        };
        // `-q` first: no ~/.curlrc is read.
        let mut child = Command::new(&curl)
            .arg("-q")
            .arg("--config")
            .arg(&file.0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(fail)?;
        let mut stdin = child.stdin.take().expect("piped");
        let body = body.to_string();
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(body.as_bytes());
        });
        let out = child.wait_with_output().map_err(fail)?;
        let _ = writer.join();
        drop(file);
        let text = String::from_utf8_lossy(&out.stdout);
        let (said, code) = text.rsplit_once('\n').unwrap_or(("", &text));
        match code.trim().parse::<u16>() {
            Ok(code) if (200..300).contains(&code) => Ok(()),
            Ok(code) if code != 0 => Err(self.refusal(code, said)),
            _ => {
                let why = String::from_utf8_lossy(&out.stderr);
                let why: String = why
                    .trim()
                    .chars()
                    .map(|c| if c.is_control() { ' ' } else { c })
                    .take(300)
                    .collect();
                Err(Error::Refused(format!(
                    "cannot send the trace to {url}: {} (curl exit {}){}",
                    if why.is_empty() {
                        "no answer"
                    } else {
                        why.as_str()
                    },
                    out.status.code().unwrap_or(-1),
                    if why.contains("certificate") {
                        ": a receiver with a certificate of its own CA needs CURL_CA_BUNDLE=/path/to/ca.pem"
                    } else {
                        ""
                    }
                )))
            }
        }
    }

    /// What a receiver's non-2xx answer means, with what to do.
    fn refusal(&self, code: u16, said: &str) -> Error {
        let said: String = said
            .chars()
            .take(512)
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
        Error::Refused(format!(
            "the OTLP receiver at {} answered HTTP {code}{}: {hint}",
            self.target(),
            if said.trim().is_empty() {
                String::new()
            } else {
                format!(" ({})", said.trim())
            }
        ))
    }
}

/// A value for a double-quoted curl config string: `\` and `"` escaped (a header value
/// holds no control character: [`parse_header`]).
fn curl_quote(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"")
}

/// A file only this user can read (mode 0600, created anew), removed when dropped.
struct PrivateFile(PathBuf);

impl PrivateFile {
    fn write(text: &str) -> std::io::Result<PrivateFile> {
        use std::os::unix::fs::OpenOptionsExt;
        let dir = std::env::temp_dir();
        for attempt in 0..100u32 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let path = dir.join(format!(
                "orbit-otlp-{}-{nanos}-{attempt}.curlrc",
                std::process::id()
            ));
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
            {
                Ok(mut f) => {
                    let file = PrivateFile(path);
                    f.write_all(text.as_bytes())?;
                    f.sync_all()?;
                    return Ok(file);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!("no free name in {}", dir.display()),
        ))
    }
}

impl Drop for PrivateFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The variables OpenTelemetry's exporters take their headers from, the traces' own first.
const HEADER_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_EXPORTER_OTLP_HEADERS",
];

/// The request headers OpenTelemetry's variables name (`key=value,key2=value2`, each value
/// percent-encoded), as `K: V` lines, from the first of [`HEADER_VARS`] that is set: a key
/// then stays off orbit's command line. A name `--header` gives too is left to it (`given`
/// wins). `var` reads a variable.
pub fn env_headers(var: impl Fn(&str) -> Option<String>, given: &[String]) -> Result<Vec<String>> {
    let Some((name, text)) = HEADER_VARS
        .iter()
        .find_map(|n| var(n).filter(|v| !v.trim().is_empty()).map(|v| (*n, v)))
    else {
        return Ok(Vec::new());
    };
    let given: Vec<String> = given
        .iter()
        .filter_map(|h| {
            h.split_once(':')
                .map(|(k, _)| k.trim().to_ascii_lowercase())
        })
        .collect();
    let mut out = Vec::new();
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || {
            Error::Usage(format!(
                "{name}: '{}' is not key=value (the headers are written key=value,key2=value2, each value percent-encoded)",
                pair.escape_debug()
            ))
        };
        let (k, v) = pair.split_once('=').ok_or_else(bad)?;
        let v = percent_decode(v.trim())
            .filter(|v| !v.chars().any(char::is_control))
            .ok_or_else(bad)?;
        let k = k.trim();
        if given.contains(&k.to_ascii_lowercase()) {
            continue;
        }
        let line = format!("{k}: {v}");
        parse_header(&line).map_err(|_| bad())?;
        out.push(line);
    }
    Ok(out)
}

/// `%XX` escapes decoded (UTF-8); `None` for a broken escape or bytes that are not UTF-8.
fn percent_decode(v: &str) -> Option<String> {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
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
    fn opentelemetrys_header_variables_are_read_and_a_header_flag_wins() {
        fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
            let vars: Vec<(String, String)> = vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            move |k: &str| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
        }
        let got = env_headers(
            env(&[(
                "OTEL_EXPORTER_OTLP_HEADERS",
                "api-key=a%20b%2Cc, x-team = t1 ,",
            )]),
            &[],
        )
        .unwrap();
        assert_eq!(got, ["api-key: a b,c", "x-team: t1"]);
        // The traces' own variable first; a name --header gives is left to it.
        let got = env_headers(
            env(&[
                ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "a=1,b=2"),
                ("OTEL_EXPORTER_OTLP_HEADERS", "c=3"),
            ]),
            &["B: flag".into()],
        )
        .unwrap();
        assert_eq!(got, ["a: 1"]);
        assert!(env_headers(env(&[]), &[]).unwrap().is_empty());
        for bad in ["novalue", "k=%zz", "k=%0a", "bad key=1"] {
            let e = env_headers(env(&[("OTEL_EXPORTER_OTLP_HEADERS", bad)]), &[])
                .unwrap_err()
                .to_string();
            assert!(e.contains("OTEL_EXPORTER_OTLP_HEADERS"), "{bad}: {e}");
        }
    }

    #[test]
    fn an_https_url_defaults_to_port_443() {
        let e = Endpoint::parse("https://api.example.com", &[]).unwrap();
        assert!(e.tls);
        assert_eq!((e.port, e.path.as_str()), (443, "/v1/traces"));
        assert_eq!(e.target(), "https://api.example.com:443/v1/traces");
    }

    #[test]
    fn a_header_value_is_quoted_for_curls_config_and_the_file_is_private_and_removed() {
        assert_eq!(curl_quote(r#"a"b\c"#), r#"a\"b\\c"#);
        let f = PrivateFile::write("x").unwrap();
        let path = f.0.clone();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        drop(f);
        assert!(!path.exists());
    }

    #[test]
    fn bad_urls_and_headers_are_refused_with_the_reason() {
        assert!(Endpoint::parse("ftp://h", &[]).is_err());
        assert!(Endpoint::parse("https://h/a\"b", &[]).is_err());
        assert!(Endpoint::parse("localhost:4318", &[]).is_err());
        assert!(Endpoint::parse("http://h:99999", &[]).is_err());
        let h = Endpoint::parse("http://h:1", &["Authorization: Bearer x".into()]).unwrap();
        assert_eq!(h.headers, vec![("Authorization".into(), "Bearer x".into())]);
        assert!(Endpoint::parse("http://h:1", &["no colon".into()]).is_err());
        assert!(Endpoint::parse("http://h:1", &["X: a\r\nY: b".into()]).is_err());
        assert!(Endpoint::parse("http://h:1", &["Content-Length: 1".into()]).is_err());
    }
}
