//! `orbit serve` shows the queue: a section of the overview with each task's status,
//! attempts, spend and a link to its current loop's page, under the server's safety headers.

use super::cdp::Browser;
use super::{get, serve};
use crate::queue::night::a_night;
use crate::support::*;

#[test]
fn the_overview_shows_the_queue_with_a_link_to_each_tasks_loop() {
    let q = a_night();
    let s = serve(&q.repo, &[]);
    let (code, head, body) = get(&s, &format!("/?token={}", s.token), "");
    assert_eq!(code, 200, "{body}");
    assert!(
        head.contains("Content-Security-Policy: default-src 'none'"),
        "{head}"
    );
    assert!(body.contains("<h2>Queue main"), "{body}");
    assert!(body.contains("spent $0.5"), "{body}");
    assert!(
        body.contains("<tr data-task=\"ok\" data-status=\"done\">"),
        "{body}"
    );
    assert!(
        body.contains("<tr data-task=\"bad\" data-status=\"failed\">"),
        "{body}"
    );
    assert!(
        body.contains("<tr data-task=\"dep\" data-status=\"blocked\">"),
        "{body}"
    );
    assert!(body.contains("<td>1/1</td>"), "bad's attempts: {body}");
    assert!(body.contains("<td>bad failed</td>"), "{body}");
    // ok's loop is linked to its page, which is that loop's.
    let at = body.find(">.orbit/ok-a1</a>").expect("a link to ok's loop");
    let href = &body[body[..at].rfind("href=\"").unwrap() + 6..at - 1];
    assert!(href.starts_with("/loop/"), "{href}");
    let (code, _, page) = get(&s, &format!("{href}?token={}", s.token), "");
    assert_eq!(code, 200, "{page}");
    assert!(page.contains("ok-a1"), "{page}");
}

/// The queue's section follows the queue live, as the loops' rows do: a task added and a
/// task edited by hand appear on the page as it was loaded, without a reload.
#[test]
fn the_overviews_queue_section_follows_the_queue_live_in_chromium() {
    if !chromium_available() {
        return;
    }
    let q = a_night();
    let served = serve(&q.repo, &[]);
    let mut b = Browser::open(&served.url("/"));
    b.wait_until(
        "the queue's three tasks",
        "document.querySelectorAll('table.queue tr[data-task]').length === 3",
    );
    assert_eq!(
        b.eval("document.querySelector('table.queue tr[data-task=\"bad\"]').dataset.status"),
        "failed"
    );
    b.eval("window.__orbitSamePage = 'yes'");
    // A task added, and the failed one set ready again by hand (as docs/queue.md says).
    q.add("late", "Write late.txt", "test -f late.txt", &[]);
    let bad = q
        .task("bad")
        .replace("**Status:** failed", "**Status:** ready");
    std::fs::write(q.repo.join(".orbit/queue/bad.md"), bad).unwrap();
    b.wait_until(
        "the new task and the edited one, on the page as it was loaded",
        "document.querySelector('table.queue tr[data-task=\"late\"][data-status=\"ready\"]') !== null && document.querySelector('table.queue tr[data-task=\"bad\"]').dataset.status === 'ready' && window.__orbitSamePage === 'yes'",
    );
}
