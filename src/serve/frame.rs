//! The frame of every page, the overview's and a loop's alike: its head (the server's own
//! style sheet and script) and its tail; and the page that says one thing (a refusal, a
//! missing page) in that frame.

use crate::report::esc;

/// A page's start: the style sheet and the script come from the server's own paths.
pub fn head(title: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><link rel=\"stylesheet\" href=\"/static/style.css\"><script src=\"/static/app.js\" defer></script></head><body>\n",
        esc(title)
    )
}

/// A page's end.
pub const TAIL: &str = "</body></html>\n";

/// A page that says one thing (a refusal, a missing page).
pub fn message_page(title: &str, message: &str) -> String {
    format!(
        "{}<h1>{}</h1><p>{}</p><p><a href=\"/\">overview</a></p>{TAIL}",
        head(&format!("orbit serve: {title}")),
        esc(title),
        esc(message)
    )
}
