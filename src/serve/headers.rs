//! The headers every answer carries, a page's or a live feed's: a strict
//! Content-Security-Policy, `nosniff`, no caching, no framing. Written down once, here, for
//! the answers of `http` and the event streams of `live` alike.

/// The policy of every page: nothing but what the server itself sends; its one script is
/// `/static/app.js`. Styles may be inline because the report's pictures colour their cells
/// with `style` attributes (every value the server's own, from a closed set of colours).
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The headers of every answer.
pub fn safety_headers() -> Vec<(&'static str, &'static str)> {
    vec![
        ("Content-Security-Policy", CSP),
        ("X-Content-Type-Options", "nosniff"),
        ("X-Frame-Options", "DENY"),
        // Not `no-referrer`: with it a browser sends `Origin: null` with a form's POST.
        ("Referrer-Policy", "same-origin"),
        ("Cache-Control", "no-store"),
        ("Cross-Origin-Resource-Policy", "same-origin"),
    ]
}
