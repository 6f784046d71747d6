//! `orbit serve` shows the queue: a section of the overview with each task's status,
//! attempts, spend and a link to its current loop's page, under the server's safety headers.

use super::{get, serve};
use crate::queue::night::a_night;

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
