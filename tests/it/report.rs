//! `orbit report` and `orbit report --html` on a real loop: the same facts in both, nothing
//! from the loop unescaped in the HTML, no network resource, and a page a browser draws.

use std::collections::BTreeSet;
use std::fs;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::{
    Repo, assert_code, assert_ok, chromium_available, command, count_check, run_bounded, text,
};

const HOSTILE_SUMMARY: &str = "<script>alert(\"pwned\")</script> it's \"done\" & <b>bold</b>";

/// A loop of three iterations: verify fails in 1; in 2 the agent claims DONE too early (the
/// gate rejects it) and reports no cost; in 3 every check passes and the loop ends DONE.
/// The agent's last line of output is hostile markup; so is, afterwards, the last record's
/// summary. Returns the repository, the loop directory and the counting check's name.
fn finished_loop() -> (Repo, PathBuf, String) {
    let repo = Repo::new();
    let agent = repo.agent(
        "reporter",
        r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) echo 0.05 > "$ORBIT_COST_FILE"; exit 0;; esac
echo "step $ORBIT_ITERATION" >> work.txt
if [ "$(wc -l < work.txt)" -ge 2 ]; then echo "every check holds" > "$ORBIT_AGENT_DIR/done.md"; fi
if [ "$ORBIT_ITERATION" != 2 ]; then echo 0.25 > "$ORBIT_COST_FILE"; fi
echo '<script>alert("agent")</script> & '"'"'quoted'"'"' "words"'"#,
    );
    let check = count_check(3);
    let dir = repo.init_loop(
        &agent,
        &[&check, "true"],
        &["--max-iterations", "6", "--usd-cap", "5"],
    );
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "the loop ends DONE");
    // The last record's summary, made hostile through the one result.env reader.
    let path = dir.join("iterations/000003/result.env");
    let mut r = orbit::result_env::parse(&fs::read(&path).unwrap()).unwrap();
    assert_eq!(r.get("VERDICT"), "DONE");
    r.set("SUMMARY", HOSTILE_SUMMARY);
    fs::write(&path, r.print()).unwrap();
    // As if the runner had written that summary: the journal names the record.
    crate::support::announce_result(&dir, 3);
    let name = orbit::goal::check_names(&[check])[0].clone();
    (repo, dir, name)
}

fn report(repo: &Repo, args: &[&str]) -> String {
    let mut all = vec!["report", ".orbit/test-goal"];
    all.extend_from_slice(args);
    let out = repo.orbit(&all);
    assert_ok(&out, "orbit report");
    String::from_utf8(out.stdout).unwrap()
}

fn row(report: &str, n: u64) -> &str {
    report
        .lines()
        .find(|l| l.starts_with(&format!("| {n} | ")))
        .unwrap_or_else(|| panic!("no row {n}:\n{report}"))
}

#[test]
fn the_text_report_tells_each_iteration_the_claims_the_spend_and_the_next_step() {
    let (repo, _dir, check) = finished_loop();
    let t = report(&repo, &[]);
    assert!(t.contains("- verdict: DONE\n"), "{t}");
    // A custom agent's output counts no tokens: the report says none, not zero.
    assert!(!t.contains("- tokens:"), "{t}");
    assert!(t.contains("- status: DONE (stop reason: none)"), "{t}");
    assert!(t.contains("- iterations: 3 of at most 6"), "{t}");
    assert!(
        t.contains("- time: ") && t.contains(" in 3 iteration(s) (the agent "),
        "{t}"
    );
    assert!(t.contains(", from 20") && t.contains("Z to 20"), "{t}");
    // 0.25 + unknown + 0.25 and the confirmation run's 0.05: the unknown is said, not $0.
    assert!(
        t.contains("- spend: $0.55 of a $5 cap reported; 1 agent run(s) reported no cost"),
        "{t}"
    );
    let r1 = row(&t, 1);
    assert!(
        r1.starts_with(&format!("| 1 | CONTINUE | fail: {check} | 1 |")),
        "{r1}"
    );
    assert!(r1.contains("| $0.25 (reported) | $0.25 |"), "{r1}");
    assert!(r1.contains("| ok |"), "{r1}");
    let r2 = row(&t, 2);
    assert!(r2.contains("| unknown | $0.25 |"), "{r2}");
    assert!(r2.contains("| rejected: verify failed |"), "{r2}");
    let r3 = row(&t, 3);
    assert!(r3.starts_with("| 3 | DONE | pass | 1 |"), "{r3}");
    assert!(r3.contains("| $0.3 (reported) | $0.55 |"), "{r3}");
    assert!(r3.contains("| accepted: DONE |"), "{r3}");
    // Start time (UTC), wall time, agent time, attempts.
    assert!(r3.contains("Z | ") && r3.contains("s | 1 | ok |"), "{r3}");
    assert!(
        t.contains("## DONE claims\n\n- iteration 2: rejected: verify failed\n- iteration 3: accepted: DONE\n"),
        "{t}"
    );
    assert!(
        t.contains(&format!(
            "## Why it stopped\n\nDONE (state DONE, stop reason none): {HOSTILE_SUMMARY}\n"
        )),
        "{t}"
    );
    assert!(
        t.contains("next: `orbit merge .orbit/test-goal`\n(verified DONE: orbit merge checks its envelope, then merges orbit/test-goal into main (git log --stat main..orbit/test-goal shows its commits))"),
        "{t}"
    );
    assert!(
        t.contains("- envelope sha256:") && t.contains(" (verified)\n"),
        "{t}"
    );
    // Where the work is, and how a DONE loop's branch is taken: merged from the user's
    // checkout, or pushed for a pull request.
    assert!(
        t.contains(&format!(
            "- branch: orbit/test-goal (from main)\n- workspace: {}\n",
            repo.ws().display()
        )),
        "{t}"
    );
    assert!(
        t.contains("merge it into your checkout of main: `git merge orbit/test-goal`"),
        "{t}"
    );
    assert!(
        t.contains("or open a pull request from it: `git push origin orbit/test-goal`"),
        "{t}"
    );
    // The merge takes the loop's work into the user's checkout.
    repo.git(&["merge", "-q", "--no-edit", "orbit/test-goal"]);
    assert_eq!(repo.read("work.txt").lines().count(), 3);
}

/// The `title` texts of the check grid's cells.
fn cells(html: &str) -> BTreeSet<String> {
    html.split("<rect class=\"cell\"")
        .skip(1)
        .filter_map(|s| {
            let t = s.split("<title>").nth(1)?;
            Some(t.split("</title>").next()?.to_string())
        })
        .collect()
}

#[test]
fn the_html_report_is_one_escaped_page_with_the_same_facts() {
    let (repo, _dir, check) = finished_loop();
    let h = report(&repo, &["--html"]);
    assert!(h.starts_with("<!DOCTYPE html>"), "{h}");
    // Self-contained: nothing it would fetch.
    for bad in [
        "http://", "https://", "<link", "<img", "<script", "src=", "url(", "@import", "//cdn",
    ] {
        assert!(
            !h.to_lowercase().contains(bad),
            "the page holds {bad:?}:\n{h}"
        );
    }
    // The hostile texts, escaped everywhere they appear.
    assert!(
        !h.contains("alert(\"pwned\")") && !h.contains("<b>bold"),
        "{h}"
    );
    assert!(
        h.contains(
            "&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt; it&#39;s &quot;done&quot; &amp; &lt;b&gt;bold&lt;/b&gt;"
        ),
        "{h}"
    );
    assert!(!h.contains("alert(\"agent\")"), "{h}");
    assert!(
        h.contains("&lt;script&gt;alert(&quot;agent&quot;)&lt;/script&gt; &amp; &#39;quoted&#39;"),
        "{h}"
    );
    // The state, the stop and the next command.
    assert!(h.contains(">DONE</span></h1>"), "{h}");
    assert!(
        h.contains("<code class=\"next\">orbit merge .orbit/test-goal</code>"),
        "{h}"
    );
    assert!(
        h.contains(&format!(
            "<dt>workspace</dt><dd>{}</dd>",
            repo.ws().display()
        )),
        "{h}"
    );
    assert!(
        h.contains("<code class=\"work\">git merge orbit/test-goal</code>")
            && h.contains("<code class=\"work\">git push origin orbit/test-goal</code>"),
        "{h}"
    );
    // The check grid: the counting check fails twice then passes; `true` always passes.
    // No holdout check: no legend for one.
    assert!(!h.contains("holdout, not run"), "{h}");
    let got = cells(&h);
    let want: BTreeSet<String> = [
        format!("{check}, iteration 1: fail"),
        format!("{check}, iteration 2: fail"),
        format!("{check}, iteration 3: pass"),
        "true, iteration 1: pass".into(),
        "true, iteration 2: pass".into(),
        "true, iteration 3: pass".into(),
    ]
    .into_iter()
    .collect();
    assert_eq!(got, want);
    // The timeline: one bar per iteration, coloured by outcome.
    assert_eq!(h.matches("<rect class=\"bar\"").count(), 3, "{h}");
    assert!(h.contains("iteration 3: DONE in "), "{h}");
    // The spend curve against the cap, with the unknown run marked.
    assert!(
        h.contains("class=\"cap\"") && h.contains(">cap $5</text>"),
        "{h}"
    );
    assert!(
        h.contains("after iteration 2: $0.25 reported, plus a run of unknown cost"),
        "{h}"
    );
    assert!(h.contains("after iteration 3: $0.55</title>"), "{h}");
    // The DONE gate's decisions and the changed files.
    assert!(h.contains(">rejected: verify failed</td>"), "{h}");
    assert!(h.contains(">accepted: DONE</td>"), "{h}");
    assert_eq!(h.matches("<rect class=\"col\"").count(), 3, "{h}");
    assert!(h.contains("iteration 2: 1 file(s) changed"), "{h}");

    // --output writes the same page.
    let file = repo.bin.path().join("report.html");
    let out = repo.orbit(&[
        "report",
        ".orbit/test-goal",
        "--html",
        "--output",
        file.to_str().unwrap(),
    ]);
    assert_ok(&out, "report --html --output");
    assert_eq!(fs::read_to_string(&file).unwrap(), h);
}

/// Pixels of a PNG as RGB.
fn pixels(path: &Path) -> Vec<[u8; 3]> {
    let mut decoder = png::Decoder::new(BufReader::new(fs::File::open(path).unwrap()));
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let step = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        png::ColorType::Grayscale => 1,
        png::ColorType::GrayscaleAlpha => 2,
        other => panic!("unexpected colour type {other:?}"),
    };
    buf[..info.buffer_size()]
        .chunks(step)
        .map(|p| {
            if step < 3 {
                [p[0], p[0], p[0]]
            } else {
                [p[0], p[1], p[2]]
            }
        })
        .collect()
}

fn rgb(hex: &str) -> [u8; 3] {
    let v = u32::from_str_radix(hex.trim_start_matches('#'), 16).unwrap();
    [(v >> 16) as u8, (v >> 8) as u8, v as u8]
}

fn has_colour(px: &[[u8; 3]], want: [u8; 3]) -> bool {
    px.iter()
        .any(|p| p.iter().zip(want).all(|(a, b)| a.abs_diff(b) <= 8))
}

/// Screenshots `page` with headless chromium into `png`.
fn screenshot(page: &Path, png: &Path, profile: &Path) {
    let mut cmd = command("chromium");
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .arg(format!("--screenshot={}", png.display()))
    .arg("--window-size=1200,1600")
    .arg(format!("file://{}", page.display()));
    let out = run_bounded(cmd, Duration::from_secs(120));
    assert!(
        png.is_file(),
        "chromium made no screenshot of {}:\n{}",
        page.display(),
        text(&out)
    );
}

#[test]
fn headless_chromium_draws_the_html_report() {
    if !chromium_available() {
        return;
    }
    let (repo, _dir, _check) = finished_loop();
    let work = tempfile::tempdir().unwrap();
    let page = work.path().join("report.html");
    assert_ok(
        &repo.orbit(&[
            "report",
            ".orbit/test-goal",
            "--html",
            "--output",
            page.to_str().unwrap(),
        ]),
        "report --html",
    );
    let shot = work.path().join("report.png");
    screenshot(&page, &shot, &work.path().join("profile"));
    let px = pixels(&shot);
    assert_eq!(px.len(), 1200 * 1600, "the window's size");
    let distinct: BTreeSet<[u8; 3]> = px.iter().copied().collect();
    assert!(
        distinct.len() > 50,
        "a blank page: {} colours",
        distinct.len()
    );
    // The pictures were drawn: the passing and failing cells, the timeline's DONE bar.
    for (what, colour) in [
        ("pass", orbit::report::PASS),
        ("fail", orbit::report::FAIL),
        ("verify failed", orbit::report::WARN),
    ] {
        assert!(
            has_colour(&px, rgb(colour)),
            "no {what} colour {colour} in the screenshot"
        );
    }
    // And a blank page looks otherwise: one colour.
    let blank = work.path().join("blank.html");
    fs::write(&blank, "<!DOCTYPE html><html><body></body></html>").unwrap();
    let blank_shot = work.path().join("blank.png");
    screenshot(&blank, &blank_shot, &work.path().join("profile-blank"));
    let blank_colours: BTreeSet<[u8; 3]> = pixels(&blank_shot).into_iter().collect();
    assert_eq!(blank_colours.len(), 1, "a blank page has one colour");
}

#[test]
fn the_report_of_a_loop_its_engine_refused_names_the_clis_words_and_the_fix() {
    // A stand-in for the claude CLI (logged in for its status probe) whose run ends as the
    // real one does without a valid key: one result line of stream-json, exit 1.
    let repo = Repo::new();
    let bin = tempfile::tempdir().unwrap();
    let claude = bin.path().join("claude");
    fs::write(
        &claude,
        r#"#!/usr/bin/env bash
case "${1:-}" in
  --version) echo '9.9.9 (stand-in)'; exit 0 ;;
  auth) echo '{"loggedIn": true}'; exit 0 ;;
esac
cat >/dev/null
echo '{"type":"system","subtype":"init","session_id":"x"}'
echo '{"type":"result","subtype":"success","is_error":true,"duration_ms":429,"api_error_status":401,"result":"Invalid API key · Fix external API key"}'
exit 1
"#,
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&claude, fs::Permissions::from_mode(0o755)).unwrap();
    let out = repo.orbit(&[
        "init",
        "test goal",
        "--engine",
        "claude",
        "--verify",
        "false",
    ]);
    assert_ok(&out, "orbit init");
    let path = format!("{}:{}", bin.path().display(), repo.path_env());
    let out = repo.run_loop(
        &repo.join(".orbit/test-goal"),
        &["--once"],
        &[("PATH", &path), ("ANTHROPIC_API_KEY", "wrong")],
    );
    assert_code(&out, 14, "BLOCKED at once");
    let md = report(&repo, &[]);
    let first = row(&md, 1);
    assert!(
        first.contains("Invalid API key · Fix external API key"),
        "the CLI's own words, not its JSON: {first}"
    );
    assert!(!first.contains("{\"type\""), "no raw JSON: {first}");
    assert!(md.contains("ANTHROPIC_API_KEY"), "the fix: {md}");
    let html = report(&repo, &["--html"]);
    assert!(html.contains("Invalid API key"), "{html}");
    assert!(
        !html.contains("api_error_status"),
        "no raw JSON in the page"
    );
}

/// A loop with a check of every role, whose add.sh adds nothing yet: in 1 the agent makes
/// add(2, 2) right (the acceptance check passes, the reproduction still fails); in 2 it
/// fits add.sh to the visible checks and claims DONE (the holdout check rejects the
/// claim); in 3 it adds for real, claims DONE, and the loop ends DONE.
fn loop_of_every_role() -> (Repo, PathBuf) {
    let repo = Repo::new();
    repo.write("add.sh", "echo 0\n");
    repo.git(&["add", "add.sh"]);
    repo.git(&["commit", "-qm", "add.sh"]);
    let agent = repo.agent(
        "every-role",
        r#"cat >/dev/null
[ "$ORBIT_PHASE" = work ] || exit 0
case $ORBIT_ITERATION in
  1) echo 'echo 4' > add.sh ;;
  2) printf '%s\n' 'case "$1 $2" in "2 2") echo 4 ;; "1 1") echo 2 ;; *) echo 0 ;; esac' > add.sh
     echo "add.sh adds" > "$ORBIT_AGENT_DIR/done.md" ;;
  *) printf '%s\n' 'echo $(($1 + $2))' > add.sh
     echo "add.sh adds" > "$ORBIT_AGENT_DIR/done.md" ;;
esac"#,
    );
    let dir = repo.init_loop(
        &agent,
        &["test \"$(bash add.sh 2 2)\" = 4"],
        &[
            "--reproduction",
            "test \"$(bash add.sh 1 1)\" = 2",
            "--regression",
            "test -f add.sh",
            "--holdout",
            "test \"$(bash add.sh 3 5)\" = 8",
            "--max-iterations",
            "5",
        ],
    );
    assert_code(&repo.run_loop(&dir, &[], &[]), 0, "the loop ends DONE");
    (repo, dir)
}

#[test]
fn the_check_grid_shows_every_check_of_the_loop_in_every_iteration() {
    let (repo, dir) = loop_of_every_role();
    let cfg = orbit::config::LoopConfig::load(&dir.join("loop.toml")).unwrap();
    let names = cfg.check_names();
    assert_eq!(names.len(), 3, "{names:?}");
    let (acceptance, reproduction, regression) = (&names[0], &names[1], &names[2]);
    let h = report(&repo, &["--html"]);
    let got = cells(&h);
    let mut want = BTreeSet::new();
    for i in 1..=3 {
        want.insert(format!("{acceptance}, iteration {i}: pass"));
        want.insert(format!("{regression}, iteration {i}: pass"));
    }
    // The reproduction fails until the agent adds 1 and 1.
    want.insert(format!("{reproduction}, iteration 1: fail"));
    want.insert(format!("{reproduction}, iteration 2: pass"));
    want.insert(format!("{reproduction}, iteration 3: pass"));
    // The holdout check runs only on a DONE claim: it rejects the fitted add.sh of 2 and
    // passes the real one of 3.
    want.insert("holdout-1, iteration 1: holdout, not run".to_string());
    want.insert("holdout-1, iteration 2: fail".to_string());
    want.insert("holdout-1, iteration 3: pass".to_string());
    assert_eq!(got, want, "{h}");
    // Each row says its check's role; the legend names every kind of cell.
    for label in [
        format!(">{reproduction} [reproduction]</text>"),
        format!(">{regression} [regression]</text>"),
        ">holdout-1 [holdout]</text>".to_string(),
    ] {
        assert!(h.contains(&label), "no row label {label}: {h}");
    }
    for word in ["pass", "fail", "skipped", "holdout, not run"] {
        assert!(
            h.contains(&format!("</i>{word}</span>")),
            "no legend for {word}: {h}"
        );
    }
}

/// The spend picture of the HTML report of a two-iteration loop run by an agent of `body`,
/// and its cost.ledger.
fn spend_picture(body: &str) -> (String, String) {
    let repo = Repo::new();
    let agent = repo.agent("spender", body);
    let dir = repo.init_loop(&agent, &["test -f never-there"], &["--max-iterations", "2"]);
    assert_code(
        &repo.run_loop(&dir, &[], &[]),
        16,
        "the iterations are used up",
    );
    let ledger = fs::read_to_string(dir.join("cost.ledger")).unwrap();
    let h = report(&repo, &["--html"]);
    let svg = h
        .split("<svg class=\"spend\"")
        .nth(1)
        .and_then(|s| s.split("</svg>").next())
        .unwrap_or_else(|| panic!("no spend picture: {h}"))
        .to_string();
    (svg, ledger)
}

#[test]
fn the_spend_picture_of_an_engine_that_reports_no_cost_says_so_without_an_empty_axis() {
    // The agent never writes a cost: every run's cost is unknown.
    let (svg, ledger) = spend_picture("cat >/dev/null; echo x >> work.txt");
    assert!(
        ledger.lines().count() >= 2 && ledger.lines().all(|l| l.contains("unknown")),
        "{ledger}"
    );
    assert!(svg.contains("no cost reported"), "{svg}");
    assert!(svg.contains(">no cap</text>"), "{svg}");
    assert!(!svg.contains("$0.000001"), "an axis of nothing: {svg}");
    assert!(
        !svg.contains("class=\"curve\""),
        "a curve of nothing: {svg}"
    );
    // An engine that reports $0 has a curve, flat at $0, and no scale above it.
    let (svg, ledger) =
        spend_picture("cat >/dev/null; echo x >> work.txt; echo 0 > \"$ORBIT_COST_FILE\"");
    assert!(
        ledger.lines().count() >= 2 && ledger.lines().all(|l| l.contains("reported")),
        "{ledger}"
    );
    assert!(svg.contains("class=\"curve\""), "{svg}");
    assert!(svg.contains(">$0</text>"), "{svg}");
    assert!(!svg.contains("$0.000001"), "a scale of nothing: {svg}");
    assert!(!svg.contains("no cost reported"), "{svg}");
}

/// The agent rewrites the project's orbit.toml (the defaults of the next `orbit init`: no
/// sandbox, a command as its notification) along with the work, and the loop ends DONE:
/// the report puts the review of that change before the merge, in markdown, HTML and JSON;
/// a loop whose branch leaves orbit.toml as it was has no such step.
#[test]
fn a_branch_that_changes_orbit_toml_is_reviewed_before_the_merge_in_the_report() {
    for (case, change) in [
        (
            "changed",
            "printf 'sandbox = \"none\"\\nnotify = \"cmd:touch /tmp/x\"\\n' >> orbit.toml\n",
        ),
        ("unchanged", ""),
    ] {
        let repo = Repo::new();
        repo.write("orbit.toml", "# the project's defaults\n");
        repo.git(&["add", "orbit.toml"]);
        repo.git(&["commit", "-q", "-m", "orbit.toml"]);
        let agent = repo.agent(
            "defaults",
            &format!(
                "cat >/dev/null\ncase $ORBIT_PHASE in confirm|wrapup) exit 0;; esac\n{change}echo x > work.txt\necho done > \"$ORBIT_AGENT_DIR/done.md\"\n"
            ),
        );
        let dir = repo.init_loop(&agent, &["test -f work.txt"], &[]);
        let out = repo.run_loop(&dir, &[], &[]);
        assert_code(&out, 0, &format!("{case}: DONE"));
        let branch_toml = repo.git(&["show", "orbit/test-goal:orbit.toml"]);
        assert_eq!(
            branch_toml.contains("sandbox = \"none\""),
            case == "changed",
            "{case}: the attack landed on the branch as the case says: {branch_toml}"
        );
        let md = report(&repo, &[]);
        let html = report(&repo, &["--html"]);
        let json = report(&repo, &["--json"]);
        let step = "first review what the branch changes in orbit.toml";
        if case == "changed" {
            let at = md.find(step).unwrap_or_else(|| panic!("{md}"));
            assert!(at < md.find("git merge orbit/test-goal").unwrap(), "{md}");
            assert!(md.contains("-- orbit.toml`"), "{md}");
            assert!(html.contains(step), "{html}");
            assert!(json.contains(step), "{json}");
        } else {
            assert!(!md.contains(step), "{md}");
            assert!(!json.contains(step), "{json}");
        }
    }
}

/// The tokens the engine counted, over every run of the loop, in the text and HTML reports
/// and in --json; a report of runs that counted none says nothing of tokens.
#[test]
fn the_report_sums_the_tokens_the_engine_counted() {
    let body = crate::engines::claude_usage_line("120", "64");
    let (_bin, l) = crate::engines::stand_in("claude", &body);
    assert_code(&l.run(&[]), 10, "one tick");
    assert_code(&l.run(&[]), 10, "a second tick");
    let t = report(&l.repo, &[]);
    assert!(
        t.contains("- tokens: 2000 in, 128 out over 2 agent run(s), as the engine counted them\n"),
        "{t}"
    );
    let html = report(&l.repo, &["--html"]);
    assert!(
        html.contains("2000 in, 128 out over 2 agent run(s)"),
        "{html}"
    );
    let v: serde_json::Value = serde_json::from_str(&report(&l.repo, &["--json"])).unwrap();
    assert_eq!(
        (v["tokens_in"].as_u64(), v["tokens_out"].as_u64()),
        (Some(2000), Some(128))
    );
    let (_bin, none) = crate::engines::stand_in("copilot", "exit 0");
    let _ = none.run(&[]);
    let v: serde_json::Value = serde_json::from_str(&report(&none.repo, &["--json"])).unwrap();
    assert!(v.get("tokens_in").is_none(), "{v}");
}
