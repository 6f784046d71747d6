//! The requests: who may ask (the `Host`, the token, for a POST the `Origin`), what they
//! may ask for (a closed set of routes, loops by number), and the answer to each, with the
//! headers every answer carries (`headers`).

use std::io::Cursor;
use std::net::IpAddr;

use tiny_http::{Header, Method, Request, Response, StatusCode};

use super::headers::safety_headers;
use super::{App, frame, live, overview, pages};

/// The page's script and style sheet, compiled in.
const APP_JS: &str = include_str!("app.js");
const STYLE: &str = include_str!("style.css");

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Overview,
    OverviewEvents,
    Script,
    Style,
    Loop(usize),
    LoopEvents(usize),
    Live(usize),
    Iteration(usize, u64),
    Candidate(usize, u64, u64),
    Stop(usize),
    Resume(usize),
}

/// A number in a path: ASCII digits only, at most 9 of them.
fn number(seg: &str) -> Option<u64> {
    (!seg.is_empty() && seg.len() <= 9 && seg.bytes().all(|b| b.is_ascii_digit()))
        .then(|| seg.parse().ok())
        .flatten()
}

/// The route of a path (the part before `?`), with `n` loops; `None` for anything else
/// (`..`, encoded or not, an absolute URL, a loop that is not there): 404.
pub fn route(path: &str, n: usize) -> Option<Route> {
    let rest = path.strip_prefix('/')?;
    let segs: Vec<&str> = if rest.is_empty() {
        Vec::new()
    } else {
        rest.split('/').collect()
    };
    let lp = |s: &str| number(s).map(|i| i as usize).filter(|i| *i < n);
    Some(match segs.as_slice() {
        [] => Route::Overview,
        ["events"] => Route::OverviewEvents,
        ["static", "app.js"] => Route::Script,
        ["static", "style.css"] => Route::Style,
        ["loop", l] => Route::Loop(lp(l)?),
        ["loop", l, "events"] => Route::LoopEvents(lp(l)?),
        ["loop", l, "live"] => Route::Live(lp(l)?),
        ["loop", l, "stop"] => Route::Stop(lp(l)?),
        ["loop", l, "resume"] => Route::Resume(lp(l)?),
        ["loop", l, "iteration", i] => Route::Iteration(lp(l)?, number(i)?),
        ["loop", l, "iteration", i, "candidate", k] => {
            Route::Candidate(lp(l)?, number(i)?, number(k)?)
        }
        _ => return None,
    })
}

/// Whether a `Host` header names this server: `localhost` or an IP address (never another
/// name, so a DNS name rebound to this machine is refused), with the server's port; a
/// loopback address when the server listens on one.
pub fn host_allowed(host: &str, port: u16, bound: IpAddr) -> bool {
    let Some((name, p)) = host.rsplit_once(':') else {
        return false;
    };
    if p != port.to_string() {
        return false;
    }
    let ip = if name == "localhost" {
        return bound.is_loopback() || bound.is_unspecified();
    } else {
        match name
            .strip_prefix('[')
            .and_then(|n| n.strip_suffix(']'))
            .unwrap_or(name)
            .parse::<IpAddr>()
        {
            Ok(ip) => ip,
            Err(_) => return false,
        }
    };
    if bound.is_unspecified() {
        true
    } else if bound.is_loopback() {
        ip.is_loopback()
    } else {
        ip == bound
    }
}

/// Compares two strings in time that depends on their lengths only.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// The value of header `name` (case-insensitive).
fn header<'a>(rq: &'a Request, name: &str) -> Option<&'a str> {
    rq.headers()
        .iter()
        .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str())
}

/// The token a request carries: `?token=` in its URL, or the server's cookie; and whether
/// it came in the URL (then the answer sets the cookie).
fn token_of<'a>(rq: &'a Request, query: &'a str, cookie: &str) -> (Option<&'a str>, bool) {
    if let Some(t) = query.split('&').find_map(|kv| kv.strip_prefix("token=")) {
        return (Some(t), true);
    }
    let from_cookie = header(rq, "Cookie").and_then(|c| {
        c.split(';')
            .map(str::trim)
            .find_map(|kv| kv.strip_prefix(cookie)?.strip_prefix('='))
    });
    (from_cookie, false)
}

fn hdr(name: &str, value: &str) -> Header {
    Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("a header the server writes")
}

/// An answer with a body of `content_type`.
pub fn answer(code: u16, content_type: &str, body: String) -> Response<Cursor<Vec<u8>>> {
    let mut r = Response::from_data(body.into_bytes()).with_status_code(StatusCode(code));
    r.add_header(hdr("Content-Type", content_type));
    for (k, v) in safety_headers() {
        r.add_header(hdr(k, v));
    }
    r
}

fn html(code: u16, body: String) -> Response<Cursor<Vec<u8>>> {
    answer(code, "text/html; charset=utf-8", body)
}

/// A refusal page: what was wrong, and what to do.
fn refusal(code: u16, why: &str) -> Response<Cursor<Vec<u8>>> {
    html(code, frame::message_page(&format!("{code}"), why))
}

/// The answer when too many requests are being served.
pub fn busy() -> Response<Cursor<Vec<u8>>> {
    refusal(
        503,
        "the server is answering as many requests as it takes at once: try again in a moment",
    )
}

/// Answers one request.
pub fn handle(app: &App, rq: Request) {
    let url = rq.url().to_string();
    let (path, query) = url.split_once('?').unwrap_or((&url, ""));
    let host = header(&rq, "Host").unwrap_or("").to_string();
    if !host_allowed(&host, app.addr.port(), app.addr.ip()) {
        let _ = rq.respond(refusal(
            403,
            "this server answers only to its own address (the Host of the URL it printed)",
        ));
        return;
    }
    let cookie = app.cookie_name();
    let (token, in_url) = token_of(&rq, query, &cookie);
    if !token.is_some_and(|t| same(t, &app.token)) {
        let _ = rq.respond(refusal(
            403,
            "this page needs the server's token: open the URL orbit serve printed (it ends in ?token=...)",
        ));
        return;
    }
    let Some(route) = route(path, app.loops.len()) else {
        let _ = rq.respond(refusal(
            404,
            "no such page: the overview is at /, a loop's page at /loop/N",
        ));
        return;
    };
    let post = matches!(route, Route::Stop(_) | Route::Resume(_));
    let method_ok = match rq.method() {
        Method::Post => post,
        Method::Get | Method::Head => !post,
        _ => false,
    };
    if !method_ok {
        let mut r = refusal(
            405,
            if post {
                "stop and resume are buttons of the loop's page: they take a POST"
            } else {
                "this page is read with GET"
            },
        );
        r.add_header(hdr("Allow", if post { "POST" } else { "GET, HEAD" }));
        let _ = rq.respond(r);
        return;
    }
    if post && !same_origin(&rq, &host) {
        let _ = rq.respond(refusal(
            403,
            "a stop or resume must come from this server's own page (its Origin): press the button on the loop's page",
        ));
        return;
    }
    let set_cookie = in_url.then(|| {
        hdr(
            "Set-Cookie",
            &format!("{cookie}={}; Path=/; HttpOnly; SameSite=Strict", app.token),
        )
    });
    let mut r = match route {
        Route::OverviewEvents => return live::stream_rows(app, rq, None),
        Route::LoopEvents(n) => return live::stream_rows(app, rq, Some(n)),
        Route::Live(n) => return live::stream_live(app, rq, n),
        Route::Overview => html(200, overview::page(app)),
        Route::Script => answer(200, "text/javascript; charset=utf-8", APP_JS.to_string()),
        Route::Style => answer(
            200,
            "text/css; charset=utf-8",
            format!("{}\n{STYLE}", crate::report::STYLE),
        ),
        Route::Loop(n) => html(200, pages::loop_page(app, n)),
        Route::Iteration(n, i) => match pages::iteration_page(app, n, i) {
            Some(body) => html(200, body),
            None => refusal(404, "the loop has no such iteration"),
        },
        Route::Candidate(n, i, k) => match pages::candidate_page(app, n, i, k) {
            Some(body) => html(200, body),
            None => refusal(404, "the iteration has no such candidate"),
        },
        Route::Stop(n) | Route::Resume(n) => {
            pages::press(app, n, matches!(route, Route::Stop(_)));
            let mut r = html(303, frame::message_page("done", "see the loop's page"));
            r.add_header(hdr("Location", &format!("/loop/{n}")));
            r
        }
    };
    if let Some(c) = set_cookie {
        r.add_header(c);
    }
    let _ = rq.respond(r);
}

/// Whether a POST comes from this server's own page: its `Origin` is this server's (a
/// browser always sends one with a POST), and no `Sec-Fetch-Site` says otherwise.
fn same_origin(rq: &Request, host: &str) -> bool {
    let origin_ok = header(rq, "Origin").is_some_and(|o| o == format!("http://{host}"));
    let site_ok = header(rq, "Sec-Fetch-Site").is_none_or(|s| s == "same-origin");
    origin_ok && site_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_routes_are_served() {
        assert_eq!(route("/", 2), Some(Route::Overview));
        assert_eq!(route("/loop/1", 2), Some(Route::Loop(1)));
        assert_eq!(
            route("/loop/0/iteration/3/candidate/2", 2),
            Some(Route::Candidate(0, 3, 2))
        );
        for bad in [
            "/loop/2",
            "/loop/-1",
            "/loop/+1",
            "/loop/01x",
            "/../etc/passwd",
            "/%2e%2e/etc/passwd",
            "/loop/0/../../etc/passwd",
            "//etc/passwd",
            "/static/../loop/0",
            "/static/app.js/",
            "http://127.0.0.1/",
            "/loop/0/iteration/1/../../state.env",
            "/loop/0/iteration/9999999999",
            "",
        ] {
            assert_eq!(route(bad, 2), None, "{bad}");
        }
    }

    #[test]
    fn only_this_servers_own_host_is_answered() {
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        assert!(host_allowed("127.0.0.1:8080", 8080, lo));
        assert!(host_allowed("localhost:8080", 8080, lo));
        assert!(host_allowed("[::1]:8080", 8080, lo));
        assert!(!host_allowed("127.0.0.1:8081", 8080, lo));
        assert!(!host_allowed("evil.example:8080", 8080, lo));
        assert!(!host_allowed("10.0.0.1:8080", 8080, lo));
        assert!(!host_allowed("127.0.0.1", 8080, lo));
        let any: IpAddr = "0.0.0.0".parse().unwrap();
        assert!(host_allowed("192.0.2.7:8080", 8080, any));
        assert!(!host_allowed("rebound.example:8080", 8080, any));
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "ab"));
    }
}
